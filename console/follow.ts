// Following a generation for its page: its record (GetGeneration) and
// its timeline (FollowGeneration, from its first event), live while it
// runs. A follow ends when the generation pauses, completes or fails;
// the record then says which. A paused generation is followed again
// every second (cheap: agentd answers at once while it is still paused),
// and at once when the page decides one of its requests, so that its
// resumed run shows as it happens.
import { Code } from "@connectrpc/connect";
import { useEffect, useRef, useState } from "preact/hooks";

import type { Generation } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { failure, type Agent, type Failure } from "./api.js";
import { finished } from "./states.js";
import { add, empty, type Timeline } from "./timeline.js";

const againEvery = 1000;
const callTimeoutMs = 10_000;

// Events after which the record has changed in a way the page shows:
// what the generation waits for, or its state.
const changing = new Set(["started", "approvalRequest", "authorizationRequest", "inputRequest", "functionCall", "approvalDecided", "paused", "completed"]);

export interface Followed {
  gen?: Generation;
  timeline: Timeline;
  // Why the generation cannot be shown, or why following it failed
  // for now.
  error: string;
  // refresh reads the record again and follows at once.
  refresh(): void;
}

export function useFollow(agent: Agent, id: string): Followed {
  const [gen, setGen] = useState<Generation | undefined>();
  const [timeline, setTimeline] = useState<Timeline>(empty);
  const [error, setError] = useState("");
  const wake = useRef<() => void>(() => undefined);

  useEffect(() => {
    const ctl = new AbortController();
    const { signal } = ctl;
    const read = async () => {
      const res = await agent.getGeneration({ generationId: id }, { signal, timeoutMs: callTimeoutMs });
      setGen(res.generation);
      return res.generation;
    };
    const follow = async (after: number) => {
      let last = after;
      for await (const res of agent.followGeneration({ generationId: id, afterSequence: BigInt(after) }, { signal })) {
        const ev = res.event;
        if (!ev) continue;
        last = Math.max(last, Number(ev.sequence));
        setTimeline((tl) => add(tl, ev));
        if (changing.has(ev.event.case ?? "")) void read().catch(() => undefined);
      }
      return last;
    };
    // One round: follow until the stream ends, then read the record,
    // which says whether the generation ended (a failed one ends its
    // follow with its status) or paused, or the follow failed. It
    // reports whether to go on.
    let last = 0;
    const round = async (): Promise<boolean> => {
      let followed: Failure | undefined;
      try {
        last = await follow(last);
      } catch (err) {
        if (signal.aborted) return false;
        followed = failure(err);
      }
      try {
        const g = await read();
        const ended = !g || finished(g.state);
        const stopped = !ended && followed !== undefined && stops(followed.code);
        setError(ended || !followed ? "" : stopped ? followError(followed.text) : `Following it failed (${followed.text}); trying again.`);
        return !ended && !stopped;
      } catch (err) {
        if (signal.aborted) return false;
        const f = failure(err);
        setError(followError(f.text));
        return !stops(f.code);
      }
    };
    const run = async () => {
      while ((await round()) && !signal.aborted) await pause(againEvery, signal, wake);
    };
    void run();
    return () => ctl.abort();
  }, [agent, id]);

  return { gen, timeline, error, refresh: () => wake.current() };
}

// stops: an error after which asking again will not help.
function stops(code: Code): boolean {
  return code === Code.NotFound || code === Code.PermissionDenied || code === Code.Unauthenticated || code === Code.InvalidArgument || code === Code.FailedPrecondition;
}

function followError(text: string): string {
  return `The generation could not be read (${text}).`;
}

// pause waits ms, or until signal aborts or wake is called.
function pause(ms: number, signal: AbortSignal, wake: { current: () => void }): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      wake.current = () => undefined;
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done);
    wake.current = done;
  });
}
