// What a waiting or paused generation waits for, as the inbox's
// entries, so that its page shows and decides them as the inbox does.
import { create } from "@bufbuild/protobuf";

import {
  PendingRequestKind,
  PendingRequestSchema,
  type Generation,
  type PendingRequest,
} from "../gen/ts/agentd/v1/agent_service_pb.js";
import { requestId, type Entry } from "./pending.js";

// pendingOf lists what g waits for, as ListPendingRequests would.
export function pendingOf(g: Generation): PendingRequest[] {
  const origin = {
    generationId: g.generationId,
    state: g.state,
    expiresAt: g.expiresAt,
    endUser: g.endUser,
    startedBy: g.startedBy,
    provider: g.provider,
    model: g.model,
  };
  const of = (kind: PendingRequestKind, request: PendingRequest["request"]) =>
    create(PendingRequestSchema, { ...origin, kind, request });
  return [
    ...g.approvalRequests.map((value) => of(PendingRequestKind.APPROVAL, { case: "approval", value })),
    ...g.authorizationRequests.map((value) => of(PendingRequestKind.AUTHORIZATION, { case: "authorization", value })),
    ...g.inputRequests.map((value) => of(PendingRequestKind.INPUT, { case: "input", value })),
    ...g.functionCalls.map((value) => of(PendingRequestKind.FUNCTION_CALL, { case: "functionCall", value })),
  ];
}

// entriesOf is what g waits for, with what this page did about each
// (kept, by request id, in done): pending unless the page decided it or
// tried to.
export function entriesOf(g: Generation, done: Map<string, Entry>): Entry[] {
  return pendingOf(g).map((req) => {
    const id = requestId(req);
    const was = done.get(id);
    return was ? { ...was, req } : { key: `${g.generationId}/${id}`, req, phase: "pending", notice: "", error: "" };
  });
}
