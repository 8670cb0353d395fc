// Runs the demo generation against a running agentd and prints its events,
// with Connect-ES v2 speaking the gRPC protocol over HTTP/2.
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/demo.js [options] [address] [request.json]
//
// With --token (or AGENTD_TOKEN) it sends that API key ("authorization:
// Bearer"). With --tls-ca, --tls-cert or --tls-key (or AGENTD_TLS_CA,
// AGENTD_TLS_CERT, AGENTD_TLS_KEY) it connects over TLS: trusting the CA
// certificates in --tls-ca (none: the system's roots), and presenting
// --tls-cert and --tls-key as its client certificate to an agentd that
// requires one.
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import {
  AgentService,
  GenerateRequestSchema,
  StartGenerationSchema,
  type GenerateRequest,
} from "../../gen/ts/agentd/v1/agent_service_pb.js";

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    token: { type: "string", default: process.env.AGENTD_TOKEN },
    "tls-ca": { type: "string", default: process.env.AGENTD_TLS_CA },
    "tls-cert": { type: "string", default: process.env.AGENTD_TLS_CERT },
    "tls-key": { type: "string", default: process.env.AGENTD_TLS_KEY },
  },
});
const address = positionals[0] ?? "127.0.0.1:7070";
const requestFile = positionals[1] ?? "examples/demo-start.json";
const start = fromJson(StartGenerationSchema, JSON.parse(readFileSync(requestFile, "utf8")) as JsonValue);

// TLS when any TLS option is set (Node's HTTP/2 session options carry the
// CA, the client certificate and its key), plaintext otherwise.
const [ca, cert, key] = [opts["tls-ca"], opts["tls-cert"], opts["tls-key"]];
if (!cert !== !key) {
  console.error("typescript example: --tls-cert and --tls-key go together");
  process.exit(2);
}
const tls = Boolean(ca || cert);
const client = createClient(
  AgentService,
  createGrpcTransport({
    baseUrl: `${tls ? "https" : "http"}://${address}`,
    nodeOptions: tls
      ? {
          ca: ca ? readFileSync(ca) : undefined,
          cert: cert ? readFileSync(cert) : undefined,
          key: key ? readFileSync(key) : undefined,
        }
      : undefined,
  }),
);

// The client half of the stream stays open until the generation ends, so
// agentd can wait for inline answers to approvals and function calls.
let finish: () => void = () => {};
const finished = new Promise<void>((resolve) => (finish = resolve));
async function* requests(): AsyncIterable<GenerateRequest> {
  yield create(GenerateRequestSchema, { kind: { case: "start", value: start } });
  await finished;
}

let final = "";
try {
  const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
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
        break;
    }
  }
} finally {
  finish();
}
if (!final.includes("hello from agentd")) {
  console.error("typescript example: the generation did not complete with the demo answer");
  process.exit(1);
}
