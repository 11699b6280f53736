"""
Dispatch tables keyed by generated event class, checked for completeness at import.

Three stages act per event type: the chunk normalizer, the verifier and the applier.  When
the protocol grows an event, each of them must *decide* what it does with it (handle it,
or pass it through on purpose), or the new event silently becomes a no-op somewhere.  So
each stage declares one entry per event class, and :func:`complete` refuses, at import and
naming the classes, a table that misses one or names something that is not an event.

An event that the normalizer and the applier should simply let pass (most new events: the
verifier checks their place, nothing is materialised from them) is declared once, in
:data:`STAND_ASIDE`, rather than as one pass-through entry in each stage's table: adding
an event is then one row here and one verifier row, and the import check still names every
class nobody decided about.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, TypeVar

from ._generated.registry import EVENT_CLASSES

__all__ = ["STAND_ASIDE", "DispatchError", "Stage", "complete"]

H = TypeVar("H")

Stage = Literal["normalizer", "applier"]

STAND_ASIDE: Final[Mapping[str, frozenset[Stage]]] = {}
"""
Event types a stage lets pass on purpose without an entry of its own, by wire type: the
stages that stand aside.  The one place to decide a new event's normalizer and applier
behaviour when it needs none: ``"TOOL_CALL_PROGRESS": frozenset({"normalizer",
"applier"})``.  An event both here and in a stage's own table is refused (two decisions).

For the normalizer, standing aside means closing no chunk stream, and the specification
lists the events that may ("Closing a chunk stream", ``basic/patterns/streaming``: in 1.1
only ``RAW``, the activity events, ``REASONING_ENCRYPTED_VALUE`` and ``SUBAGENT_STARTED``);
an event its version does not list there closes its lane's stream, which is a handler in
:mod:`aguikit.chunks`, not an entry here (``tests/test_chunk_closing.py`` holds every other
event type to the list, and one declared here to standing aside).
"""


class DispatchError(Exception):
    """A stage's dispatch table misses an event class: a bug in aguikit, never input."""


def complete(
    owner: str,
    table: Mapping[type, H],
    *,
    stage: Stage | None = None,
    passes: H | None = None,
    stand_aside: Mapping[str, frozenset[Stage]] = STAND_ASIDE,
) -> dict[type, H]:
    """
    ``table`` as a dict, after checking it has exactly one entry per event class.

    Args:
        owner: The stage, for the error (``"the applier"``).
        table: Event class → what the stage does with it.
        stage: Which stage this is in :data:`STAND_ASIDE`; with ``passes``, every event
            type listed there for it gets ``passes`` as its entry.
        passes: The stage's pass-through entry.
        stand_aside: The declarations to read (:data:`STAND_ASIDE`; tests pass others).

    Raises:
        DispatchError: An event class has no entry, has two (its own and a stand-aside
            declaration), or an entry is not an event class.
    """
    classes = set(EVENT_CLASSES.values())
    full = dict(table)
    twice = []
    if stage is not None and passes is not None:
        for event_type, stages in stand_aside.items():
            cls = EVENT_CLASSES.get(event_type)
            if cls is None or stage not in stages:
                continue
            if cls in full:
                twice.append(cls.__name__)
            full[cls] = passes
    missing = sorted(cls.__name__ for cls in classes if cls not in full)
    foreign = sorted(getattr(cls, "__name__", repr(cls)) for cls in full if cls not in classes)
    problems = []
    if missing:
        problems.append(
            f"{owner} has no entry for {', '.join(missing)}: decide what it does with each "
            "(handle it in its table, or let it pass on purpose in "
            "aguikit._dispatch.STAND_ASIDE)"
        )
    if twice:
        problems.append(
            f"{owner} both handles and stands aside for {', '.join(sorted(twice))}: "
            "keep one decision"
        )
    if foreign:
        problems.append(f"{owner} has entries for non-events: {', '.join(foreign)}")
    unknown = sorted(t for t in stand_aside if t not in EVENT_CLASSES)
    if unknown:
        problems.append(f"STAND_ASIDE names unknown event types: {', '.join(unknown)}")
    if problems:
        raise DispatchError("; ".join(problems))
    return full
