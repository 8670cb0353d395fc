"""Runs the demo generation against a running agentd and prints its events,
reattaching if its stream breaks (examples/python/reconnect.py).

Runs in the virtual environment that `make python-env` makes (the pinned
grpcio and protobuf of requirements.txt, and the code generated in
gen/python on its path):

    make python-env && .venv/bin/python examples/python/demo.py [options] [address] [request.json]

--detach starts the generation detached: agentd ends the stream after
started, and the example attaches to follow it to its end. The other
options (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
see examples/python/connect.py.
"""
import sys

from google.protobuf import json_format

from agentd.v1 import agent_service_pb2 as pb
from agentd.v1 import agent_service_pb2_grpc as pb_grpc

import connect
import reconnect


def on_attach(generation_id, after_sequence, error):
    why = error.details() if error is not None else "the stream ended before the generation did"
    print(f"attach {generation_id} after {after_sequence} ({why})")


def main(args) -> int:
    with open(args.request, encoding="utf-8") as f:
        start = json_format.Parse(f.read(), pb.StartGeneration())
    start.detach = args.detach
    text = reconnect.Text()  # what a UI would show of the model's text
    final = ""
    with connect.channel(args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        # A minute per stream: long enough for another replica to adopt the
        # generation of one that died (after its lease, 15 s by default).
        events = reconnect.generate(stub, pb.GenerateRequest(start=start), on_attach=on_attach,
                                    timeout=60, metadata=connect.metadata(args))
        for event in events:
            withdrawn = text.apply(event)
            kind = event.WhichOneof("event")
            if kind == "started":
                print("started", event.started.generation_id)
            elif kind == "text_delta":
                print("text_delta", repr(event.text_delta.text))
            elif kind == "tool_call_started":
                print("tool_call_started", event.tool_call_started.tool_name, event.tool_call_started.arguments)
            elif kind == "tool_progress":
                p = event.tool_progress
                print(f"tool_progress {p.call_id} {p.progress:g}/{p.total:g} {p.message}")
            elif kind == "tool_call_finished":
                print("tool_call_finished", event.tool_call_finished.tool_name, event.tool_call_finished.output)
            elif kind == "turn_withdrawn":
                w = event.turn_withdrawn
                print(f"turn_withdrawn {w.turn} ({w.reason}): discarding {withdrawn!r}, the turn is asked again")
            elif kind == "usage":
                repeated = " (repeated turn)" if event.usage.repeated else ""
                print(f"usage {event.usage.input_tokens} {event.usage.output_tokens}{repeated}")
            elif kind == "completed":
                final = "".join(p.text for p in event.completed.message.parts)
                print("completed", final)
    if "hello from agentd" not in final:
        print("python example: the generation did not complete with the demo answer", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    args = connect.parse("Runs the demo generation against a running agentd.",
                         "examples/demo-start.json", sys.argv[1:],
                         switches={"detach": "start the generation detached, then attach to follow it"})
    sys.exit(connect.run(main, args))
