// Who is signed in, and what the page may offer them: agentd says who
// the caller is (GetCaller), and the page shows only the buttons its
// roles allow. agentd enforces the roles whatever the page shows; this
// only spares a person buttons that would be refused.
import { Code } from "@connectrpc/connect";
import { useEffect, useState } from "preact/hooks";

import { failure, type Agent } from "./api.js";

export interface Caller {
  // agentd said who the caller is. When it did not (an agentd without
  // GetCaller, or a call that failed) the page offers every button and
  // lets agentd refuse what the key may not do.
  known: boolean;
  name: string;
  tenant: string;
  roles: string[];
}

const unknown: Caller = { known: false, name: "", tenant: "", roles: [] };

function holds(c: Caller, ...roles: string[]): boolean {
  return !c.known || roles.some((r) => c.roles.includes(r));
}

// mayDecide: DecideRequests needs the role approve, which generate holds.
export function mayDecide(c: Caller): boolean {
  return holds(c, "approve", "generate");
}

// mayCancel: CancelGeneration needs the role generate.
export function mayCancel(c: Caller): boolean {
  return holds(c, "generate");
}

// useCaller asks agentd who the caller is, once per key; undefined until
// it answers.
export function useCaller(agent: Agent | undefined): Caller | undefined {
  const [caller, setCaller] = useState<Caller | undefined>();
  useEffect(() => {
    setCaller(undefined);
    if (!agent) return;
    const ctl = new AbortController();
    agent.getCaller({}, { signal: ctl.signal, timeoutMs: 10_000 }).then(
      (res) => setCaller({ known: true, name: res.name, tenant: res.tenant, roles: res.roles }),
      (err) => {
        if (ctl.signal.aborted) return;
        if (failure(err).code !== Code.Unimplemented) console.warn("GetCaller failed:", err);
        setCaller(unknown);
      },
    );
    return () => ctl.abort();
  }, [agent]);
  return caller;
}

// Config is what agentd serves the page as config.json: settings that
// change what it shows.
export interface Config {
  // console.trace_url: a trace viewer's address with {trace_id} in it,
  // or "".
  traceURL: string;
}

// useConfig reads config.json once; an agentd that serves none (or an
// error) leaves every setting empty.
export function useConfig(): Config {
  const [config, setConfig] = useState<Config>({ traceURL: "" });
  useEffect(() => {
    fetch("config.json", { cache: "no-cache" })
      .then((res) => (res.ok ? res.json() : {}))
      .then((c: { trace_url?: unknown }) => setConfig({ traceURL: typeof c.trace_url === "string" ? c.trace_url : "" }))
      .catch(() => undefined);
  }, []);
  return config;
}
