"""
``aguikit check`` reports, in the four shapes CI systems read: text, JSON, SARIF, JUnit.

Each renderer takes the :class:`~aguikit.checker.SourceReport` of every source checked and
the :class:`~aguikit.checker.CheckConfig` that judged them, and returns one string; nothing
here decides what is wrong, only how to say it:

* ``text``: for a person at a terminal; findings grouped per source and run, colour on a
  terminal unless ``NO_COLOR`` or ``--no-color``, one summary line per source and a table
  when there are several.
* ``json``: one document, always, even for unreadable input; its shape is versioned
  (:data:`JSON_SCHEMA_VERSION`) and documented in ``docs/check.md``.
* ``sarif``: SARIF 2.1.0 as GitHub code scanning reads it: one rule per catalogue row
  reported, with its help text and a link to its section of ``docs/rules.md``; each
  result's fingerprint is built from what the bug *is* (rule, event type, pointer, the
  source's path), never from the ids a producer mints afresh on every run, so the same
  bug in a re-recorded stream stays the same alert.
* ``junit``: one test case per source and run, named by the run's number (never its id:
  a re-recording keeps its test history), for CI systems that show test reports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from .catalogue import RULES_BY_ID, Severity
from .checker import CheckConfig, Finding, SourceReport

__all__ = [
    "JSON_SCHEMA_VERSION",
    "REPOSITORY_URL",
    "RULES_URL",
    "Style",
    "render",
    "render_json",
    "render_junit",
    "render_sarif",
    "render_text",
]

JSON_SCHEMA_VERSION: Final = 1
"""The version of the ``--format json`` document; raised when a member changes meaning."""

REPOSITORY_URL: Final = "https://github.com/aguikit/aguikit"
"""The ``Repository`` of ``[project.urls]`` in ``pyproject.toml``, for when aguikit runs
without its package metadata (a test holds the two equal)."""

RULES_URL: Final = f"{REPOSITORY_URL}/blob/main/docs/rules.md"
"""The ``Rules`` of ``[project.urls]``, likewise: ``docs/rules.md`` as the repository
renders it, where each rule's section is the heading anchor ``#<rule.anchor>``."""

FINGERPRINT: Final = "aguikit/v2"
"""The ``partialFingerprints`` key; its number changes when the recipe does."""

SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"

_LEVEL: Final = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


class Style:
    """ANSI colour when asked for (a terminal without ``NO_COLOR``), else plain text."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: Any, *, no_color: bool = False) -> Style:
        """Colour for a terminal, unless ``NO_COLOR`` is set or ``no_color`` asked."""
        isatty = getattr(stream, "isatty", None)
        tty = bool(isatty and isatty())
        return cls(tty and not no_color and "NO_COLOR" not in os.environ)

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)


# --- text ---------------------------------------------------------------------------------


def _finding_line(source: str, f: Finding, style: Style) -> str:
    head = f"{source}:{f.line}" if f.line is not None and f.exchange is None else source
    where = f"event {f.event}" if f.event is not None else "stream"
    if f.exchange is not None:  # a conversation: the exchange, then its request or event
        where = f"exchange {f.exchange} " + (f"event {f.event}" if f.event else "request")
    etype = f" {f.event_type}" if f.event_type else ""
    label = {
        Severity.ERROR: style.red("error"),
        Severity.WARNING: style.yellow("warning"),
        Severity.INFO: style.cyan("info"),
    }[f.severity]
    pointer = f" at {f.pointer}" if f.pointer else ""
    place = [f.rule] if f.code != f.rule else []
    if f.exchange is not None and f.line is not None:
        place.append(f"line {f.line}")
    if f.frame is not None:
        place.append(f"frame {f.frame}")
    if f.byte_offset is not None:
        place.append(f"byte {f.byte_offset}")
    text = f"{head}: {where}{etype}: {label} {style.bold(f.code)}{pointer}: {f.message}"
    if place:
        text += style.dim(f" [{', '.join(place)}]")
    if f.count > 1:
        text += style.dim(f" (x{f.count}, the last at event {f.last_event})")
    if f.consequence_of is not None:
        text += style.dim(f" (may be a consequence of the error at event {f.consequence_of})")
    return text


def _summary(report: SourceReport, config: CheckConfig, style: Style) -> str:
    c = report.counts()
    parts = [
        f"{report.events} events",
        f"{c['schema']} schema errors",
        f"{c['protocol']} protocol errors",
        f"{c['patch']} patch errors",
        f"{c['decode']} decode errors",
        f"{c['transport']} transport errors",
        f"{c['warning']} warnings",
        f"{c['info']} notes",
    ]
    code = report.exit_code(config)
    verdict = {0: style.green("OK"), 1: style.red("FAILED"), 2: style.red("UNREADABLE")}[code]
    text = f"{report.source}: {verdict}: " + ", ".join(parts)
    if report.runs:
        statuses: dict[str, int] = {}
        for run in report.runs:
            statuses[run.status] = statuses.get(run.status, 0) + 1
        text += "; runs: " + ", ".join(f"{n} {status}" for status, n in statuses.items())
    if report.stopped_at is not None:
        text += f"\n{report.source}: stopped after {config.max_errors} errors (--max-errors)"
    return text


def _run_header(report: SourceReport, number: int, style: Style) -> str:
    run = report.runs[number - 1] if 0 < number <= len(report.runs) else None
    if run is None:
        return style.bold(f"{report.source}: run {number}")
    status = run.status
    if status == "error":
        detail = f": {run.message}" + (f" [{run.code}]" if run.code else "")
        status = style.red("error") + detail
    elif status == "interrupted":
        status = style.yellow("interrupted") + f" on {', '.join(run.interrupts)}"
    events = f"events {run.first_event or '?'}-{run.last_event or '?'}"
    return style.bold(f"{report.source}: run {number} '{run.run_id}' ({events}): ") + status


def render_text(reports: Sequence[SourceReport], config: CheckConfig, style: Style) -> str:
    """Findings per source and run, a summary line per source, a table for several."""
    lines: list[str] = []
    for report in reports:
        shown: set[int] = set()
        for finding in report.findings:
            run = finding.run or 0
            if run and run not in shown and len(report.runs) > 1:
                shown.add(run)
                lines.append(_run_header(report, run, style))
            lines.append(_finding_line(report.source, finding, style))
        for number, run_summary in enumerate(report.runs, 1):
            if run_summary.status in ("error", "interrupted", "cancelled") and number not in shown:
                lines.append(_run_header(report, number, style))
        lines.append(_summary(report, config, style))
    if len(reports) > 1:
        lines.append("")
        lines.extend(_table(reports, config, style))
    return "\n".join(lines) + "\n"


def _table(reports: Sequence[SourceReport], config: CheckConfig, style: Style) -> list[str]:
    width = max(len("source"), *(len(r.source) for r in reports))
    head = f"{'source':<{width}}  {'events':>6}  {'errors':>6}  {'warnings':>8}  {'notes':>5}  "
    rows = [head + "runs  verdict"]
    worst = 0
    for r in reports:
        code = r.exit_code(config)
        worst = max(worst, code)
        verdict = {0: style.green("OK"), 1: style.red("FAILED"), 2: style.red("UNREADABLE")}[code]
        rows.append(
            f"{r.source:<{width}}  {r.events:>6}  {r.by_severity(Severity.ERROR):>6}  "
            f"{r.by_severity(Severity.WARNING):>8}  {r.by_severity(Severity.INFO):>5}  "
            f"{len(r.runs):>4}  {verdict}"
        )
    failed = sum(1 for r in reports if r.exit_code(config))
    rows.append(f"{len(reports)} sources, {failed} failed; exit {worst}")
    return rows


# --- json ---------------------------------------------------------------------------------


def render_json(reports: Sequence[SourceReport], config: CheckConfig, version: str) -> str:
    """The versioned JSON report (``docs/check.md``): one object, whatever happened."""
    sources: list[dict[str, Any]] = []
    for report in reports:
        code = report.exit_code(config)
        sources.append(
            {
                "source": report.source,
                "format": report.kind,
                "ok": code == 0,
                "exit": code,
                "events": report.events,
                "counts": report.counts(),
                "unreadable": report.unreadable,
                "stopped_at": report.stopped_at,
                "runs": [run.as_json() for run in report.runs],
                "problems": [finding.as_json() for finding in report.findings],
            }
        )
    worst = max((report.exit_code(config) for report in reports), default=0)
    document = {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": {"name": "aguikit", "version": version},
        "ok": worst == 0,
        "exit": worst,
        "fail_on": config.fail_on.value,
        "sources": sources,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


# --- sarif --------------------------------------------------------------------------------


def _uri(source: str) -> str:
    if source.startswith(("http://", "https://")):
        return source
    if source == "<stdin>":
        return "stdin"
    path = Path(source)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def _project_urls() -> dict[str, str]:
    """``[project.urls]`` of the installed package's metadata (empty without it)."""
    from importlib import metadata  # only the SARIF report needs it

    try:
        entries = metadata.metadata("aguikit").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare source tree
        return {}
    urls: dict[str, str] = {}
    for entry in entries:
        label, _, url = str(entry).partition(",")
        urls[label.strip()] = url.strip()
    return urls


def _links() -> tuple[str, str]:
    """
    The repository and its rendered ``docs/rules.md`` (each rule at ``#<rule.anchor>``):
    ``Repository`` and ``Rules``, set once in ``pyproject.toml`` under ``[project.urls]``
    and read from the installed package's metadata, else :data:`REPOSITORY_URL` and
    :data:`RULES_URL`.
    """
    urls = _project_urls()
    return urls.get("Repository") or REPOSITORY_URL, urls.get("Rules") or RULES_URL


def _fingerprint(finding: Finding, uri: str, seen: dict[str, int]) -> str:
    """
    A result's identity across re-recordings: the rule (and schema keyword), the event
    type, the pointer and the source's path, with the occurrence of that combination in
    the source, hashed.  Never the message or the ids in it: run, message and tool-call
    ids are minted afresh on every run, and an alert that changed with them would be
    closed and reopened by every new recording of the same bug.
    """
    import hashlib  # only the SARIF report needs it: not at start-up

    key = "\x1f".join(
        (finding.rule, finding.code, finding.event_type or "", finding.pointer or "", uri)
    )
    if finding.exchange is not None:  # a conversation's exchanges keep their order
        key += f"\x1fexchange {finding.exchange}"
    seen[key] = occurrence = seen.get(key, 0) + 1
    return f"{hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]}:{occurrence}"


def _region(finding: Finding) -> dict[str, Any]:
    """Where the finding's event starts; line 1 for what no event locates (the end)."""
    if finding.exchange is not None:  # lines and bytes count in a body inside the file
        return {"startLine": 1}
    region: dict[str, Any] = {"startLine": finding.line or 1}
    if finding.byte_offset is not None:
        region["byteOffset"] = finding.byte_offset
    return region


def _sarif_rule(rule_id: str, docs: str) -> dict[str, Any]:
    rule = RULES_BY_ID[rule_id]
    link = f"{docs}#{rule.anchor}"
    return {
        "id": rule.id,
        "name": rule.symbol,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": f"{rule.title}. Source: {rule.source}."},
        "help": {
            "text": f"{rule.title}.\nSource: {rule.source}.\nSee {link}",
            "markdown": f"**{rule.id}** `{rule.symbol}`: {rule.title}.\n\n"
            f"Source: {rule.source}.\n\n[Read more in docs/rules.md]({link})",
        },
        "helpUri": link,
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": ["ag-ui", rule.stage.value], "precision": "very-high"},
    }


def render_sarif(reports: Sequence[SourceReport], config: CheckConfig, version: str) -> str:
    """
    SARIF 2.1.0: one run of the tool, a result per finding, a rule per row reported, and
    a tool execution notification per source that could not be read.
    """
    ids = sorted({f.rule for r in reports for f in r.findings})
    index = {rule_id: n for n, rule_id in enumerate(ids)}
    repository, docs = _links()
    results: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    for report in reports:
        uri = _uri(report.source)
        artifacts.append({"location": {"uri": uri}})
        seen: dict[str, int] = {}
        for f in report.findings:
            properties: dict[str, Any] = {
                key: value
                for key, value in {
                    "event": f.event,
                    "eventType": f.event_type,
                    "pointer": f.pointer,
                    "frame": f.frame,
                    "run": f.run,
                    "count": f.count,
                    "consequenceOf": f.consequence_of,
                    "code": f.code,
                    "exchange": f.exchange,
                    "bodyLine": f.line if f.exchange is not None else None,
                    "bodyByteOffset": f.byte_offset if f.exchange is not None else None,
                }.items()
                if value is not None
            }
            where = f" (event {f.event} {f.event_type or ''})".rstrip() if f.event else ""
            if f.exchange is not None:
                inside = f"event {f.event} {f.event_type or ''}".rstrip() if f.event else "request"
                where = f" (exchange {f.exchange}, {inside})"
            logical = f"event/{f.event}{f.pointer or ''}" if f.event is not None else None
            if f.exchange is not None:
                inner = logical or f"request{f.pointer or ''}"
                logical = f"exchange/{f.exchange}/{inner}"
            results.append(
                {
                    "ruleId": f.rule,
                    "ruleIndex": index[f.rule],
                    "level": _LEVEL[f.severity],
                    "message": {"text": f"{f.message}{where}"},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": uri},
                                "region": _region(f),
                            },
                            "logicalLocations": [{"fullyQualifiedName": logical}]
                            if logical is not None
                            else [],
                        }
                    ],
                    "partialFingerprints": {FINGERPRINT: _fingerprint(f, uri, seen)},
                    "properties": properties,
                }
            )
        if report.unreadable is not None:
            notifications.append(_unreadable(report, uri, index))
    invocation: dict[str, Any] = {
        "executionSuccessful": not notifications,
        "exitCode": max((r.exit_code(config) for r in reports), default=0),
    }
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "aguikit",
                        "semanticVersion": version,
                        "informationUri": repository,
                        "rules": [_sarif_rule(rule_id, docs) for rule_id in ids],
                    }
                },
                "artifacts": artifacts,
                "invocations": [invocation],
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _unreadable(report: SourceReport, uri: str, index: dict[str, int]) -> dict[str, Any]:
    """Why a source could not be read, as the notification a CI system shows for it."""
    notification: dict[str, Any] = {
        "level": "error",
        "message": {"text": str(report.unreadable)},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}}}],
    }
    # The finding that says why (binary input, a refused request), when it has a rule.
    cause = next((f.rule for f in report.findings if f.kind in ("decode", "transport")), None)
    if cause is not None:
        notification["associatedRule"] = {"id": cause, "index": index[cause]}
    return notification


# --- junit --------------------------------------------------------------------------------


def render_junit(reports: Sequence[SourceReport], config: CheckConfig, version: str) -> str:
    """JUnit XML: a suite per source, a test case per run (and one for the stream)."""
    from xml.sax.saxutils import escape, quoteattr  # 15 ms (urllib, ssl): JUnit alone

    floor = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
    fails = floor[config.fail_on]
    suites: list[str] = []
    total = failures = errors = 0
    for report in reports:
        groups: dict[int, list[Finding]] = {}
        for f in report.findings:
            groups.setdefault(f.run or 0, []).append(f)
        numbers = sorted(set(groups) | set(range(1, len(report.runs) + 1)))
        if not numbers:
            numbers = [0]
        cases: list[str] = []
        suite_failures = suite_errors = 0
        for number in numbers:
            run = report.runs[number - 1] if 0 < number <= len(report.runs) else None
            # Not the run's id: minted anew.  A conversation's requests are its thread's.
            outside = "thread" if report.kind == "conversation" else "stream"
            name = outside if run is None else f"run {number}"
            bad = [f for f in groups.get(number, []) if floor[f.severity] >= fails]
            if run is not None and run.status == "error" and config.fail_on_run_error:
                bad = bad or [f for f in groups.get(number, []) if f.rule == "AGUI-K007"]
            body = ""
            if report.unreadable is not None and number == numbers[0]:
                body = f'<error message={quoteattr(report.unreadable)} type="unreadable"/>'
                suite_errors += 1
            elif bad:
                text = "\n".join(_finding_line(report.source, f, Style(False)) for f in bad)
                body = (
                    f"<failure message={quoteattr(bad[0].message[:200])} "
                    f"type={quoteattr(bad[0].rule)}>{escape(text)}</failure>"
                )
                suite_failures += 1
            notes = [f for f in groups.get(number, []) if f not in bad]
            if notes:
                out = "\n".join(_finding_line(report.source, f, Style(False)) for f in notes)
                body += f"<system-out>{escape(out)}</system-out>"
            cases.append(
                f"    <testcase classname={quoteattr(report.source)} name={quoteattr(name)}>"
                f"{body}</testcase>"
            )
        total += len(cases)
        failures += suite_failures
        errors += suite_errors
        suites.append(
            f'  <testsuite name={quoteattr(report.source)} tests="{len(cases)}" '
            f'failures="{suite_failures}" errors="{suite_errors}">\n'
            + "\n".join(cases)
            + "\n  </testsuite>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="aguikit check {escape(version)}" tests="{total}" '
        f'failures="{failures}" errors="{errors}">\n' + "\n".join(suites) + "\n</testsuites>\n"
    )


_RENDERERS: Final[dict[str, Callable[[Sequence[SourceReport], CheckConfig, str], str]]] = {
    "json": render_json,
    "sarif": render_sarif,
    "junit": render_junit,
}


def render(
    fmt: str, reports: Sequence[SourceReport], config: CheckConfig, version: str, style: Style
) -> str:
    """The report of ``reports`` in ``fmt`` (``text``, ``json``, ``sarif``, ``junit``)."""
    if fmt == "text":
        return render_text(reports, config, style)
    return _RENDERERS[fmt](reports, config, version)
