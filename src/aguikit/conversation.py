"""
Conversations, not just streams: the exchanges of one thread, read from a HAR file, an
aguikit recording or the test kit, and judged across runs.

A response stream can be flawless and the conversation still broken.  The next request
forgets to answer the interrupt the run ended with, edits the ``encryptedValue`` it was
asked to send back, re-mints the id of a message it was sent, drops the tool result the
run was waiting for; a final ``MESSAGES_SNAPSHOT`` disagrees with what was streamed before
it.  None of that is visible to a checker that only sees responses: the request that
answers a run is the other half of the evidence.  So the unit here is the *exchange* (one
``RunAgentInput`` POSTed and the response it got) and a *thread* is the exchanges that
carry one ``threadId``, in the order they were sent.

Three readers produce :class:`Exchange` values, and one judge takes them:

* :func:`read_har` reads a HAR 1.2 file, what browser devtools export and what
  ``aguikit proxy --record`` writes (the same format, with per-event timing in the
  underscore-prefixed ``_aguikit`` field HAR allows; ``docs/conversations.md`` is the
  contract).  AG-UI exchanges are picked by the request's shape (a POST whose body is a
  JSON object with ``threadId``, ``runId`` and ``messages``); anything else the page
  loaded is counted and left alone.  A recording cut by a crash yields every complete
  entry and the place it was cut (``AGUI-R001``), never a JSON traceback.
* :meth:`Exchange.of` builds one from a request body and the response bytes (the test
  kit's :class:`~aguikit.testing.Conversation`, a golden trace).
* :func:`exchanges_of_example` reads a catalogue row's example.

:func:`check_exchanges` judges each response through the checker's own pass
(:func:`aguikit.checker.check_bytes`, its recovering session seeded with the request's
messages and state, the response decoded by the transport decoder its content type names),
then applies the thread rules (``AGUI-R…`` rows of the catalogue) on what that pass
folded: there is no second fold and no second decoder.  The one thing added to the
session is a watch on ``MESSAGES_SNAPSHOT``: the messages the session held just before it,
which is what the snapshot must agree with.

What it deliberately leaves alone: token usage is judged per stream (``AGUI-K009``, each
exchange's response), an edited message *content* in the next request is the
application's business (only ids, order, roles and the encrypted artefacts are held), and
a state that differs from the previous run's is a warning, because an application may
change its state between runs on purpose.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeAlias, TypeVar

import attrs

from ._generated.models import Interrupt
from ._generated.registry import PROTOCOL_VERSION
from .agent import interrupt_expired
from .catalogue import Severity, render_message
from .checker import (
    CheckConfig,
    Finding,
    RunSummary,
    SourceReport,
    check_bytes,
    is_recording,
)
from .errors import AguiError, DecodeError, SchemaIssue
from .jsonio import escape_pointer, iter_documents, loads
from .receiver import version_key
from .session import Session, Update
from .transport.jsonl import MEDIA_TYPE as JSONL_MEDIA_TYPE
from .transport.proto import MEDIA_TYPE as PROTO_MEDIA_TYPE
from .transport.sse import MEDIA_TYPE as SSE_MEDIA_TYPE
from .transport.sse import encode_bytes
from .validate import is_valid, iter_schema_errors
from .wire import parse_message, to_wire

__all__ = [
    "EventTime",
    "Exchange",
    "Judged",
    "Recording",
    "SessionFactory",
    "Watching",
    "check_exchanges",
    "check_recording",
    "exchanges_of_example",
    "is_recording",
    "judge_ended",
    "live_session",
    "read_har",
    "threads",
]

FRAMINGS: Final[Mapping[str, str]] = {
    SSE_MEDIA_TYPE: "sse",
    JSONL_MEDIA_TYPE: "jsonl",
    "application/x-ndjson": "jsonl",
    PROTO_MEDIA_TYPE: "proto",
}
"""The response framing each content type names (the transports' own media types)."""

_INPUT_KEYS: Final = ("threadId", "runId", "messages")
_OWN_VERSION: Final = version_key(PROTOCOL_VERSION)


# --- the exchanges -------------------------------------------------------------------------


@attrs.frozen
class EventTime:
    """
    When one event of a recorded response passed the proxy (the recording contract's
    ``_aguikit.events`` entry): ``end`` is the byte offset in the body just past the
    event's frame; both times are milliseconds since the request started.
    """

    end: int
    upstream_ms: float | None = None
    downstream_ms: float | None = None


@attrs.frozen
class Exchange:
    """
    One request of a conversation and the response it got.

    ``request`` is the decoded JSON body (``None`` when it is not JSON: ``request_text``
    then holds what was sent, or ``None`` when nothing was); ``body`` the response bytes
    exactly, decoded by the framing its ``media_type`` names.  ``number`` counts the
    exchanges of the file (or conversation) from 1, in the order sent; ``times`` is the
    per-event timing when a recording kept it (empty for a browser's HAR), and
    ``complete`` is false when the response was still streaming or cut when recorded.

    .. versionadded:: 0.5.0
    """

    number: int
    request: Any
    body: bytes
    status: int = 200
    media_type: str | None = SSE_MEDIA_TYPE
    request_text: str | None = None
    method: str = "POST"
    url: str = ""
    request_headers: tuple[tuple[str, str], ...] = ()
    response_headers: tuple[tuple[str, str], ...] = ()
    started: datetime.datetime | None = None
    times: tuple[EventTime, ...] = ()
    complete: bool = True
    timings: tuple[tuple[str, float], ...] = ()
    """The HAR entry's ``timings`` (``send``, ``wait``, ``receive``... in ms): a browser's
    export has no per-event time, only these."""
    captured: bool = True
    """Whether the response body was recorded at all: a browser's export may leave out a
    streamed body it did not keep (``content`` without ``text``)."""

    @classmethod
    def of(
        cls,
        number: int,
        request: Any,
        body: bytes,
        *,
        status: int = 200,
        media_type: str | None = SSE_MEDIA_TYPE,
        started: datetime.datetime | None = None,
    ) -> Exchange:
        """An exchange from a request body (a wire dict) and the response bytes."""
        return cls(number, request, body, status, media_type, started=started)

    @property
    def thread_id(self) -> str | None:
        """The request's ``threadId`` (``None`` when it has no string one)."""
        value = self.request.get("threadId") if isinstance(self.request, dict) else None
        return value if isinstance(value, str) else None

    @property
    def run_id(self) -> str | None:
        """The request's ``runId``."""
        value = self.request.get("runId") if isinstance(self.request, dict) else None
        return value if isinstance(value, str) else None

    @property
    def framing(self) -> str | None:
        """``sse``, ``jsonl`` or ``proto`` by content type; ``None`` for anything else."""
        media = (self.media_type or "").split(";", 1)[0].strip().lower()
        return FRAMINGS.get(media)

    def arrival(self, event: int) -> float | None:
        """When the 1-based ``event`` left the upstream, in ms since the request started,
        when the recording kept it."""
        if 0 < event <= len(self.times):
            return self.times[event - 1].upstream_ms
        return None


@attrs.frozen
class Recording:
    """
    What :func:`read_har` found in a file: the AG-UI exchanges in request order, how many
    entries were something else, and where reading stopped when the file was cut
    (``cut``, an ``AGUI-R001`` error naming the file and byte offset).

    .. versionadded:: 0.5.0
    """

    source: str
    exchanges: tuple[Exchange, ...]
    skipped: int = 0
    cut: DecodeError | None = None


def threads(exchanges: Iterable[Exchange]) -> dict[str | None, list[Exchange]]:
    """The exchanges grouped by ``threadId``, each thread in request order."""
    out: dict[str | None, list[Exchange]] = {}
    for exchange in exchanges:
        out.setdefault(exchange.thread_id, []).append(exchange)
    return out


def exchanges_of_example(example: Sequence[Mapping[str, Any]]) -> list[Exchange]:
    """
    The exchanges of a catalogue row's example: ``{"request": ..., "response": [events],
    "status": ...}`` each, the events written as SSE frames (``"response": null``: a body
    that was not recorded).
    """
    out = []
    for number, item in enumerate(example, 1):
        events = item.get("response")
        body = b"".join(encode_bytes(event) for event in events or ())
        exchange = Exchange.of(number, item.get("request"), body, status=item.get("status", 200))
        out.append(exchange if events is not None else attrs.evolve(exchange, captured=False))
    return out


# --- reading HAR -----------------------------------------------------------------------------


def _cut(source: str, detail: str, offset: int | None = None) -> DecodeError:
    return DecodeError(
        render_message("AGUI-R001", detail=detail),
        rule="AGUI-R001",
        source=source,
        byte_offset=offset,
    )


def _entries(text: str, source: str) -> tuple[list[Any], DecodeError | None]:
    """The HAR's entries, and what stopped the reading when the file is not whole."""
    try:
        document = loads(text, source=source)
    except DecodeError as broken:
        return _salvage(text, source, broken)
    log = document.get("log") if isinstance(document, dict) else None
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(entries, list):
        raise _cut(source, "not a HAR file: no log.entries array", 0)
    return entries, None


def _salvage(text: str, source: str, broken: DecodeError) -> tuple[list[Any], DecodeError]:
    """
    Every complete entry of a HAR that does not parse: a recording the proxy was writing
    when it crashed ends inside its last entry (the contract: the file is rewritten from
    that entry's start while it streams), so the entries before it are whole.
    """
    found = re.search(r'"entries"\s*:\s*\[', text)
    if found is None:
        raise _cut(source, f"not a HAR file: {broken.message}", broken.byte_offset) from None
    start = found.end() - 1
    entries: list[Any] = []
    try:
        for value, _ in iter_documents(text[start:], source=source):
            entries.append(value)
    except DecodeError as stop:
        where = len(text[:start].encode("utf-8", "surrogatepass")) + (stop.byte_offset or 0)
        return entries, _cut(
            source, f"the file ends inside entry {len(entries) + 1} (cut at byte {where})", where
        )
    return entries, _cut(source, f"not a HAR file: {broken.message}", broken.byte_offset)


def _headers(items: Any) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(h.get("name")), str(h.get("value")))
        for h in (items if isinstance(items, list) else ())
        if isinstance(h, dict)
    )


def _header(headers: tuple[tuple[str, str], ...], name: str) -> str | None:
    return next((value for key, value in headers if key.lower() == name), None)


def _started(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _body(content: Mapping[str, Any]) -> bytes:
    text = content.get("text")
    if not isinstance(text, str):
        return b""
    if content.get("encoding") == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return text.encode("utf-8", "surrogatepass")
    return text.encode("utf-8", "surrogatepass")


def _times(custom: Any) -> tuple[tuple[EventTime, ...], bool]:
    if not isinstance(custom, dict):
        return (), True
    times = []
    for item in _objects(custom.get("events")):
        if isinstance(item, dict) and isinstance(item.get("end"), int):
            up, down = item.get("upstreamMs"), item.get("downstreamMs")
            times.append(
                EventTime(
                    item["end"],
                    float(up) if isinstance(up, int | float) else None,
                    float(down) if isinstance(down, int | float) else None,
                )
            )
    return tuple(times), custom.get("complete") is not False


def _timings(value: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, dict):
        return ()
    return tuple(
        (str(k), float(v))
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    )


def _agui_request(request: Mapping[str, Any], recorded: bool) -> tuple[bool, Any, str | None]:
    """
    Whether a HAR request is an AG-UI run, its decoded body and its text.  A browser's
    entry is picked by shape; an entry aguikit recorded (``recorded``: it has ``_aguikit``)
    is a run whatever its body, so a request the proxy forwarded that is not valid input
    is still judged (``AGUI-R002``).
    """
    if str(request.get("method", "")).upper() != "POST":
        return False, None, None
    post = request.get("postData")
    text = post.get("text") if isinstance(post, dict) else None
    if not isinstance(text, str):
        return recorded, None, None
    try:
        body = loads(text)
    except DecodeError:
        # Not JSON: an AG-UI run only if it was sent as JSON to look like one.
        media = str(post.get("mimeType", "")) if isinstance(post, dict) else ""
        return recorded or ("json" in media.lower() and "threadId" in text), None, text
    shaped = isinstance(body, dict) and all(key in body for key in _INPUT_KEYS)
    return recorded or shaped, body, text


def read_har(source: str | Path, *, data: bytes | None = None) -> Recording:
    """
    The AG-UI exchanges of a HAR 1.2 file (a browser's export or an aguikit recording).

    Args:
        source: The file's path (its name, with ``data``).
        data: The file's bytes, when already in memory.

    Returns:
        The :class:`Recording`: exchanges in the file's order, the count of entries that
        are not AG-UI runs, and the cut when the file ends inside an entry.

    Raises:
        DecodeError: ``AGUI-R001``: the file cannot be read, is not UTF-8 or not HAR at
            all (no ``log.entries``), located by byte offset.

    .. versionadded:: 0.5.0
    """
    name = str(source)
    if data is None:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise _cut(name, f"cannot open {name}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _cut(name, f"not UTF-8 ({exc.reason})", exc.start) from None
    entries, cut = _entries(text, name)
    exchanges: list[Exchange] = []
    skipped = 0
    for entry in entries:
        request = entry.get("request") if isinstance(entry, dict) else None
        response = entry.get("response") if isinstance(entry, dict) else None
        if not isinstance(request, dict) or not isinstance(response, dict):
            skipped += 1
            continue
        custom = entry.get("_aguikit")
        shaped, body, text_sent = _agui_request(request, isinstance(custom, dict))
        if not shaped:
            skipped += 1
            continue
        content = response.get("content")
        content = content if isinstance(content, dict) else {}
        response_headers = _headers(response.get("headers"))
        media = content.get("mimeType")
        if not isinstance(media, str) or not media:
            media = _header(response_headers, "content-type")
        status = response.get("status")
        times, complete = _times(custom)
        exchanges.append(
            Exchange(
                len(exchanges) + 1,
                body,
                _body(content),
                status if isinstance(status, int) else 0,
                media,
                request_text=text_sent,
                method="POST",
                url=str(request.get("url", "")),
                request_headers=_headers(request.get("headers")),
                response_headers=response_headers,
                started=_started(entry.get("startedDateTime")),
                times=times,
                complete=complete,
                timings=_timings(entry.get("timings")),
                captured=isinstance(content.get("text"), str),
            )
        )
    return Recording(name, tuple(exchanges), skipped, cut)


# --- judging ---------------------------------------------------------------------------------


def _input_issues(body: dict[str, Any]) -> Iterator[SchemaIssue]:
    """
    The schema issues of a request body as ``RunAgentInput``: strict (an undeclared member
    is the consumer's to strip before sending), except for a request declaring a newer
    version than aguikit speaks, whose additions are legal in its version.
    """
    declared = body.get("protocolVersion")
    key = version_key(declared) if isinstance(declared, str) else None
    strict = key is None or _OWN_VERSION is None or key <= _OWN_VERSION
    if is_valid(body, "RunAgentInput", strict=strict):
        return iter(())  # the fast verdict; explained only when it fails, as validate() does
    return iter_schema_errors(body, "RunAgentInput", strict=strict)


class Watching(Session):
    """
    The checker's recovering session, watching two things the thread rules need: the
    messages it held just before each ``MESSAGES_SNAPSHOT`` (what the snapshot must agree
    with), and the raw ``RUN_STARTED`` and ``RUN_FINISHED`` of each run (the version the
    producer declared, the outcome's pending tool calls).  The fold is the session's own.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.before_snapshots: list[tuple[int, list[dict[str, Any]], Any]] = []
        self.started: list[dict[str, Any]] = []
        self.finished: list[dict[str, Any]] = []
        self.fed = 0

    def feed(self, event: Any) -> list[Update]:
        self.fed += 1
        # A decoded dict asked directly: the ABC's check costs more than the rest of this
        kind = event.get("type") if type(event) is dict or isinstance(event, Mapping) else None
        if kind == "MESSAGES_SNAPSHOT":
            held = [to_wire(m) for m in self.messages]
            self.before_snapshots.append((self.fed, held, event.get("messages")))
        elif kind == "RUN_STARTED":
            self.started.append(dict(event))
        elif kind == "RUN_FINISHED":
            self.finished.append(dict(event))
        return super().feed(event)


@attrs.define
class Judged:
    """
    One exchange after the checker's pass over its response: what the thread rules read
    (the exchange, and the session that folded its response, ``None`` when it was refused
    or could not be read).  :func:`judge_ended` returns one for a caller that keeps it as
    the thread's previous exchange (``aguikit proxy``).

    .. versionadded:: 0.5.0
    """

    exchange: Exchange
    session: Watching | None = None

    @classmethod
    def live(cls, exchange: Exchange, session: Session | None) -> Judged:
        """
        ``exchange`` whose response a live check folded into ``session`` (the one
        :func:`live_session` made): kept as the session only when the response was served
        (2xx) and read (``None``, or a session not made there: nothing to hold the next
        request to).
        """
        if 200 <= exchange.status < 300 and isinstance(session, Watching):
            return cls(exchange, session)
        return cls(exchange)

    @property
    def served(self) -> bool:
        return self.session is not None and bool(self.session.runs)

    def messages(self) -> list[dict[str, Any]]:
        assert self.session is not None
        return [to_wire(m) for m in self.session.messages]


SessionFactory: TypeAlias = Callable[..., "Watching"]
"""Makes the checker's session for one exchange: called with the :class:`Exchange` and the
session's keyword arguments; :class:`Watching` itself (ignoring the exchange) by default.
``aguikit view`` passes a subclass that also keeps what each event changed."""


def _watching(exchange: Exchange, **kwargs: Any) -> Watching:
    return Watching(**kwargs)


class _Thread:
    """The thread rules, over the judged exchanges of one thread."""

    def __init__(
        self,
        report: SourceReport,
        config: CheckConfig,
        runs: list[RunSummary],
        make_session: SessionFactory = _watching,
    ) -> None:
        self.report = report
        self.config = config
        self.runs = runs
        self.make_session = make_session

    def add(
        self,
        rule: str,
        exchange: int | None,
        message: str,
        *,
        pointer: str | None = None,
        event: int | None = None,
        event_type: str | None = None,
        kind: str | None = None,
        byte_offset: int | None = None,
    ) -> None:
        config = self.config
        if not config.enabled(rule):
            return
        severity = config.severity_of(rule)
        if kind is None:
            kind = "protocol" if severity is Severity.ERROR else severity.value
        elif severity is not Severity.ERROR and kind not in ("decode", "transport"):
            kind = severity.value
        self.report.add(
            Finding(
                rule,
                severity,
                kind,
                rule,
                message,
                event,
                event_type,
                pointer,
                byte_offset=byte_offset,
                exchange=exchange,
            )
        )

    # -- one exchange ---------------------------------------------------------------------

    def request(self, exchange: Exchange) -> bool:
        """
        ``AGUI-R002`` and the consumer's side of ``AGUI-R010``; whether it is valid.

        Strict (the schema is exact: an undeclared member is the consumer's to strip
        before sending), except for a request declaring a newer version than aguikit
        speaks, whose additions are legal in its version.
        """
        number, body = exchange.number, exchange.request
        if not isinstance(body, dict):
            detail = (
                "no body"
                if exchange.request_text is None
                else "the body is not a JSON object"
                if body is not None
                else "the body is not JSON"
            )
            self.add("AGUI-R002", number, render_message("AGUI-R002", detail=detail), pointer="")
            return False
        valid = True
        for issue in _input_issues(body):
            valid = False
            self.add(
                "AGUI-R002",
                number,
                render_message("AGUI-R002", detail=issue.message),
                pointer=issue.pointer or "/",
                event_type="RunAgentInput",
            )
        if "protocolVersion" not in body:
            self.add(
                "AGUI-R010",
                number,
                render_message("AGUI-R010", side="the request"),
                pointer="/protocolVersion",
                event_type="RunAgentInput",
            )
        return valid

    def response(self, exchange: Exchange, valid: bool) -> Judged:
        """The checker's pass over the response, its findings moved into this report."""
        judged = Judged(exchange)
        if not 200 <= exchange.status < 300:
            return judged  # refused: nothing streamed (AGUI-R011 judges why, below)
        if not exchange.captured:
            self.add("AGUI-R014", exchange.number, render_message("AGUI-R014"))
            return judged  # nothing to judge, and no run the next request can be held to
        session = seeded_session(
            exchange.request if valid else {}, functools.partial(self.make_session, exchange)
        )
        framing = exchange.framing
        if framing is None:
            self.add(
                "AGUI-T003",
                exchange.number,
                render_message(
                    "AGUI-T003",
                    url=exchange.url or "the endpoint",
                    content_type=exchange.media_type,
                ),
                kind="transport",
            )
        report = check_bytes(
            exchange.body,
            self.report.source,
            self.config,
            session=session,
            kind=framing,
        )
        offset = len(self.runs)
        for finding in report.findings:
            moved = attrs.evolve(
                finding,
                exchange=exchange.number,
                run=None if finding.run is None else finding.run + offset,
                line=None if framing == "proto" else finding.line,
            )
            self.report.findings.append(moved)
        self.report.events += report.events
        self.runs.extend(attrs.evolve(run, number=run.number + offset) for run in report.runs)
        judged.session = session
        self.folded(exchange.number, session)
        return judged

    def folded(self, number: int, session: Watching) -> None:
        """What a response's own fold says to the thread rules: ``AGUI-R010`` for a
        producer that declared no version, ``AGUI-R008`` for each snapshot."""
        for started in session.started:
            if "protocolVersion" not in started:
                self.add(
                    "AGUI-R010",
                    number,
                    render_message("AGUI-R010", side="the producer's RUN_STARTED"),
                    pointer="/protocolVersion",
                    event_type="RUN_STARTED",
                )
        self.snapshots(number, session)

    def snapshots(self, number: int, session: Watching) -> None:
        """``AGUI-R008``: each MESSAGES_SNAPSHOT against the messages held before it."""
        for event, held, sent in session.before_snapshots:
            if not isinstance(sent, list):
                continue
            snapshot = [m for m in sent if isinstance(m, dict)]
            for detail, pointer in _disagreements(held, snapshot, "snapshot"):
                self.add(
                    "AGUI-R008",
                    number,
                    render_message("AGUI-R008", detail=detail),
                    event=event,
                    event_type="MESSAGES_SNAPSHOT",
                    pointer=pointer,
                )

    # -- across exchanges -----------------------------------------------------------------

    def follows(self, before: Judged, after: Exchange) -> None:
        """
        Everything ``after``'s request owes the run ``before`` answered with.

        After a run that failed (``RUN_ERROR``) only the resume list is judged: what a
        client keeps of a failed run's messages and state is its own decision.
        """
        session, body, number = before.session, after.request, after.number
        assert session is not None and isinstance(body, dict)
        run = session.runs[-1]
        interrupts = run.interrupts if run.status == "interrupted" else ()
        self.resume(number, run.run_id, interrupts, body, after.started)
        if run.status == "error":
            return
        self.pending(number, before, body, interrupts)
        sent = _objects(body.get("messages"))
        expected = [m for m in before.messages() if m.get("role") != "activity"]
        for detail, pointer in _disagreements(expected, sent, "request"):
            self.add(
                "AGUI-R009",
                number,
                render_message("AGUI-R009", detail=detail),
                pointer=pointer,
                event_type="RunAgentInput",
            )
        self.encrypted(number, expected, sent)
        state = body.get("state", {})
        if state != session.state:
            where = _first_difference(session.state, state)
            self.add(
                "AGUI-R013",
                number,
                render_message("AGUI-R013", entity_id=run.run_id, pointer=where),
                pointer="/state" if where == "/" else "/state" + where,
                event_type="RunAgentInput",
            )

    def resume(
        self,
        number: int,
        run_id: str | None,
        interrupts: Sequence[Interrupt],
        body: Mapping[str, Any],
        started: datetime.datetime | None,
    ) -> None:
        """``AGUI-R003``-``R005``: the resume list against the interrupts left open."""
        entries = _objects(body.get("resume"))
        open_ids = {i.id: i for i in interrupts}
        covered: set[str] = set()
        now = started or datetime.datetime.now(datetime.UTC)
        for index, entry in enumerate(entries):
            target = entry.get("interruptId")
            target = target if isinstance(target, str) else None
            pointer = f"/resume/{index}/interruptId"
            if target not in open_ids:
                why = (
                    f"run '{run_id}' did not raise"
                    if interrupts
                    else "no run on this thread left open"
                )
                self.add(
                    "AGUI-R004",
                    number,
                    render_message("AGUI-R004", entity_id=index + 1, interrupt=target, why=why),
                    pointer=pointer,
                    event_type="RunAgentInput",
                )
                continue
            covered.add(str(target))
            interrupt = open_ids[str(target)]
            if entry.get("status") != "cancelled" and interrupt_expired(interrupt, now):
                self.add(
                    "AGUI-R005",
                    number,
                    render_message(
                        "AGUI-R005",
                        entity_id=index + 1,
                        interrupt=target,
                        expires_at=interrupt.expires_at,
                    ),
                    pointer=f"/resume/{index}/status",
                    event_type="RunAgentInput",
                )
        missing = [i for i in open_ids if i not in covered]
        if missing:
            self.add(
                "AGUI-R003",
                number,
                render_message("AGUI-R003", entity_id=run_id, missing=missing),
                pointer="/resume",
                event_type="RunAgentInput",
            )

    def pending(
        self, number: int, before: Judged, body: Mapping[str, Any], interrupts: Sequence[Interrupt]
    ) -> None:
        """
        ``AGUI-R007``: the tool calls a successful run left pending, answered by tool
        messages.  Pending are the outcome's ``pendingToolCallIds`` and, the list being
        optional ("a consumer that needs to know derives" them, the tool calls page), the
        calls the run made that no result answered, as ``Agent`` derives them; a call an
        interrupt asks about is answered by its resume entry instead.
        """
        session = before.session
        assert session is not None
        finished = session.finished
        outcome = finished[-1].get("outcome") if finished else None
        if session.runs[-1].status != "finished" or (
            isinstance(outcome, dict) and outcome.get("type") != "success"
        ):
            return
        listed = outcome.get("pendingToolCallIds") if isinstance(outcome, dict) else None
        pending = [c for c in listed if isinstance(c, str)] if isinstance(listed, list) else []
        held = before.messages()
        asked = before.exchange.request
        earlier = {
            _ident(call)
            for message in _objects(asked.get("messages") if isinstance(asked, dict) else None)
            for call in _objects(message.get("toolCalls"))
        }
        results = {m.get("toolCallId") for m in held if m.get("role") == "tool"}
        for message in held:
            for call in _objects(message.get("toolCalls")):
                ident = _ident(call)
                if ident not in earlier and ident not in results and ident not in pending:
                    pending.append(str(ident))
        gated = {i.tool_call_id for i in interrupts}
        answered = {
            m.get("toolCallId")
            for m in _objects(body.get("messages"))
            if m.get("role") == "tool" and isinstance(m.get("toolCallId"), str)
        }
        missing = [c for c in pending if c not in answered and c not in gated]
        if missing:
            self.add(
                "AGUI-R007",
                number,
                render_message("AGUI-R007", entity_id=session.runs[-1].run_id, missing=missing),
                pointer="/messages",
                event_type="RunAgentInput",
            )

    def encrypted(
        self, number: int, expected: list[dict[str, Any]], sent: list[dict[str, Any]]
    ) -> None:
        """``AGUI-R006``: every encrypted artefact back, unmodified, on its entity."""
        where = {_ident(m): (i, m) for i, m in enumerate(sent) if _ident(m) is not None}
        for message in expected:
            found = where.get(_ident(message))
            if found is None:
                continue  # dropped altogether: AGUI-R009 says so
            index, back = found
            pairs = [(f"message '{message.get('id')}'", message, back, f"/messages/{index}")]
            calls = {
                _ident(c): (n, c)
                for n, c in enumerate(_objects(back.get("toolCalls")))
                if isinstance(c, dict)
            }
            for call in _objects(message.get("toolCalls")):
                if _ident(call) is not None and _ident(call) in calls:
                    n, returned = calls[_ident(call)]
                    pairs.append(
                        (
                            f"tool call '{call.get('id')}'",
                            call,
                            returned,
                            f"/messages/{index}/toolCalls/{n}",
                        )
                    )
            for label, given, returned, pointer in pairs:
                for member in ("encryptedValue", "encryptedValueType"):
                    if member not in given or given[member] == returned.get(member):
                        continue
                    what = "dropped" if member not in returned else "changed"
                    self.add(
                        "AGUI-R006",
                        number,
                        render_message(
                            "AGUI-R006",
                            entity_id=label,
                            detail=f"its {member} was {what} (it must come back unmodified)",
                        ),
                        pointer=f"{pointer}/{member}",
                        event_type="RunAgentInput",
                    )

    def versions(self, judged: list[Judged], *, last: bool = False) -> None:
        """``AGUI-R011`` and ``AGUI-R012``: what each side declared, across the thread
        (``last``: said of the last exchange only, the others judged already)."""
        spoken = [
            str(s["protocolVersion"])
            for j in judged
            if j.session is not None
            for s in j.session.started
            if isinstance(s.get("protocolVersion"), str)
        ]
        own = [k for k in map(version_key, spoken) if k is not None]
        for item in judged[-1:] if last else judged:
            body = item.exchange.request
            declared = body.get("protocolVersion") if isinstance(body, dict) else None
            key = version_key(declared) if isinstance(declared, str) else None
            if key is None:
                continue
            refused = _refusal(item)
            line = [k for k in own if k[:1] == key[:1]]
            if refused is not None and line and key > max(line):
                self.add(
                    "AGUI-R011",
                    item.exchange.number,
                    render_message(
                        "AGUI-R011",
                        declared=declared,
                        own=".".join(map(str, max(line))),
                        how=refused,
                    ),
                    pointer="/protocolVersion",
                    event_type="RunAgentInput",
                )
            for started in item.session.started if item.session is not None else ():
                answered = started.get("protocolVersion")
                answer = version_key(answered) if isinstance(answered, str) else None
                if answer is not None and answer > key:
                    self.add(
                        "AGUI-R012",
                        item.exchange.number,
                        render_message("AGUI-R012", declared=declared, answered=answered),
                        pointer="/protocolVersion",
                        event_type="RUN_STARTED",
                    )


def _objects(value: Any) -> list[dict[str, Any]]:
    """
    The objects of a JSON array, each at its index (anything else in it as ``{}``, so a
    pointer still names the right element), nothing for anything but an array: a request
    member a thread rule reads may be any JSON at all when the request is invalid.
    """
    if not isinstance(value, list):
        return []
    return [item if isinstance(item, dict) else {} for item in value]


def _ident(item: Mapping[str, Any]) -> str | None:
    """An entity's ``id`` when it is a string (an invalid one is AGUI-R002's business)."""
    value = item.get("id")
    return value if isinstance(value, str) else None


def _refusal(item: Judged) -> str | None:
    """How an exchange was refused before its run started, if it was."""
    status = item.exchange.status
    if not 200 <= status < 300:
        return f"HTTP {status}"
    session = item.session
    if session is not None and session.runs and session.runs[0].started_at is None:
        return "a RUN_ERROR before RUN_STARTED"
    return None


def _first_difference(old: Any, new: Any, pointer: str = "") -> str:
    """The JSON pointer of the first place two JSON values differ (``/`` for the root)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            if old.get(key, _GONE) != new.get(key, _GONE):
                if key in old and key in new:
                    return _first_difference(old[key], new[key], f"{pointer}/{escape_pointer(key)}")
                return f"{pointer}/{escape_pointer(key)}"
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{pointer}/{index}")
    return pointer or "/"


_GONE: Final = object()


def _content(message: Mapping[str, Any]) -> Any:
    return message.get("content")


def _disagreements(
    held: list[dict[str, Any]], given: list[dict[str, Any]], what: str
) -> Iterator[tuple[str, str]]:
    """
    How ``given`` (a snapshot, the next request's history) departs from ``held`` (what
    the stream had built, what the client was sent): duplicated ids, a message of the
    same role and content under a new id (re-minted), one missing, the common ones out of
    order or with another role or content.  Each with the pointer into ``given``.
    A snapshot may leave messages out (it replaces); a request may not.
    """
    prefix = "/messages"
    seen: set[str] = set()
    for index, message in enumerate(given):
        message_id = _ident(message)
        if message_id in seen:
            yield f"message '{message_id}' appears twice", f"{prefix}/{index}"
        if message_id is not None:
            seen.add(message_id)
    held_ids = {_ident(m) for m in held}
    positions: dict[str | None, int] = {}
    for index, message in enumerate(given):
        positions.setdefault(_ident(message), index)
    for message in held:
        message_id = _ident(message)
        if message_id in positions:
            index = positions[message_id]
            other = given[index]
            if other.get("role") != message.get("role"):
                yield (
                    f"message '{message_id}' has role {other.get('role')!r}, not "
                    f"{message.get('role')!r}",
                    f"{prefix}/{index}/role",
                )
            elif what == "snapshot" and _content(other) != _content(message):
                yield (
                    f"message '{message_id}' has other content than was streamed",
                    f"{prefix}/{index}/content",
                )
            continue
        twin = next(
            (
                i
                for i, m in enumerate(given)
                if _ident(m) is not None
                and _ident(m) not in held_ids
                and m.get("role") == message.get("role")
                and _content(m) == _content(message)
            ),
            None,
        )
        if twin is not None:
            yield (
                f"message '{message_id}' comes back re-minted as '{given[twin].get('id')}'",
                f"{prefix}/{twin}/id",
            )
        elif what == "request":
            yield f"message '{message_id}' the client was sent is missing", prefix
    common = [_ident(m) for m in held if _ident(m) in positions]
    order = sorted(common, key=lambda i: positions[i])
    if common != order:
        first = next(a for a, b in zip(common, order, strict=True) if a != b)
        yield (
            f"the messages are reordered: '{first}' comes out of the order it was "
            f"{'streamed' if what == 'snapshot' else 'sent'} in",
            f"{prefix}/{positions[first]}",
        )


def check_exchanges(
    exchanges: Iterable[Exchange],
    source: str,
    config: CheckConfig | None = None,
    *,
    make_session: SessionFactory = _watching,
) -> SourceReport:
    """
    Judge a conversation: each exchange's request and response, then each thread's
    requests against the runs before them.

    Every finding names its exchange (:attr:`Finding.exchange`); a response's findings
    keep their event, frame and byte offset within the response body, and a request's
    carry a JSON pointer into the request body.  Runs are numbered across the whole
    conversation.

    Args:
        exchanges: In the order they were sent (threads may interleave).
        source: The name the report carries (the file).
        config: As for ``aguikit check``.
        make_session: The session each response is judged through (:data:`SessionFactory`).

    .. versionadded:: 0.5.0
    """
    config = config or CheckConfig()
    report = SourceReport(source, kind="conversation")
    runs: list[RunSummary] = []
    rules = _Thread(report, config, runs, make_session)
    for thread in threads(exchanges).values():
        judged: list[Judged] = []
        before: Judged | None = None
        for exchange in thread:
            valid = rules.request(exchange)
            item = rules.response(exchange, valid)
            judged.append(item)
            if before is not None and isinstance(exchange.request, dict):
                rules.follows(before, exchange)
            if item.served:
                before = item
        rules.versions(judged)
    report.runs = runs
    report.findings.sort(key=lambda f: (f.exchange or 0, f.event or 0))
    return report


def check_recording(
    spec: str,
    config: CheckConfig | None = None,
    *,
    make_session: SessionFactory = _watching,
    seen: Callable[[Recording], None] | None = None,
) -> SourceReport:
    """
    :func:`check_exchanges` over a HAR file; a file that cannot be read at all is the
    report's ``unreadable`` with its ``AGUI-R001`` finding, and a cut one is judged up to
    the cut, which is reported as ``AGUI-R001`` after its last complete exchange.
    ``make_session`` as for :func:`check_exchanges`; ``seen`` hears the recording read
    before it is judged (``aguikit view`` shows its requests and timing).

    .. versionadded:: 0.5.0
    """
    config = config or CheckConfig()
    try:
        recording = read_har(spec)
    except DecodeError as broken:
        report = SourceReport(spec, kind="conversation", unreadable=str(broken))
        where = broken.byte_offset
        _Thread(report, config, []).add(
            "AGUI-R001", None, broken.message, kind="decode", byte_offset=where
        )
        return report
    if seen is not None:
        seen(recording)
    report = check_exchanges(recording.exchanges, spec, config, make_session=make_session)
    cut = recording.cut
    if cut is not None:
        after = len(recording.exchanges) + 1
        _Thread(report, config, report.runs).add(
            "AGUI-R001", after, cut.message, kind="decode", byte_offset=cut.byte_offset
        )
    return report


_S = TypeVar("_S", bound=Session)


def seeded_session(request: Any, kind: Callable[..., _S]) -> _S:
    """
    The checker's recovering session for a response, starting from what its request sent
    (the messages that parse, and the state): a result for a call the history made, or a
    delta to state the client sent, is then judged as the agent meant it.  ``kind`` is
    :class:`~aguikit.session.Session`, a subclass, or a factory taking its keywords;
    ``aguikit proxy`` judges each answer live through one, as this module does afterwards.

    .. versionadded:: 0.5.0
    """
    body = request if isinstance(request, dict) else {}
    prior = []
    for item in body.get("messages", ()):
        try:
            prior.append(parse_message(item))
        except AguiError:
            continue  # AGUI-R002 said so
    return kind(
        verify=True,
        validate=True,
        keep_delivered=False,
        collect_issues=True,
        recover=True,
        messages=prior,
        state=body.get("state", {}),
    )


def check_request(exchange: Exchange, config: CheckConfig | None = None) -> list[Finding]:
    """
    The request side of one exchange alone (``AGUI-R002``, and ``AGUI-R010`` for a request
    declaring no version), for a caller that judges a request before its response exists
    (``aguikit proxy`` prints them as the request passes); :func:`check_exchanges` applies
    the same rules to a whole conversation.

    .. versionadded:: 0.5.0
    """
    report = SourceReport("request", kind="conversation")
    _Thread(report, config or CheckConfig(), []).request(exchange)
    return report.findings


def live_session(request: Any) -> Session:
    """
    The session to feed one response's events to as they arrive (``aguikit proxy``'s live
    check, :class:`aguikit.checker.StreamCheck`), so that :func:`judge_ended` can apply
    the thread rules to what it folded instead of reading the response again: the
    checker's recovering session seeded from the request when it is a valid
    ``RunAgentInput`` (as :func:`check_exchanges` seeds it), watching the snapshots, starts
    and finishes the thread rules read.

    .. versionadded:: 0.5.0
    """
    valid = isinstance(request, dict) and next(_input_issues(request), None) is None
    return seeded_session(request if valid else {}, Watching)


def judge_ended(
    current: Judged, before: Judged | None, config: CheckConfig | None = None
) -> list[Finding]:
    """
    The thread rules for one exchange whose response was judged live and has ended
    (``current``, from :meth:`Judged.live`): what its own fold says (``AGUI-R008``, the
    producer's ``AGUI-R010``) and what its request owed ``before``, the thread's previous
    exchange (``AGUI-R003``-``R007``, ``R009``, ``R011``-``R013``).  These are the findings
    :func:`check_exchanges` gives this exchange after ``before``, less the request's own
    (:func:`check_request`) and the stream's (the live check's), in the same order.

    Nothing is read again: the thread rules read the sessions the live checks folded, so
    there is one fold per response, and their cost is that of the messages compared, not
    of the events streamed.

    .. versionadded:: 0.5.0
    """
    report = SourceReport(current.exchange.url or "exchange", kind="conversation")
    rules = _Thread(report, config or CheckConfig(), [])
    exchange = current.exchange
    if current.session is not None:
        rules.folded(exchange.number, current.session)
    if before is not None and before.served and isinstance(exchange.request, dict):
        rules.follows(before, exchange)
    rules.versions([current] if before is None else [before, current], last=True)
    report.findings.sort(key=lambda f: f.event or 0)
    return report.findings
