"""
``aguikit proxy``: a reverse proxy between a UI and an agent that forwards every byte and
judges the traffic on the side.

The failures people meet between two implementations are on live traffic: a request the
client built wrongly, a stream the agent broke half-way, a proxy that held the events back.
A checker that reads a file after the fact sees none of the request side and none of the
timing.  :class:`ProxyApp` sits on the wire instead:

* every request and answer is forwarded as it is (method, path, query, headers in order,
  body; status, headers, body), each chunk of the answer written downstream the moment it
  arrives, still compressed if the agent compressed it; only hop-by-hop headers
  (``Connection``, ``Transfer-Encoding``...) are left to each side's HTTP stack, as
  RFC 9110 requires of any intermediary;
* what it forwards is judged *after* it is written, with the same catalogue as
  ``aguikit check``: the request body against ``RunAgentInput``, the answer through a
  recovering session (:class:`aguikit.checker.StreamCheck`), each finding printed as it
  happens with its exchange and event; a bug in the judging is reported once and judging
  stops for that exchange, the forwarding never notices;
* ``--record DIR`` writes each thread as a HAR 1.2 file (:class:`HarRecorder`; the
  contract is ``docs/conversations.md``, "The recording format"), with each event's
  arrival from upstream and its departure downstream.

The HTTP is uvicorn's (server side) and httpx's (client side, through
:func:`aguikit.transport.http.aforward`); nothing here parses HTTP.
What it deliberately does not do: change traffic (no header added, no event repaired),
retry, TLS termination, WebSockets.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import contextlib
import datetime
import hashlib
import itertools
import json
import re
import secrets
import sys
import time
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import IO, Any, Final, TextIO

import attrs
import httpx

from . import _observe
from .catalogue import RULES_BY_ID, render_message
from .checker import CheckConfig, Finding, StreamCheck, Where
from .chunks import ChunkNormalizer
from .conversation import Exchange, Judged, check_request, judge_ended, live_session
from .errors import AguiError, DecodeError, TransportError
from .jsonio import loads
from .proto import decode_message
from .session import Session
from .transport.http import aforward, aforward_client, aread
from .transport.jsonl import MEDIA_TYPE as JSONL_MEDIA_TYPE
from .transport.jsonl import JSONLDecoder
from .transport.proto import MEDIA_TYPE as PROTO_MEDIA_TYPE
from .transport.proto import FrameDecoder
from .transport.sse import MEDIA_TYPE as SSE_MEDIA_TYPE
from .transport.sse import SSEDecoder, frame_object
from .wire import parse_event

__all__ = [
    "Flow",
    "HarRecorder",
    "ProxyApp",
    "Summary",
    "serve",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers that describe one connection, not the message (RFC 9110 7.6.1): each side's
HTTP stack writes its own, so forwarding them would describe the wrong connection."""

_REQUEST_DROPPED: Final = HOP_BY_HOP | {b"host", b"content-length"}
"""``Host`` names the proxy, and httpx writes it (and the length) for the upstream."""

THREADS_KEPT: Final = 1000
"""How many threads' last exchange (request and answer) the proxy keeps for the thread
rules; a thread quiet for longer than this many others is judged afresh when it returns,
so memory stays bounded on a proxy that runs for days."""

WRITE_INTERVAL: Final = 0.25
"""Seconds: a streaming entry is rewritten in its recording at most this often."""

WRITE_SHARE: Final = 0.02
"""The most of the loop's time one recording file's rewrites may take while its answers
stream: a file whose last write took ``t`` seconds is rewritten again no sooner than
``t / WRITE_SHARE`` later (and never sooner than :data:`WRITE_INTERVAL`)."""

JUDGE_DELAY: Final = 0.1
"""Seconds the reads forwarded are left before they are judged, all answers' together.

Judging a read the moment it is forwarded costs about three times what judging the same
events in a batch costs: between two reads of a stream the worker runs the HTTP stacks
and the machine runs other processes, so each event's judging starts cold.  Judged every
100 ms, the reads of all the answers that arrived meanwhile go through the decoders and
the checker one after another (a stream's reads in one feed when nothing records them),
and no forwarding waits behind a judging between two of its reads.  At 20 ms a quiet
proxy (5 streams, 250 events a second) still judged a handful of reads per batch, each
cold: judging over forwarding was x1.43-x1.45 per event there, x1.13-x1.23 at 100 ms
(``bench/bench_proxy.py --streams 5``, ``docs/proxy.md``, "Cost").  A finding is printed
at most this much later than it could have been, still well within what a person watching
the console notices; an answer's last reads are judged as soon as it ends, before the
thread rules read what its check folded."""

JUDGE_SLICE: Final = 0.001
"""Seconds a batch of judging may hold the event loop before it lets the forwarding run
(:data:`JUDGE_GAP`): a batch never delays a read by more than this (and one answer's
reads)."""

JUDGE_GAP: Final = 0.002
"""Seconds the loop is left to the forwarding between two slices of a batch.  Forwarding
one event takes several turns of the loop (the upstream read wakes its task, which writes
downstream), so a next slice queued at once would sit between each two of them: at 100
streams a batch then added its whole length to the reads forwarded during it (p99 16 ms
on a quiet machine).  With the gap, judging takes at most a third of the loop while a
batch lasts, about twice what 100 streams of judging need."""

_MEDIA_KINDS: Final = {
    SSE_MEDIA_TYPE: "sse",
    JSONL_MEDIA_TYPE: "jsonl",
    "application/x-ndjson": "jsonl",
    PROTO_MEDIA_TYPE: "proto",
}


def _now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def _media(headers: list[tuple[bytes, bytes]]) -> tuple[str | None, str | None]:
    """The media type (lower case, no parameters) and content encoding of ``headers``."""
    media = encoding = None
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-type":
            media = value.decode("latin-1").split(";", 1)[0].strip().lower()
        elif lowered == b"content-encoding":
            encoding = value.decode("latin-1").strip().lower()
    return media, encoding


def _har_headers(headers: list[tuple[bytes, bytes]]) -> list[dict[str, str]]:
    return [{"name": n.decode("latin-1"), "value": v.decode("latin-1")} for n, v in headers]


def _body_text(body: bytes, binary: bool) -> dict[str, str]:
    """HAR ``text`` for ``body``: UTF-8 text as is, anything else base64 of the bytes."""
    if not binary:
        with contextlib.suppress(UnicodeDecodeError):
            return {"text": body.decode("utf-8")}
    return {"text": base64.b64encode(body).decode("ascii"), "encoding": "base64"}


@attrs.define
class Flow:
    """
    One request and its answer as they pass the proxy (mitmproxy's word for it): what the
    recording writes, what the thread rules judge once it ends, and what the summary
    counts.  Times are ``time.perf_counter`` seconds; ``events`` holds, per event,
    ``(end, upstream_ms, downstream_ms)`` (``docs/conversations.md``, "The recording
    format").
    """

    number: int
    method: str
    url: str
    request_headers: list[tuple[bytes, bytes]]
    request_body: bytes
    started: float
    started_iso: str
    thread_id: str | None = None
    run_id: str | None = None
    status: int = 0
    reason: str = ""
    http_version: str = "HTTP/1.1"
    response_headers: list[tuple[bytes, bytes]] = attrs.Factory(list)
    media: str | None = None
    body: bytearray = attrs.Factory(bytearray)
    first_byte: float | None = None
    events: list[tuple[int, float, float]] = attrs.Factory(list)
    complete: bool = False
    finished: float | None = None
    error: str | None = None
    request: Exchange | None = None
    """The request as the conversation reader has it, once judged."""
    session: Session | None = None
    """The session the live check folded the answer into, for the thread rules (``None``
    when the answer was not read, or its judging failed)."""

    def har_request(self) -> dict[str, Any]:
        """The HAR entry's ``request``."""
        request_media, _ = _media(self.request_headers)
        request: dict[str, Any] = {
            "method": self.method,
            "url": self.url,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": _har_headers(self.request_headers),
            "queryString": [
                {"name": k, "value": v} for k, v in httpx.URL(self.url).params.multi_items()
            ],
            "headersSize": -1,
            "bodySize": len(self.request_body),
        }
        if self.request_body or self.method not in ("GET", "HEAD"):
            text = _body_text(self.request_body, False)
            request["postData"] = {"mimeType": request_media or "", "text": text["text"]}
            if "encoding" in text:
                request["postData"]["_encoding"] = "base64"
        return request

    def har(self, grown: _Grown | None = None) -> dict[str, Any]:
        """The HAR 1.2 entry, with aguikit's timing under ``_aguikit``.  With ``grown``
        (the recording's writer), the request, the response's text and the per-event
        times are placeholders, which ``grown``'s JSON text replaces once dumped."""
        end = self.finished if self.finished is not None else time.perf_counter()
        wait = ((self.first_byte or end) - self.started) * 1000
        total = (end - self.started) * 1000
        request: Any = self.har_request() if grown is None else _REQUEST_SLOT
        content: dict[str, Any]
        if grown is None:
            body = bytes(self.body)
            size = len(body)
            content = {"size": size, "mimeType": self.media or ""}
            content.update(_body_text(body, self.media == PROTO_MEDIA_TYPE))
            times: Any = _times(self.events)
        else:
            size = grown.covered
            content = {"size": size, "mimeType": self.media or "", "text": _TEXT_SLOT}
            if grown.base64:
                content["encoding"] = "base64"
            times = _EVENTS_SLOT
        entry: dict[str, Any] = {
            "startedDateTime": self.started_iso,
            "time": round(total, 3),
            "request": request,
            "response": {
                "status": self.status,
                "statusText": self.reason,
                "httpVersion": self.http_version,
                "cookies": [],
                "headers": _har_headers(self.response_headers),
                "content": content,
                "redirectURL": "",
                "headersSize": -1,
                "bodySize": size,
            },
            "cache": {},
            "timings": {
                "send": 0,
                "wait": round(wait, 3),
                "receive": round(max(total - wait, 0.0), 3),
            },
            "_aguikit": {
                "version": 1,
                "threadId": self.thread_id,
                "runId": self.run_id,
                "events": times,
                "complete": self.complete,
            },
        }
        if self.error is not None:
            entry["_aguikit"]["error"] = self.error
        return entry


def _times(events: list[tuple[int, float, float]]) -> list[dict[str, Any]]:
    """The recording's per-event times (``_aguikit.events``) of ``events``."""
    return [
        {"end": end, "upstreamMs": round(up, 3), "downstreamMs": round(down, 3)}
        for end, up, down in events
    ]


_NONCE: Final = secrets.token_hex(16)
_TEXT_SLOT: Final = f"\x00aguikit-text-{_NONCE}\x00"
_EVENTS_SLOT: Final = f"\x00aguikit-events-{_NONCE}\x00"
_REQUEST_SLOT: Final = f"\x00aguikit-request-{_NONCE}\x00"
"""Placeholders an open entry is dumped with, then replaced by its grown JSON text: the
process's random nonce keeps any string the traffic carries from being taken for one."""
_TEXT_SLOT_JSON: Final = json.dumps(_TEXT_SLOT).encode("ascii")
_EVENTS_SLOT_JSON: Final = json.dumps(_EVENTS_SLOT).encode("ascii")
_REQUEST_SLOT_JSON: Final = json.dumps(_REQUEST_SLOT).encode("ascii")


class _Grown:
    """
    An entry as the recording writes it, its growing parts kept as their JSON text and
    extended by what arrived since the last write: the body's HAR text and the per-event
    times (the request's JSON is made once).  Writing the entry then costs what arrived
    plus copying bytes, where encoding the whole body and every event's times again made
    each rewrite dearer as the answer grew (the recording proxy fell behind at 100
    streams), and the final write of every answer ending at once held the loop.  The
    bytes are those of dumping :meth:`Flow.har` whole (``tests/test_proxy_recording.py``).

    While the answer streams, the text covers the body up to its last complete character
    (UTF-8) or three-byte group (base64): ``covered`` bytes, which ``size`` and
    ``bodySize`` give; a body that stops being UTF-8 is base64 from then on, as the final
    entry would be.
    """

    def __init__(self) -> None:
        self.base64 = False
        self.covered = 0
        self.read = 0  # bytes given to the UTF-8 decoder
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = bytearray()  # JSON-escaped, no quotes
        self.events = 0
        self.times = bytearray()  # the times' JSON, no brackets
        self.request: bytes | None = None

    def take(self, flow: Flow) -> None:
        """Extend the text and the times by what ``flow`` got since the last call (all of
        it once ``flow`` finished)."""
        body = flow.body
        final = flow.finished is not None
        if not self.base64 and flow.media == PROTO_MEDIA_TYPE:
            # written first when the request came, before the answer's type was known
            self.base64 = True
            self.covered = 0
            self.text.clear()
        if not self.base64 and (len(body) > self.read or final):
            new = bytes(body[self.read :])
            self.read = len(body)
            try:
                text = self.decoder.decode(new, final)
            except UnicodeDecodeError:
                self.base64 = True
                self.covered = 0
                self.text.clear()
            else:
                self.text += json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")
                self.covered = self.read - len(self.decoder.getstate()[0])
        if self.base64:
            whole = len(body) if final else len(body) - len(body) % 3
            if whole > self.covered:
                self.text += base64.b64encode(body[self.covered : whole])
                self.covered = whole
        if len(flow.events) > self.events:
            new_times = json.dumps(_times(flow.events[self.events :]))[1:-1]
            if self.events:
                self.times += b", "
            self.times += new_times.encode("ascii")
            self.events = len(flow.events)
        if self.request is None:
            self.request = json.dumps(flow.har_request(), ensure_ascii=False).encode("utf-8")

    def entry(self, flow: Flow) -> bytes:
        """``flow``'s entry as it stands, in JSON."""
        self.take(flow)
        assert self.request is not None
        skeleton = json.dumps(flow.har(self), ensure_ascii=False).encode("utf-8")
        # the slots come in the entry's order (request, response, _aguikit): one copy
        request = skeleton.index(_REQUEST_SLOT_JSON)
        text = skeleton.index(_TEXT_SLOT_JSON, request)
        times = skeleton.index(_EVENTS_SLOT_JSON, text)
        return b"".join(
            (
                skeleton[:request],
                self.request,
                skeleton[request + len(_REQUEST_SLOT_JSON) : text],
                b'"',
                self.text,
                b'"',
                skeleton[text + len(_TEXT_SLOT_JSON) : times],
                b"[",
                self.times,
                b"]",
                skeleton[times + len(_EVENTS_SLOT_JSON) :],
            )
        )


class _HarFile:
    """
    One recording file, kept a complete HAR document after every write: the entries
    already over are written once; the ones still streaming are rewritten after them
    (truncate, write, flush), from their grown JSON text (:class:`_Grown`), so a crash
    leaves every finished entry and the last state of the open ones.
    """

    def __init__(self, path: Path, creator: dict[str, str]) -> None:
        self.path = path
        self.fp: IO[bytes] = path.open("w+b")
        head = {"log": {"version": "1.2", "creator": creator, "pages": [], "entries": []}}
        text = json.dumps(head, ensure_ascii=False)
        self.fp.write(text[: text.rindex("[]") + 1].encode("utf-8") + b"\n")
        self.settled_end = self.fp.tell()
        self.settled = 0
        self.pending: list[Flow] = []
        self.grown: dict[int, _Grown] = {}  # by id() of a pending flow
        self.written = 0.0
        self.cost = 0.0  # seconds the last write took

    def _entry(self, flow: Flow) -> bytes:
        grown = self.grown.get(id(flow))
        if grown is None:
            grown = self.grown[id(flow)] = _Grown()
        return grown.entry(flow)

    def due(self) -> bool:
        """Whether an open entry's rewrite is due (:data:`WRITE_INTERVAL`,
        :data:`WRITE_SHARE`)."""
        return time.monotonic() - self.written >= max(WRITE_INTERVAL, self.cost / WRITE_SHARE)

    def write(self) -> None:
        began = time.perf_counter()
        fp = self.fp
        fp.seek(self.settled_end)
        while self.pending and self.pending[0].finished is not None:
            done = self.pending[0]
            data = (b",\n" if self.settled else b"") + self._entry(done)
            del self.pending[0], self.grown[id(done)]
            fp.write(data)
            self.settled_end += len(data)
            self.settled += 1
        tail = b"".join(
            (b",\n" if self.settled or i else b"") + self._entry(e)
            for i, e in enumerate(self.pending)
        )
        fp.write(tail + b"\n]}}\n")
        fp.truncate()
        fp.flush()
        self.written = time.monotonic()
        self.cost = time.perf_counter() - began

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.write()
        self.fp.close()


def _safe_name(thread: str | None) -> str:
    if thread is None:
        return "no-thread"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", thread)[:100].lstrip(".") or "thread"
    if safe != thread:  # two ids that clean up alike must not share a file
        safe += "-" + hashlib.sha256(thread.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return safe


class HarRecorder:
    """
    Writes each thread's exchanges to ``DIR/<thread id>.har`` (a file per thread, a new
    name when one exists), incrementally (``docs/conversations.md``, "The recording
    format").

    .. versionadded:: 0.5.0
    """

    def __init__(self, directory: Path, creator: dict[str, str]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.creator = creator
        self.files: dict[str | None, _HarFile] = {}

    def _file(self, thread: str | None) -> _HarFile:
        har = self.files.get(thread)
        if har is None:
            base = _safe_name(thread)
            path = self.directory / f"{base}.har"
            for n in itertools.count(2):
                if not path.exists():
                    break
                path = self.directory / f"{base}-{n}.har"
            har = self.files[thread] = _HarFile(path, self.creator)
        return har

    def update(self, exchange: Flow, *, force: bool = False) -> None:
        """Write ``exchange``'s latest state: at once when ``force`` or it has finished,
        else when the file's rewrite is due (at most every :data:`WRITE_INTERVAL` seconds,
        and :data:`WRITE_SHARE` of the time)."""
        har = self._file(exchange.thread_id)
        if exchange not in har.pending:
            har.pending.append(exchange)
            force = True
        if force or exchange.finished is not None or har.due():
            har.write()

    def close(self) -> None:
        """Write what is pending and close every file."""
        for har in self.files.values():
            har.close()

    @property
    def paths(self) -> list[Path]:
        """The files written so far."""
        return [har.path for har in self.files.values()]


class _Events:
    """Push decoding of one answer into ``(wire dict, Where, end offset)``, by media type."""

    def __init__(self, kind: str, source: str, config: CheckConfig) -> None:
        self.kind = kind
        self.source = source
        self.config = config
        self.seen = 0  # bytes fed
        self.sse = (
            SSEDecoder(source=source, max_frame_bytes=config.max_frame_bytes)
            if kind == "sse"
            else None
        )
        self.jsonl = (
            JSONLDecoder(
                source=source, max_line_bytes=config.max_line_bytes, max_depth=config.max_depth
            )
            if kind == "jsonl"
            else None
        )
        self.frames = FrameDecoder(source=source) if kind == "proto" else None

    def feed(self, chunk: bytes | None) -> list[tuple[dict[str, Any], Where, int]]:
        """The events ``chunk`` completed (``None``: the end of the answer)."""
        if chunk is not None:
            self.seen += len(chunk)
        end = self.seen
        out: list[tuple[dict[str, Any], Where, int]] = []
        if self.sse is not None:
            frames = self.sse.feed(chunk) if chunk is not None else self.sse.close()
            depth = self.config.max_depth
            last = len(frames) - 1
            for i, frame in enumerate(frames):
                after = frames[i + 1].byte_offset if i < last else end
                obj = frame_object(frame, source=self.source, max_depth=depth)
                out.append((obj, (frame.line, frame.number, frame.byte_offset), after))
        elif self.jsonl is not None:
            objects = self.jsonl.feed(chunk) if chunk is not None else self.jsonl.close()
            positions = self.jsonl.last_positions
            for i, (obj, (line, offset)) in enumerate(zip(objects, positions, strict=True)):
                after = positions[i + 1][1] if i + 1 < len(positions) else end
                out.append((obj, (line, None, offset), after))
        elif self.frames is not None:
            if chunk is None:
                self.frames.close()
                return out
            for payload, number, offset in self.frames.feed(chunk):
                wire = decode_message(payload, source=self.source, frame=number, byte_offset=offset)
                out.append((wire, (None, number, offset), offset + 4 + len(payload)))
        return out


@attrs.define
class Summary:
    """What the proxy saw, for the line it prints on exit."""

    exchanges: int = 0
    events: int = 0
    findings: dict[str, int] = attrs.Factory(dict)
    internal: int = 0
    reading: bool = True
    """Whether events are decoded at all (not when forwarding alone: no judging, no record)."""

    def render(self) -> str:
        """One line per rule found, worst first, then the totals."""
        lines = []
        for rule_id, count in sorted(
            self.findings.items(), key=lambda item: (-_RANK[RULES_BY_ID[item[0]].severity], item[0])
        ):
            rule = RULES_BY_ID[rule_id]
            lines.append(f"  {rule_id} {rule.symbol} ({rule.severity.value}): {count}")
        total = sum(self.findings.values())
        events = f"{self.events} events" if self.reading else "events not read"
        head = f"aguikit proxy: {self.exchanges} exchanges, {events}, {total} findings" + (
            f", {self.internal} judging failures" if self.internal else ""
        )
        return "\n".join([head, *lines])


_RANK: Final = {"error": 2, "warning": 1, "info": 0}


class ProxyApp:
    """
    The ASGI app of ``aguikit proxy``: forwards to ``upstream``, judges, records.

    A request to ``/`` goes to ``upstream`` itself; any other path is appended to it (so
    ``--upstream http://agent/api`` serves ``/api`` at ``/`` and ``/api/x`` at ``/x``).

    Args:
        upstream: The agent's URL.
        out: Where findings are printed as they happen (one line each).
        record: A directory to write HAR recordings into, or ``None``.
        config: Which rules and limits judge the traffic (``aguikit check``'s settings).
        validate: ``False`` forwards and records without judging (the benchmark's
            baseline, and a user who only wants the recording).
        telemetry: An :class:`aguikit.otel.Telemetry`: one ``SERVER`` span per run
            exchange (``docs/otel.md``, "The proxy"), a child of the caller's
            ``traceparent``, linking the agent's run, with the exchange's own timing
            points; ``None`` uses the one ``AguikitInstrumentor().instrument()``
            installed, if any.  The request is forwarded unchanged either way.

    .. versionadded:: 0.5.0
    """

    def __init__(
        self,
        upstream: str,
        *,
        out: TextIO | None = None,
        record: Path | None = None,
        config: CheckConfig | None = None,
        validate: bool = True,
        timeout: float | None = None,
        telemetry: _observe.Observe | None = None,
    ) -> None:
        self.upstream = upstream
        self.telemetry = telemetry
        self.out = out if out is not None else sys.stdout
        self.config = config or CheckConfig()
        self.validate = validate
        self.timeout = timeout
        self.summary = Summary(reading=validate or record is not None)
        self.recorder: HarRecorder | None = None
        if record is not None:
            from . import __version__

            self.recorder = HarRecorder(record, {"name": "aguikit", "version": __version__})
        self._numbers = itertools.count(1)
        self._client: httpx.AsyncClient | None = None
        self._threads: dict[str | None, Judged] = {}  # each thread's last exchange, judged
        self._judging: set[asyncio.Future[list[Finding]]] = set()  # thread rules running
        self._waiting: dict[_Watch, None] = {}  # answers with reads not judged yet, in order
        self._timer: asyncio.Handle | None = None

    # -- plumbing --------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = aforward_client(
                httpx.Timeout(self.timeout, connect=10.0),
                httpx.Limits(max_connections=None, max_keepalive_connections=100),
            )
        return self._client

    async def aclose(self) -> None:
        """Close the upstream connections and the recordings, and print the summary (uvicorn
        calls this on shutdown, before it re-raises the signal that stopped it)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self._judge_waiting(None)
        if self._judging:  # the thread rules of the last exchanges belong in the summary
            await asyncio.wait(set(self._judging), timeout=10)
            await asyncio.sleep(0)  # let their exchanges print what they found
        lines = [self.summary.render()]
        if self.recorder is not None:
            self.recorder.close()
            lines += [f"  recorded {path}" for path in self.recorder.paths]
        print("\n".join(lines), file=self.out, flush=True)

    def target(self, path: str, query: bytes) -> str:
        """The upstream URL a request for ``path`` goes to."""
        base = self.upstream
        url = base if path in ("", "/") else base.rstrip("/") + path
        return url + ("?" + query.decode("latin-1") if query else "")

    def report(self, exchange: Flow, findings: list[Finding], where: str = "") -> None:
        """Print ``findings`` of ``exchange`` now, and count them."""
        for finding in findings:
            counts = self.summary.findings
            counts[finding.rule] = counts.get(finding.rule, 0) + 1
            parts = [f"[exchange {exchange.number}{where}]", finding.rule, finding.severity.value]
            if finding.event is not None:
                parts.append(f"event {finding.event}")
            if finding.event_type:
                parts.append(finding.event_type)
            if finding.pointer:
                parts.append(finding.pointer)
            print(" ".join(parts) + ": " + finding.message, file=self.out, flush=True)

    def internal(self, exchange: Flow, exc: BaseException) -> None:
        """A bug in the judging: said once; that exchange is no longer judged."""
        self.summary.internal += 1
        print(
            f"[exchange {exchange.number}] aguikit could not judge this exchange "
            f"({type(exc).__name__}: {exc}); it is still forwarded",
            file=self.out,
            flush=True,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, self.aclose)
            return
        if scope["type"] != "http":
            return  # WebSockets are not proxied: uvicorn refuses the handshake
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        exchange = Flow(
            next(self._numbers),
            scope["method"],
            self.target(scope.get("path", "/"), scope.get("query_string", b"")),
            [(n, v) for n, v in scope["headers"] if n.lower() not in _REQUEST_DROPPED],
            bytes(body),
            time.perf_counter(),
            _now_iso(),
        )
        self.summary.exchanges += 1
        self._request(exchange)
        observer = self._observer(exchange, scope["headers"])
        forward = asyncio.ensure_future(self._forward(exchange, send, observer))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({forward, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not forward.done():  # the UI left: stop reading the agent (it sees us go)
                forward.cancel()
                exchange.error = exchange.error or "the client disconnected"
                with contextlib.suppress(asyncio.CancelledError):
                    await forward
            gone.cancel()
            self._finish(exchange)
            if observer is not None:
                observer.end()  # the span ends with the last byte the UI got
        if exchange.request is not None and self.validate:
            ended = self._ended(exchange)
            judging = asyncio.ensure_future(asyncio.to_thread(self._thread_rules, *ended))
            self._judging.add(judging)
            try:
                found = await judging
            except Exception as exc:  # judging never breaks forwarding
                self.internal(exchange, exc)
            else:
                self.report(exchange, found)
            finally:
                self._judging.discard(judging)
        # An upstream cut mid-body returns without the body's end: uvicorn then closes the
        # UI's connection without the final chunk, the same cut the UI would have seen.

    def _observer(
        self, exchange: Flow, headers: list[tuple[bytes, bytes]]
    ) -> _observe.RunObserver | None:
        """The telemetry's observer of a run request's exchange (``None`` for any other
        request, or without telemetry)."""
        request = exchange.request
        if request is None or not isinstance(request.request, dict):
            return None
        carrier = {n.decode("latin-1"): v.decode("latin-1") for n, v in headers}
        return _observe.observe(self.telemetry, request.request, side="proxy", headers=carrier)

    # -- the request -------------------------------------------------------------------------

    def _request(self, exchange: Flow) -> None:
        if exchange.method != "POST":
            self._record(exchange, force=True)
            return
        try:
            findings = self._judge_request(exchange)
        except Exception as exc:  # judging never breaks forwarding
            self.internal(exchange, exc)
        else:
            self.report(exchange, findings, " request")
        self._record(exchange, force=True)

    def _judge_request(self, flow: Flow) -> list[Finding]:
        config = self.config
        text = flow.request_body.decode("utf-8", "replace")
        try:
            data: Any = loads(flow.request_body, max_depth=config.max_depth, source="request")
        except AguiError:
            data = None  # the request rules say "the body is not JSON"
        flow.request = Exchange(
            1, data, b"", request_text=text if flow.request_body else None, url=flow.url
        )
        flow.thread_id, flow.run_id = flow.request.thread_id, flow.request.run_id
        if not self.validate:
            return []
        return check_request(flow.request, config)

    def _ended(self, flow: Flow) -> tuple[Judged, Judged | None]:
        """
        ``flow`` as the thread rules have it once its answer ended (its request and what the
        live check folded), and the thread's previous exchange; a complete answer that
        served a run becomes the thread's last exchange.  Taken here, on the event loop, so
        the threads kept change in one place and the next request always finds this one.
        """
        request = flow.request
        assert request is not None
        current = Judged.live(
            attrs.evolve(
                request, status=flow.status, media_type=flow.media, complete=flow.complete
            ),
            flow.session,
        )
        threads = self._threads
        before = threads.get(flow.thread_id)
        if current.served and flow.complete and isinstance(request.request, dict):
            # as check_exchanges holds a request to the last run served before it
            threads.pop(flow.thread_id, None)  # the most recent thread goes last
            threads[flow.thread_id] = current
            while len(threads) > THREADS_KEPT:  # the least recently active thread goes
                del threads[next(iter(threads))]
        return current, before

    def _thread_rules(self, current: Judged, before: Judged | None) -> list[Finding]:
        """
        The thread rules between this run and the thread's previous one (an interrupt left
        unanswered, an encrypted value not returned, a history re-minted...), by
        :func:`aguikit.conversation.judge_ended` on what the live checks folded (no answer
        is read twice); only the ``AGUI-R`` findings about this exchange are new (its
        request was judged as it passed, its events as they arrived).
        """
        if not isinstance(current.exchange.request, dict):
            return []
        return judge_ended(current, before, self.config)

    # -- the answer ----------------------------------------------------------------------

    async def _forward(
        self, exchange: Flow, send: Send, observer: _observe.RunObserver | None
    ) -> None:
        try:
            async with aforward(
                self._http(),
                exchange.method,
                exchange.url,
                exchange.request_headers,
                exchange.request_body,
            ) as response:
                await self._answer(exchange, response, send, observer)
        except TransportError as failed:
            if observer is not None:
                observer.failed(failed)
            if exchange.status:
                return  # mid-body: already judged and recorded by _answer
            self.report(exchange, _findings(self.config, failed.rule, "transport", str(failed)))
            exchange.error = str(failed)
            exchange.status, exchange.reason = 502, "Bad Gateway"
            text = f"aguikit proxy: the agent could not be reached: {failed}\n".encode()
            exchange.response_headers = [(b"content-type", b"text/plain; charset=utf-8")]
            exchange.media = "text/plain"
            exchange.body += text
            await send(
                {
                    "type": "http.response.start",
                    "status": 502,
                    "headers": [*exchange.response_headers, (b"content-length", b"%d" % len(text))],
                }
            )
            await send({"type": "http.response.body", "body": text})
            exchange.complete = True

    async def _answer(
        self,
        exchange: Flow,
        response: httpx.Response,
        send: Send,
        observer: _observe.RunObserver | None,
    ) -> None:
        headers = [(n, v) for n, v in response.headers.raw if n.lower() not in HOP_BY_HOP]
        exchange.status, exchange.reason = response.status_code, response.reason_phrase
        exchange.http_version = response.http_version
        exchange.response_headers = headers
        media, encoding = _media(headers)
        exchange.media = media
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": headers}
        )
        exchange.first_byte = time.perf_counter()
        if observer is not None:
            observer.mark("agui.upstream.response")
        watch = _Watch(self, exchange, media, encoding, observer)
        started = exchange.started
        first = observer is not None
        try:
            try:
                async for chunk in aread(response):
                    upstream = time.perf_counter()
                    if first and observer is not None:
                        observer.mark("agui.upstream.first_byte")
                        first = False
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    watch.chunk(
                        chunk, (upstream - started) * 1000, (time.perf_counter() - started) * 1000
                    )
            except TransportError as cut:
                watch.end(cut)
                exchange.error = str(cut)
                return
            self._settle(watch)  # the events are judged before the UI hears the answer end
            await send({"type": "http.response.body", "body": b""})
            exchange.complete = True
            watch.end(None)
        finally:
            # the UI left mid-answer: what was forwarded is judged before the thread rules
            # read the fold, and before the telemetry's span ends
            self._settle(watch)

    def _later(self, watch: _Watch) -> None:
        """``watch`` has reads to judge: in the next batch (:data:`JUDGE_DELAY`)."""
        self._waiting[watch] = None
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(JUDGE_DELAY, self._judge_waiting)

    def _judge_waiting(self, budget: float | None = JUDGE_SLICE) -> None:
        """Judge the answers' waiting reads, answer by answer in the order they came, for
        at most ``budget`` seconds before the forwarding has its turn (``None``: all)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = time.perf_counter() + budget if budget is not None else None
        waiting = self._waiting
        while waiting:
            watch = next(iter(waiting))
            del waiting[watch]
            try:
                watch.judge()
            except Exception as exc:  # judging never breaks forwarding, nor the next batch
                watch._stop(exc)
            if deadline is not None and waiting and time.perf_counter() > deadline:
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(JUDGE_GAP, self._judge_waiting)
                return

    def _settle(self, watch: _Watch) -> None:
        """Judge ``watch``'s waiting reads now (its answer ended or was abandoned)."""
        if self._waiting.pop(watch, 0) is None:
            watch.judge()

    def _record(self, exchange: Flow, *, force: bool = False) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.update(exchange, force=force)
        except OSError as exc:
            print(f"aguikit proxy: recording stopped: {exc}", file=self.out, flush=True)
            self.recorder = None

    def _finish(self, exchange: Flow) -> None:
        exchange.finished = time.perf_counter()
        self._record(exchange, force=True)


async def lifespan(receive: Receive, send: Send, shutdown: Callable[[], Awaitable[None]]) -> None:
    """The ASGI lifespan protocol for an app with nothing to start and ``shutdown`` to run."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _findings(
    config: CheckConfig,
    rule: str,
    kind: str,
    message: str,
    *,
    pointer: str | None = None,
    code: str | None = None,
) -> list[Finding]:
    if not config.enabled(rule):
        return []
    return [Finding(rule, config.severity_of(rule), kind, code or rule, message, pointer=pointer)]


class _Watch:
    """One answer judged and timed on the side of the forwarding."""

    def __init__(
        self,
        proxy: ProxyApp,
        exchange: Flow,
        media: str | None,
        encoding: str | None,
        observer: _observe.RunObserver | None = None,
    ) -> None:
        self.proxy = proxy
        self.exchange = exchange
        self.observer = observer
        self.normalizer = ChunkNormalizer() if observer is not None else None
        kind = _MEDIA_KINDS.get(media or "")
        self.judging = proxy.validate
        answered = 200 <= exchange.status < 300
        if kind is None and proxy.validate and exchange.run_id is not None and answered:
            # A run request answered with something no AG-UI reader can read (HTML from a
            # login page, a JSON error): said once, forwarded as it is.
            message = render_message("AGUI-T003", url=exchange.url, content_type=media)
            proxy.report(exchange, _findings(proxy.config, "AGUI-T003", "transport", message))
        self.inflate: Any = None
        if encoding in ("gzip", "x-gzip", "deflate"):
            self.inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        elif encoding not in (None, "identity"):
            kind = None  # br, zstd: forwarded and recorded, not read
        if not proxy.validate and proxy.recorder is None and observer is None:
            kind = None  # nothing reads the events: forwarding alone
        self.events = _Events(kind, exchange.url, proxy.config) if kind is not None else None
        self.waiting: list[tuple[bytes, float, float]] = []  # reads forwarded, not judged yet
        self.check: StreamCheck | None = None
        if self.events is not None and proxy.validate:
            # The live check folds into the session the thread rules read when the answer
            # ends (aguikit.conversation.judge_ended): one fold per answer.
            request = exchange.request.request if exchange.request is not None else None
            exchange.session = live_session(request)
            self.check = StreamCheck(exchange.url, proxy.config, session=exchange.session)

    def chunk(self, raw: bytes, upstream_ms: float, downstream_ms: float) -> None:
        """
        One read, already written downstream: recorded now, decoded and judged in the
        proxy's next batch (:data:`JUDGE_DELAY`).  The body and the per-event times are
        kept only for the recording (the thread rules read the live check's fold, never
        the body).
        """
        exchange = self.exchange
        data = raw
        if self.inflate is not None:
            try:
                data = self.inflate.decompress(raw)
            except zlib.error as exc:
                self.inflate = None
                self._stop(exc)
        recording = self.proxy.recorder is not None
        if recording:
            exchange.body += data
        if self.events is not None:
            self.waiting.append((data, upstream_ms, downstream_ms))
            self.proxy._later(self)
        if recording:
            self.proxy._record(exchange)

    def judge(self) -> None:
        """
        Decode and judge the reads waiting, in order; a read's events are judged together,
        their findings printed together.  Reads nothing records the times of are one feed
        (the decoders find the same events, at the same places, in fewer calls).
        """
        waiting, self.waiting = self.waiting, []
        if len(waiting) > 1 and self.proxy.recorder is None:
            waiting = [(b"".join(data for data, _, _ in waiting), *waiting[-1][1:])]
        for data, upstream_ms, downstream_ms in waiting:
            if self.events is None:
                return
            try:
                found = self.events.feed(data)
            except DecodeError as exc:
                self._close(exc)
            except Exception as exc:  # judging never breaks forwarding
                self._stop(exc)
            else:
                if found:
                    self._take(found, upstream_ms, downstream_ms)

    def _take(
        self,
        found: list[tuple[dict[str, Any], Where, int]],
        upstream_ms: float,
        downstream_ms: float,
    ) -> None:
        """Count, time (for the recording) and judge the events one read completed; the
        telemetry hears each event, then what judging it found, so a finding lands on the
        span before the run's end closes it."""
        self.proxy.summary.events += len(found)
        if self.proxy.recorder is not None:
            self.exchange.events += [(end, upstream_ms, downstream_ms) for _, _, end in found]
        observer = self.observer
        check = self.check if self.judging else None
        if check is None and observer is None:
            return
        findings: list[Finding] = []
        failed: Exception | None = None
        feed = check.feed if check is not None else None
        try:
            for wire, where, _ in found:
                if observer is not None:
                    self._tell(wire)
                if feed is not None:
                    new = feed(wire, where)
                    if not new:
                        continue  # most events: nothing found, nothing to tell
                    findings += new
                    if observer is not None:
                        for finding in new:
                            rule = RULES_BY_ID.get(finding.rule)
                            at = finding.event - 1 if finding.event is not None else None
                            observer.warning(rule.symbol if rule is not None else finding.rule, at)
        except Exception as exc:  # judging never breaks forwarding
            failed = exc
        try:
            if findings:
                self.proxy.report(self.exchange, findings)
        except Exception as exc:
            failed = failed or exc
        if failed is not None:
            self._stop(failed)

    def _tell(self, wire: dict[str, Any]) -> None:
        """The relayed event, typed and chunk-expanded, to the telemetry; one it cannot
        read (the judging reports why) is left out of the spans."""
        assert self.observer is not None and self.normalizer is not None
        try:
            expanded = self.normalizer.normalize(parse_event(wire))
        except AguiError:
            return
        for event in expanded:
            self.observer.event(event)

    def _stop(self, exc: BaseException) -> None:
        if self.judging:
            self.proxy.internal(self.exchange, exc)
        self.judging = False
        self.events = None
        self.exchange.session = None  # half a fold: no thread rules on it

    def _close(self, failure: DecodeError | TransportError | None) -> None:
        check, self.check, events, self.events = self.check, None, self.events, None
        if check is None or events is None or not self.judging:
            return
        try:
            self.proxy.report(self.exchange, check.close(failure))
        except Exception as exc:  # judging never breaks forwarding
            self.exchange.session = None
            self.proxy.internal(self.exchange, exc)

    def end(self, cut: TransportError | None) -> None:
        """The answer ended (``cut``: the upstream connection broke first)."""
        self.proxy._settle(self)
        if self.events is not None and cut is None:
            try:
                found = self.events.feed(None)
            except DecodeError as exc:
                self._close(exc)
                return
            except Exception as exc:
                self._stop(exc)
                return
            self._take(found, 0.0, 0.0)
        self._close(cut)


def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    out: TextIO | None = None,
) -> None:
    """
    Run ``app`` (a :class:`ProxyApp` or a replay) on uvicorn until interrupted; uvicorn
    adds no ``Server`` or ``Date`` header, so the answer's headers are the agent's.

    Raises:
        ImportError: uvicorn is not installed (``pip install 'aguikit[proxy]'``).
    """
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level="warning",
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    print(f"aguikit: listening on http://{host}:{port}", file=out or sys.stdout, flush=True)
    server.run()
