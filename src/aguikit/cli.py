"""
The ``aguikit`` command: check, replay and explore AG-UI streams from a terminal.

Someone debugging an agent has a recording (an ``.sse`` capture, a ``.jsonl`` log) or a
live endpoint, and wants two answers fast: *is this stream correct?* and *what
conversation does it produce?*  ``aguikit check`` answers the first - every schema
violation, the first ordering error, every patch that does not apply, one line each with
the rule id or schema keyword, the event index and type - and exits 0, 1 or 2 so CI can
gate on it.  ``aguikit replay`` answers the second.  ``aguikit demo`` shows both on a
bundled stream, ``aguikit convert`` re-encodes a stream as SSE, JSONL or protobuf, and
``aguikit rules`` and ``aguikit schema`` print the reference material.

This module is a thin shell on the top floor: reading sources, printing and exit codes
live here; every judgement is the library's.  Each event goes through one
:class:`aguikit.Session`, which validates it once (collecting the strict schema issues it
finds on the way) and verifies and applies it; a live endpoint is fetched through the same
HTTP path as :class:`aguikit.client.AgentClient`.  Input is
streamed - memory follows the messages and tool calls the conversation names (their
skeletons and ids, about 1.3 KB for a turn of a message, a tool call and its result),
never the file size or the text (the checker's session has ``keep_text=False``) - and
plain text is printed, with ANSI colour only when standard output is a terminal.

Deliberately absent: watching a live agent over several runs, and rich/TUI rendering
(no dependency beyond the library's own).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import attrs

from ._generated.registry import UNIONS
from .catalogue import Severity, find_rule, suggest_rule
from .checker import (
    BUFFER_EVENTS,
    BUFFER_SILENCE_SECONDS,
    DEFAULT_MAX_ERRORS,
    FIRST_EVENT_SECONDS,
    SILENT_GAP_SECONDS,
    CheckConfig,
    SourceReport,
    Unreadable,
    check_source,
    expand_sources,
    is_recording,
    load_config,
    map_sources,
    open_events,
)
from .errors import AguiError, TransportError
from .limits import MAX_FRAME_BYTES, MAX_JSON_DEPTH, MAX_LINE_BYTES
from .report import Style, render
from .session import Session
from .wire import to_wire

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_UNREADABLE: Final = 2

_FORMATS: Final = ("sse", "jsonl", "proto")
"""What ``aguikit convert --to`` writes."""

# --- output -----------------------------------------------------------------------------

_Style = Style


class _Progress:
    """Events read and rate on stderr, at most twice a second, only on a terminal."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.start = time.monotonic()
        self.last = self.start
        self.shown = False

    def tick(self, count: int) -> None:
        if not self.enabled or count % 1024:
            return
        now = time.monotonic()
        if now - self.last < 0.5:
            return
        self.last = now
        rate = count / max(now - self.start, 1e-9)
        self.stream.write(f"\r{count:,} events read ({rate:,.0f}/s)")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


# Start-up is part of every ``aguikit check`` in CI: what only one command, format or
# option needs (the rule reference, a process pool, package metadata, resources, difflib)
# is imported where it is used, not here.


def _demo_path() -> str:
    """The bundled recording, a file of the installed package (package data)."""
    from importlib import resources

    return str(resources.files("aguikit").joinpath("examples/demo.sse"))


def _self_command() -> list[str]:
    """
    How to run this very ``aguikit`` again, typed into a shell in any directory.

    ``aguikit`` when that name on ``PATH`` is the script running; else this interpreter
    with ``-m aguikit``, by its absolute path: ``python -m aguikit demo``, and ``./dev
    demo`` (which runs it in nox's own environment, whose ``bin`` a user's shell does not
    have on its ``PATH``).
    """
    import shutil

    script = Path(sys.argv[0])
    found = shutil.which("aguikit")
    if script.stem == "aguikit" and found is not None and Path(found).resolve() == script.resolve():
        return ["aguikit"]
    return [sys.executable, "-m", "aguikit"]


def _shell_line(argv: list[str]) -> str:
    """``argv`` quoted for this platform's shell."""
    if sys.platform == "win32":  # pragma: no cover - cmd.exe's quoting
        import subprocess

        return subprocess.list2cmdline(argv)
    import shlex

    return shlex.join(argv)


def _run_demo(out: TextIO, err: TextIO) -> int:
    """
    ``aguikit check --strict`` then ``aguikit replay`` on the bundled recording, each
    under the command line that prints the same: a user can copy it, from any directory.
    """
    path = _demo_path()
    command = _self_command()
    style = Style.for_stream(out)
    config = CheckConfig(fail_on=Severity.WARNING)
    out.write(style.bold("$ " + _shell_line([*command, "check", "--strict", path])) + "\n")
    report = check_source(path, config)
    out.write(_render("text", [report], config, style))
    out.write("\n" + style.bold("$ " + _shell_line([*command, "replay", path])) + "\n")
    replay_code = _run_replay(path, open_events(path, config), out, err)
    return max(report.exit_code(config), replay_code)


def _version() -> str:
    from importlib import metadata  # 15 ms: only ``--version`` and the versioned formats

    try:
        return metadata.version("aguikit")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


class _VersionAction(argparse.Action):
    """``--version``, looking the version up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show program's version number and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(f"aguikit {_version()}\n")  # where argparse's own prints it
        parser.exit()


def _render(fmt: str, reports: list[SourceReport], config: CheckConfig, style: Style) -> str:
    """:func:`~aguikit.report.render`, with the version only for the formats that print it."""
    return render(fmt, reports, config, "" if fmt == "text" else _version(), style)


# --- check ------------------------------------------------------------------------------


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(
        part.strip() for value in values or () for part in value.split(",") if part.strip()
    )


def _severity(value: Any, where: str) -> Severity:
    try:
        return Severity(str(value).lower())
    except ValueError:
        raise Unreadable(f"{where}: {value!r} is not error, warning or info") from None


def _config(args: argparse.Namespace) -> CheckConfig:
    """The check's settings: ``[tool.aguikit.check]`` first, the command line over it."""
    table = load_config()

    def pick(name: str, default: Any) -> Any:
        given = getattr(args, name.replace("-", "_"), None)
        return given if given is not None else table.get(name, default)

    def listed(name: str) -> tuple[str, ...]:
        given = _split(getattr(args, name, None))
        if given:
            return given
        value = table.get(name, ())
        return _split([value] if isinstance(value, str) else [str(v) for v in value])

    headers = []
    for header in args.header or ():
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise Unreadable(f"--header {header!r}: expected NAME:VALUE")
        headers.append((name.strip(), value.strip()))
    severities = {
        str(key): _severity(value, f"[tool.aguikit.check.severity] {key}")
        for key, value in dict(table.get("severity", {})).items()
    }
    fail_on = "warning" if getattr(args, "strict", False) else pick("fail-on", "error")
    return CheckConfig(
        select=listed("select"),
        ignore=listed("ignore"),
        fail_on=_severity(fail_on, "--fail-on"),
        max_warnings=pick("max-warnings", None),
        max_errors=int(pick("max-errors", DEFAULT_MAX_ERRORS)),
        fail_on_run_error=bool(
            getattr(args, "fail_on_run_error", False) or table.get("fail-on-run-error", False)
        ),
        severity=severities,
        max_frame_bytes=int(pick("max-frame-bytes", MAX_FRAME_BYTES)),
        max_line_bytes=int(pick("max-line-bytes", MAX_LINE_BYTES)),
        max_depth=int(pick("max-depth", MAX_JSON_DEPTH)),
        headers=tuple(headers),
        timeout=float(pick("timeout", 60.0)),
        input_path=args.input,
        first_event_seconds=float(table.get("first-event-seconds", FIRST_EVENT_SECONDS)),
        silent_gap_seconds=float(table.get("silent-gap-seconds", SILENT_GAP_SECONDS)),
        buffer_silence_seconds=float(table.get("buffer-silence-seconds", BUFFER_SILENCE_SECONDS)),
        buffer_events=int(table.get("buffer-events", BUFFER_EVENTS)),
    )


def _check_all(
    specs: list[str], config: CheckConfig, jobs: int, progress: _Progress
) -> list[SourceReport]:
    """Every source's report, in the order given; several at once with ``jobs`` > 1."""
    if jobs > 1 and len(specs) > 1 and "-" not in specs:
        return map_sources(_check_one, specs, config, jobs)
    reports = []
    for spec in specs:
        reports.append(_check_one(spec, config, tick=progress.tick))
        progress.done()
    return reports


def _check_one(
    spec: str, config: CheckConfig, tick: Callable[[int], None] = lambda n: None
) -> SourceReport:
    """A stream through the checker, a HAR file or recording through the conversation's
    judge (exchange by exchange, then across each thread)."""
    if is_recording(spec):
        from .conversation import check_recording  # the thread rules: a HAR file alone

        return check_recording(spec, config)
    return check_source(spec, config, tick=tick)


def _run_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config = _config(args)
    specs: list[str] = []
    missing: dict[str, SourceReport] = {}
    for spec in args.source:
        try:
            specs.extend(s for s in expand_sources([spec]) if s not in specs)
        except Unreadable as exc:  # a glob or directory with nothing in it: still reported
            missing[spec] = SourceReport(spec, unreadable=str(exc))
            specs.append(spec)
    fmt = args.format
    progress = _Progress(err, fmt == "text" and args.output is None and err.isatty())
    readable = [s for s in specs if s not in missing]
    page = None
    if fmt == "html":  # the findings in the page that shows the run (aguikit view)
        from .view import build_view

        page = build_view(readable, config, jobs=args.jobs)
        checked = iter(page.reports)
    else:
        checked = iter(_check_all(readable, config, args.jobs, progress))
    reports = [missing[s] if s in missing else next(checked) for s in specs]
    for report in reports:
        if report.unreadable is not None:
            err.write(f"aguikit: {report.unreadable}\n")
    terminal = Style.for_stream(out, no_color=args.no_color)
    # A report file never gets colour codes, whatever standard output is.
    if page is not None:
        from .view import render_page

        text = render_page(page, " ".join(readable), _version())
    else:
        text = _render(fmt, reports, config, Style(False) if args.output else terminal)
    if args.output is not None:
        try:
            Path(args.output).write_text(text, encoding="utf-8", errors="backslashreplace")
        except OSError as exc:
            raise Unreadable(
                f"cannot write --output {args.output}: {exc.strerror or exc}"
            ) from None
        if fmt != "text":  # the CI log still shows what the report file holds
            out.write(_render("text", reports, config, terminal))
    else:
        out.write(text)
    return max((report.exit_code(config) for report in reports), default=EXIT_OK)


# --- view -------------------------------------------------------------------------------


def _run_view(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """
    ``aguikit view``: the page of every readable source, written to ``--output``; a source
    that cannot be read is reported as ``aguikit check`` reports it (exit 2), and no page
    is written when none could be read.
    """
    from .view import build_view, render_page

    config = _config(args)
    if args.max_errors is None:  # a page shows everything after each violation
        config = attrs.evolve(config, max_errors=sys.maxsize)
    specs: list[str] = []
    code = EXIT_OK
    for spec in args.source:
        try:
            specs.extend(s for s in expand_sources([spec]) if s not in specs)
        except Unreadable as exc:
            err.write(f"aguikit: {exc}\n")
            code = EXIT_UNREADABLE
    view = build_view(specs, config, jobs=args.jobs)
    readable = []
    for spec, report in zip(specs, view.reports, strict=True):
        if report.unreadable is not None:
            err.write(f"aguikit: {report.unreadable}\n")
            code = EXIT_UNREADABLE
        else:
            readable.append(spec)
    if not readable:
        return EXIT_UNREADABLE
    page = render_page(view, " ".join(readable), _version())
    try:
        Path(args.output).write_text(page, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise Unreadable(f"cannot write --output {args.output}: {exc.strerror or exc}") from None
    events = sum(report.events for report in view.reports)
    findings = sum(len(report.findings) for report in view.reports)
    out.write(f"{args.output}: {events} events, {findings} findings\n")
    return code


# --- replay -----------------------------------------------------------------------------


def _wire(obj: Any) -> Any:
    try:
        return to_wire(obj)
    except AguiError:
        return obj


def _pretty_json_text(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            wire = _wire(part)
            if isinstance(wire, dict) and wire.get("type") == "text":
                parts.append(str(wire.get("text", "")))
            elif isinstance(wire, dict):
                source = wire.get("source") or {}
                where = source.get("value", "") if source.get("type") == "url" else "inline data"
                parts.append(f"[{wire.get('type')}: {where}]")
            else:
                parts.append(str(wire))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _render_conversation(session: Session, style: _Style) -> str:
    lines: list[str] = []
    subagents = {sub.run_id: sub for sub in session.subagents}
    announced: set[str] = set()
    group: str | None = None
    for message in session.messages:
        wire = _wire(message)
        if not isinstance(wire, dict):
            continue
        sub_id = wire.get("subagentRunId")
        if group is not None and sub_id != group:
            lines.append(style.cyan("└"))
        group = sub_id if isinstance(sub_id, str) else None
        prefix = ""
        if sub_id:
            prefix = style.dim("│ ")
            if sub_id not in announced:
                announced.add(sub_id)
                sub = subagents.get(sub_id)
                name = getattr(sub, "name", None) if sub is not None else None
                status = getattr(sub, "status", None) if sub is not None else None
                label = f"subagent {name or sub_id} ({sub_id})" + (f" [{status}]" if status else "")
                lines.append(style.cyan("┌ " + label))
        role = str(wire.get("role", "?"))
        name = f" ({wire['name']})" if wire.get("name") else ""
        head = {"user": style.green, "assistant": style.bold, "tool": style.yellow}.get(
            role, style.dim
        )(f"{role}{name}")
        if role == "tool":
            head += style.dim(f" → result of {wire.get('toolCallId')}")
            body = _pretty_json_text(_content_text(wire.get("content")))
            if wire.get("error"):
                body += f"\n(error: {wire['error']})"
        elif role == "activity":
            head += style.dim(f" [{wire.get('activityType')}]")
            body = json.dumps(wire.get("content"), indent=2, ensure_ascii=False)
        else:
            body = _content_text(wire.get("content"))
            if role == "reasoning":
                body = style.dim(body)
        lines.append(prefix + head + ":")
        if body:
            lines.append(_indent(body, prefix + "  "))
        for call in wire.get("toolCalls") or []:
            function = call.get("function", {})
            lines.append(
                prefix
                + "  "
                + style.yellow(f"⚙ {function.get('name')}")
                + style.dim(f" ({call.get('id')})")
            )
            lines.append(
                _indent(_pretty_json_text(str(function.get("arguments", ""))), prefix + "    ")
            )
    if group is not None:
        lines.append(style.cyan("└"))
    if not lines:
        lines.append(style.dim("(no messages)"))
    lines.append("")
    lines.append(style.bold("state:"))
    lines.append(
        _indent(json.dumps(session.state, indent=2, ensure_ascii=False, default=str), "  ")
    )
    if session.runs:
        lines.append(style.bold("runs:"))
        for number, run in enumerate(session.runs, 1):
            detail = ""
            if run.status == "error":
                detail = f": {run.message}" + (f" [{run.code}]" if run.code else "")
            elif run.status == "interrupted":
                detail = " on " + ", ".join(i.id for i in run.interrupts)
            status = style.red(run.status) if run.status == "error" else run.status
            lines.append(f"  {number}. {run.run_id}: {status}{detail}")
    interrupts = getattr(session, "interrupts", None)
    if interrupts:
        lines.append(style.bold("interrupts:"))
        for interrupt in interrupts:
            lines.append(
                _indent(
                    json.dumps(_wire(interrupt), indent=2, ensure_ascii=False, default=str), "  "
                )
            )
    return "\n".join(lines)


def _run_replay(
    source: str,
    events: Iterator[dict[str, Any]],
    out: TextIO,
    err: TextIO,
    *,
    no_color: bool = False,
) -> int:
    style = Style.for_stream(out, no_color=no_color)
    session = Session(verify=True, validate=True, keep_delivered=False)
    code = EXIT_OK
    try:
        for data in events:
            session.feed(data)
        session.finish()
    except AguiError as exc:
        index = getattr(exc, "event_index", None)
        where = f" at event {index + 1}" if isinstance(index, int) else ""  # 1-based, as check
        err.write(f"{source}: stopped{where}: {exc}\n")
        code = EXIT_PROBLEMS
    out.write(_render_conversation(session, style) + "\n")
    return code


# --- schema / rules ---------------------------------------------------------------------


def _run_convert(
    source: str, events: Iterator[dict[str, Any]], to: str, output: str | None, err: TextIO
) -> int:
    """Re-encode every event of ``source`` as ``to``; exit 0, or 2 if it cannot be read."""
    from .proto import encode_proto_frame
    from .receiver import Receiver
    from .transport.jsonl import encode_line
    from .transport.sse import encode_bytes

    def encoded() -> Iterator[bytes]:
        if to == "sse":
            yield from (encode_bytes(event) for event in events)
        elif to == "jsonl":
            yield from (encode_line(event).encode("utf-8") for event in events)
        else:
            # The binary transport has no THINKING_* slot (docs/protobuf.md): the receiver
            # translates them to REASONING_* (and drops what it does not know) first.
            def note(symbol: str, message: str) -> None:
                err.write(f"aguikit: {source}: {message}\n")

            receiver = Receiver(on_warning=note)
            for event in events:
                typed = receiver.receive(event)
                if typed is not None:
                    yield encode_proto_frame(to_wire(typed))

    target = sys.stdout.buffer if output in (None, "-") else None
    try:
        with contextlib.ExitStack() as stack:
            sink = target or stack.enter_context(Path(str(output)).open("wb"))
            for block in encoded():
                sink.write(block)
            sink.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise Unreadable(f"cannot write {output}: {exc.strerror or exc}") from None
    except AguiError as exc:
        err.write(f"aguikit: {source}: {exc}\n")
        return EXIT_UNREADABLE
    return EXIT_OK


def _run_schema(definition: str | None, out: TextIO, err: TextIO) -> int:
    import difflib
    from importlib import resources

    text = resources.files("aguikit._generated").joinpath("schema.json").read_text("utf-8")
    if definition is None:
        out.write(text if text.endswith("\n") else text + "\n")
        return EXIT_OK
    defs: dict[str, Any] = json.loads(text).get("$defs", {})
    if definition not in defs:
        event_types = UNIONS["Event"][1]
        named = event_types.get(definition) or event_types.get(definition.upper())
        if named is not None:
            err.write(
                f"aguikit schema: {definition!r} is an event type; its definition is "
                f"{named} (aguikit schema {named})\n"
            )
            return EXIT_UNREADABLE
        close = difflib.get_close_matches(definition, list(defs), n=5, cutoff=0.5)
        lowered = {name.lower(): name for name in defs}
        if definition.lower() in lowered and lowered[definition.lower()] not in close:
            close.insert(0, lowered[definition.lower()])
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        err.write(f"aguikit schema: no definition {definition!r}{hint}\n")
        return EXIT_UNREADABLE
    out.write(json.dumps(defs[definition], indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


def _run_rules(
    key: str | None, markdown: bool, coverage: str | None, out: TextIO, err: TextIO
) -> int:
    from .reference import render_coverage, render_markdown, render_rule, render_text

    if coverage is not None:
        try:
            with open(coverage, "rb") as file:
                matrix = tomllib.load(file)
        except (OSError, tomllib.TOMLDecodeError) as error:
            err.write(f"aguikit rules: cannot read the coverage matrix {coverage!r}: {error}\n")
            return EXIT_UNREADABLE
        out.write(render_coverage(matrix))
        return EXIT_OK
    if markdown:
        out.write(render_markdown())
        return EXIT_OK
    if key is None:
        out.write(render_text())
        return EXIT_OK
    rule = find_rule(key)
    if rule is None:
        close = suggest_rule(key)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        err.write(f"aguikit rules: no rule {key!r}{hint}\n")
        return EXIT_UNREADABLE
    out.write(render_rule(rule))
    return EXIT_OK


# --- entry point ------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aguikit",
        description="Check, replay and explore AG-UI event streams.",
        epilog="Start with: aguikit demo",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def endpoint_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--input",
            metavar="FILE",
            help="RunAgentInput JSON to POST to a URL source (default: a minimal one)",
        )
        p.add_argument(
            "--header",
            action="append",
            metavar="NAME:VALUE",
            help="an HTTP header for a URL source (repeatable), e.g. 'Authorization: Bearer x'",
        )
        p.add_argument(
            "--timeout", type=float, metavar="SECONDS", help="read timeout for a URL (60)"
        )
        p.add_argument("--no-color", action="store_true", help="no ANSI colour (or NO_COLOR=1)")
        for name, default in (
            ("max-frame-bytes", MAX_FRAME_BYTES),
            ("max-line-bytes", MAX_LINE_BYTES),
            ("max-depth", MAX_JSON_DEPTH),
        ):
            p.add_argument(
                f"--{name}", type=int, metavar="N", help=f"safety limit (default {default})"
            )

    check = sub.add_parser(
        "check",
        help="validate, verify and apply streams; exit 0 clean, 1 problems, 2 unreadable",
        description="Check one or more streams. Settings also come from [tool.aguikit.check] "
        "in pyproject.toml; see docs/check.md.",
    )
    check.add_argument(
        "source",
        nargs="+",
        metavar="SOURCE",
        help="a .sse/.jsonl/.json/.pb file, a .har file or aguikit recording (a conversation), "
        "a glob, a directory, - for stdin, or an agent URL",
    )
    endpoint_args(check)
    check.add_argument(
        "--format",
        choices=("text", "json", "sarif", "junit", "html"),
        default="text",
        help="html: the page aguikit view writes, with the findings (the [view] extra)",
    )
    check.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE")
    check.add_argument(
        "--strict", action="store_true", help="fail on warnings too (as --fail-on warning)"
    )
    check.add_argument(
        "--fail-on", choices=("error", "warning", "info"), help="least severity that fails"
    )
    check.add_argument("--max-warnings", type=int, metavar="N", help="fail above N warnings")
    check.add_argument(
        "--max-errors",
        type=int,
        metavar="N",
        help=f"stop reading a source after N errors (default {DEFAULT_MAX_ERRORS})",
    )
    check.add_argument(
        "--fail-on-run-error", action="store_true", help="a run ending in RUN_ERROR fails"
    )
    check.add_argument(
        "--select", action="append", metavar="IDS", help="only these rules (ids or prefixes, ',')"
    )
    check.add_argument(
        "--ignore", action="append", metavar="IDS", help="not these rules (ids or prefixes, ',')"
    )
    check.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="processes")
    view = sub.add_parser(
        "view",
        help="write one offline HTML page showing the runs, state, conversation and findings",
        description="Render sources (anything check reads) as one self-contained HTML file; "
        "see docs/view.md. Needs the [view] extra (Jinja2).",
    )
    view.add_argument("source", nargs="+", metavar="SOURCE", help="as for check")
    endpoint_args(view)
    view.add_argument("--output", "-o", metavar="FILE", required=True, help="the page to write")
    view.add_argument(
        "--max-errors", type=int, metavar="N", help="stop reading a source after N errors (never)"
    )
    for name in ("select", "ignore"):
        view.add_argument(f"--{name}", action="append", metavar="IDS", help=f"as check --{name}")
    view.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="processes")
    replay = sub.add_parser("replay", help="print the conversation a stream materialises")
    convert = sub.add_parser("convert", help="re-encode a stream as SSE, JSONL or protobuf")
    for one_source in (replay, convert):
        one_source.add_argument(
            "source",
            metavar="SOURCE",
            help="a file (SSE, JSONL, JSON or protobuf: read by content), - for stdin, or a URL",
        )
        endpoint_args(one_source)
    convert.add_argument("--to", choices=_FORMATS, required=True, help="the output encoding")
    convert.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    sub.add_parser("demo", help="check and replay the bundled example stream")
    rules = sub.add_parser("rules", help="print the rule catalogue, or one rule (by id or symbol)")
    rules.add_argument("rule", nargs="?", metavar="ID", help="AGUI-V014, V014 or patch-failed")
    rules.add_argument(
        "--markdown", action="store_true", help="the whole reference as docs/rules.md has it"
    )
    rules.add_argument(
        "--coverage",
        metavar="MATRIX",
        help="render a specification coverage matrix (docs/spec-coverage.toml) as Markdown",
    )
    schema = sub.add_parser("schema", help="print the bundled JSON Schema, or one definition")
    schema.add_argument("definition", nargs="?", metavar="DEFINITION")
    proxy = sub.add_parser(
        "proxy",
        help="forward a UI's requests to an agent, judging and recording both directions",
        description="A reverse proxy between a UI and an AG-UI agent: every byte forwarded "
        "as it arrives, each finding printed as it happens, a summary on exit "
        "(needs 'aguikit[proxy]'); see docs/proxy.md.",
    )
    target = proxy.add_mutually_exclusive_group(required=True)
    target.add_argument("--upstream", metavar="URL", help="the agent's endpoint")
    target.add_argument(
        "--replay", metavar="FILE", help="serve a recording (HAR) as the agent instead"
    )
    proxy.add_argument("--record", metavar="DIR", help="write each thread as DIR/<thread>.har")
    proxy.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    proxy.add_argument("--port", type=int, default=8080, help="port to listen on (8080)")
    proxy.add_argument(
        "--no-validate", action="store_true", help="forward (and record) without judging"
    )
    proxy.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="upstream read timeout (none)"
    )
    faults = proxy.add_argument_group("replay timing and faults (with --replay)")
    faults.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="replay X times as fast as recorded; 0 sends without pauses (1)",
    )
    faults.add_argument(
        "--cut-after-events", type=int, metavar="N", help="drop the connection after N events"
    )
    faults.add_argument(
        "--cut-after-bytes", type=int, metavar="N", help="drop the connection after N bytes"
    )
    faults.add_argument("--stall", type=float, metavar="SECONDS", help="pause this long ...")
    faults.add_argument(
        "--stall-after", type=int, default=1, metavar="N", help="... after event N (1)"
    )
    faults.add_argument(
        "--buffer", action="store_true", help="deliver the whole answer in one write"
    )
    faults.add_argument("--duplicate", type=int, metavar="N", help="send event N twice")
    faults.add_argument("--drop", type=int, metavar="N", help="never send event N")
    faults.add_argument("--drop-keepalives", action="store_true", help="strip SSE comment lines")
    doctor = sub.add_parser(
        "doctor",
        help="run one request through your infrastructure and say what it does to the stream",
        description="POST one run request to URL (through your proxies and load balancers) "
        "and report buffering, stripped keep-alives, idle timeouts, compression, the content "
        "type and HTTP/1.0, each with its fix; exit 0 clean, 1 problems, 2 unreachable.",
    )
    doctor.add_argument("url", metavar="URL")
    endpoint_args(doctor)
    return parser


def _run_proxy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        err.write("aguikit: the proxy needs uvicorn: pip install 'aguikit[proxy]'\n")
        return EXIT_UNREADABLE
    from .proxy import ProxyApp, serve

    if args.replay is not None:
        from .replay import Faults, ReplayApp

        faults = Faults(
            speed=args.speed,
            cut_after_events=args.cut_after_events,
            cut_after_bytes=args.cut_after_bytes,
            stall=args.stall,
            stall_after=args.stall_after,
            buffer=args.buffer,
            duplicate=args.duplicate,
            drop=args.drop,
            drop_keepalives=args.drop_keepalives,
        )
        try:
            replay = ReplayApp.open(Path(args.replay), faults)
        except (AguiError, ValueError) as unusable:
            err.write(f"aguikit: cannot replay {args.replay}: {unusable}\n")
            return EXIT_UNREADABLE
        serve(replay, host=args.host, port=args.port, out=out)
        return EXIT_OK
    app = ProxyApp(
        args.upstream,
        out=out,
        record=Path(args.record) if args.record else None,
        validate=not args.no_validate,
        timeout=args.timeout,
    )
    serve(app, host=args.host, port=args.port, out=out)  # the app prints its summary
    return EXIT_OK


def _run_doctor(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .doctor import diagnose

    config = _config(args)
    diagnosis = diagnose(args.url, config)
    out.write(diagnosis.render() + "\n")
    return diagnosis.exit_code


def _tune_collector() -> None:
    """
    Collect cycles rarely while a stream is read: an application's choice, not the
    library's.  Events and changes are freed by reference counting as soon as they are
    reported; the collector only re-scans the growing conversation (and the modules loaded
    at start-up, which ``freeze`` sets aside) every few hundred allocations, a cost that
    grows with the stream for nothing.
    """
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def main(argv: list[str] | None = None) -> int:
    """
    Run the ``aguikit`` command line.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when ``None``.

    Returns:
        The exit code: 0 clean, 1 problems found, 2 the input could not be read (the worst
        over every source checked).
    """
    args = _parser().parse_args(argv)
    if args.command in ("check", "replay", "demo", "view"):
        _tune_collector()
    out, err = sys.stdout, sys.stderr
    for stream in (out, err):
        # Hostile input can carry lone surrogates ("\ud800" is valid JSON); a report quoting
        # one must not die encoding it.  Escaped, it stays readable, and inside the JSON
        # report it is the very escape the producer sent.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError, TypeError):
                reconfigure(errors="backslashreplace")
    try:
        if args.command == "rules":
            return _run_rules(args.rule, args.markdown, args.coverage, out, err)
        if args.command == "schema":
            return _run_schema(args.definition, out, err)
        if args.command == "demo":
            return _run_demo(out, err)
        if args.command == "check":
            return _run_check(args, out, err)
        if args.command == "proxy":
            return _run_proxy(args, out, err)
        if args.command == "doctor":
            return _run_doctor(args, out, err)
        if args.command == "view":
            return _run_view(args, out, err)
        config = _config(args)
        source = "<stdin>" if args.source == "-" else args.source
        if args.command == "convert":
            return _run_convert(source, open_events(args.source, config), args.to, args.output, err)
        return _run_replay(
            source, open_events(args.source, config), out, err, no_color=args.no_color
        )
    except Unreadable as exc:
        err.write(f"aguikit: {exc}\n")
        return EXIT_UNREADABLE
    except TransportError as exc:
        err.write(f"aguikit: {exc}\n")
        return EXIT_UNREADABLE
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK
    except KeyboardInterrupt:
        err.write("aguikit: interrupted\n")
        return 130
