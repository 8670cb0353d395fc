// A generation's state as the console names it: the API's name in lower
// case ("paused" for GENERATION_STATE_PAUSED), as the generations page's
// state filter and its URL spell it too.
import { GenerationState } from "../gen/ts/agentd/v1/agent_service_pb.js";

export function stateLabel(s: GenerationState): string {
  return s === GenerationState.UNSPECIFIED ? "" : (GenerationState[s]?.toLowerCase() ?? String(s));
}

// finished reports whether a generation in state s has ended.
export function finished(s: GenerationState): boolean {
  return s === GenerationState.COMPLETED || s === GenerationState.FAILED || s === GenerationState.CANCELLED;
}
