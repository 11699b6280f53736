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


def test_an_exception_in_the_handler_becomes_a_private_run_error_and_the_stream_ends_cleanly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A generic message and the stable code AGUI-E020 go to the client, never the
    exception's text; the server's log has the text, the traceback and the run's ids; what
    the helper opened is closed first; the stream verifies."""

    async def body(run: RunWriter) -> None:
        async with run.text_message() as message:
            await message.write("partial")
            raise LookupError("https://api.example/v1?key=sk-secret is down")

    with caplog.at_level(logging.ERROR, logger="aguikit.server"):
        run = produce(body)

    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"] == (
        types(run)[:4]
    )
    assert {
        "type": "RUN_ERROR",
        "message": "The agent failed; the server logged the details.",
        "code": "AGUI-E020",
    } == run.events[-1]
    assert "sk-secret" not in str(run.events)
    assert isinstance(run.error, LookupError)
    (record,) = caplog.records
    assert "run 'r1' (thread 't1')" in record.getMessage()
    assert "AGUI-E020" in record.getMessage()
    assert "sk-secret" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[1] is run.error
    assert ("t1", "r1") == (record.threadId, record.runId)  # type: ignore[attr-defined]
    consumed(run)


def test_a_rule_a_handler_broke_is_named_in_the_run_error_without_its_details() -> None:
    """An aguikit error's code is its rule id; the message names the rule, not the event."""

    async def body(run: RunWriter) -> None:
        await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": "secret-id", "delta": "x"})

    run = produce(body)

    assert {
        "type": "RUN_ERROR",
        "message": "The agent broke rule AGUI-V012 (text-message-not-open).",
        "code": "AGUI-V012",
    } == run.events[-1]


def test_on_error_maps_an_exception_to_the_message_and_code_sent() -> None:
    """Its answer is sent for the run and for a subagent block; None sends the default."""

    def on_error(exc: BaseException) -> tuple[str, str] | None:
        if isinstance(exc, TimeoutError):
            return "The weather service is slow; try again.", "WEATHER_TIMEOUT"
        return None

    async def sub_fails(run: RunWriter) -> None:
        with pytest.raises(TimeoutError):
            async with run.subagent("researcher", subagent_run_id="s1"):
                raise TimeoutError("10.0.0.7:5432 timed out")
        raise KeyError("users.password_hash")

    run = produce(sub_fails, on_error=on_error)

    assert {
        "type": "SUBAGENT_ERROR",
        "subagentRunId": "s1",
        "message": "The weather service is slow; try again.",
        "code": "WEATHER_TIMEOUT",
    } == run.events[-2]
    assert ("AGUI-E020", "The agent failed; the server logged the details.") == (
        run.events[-1]["code"],
        run.events[-1]["message"],
    )


@pytest.mark.parametrize("answer", ["raises", ("only a message",), ("m", 5), "text"])
def test_an_on_error_that_fails_or_answers_nonsense_sends_the_default(
    answer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The hook cannot leak the exception by failing: the default goes out, the hook's
    failure goes to the log."""

    def on_error(exc: BaseException) -> Any:
        if answer == "raises":
            raise ValueError(f"the hook broke on {exc}")
        return answer

    async def body(run: RunWriter) -> None:
        raise RuntimeError("SELECT * FROM users")

    with caplog.at_level(logging.ERROR, logger="aguikit.server"):
        run = produce(body, on_error=on_error)

    assert "AGUI-E020" == run.events[-1]["code"]
    assert "SELECT" not in run.events[-1]["message"]
    assert any("on_error" in record.getMessage() for record in caplog.records)


def test_expose_errors_sends_the_exceptions_text_with_the_stable_code() -> None:
    """The development switch: the text a developer wants to see, the code unchanged."""

    async def body(run: RunWriter) -> None:
        raise RuntimeError("the model returned 429")

    run = produce(body, expose_errors=True)

    assert {
        "type": "RUN_ERROR",
        "message": "RuntimeError: the model returned 429",
        "code": "AGUI-E020",
    } == run.events[-1]


# -- terminal events by hand -------------------------------------------------------------

MODES = ["strict", "repair", "audit"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("terminal", "rule"),
    [
        ({"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}, "AGUI-V003"),
        ({"type": "RUN_ERROR", "message": "quota exhausted", "code": "QUOTA"}, "AGUI-V004"),
    ],
)
def test_a_hand_sent_terminal_event_ends_the_run_and_anything_later_raises_at_its_call(
    mode: str, terminal: dict[str, Any], rule: str
) -> None:
    """The handler's RUN_FINISHED or RUN_ERROR is the run's last event: the writer sends no
    terminal event of its own, and an emit after it raises naming the rule and where the
    run ended, in every mode."""
    raised: list[ProtocolError] = []

    async def body(run: RunWriter) -> None:
        await run.say("done")
        await run.emit(terminal)
        assert run.ended
        try:
            await run.say("one more thing")
        except ProtocolError as error:
            raised.append(error)
        with pytest.raises(ProtocolError, match="already ended"):
            await run.emit(terminal)

    run = produce(body, mode=mode)

    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"] == (
        types(run)[:4]
    )
    assert terminal == run.events[-1]
    assert 5 == len(run.events)
    assert rule == raised[0].rule
    assert "the run already ended at event 4" in str(raised[0])
    assert "TEXT_MESSAGE_START" == raised[0].event_type
    assert [] == run.warnings
    consumed(run)


@pytest.mark.parametrize("mode", MODES)
def test_a_late_run_error_after_run_finished_is_sent_once_as_the_specification_allows(
    mode: str,
) -> None:
    """events/lifecycle: "A producer MAY emit RUN_ERROR after RUN_FINISHED, reporting a
    failure that surfaced after the run reported success"; after it, nothing (AGUI-V004).
    The official client accepts the stream (tests/test_differential.py)."""
    raised: list[ProtocolError] = []
    late = [{"type": "RUN_ERROR", "message": "again"}, {"type": "CUSTOM", "name": "x", "value": 1}]

    async def body(run: RunWriter) -> None:
        await run.emit({"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"})
        await run.emit({"type": "RUN_ERROR", "message": "flush failed", "code": "FLUSH"})
        for event in late:
            try:
                await run.emit(event)
            except ProtocolError as error:
                raised.append(error)

    run = produce(body, mode=mode)

    assert ["RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"] == types(run)
    assert ["AGUI-V004", "AGUI-V004"] == [error.rule for error in raised]
    assert "the run already ended at event 2 (RUN_ERROR)" in str(raised[0])
    assert [] == run.warnings
    session = consumed(run)
    assert "error" == session.runs[-1].status


@pytest.mark.parametrize("mode", MODES)
def test_a_hand_sent_run_started_raises_saying_the_writer_sends_it(mode: str) -> None:
    """In every mode, at the call; the run then ends as that mode ends a refused event."""
    raised: list[ProtocolError] = []

    async def body(run: RunWriter) -> None:
        try:
            await run.emit({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"})
        except ProtocolError as error:
            raised.append(error)

    run = produce(body, mode=mode)

    assert "AGUI-V002" == raised[0].rule
    assert "RUN_STARTED is sent by the writer" in str(raised[0])
    assert 1 == types(run).count("RUN_STARTED")
    expected = "RUN_FINISHED" if mode == "audit" else "RUN_ERROR"
    assert expected == run.events[-1]["type"]


def test_a_terminal_event_inside_a_helper_block_leaves_nothing_to_close() -> None:
    """RUN_ERROR may abandon what is open: leaving the blocks sends nothing more."""

    async def body(run: RunWriter) -> None:
        async with run.subagent("helper") as sub, sub.text_message() as message:
            await message.write("half")
            await run.emit({"type": "RUN_ERROR", "message": "cancelled upstream"})

    run = produce(body)

    assert "RUN_ERROR" == run.events[-1]["type"]
    assert "TEXT_MESSAGE_CONTENT" == run.events[-2]["type"]
    assert run.error is None  # no helper raised closing what the run abandoned
    consumed(run)


def test_repair_mode_closes_what_a_hand_sent_run_finished_leaves_open() -> None:
    """The handler's RUN_FINISHED is repaired like the writer's, then ends the run."""

    async def body(run: RunWriter) -> None:
        await run.emit({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
        await run.emit({"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"})

    run = produce(body, mode="repair")

    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "RUN_FINISHED"] == types(run)
    assert ["AGUI-W021"] == [w.rule for w in run.warnings]


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
        "message": "The agent failed; the server logged the details.",
        "code": "AGUI-E020",
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


def test_audit_mode_sends_a_schema_invalid_event_as_given_and_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dict the schema refuses, an unknown type, a chunk that cannot be expanded: each
    is sent as the handler gave it and logged with its id; the run ends as it would."""
    invalid = {"type": "TEXT_MESSAGE_START", "messageId": 7, "role": "assistant"}
    unknown = {"type": "RUN_PROGRESS", "percent": 50}
    chunk = {"type": "TEXT_MESSAGE_CHUNK", "delta": "no id"}

    async def body(run: RunWriter) -> None:
        assert await run.emit(invalid) is None
        assert await run.emit(unknown) is None
        await run.emit(chunk)
        await run.say("still here")

    with caplog.at_level(logging.WARNING, logger="aguikit.server"):
        run = produce(body, mode="audit")

    assert [invalid, unknown, chunk] == run.events[1:4]
    assert "RUN_FINISHED" == run.events[-1]["type"]
    assert ["AGUI-S001", "AGUI-S002", "AGUI-C001"] == [w.rule for w in run.warnings]
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0].startswith("AGUI-S001 schema-violation (event 1): ")
    assert messages[1].startswith("AGUI-S002 unknown-event-type (event 2): ")
    assert messages[2].startswith("AGUI-C001 chunk-without-id (event 3): ")


def test_audit_mode_refuses_at_the_call_a_document_json_cannot_carry() -> None:
    """NaN cannot be sent as given: WireFormatError at the emit; a handler that catches it
    goes on and the run finishes."""
    from aguikit.errors import WireFormatError

    async def body(run: RunWriter) -> None:
        with pytest.raises(WireFormatError):
            await run.emit({"type": "CUSTOM", "name": "n", "value": float("nan"), "x": 1})
        await run.say("fine")

    run = produce(body, mode="audit")

    assert ["RUN_STARTED", "TEXT_MESSAGE_START"] == types(run)[:2]
    assert "RUN_FINISHED" == run.events[-1]["type"]


@pytest.mark.parametrize(
    ("mode", "line"),
    [
        ("repair", "AGUI-W021 producer-repaired (event 4): Repaired: sent TOOL_CALL_END"),
        ("audit", "AGUI-V015 tool-result-for-open-call (event 4): "),
    ],
)
def test_every_log_line_names_the_rules_id_and_symbol(
    mode: str, line: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What ``aguikit rules`` explains is what a log search finds."""
    with caplog.at_level(logging.WARNING, logger="aguikit.server"):
        produce(faulty, mode=mode)

    assert caplog.records[0].getMessage().startswith(line)


# -- an event source (the official SDK's generator pattern) ------------------------------


def fed(source: Callable[[], Any], **options: Any) -> RunWriter:
    """A writer that has not started, fed ``source()``, ended as the endpoint ends it."""

    async def main() -> RunWriter:
        run = RunWriter(INPUT, **options)
        try:
            await run.feed(source())
        except BaseException as exc:
            if not await run.__aexit__(type(exc), exc, None):
                raise
        else:
            await run.__aexit__(None, None, None)
        return run

    return asyncio.run(main())


def test_a_generator_yielding_its_own_run_started_and_run_finished_is_sent_as_it_yields() -> None:
    """SDK events, its own lifecycle included: nothing added, nothing doubled."""
    core = pytest.importorskip("ag_ui.core")

    async def sdk_agent() -> Any:
        yield core.RunStartedEvent(thread_id="t1", run_id="r1")
        yield core.TextMessageStartEvent(message_id="m1", role="assistant")
        yield core.TextMessageContentEvent(message_id="m1", delta="hi")
        yield core.TextMessageEndEvent(message_id="m1")
        yield core.RunFinishedEvent(thread_id="t1", run_id="r1")

    run = fed(sdk_agent)

    assert [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ] == types(run)
    assert "hi" == consumed(run).messages[0].content


def test_a_generator_that_yields_no_lifecycle_gets_the_writers() -> None:
    """Wire dicts alone: the writer starts and finishes the run around them."""

    async def agent() -> Any:
        yield {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}
        yield {"type": "TEXT_MESSAGE_END", "messageId": "m1"}

    run = fed(agent)

    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "RUN_FINISHED"] == types(run)


def test_a_refused_event_is_raised_inside_the_generator_at_its_yield() -> None:
    """The generator sees the ProtocolError where it yielded the event; one that catches
    it goes on, and an uncaught one ends the run with RUN_ERROR naming the rule."""
    seen: list[str] = []

    async def agent() -> Any:
        try:
            yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}
        except ProtocolError as error:
            seen.append(str(error.rule))
        yield {"type": "TEXT_MESSAGE_END", "messageId": "nope"}

    run = fed(agent)

    assert ["AGUI-V012"] == seen
    assert ["RUN_STARTED", "RUN_ERROR"] == types(run)
    assert "AGUI-V012" == run.events[-1]["code"]


def test_a_generator_that_raises_before_its_first_event_gets_a_started_and_failed_run() -> None:
    async def agent() -> Any:
        raise ConnectionError("db.internal:5432 refused")
        yield {}  # an async generator

    run = fed(agent)

    assert ["RUN_STARTED", "RUN_ERROR"] == types(run)
    assert "AGUI-E020" == run.events[-1]["code"]


def test_a_generator_yielding_encoded_text_is_told_to_yield_the_event() -> None:
    """``yield encoder.encode(event)`` left over from an SDK endpoint: a TypeError at the
    yield that says what to write."""
    messages: list[str] = []

    async def agent() -> Any:
        try:
            yield 'data: {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}\n\n'
        except TypeError as error:
            messages.append(str(error))
            raise

    run = fed(agent)

    assert "not its encoded text" in messages[0]
    assert "RUN_ERROR" == run.events[-1]["type"]


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
