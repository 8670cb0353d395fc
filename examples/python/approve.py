"""Approves a tool call inline, on the open Generate stream, and prints the events.

The agent in examples/approval-start.json may call the demo server's echo
tool only with a person's approval. agentd sends an approval_request and
waits on the stream; this client answers with an approval_decision (always
yes here) and the generation goes on, its MCP server still running.

    make python-env && .venv/bin/python examples/python/approve.py [options] [address] [request.json]

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
    """The client half of the stream: start, then answers until None."""
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
    final, approved = "", 0
    with connect.channel(args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        try:
            for event in stub.Generate(requests(start, answers), timeout=30, metadata=connect.metadata(args)):
                kind = event.WhichOneof("event")
                if kind == "approval_request":
                    r = event.approval_request
                    print("approval_request", r.tool_name, r.arguments, "->", "approve")
                    answers.put(pb.GenerateRequest(approval_decision=pb.ApprovalDecision(
                        request_id=r.id, approved=True, digest=r.digest)))
                    approved += 1
                elif kind == "tool_call_finished":
                    print("tool_call_finished", event.tool_call_finished.tool_name, event.tool_call_finished.output)
                elif kind == "paused":
                    print("paused", event.paused.generation_id)
                elif kind == "completed":
                    final = "".join(p.text for p in event.completed.message.parts)
                    print("completed", final)
        finally:
            answers.put(None)
    if approved != 1 or "approved by a person" not in final:
        print("python approval example: the approved call did not complete", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    args = connect.parse("Approves a tool call inline, on the open Generate stream.",
                         "examples/approval-start.json", sys.argv[1:])
    sys.exit(connect.run(main, args))
