"""Asks for the final answer as data, and decodes it into a dataclass.

The agent in examples/structured-start.json calls the demo server's echo
tool, then answers; this example sets its output (Agent.output) to a
Ticket's JSON Schema, so the answer must be JSON that fits it, which
agentd checks and sends in the completed event (completed.structured, a
google.protobuf.Value). An answer the schema refuses arrives as
output_invalid, and the model gets a turn to repair it.

    make python-env && .venv/bin/python examples/python/structured.py [options] [address] [request.json]

Its options (--token, --tls-ca, --tls-cert, --tls-key) are every
example's: see examples/python/connect.py.
"""
import sys
from dataclasses import dataclass
from typing import Literal

from google.protobuf import json_format

from agentd.v1 import agent_service_pb2 as pb
from agentd.v1 import agent_service_pb2_grpc as pb_grpc

import connect


@dataclass
class Ticket:
    """The answer asked for."""
    title: str
    priority: Literal["low", "medium", "high"]
    tags: list[str]

    @classmethod
    def from_json(cls, value) -> "Ticket":
        """The ticket in value, the answer decoded from JSON; the schema has checked its shape."""
        return cls(title=value["title"], priority=value["priority"], tags=list(value["tags"]))


# Ticket's JSON Schema. It keeps the rules of the providers that hold a
# model to a schema exactly (every object closed, every property
# required), so Output.strict can ask them to.
TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "The problem, in a few words."},
        "priority": {"type": "string", "enum": ["low", "medium", "high"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "priority", "tags"],
    "additionalProperties": False,
}


def main(args) -> int:
    with open(args.request, encoding="utf-8") as f:
        start = json_format.Parse(f.read(), pb.StartGeneration())
    output = start.agent.output
    output.name = "ticket"
    output.description = "A ticket filed from the user's report."
    output.schema.update(TICKET_SCHEMA)
    output.strict = True
    ticket = None
    with connect.channel(args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        for event in stub.Generate(iter([pb.GenerateRequest(start=start)]), timeout=30,
                                   metadata=connect.metadata(args)):
            kind = event.WhichOneof("event")
            if kind == "started":
                print("started", event.started.generation_id)
            elif kind == "tool_call_finished":
                print("tool_call_finished", event.tool_call_finished.tool_name, event.tool_call_finished.output)
            elif kind == "output_invalid":
                o = event.output_invalid
                print(f"output_invalid turn {o.turn} (repair {str(o.repair).lower()}):", "; ".join(o.errors))
            elif kind == "completed" and event.completed.HasField("structured"):
                ticket = Ticket.from_json(json_format.MessageToDict(event.completed.structured))
    if ticket is None:
        print("python structured example: the generation completed without a structured answer", file=sys.stderr)
        return 1
    print(f"ticket: [{ticket.priority}] {ticket.title} ({', '.join(ticket.tags)})")
    return 0


if __name__ == "__main__":
    args = connect.parse("Asks for the final answer as data, and decodes it into a dataclass.",
                         "examples/structured-start.json", sys.argv[1:])
    sys.exit(connect.run(main, args))
