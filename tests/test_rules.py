"""
The rule table itself: well-formed, complete over the schema's event types, documented in
sync, and every rule's example stream really breaking that rule.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest
from tests.support import typed

from aguikit import catalogue, reference, rules, verify
from aguikit._generated.models import EventType
from aguikit._generated.registry import EVENT_CLASSES
from aguikit.catalogue import Stage
from aguikit.errors import ProtocolError
from aguikit.rules import RULES, TABLE, Row, Rule, TableError
from aguikit.verify import verify_all

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules.md"

VERIFIER_RULES = [rule for rule in RULES if rule.stage is Stage.VERIFIER]
"""The catalogue rows the verifier reports (the other stages' rows: tests/test_catalogue.py)."""


def test_rule_ids_and_symbols_are_unique_and_well_formed() -> None:
    """The verifier's ids are ``AGUI-V`` plus three digits, symbols kebab-case; neither repeats."""
    ids = [rule.id for rule in VERIFIER_RULES]
    symbols = [rule.symbol for rule in VERIFIER_RULES]

    assert len(set(ids)) == len(ids)
    assert len(set(symbols)) == len(symbols)
    assert [] == [i for i in ids if not re.fullmatch(r"AGUI-V\d{3}", i)]
    assert [] == [s for s in symbols if not re.fullmatch(r"[a-z]+(-[a-z]+)*", s)]


def test_every_event_type_of_the_schema_has_exactly_one_row() -> None:
    """A new event type in the generated enum without a row fails here (and at import)."""
    rows = [str(row.event) for row in TABLE]

    assert sorted(str(member) for member in EventType) == sorted(rows)
    assert sorted(EVENT_CLASSES) == sorted(rows)


def test_every_event_class_is_compiled_into_the_dispatch() -> None:
    """The engine dispatches every generated event class, so none falls through."""
    assert set(EVENT_CLASSES.values()) == set(verify._DISPATCH)


def test_every_rule_is_reported_by_something() -> None:
    """No catalog entry is dead: a row, the lifecycle gate or the engine reports it."""
    reported = {rule_id for row in TABLE for rule_id in row.rules.values()}
    reported |= {r for gate in rules.LIFECYCLE_GATE.values() for r in gate.values() if r}
    reported |= set(rules.LIFECYCLE_RULES.values()) | set(rules.LIMIT_RULES.values())

    assert {rule.id for rule in VERIFIER_RULES} == reported


def test_docs_rules_md_is_in_sync_with_the_table() -> None:
    """``docs/rules.md`` is generated: ``aguikit rules --markdown > docs/rules.md``."""
    assert reference.render_markdown() == DOCS.read_text(encoding="utf-8")


def test_render_text_lists_every_rule_once() -> None:
    """``aguikit rules`` prints one line per rule, id first."""
    lines = reference.render_text().splitlines()

    assert [rule.id for rule in RULES] == [line.split()[0] for line in lines]


@pytest.mark.parametrize("rule", VERIFIER_RULES, ids=[rule.id for rule in VERIFIER_RULES])
def test_each_rule_example_breaks_that_rule(rule: Rule) -> None:
    """The documented example is a real violation of the rule it illustrates."""
    stream = [typed(document, in_process=rule.in_process) for document in rule.example]

    settings = {} if rule.setting is None else {rule.setting: 1}
    with pytest.raises(ProtocolError) as info:
        verify_all(stream, **settings)

    assert rule.id == info.value.rule
    assert rule.symbol == info.value.symbol
    if not rule.at_finish:
        assert len(stream) - 1 >= (info.value.event_index or 0)


def _check_with(monkeypatch: pytest.MonkeyPatch, table: tuple[Row, ...]) -> None:
    monkeypatch.setattr(rules, "TABLE", table)
    rules._check_table()


def test_a_missing_row_fails_the_table_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropping a row is a package bug, reported by name."""
    with pytest.raises(TableError, match="no row: RAW"):
        _check_with(monkeypatch, tuple(r for r in TABLE if r.event != EventType.RAW))


def test_a_duplicate_row_fails_the_table_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rows for one event type are ambiguous."""
    with pytest.raises(TableError, match="duplicate row for RAW"):
        _check_with(monkeypatch, (*TABLE, Row(EventType.RAW)))


def test_a_row_naming_an_unknown_rule_fails_the_table_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every rule id a row reports must be in the catalog."""
    bad = tuple(
        attrs.evolve(r, rules={**r.rules, "not_open": "AGUI-V999"})
        if r.event == EventType.TEXT_MESSAGE_END
        else r
        for r in TABLE
    )

    with pytest.raises(TableError, match="AGUI-V999"):
        _check_with(monkeypatch, bad)


def test_a_row_missing_a_rule_for_a_check_fails_the_table_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An opener without an ``already_open`` rule could not report its violation."""
    bad = tuple(
        attrs.evolve(r, rules={}) if r.event == EventType.TEXT_MESSAGE_START else r for r in TABLE
    )

    with pytest.raises(TableError, match="already_open"):
        _check_with(monkeypatch, bad)


def test_a_duplicate_rule_id_fails_the_catalogue_check() -> None:
    """Rule ids are stable and unique across the one catalogue."""
    duplicated = (*RULES, attrs.evolve(RULES[0], symbol="other"))

    with pytest.raises(catalogue.CatalogueError, match="duplicate rule id 'AGUI-V001'"):
        catalogue._check_catalogue(duplicated)


def test_a_row_naming_an_unknown_hook_fails_compilation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks are resolved by name at import; a typo is a loud package bug."""
    bad = (*TABLE[:-1], attrs.evolve(TABLE[-1], checks=("no_such_hook",)))
    monkeypatch.setattr(verify, "TABLE", bad)

    with pytest.raises(TableError, match="no_such_hook"):
        verify._compile_table()
