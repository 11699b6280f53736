"""
The ``aguikit`` command: check, replay and explore AG-UI streams from a terminal.

Someone debugging an agent has a recording (an ``.sse`` capture, a ``.jsonl`` log) or a
live endpoint, and wants two answers fast: *is this stream correct?* and *what
conversation does it produce?*  ``aguikit check`` answers the first - every schema
violation, the first ordering error, every patch that does not apply, one line each with
the rule id or schema keyword, the event index and type - and exits 0, 1 or 2 so CI can
gate on it.  ``aguikit replay`` answers the second.  ``aguikit demo`` shows both on a
bundled stream, ``aguikit rules`` and ``aguikit schema`` print the reference material.

This module is a thin shell on the top floor: reading sources, printing and exit codes
live here; every judgement is the library's.  Each event goes through one
:class:`aguikit.Session`, which validates it once (collecting the strict schema issues it
finds on the way) and verifies and applies it; a live endpoint is fetched through the same
HTTP path as :class:`aguikit.client.AgentClient`.  Input is
streamed - memory is bounded by the materialised conversation, never by the file size -
and plain text is printed, with ANSI colour only when standard output is a terminal.

Deliberately absent: watching a live agent over several runs, and rich/TUI rendering
(no dependency beyond the library's own).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import IO, Any, Final, TextIO

import attrs

from .catalogue import RULES_BY_SYMBOL, find_rule, suggest_rule
from .errors import (
    AguiError,
    DecodeError,
    PatchError,
    ProtocolError,
    SchemaValidationError,
    TransportError,
    UnknownEventTypeError,
    WireFormatError,
)
from .reference import render_markdown, render_rule, render_text
from .session import Session
from .transport.jsonl import iter_jsonl
from .transport.sse import iter_events
from .validate import is_valid, iter_schema_errors
from .wire import to_wire

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_UNREADABLE: Final = 2

_BLOCK: Final = 64 * 1024
_SSE_SUFFIXES: Final = frozenset({".sse", ".txt", ".eventstream"})
_JSONL_SUFFIXES: Final = frozenset({".jsonl", ".ndjson", ".json"})
_PATCH_WARNINGS: Final = frozenset({"patch-failed"})
"""Session warnings that mean a patch did not apply: problems for ``check``, not warnings."""


class _Unreadable(Exception):
    """The input could not be opened or fetched at all (exit 2)."""


# --- output -----------------------------------------------------------------------------


@attrs.define
class _Style:
    """ANSI colour when the stream is a terminal (and ``NO_COLOR`` is unset), else none."""

    enabled: bool

    @classmethod
    def for_stream(cls, stream: TextIO) -> _Style:
        isatty = getattr(stream, "isatty", None)
        tty = bool(isatty and isatty())
        return cls(tty and "NO_COLOR" not in os.environ)

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


# --- reading sources --------------------------------------------------------------------


def _blocks(fp: IO[bytes]) -> Iterator[bytes]:
    while block := fp.read(_BLOCK):
        yield block


def _sniff(first: bytes) -> str:
    text = first.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "jsonl" if text[:1] in (b"{", b"[") else "sse"


def _with_first(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _events_from_bytes(
    chunks: Iterator[bytes], kind: str | None, source: str
) -> Iterator[dict[str, Any]]:
    if kind is None:
        first = next(chunks, b"")
        kind = _sniff(first)
        chunks = _with_first(first, chunks)
    if kind == "jsonl":
        return iter_jsonl(chunks, source=source)
    return iter_events(chunks, source=source)


def _minimal_input() -> dict[str, Any]:
    return {
        "threadId": f"aguikit-check-{uuid.uuid4().hex[:12]}",
        "runId": f"run-{uuid.uuid4().hex[:12]}",
        "messages": [],
    }


def _http_events(url: str, input_path: str | None) -> Iterator[dict[str, Any]]:
    # The HTTP path is loaded only for a URL: reading a file should not pay for httpx.
    import httpx

    from .client import prepare_input
    from .transport.http import post_stream

    try:
        raw = json.loads(Path(input_path).read_text("utf-8")) if input_path else _minimal_input()
    except (OSError, ValueError) as exc:
        raise _Unreadable(f"cannot read --input {input_path}: {exc}") from None
    if not isinstance(raw, dict):
        raise _Unreadable(f"--input {input_path} must hold a JSON object (a RunAgentInput)")
    try:
        body = prepare_input(raw)
    except AguiError as exc:
        raise _Unreadable(f"--input is not a valid RunAgentInput: {exc}") from None
    timeout = httpx.Timeout(60.0, connect=10.0)
    yield from iter_events(post_stream(url, body, timeout=timeout), source=url)


def _open_events(spec: str, input_path: str | None) -> tuple[str, Iterator[dict[str, Any]]]:
    """The display name of ``spec`` and an iterator of its raw event objects."""
    if spec.startswith(("http://", "https://")):
        return spec, _http_events(spec, input_path)
    if spec == "-":
        stdin = sys.stdin.buffer
        return "<stdin>", _events_from_bytes(_blocks(stdin), None, "<stdin>")
    path = Path(spec)
    try:
        fp = path.open("rb")
    except OSError as exc:
        raise _Unreadable(f"cannot open {spec}: {exc.strerror or exc}") from None
    suffix = path.suffix.lower()
    kind = "sse" if suffix in _SSE_SUFFIXES else "jsonl" if suffix in _JSONL_SUFFIXES else None

    def events() -> Iterator[dict[str, Any]]:
        with fp:
            yield from _events_from_bytes(_blocks(fp), kind, spec)

    return spec, events()


def _demo_bytes() -> bytes:
    return resources.files("aguikit").joinpath("examples/demo.sse").read_bytes()


# --- check ------------------------------------------------------------------------------


@attrs.define
class _Problem:
    kind: str  # schema | protocol | patch | decode | warning
    code: str
    message: str
    event_index: int | None = None
    event_type: str | None = None
    pointer: str | None = None
    rule: str | None = None
    """The catalogue id (``aguikit rules RULE``); for a schema issue ``code`` is the keyword."""

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}

    def line(self, source: str, style: _Style) -> str:
        where = f"event {self.event_index}" if self.event_index is not None else "stream"
        etype = f" {self.event_type}" if self.event_type else ""
        pointer = f" at {self.pointer}" if self.pointer else ""
        label = style.yellow("warning") if self.kind == "warning" else style.red("error")
        return f"{source}: {where}{etype}: {label} {style.bold(self.code)}{pointer}: {self.message}"


@attrs.define
class _Report:
    source: str
    events: int = 0
    counts: dict[str, int] = attrs.Factory(
        lambda: {"schema": 0, "protocol": 0, "patch": 0, "decode": 0, "warning": 0}
    )
    verification_stopped_at: int | None = None
    problems: list[_Problem] = attrs.Factory(list)

    def errors(self) -> int:
        return sum(n for kind, n in self.counts.items() if kind != "warning")


def _event_type(data: Any) -> str | None:
    value = data.get("type") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _check(
    source: str,
    events: Iterable[dict[str, Any]],
    emit: Callable[[_Problem], None],
    progress: _Progress,
    into: Session | None = None,
) -> _Report:
    """
    Validate, verify and apply ``events``, reporting each problem through ``emit``.

    ``into`` is the session to feed (created with ``collect_issues=True``), for a caller
    that wants the conversation it folds as well as the verdict (:mod:`aguikit.testing`).

    Every event is validated once, by the session, which records the strict schema issues
    it finds (all of them) before its receiver repairs what it can.  The session verifies
    and applies the events until its first fatal error (an ordering rule, or a field too
    malformed to read); from there on events are only schema-checked, because a verifier
    that has seen an impossible event cannot judge the ones after it.  Warnings caused by
    an event that already has schema errors (a stripped undeclared member) are not
    repeated.
    """
    report = _Report(source)
    session = (
        into
        if into is not None
        else Session(verify=True, validate=True, keep_delivered=False, collect_issues=True)
    )
    verifying = True
    invalid = -1  # the index of the current event when the strict schema rejected it

    def add(problem: _Problem) -> None:
        report.counts[problem.kind] += 1
        emit(problem)

    def stop(at: int | None) -> None:
        nonlocal verifying
        verifying = False
        report.verification_stopped_at = at

    def schema_issues(issues: Iterable[Any], index: int, etype: str | None) -> None:
        nonlocal invalid
        for issue in issues:
            invalid = index
            rule = "AGUI-S002" if issue.pointer == "/type" and issue.keyword == "enum" else None
            add(
                _Problem(
                    "schema",
                    issue.keyword,
                    issue.message,
                    index,
                    etype,
                    issue.pointer or "/",
                    rule or "AGUI-S001",
                )
            )

    def drain_warnings(etype: str | None, index: int | None) -> None:
        # Only this feed's warnings: reading them costs nothing however many came before.
        for warning in session.last_warnings:
            at = warning.event_index
            if at is not None and at == invalid:
                continue
            kind = "patch" if warning.code in _PATCH_WARNINGS else "warning"
            rule = RULES_BY_SYMBOL[warning.code].id
            problem = _Problem(
                kind, warning.code, warning.message, at, etype if at == index else None
            )
            problem.rule = rule
            add(problem)

    index = -1
    try:
        for index, data in enumerate(events):
            report.events = index + 1
            if progress.enabled:
                progress.tick(report.events)
            if not verifying:
                # Schema-only from here: the fast verdict, the explanation only on failure.
                if not is_valid(data):
                    schema_issues(iter_schema_errors(data), index, _event_type(data))
                continue
            failure: AguiError | None = None
            try:
                session.feed(data)
            except AguiError as exc:
                failure = exc
            if failure is None and not session.last_issues and not session.last_warnings:
                continue  # the common case: a clean event, nothing to report
            etype = _event_type(data)
            schema_issues(session.last_issues, index, etype)
            if isinstance(failure, ProtocolError):
                add(
                    _Problem(
                        "protocol",
                        failure.rule or "protocol",
                        failure.message,
                        index,
                        failure.event_type or etype,
                        rule=failure.rule,
                    )
                )
                stop(index)
            elif isinstance(failure, PatchError):  # only with patch_errors="raise"
                add(
                    _Problem(
                        "patch",
                        "patch-failed",
                        str(failure),
                        index,
                        etype,
                        failure.pointer,
                        failure.rule,
                    )
                )
            elif isinstance(
                failure, SchemaValidationError | UnknownEventTypeError | WireFormatError
            ):
                if index != invalid:  # the strict issues said nothing: say why here
                    add(
                        _Problem(
                            "schema",
                            type(failure).__name__,
                            str(failure),
                            index,
                            etype,
                            rule=failure.rule,
                        )
                    )
                stop(index)
            elif failure is not None:
                raise failure
            drain_warnings(etype, index)
    except DecodeError as exc:
        add(_Problem("decode", exc.rule or "decode", str(exc), index + 1, rule=exc.rule))
        stop(index + 1)
    if verifying:
        try:
            session.finish()
        except ProtocolError as exc:
            add(
                _Problem(
                    "protocol",
                    exc.rule or "protocol",
                    exc.message,
                    exc.event_index,
                    exc.event_type,
                    rule=exc.rule,
                )
            )
        drain_warnings(None, None)
    progress.done()
    return report


def _summary(report: _Report, style: _Style, strict: bool) -> str:
    c = report.counts
    parts = [
        f"{report.events} events",
        f"{c['schema']} schema errors",
        f"{c['protocol']} protocol errors",
        f"{c['patch']} patch errors",
        f"{c['decode']} decode errors",
        f"{c['warning']} warnings",
    ]
    failed = report.errors() > 0 or (strict and c["warning"] > 0)
    verdict = style.red("FAILED") if failed else style.green("OK")
    text = f"{report.source}: {verdict}: " + ", ".join(parts)
    if report.verification_stopped_at is not None:
        text += (
            f"\n{report.source}: verification stopped at event "
            f"{report.verification_stopped_at}; later events were only schema-checked"
        )
    return text


def _exit_code(report: _Report, strict: bool) -> int:
    if report.errors() or (strict and report.counts["warning"]):
        return EXIT_PROBLEMS
    return EXIT_OK


def _run_check(
    source: str,
    events: Iterator[dict[str, Any]],
    *,
    fmt: str,
    strict: bool,
    out: TextIO,
    err: TextIO,
) -> int:
    style = _Style.for_stream(out)
    progress = _Progress(err, fmt == "text" and err.isatty())
    collected: list[_Problem] = []

    def emit(problem: _Problem) -> None:
        if fmt == "json":
            collected.append(problem)
        else:
            progress.done()
            out.write(problem.line(source, style) + "\n")

    report = _check(source, events, emit, progress)
    code = _exit_code(report, strict)
    if fmt == "json":
        document = {
            "source": source,
            "ok": code == EXIT_OK,
            "events": report.events,
            "counts": report.counts,
            "verification_stopped_at": report.verification_stopped_at,
            "problems": [p.as_json() for p in collected],
        }
        out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(_summary(report, style, strict) + "\n")
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


def _run_replay(source: str, events: Iterator[dict[str, Any]], out: TextIO, err: TextIO) -> int:
    style = _Style.for_stream(out)
    session = Session(verify=True, validate=True, keep_delivered=False)
    code = EXIT_OK
    try:
        for data in events:
            session.feed(data)
        session.finish()
    except AguiError as exc:
        err.write(f"{source}: stopped: {exc}\n")
        code = EXIT_PROBLEMS
    out.write(_render_conversation(session, style) + "\n")
    return code


# --- schema / rules ---------------------------------------------------------------------


def _run_schema(definition: str | None, out: TextIO, err: TextIO) -> int:
    text = resources.files("aguikit._generated").joinpath("schema.json").read_text("utf-8")
    if definition is None:
        out.write(text if text.endswith("\n") else text + "\n")
        return EXIT_OK
    defs: dict[str, Any] = json.loads(text).get("$defs", {})
    if definition not in defs:
        close = difflib.get_close_matches(definition, list(defs), n=5, cutoff=0.5)
        lowered = {name.lower(): name for name in defs}
        if definition.lower() in lowered and lowered[definition.lower()] not in close:
            close.insert(0, lowered[definition.lower()])
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        err.write(f"aguikit schema: no definition {definition!r}{hint}\n")
        return EXIT_UNREADABLE
    out.write(json.dumps(defs[definition], indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


def _run_rules(key: str | None, markdown: bool, out: TextIO, err: TextIO) -> int:
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
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def source_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "source",
            metavar="SOURCE",
            help="a .sse or .jsonl file, - for stdin, or an http(s):// agent URL",
        )
        p.add_argument(
            "--input",
            metavar="FILE",
            help="RunAgentInput JSON to POST to a URL source (default: a minimal one)",
        )

    check = sub.add_parser(
        "check",
        help="validate, verify and apply a stream; exit 0 clean, 1 problems, 2 unreadable",
    )
    source_args(check)
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument(
        "--strict", action="store_true", help="treat receiver warnings as problems (exit 1)"
    )
    replay = sub.add_parser("replay", help="print the conversation a stream materialises")
    source_args(replay)
    sub.add_parser("demo", help="check and replay the bundled example stream")
    rules = sub.add_parser("rules", help="print the rule catalogue, or one rule (by id or symbol)")
    rules.add_argument("rule", nargs="?", metavar="ID", help="AGUI-V014, V014 or patch-failed")
    rules.add_argument(
        "--markdown", action="store_true", help="the whole reference as docs/rules.md has it"
    )
    schema = sub.add_parser("schema", help="print the bundled JSON Schema, or one definition")
    schema.add_argument("definition", nargs="?", metavar="DEFINITION")
    return parser


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
        The exit code: 0 clean, 1 problems found, 2 the input could not be read.
    """
    args = _parser().parse_args(argv)
    if args.command in ("check", "replay", "demo"):
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
            return _run_rules(args.rule, args.markdown, out, err)
        if args.command == "schema":
            return _run_schema(args.definition, out, err)
        if args.command == "demo":
            data = _demo_bytes()
            name = "demo.sse"
            style = _Style.for_stream(out)
            out.write(style.bold(f"$ aguikit check {name}") + "\n")
            code = _run_check(
                name, iter_events([data], source=name), fmt="text", strict=True, out=out, err=err
            )
            out.write("\n" + style.bold(f"$ aguikit replay {name}") + "\n")
            replay_code = _run_replay(name, iter_events([data], source=name), out, err)
            return max(code, replay_code)
        source, events = _open_events(args.source, args.input)
        if args.command == "check":
            return _run_check(source, events, fmt=args.format, strict=args.strict, out=out, err=err)
        return _run_replay(source, events, out, err)
    except _Unreadable as exc:
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
