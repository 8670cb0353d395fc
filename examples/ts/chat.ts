// A chat on a thread that agentd remembers: each line of standard input is
// a user message, answered on one thread whose id the example keeps in a
// file, so that the next run continues the conversation, even against an
// agentd restarted since.
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/chat.js [options] [address]
//
// --state names the file (default chat-thread.txt): without it, the example
// creates a thread and writes its id there. Each generation sends only the
// new line: agentd adds the thread's items before it. At the end the
// example lists the thread's items. The agent is the "mock" provider, which
// answers "Mock response to: <the line>"; put yours in agent. The other
// options (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
// see examples/ts/connect.ts.
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

import { AgentSchema } from "../../gen/ts/agentd/v1/agent_pb.js";
import { AgentService, GenerateRequestSchema } from "../../gen/ts/agentd/v1/agent_service_pb.js";
import { Role } from "../../gen/ts/agentd/v1/message_pb.js";
import { connect } from "./connect.js";
import { generate } from "./reconnect.js";

const { transport, headers, options } = connect("", [], { state: "chat-thread.txt" });
const client = createClient(AgentService, transport);
// It has no tools, so nothing needs approving.
const agent = create(AgentSchema, { provider: "mock", instructions: "You are a friendly chat agent." });
// The application's id of the person chatting, kept in the thread's
// metadata (ListThreads finds a person's threads by it).
const endUser = "user-1";

// The thread kept in the state file, or a new one, written there.
let threadId: string;
if (existsSync(options.state)) {
  threadId = readFileSync(options.state, "utf8").trim();
  const { thread } = await client.getThread({ threadId }, { headers });
  console.log(`continuing ${threadId} (${thread?.itemCount} items)`);
} else {
  const { thread } = await client.createThread({ metadata: { end_user: endUser } }, { headers });
  threadId = thread?.threadId ?? "";
  console.log("created", threadId);
  writeFileSync(options.state, threadId + "\n");
}

// Each line runs a generation on the thread with the line as the user's
// message, its text printed as it streams. (A UI would also take back the
// text of a turnWithdrawn, as demo.ts does with Text.)
for await (const line of createInterface({ input: process.stdin })) {
  const first = create(GenerateRequestSchema, {
    kind: { case: "start", value: { agent, threadId, messages: [{ role: Role.USER, parts: [{ kind: { case: "text", value: line } }] }] } },
  });
  process.stdout.write("agent: ");
  for await (const event of generate(client, first, { signal: AbortSignal.timeout(60_000), headers })) {
    if (event.event.case === "textDelta") process.stdout.write(event.event.value.text);
    if (event.event.case === "completed") process.stdout.write("\n");
  }
}

// The thread's items, oldest first, page by page.
console.log("the thread holds:");
let pageToken = "";
do {
  const page = await client.listThreadItems({ threadId, pageToken }, { headers });
  for (const item of page.items) {
    const text = (item.message?.parts ?? []).map((p) => (p.kind.case === "text" ? p.kind.value : "")).join("");
    console.log(`  ${item.position} ${Role[item.message?.role ?? Role.UNSPECIFIED].toLowerCase()}: ${text}`);
  }
  pageToken = page.nextPageToken;
} while (pageToken);
