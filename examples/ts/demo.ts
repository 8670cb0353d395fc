// Runs the demo generation against a running agentd and prints its events,
// with Connect-ES v2 speaking the gRPC protocol over HTTP/2.
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/demo.js [options] [address] [request.json]
//
// Its options (--token, --tls-ca, --tls-cert, --tls-key) are every
// example's: see examples/ts/connect.ts.
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

const { requestFile, transport, headers } = connect("examples/demo-start.json");
const start = fromJson(StartGenerationSchema, JSON.parse(readFileSync(requestFile, "utf8")) as JsonValue);

const client = createClient(AgentService, transport);

// The client half of the stream stays open until the generation ends, so
// agentd can wait for inline answers to approvals and function calls.
let finish: () => void = () => {};
const finished = new Promise<void>((resolve) => (finish = resolve));
async function* requests(): AsyncIterable<GenerateRequest> {
  yield create(GenerateRequestSchema, { kind: { case: "start", value: start } });
  await finished;
}

let final = "";
let completed = false;
try {
  for await (const event of client.generate(requests(), { timeoutMs: 30_000, headers })) {
    const e = event.event;
    switch (e.case) {
      case "started":
        console.log("started", e.value.generationId);
        break;
      case "textDelta":
        console.log("text_delta", JSON.stringify(e.value.text));
        break;
      case "toolCallStarted":
        console.log("tool_call_started", e.value.toolName, e.value.arguments);
        break;
      case "toolCallFinished":
        console.log("tool_call_finished", e.value.toolName, e.value.output);
        break;
      case "usage":
        console.log("usage", String(e.value.inputTokens), String(e.value.outputTokens));
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
  finish();
}
if (!final.includes("hello from agentd")) {
  console.error("typescript example: the generation did not complete with the demo answer");
  process.exit(1);
}
