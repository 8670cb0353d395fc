// Who the signed-in caller is to agentd (GetCaller): its tenant and roles
// decide which actions a page offers. agentd checks every call anyway;
// this only spares people buttons that would be refused.
import { useEffect, useState } from "preact/hooks";

import type { GetCallerResponse } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { failure, type Agent, type Failure } from "./api.js";

export interface CallerState {
  caller?: GetCallerResponse;
  // Why agentd did not say (e.g. UNIMPLEMENTED from an older agentd).
  failure?: Failure;
}

export function useCaller(agent: Agent): CallerState {
  const [state, setState] = useState<CallerState>({});
  useEffect(() => {
    const ctl = new AbortController();
    agent
      .getCaller({}, { signal: ctl.signal, timeoutMs: 10_000 })
      .then((caller) => setState({ caller }))
      .catch((err: unknown) => {
        if (!ctl.signal.aborted) setState({ failure: failure(err) });
      });
    return () => ctl.abort();
  }, [agent]);
  return state;
}

// mayInvalidate reports whether caller may drop the schema cache's
// entries of tenant: an admin any tenant's, a tenant_admin its own.
export function mayInvalidate(caller: GetCallerResponse | undefined, tenant: string): boolean {
  if (!caller) return false;
  return caller.roles.includes("admin") || (caller.roles.includes("tenant_admin") && caller.tenant === tenant);
}
