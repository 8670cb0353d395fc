// How the console reaches agentd: the generated Connect-ES client of the
// AgentService, on the origin that served the page (the console and the
// API share it, so the Content-Security-Policy's connect-src 'self'
// admits every call), each call carrying the signed-in API key.
import { createClient, Code, ConnectError, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

import { AgentService } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { ErrorInfoSchema } from "../gen/ts/google/rpc/error_details_pb.js";

export type Agent = Client<typeof AgentService>;

// The key lives in the tab's session storage only: it goes when the tab
// closes, no other tab or later visit reads it, and no cookie carries it
// to the server unasked.
const keyItem = "agentd.console.api_key";

export function storedKey(): string {
  return sessionStorage.getItem(keyItem) ?? "";
}

export function keepKey(key: string) {
  sessionStorage.setItem(keyItem, key);
}

export function forgetKey() {
  sessionStorage.removeItem(keyItem);
}

export function agentClient(key: string): Agent {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("Authorization", `Bearer ${key}`);
    return next(req);
  };
  return createClient(AgentService, createConnectTransport({ baseUrl: location.origin, interceptors: [bearer] }));
}

// Failure is an error of a call as the console reads it: its gRPC code,
// and the ErrorInfo agentd attached, if any.
export interface Failure {
  code: Code;
  // ErrorInfo.reason, e.g. REQUEST_DECIDED; empty without one.
  reason: string;
  metadata: Record<string, string>;
  // What to show: the code's gRPC name and agentd's message.
  text: string;
}

export function failure(err: unknown): Failure {
  const ce = ConnectError.from(err);
  const [info] = ce.findDetails(ErrorInfoSchema);
  return {
    code: ce.code,
    reason: info?.reason ?? "",
    metadata: info?.metadata ?? {},
    text: `${codeName(ce.code)}: ${ce.rawMessage}`,
  };
}

// codeName is a code as gRPC and agentd's documents spell it
// (PermissionDenied is PERMISSION_DENIED).
export function codeName(code: Code): string {
  return (Code[code] ?? "UNKNOWN").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}
