// What the inbox shows: the pending requests agentd lists, and those it
// stopped listing while someone looked at them, kept with a notice
// saying why until dismissed, so that a request decided elsewhere does
// not vanish from under the person about to decide it.
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import {
  InputAction,
  type DecideRequestsRequestSchema,
  type PendingRequest,
} from "../gen/ts/agentd/v1/agent_service_pb.js";
import type { Failure } from "./api.js";
import { dateOf, instant } from "./format.js";

// Phase is where an entry is: pending (decidable), deciding (this page's
// decision in flight), decided (by this page; it goes once agentd stops
// listing it), gone (no longer pending, not by this page: notice says
// why).
export type Phase = "pending" | "deciding" | "decided" | "gone";

export interface Entry {
  key: string;
  req: PendingRequest;
  phase: Phase;
  // Why a gone or decided entry is so.
  notice: string;
  // The last decision's failure, when it failed for a reason that
  // leaves the request pending.
  error: string;
}

// requestId is the id a request is answered by, whatever its kind.
export function requestId(req: PendingRequest): string {
  const r = req.request;
  switch (r.case) {
    case "functionCall":
      return r.value.callId;
    case undefined:
      return "";
    default:
      return r.value.id;
  }
}

// Answer is what a person decided of a request: an approval's yes or no
// (with, for a limit's, the value to raise it to: 0n by its first value),
// or what they did with an input request (its content when they
// accepted a form).
export type Answer =
  | { case: "approval"; approved: boolean; reason: string; raiseTo?: bigint }
  | { case: "input"; action: InputAction; content?: JsonObject };

// decision is the DecideRequests call that gives answer to req, or
// undefined when answer is not of req's kind.
export function decision(
  req: PendingRequest,
  answer: Answer,
): MessageInitShape<typeof DecideRequestsRequestSchema> | undefined {
  const r = req.request;
  const generationId = req.generationId;
  if (answer.case === "approval" && r.case === "approval") {
    const { approved, reason, raiseTo } = answer;
    return { generationId, approvalDecisions: [{ requestId: r.value.id, approved, digest: r.value.digest, reason, raiseTo }] };
  }
  if (answer.case === "input" && r.case === "input") {
    return { generationId, inputResponses: [{ requestId: r.value.id, action: answer.action, content: answer.content }] };
  }
  return undefined;
}

const inputNotices: Record<InputAction, string> = {
  [InputAction.UNSPECIFIED]: "",
  [InputAction.ACCEPT]: "You answered it.",
  [InputAction.DECLINE]: "You declined to answer.",
  [InputAction.CANCEL]: "You dismissed it without answering.",
};

// answered is what a decided entry says of this page's answer.
export function answered(answer: Answer): string {
  if (answer.case === "input") return inputNotices[answer.action];
  return answer.approved ? "You approved it." : "You declined it.";
}

function keyOf(req: PendingRequest): string {
  return `${req.generationId}/${requestId(req)}`;
}

// merge is prev after agentd listed listed at now: listed requests are
// updated in place, an entry agentd no longer lists is gone unless this
// page decided it (then it goes) or is deciding it (then the decision's
// answer says). Newest request first.
export function merge(prev: Entry[], listed: PendingRequest[], now: Date): Entry[] {
  const before = new Map(prev.map((e) => [e.key, e]));
  const next: Entry[] = listed.map((req) => {
    const key = keyOf(req);
    const old = before.get(key);
    before.delete(key);
    if (!old || old.phase === "gone") return { key, req, phase: "pending", notice: "", error: "" };
    return { ...old, req };
  });
  for (const e of before.values()) {
    if (e.phase === "decided") continue;
    next.push(e.phase === "pending" ? { ...e, phase: "gone", notice: unlisted(e.req, now), error: "" } : e);
  }
  return next.sort((a, b) => requested(b) - requested(a));
}

function requested(e: Entry): number {
  return dateOf(e.req.requestedAt)?.getTime() ?? 0;
}

function unlisted(req: PendingRequest, now: Date): string {
  const expires = dateOf(req.expiresAt);
  if (expires && expires <= now) return "No longer pending: it expired before anyone decided it.";
  return "No longer pending: it was decided elsewhere, or its generation ended.";
}

// refused is what a failed decision makes of its entry: gone when agentd
// says the request no longer waits (decided by someone else, first, or
// its generation ended), pending with the error otherwise. A refusal for
// want of a role is the page's to show, not the entry's.
export function refused(e: Entry, f: Failure): Entry {
  const gone = goneBecause(f);
  if (gone) return { ...e, phase: "gone", notice: gone, error: "" };
  return { ...e, phase: "pending", error: f.code === Code.PermissionDenied ? "" : f.text };
}

function goneBecause(f: Failure): string {
  if (f.code === Code.NotFound) return "No longer pending: its generation no longer exists.";
  if (f.code !== Code.FailedPrecondition) return "";
  switch (f.reason) {
    case "REQUEST_DECIDED":
      return decidedBy(f.metadata);
    case "REQUEST_NOT_PENDING":
      return "No longer pending: its generation no longer waits for it.";
    case "GENERATION_FINISHED":
      return `No longer pending: its generation has ended (${f.metadata.state ?? "finished"}).`;
    default:
      return "";
  }
}

function decidedBy(md: Record<string, string>): string {
  const who = md.decided_by || "a caller without authentication";
  const at = md.decided_at ? new Date(md.decided_at) : undefined;
  const when = at && !Number.isNaN(at.getTime()) ? ` at ${instant(at)}` : "";
  return `Decided elsewhere: by ${who}${when}.`;
}
