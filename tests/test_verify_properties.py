"""
Properties of the verifier over a grammar of legal streams (``strategies.legal_streams``):
every legal stream verifies, and a single corruption of one is caught with the right rule
at the right event.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aguikit._generated import models
from aguikit.errors import ProtocolError
from aguikit.verify import Verifier, verify_all
from strategies import legal_streams

NOT_OPEN: dict[str, str] = {
    "TEXT_MESSAGE_START": "AGUI-V012",
    "TOOL_CALL_START": "AGUI-V014",
    "REASONING_START": "AGUI-V022",
    "REASONING_MESSAGE_START": "AGUI-V024",
    "THINKING_TEXT_MESSAGE_START": "AGUI-V034",
    "STEP_STARTED": "AGUI-V042",
}
"""Opener type -> the rule its first orphaned follower breaks once the opener is dropped."""

CLOSER_DUPLICATED: dict[str, str] = {
    "TEXT_MESSAGE_END": "AGUI-V012",
    "TOOL_CALL_END": "AGUI-V014",
    "REASONING_END": "AGUI-V022",
    "REASONING_MESSAGE_END": "AGUI-V024",
    "THINKING_END": "AGUI-V032",
    "THINKING_TEXT_MESSAGE_END": "AGUI-V034",
    "STEP_FINISHED": "AGUI-V042",
    "SUBAGENT_FINISHED": "AGUI-V054",
    "SUBAGENT_ERROR": "AGUI-V054",
    "RUN_FINISHED": "AGUI-V003",
    "RUN_ERROR": "AGUI-V004",
}
"""Closer type -> the rule an immediate duplicate of it breaks."""

OWNED_CONTINUATIONS = frozenset(
    {
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "ACTIVITY_DELTA",
    }
)


def _key(event: Any) -> tuple[str, Any]:
    """Which entity an event of the bracketed families is about."""
    kind = str(event.type)
    if kind.startswith("TEXT_MESSAGE"):
        return "text", event.message_id
    if kind.startswith("TOOL_CALL") and kind != "TOOL_CALL_RESULT":
        return "tool", event.tool_call_id
    if kind in ("REASONING_START", "REASONING_END"):
        return "span", event.message_id
    if kind.startswith("REASONING_MESSAGE"):
        return "reasoning", event.message_id
    if kind.startswith("THINKING_TEXT_MESSAGE"):
        return "thinking-message", None
    if kind.startswith("STEP_"):
        return "step", (event.subagent_run_id, event.step_name)
    return kind, object()


def _first_error(stream: list[Any]) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        verify_all(stream)
    return info.value


def _step_open_elsewhere(stream: list[Any], index: int, owner: Any, name: str) -> bool:
    """Whether ``name`` is open under another owner just before ``stream[index]``."""
    open_steps: set[tuple[Any, str]] = set()
    for event in stream[:index]:
        if isinstance(event, models.StepStartedEvent):
            open_steps.add((event.subagent_run_id, event.step_name))
        elif isinstance(event, models.StepFinishedEvent):
            open_steps.discard((event.subagent_run_id, event.step_name))
    return any(n == name and o != owner for o, n in open_steps)


def _expected_for_step(stream: list[Any], index: int, rule: str) -> str:
    event = stream[index]
    if isinstance(event, models.StepFinishedEvent) and _step_open_elsewhere(
        stream, index, event.subagent_run_id, event.step_name
    ):
        return "AGUI-V043"
    return rule


@given(legal_streams())
def test_every_stream_of_the_grammar_verifies(stream: list[Any]) -> None:
    """Interleaved messages, tool calls, reasoning, steps, subagents and runs all pass."""
    verifier = Verifier()
    for event in stream:
        verifier.verify(event)

    verifier.finish()
    assert verifier.is_finished


def _orphaned_inheritance(corrupted: list[Any], index: int, dropped: Any) -> int | None:
    """
    Where a dropped subagent-owned message first shows: an untagged tool call it carried
    inherited the subagent, and without the message it belongs to the parent, so the
    call's first tagged continuation disagrees (a V061 before the message's own follower).
    """
    if not isinstance(dropped, models.TextMessageStartEvent) or dropped.subagent_run_id is None:
        return None
    calls: set[str] = set()
    for j in range(index, len(corrupted)):
        event = corrupted[j]
        if (
            isinstance(event, models.ToolCallStartEvent)
            and event.parent_message_id == dropped.message_id
            and event.subagent_run_id is None
        ):
            calls.add(event.tool_call_id)
        elif isinstance(event, models.ToolCallArgsEvent | models.ToolCallEndEvent):
            if event.tool_call_id in calls and event.subagent_run_id is not None:
                return j
        elif (
            isinstance(event, models.ReasoningEncryptedValueEvent)
            and event.entity_id in calls
            and event.subagent_run_id is not None
        ):
            return j
    return None


@given(legal_streams(allow_run_errors=False), st.data())
def test_a_dropped_start_is_caught_at_its_first_follower(stream: list[Any], data: Any) -> None:
    """Removing one opener fails the first event that continues or closes its entity."""
    candidates = [i for i, e in enumerate(stream) if str(e.type) in NOT_OPEN]
    if not candidates:
        return
    index = data.draw(st.sampled_from(candidates))
    opener = stream[index]
    corrupted = stream[:index] + stream[index + 1 :]
    key = _key(opener)
    follower = next(j for j in range(index, len(corrupted)) if _key(corrupted[j]) == key)
    expected = (_expected_for_step(corrupted, follower, NOT_OPEN[str(opener.type)]), follower)
    inherited = _orphaned_inheritance(corrupted, index, opener)
    if inherited is not None and inherited < follower:
        expected = ("AGUI-V061", inherited)

    error = _first_error(corrupted)

    assert expected == (error.rule, error.event_index)


@given(legal_streams(allow_run_errors=False), st.data())
def test_a_dropped_thinking_block_is_caught_at_its_message(stream: list[Any], data: Any) -> None:
    """Without THINKING_START the thinking message opens outside any block."""
    candidates = [i for i, e in enumerate(stream) if isinstance(e, models.ThinkingStartEvent)]
    if not candidates:
        return
    index = data.draw(st.sampled_from(candidates))
    corrupted = stream[:index] + stream[index + 1 :]
    follower = next(
        j
        for j in range(index, len(corrupted))
        if isinstance(corrupted[j], models.ThinkingTextMessageStartEvent)
    )

    error = _first_error(corrupted)

    assert ("AGUI-V035", follower) == (error.rule, error.event_index)


@given(legal_streams(), st.data())
def test_a_duplicated_end_is_caught_right_there(stream: list[Any], data: Any) -> None:
    """Repeating any closer immediately fails the repeat with its family's rule."""
    candidates = [i for i, e in enumerate(stream) if str(e.type) in CLOSER_DUPLICATED]
    index = data.draw(st.sampled_from(candidates))
    corrupted = [*stream[: index + 1], stream[index], *stream[index + 1 :]]
    expected = _expected_for_step(corrupted, index + 1, CLOSER_DUPLICATED[str(stream[index].type)])

    error = _first_error(corrupted)

    assert (expected, index + 1) == (error.rule, error.event_index)


@given(legal_streams(), st.data())
def test_a_continuation_naming_a_stranger_is_caught(stream: list[Any], data: Any) -> None:
    """Re-tagging one continuation with a subagent nobody used breaks the owner rule."""
    candidates = [i for i, e in enumerate(stream) if str(e.type) in OWNED_CONTINUATIONS]
    if not candidates:
        return
    index = data.draw(st.sampled_from(candidates))
    corrupted = list(stream)
    corrupted[index] = attrs.evolve(stream[index], subagent_run_id="intruder")

    error = _first_error(corrupted)

    assert ("AGUI-V061", index) == (error.rule, error.event_index)


@given(legal_streams(), st.sampled_from(["text", "custom", "step"]))
def test_an_event_after_the_last_run_ended_is_caught(stream: list[Any], kind: str) -> None:
    """After RUN_FINISHED it is V003, after RUN_ERROR V004."""
    extra: Any = {
        "text": models.TextMessageStartEvent(message_id="late"),
        "custom": models.CustomEvent(name="late", value=1),
        "step": models.StepStartedEvent(step_name="late"),
    }[kind]
    expected = "AGUI-V004" if isinstance(stream[-1], models.RunErrorEvent) else "AGUI-V003"

    error = _first_error([*stream, extra])

    assert (expected, len(stream)) == (error.rule, error.event_index)


@given(legal_streams(allow_run_errors=False), st.data())
def test_a_stream_cut_inside_a_run_is_truncated(stream: list[Any], data: Any) -> None:
    """Cutting the stream before a run's terminal event is caught by finish()."""
    ends = [i for i, e in enumerate(stream) if isinstance(e, models.RunFinishedEvent)]
    cut = data.draw(st.sampled_from(ends))
    verifier = Verifier()
    for event in stream[:cut]:
        verifier.verify(event)

    with pytest.raises(ProtocolError) as info:
        verifier.finish()

    assert "AGUI-V006" == info.value.rule
