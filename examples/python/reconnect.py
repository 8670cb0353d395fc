"""Follows a generation across broken streams: the reconnect loop that the
Python examples share, kept small enough to copy.

A Generate stream breaks when agentd's replica dies or the network drops;
the generation goes on (another replica adopts it), and the client
attaches to it again with the last sequence number it saw. A detached
start (StartGeneration.detach) ends its stream after started, and the loop
attaches the same way.
"""
import random
import time

import grpc

from agentd.v1 import agent_service_pb2 as pb


def generate(stub, first, *, attempts=8, backoff=0.2, max_backoff=2.0, on_attach=None, **call):
    """Yields the events of the generation that first (a start or a resume) begins.

    Each stream sends one message and half-closes (the loop answers
    nothing: a generation that asks for approvals or function results
    pauses). Every event is yielded once, in order of its sequence number,
    until completed or paused; another status ends the loop with its
    grpc.RpcError. When a stream ends before the generation does, with
    UNAVAILABLE (the replica died, the connection dropped) or without a
    status (a detached start), the loop opens another whose only message is
    attach {generation_id, after_sequence: the last one yielded}: after a
    wait of backoff seconds (halved at random, doubled each time up to
    max_backoff) for UNAVAILABLE, at once otherwise; it gives up after
    attempts in a row without a new event and raises the last error. A
    stream that breaks before started is raised, not retried: the generation
    may or may not exist, and starting it again could run it twice.
    on_attach(generation_id, after_sequence, error or None) is told of each
    attach. call (timeout, metadata) goes with every call.
    """
    gen_id, last, failures, wait = None, 0, 0, backoff
    done = False  # the generation completed or paused
    request = first
    while True:
        # An attach waits for the channel to connect (within the call's
        # timeout) instead of failing at once while it reconnects.
        stream = stub.Generate(iter([request]), wait_for_ready=gen_id is not None, **call)
        try:
            for event in stream:
                if 0 < event.sequence <= last:
                    continue  # yielded already (the server does not replay these; this is defence)
                last, failures, wait = max(last, event.sequence), 0, backoff
                kind = event.WhichOneof("event")
                if kind == "started":
                    gen_id = event.started.generation_id
                yield event
                done = done or kind in ("completed", "paused")
            error = None  # ended without a status, as a detached start's stream does
        except grpc.RpcError as err:
            if not done and (err.code() != grpc.StatusCode.UNAVAILABLE or gen_id is None):
                raise
            error = err
        finally:
            stream.cancel()  # ends the stream if the caller stopped early; a no-op otherwise
        if done:
            return  # and however its stream ended, nothing is missing
        if gen_id is None:
            raise RuntimeError("the stream ended before the generation started")
        if failures >= attempts:
            if error is not None:
                raise error
            raise RuntimeError(f"generation {gen_id}: gave up after {failures} attempts to attach")
        if error is not None:
            time.sleep(random.uniform(wait / 2, wait))
            wait = min(2 * wait, max_backoff)
        if on_attach:
            on_attach(gen_id, last, error)
        failures += 1
        request = pb.GenerateRequest(attach=pb.AttachGeneration(generation_id=gen_id, after_sequence=last))


class Text:
    """The model's text as a generation's events tell it.

    text_delta adds to it; turn_withdrawn takes back what the withdrawn turn
    said (the deltas from its from_sequence on), since the turn is asked again.
    """

    def __init__(self):
        self._deltas = []  # (sequence, text)

    def apply(self, event):
        """Adds event's text, or takes a withdrawn turn's back and returns it."""
        kind = event.WhichOneof("event")
        if kind == "text_delta":
            self._deltas.append((event.sequence, event.text_delta.text))
        if kind != "turn_withdrawn":
            return ""
        start = event.turn_withdrawn.from_sequence
        withdrawn = "".join(t for s, t in self._deltas if s >= start)
        self._deltas = [(s, t) for s, t in self._deltas if s < start]
        return withdrawn

    def __str__(self):
        return "".join(t for _, t in self._deltas)
