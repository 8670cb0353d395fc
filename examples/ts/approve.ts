// Approves a tool call inline, on the open Generate stream, and prints the
// events. The agent in examples/approval-start.json may call the demo
// server's echo tool only with a person's approval: agentd sends an
// approvalRequest and waits on the stream; this client answers with an
// approvalDecision (always yes here) and the generation goes on. Its
// options (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
// see examples/ts/connect.ts.
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/approve.js [options] [address] [request.json]
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { readFileSync } from "node:fs";

import {
  AgentService,
  GenerateRequestSchema,
  StartGenerationSchema,
  type GenerateRequest,
} from "../../gen/ts/agentd/v1/agent_service_pb.js";
import { closedAfterEnd, connect } from "./connect.js";

const { requestFile, transport, headers } = connect("examples/approval-start.json");
const start = fromJson(StartGenerationSchema, JSON.parse(readFileSync(requestFile, "utf8")) as JsonValue);

// The client half of the stream: start, then whatever is queued, until the
// generation ends.
const queue: GenerateRequest[] = [];
let wake: () => void = () => {};
let ended = false;
function send(req: GenerateRequest) {
  queue.push(req);
  wake();
}
async function* requests(): AsyncIterable<GenerateRequest> {
  yield create(GenerateRequestSchema, { kind: { case: "start", value: start } });
  while (!ended) {
    while (queue.length > 0) yield queue.shift()!;
    await new Promise<void>((resolve) => (wake = resolve));
  }
}

const client = createClient(AgentService, transport);
let final = "";
let completed = false;
let approved = 0;
try {
  for await (const event of client.generate(requests(), { timeoutMs: 30_000, headers })) {
    const e = event.event;
    switch (e.case) {
      case "approvalRequest":
        console.log("approval_request", e.value.toolName, e.value.arguments, "-> approve");
        send(create(GenerateRequestSchema, {
          kind: { case: "approvalDecision", value: { requestId: e.value.id, approved: true, digest: e.value.digest } },
        }));
        approved++;
        break;
      case "toolCallFinished":
        console.log("tool_call_finished", e.value.toolName, e.value.output);
        break;
      case "paused":
        console.log("paused", e.value.generationId);
        break;
      case "completed":
        final = (e.value.message?.parts ?? []).map((p) => (p.kind.case === "text" ? p.kind.value : "")).join("");
        console.log("completed", final);
        completed = true;
        break;
    }
  }
} catch (err) {
  if (!completed || !closedAfterEnd(err)) throw err;
} finally {
  ended = true;
  wake();
}
if (approved !== 1 || !final.includes("approved by a person")) {
  console.error("typescript approval example: the approved call did not complete");
  process.exit(1);
}
