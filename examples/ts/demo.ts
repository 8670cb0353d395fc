// Runs the demo generation against a running agentd and prints its events,
// with Connect-ES v2 speaking the gRPC protocol over HTTP/2, reattaching if
// its stream breaks (examples/ts/reconnect.ts).
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/demo.js [options] [address] [request.json]
//
// --detach starts the generation detached: agentd ends the stream after
// started, and the example attaches to follow it to its end. The other
// options (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
// see examples/ts/connect.ts.
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { readFileSync } from "node:fs";

import { AgentService, GenerateRequestSchema, StartGenerationSchema } from "../../gen/ts/agentd/v1/agent_service_pb.js";
import { connect } from "./connect.js";
import { defaultPolicy, generate, Text } from "./reconnect.js";

const { requestFile, transport, headers, switches } = connect("examples/demo-start.json", ["detach"]);
const start = fromJson(StartGenerationSchema, JSON.parse(readFileSync(requestFile, "utf8")) as JsonValue);
start.detach = switches.has("detach");

const client = createClient(AgentService, transport);
const first = create(GenerateRequestSchema, { kind: { case: "start", value: start } });
const policy = {
  ...defaultPolicy,
  onAttach: (id: string, after: bigint, cause?: Error) =>
    console.log(`attach ${id} after ${after} (${cause?.message ?? "the stream ended before the generation did"})`),
};

const text = new Text(); // what a UI would show of the model's text
let final = "";
// A minute: long enough for another replica to adopt the generation of
// one that died (after its lease, 15 s by default).
const call = { signal: AbortSignal.timeout(60_000), headers };
for await (const event of generate(client, first, call, policy)) {
  const withdrawn = text.apply(event);
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
    case "toolProgress":
      console.log(`tool_progress ${e.value.callId} ${e.value.progress}/${e.value.total} ${e.value.message}`);
      break;
    case "toolCallFinished":
      console.log("tool_call_finished", e.value.toolName, e.value.output);
      break;
    case "turnWithdrawn":
      console.log(`turn_withdrawn ${e.value.turn} (${e.value.reason}): discarding ${JSON.stringify(withdrawn)}, the turn is asked again`);
      break;
    case "usage":
      console.log(`usage ${e.value.inputTokens} ${e.value.outputTokens}${e.value.repeated ? " (repeated turn)" : ""}`);
      break;
    case "completed":
      final = (e.value.message?.parts ?? []).map((p) => (p.kind.case === "text" ? p.kind.value : "")).join("");
      console.log("completed", final);
      break;
  }
}
if (!final.includes("hello from agentd")) {
  console.error("typescript example: the generation did not complete with the demo answer");
  process.exit(1);
}
