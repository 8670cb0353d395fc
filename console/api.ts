// How the console reaches agentd: the generated Connect-ES clients of the
// AgentService and the AdminService, on the origin that served the page
// (the console and the API share it, so the Content-Security-Policy's
// connect-src 'self' admits every call), each call carrying the
// signed-in API key or token.
import { createClient, Code, ConnectError, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

import { AdminService } from "../gen/ts/agentd/v1/admin_service_pb.js";
import { AgentService } from "../gen/ts/agentd/v1/agent_service_pb.js";
import { ErrorInfoSchema } from "../gen/ts/google/rpc/error_details_pb.js";

export type Agent = Client<typeof AgentService>;
export type Admin = Client<typeof AdminService>;

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
  return createClient(AgentService, transport(key));
}

// adminClient calls the AdminService, which agentd serves beside the
// AgentService unless admin.listen puts it on an address of its own
// (then every call is UNIMPLEMENTED here, and the pages say so).
export function adminClient(key: string): Admin {
  return createClient(AdminService, transport(key));
}

function transport(key: string) {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("Authorization", `Bearer ${key}`);
    return next(req);
  };
  return createConnectTransport({ baseUrl: location.origin, interceptors: [bearer] });
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

// adminError is what a page of the AdminService says when method failed
// with f, and whether asking again may help.
export function adminError(f: Failure, method: string): { text: string; again: boolean } {
  switch (f.code) {
    case Code.Unimplemented:
      return {
        text: `This agentd does not serve ${method} here: it is older than this console, or admin.listen serves the AdminService on an address of its own (${f.text}).`,
        again: false,
      };
    case Code.Unauthenticated:
      return { text: `agentd refused the key (${f.text}): sign out, and sign in with another.`, again: false };
    case Code.PermissionDenied:
      return { text: `This key may not read it: ${method} needs the role observer, admin or tenant_admin (${f.text}).`, again: false };
    default:
      return { text: `${method} did not answer (${f.text}); trying again.`, again: true };
  }
}
