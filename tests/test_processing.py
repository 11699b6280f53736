"""
The processing model's order, pinned for each consumer aguikit offers.

The specification (``basic/processing.mdx``) orders a consumer's stages: producer,
compatibility boundary, middleware, enforcement, chunk expansion, verification,
application, on every path including reconnection, and puts the same boundary on what a
consumer sends.  ``docs/DESIGN.md`` ("The processing order is the specification's") says
where each of aguikit's stages sits; these tests hold it from outside, by what each stage
receives:

* middleware (``Agent.use``) sees a retired ``THINKING_*`` event already translated and a
  newer producer's material whole: an undeclared member, an unknown event type, a chunk
  before its expansion;
* application code (``Update.event``, subscribers) never sees what enforcement strips: the
  member is absent from the event it gets, with a warning naming its JSON pointer, and a
  dropped event never arrives;
* a malformed chunk is rejected by enforcement with the error its plain form gets, never
  defaulted, never expanded, whichever consumer, and also when a middleware built it;
* a resumed stream keeps that order after the reconnect;
* the run input is stripped of unrecognised material (with a warning) and a malformed known
  field fails before anything is sent.

The agent is an ``httpx.MockTransport`` replaying fixed SSE frames (with ids, so the client
can resume): what is under test is the consumer, not a server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx
import pytest
from tests.support import (
    run_finished,
    run_started,
    sse_bytes,
    text_content,
    text_end,
    text_message,
    text_start,
    thinking,
)

from aguikit import Agent, AgentClient, Session
from aguikit.agent import EventLike
from aguikit.errors import SchemaValidationError
from aguikit.models import RunAgentInput, TextMessageChunkEvent
from aguikit.wire import to_wire

URL = "http://agent.test/agent"
INPUT = {"threadId": "t1", "runId": "r1", "messages": []}

NEWER_PRODUCER = [
    run_started(),
    thinking("START"),
    thinking("TEXT_MESSAGE_START"),
    thinking("TEXT_MESSAGE_CONTENT", delta="Let me see.", futureProp=1),
    thinking("TEXT_MESSAGE_END"),
    thinking("END"),
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "Hel", "futureProp": 2},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "lo"},
    {"type": "FUTURE_EVENT", "payload": 3},
    text_start("m2", colour="red"),
    text_content("m2", "Bye"),
    text_end("m2"),
    run_finished(),
]
"""An old producer's retired shapes and a newer one's additions, in one run."""

TRANSLATED = [
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_END",
]
"""The five THINKING_* events of the run, as the compatibility boundary hands them on."""

SEEN_BY_MIDDLEWARE = [
    "RUN_STARTED",
    *TRANSLATED,
    "TEXT_MESSAGE_CHUNK",
    "TEXT_MESSAGE_CHUNK",
    "FUTURE_EVENT",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "RUN_FINISHED",
]
"""Translated, not yet stripped, dropped or expanded."""

SEEN_BY_APPLICATION = [
    "RUN_STARTED",
    *TRANSLATED,
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "RUN_FINISHED",
]
"""Enforced, expanded (the chunk stream closed by the next explicit message), verified."""

STRIPPED = [
    "/futureProp on REASONING_MESSAGE_CONTENT",
    "/futureProp on TEXT_MESSAGE_CHUNK",
    "/colour on TEXT_MESSAGE_START",
]
"""Each pointer enforcement removed, on the event (after translation) it removed it from."""


class Agent_:
    """Replays SSE frames numbered from 1; ``cut_after`` ends the first answer early, so the
    client must resume with ``Last-Event-ID``.  Records each request body and header."""

    def __init__(self, events: Sequence[dict[str, Any]], *, cut_after: int | None = None):
        self.frames = [
            f"id: {n}\n".encode() + sse_bytes([event]) for n, event in enumerate(events, 1)
        ]
        self.cut_after = cut_after
        self.bodies: list[Any] = []
        self.resumed_from: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        last = request.headers.get("last-event-id")
        self.resumed_from.append(last)
        start = int(last) if last else 0
        end = self.cut_after if last is None and self.cut_after is not None else None
        body = b"".join(self.frames[start:end])
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def _recorder(seen: list[EventLike]) -> Callable[[AsyncIterator[EventLike]], Any]:
    async def middleware(events: AsyncIterator[EventLike]) -> AsyncIterator[EventLike]:
        async for item in events:
            seen.append(item)
            yield item

    return middleware


def _kind(item: EventLike) -> str:
    return str(item["type"] if isinstance(item, dict) else getattr(item, "type", None))


def _stripped(warnings: Sequence[Any]) -> list[str]:
    """``<pointer> on <EVENT_TYPE>`` of each unknown-member warning, in order."""
    out = []
    for warning in warnings:
        if warning.code == "unknown-member":
            pointer = warning.message.split("'")[1]
            event_type = warning.message.split(" on ")[1].split(":")[0]
            out.append(f"{pointer} on {event_type}")
    return out


def _assert_enforced(delivered: Sequence[Any], warnings: Sequence[Any]) -> None:
    """What application code got: no stripped member, no dropped event, warnings naming both."""
    assert SEEN_BY_APPLICATION == [event.type for event in delivered]
    assert all(event.extra_members is None for event in delivered)
    assert not any({"futureProp", "colour"} & set(to_wire(event)) for event in delivered)
    assert STRIPPED == _stripped(warnings)
    codes = [w.code for w in warnings]
    assert 1 == codes.count("unknown-event")
    assert 5 == codes.count("deprecated-event")


def _run_agent(replay: Agent_, seen: list[EventLike], delivered: list[Any]) -> Agent:
    agent = Agent(URL, transport=replay.transport(), thread_id="t1", backoff=0.001)
    agent.use(_recorder(seen))
    agent.subscribe(on_event=delivered.append)
    asyncio.run(agent.run())
    return agent


# ---- what middleware sees, what application code sees ------------------------------------


def test_middleware_sees_retired_shapes_translated_and_newer_material_whole() -> None:
    """Compatibility boundary, then middleware, then enforcement: the shim sees REASONING_*,
    the undeclared members, the unknown event and the chunks as they were sent."""
    seen: list[EventLike] = []

    _run_agent(Agent_(NEWER_PRODUCER), seen, [])

    assert SEEN_BY_MIDDLEWARE == [_kind(item) for item in seen]
    assert 1 == seen[3]["futureProp"] and "Let me see." == seen[3]["delta"]
    assert seen[3]["messageId"] == seen[2]["messageId"]  # minted once, at the boundary
    assert 2 == seen[6]["futureProp"]
    assert {"type": "FUTURE_EVENT", "payload": 3} == seen[8]
    assert "red" == seen[9]["colour"]


def test_agent_application_code_never_sees_what_enforcement_strips() -> None:
    """Subscribers get every event without the stripped members and never the dropped one;
    each removal is a warning naming its pointer on the event it was removed from."""
    delivered: list[Any] = []

    agent = _run_agent(Agent_(NEWER_PRODUCER), [], delivered)

    assert agent.session is not None
    _assert_enforced(delivered, agent.session.warnings)


def test_agent_client_and_session_enforce_in_the_same_order() -> None:
    """No middleware: one call runs boundary and enforcement, with the same result (the
    deprecated event's warning comes before the strip of its unknown member)."""
    client = AgentClient(URL, async_transport=Agent_(NEWER_PRODUCER).transport())

    async def run() -> list[Any]:
        return [update.event async for update in client.run(INPUT)]

    _assert_enforced(asyncio.run(run()), client.session.warnings)
    session = Session()
    updates = session.feed_all(NEWER_PRODUCER)
    session.finish()
    _assert_enforced([update.event for update in updates], session.warnings)
    translated = [w.code for w in session.warnings if w.event_index == 3]
    assert ["deprecated-event", "unknown-member"] == translated


# ---- a malformed chunk ----------------------------------------------------------------------

MALFORMED_ROLE = {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": 42, "delta": "x"}


def _rejection(error: SchemaValidationError) -> tuple[str | None, int | None, set[str]]:
    return error.rule, error.event_index, {issue.pointer for issue in error.issues}


def test_a_chunk_with_a_malformed_role_is_rejected_as_its_plain_form_is() -> None:
    """Enforcement meets the chunk first and rejects it exactly as it rejects the role on a
    plain TEXT_MESSAGE_START: never defaulted to assistant, never expanded.  (A role that is
    a string outside the closed set is another question, which the specification's note on
    closed string sets leaves open; a number is malformed however that is settled.)"""
    plain = {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": 42}
    verdicts = []
    for event in (MALFORMED_ROLE, plain):
        session = Session()
        session.feed(run_started())
        with pytest.raises(SchemaValidationError) as caught:
            session.feed(event)
        verdicts.append(_rejection(caught.value))
        assert [] == session.messages
        assert [] == session.normalizer.streams()

    assert ("AGUI-S001", 1, {"/role"}) == verdicts[0] == verdicts[1]


def test_a_malformed_chunk_reaches_middleware_as_sent_and_fails_the_run_after_it() -> None:
    """Middleware sees the chunk unjudged; enforcement after it fails the run, and no
    subscriber saw a message opened from it."""
    seen: list[EventLike] = []
    delivered: list[Any] = []

    with pytest.raises(SchemaValidationError) as caught:
        _run_agent(Agent_([run_started(), MALFORMED_ROLE, run_finished()]), seen, delivered)

    assert MALFORMED_ROLE == seen[1]
    assert ("AGUI-S001", 1, {"/role"}) == _rejection(caught.value)
    assert ["RUN_STARTED"] == [event.type for event in delivered]


def test_a_typed_chunk_a_middleware_builds_is_judged_like_the_networks() -> None:
    """A middleware yielding a typed chunk with a malformed role does not slip past
    enforcement because typed events are trusted: it is rejected, never expanded."""

    async def corrupt(events: AsyncIterator[EventLike]) -> AsyncIterator[EventLike]:
        async for item in events:
            if _kind(item) == "TEXT_MESSAGE_CHUNK":
                yield TextMessageChunkEvent(message_id="m1", role=42, delta="x")  # type: ignore[arg-type]
            else:
                yield item

    agent = Agent(URL, transport=Agent_(NEWER_PRODUCER).transport(), thread_id="t1")
    agent.use(corrupt)

    with pytest.raises(SchemaValidationError) as caught:
        asyncio.run(agent.run())

    assert ("AGUI-S001", 6, {"/role"}) == _rejection(caught.value)


# ---- reconnection -------------------------------------------------------------------------


@pytest.mark.parametrize("cut_after", [1, 3, 7, 9])
def test_a_resumed_stream_goes_through_the_same_stages_after_the_reconnect(
    cut_after: int,
) -> None:
    """The first answer ends early, the client resumes with Last-Event-ID: what middleware
    and application code see, and the warnings, are the uninterrupted run's."""
    replay = Agent_(NEWER_PRODUCER, cut_after=cut_after)
    seen: list[EventLike] = []
    delivered: list[Any] = []

    agent = _run_agent(replay, seen, delivered)

    assert [None, str(cut_after)] == replay.resumed_from
    assert SEEN_BY_MIDDLEWARE == [_kind(item) for item in seen]
    assert agent.session is not None
    _assert_enforced(delivered, agent.session.warnings)
    client = AgentClient(
        URL, async_transport=Agent_(NEWER_PRODUCER, cut_after=cut_after).transport(), backoff=0
    )

    async def run() -> list[Any]:
        return [update.event async for update in client.run(INPUT)]

    _assert_enforced(asyncio.run(run()), client.session.warnings)


# ---- outgoing material --------------------------------------------------------------------


def test_unrecognised_material_is_stripped_from_the_run_input_before_sending() -> None:
    """An undeclared member, at the top or nested, and a message of an unknown role are
    removed from the body the agent receives, each named in a warning."""
    replay = Agent_([run_started(), run_finished()])
    client = AgentClient(URL, async_transport=replay.transport())
    request = {
        **INPUT,
        "futureProp": 1,
        "messages": [
            {"id": "u1", "role": "user", "content": "hi", "mood": "curious"},
            {"id": "x1", "role": "robot", "content": "beep"},
            {"id": "a1", "role": "activity", "activityType": "plan", "content": {"steps": []}},
        ],
        "tools": [{"name": "f", "description": "d", "parameters": {"any": "schema"}, "x": 1}],
    }

    async def run() -> None:
        async for _ in client.run(request):
            pass

    asyncio.run(run())

    (body,) = replay.bodies
    assert {"threadId", "runId", "messages", "tools", "protocolVersion"} == set(body)
    assert [{"id": "u1", "role": "user", "content": "hi"}] == body["messages"]
    assert [{"name": "f", "description": "d", "parameters": {"any": "schema"}}] == body["tools"]
    removed = [w.split("'")[1] for w in client.request_warnings]
    assert ["/messages/0/mood", "/messages/1", "/futureProp", "/tools/0/x", "a1"] == removed
    assert [*["AGUI-W002"] * 4, "AGUI-W023"] == [w.split()[0] for w in client.request_warnings]


def test_activity_messages_never_travel_back_to_the_producer() -> None:
    """An ``Agent`` keeps the activity a run showed, and leaves it out of the next request
    (run-input: "a consumer MUST strip them from messages before sending")."""
    activity = {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": "a1",
        "activityType": "plan",
        "content": {"steps": ["look"]},
    }
    replay = Agent_([run_started(), activity, *text_message("m1", "ok"), run_finished()])
    agent = Agent(URL, transport=replay.transport(), thread_id="t1")
    asyncio.run(agent.run())
    replay.frames = replay.frames[:1] + replay.frames[-1:]

    asyncio.run(agent.run())

    assert ["activity", "assistant"] == [m.role for m in agent.messages]
    assert ["m1"] == [m["id"] for m in replay.bodies[1]["messages"]]


def test_the_agents_outgoing_input_is_stripped_too() -> None:
    """``Agent`` builds its body through the same boundary: a tool with an undeclared member
    goes out without it."""
    replay = Agent_([run_started(), run_finished()])
    agent = Agent(
        URL,
        transport=replay.transport(),
        thread_id="t1",
        tools=[{"name": "f", "description": "d", "parameters": {}, "colour": "red"}],
    )

    asyncio.run(agent.run())

    assert [{"name": "f", "description": "d", "parameters": {}}] == replay.bodies[0]["tools"]


@pytest.mark.parametrize(
    "request_",
    [
        {**INPUT, "threadId": 42},
        RunAgentInput(thread_id=42, run_id="r1", messages=[], tools=[], context=[]),  # type: ignore[arg-type]
    ],
    ids=["mapping", "typed"],
)
def test_a_malformed_known_field_fails_before_anything_is_sent(request_: Any) -> None:
    """A wire mapping or a typed input: the malformed field is fatal, named by its pointer,
    and the agent never receives a request."""
    replay = Agent_([run_started(), run_finished()])
    client = AgentClient(URL, async_transport=replay.transport())

    async def run() -> None:
        async for _ in client.run(request_):
            pass

    with pytest.raises(SchemaValidationError) as caught:
        asyncio.run(run())

    assert ["/threadId"] == [issue.pointer for issue in caught.value.issues]
    assert [] == replay.bodies
