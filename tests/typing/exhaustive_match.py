"""
An exhaustive ``match`` over :data:`aguikit.Event`, checked by mypy, never run.

``tests/test_models.py`` runs ``mypy --strict`` on this file (it must pass) and on a copy
with one case removed (it must fail, naming the missing class).  That is the guarantee a
downstream consumer gets from the closed ``Event`` union: when the protocol adds an event,
every exhaustive handler stops type-checking until it handles the new one.
"""

from __future__ import annotations

from typing import assert_never

from aguikit._generated.models import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    CustomEvent,
    Event,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
    ThinkingTextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)


def family(event: Event) -> str:
    """The protocol family an event belongs to."""
    match event:
        case TextMessageStartEvent():
            return "text"
        case TextMessageContentEvent():
            return "text"
        case TextMessageEndEvent():
            return "text"
        case TextMessageChunkEvent():
            return "text"
        case ToolCallStartEvent():
            return "tools"
        case ToolCallArgsEvent():
            return "tools"
        case ToolCallEndEvent():
            return "tools"
        case ToolCallChunkEvent():
            return "tools"
        case ToolCallResultEvent():
            return "tools"
        case StateSnapshotEvent():
            return "state"
        case StateDeltaEvent():
            return "state"
        case MessagesSnapshotEvent():
            return "messages"
        case ActivitySnapshotEvent():
            return "activity"
        case ActivityDeltaEvent():
            return "activity"
        case RawEvent():
            return "special"
        case CustomEvent():
            return "special"
        case RunStartedEvent():
            return "lifecycle"
        case RunFinishedEvent():
            return "lifecycle"
        case RunErrorEvent():
            return "lifecycle"
        case StepStartedEvent():
            return "lifecycle"
        case StepFinishedEvent():
            return "lifecycle"
        case ReasoningStartEvent():
            return "reasoning"
        case ReasoningMessageStartEvent():
            return "reasoning"
        case ReasoningMessageContentEvent():
            return "reasoning"
        case ReasoningMessageEndEvent():
            return "reasoning"
        case ReasoningMessageChunkEvent():
            return "reasoning"
        case ReasoningEndEvent():
            return "reasoning"
        case ReasoningEncryptedValueEvent():
            return "reasoning"
        case SubagentStartedEvent():
            return "subagents"
        case SubagentFinishedEvent():
            return "subagents"
        case SubagentErrorEvent():
            return "subagents"
        case ThinkingStartEvent():
            return "thinking"
        case ThinkingEndEvent():
            return "thinking"
        case ThinkingTextMessageStartEvent():
            return "thinking"
        case ThinkingTextMessageContentEvent():
            return "thinking"
        case ThinkingTextMessageEndEvent():
            return "thinking"
        case _:
            assert_never(event)
