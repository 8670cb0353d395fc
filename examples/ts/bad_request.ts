// Sends a deliberately invalid request and prints each field violation.
// agentd reports every problem of a request at once: the call fails
// InvalidArgument, and its status details hold a google.rpc.BadRequest,
// whose schema Connect-ES does not ship; it is generated into
// gen/ts/google/rpc from third_party/googleapis.
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/bad_request.js [options] [address] [request.json]
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { readFileSync } from "node:fs";

import {
  AgentService,
  GenerateRequestSchema,
  StartGenerationSchema,
  type GenerateRequest,
} from "../../gen/ts/agentd/v1/agent_service_pb.js";
import { BadRequestSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { connect, notListening } from "./connect.js";

const { requestFile, transport, headers } = connect("examples/bad-request.json");
const start = fromJson(StartGenerationSchema, JSON.parse(readFileSync(requestFile, "utf8")) as JsonValue);

const client = createClient(AgentService, transport);

async function* requests(): AsyncIterable<GenerateRequest> {
  yield create(GenerateRequestSchema, { kind: { case: "start", value: start } });
}

let refused = false;
try {
  for await (const event of client.generate(requests(), { timeoutMs: 30_000, headers })) {
    console.log("unexpected event", event.event.case);
  }
} catch (err) {
  if (notListening(err)) throw err;
  const e = ConnectError.from(err);
  console.log(Code[e.code], e.rawMessage);
  const violations = e.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations);
  for (const v of violations) {
    console.log(`  ${v.field}: ${v.description}`);
  }
  refused = e.code === Code.InvalidArgument && violations.length > 1;
}
if (!refused) {
  console.error("typescript example: the bad request was not refused with its field violations");
  process.exit(1);
}
