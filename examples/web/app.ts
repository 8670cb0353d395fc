// The browser example: a scripted generation whose tool call needs a
// person's approval, started, followed and decided from a web page, over
// Connect (connect-web: CreateGeneration, FollowGeneration,
// DecideRequests) or over plain HTTP/JSON with the events as Server-Sent
// Events. Everything a model or a tool says is shown as text, never as
// markup. Bundled by esbuild: see docs/clients.md.
import { create, fromJson, toJsonString, type JsonValue } from "@bufbuild/protobuf";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

import {
  AgentService,
  ApprovalDecisionSchema,
  GenerateResponseSchema,
  StartGenerationSchema,
  type ApprovalDecision,
  type ApprovalRequest,
  type GenerateResponse,
} from "../../gen/ts/agentd/v1/agent_service_pb.js";
import startRequest from "../approval-start.json";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

const params = new URLSearchParams(location.search);
const token = new URLSearchParams(location.hash.slice(1)).get("token") ?? "";
$<HTMLInputElement>("agentd").value = params.get("agentd") ?? location.origin;
$<HTMLSelectElement>("mode").value = params.get("mode") === "sse" ? "sse" : "connect";

// A way to reach agentd: start a generation, follow its events after a
// sequence number until the stream ends (completed, or paused: a
// generation started detached pauses while it waits for a decision, and
// the decision resumes it), decide.
interface Channel {
  start(): Promise<string>;
  follow(id: string, after: bigint, onEvent: (ev: GenerateResponse) => void): Promise<void>;
  decide(id: string, decision: ApprovalDecision): Promise<void>;
}

function authorization(): Record<string, string> {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function connectChannel(baseUrl: string): Channel {
  const auth: Interceptor = (next) => (req) => {
    for (const [k, v] of Object.entries(authorization())) req.header.set(k, v);
    return next(req);
  };
  const client = createClient(AgentService, createConnectTransport({ baseUrl, interceptors: [auth] }));
  return {
    async start() {
      const start = fromJson(StartGenerationSchema, startRequest as JsonValue);
      return (await client.createGeneration({ start })).generationId;
    },
    async follow(generationId, afterSequence, onEvent) {
      for await (const res of client.followGeneration({ generationId, afterSequence })) {
        if (res.event) onEvent(res.event);
      }
    },
    async decide(generationId, decision) {
      await client.decideRequests({ generationId, approvalDecisions: [decision] });
    },
  };
}

async function json(res: Response): Promise<any> {
  const body = await res.json();
  if (!res.ok) throw new Error(`${res.status}: ${body.message ?? JSON.stringify(body)}`);
  return body;
}

function sseChannel(baseUrl: string): Channel {
  const post = (path: string, body: unknown) =>
    fetch(baseUrl + path, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...authorization() },
      body: JSON.stringify(body),
    }).then(json);
  return {
    async start() {
      return (await post("/v1/generations", startRequest)).generationId;
    },
    follow: (id, after, onEvent) => followSSE(`${baseUrl}/v1/generations/${encodeURIComponent(id)}/events`, after, onEvent),
    async decide(id, decision) {
      await post(`/v1/generations/${encodeURIComponent(id)}:decide`, {
        approvalDecisions: [JSON.parse(toJsonString(ApprovalDecisionSchema, decision))],
      });
    },
  };
}

// followSSE reads Server-Sent Events with fetch, which, unlike
// EventSource, can send the Authorization header. It starts after the
// sequence number after (Last-Event-ID); a stream cut before the
// generation paused or ended is opened again the same way: the events
// resume exactly after the last one received.
async function followSSE(url: string, after: bigint, onEvent: (ev: GenerateResponse) => void): Promise<void> {
  let lastId = after > 0n ? after.toString() : "";
  for (let attempt = 0; attempt < 5; attempt++) {
    const headers: Record<string, string> = { Accept: "text/event-stream", ...authorization() };
    if (lastId) headers["Last-Event-ID"] = lastId;
    const res = await fetch(url, { headers });
    if (!res.ok || !res.body) throw new Error(`${res.status}: ${await res.text()}`);
    let ended = false;
    for await (const sse of readEvents(res.body)) {
      if (sse.id) lastId = sse.id;
      if (sse.event === "error") throw new Error(`the generation failed: ${sse.data}`);
      const ev = fromJson(GenerateResponseSchema, JSON.parse(sse.data) as JsonValue);
      onEvent(ev);
      ended ||= ev.event.case === "completed" || ev.event.case === "paused";
    }
    if (ended) return;
  }
  throw new Error("the event stream kept breaking");
}

interface SSEvent {
  id: string;
  event: string;
  data: string;
}

async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEvent> {
  const reader = body.getReader();
  const text = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += text.decode(value, { stream: true });
    let end: number;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const ev: SSEvent = { id: "", event: "message", data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue; // a heartbeat
        const [field, ...rest] = line.split(":");
        const v = rest.join(":").replace(/^ /, "");
        if (field === "id") ev.id = v;
        else if (field === "event") ev.event = v;
        else if (field === "data") ev.data += (ev.data ? "\n" : "") + v;
      }
      if (ev.data) yield ev;
    }
  }
}

function setStatus(state: string, text = state) {
  const s = $("status");
  s.dataset.state = state;
  s.textContent = text;
}

function logEvent(ev: GenerateResponse) {
  const li = document.createElement("li");
  const kind = document.createElement("span");
  kind.className = "kind";
  kind.textContent = ev.event.case ?? "unknown";
  li.append(kind, document.createTextNode(describe(ev)));
  li.dataset.kind = ev.event.case ?? "";
  $("events").append(li);
}

function describe(ev: GenerateResponse): string {
  switch (ev.event.case) {
    case "textDelta":
      return JSON.stringify(ev.event.value.text);
    case "toolCallStarted":
    case "toolCallFinished":
      return `${ev.event.value.serverName} ${ev.event.value.toolName}`;
    case "approvalRequest":
      return `${ev.event.value.serverName} ${ev.event.value.toolName} ${ev.event.value.arguments}`;
    case "approvalDecided":
      return `${ev.event.value.approved ? "approved" : "declined"} by ${ev.event.value.decidedBy || "someone"}`;
    default:
      return `#${ev.sequence}`;
  }
}

// askApproval shows req and resolves once the person's decision is
// recorded.
function askApproval(channel: Channel, id: string, req: ApprovalRequest): Promise<void> {
  $("approval-tool").textContent = req.toolName;
  $("approval-server").textContent = req.serverName;
  let args = req.arguments;
  try {
    args = JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    // shown as it came
  }
  $("approval-arguments").textContent = args;
  $("approval").hidden = false;
  return new Promise((resolve, reject) => {
    const answer = (approved: boolean) => () => {
      $("approval").hidden = true;
      const reason = $<HTMLInputElement>("reason").value;
      const decision = create(ApprovalDecisionSchema, { requestId: req.id, approved, digest: req.digest, reason });
      channel.decide(id, decision).then(resolve, reject);
    };
    $("approve").onclick = answer(true);
    $("decline").onclick = answer(false);
  });
}

// follow shows the generation's events until it completes, answering
// each approval it asks for, and following on after each pause.
async function follow(channel: Channel, id: string) {
  let after = 0n;
  let decisions: Promise<void>[] = [];
  let done = false;
  while (!done) {
    await channel.follow(id, after, (ev) => {
      logEvent(ev);
      if (ev.sequence > after) after = ev.sequence;
      switch (ev.event.case) {
        case "approvalRequest":
          setStatus("waiting", "waiting for your decision");
          decisions.push(askApproval(channel, id, ev.event.value));
          break;
        case "approvalDecided":
          setStatus("running");
          break;
        case "completed": {
          const parts = ev.event.value.message?.parts ?? [];
          $("answer").textContent = parts.map((p) => (p.kind.case === "text" ? p.kind.value : "")).join("");
          setStatus("completed");
          done = true;
          break;
        }
      }
    });
    if (!done && decisions.length === 0) throw new Error("the event stream ended before the generation did");
    await Promise.all(decisions); // a paused generation resumes once decided
    decisions = [];
  }
}

async function run(e: Event) {
  e.preventDefault();
  $("events").replaceChildren();
  $("answer").textContent = "";
  const base = $<HTMLInputElement>("agentd").value.replace(/\/$/, "");
  const channel = $<HTMLSelectElement>("mode").value === "sse" ? sseChannel(base) : connectChannel(base);
  try {
    setStatus("starting");
    const id = await channel.start();
    $("generation").textContent = id;
    setStatus("running");
    await follow(channel, id);
  } catch (err) {
    setStatus("failed", String(err));
  }
}

$("start-form").addEventListener("submit", run);
