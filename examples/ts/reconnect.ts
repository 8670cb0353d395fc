// Follows a generation across broken streams: the reconnect loop that the
// TypeScript examples share, kept small enough to copy.
//
// A Generate stream breaks when agentd's replica dies or the network
// drops; the generation goes on (another replica adopts it), and the
// client attaches to it again with the last sequence number it saw. A
// detached start (StartGeneration.detach) ends its stream after started,
// and the loop attaches the same way.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type CallOptions, type Client } from "@connectrpc/connect";
import { setTimeout as sleep } from "node:timers/promises";

import {
  AgentService,
  GenerateRequestSchema,
  type GenerateRequest,
  type GenerateResponse,
} from "../../gen/ts/agentd/v1/agent_service_pb.js";

/** How the loop reconnects. */
export interface Policy {
  /** Attaches in a row without a new event before giving up. */
  attempts: number;
  /** The wait before the first attach after UNAVAILABLE (halved at random), doubled each time up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Told of each attach: the generation, the last sequence yielded, and the error that broke the stream (none: it ended without one, as a detached start's does). */
  onAttach?: (generationId: string, afterSequence: bigint, cause?: ConnectError) => void;
}

/** The examples' policy: 8 attempts, 200 ms doubling to 2 s (at most 11 s of waiting in all). */
export const defaultPolicy: Policy = { attempts: 8, backoffMs: 200, maxBackoffMs: 2000 };

/**
 * Yields the events of the generation that first (a start or a resume)
 * begins. Each stream sends one message and half-closes (the loop answers
 * nothing: a generation that asks for approvals or function results
 * pauses). Every event is yielded once, in order of its sequence number,
 * until completed or paused; another status is thrown. When a stream ends
 * before the generation does, with UNAVAILABLE or a transport error (the
 * replica died, the connection dropped) or without a status (a detached
 * start), the loop opens another whose only message is attach
 * {generationId, afterSequence: the last one yielded}, and gives up after
 * policy.attempts in a row without a new event. A stream that breaks
 * before started is thrown, not retried: the generation may or may not
 * exist, and starting it again could run it twice. call (headers, a
 * signal) goes with every call, and once its signal is aborted nothing is
 * retried; prefer a signal (AbortSignal.timeout) to timeoutMs, whose timer
 * Connect-ES leaves running when a call is aborted (as the loop aborts the
 * stream when its caller stops early), keeping Node alive until it fires.
 */
export async function* generate(
  client: Client<typeof AgentService>,
  first: GenerateRequest,
  call: CallOptions = {},
  policy: Policy = defaultPolicy,
): AsyncGenerator<GenerateResponse> {
  let id = "";
  let last = 0n; // the last sequence number yielded
  let failures = 0;
  let wait = policy.backoffMs;
  let request = first;
  let done = false; // the generation completed or paused
  for (;;) {
    let cause: ConnectError | undefined;
    // Connect-ES does not end a call whose events are no longer read:
    // stop does, if the caller stops early.
    const stop = new AbortController();
    const signal = call.signal ? AbortSignal.any([call.signal, stop.signal]) : stop.signal;
    try {
      for await (const event of client.generate(once(request), { ...call, signal })) {
        if (event.sequence > 0n && event.sequence <= last) continue; // yielded already (defence: the server does not replay these)
        if (event.sequence > last) last = event.sequence;
        failures = 0;
        wait = policy.backoffMs;
        if (event.event.case === "started") id = event.event.value.generationId;
        yield event;
        done ||= event.event.case === "completed" || event.event.case === "paused";
      }
    } catch (err) {
      if (done) return; // however its stream ended, nothing is missing
      if (!id || call.signal?.aborted || !broken(err)) throw err;
      cause = err;
    } finally {
      stop.abort();
    }
    if (done) return;
    if (!id) throw new Error("the stream ended before the generation started");
    if (failures >= policy.attempts) throw cause ?? new Error(`generation ${id}: gave up after ${failures} attempts to attach`);
    if (cause) {
      await sleep(wait / 2 + (Math.random() * wait) / 2, undefined, { signal: call.signal });
      wait = Math.min(2 * wait, policy.maxBackoffMs);
    }
    policy.onAttach?.(id, last, cause);
    failures++;
    request = create(GenerateRequestSchema, { kind: { case: "attach", value: { generationId: id, afterSequence: last } } });
  }
}

// once is a client half that sends request and half-closes.
async function* once(request: GenerateRequest): AsyncIterable<GenerateRequest> {
  yield request;
}

// broken is whether err says the stream broke rather than the generation
// ended: UNAVAILABLE, a Node transport error under it (a reset
// connection, a stream closed before its end), or an HTTP/2 stream closed
// without a status, which is how Node reports each stream of a connection
// that went away (agentd's statuses come in trailers, and these have none).
function broken(err: unknown): err is ConnectError {
  if (!(err instanceof ConnectError)) return false;
  return (
    err.code === Code.Unavailable ||
    typeof (err.cause as NodeJS.ErrnoException | undefined)?.code === "string" ||
    err.rawMessage.startsWith("http/2 stream closed")
  );
}

/**
 * The model's text as a generation's events tell it: textDelta adds to it,
 * and turnWithdrawn takes back what the withdrawn turn said (the deltas
 * from its fromSequence on), since the turn is asked again.
 */
export class Text {
  private deltas: { sequence: bigint; text: string }[] = [];

  /** Adds event's text, or takes a withdrawn turn's back and returns it. */
  apply(event: GenerateResponse): string {
    const e = event.event;
    if (e.case === "textDelta") this.deltas.push({ sequence: event.sequence, text: e.value.text });
    if (e.case !== "turnWithdrawn") return "";
    const from = e.value.fromSequence;
    const withdrawn = this.deltas.filter((d) => d.sequence >= from);
    this.deltas = this.deltas.filter((d) => d.sequence < from);
    return withdrawn.map((d) => d.text).join("");
  }

  /** The text so far. */
  toString(): string {
    return this.deltas.map((d) => d.text).join("");
  }
}
