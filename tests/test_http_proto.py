"""
``AgentClient(binary=True)`` asks for both media types and decodes whichever the agent chose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from tests.servers import RecordingServer, Route, serve
from tests.support import split_every

from aguikit._generated import models as m
from aguikit.client import AgentClient
from aguikit.encode import encode_proto
from aguikit.errors import ContentTypeError
from aguikit.transport.sse import encode_bytes

PROTO = "application/vnd.ag-ui.event+proto"
RUN = {"threadId": "t1", "runId": "r1"}
GOOD: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", **RUN},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello, wörld 🌞"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}},
    {"type": "RUN_FINISHED", **RUN},
]
BINARY = b"".join(encode_proto(e) for e in GOOD)
INPUT = m.RunAgentInput(thread_id="t1", run_id="r1", messages=[])


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    with serve() as running:
        yield running


def test_binary_client_asks_for_both_and_reads_protobuf(server: RecordingServer) -> None:
    """The Accept header names both types; a protobuf answer split anywhere is decoded."""
    url = server.add("/agent", Route(split_every(BINARY, [1, 3, 5, 64]), content_type=PROTO))
    client = AgentClient(url, binary=True)

    updates = list(client.run_sync(INPUT))

    assert f"{PROTO}, text/event-stream" == server.requests[0].headers["accept"]
    assert [e["type"] for e in GOOD] == [u.event.type for u in updates]
    assert "Hello, wörld 🌞" == client.messages[0].content
    assert {"n": 1} == client.state


def test_binary_client_still_reads_an_sse_answer(server: RecordingServer) -> None:
    """An agent that chose SSE is read as SSE."""
    body = b"".join(encode_bytes(e) for e in GOOD)
    url = server.add("/agent", Route([body]))

    updates = list(AgentClient(url, binary=True).run_sync(INPUT))

    assert len(GOOD) == len(updates)


def test_async_binary_run_matches_the_sync_one(server: RecordingServer) -> None:
    """``run`` decodes protobuf like ``run_sync``."""
    url = server.add("/agent", Route(split_every(BINARY, [2, 9]), content_type=PROTO))
    client = AgentClient(url, binary=True)

    async def collect() -> list[str]:
        return [u.event.type async for u in client.run(INPUT)]

    assert [e["type"] for e in GOOD] == asyncio.run(collect())


def test_a_protobuf_answer_nobody_asked_for_is_refused(server: RecordingServer) -> None:
    """Without ``binary=True`` the client asked for SSE only: protobuf is a ContentTypeError."""
    url = server.add("/agent", Route([BINARY], content_type=PROTO))

    with pytest.raises(ContentTypeError):
        list(AgentClient(url).run_sync(INPUT))
