"""
The verifier, rule by rule: for every rule id a minimal stream that breaks it and the
nearest stream that does not, plus the engine's own promises (state unchanged after an
error, nothing but ``ProtocolError`` escapes, sequential runs, structured errors).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import attrs
import pytest
from tests.support import (
    reasoning_encrypted_value,
    reasoning_end,
    reasoning_message_content,
    reasoning_message_end,
    reasoning_message_start,
    reasoning_start,
    run_error,
    run_finished,
    run_started,
    step_finished,
    step_started,
    subagent_finished,
    subagent_started,
    text_content,
    text_end,
    text_start,
    thinking,
    tool_call_args,
    tool_call_end,
    tool_call_result,
    tool_call_start,
    typed,
)

from aguikit._generated import models
from aguikit.errors import ProtocolError, TruncatedStreamError
from aguikit.verify import Verifier, verify_all

# Short names for the builders every stream below is made of.
rs, rf, rerr = run_started, run_finished, run_error
ts, tc, te = text_start, text_content, text_end
cs, ca, ce, result = tool_call_start, tool_call_args, tool_call_end, tool_call_result
rstart, rend = reasoning_start, reasoning_end
rms, rmc, rme = reasoning_message_start, reasoning_message_content, reasoning_message_end
sub_start, sub_end = subagent_started, subagent_finished
encrypted = reasoning_encrypted_value


def events(*docs: dict[str, Any]) -> list[Any]:
    return [typed(doc) for doc in docs]


def rejects(rule: str, *docs: dict[str, Any], thread_id: str | None = None) -> ProtocolError:
    """Verify the stream and return the error, asserting it names ``rule``."""
    with pytest.raises(ProtocolError) as info:
        verify_all(events(*docs), thread_id=thread_id)
    assert rule == info.value.rule, str(info.value)
    return info.value


def accepts(*docs: dict[str, Any], thread_id: str | None = None) -> None:
    verify_all(events(*docs), thread_id=thread_id)


# ------------------------------------------------------------------------------ lifecycle


def test_a_stream_must_open_with_run_started_or_run_error() -> None:
    """V001: anything else first (even CUSTOM) is rejected; RUN_ERROR first is admitted."""
    error = rejects("AGUI-V001", {"type": "CUSTOM", "name": "x", "value": 1}, rs(), rf())

    assert "First event must be 'RUN_STARTED'" in error.message
    accepts(rs(), {"type": "CUSTOM", "name": "x", "value": 1}, rf())
    accepts(rerr("unreachable"))


def test_run_started_while_a_run_is_active_is_rejected() -> None:
    """V002: runs are sequential; a RUN_STARTED after the terminal event starts a new run."""
    error = rejects("AGUI-V002", rs(), rs("r2"))

    assert "Cannot send 'RUN_STARTED' while a run is still active" in error.message
    assert "r1" == error.entity_id
    accepts(rs(), rf(), rs("r2"), rf("r2"))


def test_nothing_but_a_new_run_or_a_late_error_follows_run_finished() -> None:
    """V003: an ordinary event after RUN_FINISHED is rejected; a late RUN_ERROR is not."""
    error = rejects("AGUI-V003", rs(), rf(), ts())

    assert "The run has already finished with 'RUN_FINISHED'" in error.message
    accepts(rs(), rf(), rerr("late"))


def test_nothing_but_a_new_run_follows_run_error() -> None:
    """V004: after RUN_ERROR only RUN_STARTED; a second RUN_ERROR is rejected too."""
    rejects("AGUI-V004", rs(), rerr(), ts())
    rejects("AGUI-V004", rs(), rf(), rerr(), rerr())
    accepts(rs(), rerr(), rs("r2"), ts(), tc(), te(), rf("r2"))


def test_run_finished_requires_everything_closed() -> None:
    """V005: each open family is named, the earliest opened first; RUN_ERROR may abandon."""
    error = rejects("AGUI-V005", rs(), ts("m1"), ts("m2"), rf())

    assert "Cannot send 'RUN_FINISHED' while text messages are still active: m1, m2" in (
        error.message
    )
    assert "m1" == error.entity_id
    sub = rejects("AGUI-V005", rs(), sub_start("s1"), rf())
    assert "s1" in sub.message
    step_error = rejects("AGUI-V005", rs(), step_started("plan", subagentRunId="s9"), rf())
    assert "plan (subagent 's9')" in step_error.message
    rejects("AGUI-V005", rs(), cs(), rf())
    rejects("AGUI-V005", rs(), rstart("x"), rf())
    rejects("AGUI-V005", rs(), thinking("START"), rf())
    accepts(rs(), ts("m1"), ts("m2"), sub_start("s1"), rerr())
    accepts(rs(), ts("m1"), te("m1"), rf())


def test_a_stream_that_stops_inside_a_run_is_truncated() -> None:
    """V006: finish() raises TruncatedStreamError naming the open run."""
    verifier = Verifier()
    for event in events(rs(), ts(), tc(), te()):
        verifier.verify(event)

    with pytest.raises(TruncatedStreamError) as info:
        verifier.finish()

    assert "AGUI-V006" == info.value.rule
    assert "ended without a terminal event" in info.value.message
    assert "r1" == info.value.entity_id
    accepts(rs(), ts(), tc(), te(), rf())


def test_a_stream_without_any_run_is_truncated() -> None:
    """V007: an empty stream did not carry a run; a lone RUN_ERROR did."""
    with pytest.raises(TruncatedStreamError) as info:
        verify_all([])

    assert "AGUI-V007" == info.value.rule
    accepts(rerr())


def test_run_finished_must_name_the_open_run() -> None:
    """V008: the boundary events of a run agree on its runId."""
    error = rejects("AGUI-V008", rs(), rf(run_id="other"))

    assert "must agree on their runId" in error.message
    accepts(rs(), rf())


def test_every_run_and_boundary_names_the_stream_thread() -> None:
    """V009: RUN_FINISHED and later RUN_STARTEDs carry the same threadId, or the input's."""
    finished = rejects("AGUI-V009", rs(), rf(thread_id="other"))
    second = rejects("AGUI-V009", rs(), rf(), rs("r2", thread_id="other"))
    given = rejects("AGUI-V009", rs(thread_id="t1"), rf(), thread_id="t0")

    assert "carry the input's threadId" in finished.message
    assert "carries the input's threadId" in second.message
    assert "t0" == given.entity_id
    accepts(rs(), rf(), rs("r2"), rf("r2"), thread_id="t1")


# ------------------------------------------------------------------------ text and tools


def test_a_text_message_cannot_be_opened_twice_at_once() -> None:
    """V011: re-opening an open id is rejected; re-opening a closed one continues it."""
    rejects("AGUI-V011", rs(), ts(), ts())
    accepts(rs(), ts(), tc(), te(), ts(), tc(), te(), rf())


def test_text_content_and_end_need_an_open_message() -> None:
    """V012: an orphan content or a second end is rejected, with the official wording."""
    error = rejects("AGUI-V012", rs(), tc("orphan-content-m1"), rf())

    assert "No active text message found with ID 'orphan-content-m1'" in error.message
    assert "orphan-content-m1" == error.entity_id
    assert "TEXT_MESSAGE_CONTENT" == error.event_type
    assert 1 == error.event_index
    rejects("AGUI-V012", rs(), ts(), te(), te(), rf())
    accepts(rs(), ts("a"), ts("b"), tc("b"), tc("a"), te("a"), te("b"), rf())


def test_a_tool_call_cannot_be_opened_twice_at_once() -> None:
    """V013: parallel calls with distinct ids are fine, one id twice is not."""
    rejects("AGUI-V013", rs(), cs(), cs())
    accepts(rs(), cs("c1"), cs("c2"), ca("c2"), ca("c1"), ce("c1"), ce("c2"), rf())


def test_tool_args_and_end_need_an_open_call() -> None:
    """V014: args for a call never opened, or after its end, are rejected."""
    error = rejects("AGUI-V014", rs(), ca("orphan"), rf())

    assert "No active tool call found with ID 'orphan'" in error.message
    rejects("AGUI-V014", rs(), cs(), ce(), ca(), rf())
    accepts(rs(), cs(), ca(), ce(), rf())


def test_a_tool_result_may_not_answer_a_call_still_streaming() -> None:
    """V015: the result follows the call's end; results for unknown calls are fine."""
    rejects("AGUI-V015", rs(), cs(), result(), ce(), rf())
    accepts(rs(), cs(), ce(), result(), rf())
    accepts(rs(), result("from-history"), rf())


def test_a_tool_call_may_open_inside_the_message_that_narrates_it() -> None:
    """Not a rule: a call with parentMessageId streams inside its open message."""
    accepts(rs(), ts(), tc(), cs(parentMessageId="m1"), ca(), tc(), ce(), te(), rf())


# ----------------------------------------------------------------------------- reasoning


def test_a_reasoning_span_cannot_be_opened_twice_at_once() -> None:
    """V021: one span id twice is rejected; a message may share the span's id."""
    rejects("AGUI-V021", rs(), rstart("x"), rstart("x"))
    accepts(rs(), rstart("x"), rms("x"), rmc("x"), rme("x"), rend("x"), rf())


def test_reasoning_end_needs_an_open_span() -> None:
    """V022: REASONING_END without REASONING_START is rejected."""
    error = rejects("AGUI-V022", rs(), rend("x"), rf())

    assert "No active reasoning span found with ID 'x'" in error.message
    accepts(rs(), rstart("x"), rend("x"), rf())


def test_a_reasoning_message_cannot_be_opened_twice_at_once() -> None:
    """V023: one reasoning message id twice is rejected."""
    rejects("AGUI-V023", rs(), rms("rm"), rms("rm"))
    accepts(rs(), rms("rm"), rme("rm"), rms("rm"), rme("rm"), rf())


def test_reasoning_content_needs_an_open_reasoning_message() -> None:
    """V024: the corpus's reasoning-discipline-verified shape."""
    error = rejects("AGUI-V024", rs(), rmc("m-reasoning-discipline-1"), rf())

    assert "No active reasoning message found with ID 'm-reasoning-discipline-1'" in (error.message)
    accepts(rs(), rstart("span"), rms("rm"), rmc("rm"), rme("rm"), rend("span"), rf())


# ------------------------------------------------------------------------------ thinking


def test_thinking_blocks_do_not_nest() -> None:
    """V031."""
    rejects("AGUI-V031", rs(), thinking("START"), thinking("START"))
    accepts(rs(), thinking("START"), thinking("END"), thinking("START"), thinking("END"), rf())


def test_thinking_end_needs_an_open_block() -> None:
    """V032."""
    rejects("AGUI-V032", rs(), thinking("END"), rf())
    accepts(rs(), thinking("START", title="t"), thinking("END"), rf())


def test_thinking_messages_do_not_nest() -> None:
    """V033."""
    rejects(
        "AGUI-V033",
        rs(),
        thinking("START"),
        thinking("TEXT_MESSAGE_START"),
        thinking("TEXT_MESSAGE_START"),
    )
    accepts(
        rs(),
        thinking("START"),
        thinking("TEXT_MESSAGE_START"),
        thinking("TEXT_MESSAGE_END"),
        thinking("TEXT_MESSAGE_START"),
        thinking("TEXT_MESSAGE_END"),
        thinking("END"),
        rf(),
    )


def test_thinking_content_needs_an_open_thinking_message() -> None:
    """V034."""
    rejects("AGUI-V034", rs(), thinking("START"), thinking("TEXT_MESSAGE_CONTENT", delta="x"))
    accepts(
        rs(),
        thinking("START"),
        thinking("TEXT_MESSAGE_START"),
        thinking("TEXT_MESSAGE_CONTENT", delta="x"),
        thinking("TEXT_MESSAGE_END"),
        thinking("END"),
        rf(),
    )


def test_a_thinking_message_opens_inside_a_thinking_block() -> None:
    """V035."""
    rejects("AGUI-V035", rs(), thinking("TEXT_MESSAGE_START"))
    accepts(
        rs(),
        thinking("START"),
        thinking("TEXT_MESSAGE_START"),
        thinking("TEXT_MESSAGE_END"),
        thinking("END"),
        rf(),
    )


def test_a_thinking_block_cannot_end_around_an_open_message() -> None:
    """V036."""
    rejects("AGUI-V036", rs(), thinking("START"), thinking("TEXT_MESSAGE_START"), thinking("END"))
    accepts(
        rs(),
        thinking("START"),
        thinking("TEXT_MESSAGE_START"),
        thinking("TEXT_MESSAGE_END"),
        thinking("END"),
        rf(),
    )


# --------------------------------------------------------------------------------- steps


def test_a_step_name_does_not_nest_with_itself_under_one_owner() -> None:
    """V041: the same name under two owners is fine."""
    rejects("AGUI-V041", rs(), step_started("plan"), step_started("plan"))
    accepts(
        rs(),
        step_started("plan"),
        step_started("plan", subagentRunId="s1"),
        step_finished("plan", subagentRunId="s1"),
        step_finished("plan"),
        rf(),
    )


def test_step_finished_needs_a_started_step() -> None:
    """V042: the corpus's wording 'that was not started'."""
    error = rejects("AGUI-V042", rs(), step_finished("plan"), rf())

    assert "that was not started" in error.message
    accepts(rs(), step_started("plan"), step_finished("plan"), rf())


def test_a_step_is_finished_by_the_owner_that_started_it() -> None:
    """V043: closing the parent's step under a subagent's tag names the real owner."""
    error = rejects(
        "AGUI-V043",
        rs(),
        step_started("plan"),
        step_finished("plan", subagentRunId="s1"),
    )

    assert "open under the parent agent" in error.message
    accepts(
        rs(),
        step_started("plan", subagentRunId="s1"),
        step_finished("plan", subagentRunId="s1"),
        rf(),
    )


# ----------------------------------------------------------------------------- subagents


def test_an_active_subagent_cannot_start_again() -> None:
    """V051."""
    rejects("AGUI-V051", rs(), sub_start("s1"), sub_start("s1"))
    accepts(rs(), sub_start("s1"), sub_start("s2"), sub_end("s2"), sub_end("s1"), rf())


def test_a_subagent_id_names_one_invocation() -> None:
    """V052: a finished id cannot start again in the same run, but may in the next run."""
    rejects("AGUI-V052", rs(), sub_start("s1"), sub_end("s1"), sub_start("s1"))
    accepts(
        rs(),
        sub_start("s1"),
        sub_end("s1"),
        rf(),
        rs("r2"),
        sub_start("s1"),
        sub_end("s1"),
        rf("r2"),
    )


def test_a_subagent_parent_must_have_started() -> None:
    """V053: a finished parent still counts as started."""
    error = rejects("AGUI-V053", rs(), sub_start("s2", parentSubagentRunId="s1"))

    assert "s1" in error.message
    accepts(
        rs(),
        sub_start("s1"),
        sub_end("s1"),
        sub_start("s2", parentSubagentRunId="s1"),
        sub_end("s2"),
        rf(),
    )


def test_subagent_terminals_name_an_active_invocation() -> None:
    """V054: SUBAGENT_FINISHED or SUBAGENT_ERROR for an unknown id is rejected."""
    error = rejects("AGUI-V054", rs(), sub_end("s-unstarted"), rf())

    assert "s-unstarted" in error.message
    rejects("AGUI-V054", rs(), {"type": "SUBAGENT_ERROR", "subagentRunId": "s", "message": "x"})
    accepts(
        rs(), sub_start("s"), {"type": "SUBAGENT_ERROR", "subagentRunId": "s", "message": "x"}, rf()
    )


# --------------------------------------------------------------------------- attribution


def test_a_continuation_naming_another_subagent_is_rejected() -> None:
    """V061: 'does not match'; untagged continuations agree with any owner."""
    error = rejects("AGUI-V061", rs(), cs(subagentRunId="s1"), ca(), ce(subagentRunId="s2"))

    assert "does not match" in error.message
    rejects("AGUI-V061", rs(), ts(), tc(subagentRunId="s1"))
    accepts(rs(), ts(subagentRunId="s1"), tc(), tc(subagentRunId="s1"), te(), rf())


def test_a_reopen_under_another_owner_is_rejected_but_untagged_keeps_the_owner() -> None:
    """V061: the first writer owns the id for the rest of the run."""
    rejects("AGUI-V061", rs(), ts(subagentRunId="s1"), te(), ts(subagentRunId="s2"))
    # An untagged reopen keeps s1 as the owner, so s2 is still a stranger afterwards.
    rejects("AGUI-V061", rs(), ts(subagentRunId="s1"), te(), ts(), tc(subagentRunId="s2"))
    accepts(rs(), ts(subagentRunId="s1"), te(), ts(), tc(subagentRunId="s1"), te(), rf())


def test_reasoning_span_and_message_share_one_owner() -> None:
    """V061: a span and a message with one id cannot be claimed by different producers."""
    rejects("AGUI-V061", rs(), rstart("x", subagentRunId="s1"), rms("x", subagentRunId="s2"))
    accepts(rs(), rstart("x", subagentRunId="s1"), rms("x"), rme("x"), rend("x"), rf())


def test_encrypted_values_are_checked_against_the_entity_their_subtype_names() -> None:
    """V061: a tool-call subtype checks the call's owner, message the message's."""
    rejects(
        "AGUI-V061",
        rs(),
        cs(subagentRunId="s1"),
        ce(),
        encrypted("tool-call", "c1", subagentRunId="s2"),
    )
    rejects(
        "AGUI-V061",
        rs(),
        rms("x", subagentRunId="s1"),
        rme("x"),
        encrypted("message", "x", subagentRunId="s2"),
    )
    accepts(
        rs(), cs(subagentRunId="s1"), ce(), encrypted("tool-call", "c1", subagentRunId="s1"), rf()
    )
    accepts(rs(), encrypted("message", "unknown", subagentRunId="s2"), rf())


def test_activity_deltas_agree_with_the_snapshot_owner() -> None:
    """V061: a replacing snapshot re-owns the activity, replace:false keeps the owner."""

    def snap(tag: str, **extra: Any) -> dict[str, Any]:
        return {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": "a1",
            "activityType": "p",
            "content": {},
            "subagentRunId": tag,
            **extra,
        }

    delta = {
        "type": "ACTIVITY_DELTA",
        "messageId": "a1",
        "activityType": "p",
        "patch": [],
        "subagentRunId": "s2",
    }
    rejects("AGUI-V061", rs(), snap("s1"), delta)
    rejects("AGUI-V061", rs(), snap("s1"), snap("s2", replace=False), delta)
    accepts(rs(), snap("s1"), snap("s2"), delta, rf())


def test_a_tool_call_belongs_to_its_parent_message_owner() -> None:
    """V062: a tag disagreeing with the parent message's owner; untagged inherits it."""
    error = rejects(
        "AGUI-V062", rs(), ts(subagentRunId="s1"), cs(parentMessageId="m1", subagentRunId="s2")
    )

    assert "does not match" in error.message
    # The untagged call inherited s1, so an s2-tagged continuation is a mismatch.
    rejects(
        "AGUI-V061", rs(), ts(subagentRunId="s1"), cs(parentMessageId="m1"), ca(subagentRunId="s2")
    )
    accepts(
        rs(),
        ts(subagentRunId="s1"),
        cs(parentMessageId="m1"),
        ca(subagentRunId="s1"),
        ce(),
        te(),
        rf(),
    )


def test_snapshots_seed_ownership_authoritatively_and_the_input_echo_only_for_new_ids() -> None:
    """MESSAGES_SNAPSHOT replaces owners; the RUN_STARTED input seeds ids not yet known."""
    snapshot = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {
                "id": "m1",
                "role": "assistant",
                "subagentRunId": "s1",
                "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        ],
    }
    run_input = {"threadId": "t1", "runId": "r1", "messages": snapshot["messages"]}
    rejects("AGUI-V061", rs(), snapshot, ts("m1", subagentRunId="s2"))
    rejects("AGUI-V061", rs(), snapshot, cs("c1", subagentRunId="s2"))
    rejects("AGUI-V061", rs(input=run_input), ts("m1", subagentRunId="s2"))
    accepts(rs(input=run_input), ts("m1", subagentRunId="s1"), te("m1"), rf())
    # Authoritative: a snapshot naming the parent as owner replaces s1.
    parent_owned = {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "m1", "role": "assistant"}]}
    accepts(rs(), ts("m1", subagentRunId="s1"), te(), parent_owned, ts("m1"), tc("m1"), te(), rf())
    rejects(
        "AGUI-V061",
        rs(),
        ts("m1", subagentRunId="s1"),
        te(),
        parent_owned,
        ts("m1", subagentRunId="s1"),
    )


def test_a_tool_result_mints_its_message_under_its_own_attribution() -> None:
    """V061: re-opening the minted tool message under another subagent is a mismatch."""
    rejects(
        "AGUI-V061", rs(), result("c1", "tm1", subagentRunId="s1"), ts("tm1", subagentRunId="s2")
    )
    accepts(
        rs(),
        result("c1", "tm1", subagentRunId="s1"),
        ts("tm1", subagentRunId="s1"),
        te("tm1"),
        rf(),
    )


def test_unannounced_subagent_attribution_is_accepted() -> None:
    """Not a rule: a tag need not name a SUBAGENT_STARTED invocation, nor a live one."""
    accepts(rs(), ts(subagentRunId="ghost"), tc(subagentRunId="ghost"), te(), rf())
    accepts(rs(), sub_start("s1"), sub_end("s1"), ts(subagentRunId="s1"), te(), rf())


# ------------------------------------------------------------------------------ outcomes


def test_an_interrupt_outcome_carries_an_interrupt() -> None:
    """V071."""
    rejects("AGUI-V071", rs(), rf(outcome={"type": "interrupt", "interrupts": []}))
    accepts(
        rs(), rf(outcome={"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]})
    )


def test_interrupt_ids_are_unique_within_an_outcome() -> None:
    """V072: the draft corpus wording."""
    twice = [{"id": "i1", "reason": "approval"}, {"id": "i1", "reason": "approval"}]
    error = rejects("AGUI-V072", rs(), rf(outcome={"type": "interrupt", "interrupts": twice}))

    assert "two interrupts carrying the id 'i1'" in error.message
    accepts(
        rs(),
        rf(outcome={"type": "interrupt", "interrupts": [twice[0], {"id": "i2", "reason": "x"}]}),
    )


# -------------------------------------------------------------------------------- engine


def test_chunk_events_must_be_normalized_first() -> None:
    """V091: the verifier does not expand chunks; it says so instead of passing them."""
    rejects("AGUI-V091", rs(), {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"})
    rejects("AGUI-V091", rs(), {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "delta": "x"})
    rejects("AGUI-V091", rs(), {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r", "delta": "x"})
    accepts(rs(), ts(), tc(), te(), rf())


@pytest.mark.parametrize(
    "junk",
    [
        pytest.param(object(), id="not-an-event"),
        pytest.param({"type": "RUN_STARTED"}, id="a-dict"),
        pytest.param(models.TextMessageStartEvent(message_id=["unhashable"]), id="list-id"),  # type: ignore[arg-type]
        pytest.param(models.StepStartedEvent(step_name={"a": 1}), id="dict-step-name"),  # type: ignore[arg-type]
        pytest.param(models.MessagesSnapshotEvent(messages="nope"), id="messages-not-a-list"),  # type: ignore[arg-type]
        pytest.param(
            models.RunFinishedEvent(
                thread_id="t1",
                run_id="r1",
                outcome=models.RunFinishedInterruptOutcome(interrupts=5),  # type: ignore[arg-type]
            ),
            id="interrupts-int",
        ),
        pytest.param(
            models.ToolCallStartEvent(
                tool_call_id="c", tool_call_name="f", parent_message_id=["x"]
            ),
            id="list-parent",
        ),  # type: ignore[arg-type]
    ],
)
def test_wrong_python_types_surface_as_protocol_errors_only(junk: Any) -> None:
    """V092 or an ordinary rule, never a TypeError: and the state stays as it was."""
    verifier = Verifier()
    verifier.verify(events(rs())[0])

    with contextlib.suppress(ProtocolError):
        verifier.verify(junk)

    verifier.verify(events(ts())[0])
    verifier.verify(events(te())[0])
    verifier.verify(events(rf())[0])
    verifier.finish()


def test_an_event_that_breaks_a_rule_leaves_the_state_unchanged() -> None:
    """The offending event counts as never received; later events are judged without it."""
    verifier = Verifier()
    for event in events(rs(), ts("m1", subagentRunId="s1")):
        verifier.verify(event)

    with pytest.raises(ProtocolError):
        verifier.verify(events(ts("m1"))[0])  # already open
    with pytest.raises(ProtocolError):
        verifier.verify(events(rf())[0])  # m1 still open, so the run is NOT finished
    assert not verifier.is_finished

    for event in events(te("m1"), rf()):
        verifier.verify(event)
    assert verifier.is_finished
    assert 6 == verifier.events_seen


def test_is_finished_is_true_exactly_when_finish_would_pass() -> None:
    """False before any event and during a run; True after either terminal event."""
    verifier = Verifier()
    assert not verifier.is_finished

    verifier.verify(events(rs())[0])
    assert not verifier.is_finished

    verifier.verify(events(rerr())[0])
    assert verifier.is_finished
    verifier.finish()


def test_a_new_run_resets_what_the_previous_one_left_behind() -> None:
    """Owners and abandoned entities belong to one run: a RUN_ERROR'd message is forgotten."""
    accepts(
        rs(),
        ts("m1", subagentRunId="s1"),
        rerr(),
        rs("r2"),
        ts("m1", subagentRunId="s2"),
        te("m1"),
        rf("r2"),
    )


def test_errors_carry_rule_symbol_index_type_and_entity() -> None:
    """Callers never parse the message."""
    error = rejects("AGUI-V012", rs(), ts("a"), tc("b"))

    assert ("AGUI-V012", "text-message-not-open", 2, "TEXT_MESSAGE_CONTENT", "b") == (
        error.rule,
        error.symbol,
        error.event_index,
        error.event_type,
        error.entity_id,
    )
    assert str(error).startswith("[AGUI-V012 text-message-not-open]")


def test_the_event_index_counts_every_event_offered() -> None:
    """After a rejected event the counter still advances, so indices are stream positions."""
    verifier = Verifier()
    stream: Iterable[Any] = events(rs(), tc("x"), tc("y"))
    caught: list[int | None] = []
    for event in stream:
        try:
            verifier.verify(event)
        except ProtocolError as error:
            caught.append(error.event_index)

    assert [1, 2] == caught


def test_verify_does_not_mutate_the_event() -> None:
    """Events are values: the verifier only reads them."""
    event = events(ts("m1", subagentRunId="s1"))[0]
    before = attrs.asdict(event)

    verifier = Verifier()
    verifier.verify(events(rs())[0])
    verifier.verify(event)

    assert before == attrs.asdict(event)
