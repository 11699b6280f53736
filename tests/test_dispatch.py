"""
Every stage that acts per event type has decided what it does with every event class.

A new event added to ``schema/`` must not silently become a no-op in the normalizer or the
applier: their tables are keyed by generated class and checked complete at import, and the
check names what is missing.  (The verifier's table is checked in ``tests/test_rules.py``.)
"""

from __future__ import annotations

import pytest

from aguikit import apply, chunks
from aguikit._dispatch import DispatchError, complete
from aguikit._generated.registry import EVENT_CLASSES
from aguikit.models import RawEvent, TextMessageStartEvent


def test_the_normalizer_and_the_applier_have_an_entry_for_every_event_class() -> None:
    """Handled, passed through on purpose, or refused: every class has a declared entry."""
    classes = set(EVENT_CLASSES.values())

    assert classes == set(chunks._HANDLERS)
    assert classes == set(apply._APPLY)


def test_a_table_missing_a_class_fails_naming_the_class_and_the_stage() -> None:
    """What a maintainer sees at import when a new event has no entry yet."""
    partial = {cls: None for cls in EVENT_CLASSES.values() if cls is not RawEvent}

    with pytest.raises(DispatchError, match=r"the applier has no entry for RawEvent"):
        complete("the applier", partial)


def test_a_table_naming_something_that_is_not_an_event_fails() -> None:
    """A stray key (a message class, a typo) is as much a bug as a missing one."""
    table: dict[type, None] = dict.fromkeys(EVENT_CLASSES.values())
    table[int] = None

    with pytest.raises(DispatchError, match="non-events: int"):
        complete("the chunk normalizer", table)


def test_handlers_take_the_concrete_event_class_not_any() -> None:
    """Dispatch by class, typed handlers: a handler's annotation names its event classes."""
    handler = apply._APPLY[TextMessageStartEvent]

    assert "TextMessageStartEvent" in str(handler.__annotations__["event"])
