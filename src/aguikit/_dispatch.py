"""
Dispatch tables keyed by generated event class, checked for completeness at import.

Three stages act per event type: the chunk normalizer, the verifier and the applier.  When
the protocol grows an event, each of them must *decide* what it does with it (handle it,
or pass it through on purpose), or the new event silently becomes a no-op somewhere.  So
each stage declares one entry per event class, and :func:`complete` refuses, at import and
naming the classes, a table that misses one or names something that is not an event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from ._generated.registry import EVENT_CLASSES

__all__ = ["DispatchError", "complete"]

H = TypeVar("H")


class DispatchError(Exception):
    """A stage's dispatch table misses an event class: a bug in aguikit, never input."""


def complete(owner: str, table: Mapping[type, H]) -> dict[type, H]:
    """
    ``table`` as a dict, after checking it has exactly one entry per event class.

    Args:
        owner: The stage, for the error (``"the applier"``).
        table: Event class → what the stage does with it.

    Raises:
        DispatchError: An event class has no entry, or an entry is not an event class.
    """
    classes = set(EVENT_CLASSES.values())
    missing = sorted(cls.__name__ for cls in classes if cls not in table)
    foreign = sorted(getattr(cls, "__name__", repr(cls)) for cls in table if cls not in classes)
    problems = []
    if missing:
        problems.append(
            f"{owner} has no entry for {', '.join(missing)}: decide what it does with each "
            "(handle it, or pass it through on purpose)"
        )
    if foreign:
        problems.append(f"{owner} has entries for non-events: {', '.join(foreign)}")
    if problems:
        raise DispatchError("; ".join(problems))
    return dict(table)
