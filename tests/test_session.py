"""Tests for :mod:`aguikit.session`: the whole consumer pipeline behind one call."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from tests.support import (
    run_finished,
    run_started,
    text_content,
    text_message,
    text_start,
    tool_call_args,
    tool_call_end,
    tool_call_result,
    tool_call_start,
)

from aguikit.apply import ChangeKind, What
from aguikit.errors import (
    PatchError,
    ProtocolError,
    SchemaValidationError,
    TruncatedStreamError,
)
from aguikit.models import RunStartedEvent, TextMessageChunkEvent
from aguikit.session import Session, SessionWarning

START = run_started(thread_id="t", run_id="r")
FINISH = run_finished(thread_id="t", run_id="r")


def test_a_clean_stream_of_dicts_builds_messages_and_warns_nothing() -> None:
    """Raw wire dicts in, materialised messages out, silence."""
    session = Session()
    session.feed_all([START, *text_message("m1", "Hello, ", "world"), FINISH])
    session.finish()

    assert "Hello, world" == session.messages[0].content
    assert [] == session.warnings


def test_feed_returns_what_each_delivered_event_changed() -> None:
    """A chunk expands into two events, so feed reports two updates, each event with its change."""
    session = Session()
    session.feed(START)
    updates = session.feed(TextMessageChunkEvent(message_id="m", delta="x"))

    assert [ChangeKind.STARTED, ChangeKind.CONTENT] == [u.change.kind for u in updates]
    assert {What.MESSAGES} == {u.change.what for u in updates}
    assert ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"] == [u.event.type for u in updates]


def test_the_deprecated_pairing_helpers_still_answer_with_a_warning() -> None:
    """``last_delivered`` and ``Update.changes`` keep working for 0.1 callers, and say so."""
    session = Session()
    (update,) = session.feed(START)

    with pytest.deprecated_call():
        assert [update.event] == session.last_delivered
    with pytest.deprecated_call():
        assert (update.change,) == update.changes


def test_delivered_holds_the_events_after_the_boundary_and_chunk_expansion() -> None:
    """What a subscriber sees: explicit events, with the undeclared member stripped."""
    session = Session()
    session.feed(START)
    session.feed({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "x", "later": 1})
    session.feed(FINISH)

    assert [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ] == [e.type for e in session.delivered]
    assert all(e.extra_members is None for e in session.delivered)


def test_warnings_are_records_with_the_input_index_and_go_to_the_aguikit_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Never printed: logged on ``aguikit`` and kept as SessionWarning records."""
    session = Session()
    with caplog.at_level(logging.WARNING, logger="aguikit"):
        session.feed(START)
        session.feed({"type": "FUTURE_EVENT", "x": 1})

    (warning,) = session.warnings
    assert isinstance(warning, SessionWarning)
    assert ("unknown-event", 1) == (warning.code, warning.event_index)
    assert "FUTURE_EVENT" in warning.message
    assert any("FUTURE_EVENT" in record.getMessage() for record in caplog.records)


def test_a_malformed_known_field_is_fatal_with_its_index_and_changes_nothing() -> None:
    """The error is typed, names the input, and the conversation is as it was."""
    session = Session()
    session.feed_all([START, *text_message("m1", "kept")[:2]])

    with pytest.raises(SchemaValidationError) as caught:
        session.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 42})
    assert 3 == caught.value.event_index
    assert "kept" == session.messages[0].content


def test_a_protocol_violation_inside_an_expanded_chunk_applies_none_of_it() -> None:
    """Everything one input expands into is verified before any of it is applied."""
    session = Session()
    session.feed(START)
    session.feed({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "helper"})
    session.feed({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"})

    with pytest.raises(ProtocolError) as caught:
        # Expands to the end m1 is owed (legal) and a run end with s1 still active (not).
        session.feed(FINISH)
    assert 3 == caught.value.event_index
    assert "TEXT_MESSAGE_END" not in [e.type for e in session.delivered]
    assert "a" == session.messages[0].content


def test_after_a_fatal_error_the_session_stays_readable_and_refuses_more_input() -> None:
    """The error is kept and raised again; reading still works."""
    session = Session()
    session.feed_all([START, *text_message("m1", "x")])
    with pytest.raises(ProtocolError) as caught:
        session.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "y"})

    assert caught.value is session.error
    with pytest.raises(ProtocolError):
        session.feed(FINISH)
    assert "x" == session.messages[0].content


def test_an_unappliable_state_delta_is_a_warning_and_the_state_stays() -> None:
    """The corpus's rule: warn, apply nothing, keep the run."""
    session = Session()
    session.feed_all(
        [
            START,
            {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}},
            {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/b"}]},
            FINISH,
        ]
    )
    session.finish()

    assert {"a": 1} == session.state
    assert "Failed to apply state patch" in session.warnings[0].message
    assert "STATE_DELTA" in [e.type for e in session.delivered]


def test_patch_errors_can_be_raised_instead_and_still_change_nothing() -> None:
    """``patch_errors="raise"`` surfaces the PatchError with its index."""
    session = Session(patch_errors="raise")
    session.feed_all([START, {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}])

    with pytest.raises(PatchError) as caught:
        session.feed({"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/b"}]})
    assert (2, 0) == (caught.value.event_index, caught.value.op_index)
    assert {"a": 1} == session.state


def test_finish_closes_open_chunk_streams_and_reports_a_truncated_run() -> None:
    """A run with no terminal has no outcome: finish raises, the message is kept."""
    session = Session()
    session.feed(START)
    session.feed({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "half"})

    with pytest.raises(TruncatedStreamError, match="ended without a terminal event"):
        session.finish()
    assert "half" == session.messages[0].content
    assert "TEXT_MESSAGE_END" == session.delivered[-1].type


def test_a_session_without_verification_applies_an_orphan_tolerantly() -> None:
    """verify=False leaves the applier's tolerance in charge."""
    session = Session(verify=False)
    session.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "orphan"})

    assert "orphan" == session.messages[0].content


def test_typed_events_and_starting_state_are_accepted() -> None:
    """Typed events skip schema validation; thread and run ids are exposed."""
    session = Session(state={"n": 0})
    session.feed(RunStartedEvent(thread_id="t", run_id="r"))

    assert ({"n": 0}, "t", "r") == (session.state, session.thread_id, session.run_id)
    assert [] == session.subagents
    assert [] == session.interrupts
    assert [] == session.reasoning


def test_a_newer_producer_version_is_served_with_a_warning() -> None:
    """The consumer proceeds and says which versions differ."""
    session = Session(protocol_version="1.0")
    session.feed({**START, "protocolVersion": "1.1"})

    assert "protocol-version-newer" == session.warnings[0].code
    assert "1.1" in session.warnings[0].message


def test_each_runs_outcome_is_recorded_finished_error_interrupted_cancelled() -> None:
    """``runs`` tells a failed run from a finished one without re-reading the stream."""
    interrupt = {"id": "i1", "reason": "approval"}
    session = Session()
    session.feed_all(
        [
            START,
            FINISH,
            {**START, "runId": "r2"},
            {"type": "RUN_ERROR", "message": "boom", "code": "E42"},
            {**START, "runId": "r3"},
            {**FINISH, "runId": "r3", "outcome": {"type": "interrupt", "interrupts": [interrupt]}},
            {**START, "runId": "r4"},
            {**FINISH, "runId": "r4", "outcome": {"type": "cancelled"}},
            {**START, "runId": "r5"},
        ]
    )
    runs = session.runs

    assert ["finished", "error", "interrupted", "cancelled", "running"] == [r.status for r in runs]
    assert ["r", "r2", "r3", "r4", "r5"] == [r.run_id for r in runs]
    assert ("boom", "E42", 2, 3) == (
        runs[1].message,
        runs[1].code,
        runs[1].started_at,
        runs[1].ended_at,
    )
    assert ["i1"] == [i.id for i in runs[2].interrupts]


def test_a_late_run_error_fails_the_run_that_had_finished() -> None:
    """A RUN_ERROR after RUN_FINISHED reports a failure that surfaced after success: the
    lifecycle page's "A consumer MUST treat the run as failed in that case" makes that run's
    one outcome the error, not a success with an error beside it."""
    session = Session()
    session.feed_all([START, FINISH, {"type": "RUN_ERROR", "message": "flush failed"}])

    assert [("r", "error", "flush failed", 0, 2)] == [
        (r.run_id, r.status, r.message, r.started_at, r.ended_at) for r in session.runs
    ]


def test_a_run_error_before_any_run_started_is_a_run_of_its_own() -> None:
    """The protocol allows a run to fail before it began (AGUI-V001's exception)."""
    session = Session()
    session.feed({"type": "RUN_ERROR", "message": "no credits"})

    assert [(None, "error", "no credits")] == [
        (r.run_id, r.status, r.message) for r in session.runs
    ]


def test_by_default_a_protocol_error_is_kept_and_raised_again() -> None:
    """Library consumers keep the old contract: a broken stream stays broken."""
    session = Session()
    session.feed(START)
    with pytest.raises(ProtocolError):
        session.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "x", "delta": "d"})
    with pytest.raises(ProtocolError):
        session.feed(FINISH)


def test_a_recovering_session_skips_the_failing_input_and_judges_the_next() -> None:
    """``recover=True``: every violation is reported, the state is as if it never came."""
    session = Session(recover=True)
    session.feed(START)
    with pytest.raises(ProtocolError) as first:
        session.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "x", "delta": "d"})
    session.feed_all(text_message("m1", "ok"))
    with pytest.raises(ProtocolError) as second:
        session.feed({"type": "TOOL_CALL_END", "toolCallId": "c9"})
    session.feed(FINISH)
    session.finish()

    assert (1, 5) == (first.value.event_index, second.value.event_index)
    assert ["ok"] == [m.content for m in session.messages]
    assert session.error is None
    assert ["finished"] == [r.status for r in session.runs]


def _conversation() -> list[dict[str, Any]]:
    return [
        START,
        *text_message("m1", "Hello, ", "world"),
        text_start("m2"),
        text_content("m2", "still open"),
        tool_call_start("c1", "lookup", parentMessageId="m1"),
        tool_call_args("c1", '{"q": '),
        tool_call_args("c1", '"x"}'),
        tool_call_end("c1"),
        tool_call_result("c1", "t1", content="42 results"),
        tool_call_args("c9", "{}"),  # a call nobody started: the applier's warning either way
    ]


def test_keep_text_false_forgets_what_has_ended_and_nothing_else() -> None:
    """
    A checker's session: an ended message, a finished call's arguments and a result lose
    their text; which messages and calls exist, their order, the updates and the warnings
    are a full session's.
    """
    full, lean = Session(verify=False), Session(verify=False, keep_text=False)
    full_updates = [u for event in _conversation() for u in full.feed(event)]
    lean_updates = [u for event in _conversation() for u in lean.feed(event)]

    assert [u.change for u in full_updates] == [u.change for u in lean_updates]
    assert ["unknown-tool-call"] == [w.code for w in full.warnings]
    assert [(w.code, w.message) for w in full.warnings] == [
        (w.code, w.message) for w in lean.warnings
    ]
    assert [m.id for m in full.messages] == [m.id for m in lean.messages]
    kept = {m.id: m for m in full.messages}
    forgotten = {m.id: m for m in lean.messages}
    assert ("Hello, world", "") == (kept["m1"].content, forgotten["m1"].content)
    assert ("42 results", "") == (kept["t1"].content, forgotten["t1"].content)
    assert ['{"q": "x"}'] == [c.function.arguments for c in kept["m1"].tool_calls or ()]
    assert [("c1", "lookup", "")] == [
        (c.id, c.function.name, c.function.arguments) for c in forgotten["m1"].tool_calls or ()
    ]
    assert "still open" == kept["m2"].content == forgotten["m2"].content  # not ended yet


def test_keep_text_false_holds_no_more_memory_for_a_longer_conversation() -> None:
    """Two megabytes of text through ended messages leave less than a tenth of it held."""
    import tracemalloc

    def conversation(messages: int) -> Iterator[dict[str, Any]]:
        yield START
        for n in range(messages):
            yield from text_message(f"m{n}", *(f"{n:>6} " + "x" * 93 for _ in range(100)))

    Session(keep_text=False).feed_all(conversation(2))  # schemas and parsers built once
    held = {}
    for keep in (True, False):
        tracemalloc.start()
        session = Session(keep_text=keep, keep_delivered=False)
        for event in conversation(200):  # 200 x 100 x 100 characters
            session.feed(event)
        held[keep] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del session

    assert held[True] > 2_000_000
    assert held[False] < 200_000


@pytest.mark.parametrize(
    "bad", [{"message": {"type": 1}}, {"message": "down", "code": 7}], ids=["message", "code"]
)
def test_a_trusted_run_error_with_a_non_text_field_is_malformed_and_changes_nothing(
    bad: dict[str, Any],
) -> None:
    """``validate=False`` trusts the shape; a RUN_ERROR whose message or code is not text
    (no wire document could hold one) fails as ``AGUI-V092`` before it is recorded, in both
    builds: the compiled one's typed run record would otherwise raise a bare TypeError."""
    session = Session(validate=False)
    session.feed({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    before = session.runs

    with pytest.raises(ProtocolError) as caught:
        session.feed({"type": "RUN_ERROR", "message": "down", **bad})

    assert caught.value.rule == "AGUI-V092"
    assert session.runs == before
