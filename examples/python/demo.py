"""Runs the demo generation against a running agentd and prints its events.

Uses Debian's python3-grpcio and python3-protobuf and the code generated in
gen/python:

    PYTHONPATH=gen/python /usr/bin/python3 examples/python/demo.py [options] [address] [request.json]

With --token (or AGENTD_TOKEN) it sends that API key ("authorization:
Bearer"). With --tls-ca, --tls-cert or --tls-key (or AGENTD_TLS_CA,
AGENTD_TLS_CERT, AGENTD_TLS_KEY) it connects over TLS: trusting the CA
certificates in --tls-ca (none: the system's roots), and presenting
--tls-cert and --tls-key as its client certificate to an agentd that
requires one.
"""
import argparse
import os
import queue
import sys

import grpc
from google.protobuf import json_format

from agentd.v1 import agent_service_pb2 as pb
from agentd.v1 import agent_service_pb2_grpc as pb_grpc


def requests(start, answers):
    """The client half of the stream: start, then answers until None.

    Keeping the stream open (instead of ending the iterator after start) is
    what lets agentd wait for inline answers to approvals and function calls.
    """
    yield pb.GenerateRequest(start=start)
    while True:
        answer = answers.get()
        if answer is None:
            return
        yield answer


def read(path):
    """The bytes of the file at path, or None without a path."""
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


def channel_to(address, args):
    """A TLS channel when any TLS option is set, a plaintext one otherwise."""
    if not (args.tls_ca or args.tls_cert or args.tls_key):
        return grpc.insecure_channel(address)
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(args.tls_ca),
        private_key=read(args.tls_key),
        certificate_chain=read(args.tls_cert))
    return grpc.secure_channel(address, creds)


def main(args) -> int:
    with open(args.request, encoding="utf-8") as f:
        start = json_format.Parse(f.read(), pb.StartGeneration())
    answers = queue.Queue()
    final = ""
    with channel_to(args.address, args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        try:
            metadata = [("authorization", "Bearer " + args.token)] if args.token else None
            for event in stub.Generate(requests(start, answers), timeout=30, metadata=metadata):
                kind = event.WhichOneof("event")
                if kind == "started":
                    print("started", event.started.generation_id)
                elif kind == "text_delta":
                    print("text_delta", repr(event.text_delta.text))
                elif kind == "tool_call_started":
                    print("tool_call_started", event.tool_call_started.tool_name, event.tool_call_started.arguments)
                elif kind == "tool_call_finished":
                    print("tool_call_finished", event.tool_call_finished.tool_name, event.tool_call_finished.output)
                elif kind == "usage":
                    print("usage", event.usage.input_tokens, event.usage.output_tokens)
                elif kind == "completed":
                    final = "".join(p.text for p in event.completed.message.parts)
                    print("completed", final)
        finally:
            answers.put(None)
    if "hello from agentd" not in final:
        print("python example: the generation did not complete with the demo answer", file=sys.stderr)
        return 1
    return 0


def parse(argv):
    p = argparse.ArgumentParser(description="Runs the demo generation against a running agentd.")
    p.add_argument("address", nargs="?", default="127.0.0.1:7070")
    p.add_argument("request", nargs="?", default="examples/demo-start.json")
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


if __name__ == "__main__":
    sys.exit(main(parse(sys.argv[1:])))
