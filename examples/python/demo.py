"""Runs the demo generation against a running agentd and prints its events.

Uses Debian's python3-grpcio and python3-protobuf and the code generated in
gen/python:

    PYTHONPATH=gen/python /usr/bin/python3 examples/python/demo.py [options] [address] [request.json]

Its options (--token, --tls-ca, --tls-cert, --tls-key) are every
example's: see examples/python/connect.py.
"""
import queue
import sys

from google.protobuf import json_format

from agentd.v1 import agent_service_pb2 as pb
from agentd.v1 import agent_service_pb2_grpc as pb_grpc

import connect


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


def main(args) -> int:
    with open(args.request, encoding="utf-8") as f:
        start = json_format.Parse(f.read(), pb.StartGeneration())
    answers = queue.Queue()
    final = ""
    with connect.channel(args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        try:
            for event in stub.Generate(requests(start, answers), timeout=30, metadata=connect.metadata(args)):
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


if __name__ == "__main__":
    sys.exit(main(connect.parse("Runs the demo generation against a running agentd.",
                                "examples/demo-start.json", sys.argv[1:])))
