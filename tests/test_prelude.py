"""
A late joiner's prelude (``X-AGUI-Join: prelude``): a run restated in a few events.

The property: for a legal run cut at *every* event, the prelude of the log so far followed
by the rest of the log is a stream a strict :class:`Session` accepts, ending with the same
messages, state and subagents as the whole log.  Then the same through the real HTTP path
(uvicorn) and through the official TypeScript client, for a run paused with a reasoning
message and a subagent open.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from tests.node_client import NODE_DIR, require_node
from tests.redis_server import redis_server
from tests.servers import serve_asgi
from tests.strategies import Utterance, chunk_form, conversations, legal_streams

from aguikit import Session
from aguikit.server import RunAgentInput, RunWriter, create_app
from aguikit.server.eventlog import MemoryEventLog, prelude
from aguikit.server.prelude import build_prelude
from aguikit.transport.sse import iter_frames
from aguikit.wire import to_wire


def _fold(events: list[dict[str, Any]]) -> tuple[Any, ...]:
    """What a strict client ends with; raises on any violation or a truncated stream."""
    session = Session()
    session.feed_all(events)
    session.finish()
    return (
        [to_wire(m) for m in session.messages],
        session.state,
        session.subagents,
        [(r.status, r.interrupts) for r in session.runs],
    )


async def _joins(wires: list[dict[str, Any]]) -> list[tuple[int, list[dict[str, Any]], str]]:
    """For every cut, through a real log: the prelude and the id it stands for."""
    found = []
    for cut in range(1, len(wires) + 1):
        log = MemoryEventLog()
        for wire in wires[:cut]:
            await log.append("r", wire)
        start = await prelude(log, "r")
        assert start is not None, f"no prelude after event {cut}: {json.dumps(wires[:cut])}"
        found.append((cut, *start))
    return found


def _check_every_cut(stream: list[Any]) -> list[list[dict[str, Any]]]:
    """Prelude and rest, for every cut of ``stream`` (typed events or wire dicts), fold
    like the whole stream; returns the preludes."""
    wires = [event if isinstance(event, dict) else to_wire(event) for event in stream]
    whole = _fold(wires)
    preludes = []
    for cut, events, last in asyncio.run(_joins(wires)):
        assert int(last) <= cut
        try:
            joined = _fold(events + wires[int(last) :])
        except Exception as exc:
            raise AssertionError(f"cut after event {cut}: {exc}\n{json.dumps(events)}") from exc
        assert joined == whole, f"cut after event {cut}"
        preludes.append(events)
    return preludes


_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(legal_streams(max_runs=1))
def test_prelude_then_the_rest_folds_like_the_whole_log_at_every_cut(stream: list[Any]) -> None:
    """Every kind of process, interleaved at random: text, tools, reasoning, thinking,
    activities, state, steps and nested subagents."""
    _check_every_cut(stream)


@_SETTINGS
@given(legal_streams(max_runs=1, kinds=("subagent", "step", "narrated-tool", "tool", "text")))
def test_a_subagent_heavy_run_rejoins_at_every_cut(stream: list[Any]) -> None:
    """Subagents nested two deep with their own steps, messages and tool calls."""
    _check_every_cut(stream)


@_SETTINGS
@given(legal_streams(max_runs=1, kinds=("reasoning", "thinking", "subagent", "narrated-tool")))
def test_a_reasoning_heavy_run_rejoins_at_every_cut(stream: list[Any]) -> None:
    """Reasoning spans and messages (shared or separate ids), deprecated thinking blocks,
    reasoning attributed to subagents."""
    _check_every_cut(stream)


EVERYTHING = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "lead"},
    {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "s2",
        "name": "scout",
        "parentSubagentRunId": "s1",
    },
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s2", "result": [1]},
    {"type": "STEP_STARTED", "stepName": "plan"},
    {"type": "STEP_STARTED", "stepName": "plan", "subagentRunId": "s1"},
    {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": "a1",
        "activityType": "plan",
        "content": {"n": 1},
        "subagentRunId": "s1",
    },
    {"type": "REASONING_START", "messageId": "span1", "subagentRunId": "s1"},
    {
        "type": "REASONING_MESSAGE_START",
        "messageId": "rm1",
        "role": "reasoning",
        "subagentRunId": "s1",
    },
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm1", "delta": "hmm"},
    {"type": "THINKING_START"},
    {"type": "THINKING_TEXT_MESSAGE_START"},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "so"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Let me"},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "look",
        "parentMessageId": "m1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{"},
    {
        "type": "TOOL_CALL_CHUNK",
        "toolCallId": "c2",
        "toolCallName": "fetch",
        "delta": "{",
        "subagentRunId": "s1",
    },
    {"type": "STATE_SNAPSHOT", "snapshot": {"k": [1]}},
    # everything above is open at once; what follows continues and closes it
    {"type": "TOOL_CALL_CHUNK", "delta": "}", "subagentRunId": "s1"},
    {
        "type": "ACTIVITY_DELTA",
        "messageId": "a1",
        "activityType": "plan",
        "patch": [{"op": "replace", "path": "/n", "value": 2}],
    },
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": " then"},
    {"type": "THINKING_TEXT_MESSAGE_END"},
    {"type": "THINKING_END"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "}"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "ok"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " see."},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm1", "delta": "!", "subagentRunId": "s1"},
    {"type": "REASONING_MESSAGE_END", "messageId": "rm1"},
    {"type": "REASONING_END", "messageId": "span1"},
    {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "s3",
        "name": "late",
        "parentSubagentRunId": "s2",
    },
    {"type": "SUBAGENT_ERROR", "subagentRunId": "s3", "message": "no"},
    {"type": "STEP_FINISHED", "stepName": "plan", "subagentRunId": "s1"},
    {
        "type": "SUBAGENT_FINISHED",
        "subagentRunId": "s1",
        "outcome": {"type": "suspended", "interruptIds": ["i1"]},
    },
    {"type": "STEP_FINISHED", "stepName": "plan"},
    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/k/-", "value": 2}]},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]
"""A run with an item of every family open at once: subagents (one closed, whose child
starts later), steps of the parent and of a subagent with the same name, an activity, a
reasoning span and message, a deprecated thinking block and message, a message with a tool
call, a chunk-streamed tool call of a subagent."""


def test_every_family_open_at_once_is_reopened_at_every_cut() -> None:
    """Cut everywhere; where everything is open, the prelude re-opens each family."""
    preludes = _check_every_cut(EVERYTHING)
    widest = preludes[EVERYTHING.index({"type": "STATE_SNAPSHOT", "snapshot": {"k": [1]}})]
    assert [wire["type"] for wire in widest[3:]] == [
        "SUBAGENT_STARTED",  # s1, running
        "SUBAGENT_STARTED",  # s2, closed: a later child names it as its parent
        "SUBAGENT_FINISHED",
        "STEP_STARTED",
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "TEXT_MESSAGE_START",
        "TOOL_CALL_START",  # c1
        "THINKING_START",  # the thinking skeleton: the joiner mints the same ids
        "THINKING_TEXT_MESSAGE_START",
        "TOOL_CALL_CHUNK",  # c2: chunk-opened, so re-opened by a chunk that owes its end
    ]


def test_the_redis_log_gives_the_same_prelude_at_every_cut() -> None:
    """Any worker sharing the Redis log restates the run as the memory log does."""
    from aguikit.server.redis_log import RedisEventLog

    async def compare(url: str) -> None:
        redis_log = RedisEventLog.from_url(url, prefix="prelude:")
        for cut in range(1, len(EVERYTHING) + 1):
            memory = MemoryEventLog()
            run_id = f"r{cut}"
            for wire in EVERYTHING[:cut]:
                await memory.append(run_id, wire)
                await redis_log.append(run_id, wire)
            assert await prelude(redis_log, run_id) == await prelude(memory, run_id)

    with redis_server() as url:
        asyncio.run(compare(url))


# ---------------------------------------------------------------------------- a paused run

PAUSED = [
    {"type": "STATE_SNAPSHOT", "snapshot": {"phase": "research"}},
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "researcher"},
    {"type": "STEP_STARTED", "stepName": "search", "subagentRunId": "s1"},
    {"type": "REASONING_START", "messageId": "rm1", "subagentRunId": "s1"},
    {
        "type": "REASONING_MESSAGE_START",
        "messageId": "rm1",
        "role": "reasoning",
        "subagentRunId": "s1",
    },
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm1", "delta": "Which sources "},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", "subagentRunId": "s1"},
    {
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": "m1",
        "delta": "Searching",
        "subagentRunId": "s1",
    },
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "search",
        "parentMessageId": "m1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": "ag'},
]
"""A run's first events: a subagent with a step, a reasoning message, a message and a tool
call of its own, all open when the run pauses."""

RESUMED = [
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '-ui"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "c1", "subagentRunId": "s1"},
    {
        "type": "REASONING_MESSAGE_CONTENT",
        "messageId": "rm1",
        "delta": "are primary?",
        "subagentRunId": "s1",
    },
    {"type": "REASONING_MESSAGE_END", "messageId": "rm1"},
    {"type": "REASONING_END", "messageId": "rm1", "subagentRunId": "s1"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " done."},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "STEP_FINISHED", "stepName": "search", "subagentRunId": "s1"},
    {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "s2",
        "name": "critic",
        "parentSubagentRunId": "s1",
    },
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s2", "result": "ok"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1", "result": {"sources": 2}},
    {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/phase", "value": "done"}]},
]
"""What the run sends once released: every open item continued and closed."""


class _WatchedLog(MemoryEventLog):
    """The in-memory log, counting the reads a prelude makes (only a prelude reads a
    whole run), so a test releases its paused run once its joiners' preludes are built."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.read_done = threading.Condition()

    async def read(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        logged = await super().read(run_id)
        with self.read_done:
            self.reads += 1
            self.read_done.notify_all()
        return logged

    def wait_reads(self, count: int) -> None:
        with self.read_done:
            assert self.read_done.wait_for(lambda: self.reads >= count, 60)


class _PausedRun:
    """An endpoint whose handler stops after :data:`PAUSED` until released."""

    def __init__(self) -> None:
        self.paused = threading.Event()
        self.release = threading.Event()
        self.log = _WatchedLog()
        self.app = create_app(self.handler, path="/agent", event_log=self.log)

    async def handler(self, run_input: RunAgentInput, run: RunWriter) -> None:
        for event in PAUSED:
            await run.emit(event)
        self.paused.set()
        await asyncio.to_thread(self.release.wait, 60)
        for event in RESUMED:
            await run.emit(event)
            await asyncio.sleep(0.005)


@pytest.fixture
def paused() -> Iterator[tuple[_PausedRun, str, Callable[[], None]]]:
    """A served :class:`_PausedRun` whose run ``r1`` is started and paused; the callable
    ends the starter's request once the run is released."""
    app = _PausedRun()
    with serve_asgi(app.app) as base:
        url = base + "/agent"
        starter: list[bytes] = []

        def start() -> None:
            body = {"threadId": "t", "runId": "r1", "messages": []}
            starter.append(httpx.post(url, json=body, timeout=60).content)

        thread = threading.Thread(target=start, daemon=True)
        thread.start()
        assert app.paused.wait(30)
        try:
            yield app, url, lambda: thread.join(60)
        finally:
            app.release.set()
            thread.join(60)


def _frames(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    return [(f.id, json.loads(f.data)) for f in iter_frames([body])]


def _whole(url: str) -> list[dict[str, Any]]:
    body = {"threadId": "t", "runId": "r1", "messages": []}
    answer = httpx.post(url, json=body, headers={"Last-Event-ID": "0"}, timeout=60)
    return [wire for _, wire in _frames(answer.content)]


def test_a_joiner_of_a_paused_run_gets_the_open_subagent_and_reasoning_reopened(
    paused: tuple[_PausedRun, str, Callable[[], None]],
) -> None:
    """Over uvicorn: the prelude re-opens the subagent, its step, the reasoning span and
    message, the message and the tool call; then the live rest; the fold equals the log's."""
    app, url, done = paused
    body = {"threadId": "t", "runId": "r1", "messages": []}
    headers = {"Last-Event-ID": "0", "X-AGUI-Join": "prelude"}
    received: list[bytes] = []

    def join() -> None:
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as answer:
            assert answer.status_code == 200
            received.extend(answer.iter_bytes())

    joiner = threading.Thread(target=join, daemon=True)
    joiner.start()
    app.log.wait_reads(1)
    app.release.set()
    joiner.join(60)
    done()
    frames = _frames(b"".join(received))
    numbered = [i for i, (frame_id, _) in enumerate(frames) if frame_id is not None]
    opening = [wire for _, wire in frames[: numbered[0] + 1]]
    # The prelude stands for the paused run's events: RUN_STARTED and PAUSED.
    assert frames[numbered[0]][0] == str(1 + len(PAUSED))
    assert [wire["type"] for wire in opening] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "SUBAGENT_STARTED",
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "TEXT_MESSAGE_START",
        "TOOL_CALL_START",
    ]
    snapshot = {m["id"]: m for m in opening[1]["messages"]}
    assert snapshot["rm1"]["content"] == "Which sources "
    assert snapshot["m1"]["toolCalls"][0]["function"]["arguments"] == '{"q": "ag'
    assert all(wire.get("subagentRunId") == "s1" for wire in opening[3:])
    # Logged untagged, the call inherits its message's owner, which its re-opening names.
    assert opening[-1] == {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "search",
        "parentMessageId": "m1",
        "subagentRunId": "s1",
    }
    whole = _whole(url)
    # Fewer events than the run logged (its ids count them; read from the start, the
    # ended run comes compacted too, its state snapshot and delta as one snapshot).
    assert len(frames) < int(frames[-1][0] or 0) == 2 + len(PAUSED) + len(RESUMED)
    joined = _fold([wire for _, wire in frames])
    assert joined == _fold(whole)
    final = {m["id"]: m for m in joined[0]}
    assert final["rm1"]["content"] == "Which sources are primary?"
    assert final["m1"]["toolCalls"][0]["function"]["arguments"] == '{"q": "ag-ui"}'
    assert [s.status for s in joined[2]] == ["finished", "finished"]


def test_the_official_typescript_client_accepts_a_prelude_reopening_reasoning_and_a_subagent(
    paused: tuple[_PausedRun, str, Callable[[], None]],
) -> None:
    """``@ag-ui/client`` ``HttpAgent`` (which verifies ordering and attribution itself)
    joins the paused run with the prelude headers and ends where the whole log ends."""
    node = require_node()
    app, url, done = paused
    # What the client is sent first: the subagent and the reasoning re-opened (the HTTP
    # test above checks this very prelude frame by frame).
    restated = build_prelude([{"type": "RUN_STARTED", "threadId": "t", "runId": "r1"}, *PAUSED])
    assert restated is not None
    assert {"SUBAGENT_STARTED", "REASONING_START", "REASONING_MESSAGE_START"} <= {
        wire["type"] for wire in restated
    }
    script = {
        "threadId": "t",
        "runId": "r1",
        "headers": {"Last-Event-ID": "0", "X-AGUI-Join": "prelude"},
    }
    process = subprocess.Popen(
        [node, str(NODE_DIR / "run_http_agent.mjs"), url, json.dumps(script)],
        cwd=NODE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        app.log.wait_reads(1)
        app.release.set()
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    done()
    assert "error" not in result["runs"][0], result["runs"][0]
    session = Session()
    session.feed_all(_whole(url))
    session.finish()
    expected = [to_wire(m) for m in session.messages]
    assert result["messages"] == expected
    assert result["state"] == session.state == {"phase": "done"}


# ---------------------------------------------------------------------- when it gives up


def test_what_a_prelude_cannot_restate_is_sent_as_the_log() -> None:
    """``None`` (the caller sends the log): nothing logged, a log that lost its start, a
    log no verifier accepts, an open message a snapshot dropped from the conversation, an
    attribution a snapshot cannot restate."""
    start = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    opened = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    assert build_prelude([]) is None
    assert build_prelude([opened]) is None
    assert build_prelude([start, {"type": "TEXT_MESSAGE_END", "messageId": "m"}]) is None
    assert build_prelude([start, opened, {"type": "MESSAGES_SNAPSHOT", "messages": []}]) is None
    # The span is s1's, the message (opened untagged) the parent's: a snapshot restating
    # the message would give the span to the parent, so the prelude checks itself and yields.
    span = {"type": "REASONING_START", "messageId": "rm", "subagentRunId": "s1"}
    thought = {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"}
    assert build_prelude([start, span, thought]) is None

    async def bounded() -> Any:
        log = MemoryEventLog(max_events=1)
        for wire in (start, {"type": "STATE_SNAPSHOT", "snapshot": {}}):
            await log.append("r", wire)
        return await prelude(log, "r")

    assert asyncio.run(bounded()) is None


def test_an_ended_run_is_restated_up_to_its_end_which_is_then_followed() -> None:
    """The logged end (interrupts and all) is what the joiner follows after the prelude."""
    start = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    interrupt = {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]}
    wires = [
        start,
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "May I?"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": interrupt},
    ]

    async def joined() -> Any:
        log = MemoryEventLog()
        for wire in wires:
            await log.append("r", wire)
        return await prelude(log, "r")

    events, last = asyncio.run(joined())
    assert last == "4"
    assert [e["type"] for e in events] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert _fold(events + wires[4:]) == _fold(wires)


def test_a_chunk_stream_in_flight_is_reopened_with_a_chunk() -> None:
    """So the joiner's normalizer owes its end, and an id-less chunk continues it."""
    start = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    chunk = {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "user", "delta": "hi"}
    events = build_prelude([start, chunk])
    assert events is not None
    assert events[-1] == {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "user"}
    rest = [
        {"type": "TEXT_MESSAGE_CHUNK", "delta": " there"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    assert _fold(events + rest) == _fold([start, chunk, *rest])


@_SETTINGS
@given(conversations())
def test_a_chunk_streamed_run_rejoins_at_every_cut(runs: list[list[Utterance]]) -> None:
    """Chunks name their stream only once: the prelude re-opens the stream in flight with a
    chunk, so id-less chunks continue it and the end the normalizer owes is still owed."""
    _check_every_cut(chunk_form(runs[:1]))
