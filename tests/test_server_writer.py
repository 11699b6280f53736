"""
``aguikit.server.RunWriter``: a run emitted through the receiver's own checks.

Every stream a test produces is also fed to a ``Session`` (the consuming pipeline), so
"the writer accepted it" and "a receiver accepts it" are checked together.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aguikit import models as m
from aguikit.errors import PatchError, ProtocolError, SchemaValidationError
from aguikit.server import RunWriter
from aguikit.session import Session

INPUT = {"threadId": "t1", "runId": "r1", "messages": []}

Body = Callable[[RunWriter], Awaitable[None]]


def produce(body: Body, **options: Any) -> RunWriter:
    """Run ``body`` inside a writer with no sink; the writer holds what it emitted."""

    async def main() -> RunWriter:
        run = RunWriter(INPUT, **options)
        async with run:
            await body(run)
        return run

    return asyncio.run(main())


def types(run: RunWriter) -> list[str]:
    return [event["type"] for event in run.events]


def consumed(run: RunWriter) -> Session:
    session = Session()
    session.feed_all(run.events)
    session.finish()
    return session


async def faulty(run: RunWriter) -> None:
    """The one faulty handler every mode is shown on: a result for a call still streaming,
    and a message left open when the handler returns."""
    await run.emit({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
    await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Checking"})
    await run.emit({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "weather"})
    await run.emit(
        {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "sunny"}
    )


# -- lifecycle -----------------------------------------------------------------------------


def test_the_writer_starts_and_finishes_the_run_itself() -> None:
    """RUN_STARTED first, RUN_FINISHED (success outcome) last, with the input's ids."""

    async def body(run: RunWriter) -> None:
        await run.say("hello")

    run = produce(body)

    assert {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"} == run.events[0]
    assert {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": "r1",
        "outcome": {"type": "success"},
    } == run.events[-1]
    assert "hello" == consumed(run).messages[0].content


def test_an_exception_in_the_handler_becomes_run_error_and_the_stream_ends_cleanly() -> None:
    """Message and code; what the helper opened is closed first; the stream verifies."""

    async def body(run: RunWriter) -> None:
        async with run.text_message() as message:
            await message.write("partial")
            raise LookupError("the weather service is down")

    run = produce(body)

    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"] == (
        types(run)[:4]
    )
    assert {
        "type": "RUN_ERROR",
        "message": "the weather service is down",
        "code": "LookupError",
    } == run.events[-1]
    assert isinstance(run.error, LookupError)
    consumed(run)


def test_interrupts_become_the_run_finished_outcome() -> None:
    """``run.interrupt`` pauses the run: RUN_FINISHED carries every interrupt."""

    async def body(run: RunWriter) -> None:
        run.interrupt("approval", interrupt_id="i1", message="Delete 3 todos?")
        run.result = {"pending": True}

    run = produce(body)

    assert {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": "r1",
        "result": {"pending": True},
        "outcome": {
            "type": "interrupt",
            "interrupts": [{"id": "i1", "reason": "approval", "message": "Delete 3 todos?"}],
        },
    } == run.events[-1]
    assert ["i1"] == [i.id for i in consumed(run).interrupts]


def test_cancellation_writes_nothing_more() -> None:
    """The client left: the handler sees CancelledError and the writer adds no event."""
    seen: list[BaseException] = []

    async def main() -> RunWriter:
        run = RunWriter(INPUT)

        async def handler() -> None:
            async with run, run.text_message() as message:
                await message.write("a")
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError as exc:
                    seen.append(exc)
                    raise

        task = asyncio.create_task(handler())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return run

    run = asyncio.run(main())

    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"] == types(run)
    assert 1 == len(seen)


# -- what emit accepts ---------------------------------------------------------------------


def test_emit_takes_typed_events_wire_dicts_and_sdk_events() -> None:
    """Three spellings of the same message; the wire is the same."""
    core = pytest.importorskip("ag_ui.core")

    async def body(run: RunWriter) -> None:
        await run.emit(m.TextMessageStartEvent(message_id="m1", role=m.TextMessageRole.ASSISTANT))
        await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"})
        await run.emit(core.TextMessageEndEvent(message_id="m1"))

    run = produce(body)

    assert [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    ] == run.events[1:4]


def test_a_malformed_event_is_refused_at_the_call_with_its_pointer() -> None:
    """The strict schema check: the call raises, the stream ends with RUN_ERROR."""
    raised: list[SchemaValidationError] = []

    async def body(run: RunWriter) -> None:
        try:
            await run.emit({"type": "TEXT_MESSAGE_START", "messageId": 5})
        except SchemaValidationError as error:
            raised.append(error)
            raise

    run = produce(body)

    assert ["/messageId"] == [issue.pointer for issue in raised[0].issues]
    assert "AGUI-S001" == run.events[-1]["code"]


def test_an_undeclared_member_is_a_producer_bug() -> None:
    """A producer must be exact; the receiver's tolerance is for newer producers."""

    async def body(run: RunWriter) -> None:
        await run.emit({"type": "CUSTOM", "name": "n", "value": 1, "colour": "red"})

    run = produce(body)

    assert "RUN_ERROR" == run.events[-1]["type"]


# -- helpers -------------------------------------------------------------------------------


def test_every_helper_emits_a_stream_a_receiver_accepts() -> None:
    """Text, tool call and result, reasoning, step, activity, subagent, in one run."""

    async def body(run: RunWriter) -> None:
        async with run.step("plan"), run.reasoning() as block:
            await block.think("The user wants the weather.")
        async with run.text_message(message_id="m1") as message:
            await message.write("Let me ")
            await message.write("check.")
        async with run.tool_call("get_weather", parent_message_id="m1") as call:
            await call.args('{"city":')
            await call.args('"Paris"}')
        await run.tool_result(call.id, {"temperature": 21})
        activity = await run.activity("progress", {"done": 0})
        await activity.update({"done": 1})
        async with run.subagent("summariser") as sub:
            await sub.say("Sunny, 21 degrees.")
            sub.result = "ok"

    run = produce(body)
    session = consumed(run)

    assert [
        "RUN_STARTED",
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "STEP_FINISHED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
        "SUBAGENT_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "SUBAGENT_FINISHED",
        "RUN_FINISHED",
    ] == types(run)
    assert "Let me check." == session.messages[1].content
    assert '{"city":"Paris"}' == session.messages[1].tool_calls[0].function.arguments
    assert {"done": 1} == session.messages[3].content
    assert [] == session.warnings


def test_a_subagents_events_carry_its_run_id_and_an_error_ends_it() -> None:
    """Every event the child writes is tagged; an exception sends SUBAGENT_ERROR."""

    async def body(run: RunWriter) -> None:
        with pytest.raises(TimeoutError):
            async with run.subagent("researcher", subagent_run_id="s1") as sub:
                await sub.emit({"type": "TEXT_MESSAGE_START", "messageId": "m2"})
                await sub.emit({"type": "TEXT_MESSAGE_END", "messageId": "m2"})
                raise TimeoutError("took too long")

    run = produce(body)

    assert all(e.get("subagentRunId") == "s1" for e in run.events[1:-1])
    assert {
        "type": "SUBAGENT_ERROR",
        "subagentRunId": "s1",
        "message": "took too long",
        "code": "TimeoutError",
    } == run.events[-2]
    assert "RUN_FINISHED" == run.events[-1]["type"]
    consumed(run)


# -- state ---------------------------------------------------------------------------------


def test_set_state_sends_a_snapshot_then_minimal_deltas() -> None:
    """The first call snapshots; later ones diff against what the client holds."""

    async def body(run: RunWriter) -> None:
        await run.set_state({"todos": [], "city": "Paris"})
        await run.set_state({"todos": ["buy milk"], "city": "Paris"})
        await run.set_state({"todos": ["buy milk"], "city": "Paris"})  # no change: nothing
        await run.set_state({"todos": ["buy milk"], "city": "Lyon"})

    run = produce(body)

    assert [
        {"type": "STATE_SNAPSHOT", "snapshot": {"todos": [], "city": "Paris"}},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/todos/0", "value": "buy milk"}]},
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/city", "value": "Lyon"}]},
    ] == run.events[1:-1]
    assert {"todos": ["buy milk"], "city": "Lyon"} == consumed(run).state


def test_snapshot_every_resynchronises_a_long_run() -> None:
    """Every N-th update is a snapshot."""

    async def body(run: RunWriter) -> None:
        for n in range(6):
            await run.set_state({"n": n})

    run = produce(body, snapshot_every=3)

    assert [
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "STATE_DELTA",
        "STATE_SNAPSHOT",
    ] == types(run)[1:-1]


def test_a_hand_emitted_snapshot_moves_the_base_of_the_next_delta() -> None:
    """The delta is always against the state the client holds, whoever sent it."""

    async def body(run: RunWriter) -> None:
        await run.set_state({"a": 1})
        await run.emit({"type": "STATE_SNAPSHOT", "snapshot": {"a": 1, "b": 2}})
        await run.set_state({"a": 1, "b": 3})

    run = produce(body)

    assert {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/b", "value": 3}]} == (
        run.events[-2]
    )


def test_a_hand_written_delta_before_any_snapshot_applies_to_the_requests_state() -> None:
    """The client holds the state it sent; set_state still starts with a snapshot."""

    async def main() -> RunWriter:
        run = RunWriter({**INPUT, "state": {"todos": ["a"]}})
        async with run:
            await run.emit(
                {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/todos/-", "value": "b"}]}
            )
            assert {"todos": ["a", "b"]} == run.state
            await run.set_state({"todos": ["a", "b", "c"]})
        return run

    run = asyncio.run(main())

    assert ["STATE_DELTA", "STATE_SNAPSHOT"] == types(run)[1:-1]


def test_a_delta_that_does_not_apply_to_the_client_state_is_refused() -> None:
    """A hand-written delta against a state the client never held is a PatchError."""

    async def body(run: RunWriter) -> None:
        await run.set_state({"a": 1})
        with pytest.raises(PatchError):
            await run.emit({"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/zz"}]})

    run = produce(body)

    assert {"type": "RUN_ERROR", "code": "AGUI-P001"} == {
        k: run.events[-1][k] for k in ("type", "code")
    }


# -- modes ---------------------------------------------------------------------------------


def test_strict_mode_raises_at_the_offending_call_and_ends_with_run_error() -> None:
    """The result for a call still streaming is AGUI-V015, raised by that emit."""
    raised: list[ProtocolError] = []

    async def body(run: RunWriter) -> None:
        try:
            await faulty(run)
        except ProtocolError as error:
            raised.append(error)
            raise

    run = produce(body)

    assert "AGUI-V015" == raised[0].rule
    assert "TOOL_CALL_RESULT" == raised[0].event_type
    assert {"type": "RUN_ERROR", "code": "AGUI-V015"} == {
        k: run.events[-1][k] for k in ("type", "code")
    }
    assert "TOOL_CALL_RESULT" not in types(run)
    consumed(run)


def test_strict_mode_reports_a_handler_that_returns_with_a_message_open() -> None:
    """The writer's own RUN_FINISHED is the offending call: RUN_ERROR names AGUI-V005."""

    async def body(run: RunWriter) -> None:
        await run.emit({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})

    run = produce(body)

    assert "AGUI-V005" == run.events[-1]["code"]


def test_repair_mode_closes_what_blocks_each_event_and_records_each_repair(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """TOOL_CALL_END before the result, TEXT_MESSAGE_END before RUN_FINISHED."""
    with caplog.at_level(logging.WARNING, logger="aguikit.server"):
        run = produce(faulty, mode="repair")

    assert [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_START",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ] == types(run)
    assert [("AGUI-W021", 4), ("AGUI-W021", 6)] == [(w.rule, w.event_index) for w in run.warnings]
    assert "AGUI-V015" in run.warnings[0].message
    assert "AGUI-V005" in run.warnings[1].message
    assert 2 == sum("producer-repaired" in record.message for record in caplog.records)
    assert [] == consumed(run).warnings


def test_repair_mode_closes_a_subagents_open_step_under_its_owner() -> None:
    """A closing event carries the owner the verifier recorded."""

    async def body(run: RunWriter) -> None:
        await run.emit({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "x"})
        await run.emit({"type": "STEP_STARTED", "stepName": "fetch", "subagentRunId": "s1"})

    run = produce(body, mode="repair")

    assert [
        {"type": "STEP_FINISHED", "stepName": "fetch", "subagentRunId": "s1"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
    ] == run.events[3:5]
    consumed(run)


def test_repair_mode_still_raises_what_closing_cannot_fix() -> None:
    """Content for a message never started is not a missing close."""

    async def body(run: RunWriter) -> None:
        await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"})

    run = produce(body, mode="repair")

    assert "AGUI-V012" == run.events[-1]["code"]


def test_audit_mode_emits_as_given_and_logs_each_violation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The stream is the faulty one; each violation is a warning and a log record."""
    with caplog.at_level(logging.WARNING, logger="aguikit.server"):
        run = produce(faulty, mode="audit")

    assert [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_START",
        "TOOL_CALL_RESULT",
        "RUN_FINISHED",
    ] == types(run)
    assert ["AGUI-V015", "AGUI-V005"] == [w.rule for w in run.warnings]
    assert 2 == len([r for r in caplog.records if r.name == "aguikit.server"])
    with pytest.raises(ProtocolError):
        consumed(run)


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        RunWriter(INPUT, mode="lenient")  # type: ignore[arg-type]


def test_the_writer_accepts_the_input_in_every_spelling() -> None:
    """Typed, wire dict, SDK model."""
    core = pytest.importorskip("ag_ui.core")
    typed = RunWriter(m.RunAgentInput(thread_id="t", run_id="r", messages=[]))
    sdk = RunWriter(
        core.RunAgentInput(
            thread_id="t",
            run_id="r",
            messages=[],
            state=None,
            tools=[],
            context=[],
            forwarded_props=None,
        )
    )
    wire: Mapping[str, Any] = {"threadId": "t", "runId": "r", "messages": []}

    assert "r" == typed.input.run_id == sdk.input.run_id == RunWriter(wire).input.run_id


def test_a_subagent_of_a_subagent_names_its_parent() -> None:
    """A nested invocation carries ``parentSubagentRunId``; its events carry its own id."""

    async def body(run: RunWriter) -> None:
        async with (
            run.subagent("outer", subagent_run_id="s1") as outer,
            outer.subagent("inner", subagent_run_id="s2") as inner,
        ):
            await inner.say("deep")

    run = produce(body)

    assert {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": "s2",
        "name": "inner",
        "parentSubagentRunId": "s1",
    } == run.events[2]
    assert "s2" == run.events[3]["subagentRunId"]
    consumed(run)


ACTIONS = st.recursive(
    st.sampled_from(["say", "tool", "frontend", "step", "reasoning", "state", "activity"]),
    lambda inner: st.lists(inner, max_size=4).map(lambda body: ("subagent", body)),
    max_leaves=12,
)


async def _act(writer: Any, action: Any, n: int) -> None:
    if isinstance(action, tuple):
        async with writer.subagent(f"agent-{n}") as child:
            for i, nested in enumerate(action[1]):
                await _act(child, nested, n * 10 + i)
    elif action == "say":
        await writer.say(f"text {n}")
    elif action == "tool":
        call = await writer.call_tool("lookup", {"n": n})
        await writer.tool_result(call, {"found": n})
    elif action == "frontend":
        await writer.call_tool("confirm", {"n": n})
    elif action == "step":
        async with writer.step(f"step-{n}"):
            await writer.say("inside")
    elif action == "reasoning":
        async with writer.reasoning() as block:
            await block.think(f"thought {n}")
    elif action == "state":
        await writer.set_state({"n": n, "items": list(range(n % 5))})
    else:
        activity = await writer.activity("progress", {"n": 0})
        await activity.update({"n": n})


@settings(max_examples=60, deadline=None)
@given(st.lists(ACTIONS, max_size=8), st.sampled_from(["strict", "repair"]))
def test_any_sequence_of_helper_calls_is_a_stream_a_receiver_accepts(
    actions: list[Any], mode: str
) -> None:
    """The helpers make the legal order the easy one: nothing they compose is refused, and
    nothing needs repairing."""

    async def body(run: RunWriter) -> None:
        for n, action in enumerate(actions):
            await _act(run, action, n)

    run = produce(body, mode=mode)

    assert "RUN_FINISHED" == run.events[-1]["type"]
    assert [] == run.warnings
    assert [] == consumed(run).warnings
