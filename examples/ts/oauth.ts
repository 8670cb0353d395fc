// Runs a generation whose MCP server requires OAuth, and has its user
// authorize agentd there. The agent in examples/oauth-start.json declares a
// url MCP server with an empty oauth block: agentd is the server's OAuth
// client (it discovers the authorization server, registers or uses its
// client ID metadata document, and keeps the tokens per end user). Replace
// its url with your server's. When agentd holds no token for the end user,
// it sends an authorizationRequest and waits on the stream; this client
// prints the URL, reads back the URL the browser was sent to after
// authorizing (its query has the code and state), and answers with an
// authorizationResponse. agentd exchanges the code and the generation goes
// on; a later generation for the same end user is not asked again. Its
// options (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
// see examples/ts/connect.ts.
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/oauth.js [options] [address] [request.json]
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

import {
  AgentService,
  GenerateRequestSchema,
  StartGenerationSchema,
  type GenerateRequest,
} from "../../gen/ts/agentd/v1/agent_service_pb.js";
import { closedAfterEnd, connect } from "./connect.js";

const { requestFile, transport, headers } = connect("examples/oauth-start.json");
const start = fromJson(StartGenerationSchema, JSON.parse(readFileSync(requestFile, "utf8")) as JsonValue);

// The client half of the stream: start, then whatever is queued, until the
// generation ends or there is no answer to give.
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

// The person's answers, a line each; undefined once the input has ended.
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
async function readLine(): Promise<string | undefined> {
  const next = await lines.next();
  return next.done ? undefined : next.value.trim();
}

const client = createClient(AgentService, transport);
let completed = false;
try {
  // A person authorizes: give them time.
  for await (const event of client.generate(requests(), { timeoutMs: 600_000, headers })) {
    const e = event.event;
    switch (e.case) {
      case "started":
        console.log("started", e.value.generationId, "tools:", e.value.tools.map((t) => t.name).join(", "));
        break;
      case "authorizationRequest": {
        const r = e.value;
        console.log(`authorization_request from ${r.serverName} (scopes ${r.scopes.join(" ")}): open this URL and authorize:`);
        console.log(`  ${r.url}`);
        process.stdout.write("then paste the URL your browser was sent to: ");
        const redirectUrl = await readLine();
        if (redirectUrl === undefined) {
          // No answer: half-close, and agentd ends (or pauses) the generation.
          ended = true;
          wake();
          break;
        }
        send(create(GenerateRequestSchema, {
          kind: { case: "authorizationResponse", value: { requestId: r.id, redirectUrl } },
        }));
        break;
      }
      case "toolCallFinished":
        console.log("tool_call_finished", e.value.toolName, e.value.output);
        break;
      case "completed":
        console.log("completed", (e.value.message?.parts ?? []).map((p) => (p.kind.case === "text" ? p.kind.value : "")).join(""));
        completed = true;
        break;
    }
  }
} catch (err) {
  if (!completed || !closedAfterEnd(err)) throw err;
} finally {
  ended = true;
  wake();
  input.close();
}
if (!completed) {
  console.error("typescript oauth example: the generation did not complete");
  process.exit(1);
}
