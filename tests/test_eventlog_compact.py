"""
The memory log keeps a run compact by construction (issue 28, item 4): every event once,
encoded as its SSE frame, the content deltas of a message or tool call, once older
than ``recent_events`` or once the run ended, as their joined text, and a stretch of
state events after a known state as one ``STATE_SNAPSHOT``.  What must hold
whatever the run and wherever a reader resumes: what it folds to is what an
uninterrupted reader folds to, with ids still counting 1..N, never a gap or a duplicate
(a duplicated or missing delta changes the folded text).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aguikit import Session
from aguikit.errors import PatchError
from aguikit.server.eventlog import MemoryEventLog
from aguikit.server.prelude import prelude
from aguikit.transport.sse import iter_frames
from aguikit.wire import to_wire

_TEXT = st.text(alphabet='ab é😀"\\\n', min_size=1, max_size=3)


@st.composite
def runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A run of text messages and tool calls, up to two open at once (their deltas
    interleaved), some deltas carrying a member that keeps them from being compacted,
    and state events between them: mostly deltas after a snapshot (or none), some that
    do not apply, some carrying a member that keeps them as sent, a snapshot now and then."""
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    if draw(st.integers(0, 3)):
        events.append({"type": "STATE_SNAPSHOT", "snapshot": {}})
    open_items: list[tuple[str, str]] = []
    made = 0
    for _ in range(draw(st.integers(1, 40))):
        action = draw(
            st.sampled_from(
                ["open", "delta", "delta", "delta", "close", "state", "state", "state", "odd"]
            )
        )
        if action == "open" and len(open_items) < 2:
            made += 1
            if draw(st.booleans()):
                open_items.append(("text", f"m{made}"))
                events.append(
                    {"type": "TEXT_MESSAGE_START", "messageId": f"m{made}", "role": "assistant"}
                )
            else:
                open_items.append(("tool", f"c{made}"))
                events.append(
                    {"type": "TOOL_CALL_START", "toolCallId": f"c{made}", "toolCallName": "f"}
                )
        elif action == "delta" and open_items:
            kind, item = draw(st.sampled_from(open_items))
            wire = (
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": item, "delta": draw(_TEXT)}
                if kind == "text"
                else {"type": "TOOL_CALL_ARGS", "toolCallId": item, "delta": draw(_TEXT)}
            )
            if draw(st.integers(0, 5)) == 0:
                wire["timestamp"] = 7
            events.append(wire)
        elif action == "close" and open_items:
            kind, item = open_items.pop(draw(st.integers(0, len(open_items) - 1)))
            events.append(
                {"type": "TEXT_MESSAGE_END", "messageId": item}
                if kind == "text"
                else {"type": "TOOL_CALL_END", "toolCallId": item}
            )
        elif action == "state":
            # Adds, and replaces of one key: the order of the deltas matters to the state.
            path = draw(st.sampled_from([f"/k{len(events)}", "/x", "/x"]))
            events.append(
                {
                    "type": "STATE_DELTA",
                    "delta": [{"op": "add", "path": path, "value": len(events)}],
                }
            )
        elif action == "odd":
            events.append(
                draw(
                    st.sampled_from(
                        [
                            # does not apply (nothing to remove): readers fail on it too
                            {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/no"}]},
                            {"type": "STATE_SNAPSHOT", "snapshot": {"s": len(events)}},
                            {"type": "STATE_SNAPSHOT", "snapshot": [1], "timestamp": 7},
                            {
                                "type": "STATE_DELTA",
                                "delta": [{"op": "add", "path": "/-", "value": 2}],
                                "timestamp": 7,
                            },
                        ]
                    )
                )
            )
    for kind, item in open_items:
        events.append(
            {"type": "TEXT_MESSAGE_END", "messageId": item}
            if kind == "text"
            else {"type": "TOOL_CALL_END", "toolCallId": item}
        )
    events.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return events


def _fold(*parts: list[dict[str, Any]]) -> str:
    session = Session()
    for part in parts:
        for event in part:
            # A delta that does not apply leaves the state as it was (the log keeps it as sent).
            with contextlib.suppress(PatchError):
                session.feed(event)
    return json.dumps({"messages": [to_wire(m) for m in session.messages], "state": session.state})


async def _upto(items: AsyncGenerator[Any, None], last: int, number: Any) -> list[Any]:
    """The items a follower yields until the one numbered ``last`` (the run may go on)."""
    taken = []
    if last > 0:
        async for item in items:
            taken.append(item)
            if number(item) >= last:
                break
    await items.aclose()
    return taken


async def _resumed(log: MemoryEventLog, after: int, last: int) -> list[dict[str, Any]]:
    """What ``follow`` delivers after ``after``, checked numbered without a gap or repeat."""
    items = await _upto(log.follow("r", str(after)), last - after, lambda i: int(i[0]) - after)
    ids = [int(event_id) for event_id, _ in items]
    assert ids == sorted(set(ids)) and all(after < i <= last for i in ids)
    assert not items or ids[-1] == last
    return [wire for _, wire in items]


@settings(max_examples=40, deadline=None)
@given(runs(), st.integers(0, 3), st.data())
def test_a_resume_from_any_id_folds_to_the_uninterrupted_run(
    events: list[dict[str, Any]], recent: int, data: st.DataObject
) -> None:
    """For every cut point, mid-run (deltas compacted behind the newest ``recent``) and
    after the run ended (compacted whole): the events up to the cut then the resume fold
    to the whole; and a late joiner's prelude then the rest fold to it too."""
    middle = data.draw(st.integers(1, len(events) - 1))

    async def scenario() -> None:
        log = MemoryEventLog(recent_events=recent)
        assert await log.claim("r")
        for number, wire in enumerate(events, 1):
            assert await log.append("r", wire) == str(number)
            if number == middle:
                whole = _fold(events[:middle])
                for after in range(middle + 1):
                    assert _fold(events[:after], await _resumed(log, after, middle)) == whole
                start = await prelude(log, "r")
                if start is not None:
                    restated, upto = start
                    rest = await _resumed(log, int(upto), middle)
                    assert _fold(restated, rest) == whole
        await log.end("r")
        whole = _fold(events)
        for after in range(len(events)):
            assert _fold(events[:after], await _resumed(log, after, len(events))) == whole
            frames = await _upto(
                log.follow_frames("r", str(after)), len(events), lambda b: int(b[0])
            )
            parsed = list(iter_frames([b"".join(batch for _, batch in frames)]))
            assert [int(f.id or 0) for f in parsed] == sorted({int(f.id or 0) for f in parsed})
            assert _fold(events[:after], [json.loads(f.data) for f in parsed]) == whole
        start = await prelude(log, "r")
        if start is not None:
            restated, upto = start
            assert _fold(restated, await _resumed(log, int(upto), len(events))) == whole

    asyncio.run(scenario())


def test_an_ended_run_keeps_each_message_as_one_content_event() -> None:
    """A finished message is kept compacted: ``read`` gives one content event for its
    deltas, under the last delta's id, and a tool call's arguments likewise."""

    async def scenario() -> list[tuple[str, dict[str, Any]]]:
        log = MemoryEventLog()
        await log.append("r", {"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
        await log.append("r", {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
        for n in range(500):
            await log.append(
                "r", {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{n} "}
            )
        await log.append("r", {"type": "TEXT_MESSAGE_END", "messageId": "m"})
        await log.append("r", {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"})
        for part in ('{"a"', ": 1", "}"):
            await log.append("r", {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": part})
        await log.append("r", {"type": "TOOL_CALL_END", "toolCallId": "c"})
        await log.append("r", {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
        await log.end("r")
        assert log.total_events == 509  # the bounds count events, whatever their form
        return await log.read("r")

    logged = asyncio.run(scenario())
    assert [(i, w["type"]) for i, w in logged] == [
        ("1", "RUN_STARTED"),
        ("2", "TEXT_MESSAGE_START"),
        ("502", "TEXT_MESSAGE_CONTENT"),
        ("503", "TEXT_MESSAGE_END"),
        ("504", "TOOL_CALL_START"),
        ("507", "TOOL_CALL_ARGS"),
        ("508", "TOOL_CALL_END"),
        ("509", "RUN_FINISHED"),
    ]
    assert logged[2][1]["delta"] == "".join(f"{n} " for n in range(500))
    assert logged[5][1]["delta"] == '{"a": 1}'


def test_a_follower_sends_the_logged_frames_several_to_a_write() -> None:
    """The frames are encoded once, at ``append``, with their ``id:`` lines: a follower
    takes every frame available in one step, byte for byte the connection-bound encoding."""

    async def scenario() -> list[tuple[str, bytes]]:
        log = MemoryEventLog()
        await log.append("r", {"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
        await log.append("r", {"type": "CUSTOM", "name": "n", "value": "é"})
        await log.end("r")
        return [batch async for batch in log.follow_frames("r", "0")]

    assert asyncio.run(scenario()) == [
        (
            "2",
            b'id: 1\ndata: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
            + 'id: 2\ndata: {"type":"CUSTOM","name":"n","value":"é"}\n\n'.encode(),
        )
    ]


def test_a_delta_heavy_run_keeps_one_state_snapshot_per_stretch() -> None:
    """State deltas after a known state are kept as one ``STATE_SNAPSHOT`` under the last
    one's id, other events kept in order: mid-run behind the recent ones, whole once ended.
    A delta before any snapshot, one that does not apply and those after it until the next
    snapshot are kept as sent (no base to fold them on)."""

    def delta(n: int) -> dict[str, Any]:
        return {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": n}]}

    async def scenario() -> tuple[list[tuple[str, str]], list[tuple[str, dict[str, Any]]]]:
        log = MemoryEventLog(recent_events=8)
        events: list[dict[str, Any]] = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},  # 1
            delta(0),  # 2: no base
            {"type": "STATE_SNAPSHOT", "snapshot": {"n": -1}},  # 3
            *[delta(n) for n in range(1, 101)],  # 4..103
            {"type": "CUSTOM", "name": "c", "value": 1},  # 104
            *[delta(n) for n in range(101, 201)],  # 105..204
            {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/no"}]},  # 205
            delta(201),  # 206: the base is lost
            {"type": "STATE_SNAPSHOT", "snapshot": {"m": 1}},  # 207
            *[delta(n) for n in range(301, 401)],  # 208..307
            {**delta(401), "timestamp": 7},  # 308: kept as sent, a new stretch after it
            delta(402),  # 309
        ]
        for wire in events[:150]:
            await log.append("r", wire)
        running = [(i, w["type"]) for i, w in await log.read("r")]
        for wire in events[150:]:
            await log.append("r", wire)
        await log.append("r", {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})  # 310
        await log.end("r")
        assert log.total_events == 310  # the bounds count events, whatever their form
        return running, await log.read("r")

    running, ended = asyncio.run(scenario())
    # Mid-run: folded up to a batch boundary behind the 8 recent events, the rest as sent.
    assert running[:4] == [
        ("1", "RUN_STARTED"),
        ("2", "STATE_DELTA"),
        ("104", "CUSTOM"),
        (running[3][0], "STATE_SNAPSHOT"),
    ]
    assert 150 - 16 <= int(running[3][0]) <= 150 - 8
    assert running[4:] == [(str(n), "STATE_DELTA") for n in range(int(running[3][0]) + 1, 151)]
    assert [(i, w["type"]) for i, w in ended] == [
        ("1", "RUN_STARTED"),
        ("2", "STATE_DELTA"),
        ("104", "CUSTOM"),
        ("204", "STATE_SNAPSHOT"),
        ("205", "STATE_DELTA"),
        ("206", "STATE_DELTA"),
        ("307", "STATE_SNAPSHOT"),
        ("308", "STATE_DELTA"),
        ("309", "STATE_SNAPSHOT"),
        ("310", "RUN_FINISHED"),
    ]
    assert ended[3][1] == {"type": "STATE_SNAPSHOT", "snapshot": {"n": 200}}
    assert ended[6][1] == {"type": "STATE_SNAPSHOT", "snapshot": {"m": 1, "n": 400}}
    assert ended[7][1] == {**delta(401), "timestamp": 7}
    assert ended[8][1] == {"type": "STATE_SNAPSHOT", "snapshot": {"m": 1, "n": 402}}
