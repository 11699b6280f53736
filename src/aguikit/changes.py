"""
The vocabulary of change records: what one applied event changed, so a view redraws one row.

A UI folding an AG-UI stream does not want to diff the conversation after every token.
The applier therefore returns, per event, a :class:`Changed` naming the part of the view
(:class:`What`), how it changed (:class:`ChangeKind`) and where (message id and index,
tool call, subagent); :class:`Subagent` is the applier's record of one subagent
invocation.  These are plain values: the session pairs each with the event it came from.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

import attrs

__all__ = ["NOTHING", "ChangeKind", "Changed", "Subagent", "SubagentStatus", "What"]


class What(StrEnum):
    """Which part of the materialised view an event changed."""

    NOTHING = "nothing"
    MESSAGES = "messages"
    ACTIVITY = "activity"
    REASONING = "reasoning"
    STATE = "state"
    SUBAGENTS = "subagents"
    RUN = "run"


class ChangeKind(StrEnum):
    """How it changed; the vocabulary a view switches on."""

    NONE = "none"
    STARTED = "started"
    """A message or thought was created (or reopened) and is open for content."""
    CONTENT = "content"
    ENDED = "ended"
    UPDATED = "updated"
    """The row changed in a way that is not text: redraw it."""
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_CALL_ARGS = "tool_call_args"
    TOOL_CALL_ENDED = "tool_call_ended"
    TOOL_RESULT = "tool_result"
    """A tool message was created, or replaced, at ``index``; rows after it moved down."""
    ENCRYPTED_VALUE = "encrypted_value"
    REPLACED = "replaced"
    """The whole message list was reconciled against a snapshot: redraw all of it."""
    SNAPSHOT = "snapshot"
    PATCHED = "patched"
    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    RUN_ERROR = "run_error"
    RESUMED = "resumed"
    FINISHED = "finished"
    SUSPENDED = "suspended"
    FAILED = "failed"


@attrs.frozen(slots=False)
class Changed:
    """
    What one event changed, so a view can redraw one row.

    ``index`` is the message's position in :attr:`Applier.messages` (or the subagent's in
    :attr:`Applier.subagents`) at the time of the change; ``delta`` is the text a content
    or arguments event appended.
    """

    # Not slotted on purpose: one is built per event, and attrs initialises a frozen
    # dict-backed instance by writing its __dict__ directly, about a third cheaper than
    # going through object.__setattr__ slot by slot.

    what: What
    kind: ChangeKind = ChangeKind.NONE
    message_id: str | None = None
    index: int | None = None
    tool_call_id: str | None = None
    subagent_run_id: str | None = None
    delta: str | None = None


NOTHING: Final = Changed(What.NOTHING)


class SubagentStatus(StrEnum):
    """Where a subagent invocation stands."""

    RUNNING = "running"
    FINISHED = "finished"
    SUSPENDED = "suspended"
    """Closed because the run paused on interrupts; the same id may be announced again."""
    FAILED = "failed"


@attrs.frozen
class Subagent:
    """
    One subagent invocation the stream announced (or closed without announcing).

    Keyed by ``run_id``, which names this invocation: running the same subagent twice
    yields two entries, while ``name`` is the reusable half, for display.
    """

    run_id: str
    name: str
    status: SubagentStatus = SubagentStatus.RUNNING
    description: str | None = None
    parent_subagent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    parent_message_id: str | None = None
    result: Any = None
    interrupt_ids: tuple[str, ...] = ()
    error_message: str | None = None
    error_code: str | None = None
