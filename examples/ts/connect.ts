// How the TypeScript examples reach agentd, with the options every example
// takes:
//
//   --token     API key, sent as "authorization: Bearer" (env AGENTD_TOKEN)
//   --tls-ca    connect over TLS, trusting the CA certificates in this PEM file (env AGENTD_TLS_CA)
//   --tls-cert  connect over TLS, presenting this PEM client certificate (env AGENTD_TLS_CERT)
//   --tls-key   the PEM private key of --tls-cert (env AGENTD_TLS_KEY)
//
// and two positional arguments, agentd's address and the request file. The
// address is the argument, else AGENTD_ADDR, else 127.0.0.1:7070 (where
// `make run` starts agentd). With any TLS option the transport is TLS
// (Node's HTTP/2 session options carry the CA, the client certificate and
// its key; no --tls-ca: Node's roots), plaintext otherwise; a flag
// overrides its environment variable. The token goes over plaintext too,
// for an agentd on loopback: use TLS anywhere else.
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { parseArgs } from "node:util";

/** Where `make run` starts agentd. */
const defaultAddress = "127.0.0.1:7070";

/** How an example reaches agentd, from its command line. */
export interface Connection {
  /** The request file: the second positional argument, or the default. */
  requestFile: string;
  /** A gRPC transport to agentd's address. */
  transport: Transport;
  /** The headers every call sends: the token, if any. */
  headers: Record<string, string>;
  /** The example's own on/off options (connect's switches) that the command line set. */
  switches: Set<string>;
  /** The values of the example's own options with a value (connect's options). */
  options: Record<string, string>;
}

// read returns the file's bytes, or undefined without a path; an error
// names the option, not the path (a key's path is as secret as the key).
function read(path: string | undefined, option: string): Buffer | undefined {
  if (!path) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    fail(`${option}: ${(err as NodeJS.ErrnoException).code ?? "cannot read the file"}`);
  }
}

function fail(message: string, status = 2): never {
  console.error(`${basename(process.argv[1])}: ${message}`);
  process.exit(status);
}

/** Whether err is a call's failure to connect because nothing listens at the address. */
export function notListening(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.Unavailable && (err.cause as NodeJS.ErrnoException | undefined)?.code === "ECONNREFUSED";
}

/**
 * The connection that the command line (process.argv) and the environment
 * describe; switches are the example's own on/off options (--name),
 * options its own options with a value, {name: default} (--name value). An
 * example's calls run at its top level, so an error it does not catch ends
 * it here: a refused connection with a line that says what to do, any
 * other as Node would, printed with exit status 1.
 */
export function connect(defaultRequest: string, switches: string[] = [], options: Record<string, string> = {}): Connection {
  const { values: opts, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      token: { type: "string", default: process.env.AGENTD_TOKEN },
      "tls-ca": { type: "string", default: process.env.AGENTD_TLS_CA },
      "tls-cert": { type: "string", default: process.env.AGENTD_TLS_CERT },
      "tls-key": { type: "string", default: process.env.AGENTD_TLS_KEY },
      ...Object.fromEntries(switches.map((name) => [name, { type: "boolean" as const }])),
      ...Object.fromEntries(Object.entries(options).map(([name, value]) => [name, { type: "string" as const, default: value }])),
    },
  });
  const address = positionals[0] || process.env.AGENTD_ADDR || defaultAddress;
  process.on("uncaughtException", (err) => {
    if (notListening(err)) fail(`agentd is not listening at ${address}: start it (make run) or set AGENTD_ADDR`, 1);
    console.error(err);
    process.exit(1);
  });
  const [ca, cert, key] = [opts["tls-ca"], opts["tls-cert"], opts["tls-key"]];
  if (!cert !== !key) fail("--tls-cert and --tls-key go together");
  const tls = Boolean(ca || cert);
  return {
    requestFile: positionals[1] ?? defaultRequest,
    transport: createGrpcTransport({
      baseUrl: `${tls ? "https" : "http"}://${address}`,
      nodeOptions: tls
        ? { ca: read(ca, "--tls-ca"), cert: read(cert, "--tls-cert"), key: read(key, "--tls-key") }
        : undefined,
    }),
    headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
    switches: new Set(switches.filter((name) => (opts as Record<string, unknown>)[name] === true)),
    options: Object.fromEntries(Object.keys(options).map((name) => [name, (opts as Record<string, string>)[name]])),
  };
}

/**
 * Whether err, thrown by a call whose last event has arrived, is only how
 * that call was closed. When a call ends while the client still has its
 * half of a stream open (as the examples do, to answer approvals), grpc-go
 * follows the trailers with RST_STREAM(NO_ERROR), and Node's HTTP/2 stream
 * can report that as "Premature close" if the reset arrives before the
 * response's end has been read (seen over TLS, a few runs in a hundred).
 */
export function closedAfterEnd(err: unknown): boolean {
  return err instanceof ConnectError && (err.cause as NodeJS.ErrnoException | undefined)?.code === "ERR_STREAM_PREMATURE_CLOSE";
}
