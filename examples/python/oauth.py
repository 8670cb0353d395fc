"""Runs a generation whose MCP server requires OAuth, and has its user authorize agentd there.

The agent in examples/oauth-start.json declares a url MCP server with an
empty oauth block: agentd is the server's OAuth client (it discovers the
authorization server, registers or uses its client ID metadata document,
and keeps the tokens per end user). Replace its url with your server's.
When agentd holds no token for the end user, it sends an
authorization_request and waits on the stream; this client prints the URL,
reads back the URL the browser was sent to after authorizing (its query has
the code and state), and answers with an authorization_response. agentd
exchanges the code and the generation goes on; a later generation for the
same end user is not asked again.

    make python-env && .venv/bin/python examples/python/oauth.py [options] [address] [request.json]

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
    completed = False
    with connect.channel(args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        try:
            # A person authorizes: give them time.
            for event in stub.Generate(requests(start, answers), timeout=600, metadata=connect.metadata(args)):
                kind = event.WhichOneof("event")
                if kind == "started":
                    print("started", event.started.generation_id, "tools:", ", ".join(t.name for t in event.started.tools))
                elif kind == "authorization_request":
                    r = event.authorization_request
                    print(f"authorization_request from {r.server_name} (scopes {' '.join(r.scopes)}): open this URL and authorize:")
                    print("  " + r.url)
                    print("then paste the URL your browser was sent to: ", end="", flush=True)
                    line = sys.stdin.readline()
                    if not line:
                        # No answer: half-close, and agentd ends (or pauses) the generation.
                        answers.put(None)
                        continue
                    answers.put(pb.GenerateRequest(authorization_response=pb.AuthorizationResponse(
                        request_id=r.id, redirect_url=line.strip())))
                elif kind == "tool_call_finished":
                    print("tool_call_finished", event.tool_call_finished.tool_name, event.tool_call_finished.output)
                elif kind == "completed":
                    print("completed", "".join(p.text for p in event.completed.message.parts))
                    completed = True
        finally:
            answers.put(None)
    if not completed:
        print("python oauth example: the generation did not complete", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    args = connect.parse("Runs a generation whose MCP server requires OAuth, answering its authorization request.",
                         "examples/oauth-start.json", sys.argv[1:])
    sys.exit(connect.run(main, args))
