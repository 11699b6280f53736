"""
``aguikit check`` against its closest peer's corpus: ag-ui-validate 0.4.0's bundled fixtures.

The peer (a test dependency) ships one stream per rule it checks.  Every *valid* fixture
must check clean (exit 0); every *invalid* fixture whose rule is about the AG-UI protocol
must fail (exit 1).  Left out of that, each with its reason (:func:`_not_protocol`,
:data:`DIVERGENCES`): the peer's hygiene and advisory rules (``info``/``warning``, reported
by aguikit at its own severity without failing), and where the official conformance
corpus, which aguikit follows, rules the other way.  The peer's transport scenarios (a
live server's chunks, gaps and content type, no stream file) are served by a real HTTP
server at 1/100 of their timing.  ``docs/peer.md`` is the side-by-side table.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from aguikit.cli import main

peer = pytest.importorskip("ag_ui_validate", reason="ag-ui-validate 0.4.0 is a test dependency")
SPEC: Final = Path(peer.__file__).parent / "spec"
CATALOG: Final = {
    rule["id"]: rule for rule in json.loads((SPEC / "catalog.json").read_text())["rules"]
}

VALID: Final = sorted((SPEC / "fixtures" / "valid").glob("*.jsonl"))
INVALID: Final = sorted(p for p in (SPEC / "fixtures" / "invalid").iterdir() if p.is_dir())

DIVERGENCES: Final = {
    "AGUI005": "the official conformance corpus (late-run-error-after-finished-run-continues) "
    "accepts a RUN_ERROR after RUN_FINISHED; aguikit reports the failed run as AGUI-K007 (info)",
}
"""Peer error rules the official corpus contradicts: aguikit follows the corpus."""


def _rule(fixture: Path) -> str:
    return fixture.name.split("-", 1)[0]


def _not_protocol(fixture: Path) -> str | None:
    """Why a fixture is not a protocol violation aguikit must fail on, or ``None``."""
    rule = CATALOG[_rule(fixture)]
    if not (fixture / "stream.jsonl").exists():
        return f"{rule['id']} is a transport scenario with no stream ({rule['title']})"
    if rule["severity"] != "error":
        return f"{rule['id']} is a {rule['severity']} of the peer's ({rule['category']})"
    return DIVERGENCES.get(rule["id"])


def _check(path: Path) -> tuple[int, list[str]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", str(path), "--format", "json"])
    (source,) = json.loads(out.getvalue())["sources"]
    return code, sorted({p["rule"] for p in source["problems"]})


def test_the_corpus_is_the_one_this_file_describes() -> None:
    """46 rules, 7 valid streams, a fixture per rule: a new peer release is noticed."""
    assert (46, 7, 46) == (len(CATALOG), len(VALID), len(INVALID))


@pytest.mark.parametrize("fixture", VALID, ids=lambda p: p.stem)
def test_every_valid_fixture_checks_clean(fixture: Path) -> None:
    """Exit 0 and no error: what the peer calls valid, aguikit does too."""
    code, rules = _check(fixture)

    assert 0 == code, rules


PROTOCOL: Final = [f for f in INVALID if _not_protocol(f) is None]


@pytest.mark.parametrize("fixture", PROTOCOL, ids=lambda p: p.name)
def test_every_invalid_protocol_fixture_fails(fixture: Path) -> None:
    """Exit 1, with at least one aguikit rule named."""
    code, rules = _check(fixture / "stream.jsonl")

    assert 1 == code
    assert rules


def test_what_is_left_out_is_left_out_for_a_stated_reason() -> None:
    """Every fixture not required to fail has its reason; most protocol ones are required."""
    reasons = {f.name: _not_protocol(f) for f in INVALID if _not_protocol(f) is not None}

    assert all(reasons.values())
    assert 27 == len(PROTOCOL)


SCENARIOS: Final = sorted(f for f in INVALID if (f / "scenario.json").exists())
SCALE: Final = 0.01
"""The peer's scenario gaps, and aguikit's thresholds, run at 1/100 of real time."""
EXPECTED_SCENARIO: Final = {
    "AGUI501": ("AGUI-K004", 1),  # a line without 'data:' in an event stream
    "AGUI505": ("AGUI-T003", 1),  # the wrong content type (the body is judged too)
    "AGUI506": ("AGUI-T005", 0),  # a silence without keep-alive: a warning
    "AGUI508": ("AGUI-V006", 1),  # the connection dropped before a terminal event
}
"""AGUI507 (everything in one read, no silence) is the peer's heuristic: aguikit only calls
delivery buffered after a silence (AGUI-T006), so the scenario is not expected to trip it."""


def _served(scenario: dict[str, object]) -> Iterator[bytes]:
    import time

    for chunk in scenario["chunks"]:  # type: ignore[attr-defined]
        time.sleep(chunk["gapMs"] / 1000 * SCALE)
        yield chunk["text"].encode()


@pytest.mark.parametrize("fixture", SCENARIOS, ids=lambda p: p.name)
def test_the_peers_transport_scenarios_served_live(fixture: Path) -> None:
    """Each scenario served by a real HTTP server; aguikit check URL says what happened."""
    from tests.servers import Route, serve

    from aguikit.checker import CheckConfig, check_source

    scenario = json.loads((fixture / "scenario.json").read_text())
    config = CheckConfig(
        first_event_seconds=10 * SCALE,
        silent_gap_seconds=15 * SCALE,
        buffer_silence_seconds=2 * SCALE,
    )
    with serve() as server:
        route = Route(
            _served(scenario),
            content_type=str(scenario["contentType"]),
            drop=bool(scenario.get("abnormalEof")),
        )
        report = check_source(server.add("/agent", route), config)
    rules = {finding.rule for finding in report.findings}

    expected = EXPECTED_SCENARIO.get(_rule(fixture))
    if expected is None:
        assert 0 == report.exit_code(config), rules
    else:
        assert expected[0] in rules
        assert expected[1] == report.exit_code(config)
