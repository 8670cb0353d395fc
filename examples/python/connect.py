"""How the Python examples reach agentd, with the options every example takes.

    --token     API key, sent as "authorization: Bearer" (env AGENTD_TOKEN)
    --tls-ca    connect over TLS, trusting the CA certificates in this PEM file (env AGENTD_TLS_CA)
    --tls-cert  connect over TLS, presenting this PEM client certificate (env AGENTD_TLS_CERT)
    --tls-key   the PEM private key of --tls-cert (env AGENTD_TLS_KEY)

and two positional arguments, agentd's address and the request file. The
address is the argument, else AGENTD_ADDR, else 127.0.0.1:7070 (where
`make run` starts agentd). With any TLS option the channel is TLS (no
--tls-ca: the system's roots), plaintext otherwise; a flag overrides its
environment variable. The token goes over plaintext too, for an agentd on
loopback: use TLS anywhere else.
"""
import argparse
import os
import sys

import grpc

DEFAULT_ADDRESS = "127.0.0.1:7070"


def parse(description, request, argv, switches=None, options=None):
    """The options and positional arguments in argv (request: the default request file; None: no request file).

    switches are an example's own on/off options, {name: help}; options its
    own options with a value, {name: (default, help)}.
    """
    p = argparse.ArgumentParser(description=description)
    for name, text in (switches or {}).items():
        p.add_argument("--" + name, action="store_true", help=text)
    for name, (default, text) in (options or {}).items():
        p.add_argument("--" + name, default=default, help=f"{text} (default {default})")
    p.add_argument("address", nargs="?", default=os.environ.get("AGENTD_ADDR") or DEFAULT_ADDRESS,
                   help=f"agentd's address, host:port (env AGENTD_ADDR, else {DEFAULT_ADDRESS})")
    if request is not None:
        p.add_argument("request", nargs="?", default=request)
    p.add_argument("--token", default=os.environ.get("AGENTD_TOKEN"),
                   help='API key, sent as "authorization: Bearer" (env AGENTD_TOKEN)')
    p.add_argument("--tls-ca", default=os.environ.get("AGENTD_TLS_CA"),
                   help="connect over TLS, trusting the CA certificates in this PEM file (env AGENTD_TLS_CA)")
    p.add_argument("--tls-cert", default=os.environ.get("AGENTD_TLS_CERT"),
                   help="connect over TLS, presenting this PEM client certificate (env AGENTD_TLS_CERT)")
    p.add_argument("--tls-key", default=os.environ.get("AGENTD_TLS_KEY"),
                   help="the PEM private key of --tls-cert (env AGENTD_TLS_KEY)")
    args = p.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    return args


def _read(path, option):
    """The bytes of the file at path, or None without a path.

    An error names the option, not the path: a key's path is as secret as the key.
    """
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise SystemExit(f"{option}: {err.strerror}") from None


def channel(args):
    """A channel to args.address: TLS when any TLS option is set, plaintext otherwise."""
    if not (args.tls_ca or args.tls_cert or args.tls_key):
        return grpc.insecure_channel(args.address)
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(args.tls_ca, "--tls-ca"),
        private_key=_read(args.tls_key, "--tls-key"),
        certificate_chain=_read(args.tls_cert, "--tls-cert"))
    return grpc.secure_channel(args.address, creds)


def metadata(args):
    """The metadata every call sends: the token, if any."""
    return [("authorization", "Bearer " + args.token)] if args.token else None


def not_listening(err):
    """Whether err is a call's failure to connect because nothing listens at the address.

    gRPC reports the refused connection only in the status's details.
    """
    return err.code() == grpc.StatusCode.UNAVAILABLE and "connection refused" in (err.details() or "").lower()


def run(main, args):
    """main(args)'s exit status; a call that found nothing listening at args.address says so."""
    try:
        return main(args)
    except grpc.RpcError as err:
        if not not_listening(err):
            raise
        name = os.path.basename(sys.argv[0])
        print(f"{name}: agentd is not listening at {args.address}: start it (make run) or set AGENTD_ADDR",
              file=sys.stderr)
        return 1
