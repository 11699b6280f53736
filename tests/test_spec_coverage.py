"""
The specification is the judge: every normative sentence of its pages has an entry in
``docs/spec-coverage.toml``, and every entry that says aguikit holds it proves it.

The matrix is data.  Each ``[[statement]]`` is one sentence of a page of the AG-UI
specification carrying a BCP 14 key word, with who it binds and how aguikit holds it: a
catalogue rule (``held = "rule"``: the ids, the stage that reports them, and an example
stream built from the sentence), a stage's behaviour (``"behaviour"``: the stage, and a
stream whose result the sentence prescribes), a decision in ``docs/`` (``"decided"``),
``"n/a"`` with the reason, or a ``"gap"`` another engineer owns.

This file extracts the sentences from the bundled pages (``tests/spec_text.py``; the pages
are read from ``../shared/reference``, required in CI) and fails naming every sentence
without an entry and every entry whose sentence is gone, so the next version of the
specification shows its gaps by itself; it runs every example through exactly the stage
its entry names (``tests/stages.py``), and keeps ``docs/spec-coverage.md`` rendered from
the matrix.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from tests import corpus, spec_text, stages

from aguikit import reference
from aguikit.catalogue import RULES_BY_ID, Severity
from aguikit.cli import main

REPO = Path(__file__).resolve().parent.parent
MATRIX_PATH = REPO / "docs" / "spec-coverage.toml"
RENDERED = REPO / "docs" / "spec-coverage.md"
MATRIX: dict[str, Any] = tomllib.loads(MATRIX_PATH.read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = MATRIX["statement"]
PAGES = corpus.UPSTREAM_DOCS / MATRIX["version"]

BINDS = {"producer", "consumer", "both", "transport", "application", "all"}
HELD = set(reference.HOLDINGS)
NAMED_STAGES = {*stages.STAGES, "producer", "server", "agent", "decoder", "encoder", "transport"}
"""Stages an entry may name: those an example can run through, and those held by tests only
(``RunWriter``, the HTTP endpoint, ``Agent``, the byte decoders and encoders)."""

REQUIRED = {
    "rule": ("rules", "stage"),
    "behaviour": ("stage",),
    "decided": ("decision",),
    "n/a": ("reason",),
    "gap": ("gap", "owner"),
}
"""What each kind of holding must say (a gap names the engineer who owns it)."""


def _key(page: str, section: str, text: str) -> tuple[str, str, str]:
    return page, section, text


def _examples(entry: Mapping[str, Any], kind: str) -> list[str]:
    value = entry.get(kind)
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


# ---- the sentences -------------------------------------------------------------------------


def test_every_normative_sentence_has_an_entry_and_every_entry_a_sentence() -> None:
    """
    A sentence the pages carry with no entry, or an entry naming a sentence the pages no
    longer carry, fails here naming it: a new version of the specification lists its own
    gaps.
    """
    corpus.require(PAGES, "the normative specification pages")
    found = {_key(s.page, s.section, s.text) for s in spec_text.statements(PAGES)}
    held = {_key(e["page"], e["section"], e["text"]): e["id"] for e in ENTRIES}

    missing = sorted(found - set(held))
    stale = sorted(held[key] for key in set(held) - found)
    report = [
        "sentences without an entry (add them to docs/spec-coverage.toml):",
        *(f"  {page} § {section}: {text}" for page, section, text in missing),
        f"entries whose sentence the pages no longer carry: {stale}",
    ]

    assert ([], []) == (missing, stale), "\n".join(report)


def test_the_matrix_has_one_entry_per_sentence() -> None:
    """Two entries for one sentence would be two answers to one question."""
    keys = [_key(e["page"], e["section"], e["text"]) for e in ENTRIES]

    assert len(set(keys)) == len(keys)


def test_sentence_extraction_reads_lists_links_code_notes_and_wrapped_lines() -> None:
    """The splitter joins wrapped lines, keeps code spans, drops link targets and emphasis,
    reads a list item and a ``<Note>`` as prose, skips code fences, and splits sentences."""
    page = (
        "---\ntitle: x\n---\n\n## The *rule*\n\n"
        "A producer MUST NOT open an item whose `messageId` is\nalready open. "
        "A [consumer](/spec/x) MAY **ignore** it.\n\n"
        "- `type` — REQUIRED. The discriminator.\n  Wrapped on.\n\n"
        "<Note>\n  Inside a note SHOULD count.\n</Note>\n\n"
        '```json\n{"MUST": 1}\n```\n\n| a | MUST in a table |\n| --- | --- |\n'
    )

    found = [(section, text) for section, text in spec_text.sentences(page)]
    normative = [text for _, text in found if spec_text.KEYWORD.search(text)]

    assert [
        "A producer MUST NOT open an item whose `messageId` is already open.",
        "A consumer MAY ignore it.",
        "`type` — REQUIRED.",
        "Inside a note SHOULD count.",
        "a | MUST in a table",
    ] == normative
    assert {"The rule"} == {section for section, _ in found}


# ---- the entries ---------------------------------------------------------------------------


def _anchors(path: Path) -> set[str]:
    """The GitHub anchors of a Markdown file's headings."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def _problems(entry: Mapping[str, Any]) -> list[str]:
    held = entry.get("held")
    problems = [f"held {held!r} is not one of {sorted(HELD)}"] if held not in HELD else []
    if entry.get("binds") not in BINDS:
        problems.append(f"binds {entry.get('binds')!r} is not one of {sorted(BINDS)}")
    for field in REQUIRED.get(str(held), ()):
        if not entry.get(field):
            problems.append(f"held {held!r} needs {field!r}")
    stage = entry.get("stage")
    if stage is not None and stage not in NAMED_STAGES:
        problems.append(f"stage {stage!r} is not one of {sorted(NAMED_STAGES)}")
    if (entry.get("reject") or entry.get("accept")) and stage not in stages.STAGES:
        problems.append(f"examples need a stage that can run them, not {stage!r}")
    if held in ("rule", "behaviour") and not (
        entry.get("reject") or entry.get("accept") or entry.get("tests")
    ):
        problems.append("a held entry shows it: an example (reject/accept) or tests")
    problems.extend(
        f"{r} is not a catalogue id" for r in entry.get("rules", ()) if r not in RULES_BY_ID
    )
    decision = entry.get("decision")
    if decision:
        file, _, anchor = decision.partition("#")
        path = REPO / file
        if not path.is_file() or anchor not in _anchors(path):
            problems.append(f"decision {decision!r}: no such file or heading")
    for kind in ("reject", "accept"):
        for text in _examples(entry, kind):
            try:
                stages.documents(text)
            except json.JSONDecodeError as error:
                problems.append(f"{kind} example is not JSON Lines: {error}")
    return problems


def test_every_entry_is_well_formed() -> None:
    """Ids stable in form and unique; each holding says what it needs; every id a row."""
    ids = [entry["id"] for entry in ENTRIES]
    problems = {entry["id"]: _problems(entry) for entry in ENTRIES}

    assert [] == [i for i in ids if not re.fullmatch(r"[a-z]+-\d{2}", i)]
    assert len(set(ids)) == len(ids)
    assert {} == {key: value for key, value in problems.items() if value}


def test_every_gap_is_owned_by_someone() -> None:
    """A gap is a disagreement somebody is fixing, named; anything else is held or decided."""
    assert [] == [e["id"] for e in ENTRIES if e["held"] == "gap" and not e.get("owner")]


# ---- the examples --------------------------------------------------------------------------

WITH_EXAMPLES = [e for e in ENTRIES if e.get("reject") or e.get("accept")]


@pytest.mark.parametrize("entry", WITH_EXAMPLES, ids=[e["id"] for e in WITH_EXAMPLES])
def test_each_entrys_examples_run_through_the_stage_it_names(entry: dict[str, Any]) -> None:
    """
    A violating example makes its stage fail, first with one of the entry's rules; a
    conforming one passes with exactly the warnings the entry names and leaves what the
    entry expects; together they fire every rule the entry names.
    """
    stage, settings = entry["stage"], entry.get("settings", {})
    fired: set[str] = set()
    for text in _examples(entry, "reject"):
        outcome = stages.run(stage, text, settings)

        assert outcome.errors, f"{entry['id']}: the {stage} accepted the violating example"
        assert outcome.errors[0] in entry["rules"], outcome.messages
        fired |= set(outcome.errors)
    for text in _examples(entry, "accept"):
        outcome = stages.run(stage, text, settings)

        assert [] == outcome.errors, outcome.messages
        assert sorted(set(entry.get("warns", []))) == sorted(set(outcome.warnings)), (
            outcome.messages
        )
        fired |= set(outcome.warnings)
        if "expect" in entry:
            expected = json.loads(entry["expect"])
            assert corpus.subset_match(expected, outcome.projection), outcome.projection
    mentioned = {rule for rule in entry.get("rules", ()) if _tests_mention(entry, rule)}

    assert set() == set(entry.get("rules", ())) - fired - mentioned


def test_a_rule_entry_names_rules_of_the_severity_its_examples_show() -> None:
    """A rule a violating example must raise is an error; one a conforming example only
    warns about is not: the matrix cannot say "fatal" of a warning."""
    wrong = [
        (entry["id"], rule)
        for entry in ENTRIES
        for rule in entry.get("warns", ())
        if rule in RULES_BY_ID
        and RULES_BY_ID[rule].severity is Severity.ERROR
        and RULES_BY_ID[rule].id != "AGUI-P001"
    ]

    assert [] == wrong


# ---- the named tests -----------------------------------------------------------------------


def _test_source(node_id: str) -> str | None:
    """The source of the test function a node id names (``None`` when there is none)."""
    file, _, name = node_id.partition("::")
    name = name.split("[", 1)[0]
    path = REPO / file
    if not path.is_file():
        return None
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ast.get_source_segment(source, node) or ""
    return None


def _tests_mention(entry: Mapping[str, Any], rule_id: str) -> bool:
    symbol = RULES_BY_ID[rule_id].symbol
    for node_id in entry.get("tests", ()):
        source = _test_source(node_id) or ""
        if rule_id in node_id or rule_id in source or symbol in source:
            return True
    return False


def test_every_named_test_exists() -> None:
    """An entry pointing at a test that was renamed or removed holds nothing any more."""
    missing = [
        (entry["id"], node_id)
        for entry in ENTRIES
        for node_id in entry.get("tests", ())
        if _test_source(node_id) is None
    ]

    assert [] == missing


def test_a_rule_held_by_tests_alone_is_named_by_them() -> None:
    """An entry without an example that says a rule holds it names a test that mentions the
    rule (its id or its symbol), so the test is about that rule and not merely nearby."""
    unmentioned = [
        (entry["id"], rule)
        for entry in ENTRIES
        if entry["held"] == "rule" and not (entry.get("reject") or entry.get("accept"))
        for rule in entry["rules"]
        if not _tests_mention(entry, rule)
    ]

    assert [] == unmentioned


# ---- the rendering -------------------------------------------------------------------------


def test_docs_spec_coverage_md_is_rendered_from_the_matrix() -> None:
    """``docs/spec-coverage.md`` is generated:
    ``aguikit rules --coverage docs/spec-coverage.toml > docs/spec-coverage.md``."""
    assert reference.render_coverage(MATRIX) == RENDERED.read_text(encoding="utf-8")


def test_the_command_renders_the_matrix_and_names_one_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``aguikit rules --coverage`` prints the rendering; a missing or malformed matrix is
    exit 2 with the reason, never a traceback."""
    assert 0 == main(["rules", "--coverage", str(MATRIX_PATH)])
    assert RENDERED.read_text(encoding="utf-8") == capsys.readouterr().out

    broken = tmp_path / "broken.toml"
    broken.write_text("[[statement]\n", encoding="utf-8")
    for path in (broken, tmp_path / "absent.toml"):
        assert 2 == main(["rules", "--coverage", str(path)])
        assert "cannot read the coverage matrix" in capsys.readouterr().err
