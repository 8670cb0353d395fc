"""Sends a deliberately invalid request and prints each field violation.

agentd checks a whole request before anything connects and reports every
problem at once: the call fails INVALID_ARGUMENT, and the status details
(the grpc-status-details-bin trailer) hold a google.rpc.BadRequest listing
each field and what is wrong with it. The google.rpc messages come from
gen/python/google/rpc, generated from third_party/googleapis, so that
nothing beyond grpcio and protobuf is needed (not grpcio-status, which
Debian does not package).

    make python-env && .venv/bin/python examples/python/bad_request.py [options] [address] [request.json]

Its options (--token, --tls-ca, --tls-cert, --tls-key) are every
example's: see examples/python/connect.py.
"""
import sys

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from agentd.v1 import agent_service_pb2 as pb
from agentd.v1 import agent_service_pb2_grpc as pb_grpc

import connect


def field_violations(err: grpc.RpcError):
    """The BadRequest field violations in a failed call's status details."""
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                yield from bad.field_violations


def main(args) -> int:
    with open(args.request, encoding="utf-8") as f:
        start = json_format.Parse(f.read(), pb.StartGeneration())
    with connect.channel(args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        try:
            for event in stub.Generate(iter([pb.GenerateRequest(start=start)]), timeout=30,
                                       metadata=connect.metadata(args)):
                print("unexpected event", event.WhichOneof("event"))
        except grpc.RpcError as err:
            if connect.not_listening(err):
                raise
            print(err.code().name, err.details())
            violations = list(field_violations(err))
            for v in violations:
                print(f"  {v.field}: {v.description}")
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT and len(violations) > 1:
                return 0
    print("python example: the bad request was not refused with its field violations", file=sys.stderr)
    return 1


if __name__ == "__main__":
    args = connect.parse("Sends a deliberately invalid request and prints each field violation.",
                         "examples/bad-request.json", sys.argv[1:])
    sys.exit(connect.run(main, args))
