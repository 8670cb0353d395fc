"""A chat on a thread that agentd remembers: each line of standard input is a
user message, answered on one thread whose id the example keeps in a file, so
that the next run continues the conversation, even against an agentd
restarted since.

    make python-env && .venv/bin/python examples/python/chat.py [options] [address]

--state names the file (default chat-thread.txt): without it, the example
creates a thread and writes its id there. Each generation sends only the new
line: agentd adds the thread's items before it. At the end the example lists
the thread's items. The agent is the "mock" provider, which answers
"Mock response to: <the line>"; put yours in AGENT. The other options
(--token, --tls-ca, --tls-cert, --tls-key) are every example's: see
examples/python/connect.py.
"""
import sys

from agentd.v1 import agent_pb2
from agentd.v1 import agent_service_pb2 as pb
from agentd.v1 import agent_service_pb2_grpc as pb_grpc
from agentd.v1 import message_pb2
from agentd.v1 import thread_pb2

import connect
import reconnect

# It has no tools, so nothing needs approving.
AGENT = agent_pb2.Agent(provider="mock", instructions="You are a friendly chat agent.")
# The application's id of the person chatting, kept in the thread's metadata
# (ListThreads finds a person's threads by it).
END_USER = "user-1"


def thread(stub, state, md):
    """The id of the thread kept in the file state, or of a new one, written there."""
    try:
        with open(state, encoding="utf-8") as f:
            thread_id = f.read().strip()
    except FileNotFoundError:
        t = stub.CreateThread(thread_pb2.CreateThreadRequest(metadata={"end_user": END_USER}), metadata=md).thread
        print("created", t.thread_id)
        with open(state, "w", encoding="utf-8") as f:
            f.write(t.thread_id + "\n")
        return t.thread_id
    t = stub.GetThread(thread_pb2.GetThreadRequest(thread_id=thread_id), metadata=md).thread
    print(f"continuing {thread_id} ({t.item_count} items)")
    return thread_id


def say(stub, thread_id, line, md):
    """Runs a generation on the thread with line as the user's message, printing its text as it streams.

    (A UI would also take back the text of a turn_withdrawn, as demo.py does with reconnect.Text.)
    """
    message = message_pb2.Message(role=message_pb2.ROLE_USER, parts=[message_pb2.Part(text=line)])
    start = pb.StartGeneration(agent=AGENT, thread_id=thread_id, messages=[message])
    print("agent: ", end="", flush=True)
    for event in reconnect.generate(stub, pb.GenerateRequest(start=start), timeout=60, metadata=md):
        kind = event.WhichOneof("event")
        if kind == "text_delta":
            print(event.text_delta.text, end="", flush=True)
        elif kind == "completed":
            print()


def print_items(stub, thread_id, md):
    """Prints the thread's items, oldest first, page by page."""
    print("the thread holds:")
    request = thread_pb2.ListThreadItemsRequest(thread_id=thread_id)
    while True:
        page = stub.ListThreadItems(request, metadata=md)
        for item in page.items:
            role = message_pb2.Role.Name(item.message.role).removeprefix("ROLE_").lower()
            print(f"  {item.position} {role}: {''.join(p.text for p in item.message.parts)}")
        if not page.next_page_token:
            return
        request.page_token = page.next_page_token


def main(args) -> int:
    md = connect.metadata(args)
    with connect.channel(args) as channel:
        stub = pb_grpc.AgentServiceStub(channel)
        thread_id = thread(stub, args.state, md)
        for line in sys.stdin:
            say(stub, thread_id, line.rstrip("\n"), md)
        print_items(stub, thread_id, md)
    return 0


if __name__ == "__main__":
    args = connect.parse("A chat on a thread that agentd remembers.", None, sys.argv[1:],
                         options={"state": ("chat-thread.txt", "the file that keeps the thread's id")})
    sys.exit(connect.run(main, args))
