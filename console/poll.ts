// Asking agentd again and again while a page is visible, and the time
// the page's spans are measured from.
import { useEffect, useState } from "preact/hooks";

import { adminError, failure } from "./api.js";

// usePolling calls poll every `every` ms while the page is visible (a
// hidden tab asks nothing; showing it asks at once), one call at a time,
// until poll answers false; the call in flight is aborted when the page
// hides or the component goes. poll is taken anew when deps change, so it
// may use only deps and state setters.
export function usePolling(poll: (signal: AbortSignal) => Promise<boolean>, every: number, deps: unknown[]) {
  useEffect(() => {
    let round = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let ctl: AbortController | undefined;
    const stop = () => {
      round++;
      clearTimeout(timer);
      ctl?.abort();
    };
    const tick = async () => {
      const mine = ++round;
      ctl = new AbortController();
      const again = await poll(ctl.signal);
      if (again && mine === round) timer = setTimeout(tick, every);
    };
    const onVisibility = () => {
      stop();
      if (document.visibilityState === "visible") void tick();
    };
    document.addEventListener("visibilitychange", onVisibility);
    onVisibility();
    return () => {
      document.removeEventListener("visibilitychange", onVisibility);
      stop();
    };
  }, deps);
}

// useNow is the time, renewed every `every` ms, for the spans shown.
export function useNow(every: number): Date {
  const [now, setNow] = useState(() => new Date());
  useEffect(() => {
    const t = setInterval(() => setNow(new Date()), every);
    return () => clearInterval(t);
  }, [every]);
  return now;
}

// AdminRead is the last answer of an AdminService read, and what
// adminError makes of its last failure ("" after an answer).
export interface AdminRead<T> {
  data?: T;
  error: string;
}

// useAdminRead asks read (the AdminService's method) every `every` ms
// while the page is visible, as usePolling does, until a failure that
// asking again cannot mend.
export function useAdminRead<T>(
  read: (signal: AbortSignal) => Promise<T>,
  method: string,
  every: number,
  deps: unknown[],
): AdminRead<T> {
  const [state, setState] = useState<AdminRead<T>>({ error: "" });
  usePolling(
    async (signal) => {
      try {
        const data = await read(signal);
        setState({ data, error: "" });
        return true;
      } catch (err) {
        if (signal.aborted) return false;
        const e = adminError(failure(err), method);
        setState((prev) => ({ ...prev, error: e.text }));
        return e.again;
      }
    },
    every,
    deps,
  );
  return state;
}
