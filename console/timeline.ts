// A generation's timeline, made from its event log as FollowGeneration
// sends it: what a person reads, not what the wire says. The model's text
// deltas are merged into the turn they belong to, a tool call's start and
// finish into one entry, a request's decision into the request; a turn
// withdrawn (its replica died mid-turn) loses what it said. add is pure:
// the page keeps the timeline as state, and a follow that overlaps the
// one before changes nothing.
import type {
  ApprovalDecided,
  ApprovalRequest,
  AuthorizationRequest,
  FunctionCall,
  GenerateResponse,
  GenerationCompleted,
  GenerationStarted,
  InputRequest,
  ToolCallFinished,
  ToolCallStarted,
  ToolProgress,
  Usage,
  Warning,
} from "../gen/ts/agentd/v1/agent_service_pb.js";
import type { ProviderToolCall } from "../gen/ts/agentd/v1/message_pb.js";

interface At {
  // The sequence number of the event that began the entry (0 for none).
  seq: number;
  // Unique in the timeline, for Preact's keys and the tests.
  key: string;
}

export type Entry = At &
  (
    | { kind: "started"; started: GenerationStarted }
    | { kind: "queued"; behind: string }
    | { kind: "text"; text: string }
    | { kind: "tool"; call: ToolCallStarted; finished?: ToolCallFinished; progress?: ToolProgress }
    | { kind: "provider-tool"; call: ProviderToolCall }
    | { kind: "request"; request: Request; decided?: ApprovalDecided }
    | { kind: "decided"; decided: ApprovalDecided }
    | { kind: "usage"; usage: Usage }
    | { kind: "warning"; warning: Warning }
    | { kind: "withdrawn"; turn: number; reason: string }
    | { kind: "paused" }
    | { kind: "completed"; completed: GenerationCompleted }
  );

export type Request =
  | { case: "approval"; value: ApprovalRequest }
  | { case: "authorization"; value: AuthorizationRequest }
  | { case: "input"; value: InputRequest }
  | { case: "functionCall"; value: FunctionCall };

// requestIdOf is the id a request is answered by.
export function requestIdOf(r: Request): string {
  return r.case === "functionCall" ? r.value.callId : r.value.id;
}

export interface Timeline {
  entries: Entry[];
  // The last sequence number seen: the next follow continues after it.
  last: number;
}

export const empty: Timeline = { entries: [], last: 0 };

// add is tl with ev in it. An event at or before the last sequence
// number seen (a follow that overlapped the one before) changes nothing.
export function add(tl: Timeline, ev: GenerateResponse): Timeline {
  const seq = Number(ev.sequence);
  if (seq > 0 && seq <= tl.last) return tl;
  const last = Math.max(tl.last, seq);
  const e = ev.event;
  const at = { seq, key: `${seq || "p"}-${tl.entries.length}` };
  const push = (entry: Entry) => ({ entries: [...tl.entries, entry], last });
  switch (e.case) {
    case "started":
      return push({ ...at, kind: "started", started: e.value });
    case "queued":
      return push({ ...at, kind: "queued", behind: e.value.behindGenerationId });
    case "textDelta":
      return { entries: withText(tl.entries, at, e.value.text), last };
    case "toolCallStarted":
      return push({ ...at, kind: "tool", call: e.value });
    case "toolCallFinished":
      return { entries: finishTool(tl.entries, at, e.value), last };
    case "toolProgress":
      return { entries: progressTool(tl.entries, e.value), last };
    case "providerToolCall":
      return push({ ...at, kind: "provider-tool", call: e.value });
    case "approvalRequest":
      return push({ ...at, kind: "request", request: { case: "approval", value: e.value } });
    case "authorizationRequest":
      return push({ ...at, kind: "request", request: { case: "authorization", value: e.value } });
    case "inputRequest":
      return push({ ...at, kind: "request", request: { case: "input", value: e.value } });
    case "functionCall":
      return push({ ...at, kind: "request", request: { case: "functionCall", value: e.value } });
    case "approvalDecided":
      return { entries: decide(tl.entries, at, e.value), last };
    case "usage":
      return push({ ...at, kind: "usage", usage: e.value });
    case "warning":
      return push({ ...at, kind: "warning", warning: e.value });
    case "turnWithdrawn": {
      const kept = withdraw(tl.entries, Number(e.value.fromSequence));
      return { entries: [...kept, { ...at, kind: "withdrawn", turn: e.value.turn, reason: e.value.reason }], last };
    }
    case "paused":
      return push({ ...at, kind: "paused" });
    case "completed":
      return push({ ...at, kind: "completed", completed: e.value });
    default:
      return { ...tl, last };
  }
}

// withText appends text to the model's turn under way: the last entry,
// when it is text, else a new one.
function withText(entries: Entry[], at: At, text: string): Entry[] {
  const tail = entries[entries.length - 1];
  if (tail?.kind === "text") return [...entries.slice(0, -1), { ...tail, text: tail.text + text }];
  return [...entries, { ...at, kind: "text", text }];
}

function finishTool(entries: Entry[], at: At, f: ToolCallFinished): Entry[] {
  const i = lastIndex(entries, (x) => x.kind === "tool" && x.call.callId === f.callId);
  if (i < 0) {
    // Its start was before the sequence number followed from.
    const { callId, toolName, serverName, origin, turn } = f;
    const call = { callId, toolName, serverName, origin, turn, arguments: "" } as ToolCallStarted;
    return [...entries, { ...at, kind: "tool", call, finished: f }];
  }
  return entries.map((x, j) => (j === i && x.kind === "tool" ? { ...x, finished: f, progress: undefined } : x));
}

function progressTool(entries: Entry[], p: ToolProgress): Entry[] {
  return entries.map((x) => (x.kind === "tool" && !x.finished && x.call.callId === p.callId ? { ...x, progress: p } : x));
}

// decide marks the request d answers as decided, or adds the decision
// on its own when the request is not in the timeline.
function decide(entries: Entry[], at: At, d: ApprovalDecided): Entry[] {
  const i = lastIndex(entries, (x) => x.kind === "request" && requestIdOf(x.request) === d.requestId);
  if (i < 0) return [...entries, { ...at, kind: "decided", decided: d }];
  return entries.map((x, j) => (j === i && x.kind === "request" ? { ...x, decided: d } : x));
}

// withdraw drops what a withdrawn turn said from sequence number from on:
// its text and its provider's tool calls.
function withdraw(entries: Entry[], from: number): Entry[] {
  return entries.filter((x) => x.seq < from || (x.kind !== "text" && x.kind !== "provider-tool"));
}

function lastIndex(entries: Entry[], ok: (e: Entry) => boolean): number {
  for (let i = entries.length - 1; i >= 0; i--) if (ok(entries[i])) return i;
  return -1;
}
