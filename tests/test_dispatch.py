"""
Every per-event dispatch table is complete, and an incomplete one fails naming the class.

The normalizer (``chunks._HANDLERS``), the applier (``apply._APPLY``) and the verifier
(``rules.TABLE``) each declare one entry per event class and are checked when imported, so
an event the schema gains cannot silently become a no-op in one of them.  These tests hold
the checks themselves to that promise: remove one entry and the error names the stage and
the missing class (and, for the verifier, the event type).
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aguikit import apply, chunks, rules
from aguikit._dispatch import DispatchError, complete
from aguikit._generated.registry import EVENT_CLASSES

TABLES = {"the applier": apply._APPLY, "the chunk normalizer": chunks._HANDLERS}


@pytest.mark.parametrize("owner", sorted(TABLES))
def test_each_stage_declares_every_event_class(owner: str) -> None:
    """Exactly the registry's classes: none missing, nothing else."""
    assert set(EVENT_CLASSES.values()) == set(TABLES[owner])


@pytest.mark.parametrize("owner", sorted(TABLES))
@pytest.mark.parametrize("event_type", sorted(EVENT_CLASSES))
def test_a_table_missing_one_class_fails_naming_the_stage_and_the_class(
    owner: str, event_type: str
) -> None:
    """What a maintainer adding an event sees until the stage decides what to do with it."""
    missing = EVENT_CLASSES[event_type]
    table = {cls: handler for cls, handler in TABLES[owner].items() if cls is not missing}

    with pytest.raises(DispatchError) as caught:
        complete(owner, table)

    assert f"{owner} has no entry for {missing.__name__}:" in str(caught.value)


def test_an_entry_for_something_that_is_not_an_event_is_named() -> None:
    """A stale entry (a class the schema no longer has) is refused too."""

    class Retired:
        pass

    table: dict[type, Any] = {**apply._APPLY, Retired: None}

    with pytest.raises(DispatchError, match="the applier has entries for non-events: Retired"):
        complete("the applier", table)


def test_the_verifier_table_missing_a_row_fails_naming_the_type_and_the_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rule table's import-time check, run on a table without ``TOOL_CALL_ARGS``."""
    monkeypatch.setattr(
        rules, "TABLE", tuple(r for r in rules.TABLE if r.event != "TOOL_CALL_ARGS")
    )

    with pytest.raises(rules.TableError) as caught:
        rules._check_table()

    assert "event types with no row: TOOL_CALL_ARGS (ToolCallArgsEvent)" in str(caught.value)


def test_standing_aside_is_one_declaration_for_every_stage() -> None:
    """A type listed in ``STAND_ASIDE`` gets the stage's pass-through entry, and only there."""
    table = {cls: "own" for cls in EVENT_CLASSES.values() if cls.__name__ != "RawEvent"}
    aside = {"RAW": frozenset({"normalizer"})}

    full = complete("the normalizer", table, stage="normalizer", passes="pass", stand_aside=aside)

    assert "pass" == full[EVENT_CLASSES["RAW"]]
    with pytest.raises(DispatchError, match="the applier has no entry for RawEvent"):
        complete("the applier", table, stage="applier", passes="pass", stand_aside=aside)


def test_handling_and_standing_aside_at_once_is_refused() -> None:
    """Two decisions for one event: the error names it."""
    aside = {"RAW": frozenset({"applier"})}

    with pytest.raises(DispatchError, match="both handles and stands aside for RawEvent"):
        complete("the applier", apply._APPLY, stage="applier", passes="x", stand_aside=aside)


def test_stand_aside_naming_an_unknown_type_is_refused() -> None:
    # No event has this type, on the drill's copy either (it adds TOOL_CALL_PROGRESS).
    aside = {"TOOL_CALL_HEARTBEAT": frozenset({"applier"})}

    with pytest.raises(DispatchError, match="STAND_ASIDE names unknown event types"):
        complete("the applier", apply._APPLY, stage="applier", passes="x", stand_aside=aside)


def test_handlers_take_the_concrete_event_class_not_any() -> None:
    """Dispatch by class, typed handlers: a handler's annotation names its event classes."""
    from aguikit.models import TextMessageStartEvent

    handler = apply._APPLY[TextMessageStartEvent]

    assert "TextMessageStartEvent" in _annotation(apply, handler, "event")


def _annotation(module: ModuleType, function: Any, parameter: str) -> str:
    """``parameter``'s annotation in ``function``'s source, as written.

    Read from the source, not ``__annotations__``: a function compiled by mypyc (the compiled
    wheel) has none, and the source is the same in both builds (the wheel ships the ``.py``
    beside the extension module).  Found in ``module`` by ``__qualname__``
    (``Applier._text_start``), which a compiled method has too (``__module__`` it lacks)."""
    assert module.__file__ is not None
    source = Path(module.__file__).with_name(f"{module.__name__.rpartition('.')[2]}.py")
    scope: list[ast.stmt] = ast.parse(source.read_text(encoding="utf-8")).body
    *owners, name = function.__qualname__.split(".")
    for owner in owners:
        (cls,) = (n for n in scope if isinstance(n, ast.ClassDef) and n.name == owner)
        scope = cls.body
    (found,) = (n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)
    (arg,) = (a for a in found.args.args if a.arg == parameter)
    assert arg.annotation is not None, f"{function.__qualname__}: {parameter} is unannotated"
    return ast.unparse(arg.annotation)
