"""
What ``aguikit check`` finds in one source: every violation, located, with its severity.

A CI gate has other needs than a consumer.  A consumer wants the first error, because
what follows an impossible event cannot be trusted; a producer's team wants *every*
violation in one run, each with the place to look (the line an editor shows, the SSE frame,
the byte), and wants to choose which rules fail the build.  So the checker runs a
:class:`~aguikit.session.Session` with ``recover=True`` (the failing input is treated as
not delivered, and the next one is judged as if it never came), marks the findings that
may only be consequences of an earlier error, adds the checks only a checker makes (rows
``AGUI-K…`` of the catalogue: a result for a call never started, a parent message nobody
sent, empty deltas, input that is not a stream at all, failed runs), and for a live
endpoint the timing rows ``AGUI-T004``-``T006``.

One numbering convention everywhere (``docs/check.md``): events, lines, frames and runs
count from 1, as an editor and a person do; byte offsets count from 0, as ``seek`` does.

What it leaves to others: judging events (the pipeline's stages do, through the session),
rendering (:mod:`aguikit.report`), and argument parsing (:mod:`aguikit.cli`).
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final, TypeAlias, TypeVar

import attrs

from ._generated.registry import EVENT_CLASSES
from .catalogue import RULES_BY_ID, RULES_BY_SYMBOL, Severity, render_message
from .errors import (
    AguiError,
    DecodeError,
    PatchError,
    ProtocolError,
    SchemaIssue,
    SchemaValidationError,
    TransportError,
    UnknownEventTypeError,
    WireFormatError,
)
from .jsonio import iter_documents, loads
from .limits import MAX_FRAME_BYTES, MAX_JSON_DEPTH, MAX_LINE_BYTES
from .rules import TABLE
from .session import Session
from .transport.jsonl import JSONLDecoder
from .transport.proto import looks_like_frames
from .transport.sse import SSEDecoder, frame_object

__all__ = [
    "BUFFER_EVENTS",
    "BUFFER_SILENCE_SECONDS",
    "DEFAULT_MAX_ERRORS",
    "FIRST_EVENT_SECONDS",
    "SILENT_GAP_SECONDS",
    "CheckConfig",
    "Finding",
    "RunSummary",
    "SourceReport",
    "StreamCheck",
    "Unreadable",
    "check_bytes",
    "check_events",
    "check_source",
    "expand_sources",
    "is_recording",
    "load_config",
    "open_events",
    "request_body",
]

_R = TypeVar("_R")

FIRST_EVENT_SECONDS: Final = 10.0
"""``AGUI-T004``: a live agent's first event later than this after the request."""
SILENT_GAP_SECONDS: Final = 15.0
"""``AGUI-T005``: no byte at all (not even a keep-alive comment) for longer than this."""
BUFFER_SILENCE_SECONDS: Final = 2.0
BUFFER_EVENTS: Final = 20
"""``AGUI-T006``: at least this many events in one read after this much silence."""
DEFAULT_MAX_ERRORS: Final = 100
"""Errors reported per source before the checker stops reading it (``--max-errors``)."""

STREAM_SUFFIXES: Final = {
    ".sse": "sse",
    ".eventstream": "sse",
    ".txt": "sse",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".pb": "proto",
    ".bin": "proto",
    ".proto-stream": "proto",
}
"""What a file's suffix says it holds; a directory is searched for these (``.txt`` aside).
Content outranks a suffix: length-prefixed protobuf frames are read as such under any name,
and a ``.pb`` file holding text is read as the text it holds."""

_BLOCK: Final = 64 * 1024
_SNIFF: Final = 8 * 1024
_ORDER: Final = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
_DELTA_EVENTS: Final = frozenset(
    {
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_ARGS",
        "REASONING_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_CONTENT",
    }
)
_PATCH_WARNINGS: Final = frozenset({"patch-failed"})
_TICK_MASK: Final = 1023
"""A progress callback hears of every 1,024th event: a display never needs more."""


_CHECK_FIELDS: Final = {
    "owner": "subagentRunId",
    "parent_owner": "subagentRunId",
    "run_id_agrees": "runId",
    "thread_id_agrees": "threadId",
    "thread_agrees_with_stream": "threadId",
    "interrupts_present": "outcome/interrupts",
    "interrupts_unique": "outcome/interrupts",
}
"""The member a verifier check reads, where it is not the row's key."""


def _wire_name(event_type: str, attribute: str) -> str:
    for field in attrs.fields(EVENT_CLASSES[event_type]):
        if field.name == attribute:
            return str(field.metadata.get("wire", attribute))
    return attribute


POINTERS: Final[Mapping[tuple[str, str], str]] = {
    (str(row.event), rule): "/"
    + (
        _CHECK_FIELDS[check]
        if check in _CHECK_FIELDS
        else _wire_name(str(row.event), row.key or "")
    )
    for row in TABLE
    for check, rule in row.rules.items()
    if check in _CHECK_FIELDS or (row.key and check in ("already_open", "not_open"))
}
"""The JSON pointer of the member a protocol finding is about, by (event type, rule)."""


class Unreadable(Exception):
    """A source could not be opened or fetched at all (exit 2); a sentence for stderr."""


Where: TypeAlias = tuple[int | None, int | None, int | None]
"""Where an event was in its source: ``(line, frame, byte_offset)``, 1-based line and frame,
0-based byte offset.  A plain tuple, built once per event: a named tuple costs ten times as
much to make, and a location is read only when there is something to report."""

_NOWHERE: Final[Where] = (None, None, None)


@attrs.frozen
class CheckConfig:
    """
    How ``aguikit check`` judges: which rules, how severe, when to fail.

    The same settings come from the command line and from ``[tool.aguikit.check]`` in
    ``pyproject.toml`` (:func:`load_config`), so a team writes them once for every run.

    Args:
        select: Only rules whose id or symbol starts with one of these (all when empty).
        ignore: Never rules whose id or symbol starts with one of these.
        fail_on: The least severity that fails the check.
        max_warnings: Fail when there are more warnings than this (``None``: no limit).
        max_errors: Stop reading a source after this many errors.
        fail_on_run_error: A run that ended in ``RUN_ERROR`` fails the check.
        severity: Per-rule severities replacing the catalogue's defaults, by id or symbol.
        first_event_seconds, silent_gap_seconds, buffer_silence_seconds, buffer_events:
            The live-endpoint thresholds of ``AGUI-T004``-``T006`` (``docs/check.md``).
    """

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fail_on: Severity = Severity.ERROR
    max_warnings: int | None = None
    max_errors: int = DEFAULT_MAX_ERRORS
    fail_on_run_error: bool = False
    severity: Mapping[str, Severity] = attrs.field(factory=dict)
    max_frame_bytes: int = MAX_FRAME_BYTES
    max_line_bytes: int = MAX_LINE_BYTES
    max_depth: int = MAX_JSON_DEPTH
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 60.0
    input_path: str | None = None
    first_event_seconds: float = FIRST_EVENT_SECONDS
    silent_gap_seconds: float = SILENT_GAP_SECONDS
    buffer_silence_seconds: float = BUFFER_SILENCE_SECONDS
    buffer_events: int = BUFFER_EVENTS

    def enabled(self, rule_id: str) -> bool:
        """Whether findings of ``rule_id`` are reported at all."""
        symbol = RULES_BY_ID[rule_id].symbol
        return (not self.select or _selects(self.select, rule_id, symbol)) and not _selects(
            self.ignore, rule_id, symbol
        )

    def severity_of(self, rule_id: str) -> Severity:
        """The rule's severity: the configured one, else the catalogue's default."""
        rule = RULES_BY_ID[rule_id]
        return self.severity.get(rule.id) or self.severity.get(rule.symbol) or rule.severity


def _selects(prefixes: tuple[str, ...], rule_id: str, symbol: str) -> bool:
    """Whether any of ``prefixes`` (ids, id prefixes or symbol prefixes) names the rule."""
    upper = rule_id.upper()
    return any(upper.startswith(_full_id(p)) or symbol.startswith(p.lower()) for p in prefixes)


def _full_id(prefix: str) -> str:
    text = prefix.strip().upper()
    return text if text.startswith("AGUI-") or not text[:1].isalpha() else f"AGUI-{text}"


@attrs.define
class Finding:
    """
    One thing ``aguikit check`` reports: a catalogue rule broken at one place.

    ``event``, ``line``, ``frame`` and ``run`` count from 1; ``byte_offset`` from 0.
    ``code`` is what the text format prints in bold: the schema keyword for a schema
    issue, else the rule id.  ``consequence_of`` names the event of an earlier error this
    one may only be a consequence of.  ``count`` is how many identical findings (same rule,
    code, pointer and message) this one stands for; ``last_event`` the last of them.
    """

    rule: str
    severity: Severity
    kind: str
    code: str
    message: str
    event: int | None = None
    event_type: str | None = None
    pointer: str | None = None
    line: int | None = None
    frame: int | None = None
    byte_offset: int | None = None
    run: int | None = None
    consequence_of: int | None = None
    count: int = 1
    last_event: int | None = None
    exchange: int | None = None
    """The 1-based exchange of a conversation (a HAR file, a recording) the finding is in;
    ``None`` for a plain stream.  ``event``, ``line``, ``frame`` and ``byte_offset`` then
    count within that exchange's response body, and a request's finding has no event."""

    @property
    def symbol(self) -> str:
        """The rule's readable name (``text-message-not-open``)."""
        return RULES_BY_ID[self.rule].symbol

    def as_json(self) -> dict[str, Any]:
        """The finding as the JSON report writes it (``docs/check.md``): nulls left out."""
        out: dict[str, Any] = {"rule": self.rule, "symbol": self.symbol}
        out.update((k, v) for k, v in attrs.asdict(self).items() if v is not None)
        out["severity"] = self.severity.value
        return out


@attrs.frozen
class RunSummary:
    """One run of a source and how it ended (from :attr:`aguikit.Session.runs`)."""

    number: int
    run_id: str | None
    thread_id: str | None
    status: str
    first_event: int | None
    last_event: int | None
    message: str | None = None
    code: str | None = None
    interrupts: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The run as the JSON report writes it."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None and v != ()}


_KINDS: Final = ("schema", "protocol", "patch", "decode", "transport", "warning", "info")


@attrs.define
class SourceReport:
    """Everything ``aguikit check`` found in one source, and how it read it."""

    source: str
    kind: str = "unknown"
    events: int = 0
    findings: list[Finding] = attrs.Factory(list)
    runs: list[RunSummary] = attrs.Factory(list)
    unreadable: str | None = None
    stopped_at: int | None = None
    """The event after which the checker stopped, having reached ``max_errors``."""
    _groups: dict[tuple[Any, ...], Finding] = attrs.Factory(dict)

    def counts(self) -> dict[str, int]:
        """Findings per kind, each grouped finding counted as many times as it stands for."""
        counts = dict.fromkeys(_KINDS, 0)
        for finding in self.findings:
            counts[finding.kind] += finding.count
        return counts

    def by_severity(self, severity: Severity) -> int:
        """How many findings of exactly this severity."""
        return sum(f.count for f in self.findings if f.severity is severity)

    def failed_runs(self) -> list[RunSummary]:
        """The runs that ended in ``RUN_ERROR``."""
        return [run for run in self.runs if run.status == "error"]

    def exit_code(self, config: CheckConfig) -> int:
        """0 clean, 1 a finding fails the check under ``config``, 2 unreadable."""
        if self.unreadable is not None:
            return 2
        floor = _ORDER[config.fail_on]
        if any(_ORDER[f.severity] >= floor for f in self.findings):
            return 1
        if config.max_warnings is not None and self.by_severity(Severity.WARNING) > (
            config.max_warnings
        ):
            return 1
        if config.fail_on_run_error and self.failed_runs():
            return 1
        return 0

    def add(self, finding: Finding) -> Finding:
        """Record ``finding``, folded into an identical earlier one (same rule, code,
        pointer and message) so a vendor field on every event is one line, not 2,000."""
        # A conversation's exchanges stay apart: each is a request someone sent.
        key = (finding.rule, finding.code, finding.pointer, finding.message, finding.exchange)
        earlier = self._groups.get(key)
        if earlier is not None:
            earlier.count += 1
            earlier.last_event = finding.event
            return earlier
        self._groups[key] = finding
        self.findings.append(finding)
        return finding


Sink = Callable[..., Finding | None]


class _Stop(Exception):
    """``max_errors`` reached: stop reading the source."""


# --- configuration ------------------------------------------------------------------------


def load_config(start: Path | None = None) -> dict[str, Any]:
    """
    The ``[tool.aguikit.check]`` table of the nearest ``pyproject.toml`` at or above
    ``start`` (the working directory), or ``{}``.

    Keys are the long options without dashes' prefix: ``select``, ``ignore``, ``fail-on``,
    ``max-warnings``, ``max-errors``, ``fail-on-run-error``, ``severity`` (a table of id or
    symbol to severity), ``max-frame-bytes``, ``max-line-bytes``, ``max-depth``,
    ``timeout``.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            import tomllib  # only when there is a file to read

            try:
                data = tomllib.loads(candidate.read_text("utf-8"))
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise Unreadable(f"cannot read {candidate}: {exc}") from None
            table = data.get("tool", {}).get("aguikit", {}).get("check", {})
            return dict(table) if isinstance(table, dict) else {}
    return {}


# --- sources ------------------------------------------------------------------------------

_RECORDING_HEAD: Final = re.compile(rb'^\s*\{\s*"log"\s*:')


def is_recording(spec: str, head: bytes | None = None) -> bool:
    """
    Whether ``spec`` names a HAR file, a conversation for :mod:`aguikit.conversation`: by
    its ``.har`` suffix, or a JSON object whose first member is ``log`` (``head``: its
    first bytes, read here when not given).
    """
    if spec.lower().endswith(".har"):
        return True
    if spec == "-" or spec.startswith(("http://", "https://")):
        return False
    if head is None:
        try:
            with Path(spec).open("rb") as fp:
                head = fp.read(256)
        except OSError:
            return False
    return bool(_RECORDING_HEAD.match(head.removeprefix(b"\xef\xbb\xbf")))


def expand_sources(specs: Iterable[str]) -> list[str]:
    """
    Every source the arguments name, in order, without repeats: a path, ``-``, a URL, a
    glob (``captures/*.sse``) or a directory (searched recursively for stream files).

    Raises:
        Unreadable: A glob matched nothing or a directory held no stream file.
    """
    out: list[str] = []
    for spec in specs:
        if spec == "-" or spec.startswith(("http://", "https://")):
            found = [spec]
        elif os.path.isdir(spec):
            found = sorted(
                str(path)
                for path in Path(spec).rglob("*")
                if path.is_file()
                # .har: a conversation (aguikit proxy --record writes a directory of them)
                and (path.suffix.lower() in STREAM_SUFFIXES or path.suffix.lower() == ".har")
                and path.suffix.lower() != ".txt"
            )
            if not found:
                raise Unreadable(f"{spec}: no .sse, .jsonl, .ndjson, .json or .har file in it")
        elif glob.has_magic(spec):
            found = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
            if not found:
                raise Unreadable(f"{spec}: no file matches")
        else:
            found = [spec]
        out.extend(s for s in found if s not in out)
    return out


def _blocks(fp: IO[bytes]) -> Iterator[bytes]:
    while block := fp.read(_BLOCK):
        yield block


def _looks_binary(first: bytes) -> str | None:
    """Why ``first`` (the start of a source) is not text, or ``None`` when it may be."""
    zero = first.find(b"\x00")
    if zero >= 0:
        return f"a NUL byte at byte {zero}"
    try:
        first.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(first) - 4:  # not merely a character cut by the block's end
            return f"byte {exc.start} is not UTF-8 ({exc.reason})"
    return None


def _first_line_is_json(first: bytes) -> bool:
    line = first.split(b"\n", 1)[0].strip().lstrip(b"\xef\xbb\xbf")
    if b"\n" not in first and len(first) >= _SNIFF:
        return True  # a longer first line: let the JSONL reader judge it
    try:
        loads(line)
    except AguiError:
        return False
    return True


def _kind_of(spec: str, first: bytes) -> str:
    text = first.lstrip(b"\xef\xbb\xbf \t\r\n")
    suffix_kind = STREAM_SUFFIXES.get(Path(spec).suffix.lower()) if spec != "-" else None
    if suffix_kind == "proto":
        suffix_kind = None  # not frames (the caller looked first): the text decides
    document = text[:1] == b"[" or (text[:1] == b"{" and not _first_line_is_json(text))
    if document and suffix_kind != "sse":
        return "json"
    if suffix_kind is not None:
        return suffix_kind
    return "jsonl" if text[:1] in (b"{", b"[") else "sse"


class _Reader:
    """Turns one source into ``(event dict, Where)`` pairs, reporting input-shape findings."""

    def __init__(self, spec: str, config: CheckConfig, report: SourceReport, add: Sink) -> None:
        self.spec = spec
        self.config = config
        self.report = report
        self.add = add

    def events(self) -> Iterator[tuple[dict[str, Any], Where]]:
        spec = self.spec
        if spec.startswith(("http://", "https://")):
            self.report.kind = "http"
            yield from self._http()
            return
        if spec == "-":
            yield from self._bytes(_blocks(sys.stdin.buffer))
            return
        try:
            with Path(spec).open("rb") as fp:
                yield from self._bytes(_blocks(fp))
        except OSError as exc:
            raise Unreadable(f"cannot open {spec}: {exc.strerror or exc}") from None

    def _bytes(
        self, chunks: Iterator[bytes], kind: str | None = None
    ) -> Iterator[tuple[dict[str, Any], Where]]:
        if kind is not None:  # the caller knows (a response's content type): no sniffing
            self.report.kind = kind
            reader = {"proto": self._proto, "jsonl": self._jsonl, "sse": self._sse}[kind]
            yield from reader(chunks)
            return
        first = b""
        for block in chunks:
            first += block
            if len(first) >= _SNIFF:
                break
        # Content decides: a length prefix (a first byte of 0) is never how SSE or JSONL
        # text starts, so a protobuf recording reads as one whatever its name.
        empty_pb = not first and STREAM_SUFFIXES.get(Path(self.spec).suffix.lower()) == "proto"
        if looks_like_frames(first) or empty_pb:
            self.report.kind = "proto"
            yield from self._proto(_chain(first, chunks))
            return
        why = _looks_binary(first[:_SNIFF])
        if why is not None:
            self.add("AGUI-K006", "decode", render_message("AGUI-K006", detail=why))
            self.report.kind = "binary"
            self.report.unreadable = f"{self.report.source}: not text: {why}"
            return
        kind = self.report.kind = _kind_of(self.spec, first)
        rest = _chain(first, chunks)
        if kind == "json":
            yield from self._document(rest)
        elif kind == "jsonl":
            yield from self._jsonl(rest)
        else:
            yield from self._sse(rest)

    def _proto(self, chunks: Iterator[bytes]) -> Iterator[tuple[dict[str, Any], Where]]:
        # Loaded only for a protobuf source: reading text should not pay for protobuf.
        from .proto import decode_message
        from .transport.proto import iter_frames

        source = self.report.source
        for payload, frame, offset in iter_frames(chunks, source=source):
            wire = decode_message(payload, source=source, frame=frame, byte_offset=offset)
            yield wire, (None, frame, offset)

    def _jsonl(self, chunks: Iterator[bytes]) -> Iterator[tuple[dict[str, Any], Where]]:
        config = self.config
        decoder = JSONLDecoder(
            source=self.report.source,
            max_line_bytes=config.max_line_bytes,
            max_depth=config.max_depth,
        )
        for chunk in itertools.chain(chunks, [None]):
            objects = decoder.feed(chunk) if chunk is not None else decoder.close()
            for obj, (line, offset) in zip(objects, decoder.last_positions, strict=True):
                yield obj, (line, None, offset)

    def _sse(
        self,
        chunks: Iterable[bytes],
        decoder: SSEDecoder | None = None,
        positions: list[Where] | None = None,
    ) -> Iterator[tuple[dict[str, Any], Where]]:
        config = self.config
        decoder = decoder or SSEDecoder(
            source=self.report.source, max_frame_bytes=config.max_frame_bytes
        )
        try:
            for chunk in itertools.chain(chunks, [None]):
                frames = decoder.feed(chunk) if chunk is not None else decoder.close()
                for frame in frames:
                    obj = frame_object(frame, source=self.report.source, max_depth=config.max_depth)
                    where = (frame.line, frame.number, frame.byte_offset)
                    if positions is not None:
                        positions.append(where)
                    yield obj, where
        except DecodeError as exc:
            self._json_lines(decoder)  # the likelier cause of a cut frame: say it first
            if exc.rule == "AGUI-D004" and decoder.json_lines and not decoder.frames_decoded:
                return  # JSON lines and no frame at all: "truncated" would only be noise
            raise
        self._json_lines(decoder)

    def _json_lines(self, decoder: SSEDecoder) -> None:
        for line, offset in decoder.json_lines:
            self.add(
                "AGUI-K004",
                "decode",
                render_message("AGUI-K004", line=line),
                where=(line, None, offset),
            )

    def _document(self, chunks: Iterator[bytes]) -> Iterator[tuple[dict[str, Any], Where]]:
        config = self.config
        data = bytearray()
        limit = max(config.max_line_bytes, config.max_frame_bytes)
        for chunk in chunks:
            data += chunk
            if len(data) > limit:
                raise DecodeError(
                    f"a JSON document of at least {len(data)} bytes (limit {limit}; raise "
                    "--max-line-bytes)",
                    rule="AGUI-L002",
                    source=self.report.source,
                    byte_offset=0,
                )
        text = loads_text(bytes(data), self.report.source)
        values = list(iter_documents(text, max_depth=config.max_depth, source=self.report.source))
        array = text.lstrip("\ufeff \t\r\n").startswith("[")
        what = (
            "a JSON array"
            if array
            else ("a JSON document" if len(values) == 1 else "JSON documents")
        )
        self.add("AGUI-K005", "info", render_message("AGUI-K005", what=what, count=len(values)))
        line, seen, offset = 1, 0, 0
        for value, position in values:
            line += text.count("\n", seen, position)
            offset += len(text[seen:position].encode("utf-8", "surrogatepass"))
            seen = position
            if not isinstance(value, dict):
                raise DecodeError(
                    f"expected a JSON object, got {type(value).__name__}",
                    rule="AGUI-D003",
                    source=self.report.source,
                    line=line,
                    byte_offset=offset,
                )
            yield value, (line, None, offset)

    def _http(self) -> Iterator[tuple[dict[str, Any], Where]]:
        # The HTTP path is loaded only for a URL: reading a file should not pay for httpx.
        import httpx

        from .transport.http import post_stream

        config = self.config
        body = request_body(config)
        timeout = httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0))
        decoder = SSEDecoder(source=self.spec, max_frame_bytes=config.max_frame_bytes)
        arrived: list[Where] = []  # where each event of the latest read was

        def answered(status: int, headers: Mapping[str, str]) -> None:
            content_type = headers.get("content-type")
            media = (content_type or "").split(";", 1)[0].strip().lower()
            if 200 <= status < 300 and media != "text/event-stream":
                # Reported, then the body is read as SSE anyway: what it holds is the rest
                # of the diagnosis (often a JSON error, sometimes a stream mislabelled).
                self.add(
                    "AGUI-T003",
                    "transport",
                    render_message("AGUI-T003", url=self.spec, content_type=content_type),
                )

        yield from self._sse(
            self._timed(
                post_stream(
                    self.spec,
                    body,
                    headers=dict(config.headers),
                    timeout=timeout,
                    on_response=answered,
                    require_event_stream=False,
                ),
                decoder,
                arrived,
            ),
            decoder,
            arrived,
        )

    def _timed(
        self, chunks: Iterator[bytes], decoder: SSEDecoder, positions: list[Where]
    ) -> Iterator[bytes]:
        """
        Pass ``chunks`` on, reporting a slow first event, silences and buffering, each at
        the first event of the read it is about (``positions``, which :meth:`_sse` fills
        with the place of every event of the chunk while the checker judges them).
        """
        config = self.config
        start = last = time.monotonic()
        first_seen = False
        for chunk in chunks:
            now = time.monotonic()
            silence, last = now - last, now
            before = decoder.frames_decoded
            positions.clear()
            yield chunk
            arrived = decoder.frames_decoded - before
            event = before + 1
            where = positions[0] if positions else _NOWHERE
            if arrived and not first_seen:
                first_seen = True
                if now - start > config.first_event_seconds:
                    self.add(
                        "AGUI-T004",
                        "warning",
                        render_message(
                            "AGUI-T004", seconds=now - start, limit=config.first_event_seconds
                        ),
                        event=event,
                        where=where,
                    )
            elif silence > config.silent_gap_seconds:
                self.add(
                    "AGUI-T005",
                    "warning",
                    render_message(
                        "AGUI-T005", seconds=silence, event=event, limit=config.silent_gap_seconds
                    ),
                    event=event,
                    where=where,
                )
            if arrived >= config.buffer_events and silence >= config.buffer_silence_seconds:
                self.add(
                    "AGUI-T006",
                    "warning",
                    render_message("AGUI-T006", count=arrived, seconds=silence),
                    event=event,
                    where=where,
                )


def loads_text(data: bytes, source: str) -> str:
    """``data`` as text, or a located ``AGUI-D001``."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DecodeError(
            f"invalid UTF-8 ({exc.reason})", rule="AGUI-D001", source=source, byte_offset=exc.start
        ) from None


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def request_body(config: CheckConfig) -> dict[str, Any]:
    """
    The run request a live check sends: ``--input`` (``config.input_path``) prepared as the
    client prepares any input, or a minimal one with fresh ids.

    Raises:
        Unreadable: ``--input`` cannot be read or is not a valid ``RunAgentInput``.

    .. versionadded:: 0.5.0
    """
    import json

    from .client import prepare_input

    path = config.input_path
    try:
        raw = json.loads(Path(path).read_text("utf-8")) if path else _minimal_input()
    except (OSError, ValueError) as exc:
        raise Unreadable(f"cannot read --input {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise Unreadable(f"--input {path} must hold a JSON object (a RunAgentInput)")
    try:
        return prepare_input(raw)
    except AguiError as invalid:
        raise Unreadable(f"--input is not a valid RunAgentInput: {invalid}") from None


def _minimal_input() -> dict[str, Any]:
    return {
        "threadId": f"aguikit-check-{uuid.uuid4().hex[:12]}",
        "runId": f"run-{uuid.uuid4().hex[:12]}",
        "messages": [],
    }


# --- judging ------------------------------------------------------------------------------


_USAGE_PARTS: Final = (
    ("cachedInputTokens", "inputTokens"),
    ("cacheWriteInputTokens", "inputTokens"),
    ("reasoningTokens", "outputTokens"),
)
"""The parts of a token usage entry and the total each is part of (the lifecycle page)."""


class _Checker:
    """One source through a recovering session, plus the checker's own rows."""

    def __init__(
        self, report: SourceReport, config: CheckConfig, session: Session | None = None
    ) -> None:
        self.report = report
        self.config = config
        self.session = (
            session
            if session is not None
            else Session(
                verify=True,
                validate=True,
                keep_delivered=False,
                collect_issues=True,
                recover=True,
                keep_text=False,  # the report names messages and calls, never their text
            )
        )
        self.errors = 0
        self.broken_at: int | None = None  # the event of the first error in this run
        self.where = _NOWHERE
        self.calls: set[str] = set()
        self.messages: set[str] = set()
        self.parents: list[tuple[int, str, str, Where]] = []
        self.run_errors: dict[int, Where] = {}  # where each RUN_ERROR was, by event number
        self.arguments: dict[str, list[str]] = {}  # open calls' argument fragments
        # This run's tool calls (id -> name, in the order started), the ones a result
        # answered, and the tools its echoed input offers (the application's).
        self.run_calls: dict[str, str | None] = {}
        self.run_answered: set[str] = set()
        self.frontend: set[str] = set()
        for message in self.session.messages:  # a conversation given before the stream
            self.messages.add(message.id)
            for call in getattr(message, "tool_calls", None) or ():
                self.calls.add(call.id)

    def add(
        self,
        rule: str,
        kind: str,
        message: str,
        *,
        event: int | None = None,
        event_type: str | None = None,
        pointer: str | None = None,
        code: str | None = None,
        where: Where | None = None,
        consequence: bool = False,
    ) -> Finding | None:
        config = self.config
        if not config.enabled(rule):
            return None
        line, frame, offset = where if where is not None else self.where
        severity = config.severity_of(rule)
        if severity is not Severity.ERROR:
            kind = "patch" if kind == "patch" else severity.value
        elif kind in ("warning", "info"):
            kind = "protocol"
        runs = self.session.runs
        finding = self.report.add(
            Finding(
                rule,
                severity,
                kind,
                code or rule,
                message,
                event,
                event_type,
                pointer,
                line,
                frame,
                offset,
                len(runs) or None,
                self.broken_at if consequence and self.broken_at != event else None,
            )
        )
        if severity is Severity.ERROR:
            self.errors += 1
            if self.errors >= config.max_errors:
                self.report.stopped_at = event
                raise _Stop
        return finding

    def run(
        self, events: Iterable[tuple[dict[str, Any], Where]], tick: Callable[[int], None]
    ) -> None:
        report = self.report
        number = 0
        event = self.event
        try:
            try:
                for number, (data, where) in enumerate(events, 1):
                    report.events = number
                    self.where = where
                    if not number & _TICK_MASK:
                        tick(number)
                    event(number, data)
            except DecodeError as exc:
                self.undecodable(exc, number)
                return
            except TransportError as broken:
                if not number:
                    raise  # nothing arrived: the source could not be read (exit 2)
                self.cut(broken, number)
            self.end(number)
        except _Stop:
            pass
        finally:
            self.summarise()

    def undecodable(self, exc: DecodeError, number: int) -> None:
        """The source stopped decoding after ``number`` events: the finding, located."""
        self.where = (exc.line, exc.frame, exc.byte_offset)
        self.add(exc.rule or "AGUI-D002", "decode", exc.message, event=number + 1)

    def cut(self, broken: TransportError, number: int) -> None:
        """The connection broke after ``number`` events: what did arrive is judged, and
        the run it left open is reported as the consequence it is."""
        self.where = _NOWHERE
        self.add(broken.rule, "transport", str(broken), event=number + 1)
        self.broken_at = self.broken_at or number + 1

    def end(self, number: int) -> None:
        """The source ended after ``number`` events: what only its end can say."""
        report = self.report
        self.where = _NOWHERE
        if report.unreadable is not None or (
            not number and any(f.rule == "AGUI-K004" for f in report.findings)
        ):
            return  # not a stream at all: nothing to say about how it ended
        try:
            self.session.finish()
        except ProtocolError as ended:
            self.add(ended.rule or "AGUI-V006", "protocol", ended.message, consequence=True)
        self.warnings(None, None)
        self.finish()

    def summarise(self) -> None:
        """The report's runs, from the session's."""
        self.report.runs = [
            RunSummary(
                n,
                run.run_id,
                run.thread_id,
                run.status,
                None if run.started_at is None else run.started_at + 1,
                None if run.ended_at is None else run.ended_at + 1,
                run.message,
                run.code,
                tuple(i.id for i in run.interrupts),
            )
            for n, run in enumerate(self.session.runs, 1)
        ]

    def event(self, number: int, data: dict[str, Any]) -> None:
        session = self.session
        etype = data.get("type") if isinstance(data, dict) else None
        if not isinstance(etype, str):
            etype = None
        elif etype == "RUN_STARTED":
            self.broken_at = None
        self.lint(number, etype, data)
        failure: AguiError | None = None
        try:
            session.feed(data)
        except AguiError as exc:
            failure = exc
        issues = session.last_issues
        if issues or failure is not None:
            self.judged(number, etype, issues, failure)
        elif session.last_warnings:
            self.warnings(etype, number)

    def judged(
        self, number: int, etype: str | None, issues: list[SchemaIssue], failure: AguiError | None
    ) -> None:
        """The findings of an event the session found invalid or refused."""
        invalid = False
        for issue in issues:
            invalid = True
            rule = (
                "AGUI-S002" if issue.pointer == "/type" and issue.keyword == "enum" else "AGUI-S001"
            )
            self.add(
                rule,
                "schema",
                issue.message,
                event=number,
                event_type=etype,
                pointer=issue.pointer or "/",
                code=issue.keyword,
            )
        if isinstance(failure, ProtocolError):
            rule = failure.rule or "AGUI-V001"
            reported = failure.event_type or etype
            self.add(
                rule,
                "protocol",
                failure.message,
                event=number,
                event_type=reported,
                pointer=POINTERS.get((reported or "", rule)),
                consequence=True,
            )
        elif isinstance(failure, PatchError):
            self.add(
                "AGUI-P001",
                "patch",
                str(failure),
                event=number,
                event_type=etype,
                pointer=failure.pointer,
            )
        elif isinstance(failure, SchemaValidationError | UnknownEventTypeError | WireFormatError):
            if not invalid:  # the strict issues said nothing: say why here
                self.add(
                    failure.rule or "AGUI-S001",
                    "schema",
                    str(failure),
                    event=number,
                    event_type=etype,
                )
        elif failure is not None:
            raise failure
        if failure is not None and self.broken_at is None:
            self.broken_at = number
        self.warnings(etype, number, skip=invalid)

    def warnings(self, etype: str | None, number: int | None, *, skip: bool = False) -> None:
        for warning in self.session.last_warnings:
            if skip and warning.code not in _PATCH_WARNINGS:
                continue  # a stripped member of an event with schema errors: said already
            rule = RULES_BY_SYMBOL[warning.code].id
            kind = "patch" if warning.code in _PATCH_WARNINGS else "warning"
            self.add(
                rule,
                kind,
                warning.message,
                event=number,
                event_type=etype,
                code=warning.code if kind == "warning" else None,
            )

    def lint(self, number: int, etype: str | None, data: dict[str, Any]) -> None:
        """The checker's own rows, on the raw event (``AGUI-K001``-``K003``, ``K008``)."""
        if not isinstance(data, dict):
            return  # not an event at all: the session's schema finding says so
        message_id = data.get("messageId")
        if isinstance(message_id, str):
            self.messages.add(message_id)
        if etype == "TEXT_MESSAGE_CONTENT":  # most of any stream: only K003 applies
            if data.get("delta") == "":
                self.empty_delta(number, etype, data)
            return
        if etype == "TOOL_CALL_ARGS":  # chunked calls end implicitly: not joined here
            call, delta = data.get("toolCallId"), data.get("delta")
            if isinstance(call, str) and isinstance(delta, str) and call in self.arguments:
                self.arguments[call].append(delta)
        elif etype == "TOOL_CALL_END":
            call = data.get("toolCallId")
            fragments = self.arguments.pop(call, None) if isinstance(call, str) else None
            text = "".join(fragments or ())
            if text.strip():
                try:
                    loads(text, max_depth=self.config.max_depth)
                except DecodeError as exc:
                    detail = exc.message.removeprefix("not valid JSON: ")
                    self.add(
                        "AGUI-K008",
                        "protocol",
                        render_message("AGUI-K008", entity_id=call, detail=detail),
                        event=number,
                        event_type=etype,
                    )
        if etype in ("TOOL_CALL_START", "TOOL_CALL_CHUNK"):
            call = data.get("toolCallId")
            if isinstance(call, str):
                self.calls.add(call)
                if etype == "TOOL_CALL_START":
                    self.arguments[call] = []
                name = data.get("toolCallName")
                if isinstance(name, str) or call not in self.run_calls:
                    self.run_calls[call] = name if isinstance(name, str) else None
            parent = data.get("parentMessageId")
            # A parent seen already stays seen: only the unknown wait for the end.
            if isinstance(parent, str) and isinstance(call, str) and parent not in self.messages:
                self.parents.append((number, call, parent, self.where))
        if etype == "TOOL_CALL_RESULT":
            call = data.get("toolCallId")
            if isinstance(call, str) and call not in self.calls:
                self.add(
                    "AGUI-K001",
                    "protocol",
                    render_message("AGUI-K001", entity_id=call),
                    event=number,
                    event_type=etype,
                    pointer="/toolCallId",
                )
            if isinstance(call, str):
                self.run_answered.add(call)
                name = self.run_calls.get(call)
                if name is not None and name in self.frontend:
                    self.add(
                        "AGUI-K013",
                        "protocol",
                        render_message("AGUI-K013", entity_id=call, name=name),
                        event=number,
                        event_type=etype,
                        pointer="/toolCallId",
                    )
        elif etype in _DELTA_EVENTS and data.get("delta") == "":
            self.empty_delta(number, etype, data)
        elif etype == "RUN_ERROR":
            self.run_errors[number] = self.where  # AGUI-K007 points here when the run ends
        elif etype in ("RUN_STARTED", "MESSAGES_SNAPSHOT"):
            holder = data.get("input") if etype == "RUN_STARTED" else data
            if etype == "RUN_STARTED":
                self.run_calls, self.run_answered = {}, set()
                tools = holder.get("tools") if isinstance(holder, dict) else None
                self.frontend = {
                    tool["name"]
                    for tool in (tools if isinstance(tools, list) else ())
                    if isinstance(tool, dict) and isinstance(tool.get("name"), str)
                }
            messages = holder.get("messages") if isinstance(holder, dict) else None
            for index, message in enumerate(messages if isinstance(messages, list) else ()):
                if not isinstance(message, dict):
                    continue
                if isinstance(message.get("id"), str):
                    self.messages.add(message["id"])
                pointer = (
                    f"/input/messages/{index}" if etype == "RUN_STARTED" else f"/messages/{index}"
                )
                self.typed_without_value(number, etype, message, pointer)
                for n, call in enumerate(message.get("toolCalls") or ()):
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        self.calls.add(call["id"])
                        self.typed_without_value(number, etype, call, f"{pointer}/toolCalls/{n}")
        elif etype in ("RUN_FINISHED", "RUN_ERROR"):
            self.usage(number, etype, data.get("usage"))
            outcome = data.get("outcome") if etype == "RUN_FINISHED" else None
            if isinstance(outcome, dict):
                self.outcome(number, data, outcome)

    def typed_without_value(
        self, number: int, etype: str, holder: dict[str, Any], pointer: str
    ) -> None:
        """``AGUI-K011``: an ``encryptedValueType`` with no ``encryptedValue`` to describe."""
        if "encryptedValueType" in holder and "encryptedValue" not in holder:
            name = "tool call" if "/toolCalls/" in pointer else "message"
            self.add(
                "AGUI-K011",
                "protocol",
                render_message(
                    "AGUI-K011", event_type=etype, entity_id=f"{name} {holder.get('id')!r}"
                ),
                event=number,
                event_type=etype,
                pointer=f"{pointer}/encryptedValueType",
            )

    def usage(self, number: int, etype: str, usage: Any) -> None:
        """``AGUI-K009``: each usage entry in the protocol's one accounting."""
        for index, entry in enumerate(usage if isinstance(usage, list) else ()):
            if not isinstance(entry, dict):
                continue
            count = {
                key: value
                for key, value in entry.items()
                if isinstance(value, int) and not isinstance(value, bool)
            }
            problems = [
                f"{part} {count[part]} exceeds {total} {count[total]}: a part is never added "
                "beside its total"
                for part, total in _USAGE_PARTS
                if part in count and total in count and count[part] > count[total]
            ]
            cached, written = count.get("cachedInputTokens"), count.get("cacheWriteInputTokens")
            if (
                cached is not None
                and written is not None
                and "inputTokens" in count
                and cached + written > count["inputTokens"]
            ):
                problems.append(
                    f"cache reads and writes ({cached} + {written}) exceed inputTokens "
                    f"{count['inputTokens']}"
                )
            if {"inputTokens", "outputTokens", "totalTokens"} <= set(count) and count[
                "totalTokens"
            ] != count["inputTokens"] + count["outputTokens"]:
                problems.append(
                    f"totalTokens {count['totalTokens']} is not inputTokens plus outputTokens "
                    f"({count['inputTokens'] + count['outputTokens']})"
                )
            for detail in problems:
                self.add(
                    "AGUI-K009",
                    "protocol",
                    render_message(
                        "AGUI-K009", event_type=etype, entity_id=index + 1, detail=detail
                    ),
                    event=number,
                    event_type=etype,
                    pointer=f"/usage/{index}",
                )

    def outcome(self, number: int, data: dict[str, Any], outcome: dict[str, Any]) -> None:
        """``AGUI-K010`` and ``AGUI-K012``: what a run's outcome says against the run."""
        run_id = data.get("runId")
        kind = outcome.get("type")
        listed = outcome.get("pendingToolCallIds")
        if kind == "success" and isinstance(listed, list):
            pending = [c for c in self.run_calls if c not in self.run_answered]
            if sorted(map(str, listed)) != sorted(pending) or len(set(map(str, listed))) != len(
                listed
            ):
                self.add(
                    "AGUI-K010",
                    "protocol",
                    render_message("AGUI-K010", entity_id=run_id, listed=listed, pending=pending),
                    event=number,
                    event_type="RUN_FINISHED",
                    pointer="/outcome/pendingToolCallIds",
                )
        if kind == "cancelled" and "result" in data:
            self.add(
                "AGUI-K012",
                "warning",
                render_message("AGUI-K012", entity_id=run_id),
                event=number,
                event_type="RUN_FINISHED",
                pointer="/result",
            )

    def empty_delta(self, number: int, etype: str, data: dict[str, Any]) -> None:
        """``AGUI-K003``: a content or arguments event carrying no text."""
        entity = data.get("messageId", data.get("toolCallId"))
        self.add(
            "AGUI-K003",
            "warning",
            render_message("AGUI-K003", event_type=etype, entity_id=entity),
            event=number,
            event_type=etype,
            pointer="/delta",
        )

    def finish(self) -> None:
        """What only the whole stream can say: unknown parents, failed runs."""
        for number, call, parent, where in self.parents:
            if parent not in self.messages:
                self.add(
                    "AGUI-K002",
                    "info",
                    render_message("AGUI-K002", entity_id=call, parent=parent),
                    event=number,
                    event_type="TOOL_CALL_START",
                    pointer="/parentMessageId",
                    where=where,
                )
        for n, run in enumerate(self.session.runs, 1):
            if run.status == "error":
                code = f" [{run.code}]" if run.code else ""
                event = None if run.ended_at is None else run.ended_at + 1
                self.add(
                    "AGUI-K007",
                    "info",
                    render_message(
                        "AGUI-K007", run=n, entity_id=run.run_id, message=run.message, code=code
                    ),
                    event=event,
                    event_type="RUN_ERROR",
                    where=self.run_errors.get(event or 0, _NOWHERE),
                )


class StreamCheck:
    """
    :func:`check_source` for a stream that arrives a piece at a time and must not wait:
    each event is handed over as it is decoded and the findings it caused come back at
    once (``aguikit proxy`` prints them while it forwards).

    The same recovering session and the same rows judge it, so a recorded stream checked
    later finds what the live check found; ``session`` as for :func:`check_bytes` (one
    seeded with the request's messages and state, :func:`aguikit.conversation.seeded_session`).
    After ``max_errors`` errors it stops judging (:attr:`stopped`) and ignores the rest.

    .. versionadded:: 0.5.0
    """

    def __init__(
        self,
        name: str,
        config: CheckConfig | None = None,
        *,
        kind: str = "http",
        session: Session | None = None,
    ) -> None:
        self.report = SourceReport(name, kind=kind)
        self._checker = _Checker(self.report, config or CheckConfig(), session)
        self._number = 0
        self.stopped = False

    def _new(self, before: int) -> list[Finding]:
        return self.report.findings[before:]

    def feed(self, data: dict[str, Any], where: Where = _NOWHERE) -> list[Finding]:
        """Judge the next event (a wire dict) found at ``where``; the new findings."""
        if self.stopped:
            return []
        report, checker = self.report, self._checker
        before = len(report.findings)
        self._number = number = self._number + 1
        report.events = number
        checker.where = where
        try:
            checker.event(number, data)
        except _Stop:
            self.stopped = True
        # most events find nothing: no slice to make for them (the proxy feeds every one)
        return self._new(before) if len(report.findings) != before else []

    def close(self, failure: DecodeError | TransportError | None = None) -> list[Finding]:
        """
        The stream ended, normally or with ``failure`` (its bytes stopped decoding, or the
        connection broke): what the end says, and the runs summarised.
        """
        before = len(self.report.findings)
        checker = self._checker
        if not self.stopped:
            try:
                if isinstance(failure, DecodeError):
                    checker.undecodable(failure, self._number)
                else:
                    if failure is not None:
                        checker.cut(failure, self._number)
                    checker.end(self._number)
            except _Stop:
                self.stopped = True
        checker.summarise()
        return self._new(before)


def check_source(
    spec: str,
    config: CheckConfig,
    *,
    tick: Callable[[int], None] = lambda n: None,
    session: Session | None = None,
) -> SourceReport:
    """
    Check one source (a path, ``-`` or an agent URL) and return everything found;
    ``session`` as for :func:`check_bytes`; ``tick`` hears the count of events read every
    1,024 events (a progress display).

    Never raises for what the source holds: unreadable input is
    :attr:`SourceReport.unreadable` (exit 2) with its finding, when it has a rule.
    """
    name = "<stdin>" if spec == "-" else spec
    report = SourceReport(name)
    checker = _Checker(report, config, session)
    reader = _Reader(spec, config, report, checker.add)
    try:
        checker.run(reader.events(), tick)
    except Unreadable as unreadable:
        report.unreadable = str(unreadable)
    except TransportError as failed:
        report.unreadable = str(failed)
        if config.enabled(failed.rule):
            report.add(
                Finding(
                    failed.rule,
                    config.severity_of(failed.rule),
                    "transport",
                    failed.rule,
                    str(failed),
                )
            )
    return report


def map_sources(
    check: Callable[[str, CheckConfig], _R], specs: list[str], config: CheckConfig, jobs: int
) -> list[_R]:
    """
    ``check(spec, config)`` for every source, in the order given: in ``jobs`` worker
    processes when more than one source is to be read and none is stdin (which only this
    process can read), otherwise here.  The one way ``aguikit check --jobs`` spreads its
    sources, whatever the report (``--format html`` passes the page's own pass); ``check``
    and what it returns must pickle.
    """
    if jobs > 1 and len(specs) > 1 and "-" not in specs:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, len(specs))) as pool:
            return list(pool.map(check, specs, [config] * len(specs)))
    return [check(spec, config) for spec in specs]


def check_bytes(
    data: bytes,
    name: str,
    config: CheckConfig | None = None,
    *,
    session: Session | None = None,
    kind: str | None = None,
) -> SourceReport:
    """
    :func:`check_source` for bytes in memory (the demo, a test), named ``name``.

    ``session`` is the session to feed instead of a fresh one, for a caller that wants the
    conversation it folds as well as the findings (:mod:`aguikit.testing`): it must be
    made with ``verify=True, validate=True, collect_issues=True, recover=True``, and may
    start from earlier messages and state, or keep what it delivered.  ``kind``
    (``sse``, ``jsonl`` or ``proto``) names the framing when the caller knows it (an HTTP
    response's content type) instead of sniffing it from the bytes.

    .. versionchanged:: 0.5.0  ``kind``.
    """
    config = config or CheckConfig()
    report = SourceReport(name)
    checker = _Checker(report, config, session)
    reader = _Reader(name, config, report, checker.add)
    checker.run(reader._bytes(iter([data]), kind), lambda n: None)
    return report


def check_events(
    events: Iterable[Any],
    name: str,
    config: CheckConfig | None = None,
    *,
    session: Session | None = None,
) -> SourceReport:
    """
    :func:`check_bytes` for events already decoded (wire dicts), which have no line or
    frame; ``session`` as there.
    """
    config = config or CheckConfig()
    report = SourceReport(name, kind="events")
    checker = _Checker(report, config, session)
    checker.run(((event, _NOWHERE) for event in events), lambda n: None)
    return report


def open_events(
    spec: str, config: CheckConfig | None = None, *, data: bytes | None = None
) -> Iterator[dict[str, Any]]:
    """
    The raw events of one source, read exactly as :func:`check_source` reads them (SSE,
    JSONL, a JSON array or document, length-prefixed protobuf, an agent URL), for
    ``aguikit replay`` and ``aguikit convert``; with ``data``, those bytes named ``spec``,
    as :func:`check_bytes` reads them.

    Raises:
        Unreadable: The source cannot be opened, or is not text.
        DecodeError, TransportError: As the source's reader.
    """
    config = config or CheckConfig()
    name = "<stdin>" if spec == "-" else spec
    report = SourceReport(name)

    def ignore(*args: Any, **kwargs: Any) -> None:
        return None

    reader = _Reader(spec, config, report, ignore)
    pairs = reader.events() if data is None else reader._bytes(iter([data]))
    for event, _ in pairs:
        yield event
    if report.unreadable is not None:
        raise Unreadable(report.unreadable)
