"""
The vocabulary of change records: what one applied event changed, so a view redraws one row.

A UI folding an AG-UI stream does not want to diff the conversation after every token.
The applier therefore returns, per event, a :class:`Changed` naming the part of the view
(:class:`What`), how it changed (:class:`ChangeKind`) and where (message id and index,
tool call, subagent); :class:`Subagent` is the applier's record of one subagent
invocation.  These are plain values: the session pairs each with the event it came from.
"""

from __future__ import annotations

import types
from enum import StrEnum
from typing import Any, Final

import attrs
from attrs.exceptions import FrozenInstanceError

__all__ = [
    "NOTHING",
    "ChangeKind",
    "Changed",
    "Record",
    "Subagent",
    "SubagentStatus",
    "What",
]


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


def compiled(function: object) -> bool:
    """
    Whether ``function`` (a function or method from Python source) runs compiled by mypyc:
    a compiled module's functions are not Python function objects.  See ``docs/DESIGN.md``,
    "The hot core is compiled, from the same source".
    """
    return not isinstance(function, types.FunctionType)


class Record:
    """
    Base of the values built once per event (:class:`Changed`, the session's ``Update``):
    immutable, compared, hashed, printed and pickled by value, like a frozen attrs class.

    They are written by hand, not with attrs, because the hot path builds one or two per
    event: compiled by mypyc, a hand-written class is a native one, built in a few dozen
    nanoseconds, while an attrs class stays a Python class built through its Python
    ``__init__`` (a third of the whole per-event cost of a text delta).  A subclass names
    its fields in ``__match_args__``, refuses assignment in its own ``__setattr__`` and
    ``__delattr__`` (raising :class:`attrs.exceptions.FrozenInstanceError`, as attrs' frozen
    classes do), and sets its fields in ``__init__``: directly when compiled (a native
    ``__init__`` writes its slots without ``__setattr__``, but only when no base class
    defines one, hence not here), through the instance dict otherwise.
    """

    __match_args__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def as_dict(self) -> dict[str, Any]:
        """The fields by name, values as they are: what ``attrs.asdict(value, recurse=False)``
        gave when these were attrs classes."""
        return {name: getattr(self, name) for name in self.__match_args__}

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((self.__class__.__name__, *self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{self.__class__.__name__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, self._values())


class Changed(Record):
    """
    What one event changed, so a view can redraw one row.

    ``index`` is the message's position in :attr:`Applier.messages` (or the subagent's in
    :attr:`Applier.subagents`) at the time of the change; ``delta`` is the text a content
    or arguments event appended.

    .. versionchanged:: 0.2.0  A hand-written immutable value (see :class:`Record`) rather
       than an attrs class: :meth:`Record.as_dict` replaces ``attrs.asdict``.
    """

    __match_args__: tuple[str, ...] = (
        "what",
        "kind",
        "message_id",
        "index",
        "tool_call_id",
        "subagent_run_id",
        "delta",
    )

    what: Final[What]
    kind: Final[ChangeKind]
    message_id: Final[str | None]
    index: Final[int | None]
    tool_call_id: Final[str | None]
    subagent_run_id: Final[str | None]
    delta: Final[str | None]

    def __init__(
        self,
        what: What,
        kind: ChangeKind = ChangeKind.NONE,
        message_id: str | None = None,
        index: int | None = None,
        tool_call_id: str | None = None,
        subagent_run_id: str | None = None,
        delta: str | None = None,
    ) -> None:
        if _COMPILED:
            self.what = what
            self.kind = kind
            self.message_id = message_id
            self.index = index
            self.tool_call_id = tool_call_id
            self.subagent_run_id = subagent_run_id
            self.delta = delta
        else:
            self.__dict__.update(
                what=what,
                kind=kind,
                message_id=message_id,
                index=index,
                tool_call_id=tool_call_id,
                subagent_run_id=subagent_run_id,
                delta=delta,
            )

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError()

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError()


_COMPILED: Final = compiled(Changed.__init__)

NOTHING: Final = Changed(What.NOTHING)


class SubagentStatus(StrEnum):
    """Where a subagent invocation stands."""

    RUNNING = "running"
    FINISHED = "finished"
    SUSPENDED = "suspended"
    """Closed because the run paused on interrupts; the same id may be announced again."""
    FAILED = "failed"
    ABANDONED = "abandoned"
    """Still running when its run failed with ``RUN_ERROR``, which ends everything: no
    closing event will come for it (the subagents page: "A consumer MUST treat every open
    invocation as abandoned when a run errors").

    .. versionadded:: 0.4.0
    """


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
