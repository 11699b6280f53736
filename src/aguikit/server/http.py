"""
Serve a run handler over HTTP: ``agui_endpoint(handler)`` for Starlette and FastAPI, and
``create_app(handler)`` for a one-line ASGI app.

What an agent server gets wrong in production is mostly not the protocol but the serving:
a proxy that buffers the stream until it ends, an idle connection a load balancer cuts
after 60 seconds, a handler that keeps generating (and paying for tokens) after the user
closed the tab, a fast model filling memory for a slow reader.  The endpoint does the
serving once:

* the request is checked before anything runs, and every refusal is an RFC 9457
  ``application/problem+json`` document: ``415`` unless ``Content-Type`` is JSON (so a
  cross-origin form post cannot start a run), ``413`` for a body over ``max_body_bytes``
  (read incrementally, never held whole), ``400`` when it is not JSON, ``422`` listing up
  to 100 problems with their JSON pointers (a lone surrogate included), explained in
  bounded time whatever the body (:mod:`aguikit.validate`); then the ``authorize`` hook
  (``401``/``403``); ``docs/limits.md`` has every status;
* the handler is ``async def handler(input, run)`` on a :class:`RunWriter`, or an async
  generator yielding events (the official SDK's pattern, its own ``RUN_STARTED`` and
  ``RUN_FINISHED`` included) fed to the same writer, so both are verified alike; anything
  else is refused when the endpoint is built;
* an exception in the handler reaches the client as a ``RUN_ERROR`` with a generic
  message and a stable code, and the server's log with its traceback (``on_error`` and
  ``expose_errors`` change what is sent);
* ``Accept`` picks the framing: SSE by default (each frame's ``data:`` line
  byte-identical to the official SDK's ``EventEncoder``, after the frame's ``id:`` when
  the run is logged), JSONL for ``application/jsonl`` / ``application/x-ndjson``,
  and length-prefixed protobuf (``application/vnd.ag-ui.event+proto``, the bytes
  ``@ag-ui/proto`` writes) for a client whose ``Accept`` names it; SSE for anything else,
  as the protobuf binding requires (never ``406``);
* ``Cache-Control: no-cache``, ``X-Accel-Buffering: no`` (nginx) and
  ``Connection: keep-alive``; an SSE comment after ``keepalive`` seconds of silence;
* every event is sent as it is written (one ASGI body message, which the server flushes);
* a queue between the handler and the socket, bounded in frames (``queue_size``) and in
  bytes (:data:`QUEUED_BYTES`): a slow reader blocks the handler's next ``emit`` (the
  server's own flow control blocks the send), so memory per stream is the queue plus
  the server's write buffer, whatever the handler produces (plus the run's event log,
  which keeps the whole run, up to the log's ``max_events``, for a resume);
* each run is bound to its connection by default, as the standard HTTP binding has it
  ("no resumption"): a disconnect cancels the handler at once (it sees
  :class:`asyncio.CancelledError` at its next ``await``, and nothing is written after
  it), so a client that stops a run stops paying for it;
* resumption is an extension a producer opts into by passing an event log (a
  :class:`~aguikit.server.eventlog.MemoryEventLog` for one process, a
  :class:`~aguikit.server.redis_log.RedisEventLog` for several workers) and that the
  answer declares (``X-AGUI-Resume``, and ``transport.resumable`` in the capabilities
  :func:`create_app` serves): each SSE frame carries its ``id:``, a client that lost its
  connection reconnects with ``Last-Event-ID`` and gets what it missed, then the rest
  live; a run nobody follows any more is cancelled once ``resume_grace`` seconds pass
  with no reader, and a client stops it at once with a cancel request (``X-AGUI-Cancel``);
  ``docs/resume.md`` is the protocol;
* a client that stops reading is treated as gone once it took nothing for
  ``send_timeout`` seconds while bytes waited for it (a reader-progress deadline:
  :class:`_Progress`), and an ending answer waits for its follower at most
  :data:`SETTLE_TIMEOUT` (a cancellation a library lost cannot hang it); a log that
  cannot answer a claim or a resume check is a ``503``; a logged run the endpoint stops
  on purpose ends with the cancelled outcome for whoever still reads it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import functools
import inspect
import json
import logging
import math
import re
import socket
import struct
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, Final, Literal, TypeVar

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._generated.models import AgentCapabilities, RunAgentInput
from .._generated.registry import PROTOCOL_VERSION
from .._observe import Observe
from ..catalogue import DECODE_RULES, render_message
from ..encode import encode_proto
from ..errors import DecodeError, short_repr
from ..jsonio import dumps_wire, find_lone_surrogate, loads_object
from ..limits import MAX_BODY_BYTES
from ..proto import MEDIA_TYPE as PROTO_MEDIA_TYPE
from ..receiver import compare_protocol_versions, strip_unknown
from ..transport import jsonl, sse
from ..validate import is_valid, iter_schema_errors, validate
from ..wire import parse_run_agent_input, to_wire
from .access import Access, Authorize, Denied, consult
from .eventlog import (
    CANCEL_POLL,
    EventLog,
    EventLogError,
    EventLogFull,
    MemoryEventLog,
    Owner,
    prelude,
)
from .prelude import gc_paused
from .threads import (
    THREAD_DAMAGED,
    THREAD_STORE_FAILED,
    THREAD_TOO_LARGE,
    THREAD_UNKNOWN,
    ThreadError,
    ThreadStore,
    merged,
    owned,
    restate,
)
from .writer import ErrorReport, Mode, RunWriter

__all__ = [
    "CANCEL_HEADER",
    "OWN_MEMORY_LOG",
    "PROBLEM_MEDIA_TYPE",
    "PROTOBUF_MEDIA_TYPE",
    "Handler",
    "agui_endpoint",
    "capabilities_endpoint",
    "connect_endpoint",
    "create_app",
    "delete_thread_endpoint",
    "negotiate",
]

Handler = (
    Callable[[RunAgentInput, RunWriter], Awaitable[None]]
    | Callable[[Any], AsyncIterator[Any]]
    | Callable[[Any, RunWriter], AsyncIterator[Any]]
)
"""``async def handler(input, run)``, answering one run request by emitting on ``run``;
or an async generator ``async def handler(input)`` (or ``(input, run)``) yielding its
events, as code written for the official SDK does, given an ``ag_ui.core.RunAgentInput``
when its first parameter is annotated so."""

PROBLEM_MEDIA_TYPE: Final = "application/problem+json"
"""RFC 9457: every refusal of the endpoint is a problem document of this type."""

PROTOBUF_MEDIA_TYPE: Final = PROTO_MEDIA_TYPE
"""The AG-UI protobuf framing (:mod:`aguikit.proto`), served when ``Accept`` prefers it."""

_JSONL_TYPES: Final = ("application/jsonl", "application/x-ndjson")
_SSE_RANGES: Final = (sse.MEDIA_TYPE, "text/*", "*/*")
_KEEPALIVE: Final = b": keep-alive\n\n"
JOIN_HEADER: Final = "x-agui-join"
"""``X-AGUI-Join: prelude`` with ``Last-Event-ID``: a late joiner asks for a consistent
start (see :func:`aguikit.server.eventlog.prelude`) instead of the log."""
RESUMABLE_HEADER: Final = "x-agui-resume"
"""Sent (value ``last-event-id``) by an endpoint with an event log: the run survives a
dropped connection and can be followed again with ``Last-Event-ID``."""
CANCEL_HEADER: Final = "x-agui-cancel"
"""``X-AGUI-Cancel: 1`` on a run request (the run's own body) asks the endpoint to cancel
that run rather than start or follow it: a resumable run outlives its connection, so
hanging up alone does not stop it at once (``docs/resume.md``, "Stopping a run")."""
_CANCEL_WAIT: Final = 3.0
"""Seconds a cancel request waits for the handler to end before answering anyway."""
LOGGER: Final = logging.getLogger("aguikit.server")
_DONE: Final[Any] = object()
"""Ends the frame queue: the run is over, or the client left."""
_TERMINAL: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})
DEFAULT_MAX_RUN_SECONDS: Final = 3600.0
"""The longest a background run goes on (an hour) unless the endpoint says otherwise."""
_POLL: Final = 1.0
"""Seconds between two looks at the readers of a run that lost its first connection."""
SETTLE_TIMEOUT: Final = 2.0
"""Seconds an ending response waits for its follower (or handler) to stop once cancelled.
A cancellation a library loses (redis-py's ``asyncio.wait_for`` race, say) must not hang
the request: past this, the response ends anyway, the run is told its reader left, and
the task is cancelled again every second until it stops."""
DEFAULT_SEND_TIMEOUT: Final = 30.0
"""Seconds a client may take nothing while bytes wait for it before it is treated as gone
(the reader-progress deadline, :class:`_Progress`)."""
PROGRESS_POLL: Final = 1.0
"""Seconds between two looks at whether a client took anything (a quarter of
``send_timeout`` when that is shorter): the deadline is met within one look."""
_TRANSPORT: Final = "aguikit.transport"
"""The scope key under which :func:`create_app`'s app leaves the connection's asyncio
transport, when the ASGI server's ``send`` names it (uvicorn's does)."""
QUEUED_BYTES: Final = 256 * 1024
"""Bytes of encoded frames an answer's queue holds, besides its ``queue_size`` frames:
past it the handler's next ``emit`` waits for the client.  So a connection buffers at
most this plus one frame in the worker (and the ASGI server's own write buffer, which
its flow control bounds: uvicorn's 64 KiB), not ``queue_size`` times its largest frame:
64 frames of a 16 KiB delta were a MiB per silent client."""


class _Frames(asyncio.Queue[Any]):
    """
    The frame queue between a run and its connection, bounded twice: it is full at
    ``maxsize`` frames or once it holds ``max_bytes`` bytes, so it holds at most
    ``max_bytes`` plus one frame, and an empty queue still takes any frame (a 10 MiB
    snapshot is sent, not refused).  The end-of-stream marker weighs nothing.
    """

    def __init__(self, maxsize: int, max_bytes: int) -> None:
        super().__init__(maxsize)
        self.max_bytes = max_bytes
        self.bytes = 0
        """Bytes of the frames queued now."""
        self.emptied = asyncio.Event()
        """Set while the queue is empty: a follower putting several events as one item
        waits for it, so the queue holds one such batch and the run is paced by events
        (``queue_size``), not by batches of them."""
        self.emptied.set()

    def full(self) -> bool:
        return super().full() or self.bytes >= self.max_bytes

    def _put(self, item: Any) -> None:
        if isinstance(item, bytes):
            self.bytes += len(item)
        self.emptied.clear()
        super()._put(item)

    def _get(self) -> Any:
        item = super()._get()
        if isinstance(item, bytes):
            self.bytes -= len(item)
        if not self.qsize():
            self.emptied.set()
        return item


class _OwnLog(enum.Enum):
    OWN_MEMORY_LOG = "OWN_MEMORY_LOG"

    def __repr__(self) -> str:
        return "OWN_MEMORY_LOG"


OWN_MEMORY_LOG: Final = _OwnLog.OWN_MEMORY_LOG
"""``event_log=OWN_MEMORY_LOG`` gives an endpoint a new
:class:`~aguikit.server.eventlog.MemoryEventLog` of its own, as passing
``MemoryEventLog()`` does.  It was the default before 0.4.0, when every endpoint was
resumable; the default is now ``None``, a run bound to its connection."""


def negotiate(accept: str | None) -> str:
    """
    The media type to answer with for an ``Accept`` header: the protobuf type, a JSONL
    type or ``text/event-stream``, never a refusal.

    The protobuf binding (spec 1.1, ``basic/transports/http-protobuf``, Negotiation) opts a
    client in by *admission*: a range naming the protobuf type with a positive quality
    gets protobuf, whatever quality it gives SSE ("relative quality values between the two
    media types are not consulted"), and every other request "MUST answer SSE", so nothing
    is ``406``.  The JSONL types are aguikit's own framing, chosen only when named and
    ranked above SSE (the highest ``q`` wins, the earlier range on a tie).

    A wildcard (``*/*``, ``application/*``) admits the protobuf type too, and the binding
    says a producer SHOULD then answer with it; aguikit answers SSE, because a wildcard is
    what every HTTP library sends by default (httpx, requests, ``fetch``, curl) and a
    client that never asked for binary frames would be handed them
    (``docs/spec-decisions.md``, "Wildcards answer SSE").
    """
    if not accept or not accept.strip():
        return sse.MEDIA_TYPE
    ranges: list[tuple[float, int, str]] = []
    for position, part in enumerate(accept.split(",")):
        media, *params = (piece.strip() for piece in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0 and media:
            ranges.append((-quality, position, media.lower()))
    if any(media == PROTOBUF_MEDIA_TYPE for _, _, media in ranges):
        return PROTOBUF_MEDIA_TYPE
    for _, _, media in sorted(ranges):
        if media in _SSE_RANGES:
            return sse.MEDIA_TYPE
        if media in _JSONL_TYPES:
            return media
    return sse.MEDIA_TYPE


_TITLES: Final = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    410: "Gone",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    503: "Service Unavailable",
}
"""RFC 9110's reason phrases, the same whatever Python's ``HTTPStatus`` calls them."""


def _problem(
    status: int, detail: str, *, headers: Mapping[str, str] | None = None, **extensions: Any
) -> Response:
    """
    An RFC 9457 problem document: ``type`` ``about:blank``, so ``title`` is the status's
    reason phrase and ``detail`` says what was wrong with this request; ``extensions``
    add members (``issues``, ``runId``...).  Written as ASCII JSON, so text from the
    request (a lone surrogate, say) can never break the answer.
    """
    document = {
        "type": "about:blank",
        "title": _TITLES.get(status) or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        **extensions,
    }
    body = json.dumps(document, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return Response(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def _denied(refusal: Denied, action: str) -> Response:
    """The problem document of an ``authorize`` hook's :class:`Denied`."""
    default = (
        "the request is not authenticated"
        if refusal.status == 401
        else f"the request may not {action} this run"
    )
    headers: dict[str, str] = {}
    challenge = refusal.www_authenticate
    if challenge is not None:
        try:
            challenge.encode("latin-1")
            headers["WWW-Authenticate"] = challenge
        except UnicodeEncodeError:
            LOGGER.error("authorize: a WWW-Authenticate of %r is not latin-1; left out", challenge)
    return _problem(refusal.status, refusal.detail or default, headers=headers)


async def _authorized(
    authorize: Authorize | None, request: Request, access: Access
) -> str | Response | None:
    """The principal the hook names for ``access``, or the problem document refusing it:
    the hook's :class:`Denied`, or ``503`` when the hook itself failed (an identity
    provider that is down is a dependency failure; its text stays in the log)."""
    try:
        return await consult(authorize, request, access)
    except Denied as refusal:
        return _denied(refusal, access.action)
    except Exception:
        LOGGER.exception("authorize failed on %s of run %r", access.action, access.run_id)
        return _problem(503, "the request could not be authorized now; try again later")


_JSON_MEDIA: Final = re.compile(r"application/(?:[!#$&^_.+\-a-z0-9]+\+)?json")
"""``application/json`` and the structured ``+json`` types (RFC 6839)."""
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate: the only way a lone one gets into a document,
since the UTF-8 decoder refuses an encoded surrogate."""


def _not_json(content_type: str | None) -> str | None:
    """Why a request's ``Content-Type`` is not a JSON body's, or ``None`` when it is."""
    media, _, parameters = (content_type or "").partition(";")
    if not _JSON_MEDIA.fullmatch(media.strip().lower()):
        given = (
            "no Content-Type"
            if content_type is None
            else f"Content-Type {short_repr(content_type)}"
        )
        return f"{given}: a run request's body is JSON; send application/json"
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            return f"charset {short_repr(charset)}: a JSON body is UTF-8 (RFC 8259)"
    return None


async def _read_body(request: Request, limit: int) -> bytes | Response:
    """The body, read a chunk at a time and refused (``413``) once it passes ``limit``
    bytes, or at once when its ``Content-Length`` says it will."""
    too_large = _problem(
        413,
        f"the request body is larger than this endpoint reads ({limit} bytes)",
        maxBodyBytes=limit,
    )
    declared = request.headers.get("content-length", "").strip()
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        return too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_input(
    request: Request, max_body_bytes: int
) -> tuple[dict[str, Any], RunAgentInput] | Response:
    """The request's ``RunAgentInput`` (its wire dict and its typed value), or the problem
    document refusing it; what every refusal costs is bounded by ``max_body_bytes`` (the
    explanation of a ``422`` by :mod:`aguikit.validate`, in time and memory)."""
    why = _not_json(request.headers.get("content-type"))
    if why is not None:
        return _problem(415, why)
    coding = request.headers.get("content-encoding", "identity").strip().lower()
    if coding != "identity":  # RFC 9110 15.5.16: say which codings would do
        return _problem(
            415,
            f"Content-Encoding {short_repr(coding)}: send the body without a content coding",
            headers={"Accept-Encoding": "identity"},
        )
    body = await _read_body(request, max_body_bytes)
    if isinstance(body, Response):
        return body
    if len(body) <= _INLINE_BYTES:
        return _decode(body)
    # A large body is read, checked (and explained) off the event loop, in one thread for
    # the whole process: the streams this worker serves go on meanwhile, each held at most
    # for one C call (jiter's parse, jsonschema-rs's verdict: milliseconds a MiB).
    # The cyclic collector is paused meanwhile (gc_paused): a decoded body holds no cycles.
    return await asyncio.get_running_loop().run_in_executor(_CHECKS, gc_paused, _decode, body)


_INLINE_BYTES: Final = 64 * 1024
"""Bodies up to this size are checked on the event loop: a millisecond or two at worst."""
_CHECKS: Final = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="aguikit-request")
"""One thread checks the large bodies, in turn: the loop competes with it alone for the
interpreter, however many hostile bodies arrive at once."""


def _decode(body: bytes) -> tuple[dict[str, Any], RunAgentInput] | Response:
    """A body's ``RunAgentInput`` (wire dict and typed value), or the problem refusing it."""
    try:
        data = loads_object(body, source="request body")
    except DecodeError as error:
        if error.rule == DECODE_RULES["object"]:  # JSON, but not an object
            return _unprocessable([("", "type", str(error))])
        return _problem(400, f"the request body is not JSON: {error}")
    if _SURROGATE_ESCAPE.search(body):
        lone = find_lone_surrogate(data)
        if lone is not None:
            where, char = lone
            message = f"a lone surrogate {char!r} is not Unicode text; UTF-8 cannot carry it"
            return _unprocessable([(where, "unicode", message)])
    # Tolerant: a newer client may send members this server's schema does not declare.
    # The fast verdict first; the explanation (bounded) only for a body that fails it.
    if not is_valid(data, "RunAgentInput", strict=False):
        issues = iter_schema_errors(data, "RunAgentInput", strict=False)
        return _unprocessable([(i.pointer, i.keyword, i.message) for i in issues])
    return data, _admitted(data)


def _admitted(data: dict[str, Any]) -> RunAgentInput:
    """
    The run input a handler is given, from a body the schema accepts (tolerantly).

    The processing model binds a producer receiving input as it binds a consumer receiving
    events: "unrecognised material does not make the input invalid", so what the schema
    does not describe is stripped with a warning (``AGUI-W002``, on this logger) and the
    run is served; an absent ``tools`` or ``context`` is handed over as the empty list it
    means ("A producer MUST treat a missing ``tools`` exactly as it would treat an empty
    one"); and a client declaring a newer (or uninterpretable) protocol version is served,
    with a warning ("MUST serve the run ... and SHOULD warn").
    """
    kept, removed = strip_unknown(data, definition="RunAgentInput")
    for pointer in removed:
        message = render_message("AGUI-W002", pointer=pointer, event_type="RunAgentInput")
        LOGGER.warning(
            "AGUI-W002 unknown-member (run %s input): %s", short_repr(data.get("runId")), message
        )
    declared = kept.get("protocolVersion")
    if isinstance(declared, str) and compare_protocol_versions(declared, PROTOCOL_VERSION) != (
        "not-newer"
    ):
        LOGGER.warning(
            "run %s input declares protocol %s, newer than this server's %s or not a version "
            "it can read: served as %s (the versioning page: additions are safe)",
            short_repr(data.get("runId")),
            short_repr(declared),
            PROTOCOL_VERSION,
            PROTOCOL_VERSION,
        )
    run_input = parse_run_agent_input(kept, check=False)
    if run_input.tools is None or run_input.context is None:
        run_input = attrs.evolve(
            run_input,
            tools=[] if run_input.tools is None else run_input.tools,
            context=[] if run_input.context is None else run_input.context,
        )
    return run_input


def _unprocessable(issues: list[tuple[str, str, str]]) -> Response:
    return _problem(
        422,
        "the request body is not a valid RunAgentInput: "
        + "; ".join(f"{pointer or '/'}: {message}" for pointer, _, message in issues[:3])
        + (f" (and {len(issues) - 3} more)" if len(issues) > 3 else ""),
        issues=[
            {"pointer": pointer, "keyword": keyword, "message": message}
            for pointer, keyword, message in issues
        ],
    )


OPTIONS_KEY: Final = "aguikit"
"""The member of ``forwardedProps`` carrying aguikit's per-request options
(``{"aguikit": {"hydrate": true}}``): ``forwardedProps`` is the protocol's own channel for
what a client passes to its producer, so no header has to be configured on any client."""

_THREAD_STATUS: Final = {
    THREAD_UNKNOWN: 404,
    THREAD_TOO_LARGE: 413,
    THREAD_DAMAGED: 409,
    THREAD_STORE_FAILED: 503,
}
"""The answer to each thread store refusal (``docs/threads.md``)."""


def _option(run_input: RunAgentInput, name: str) -> bool:
    """Whether the request's ``forwardedProps.aguikit.<name>`` is ``true``."""
    props = run_input.forwarded_props
    options = props.get(OPTIONS_KEY) if isinstance(props, Mapping) else None
    return isinstance(options, Mapping) and options.get(name) is True


def _thread_problem(error: ThreadError) -> Response:
    """The problem document of a thread store's refusal, carrying its rule id."""
    status = _THREAD_STATUS.get(error.rule or "", 503)
    headers = {"Retry-After": "5"} if status == 503 else None
    return _problem(status, str(error), headers=headers, code=error.rule, threadId=error.thread_id)


async def _hydration(
    threads: ThreadStore | None, run_input: RunAgentInput, principal: str | None
) -> tuple[list[dict[str, Any]], RunAgentInput] | Response:
    """The restating run of the request's thread (ahead of the run it asks for) and the
    input the handler then gets (the thread's conversation and state with the request's,
    :func:`~aguikit.server.threads.merged`), or the problem document refusing it."""
    if threads is None:
        return _problem(
            400, "this endpoint keeps no threads (threads=): it cannot replay one's history"
        )
    try:
        thread = await threads.load(run_input.thread_id, principal)
    except ThreadError as error:
        return _thread_problem(error)
    given = to_wire(run_input)
    messages, state = merged(thread, given.get("messages"), given.get("state"))
    given["messages"], given["state"] = messages, state
    # The history restates what the run starts from: the thread with the request's
    # messages, so the client's own new message is not dropped by the snapshot.
    start = attrs.evolve(thread, messages=tuple(messages), state=state)
    history = restate(start, f"{run_input.run_id}{HISTORY_SUFFIX}")
    return history, parse_run_agent_input(given, check=False)


HISTORY_SUFFIX: Final = ".history"
"""The restating run replayed ahead of a requested run is ``<runId>.history``: a run id of
its own (a stream may carry several runs, never one id twice)."""


Serve = Callable[[RunAgentInput, RunWriter], Awaitable[None]]
"""A handler of either kind, as the response runs it: given the request and a writer
that has not started, it runs the run to its end."""


def _serving(handler: Any) -> Serve:
    """
    ``handler`` as a :data:`Serve`, or a :class:`TypeError` saying what to write: it is
    checked here, once, when the endpoint is built, since a synchronous function would
    otherwise fail every request.  ``functools.partial`` objects, bound methods and
    objects with an ``async def __call__`` are looked through.
    """
    name = getattr(handler, "__qualname__", None) or type(handler).__name__
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    plain = inspect.isfunction(target) or inspect.ismethod(target) or isinstance(target, type)
    if not plain and callable(target):
        target = type(target).__call__  # an object with an `async def __call__`
    what = (
        f"agui_endpoint: a handler is `async def {name}(input, run)`, awaiting the writer's "
        f"methods, or an async generator `async def {name}(input): yield event`, the "
        "official SDK's pattern"
    )
    if inspect.isasyncgenfunction(target):
        takes_run = _binds(handler, 2) and not _binds(handler, 1)
        if not (takes_run or _binds(handler, 1)):
            raise TypeError(
                f"{what}; {name}{_signature(handler)} takes neither (input) nor (input, run)"
            )
        convert = _sdk_input if _wants_sdk_input(handler) else None

        async def generate(run_input: RunAgentInput, run: RunWriter) -> None:
            given = run_input if convert is None else convert(run_input)
            source = handler(given, run) if takes_run else handler(given)
            async with contextlib.AsyncExitStack() as stack:
                stack.push_async_exit(run)  # ends the run as `async with run` does, unstarted
                await run.feed(source)

        return generate
    if inspect.iscoroutinefunction(target):
        if not _binds(handler, 2):
            raise TypeError(f"{what}; {name}{_signature(handler)} does not take (input, run)")

        async def serve(run_input: RunAgentInput, run: RunWriter) -> None:
            async with run:
                # Let the writer send RUN_STARTED before the handler fills the queue: under
                # many concurrent streams the first event then leaves at once.
                await asyncio.sleep(0)
                await handler(run_input, run)

        return serve
    kind = (
        "a synchronous function: make it `async def`"
        if inspect.isfunction(target) or inspect.ismethod(target)
        else f"{type(handler).__name__!r}, not a coroutine function or an async generator function"
    )
    raise TypeError(f"{what}; {name} is {kind}")


def _binds(handler: Any, count: int) -> bool:
    """Whether ``handler`` can be called with ``count`` positional arguments (``True``
    when its signature cannot be read)."""
    try:
        inspect.signature(handler).bind(*range(count))
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def _signature(handler: Any) -> str:
    try:
        return str(inspect.signature(handler))
    except (TypeError, ValueError):
        return "(...)"


def _wants_sdk_input(handler: Any) -> bool:
    """Whether the first parameter is annotated ``ag_ui.core.RunAgentInput``: code
    written for the official SDK gets the SDK's model, as its FastAPI endpoint did."""
    try:
        parameters = list(inspect.signature(handler, eval_str=True).parameters.values())
    except Exception:  # an annotation that does not resolve: not the SDK's class
        return False
    annotation = parameters[0].annotation if parameters else None
    return (
        isinstance(annotation, type)
        and annotation.__name__ == "RunAgentInput"
        and annotation.__module__.split(".")[0] == "ag_ui"
    )


def _sdk_input(run_input: RunAgentInput) -> Any:
    from ..interop import to_sdk  # the SDK is installed: the handler's annotation names it

    return to_sdk(run_input)


class EventStreamResponse(Response):
    """
    The streamed answer to one run request: the handler runs in its own task, feeding a
    bounded queue of encoded frames that this response writes to the socket.
    """

    def __init__(
        self,
        handler: Serve,
        run_input: RunAgentInput,
        *,
        media_type: str,
        mode: Mode,
        keepalive: float | None,
        queue_size: int,
        snapshot_every: int,
        event_log: EventLog | None = None,
        resume_after: str | None = None,
        join_prelude: bool = False,
        resume_grace: float = 0.0,
        on_error: ErrorReport | None = None,
        expose_errors: bool = False,
        principal: str | None = None,
        telemetry: Observe | None = None,
        trace_headers: Mapping[str, str] | None = None,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        history: list[dict[str, Any]] | None = None,
        threads: ThreadStore | None = None,
        max_life: float | None = None,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        # As StreamingResponse does: no body, so no Content-Length is declared.
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(
            {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}
        )
        self.handler = handler
        self.run_input = run_input
        self.mode: Mode = mode
        self.on_error = on_error
        self.expose_errors = expose_errors
        self.principal = principal
        self.telemetry = telemetry
        self.trace_headers = trace_headers
        self.keepalive = keepalive if media_type == sse.MEDIA_TYPE else None
        self.send_timeout = send_timeout
        """Seconds the client may take nothing while bytes wait for it before it is
        treated as gone (:class:`_Progress`)."""
        self.queue_size = queue_size
        self.snapshot_every = snapshot_every
        self.encode: Callable[[Mapping[str, Any]], bytes] = (
            sse.encode_bytes
            if media_type == sse.MEDIA_TYPE
            else encode_proto
            if media_type == PROTOBUF_MEDIA_TYPE
            else _jsonl_bytes
        )
        self.disconnected = False
        """Whether the client went away before the stream ended."""
        self._over = False
        """The response is ending: nothing more goes to the frame queue."""
        if event_log is not None and media_type == sse.MEDIA_TYPE:
            # Tells a client that was cut off before its first event that it may resume.
            self.raw_headers.append((RESUMABLE_HEADER.encode("latin-1"), b"last-event-id"))
        self.event_log = event_log
        self.resume_after = resume_after
        """With a log: follow the run after this id rather than start it."""
        self.join_prelude = join_prelude
        """With a log and ``resume_after``: start with a prelude rather than the log."""
        self.history = history or []
        """The thread's restating run, sent ahead of the run (no ids: it is not logged)."""
        self.threads = threads
        """Where the run's events are folded into its thread once it ended."""
        self.max_life = max_life
        """A background run's longest life in seconds (``None``: not a background run)."""
        self.after = after
        """Run (detached) once the answer ended: the connect endpoint's look at whether
        the run it followed ended without its producer."""
        self.resume_grace = resume_grace if media_type == sse.MEDIA_TYPE else 0.0
        """With a log: seconds a run this answer started outlives its last reader.  Only
        an SSE answer can be resumed (JSONL and protobuf carry no ids), so another
        framing's run gets none: it lives on only while a joiner follows it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        queue = _Frames(self.queue_size, QUEUED_BYTES)
        encode = self.encode

        async def sink(wire: Mapping[str, Any]) -> None:
            if not (self.disconnected or self._over):
                await queue.put(encode(wire))

        async def produce() -> None:
            try:
                await self.run_handler(sink)
            finally:
                if not (self.disconnected or self._over):
                    await queue.put(_DONE)

        log = self.event_log
        started: _LoggedRun | None = None
        if log is None:
            producer = asyncio.create_task(produce())
        else:
            if self.resume_after is None:
                # Answer only once the run is in the log: a client cut off before its
                # first event may then resume from "0" on any worker.
                started = _LoggedRun(self, log)
                try:
                    await started.logged.wait()
                except BaseException:  # this answer was cancelled before it began
                    started.reader_left()
                    raise
            producer = asyncio.create_task(self._follow(log, queue, started))

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.disconnected = True
                    producer.cancel()
                    with contextlib.suppress(asyncio.QueueFull):
                        queue.put_nowait(_DONE)  # wake the writer if it waits for a frame
                    return

        watcher = asyncio.create_task(watch())
        progress = _Progress(scope.get(_TRANSPORT))
        try:
            async with progress.deadline(self.send_timeout):
                await progress.send(send, self._start())
                for wire in self.history:
                    body = self.encode(wire)
                    await progress.send(send, _body(body))
                await self._pump(queue, progress, send)
        except OSError:  # the connection broke under a send
            self.disconnected = True
        except _Stalled:
            self.disconnected = True
            LOGGER.info(
                "run %r: the client took nothing for %s s; treated as gone",
                self.run_input.run_id,
                self.send_timeout,
            )
        finally:
            self._over = True
            try:
                await _settle(producer, watcher)
            finally:  # also when following failed or hung: the run must not wait for it
                if started is not None:
                    started.reader_left()
                if self.after is not None:
                    _detach(self.after())

    def writer(self, sink: Callable[[Mapping[str, Any]], Awaitable[None]]) -> RunWriter:
        """The run's :class:`RunWriter`, writing to ``sink``."""
        return RunWriter(
            self.run_input,
            sink=sink,
            mode=self.mode,
            snapshot_every=self.snapshot_every,
            on_error=self.on_error,
            expose_errors=self.expose_errors,
            principal=self.principal,
            telemetry=self.telemetry,
            trace_headers=self.trace_headers,
            restate_input=self.max_life is not None,
        )

    async def run_handler(self, sink: Callable[[Mapping[str, Any]], Awaitable[None]]) -> None:
        """Run the handler on a :class:`RunWriter` writing to ``sink``, with the run's trace
        current (``telemetry``)."""
        sink, events = self.recording(sink)
        run = self.writer(sink)
        with run.activate_trace():
            await self.handler(self.run_input, run)
        await self.record(events)

    def recording(
        self, sink: Callable[[Mapping[str, Any]], Awaitable[None]]
    ) -> tuple[Callable[[Mapping[str, Any]], Awaitable[None]], list[Mapping[str, Any]]]:
        """``sink``, keeping each event in the list it returns too when the run is to be
        recorded into its thread (``threads``); ``sink`` itself otherwise."""
        events: list[Mapping[str, Any]] = []
        if self.threads is None:
            return sink, events

        async def keep(wire: Mapping[str, Any]) -> None:
            events.append(wire)
            await sink(wire)

        return keep, events

    async def record(self, events: list[Mapping[str, Any]]) -> None:
        """Fold the ended run's ``events`` into its thread.  A run cut short (no terminal
        event: cancelled with its connection) is not recorded, so its thread stays as its
        last ended run left it; a background run's end is recorded only while its thread
        still marks it in progress (:meth:`ThreadStore.end`: once, and never into a thread
        deleted meanwhile); a store that fails is logged, never the run's failure."""
        threads = self.threads
        if threads is None:
            return
        if self.max_life is not None:
            await _end_in_thread(
                threads, self.run_input.thread_id, self.run_input.run_id, events, self.principal
            )
            return
        if not events or events[-1].get("type") not in _TERMINAL:
            return
        try:
            await threads.record(
                self.run_input.thread_id,
                events,
                owner=self.principal,
                given=to_wire(self.run_input),
            )
        except ThreadError as error:
            LOGGER.error("run %r: not recorded into its thread: %s", self.run_input.run_id, error)

    async def _follow(self, log: EventLog, queue: _Frames, started: _LoggedRun | None) -> None:
        """Copy the run's logged events, after ``resume_after``, into the frame queue
        (after the prelude, for a late joiner that asked for one), telling the run this
        answer started how far it got, which paces that run."""
        sse_framing = self.media_type == sse.MEDIA_TYPE
        after = self.resume_after
        try:
            start = await prelude(log, self.run_input.run_id) if self.join_prelude else None
            if start is not None:
                events, after = start
                for number, wire in enumerate(events, 1):
                    frame = self.encode(wire)
                    # Only the last frame is numbered: the prelude stands for every
                    # event up to that id, so a reconnect resumes after it.
                    if sse_framing and number == len(events):
                        frame = f"id: {after}\n".encode() + frame
                    await queue.put(frame)
            framed = getattr(log, "follow_frames", None) if sse_framing else None
            if framed is not None:
                # The log keeps each event encoded once: its frames go out as they are,
                # several events to a write.
                frames: AsyncGenerator[tuple[str, bytes], None] = framed(
                    self.run_input.run_id, after
                )
                async with contextlib.aclosing(frames) as batches:
                    async for event_id, batch in batches:
                        await queue.emptied.wait()  # one batch queued, one being written
                        await queue.put(batch)
                        if started is not None:
                            started.queued(event_id)
                return
            # Closed on cancellation too, so the log stops counting this reader at once.
            async with contextlib.aclosing(log.follow(self.run_input.run_id, after)) as live:
                async for event_id, wire in live:
                    frame = self.encode(wire)
                    # The id line, then exactly the frame the connection-bound mode sends.
                    await queue.put(f"id: {event_id}\n".encode() + frame if sse_framing else frame)
                    if started is not None:
                        started.queued(event_id)
        except EventLogError as exc:
            # The answer ends without a terminal event: a client knows the run unfinished
            # and resumes (the rest, or a 503 while the log is down).
            LOGGER.error("run %r: following its log failed: %s", self.run_input.run_id, exc)
        finally:
            if not (self.disconnected or self._over):
                await queue.put(_DONE)

    async def _pump(self, queue: asyncio.Queue[Any], progress: _Progress, send: Send) -> None:
        keepalive = self.keepalive
        while True:
            try:
                frame = queue.get_nowait()
            except asyncio.QueueEmpty:
                try:
                    # Not wait_for: on Python 3.11 it can swallow the cancellation of the
                    # reader-progress deadline around this loop.
                    async with asyncio.timeout(keepalive):
                        frame = await queue.get()
                except TimeoutError:
                    frame = _KEEPALIVE
            if self.disconnected:
                return
            if frame is _DONE:
                await progress.send(send, {"type": "http.response.body", "body": b""})
                return
            await progress.send(send, _body(frame))

    def _start(self) -> dict[str, Any]:
        return {"type": "http.response.start", "status": 200, "headers": self.raw_headers}


def _body(frame: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": frame, "more_body": True}


class _Progress:
    """
    The reader-progress deadline of one answer: the client is treated as gone once it
    took nothing for ``send_timeout`` seconds while bytes waited for it.

    A send only starts waiting once every buffer between the worker and the client is
    full, the kernel's included (from 64 KiB to several MiB, the deployment's to say), so
    a deadline on one send alone would start as late as a slow handler takes to fill
    them: seconds, or for ever.  When the connection's socket is known (the transport
    :func:`create_app`'s app finds in uvicorn's ``send``), the kernel says what the
    client took: the bytes its TCP stack acknowledged (``TCP_INFO``) and the bytes still
    unacknowledged (``SIOCOUTQ``).  Progress is then an acknowledgement, or nothing left
    waiting, whatever the buffers hold.  Otherwise (another ASGI server, an app mounted
    in another, a Unix socket, not Linux) progress is a send that completed, or none
    under way: the deadline then runs from the first send that waited, after the buffers
    filled.

    One look each :data:`PROGRESS_POLL` seconds (a timer, not a task) moves the
    deadline, an :func:`asyncio.timeout` around the whole answer, to the last progress
    plus ``send_timeout``: no clock is read per frame.
    """

    def __init__(self, transport: Any) -> None:
        self.socket = _tcp_socket(transport)
        """The connection's TCP socket, when the kernel can be asked about it."""
        self.sending = False
        """A send is under way (it has not returned yet)."""
        self.sent_at = 0.0
        """Loop time at which the send under way began."""
        self.acked = -1
        """The socket's acknowledged bytes at the last look."""
        self.progressed = 0.0
        """Loop time of the last look that saw the client take something (socket)."""
        self.timer: asyncio.TimerHandle | None = None
        """The next look."""

    @contextlib.asynccontextmanager
    async def deadline(self, timeout: float | None) -> AsyncIterator[None]:
        """Raise :class:`_Stalled` once the client made no progress for ``timeout``
        seconds (``None``: never)."""
        if timeout is None:
            yield
            return
        loop = asyncio.get_running_loop()
        every = min(PROGRESS_POLL, timeout / 4)
        self.progressed = loop.time()
        cm = asyncio.timeout(self.progressed + timeout)
        try:
            async with cm:
                self.timer = loop.call_later(every, self._look, cm, every, timeout)
                try:
                    yield
                finally:
                    self.timer.cancel()
        except TimeoutError:  # an OSError too: only the deadline's is a stall
            if cm.expired():
                raise _Stalled from None
            raise

    def _look(self, cm: asyncio.Timeout, every: float, timeout: float) -> None:
        """One look: the deadline moved to the last progress plus ``timeout``, and the next
        look ``every`` seconds on.  A method, not a closure scheduling itself, which would
        be a reference cycle holding the answer's socket and task until the cyclic
        collector's next pass."""
        if not cm.expired():
            loop = asyncio.get_running_loop()
            cm.reschedule(self.last_progress(loop.time()) + timeout)
            self.timer = loop.call_later(every, self._look, cm, every, timeout)

    def last_progress(self, now: float) -> float:
        """When the client last made progress, as far as a look at ``now`` can tell."""
        if self.socket is not None:
            try:
                unacked, acked = _tcp_state(self.socket)
            except OSError:  # closed under the look: the disconnect ends the answer
                unacked, acked = 0, self.acked
            if unacked == 0 or acked != self.acked:
                self.acked, self.progressed = acked, now
            return self.progressed
        return self.sent_at if self.sending else now

    async def send(self, send: Send, message: dict[str, Any]) -> None:
        """One ASGI send, noted for the fallback's progress."""
        if self.socket is not None:
            await send(message)
            return
        self.sending = True
        self.sent_at = asyncio.get_running_loop().time()
        try:
            await send(message)
        finally:
            self.sending = False


class _Stalled(Exception):
    """The client took nothing for ``send_timeout`` seconds while bytes waited for it."""


_TCP_INFO_ACKED: Final = struct.Struct("=Q")
"""``tcpi_bytes_acked`` in Linux's ``struct tcp_info`` (offset 120, since Linux 4.1)."""
_TCP_INFO_SIZE: Final = 128


def _tcp_socket(transport: Any) -> Any:
    """The socket of ``transport`` (an :class:`asyncio.Transport`) when the kernel tells
    how much of what was sent its peer acknowledged; ``None`` otherwise."""
    get = getattr(transport, "get_extra_info", None)
    sock = get("socket") if callable(get) else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        _tcp_state(sock)
    except (ImportError, OSError, AttributeError, ValueError, struct.error):  # not Linux
        return None
    return sock


def _tcp_state(sock: Any) -> tuple[int, int]:
    """(bytes sent and not yet acknowledged, bytes acknowledged) of a TCP socket, from the
    kernel; ``(0, 0)`` once it is closed (its disconnect ends the answer)."""
    import fcntl  # Unix only: _tcp_socket tried, so this answers
    import termios

    fd = sock.fileno()
    if fd < 0:
        return 0, 0
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    (acked,) = _TCP_INFO_ACKED.unpack_from(info, 120)
    unacked = struct.unpack("i", fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    return unacked, acked


async def _settle(*tasks: asyncio.Task[None]) -> None:
    """
    Cancel ``tasks`` and wait for them, at most :data:`SETTLE_TIMEOUT` seconds: a task
    still running then (its cancellation lost) is logged and handed to a reaper that
    cancels it again each second until it stops, so the response ends in bounded time
    and no task outlives it for good.
    """
    for task in tasks:
        task.cancel()
    _, pending = await asyncio.wait(tasks, timeout=SETTLE_TIMEOUT)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            error = task.exception()
            if not isinstance(error, OSError):
                LOGGER.error("a stream's task failed", exc_info=error)
    for task in pending:
        LOGGER.warning(
            "a stream's task ignored its cancellation for %s s; ending the response without "
            "it and cancelling it again until it stops",
            SETTLE_TIMEOUT,
        )
        _detach(_reap(task))


async def _reap(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` again every :data:`_POLL` seconds until it ends."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=_POLL)


_T = TypeVar("_T")


async def _consult_log(question: Awaitable[_T]) -> _T | Response:
    """The log's answer, or ``503`` when it has none: a full log (``AGUI-E024``), or one
    that failed (Redis down or stalled; its error stays in the server's log)."""
    try:
        return await asyncio.wait_for(question, LOG_TIMEOUT)
    except EventLogFull as full:
        LOGGER.warning("%s: %s", full.rule, full)
        return _problem(
            503,
            "this server's event log is full; try again later",
            headers={"Retry-After": "5"},
            code=full.rule,
        )
    except EventLogError as failed:  # Redis down or stalled (AGUI-E022)
        LOGGER.error("%s: %s", failed.rule, failed, exc_info=failed)
        return _problem(
            503,
            "this server's event log is not answering; try again later",
            headers={"Retry-After": "5"},
            code=failed.rule,
        )
    except Exception:
        LOGGER.exception("the event log failed to answer")
        return _problem(
            503,
            "this server's event log is not answering; try again later",
            headers={"Retry-After": "5"},
        )


LOG_TIMEOUT: Final = 10.0
"""Seconds a request waits for the event log's answer (a claim, a resumability check)
before it is answered ``503``: a stalled Redis must not hold requests for ever."""

_DETACHED: Final[set[asyncio.Task[None]]] = set()
"""Runs that outlive their connection; held here so the loop does not drop them."""

_RUNNING: Final[dict[tuple[int, str], _LoggedRun]] = {}
"""The logged runs this process is running, by log (its ``id``) and run id: a cancel
request landing on the run's own worker cancels it at once, without the log's flag.  A
run leaves it when its task ends."""


class _LoggedRun:
    """
    A run started as a task of its own, writing every event to ``log``: a logged run
    belongs to the log, not to the connection, so a dropped client does not cancel it at
    once (it reconnects and follows on, on any worker sharing the log).

    While the connection that started it is there, that reader paces it: the handler's
    ``emit`` waits while the run is more than ``queue_size`` events ahead of what the
    connection has taken, so a slow reader slows the producer as without a log (the log
    itself keeps the run, up to its ``max_events``, for a resume).  Once that connection
    is gone, the run may go ``queue_size`` events further while nobody follows it, then
    waits for a reader (a reconnect, a joiner, on any worker) or the end of its grace:
    a run nobody reads does not fill the log (or cost tokens) while it waits.

    It ends when the handler does, or when nobody wants it any more: once the connection
    that started it is gone, the run is watched, and cancelled after
    ``response.resume_grace`` seconds without a reader following it (a reconnect in time
    takes it over; if that reader leaves too, the window starts again).  A reader on
    another worker counts through :meth:`EventLog.readers`, which is why the watch polls
    the log rather than counting this worker's connections.
    """

    def __init__(self, response: EventStreamResponse, log: EventLog) -> None:
        self.log = log
        self.run_id = response.run_input.run_id
        self.grace = response.resume_grace
        self.window = response.queue_size
        self.logged = asyncio.Event()
        """Set once the first event is logged (or the run ended without one)."""
        self.taken = 0
        """The last event the starting connection took."""
        self.attached = True
        """Whether the starting connection is still there (and pacing the run)."""
        self.progress = asyncio.Event()
        self.last = 0
        """The last event logged."""
        self.left_at = 0
        """The last event logged when the run was last left without a reader."""
        self.followed = True
        """Whether the watch last saw a reader following the run (after it left)."""
        self.stopping = False
        """Whether the endpoint cancelled the run on purpose (nobody followed it)."""
        self.background = response.max_life is not None
        """A background run: it goes on at full speed with no reader, to its end."""
        self.task = _detach(self._produce(response))
        if response.max_life is not None:
            # A background run lives without readers, up to its longest life.
            self.grace = math.inf
            expiry = asyncio.get_running_loop().call_later(response.max_life, self._expire)
            self.task.add_done_callback(lambda _: expiry.cancel())
        self.key = (id(log), self.run_id)
        _RUNNING[self.key] = self
        self.task.add_done_callback(self._forget)
        _detach(self._heed_cancel())

    def _expire(self) -> None:
        """A background run reached its longest life: cancelled, as a run nobody follows
        is, so it ends with the cancelled outcome."""
        if not self.task.done():
            LOGGER.info("run %r cancelled: it ran its longest life", self.run_id)
            self.stopping = True
            self.task.cancel()

    def _forget(self, task: asyncio.Task[None]) -> None:
        """The run ended: a cancel request can no longer find it."""
        if _RUNNING.get(self.key) is self:
            del _RUNNING[self.key]

    @classmethod
    def here(cls, log: EventLog, run_id: str) -> _LoggedRun | None:
        """The run ``run_id`` of ``log`` if this process runs it."""
        return _RUNNING.get((id(log), run_id))

    async def _heed_cancel(self) -> None:
        """Cancel the run once a cancel request flagged it in the log, on whichever worker
        it landed: the flag is looked at every :data:`CANCEL_POLL` seconds while the run
        runs (a look that fails or hangs is logged and the next one tried)."""
        while not self.task.done():
            await asyncio.wait({self.task}, timeout=CANCEL_POLL)
            if self.task.done():
                return
            try:
                asked = await asyncio.wait_for(self.log.cancel_requested(self.run_id), 3 * _POLL)
            except Exception as exc:
                LOGGER.warning("run %r: looking at its cancel flag failed: %r", self.run_id, exc)
                continue
            if asked:
                await self.cancel()
                return

    async def cancel(self) -> None:
        """Cancel the handler at once (a cancel request), waiting up to
        :data:`_CANCEL_WAIT` seconds for it to end; a cancellation the handler swallows is
        repeated every :data:`_POLL` seconds meanwhile."""
        LOGGER.info("run %r cancelled by a cancel request", self.run_id)
        deadline = time.monotonic() + _CANCEL_WAIT
        while not self.task.done() and time.monotonic() < deadline:
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=_POLL)

    def queued(self, event_id: str) -> None:
        """The starting connection took the event ``event_id``."""
        self.taken = int(event_id)
        self.progress.set()

    async def _produce(self, response: EventStreamResponse) -> None:
        async def sink(wire: Mapping[str, Any]) -> None:
            number = self.last = int(await self.log.append(self.run_id, wire))
            self.logged.set()
            while (self.attached and number - self.taken > self.window) or (
                not (self.attached or self.followed or self.stopping or self.background)
                and number - self.left_at > self.window
            ):
                self.progress.clear()
                await self.progress.wait()
            if not number % self.window:
                # A handler that never waits on anything but emit (the memory log's append
                # does not suspend) must not starve the loop: its grace watch included.
                await asyncio.sleep(0)

        recording, events = response.recording(sink)
        writer = response.writer(recording)
        try:
            with writer.activate_trace():
                await response.handler(response.run_input, writer)
        finally:
            self.logged.set()
            # Shielded: a cancelled run is still closed and marked ended, so its followers
            # (and resumers) get its end, never silence; and recorded into its thread.
            await asyncio.shield(self._end(writer))
            await asyncio.shield(response.record(events))

    async def _end(self, writer: RunWriter) -> None:
        """End the run in the log: a run stopped on purpose first gets the cancelled
        outcome the spec's "Cancelled runs" prescribes (:meth:`RunWriter.stopped`), in
        bounded time, since someone may still read it (a resume, a joiner)."""
        if self.stopping:
            try:
                await asyncio.wait_for(writer.stopped(), SETTLE_TIMEOUT)
            except Exception as exc:  # a log that fails now: the end below still stops readers
                LOGGER.warning("run %r: its cancelled outcome was not logged: %r", self.run_id, exc)
        await self.log.end(self.run_id)

    def reader_left(self) -> None:
        """The connection that started the run ended: from now on the run lives only
        while some reader follows it, give or take the grace window."""
        self.attached = False
        self.left_at = self.last
        self.followed = False  # until the watch sees a reader
        self.progress.set()
        if not self.task.done():
            _detach(self._watch())

    async def _watch(self) -> None:
        # Watches until the run has ended, not until it was cancelled once: a cancellation
        # a library swallows (asyncio.wait_for's lost cancellation in Python 3.11, say)
        # must not leave a run nobody follows going on for ever, so it is cancelled again
        # at each look.  A look that hangs or fails (a broken pooled connection) ends
        # nothing either: the next look starts afresh.
        alone_since: float | None = None
        cancelled = False
        while not self.task.done():
            wait = _POLL
            try:
                readers = await asyncio.wait_for(self.log.readers(self.run_id), 3 * _POLL)
            except Exception as exc:
                LOGGER.warning("run %r: counting its readers failed: %r", self.run_id, exc)
                await asyncio.sleep(_POLL)
                continue
            if not readers:
                now = time.monotonic()
                alone_since = now if alone_since is None else alone_since
                wait = alone_since + self.grace - now
                if wait <= 0:
                    if not cancelled:
                        LOGGER.info("run %r cancelled: no reader for %s s", self.run_id, self.grace)
                    cancelled = self.stopping = True
                    self.task.cancel()
                    wait = _POLL
            else:
                alone_since = None
            followed = bool(readers)
            if followed != self.followed:
                self.followed, self.left_at = followed, self.last
                self.progress.set()
            await asyncio.sleep(min(wait, _POLL))


def _detach(work: Awaitable[None]) -> asyncio.Task[None]:
    """Run ``work`` in a task that outlives the request, held until it ends."""
    task = asyncio.ensure_future(work)
    _DETACHED.add(task)
    task.add_done_callback(_finished)
    return task


def _finished(task: asyncio.Task[None]) -> None:
    """A detached task ended: let it go, and log a failure nobody else will see (a
    handler's is already in the stream, as the writer's ``RUN_ERROR``)."""
    _DETACHED.discard(task)
    if task.cancelled():
        # A cancelled task keeps its CancelledError, whose traceback holds the frames of
        # its coroutine, which hold the task: a cycle keeping the whole run (its writer,
        # its log's frames, its state) until the cyclic collector's next full pass.
        # Taking the error out of the task (``exception()`` hands it over) frees it now.
        with contextlib.suppress(asyncio.CancelledError):
            task.exception()
        return
    if task.exception() is not None:
        LOGGER.error("a logged run's task failed", exc_info=task.exception())


async def _owned(log: EventLog, run_input: RunAgentInput, principal: str | None) -> bool | Response:
    """Whether the log holds ``run_input``'s run as started on its ``threadId`` by
    ``principal`` (``False`` for an unknown, expired or foreign run alike: the caller
    answers them the same), or ``503`` when the log cannot say."""
    owner = await _consult_log(log.owner(run_input.run_id))
    if isinstance(owner, Response):
        return owner
    return owner == Owner(run_input.thread_id, principal)


async def _may_follow(
    log: EventLog, authorize: Authorize | None, request: Request, run_input: RunAgentInput
) -> Response | None:
    """
    ``None`` when a request carrying ``Last-Event-ID`` may follow its run, else its answer:
    the ``authorize`` hook's refusal (action ``"join"`` with ``X-AGUI-Join``, else
    ``"resume"``), ``503`` for a log that cannot answer, and one ``410``, byte for byte
    the same, for a run that is unknown, expired, another thread's or another
    principal's, or has nothing after that id: run ids cannot be probed.
    """
    after = request.headers["last-event-id"]
    action: Literal["join", "resume"] = "join" if JOIN_HEADER in request.headers else "resume"
    allowed = await _authorized(
        authorize, request, Access(action, run_input.thread_id, run_input.run_id)
    )
    if isinstance(allowed, Response):
        return allowed
    owned = await _owned(log, run_input, allowed)
    if isinstance(owned, Response):
        return owned
    if owned:
        resumable = await _consult_log(log.resumable(run_input.run_id, after))
        if isinstance(resumable, Response):
            return resumable
        if resumable:
            return None
    return _problem(
        410,
        f"run {run_input.run_id!r} has no logged events after {after!r} for this request: "
        "unknown run, expired log, another thread's or another user's run, an id this "
        "server never issued, or the run ended (or was cancelled, nobody following it) "
        "with nothing after it; start a new run",
        runId=run_input.run_id,
        lastEventId=after,
    )


async def _taken(log: EventLog, run_input: RunAgentInput, principal: str | None) -> Response:
    """The ``409`` of a start whose run id is claimed: its owner is told to follow it, any
    other requester only that the id is taken (following another's run is refused anyway,
    and a squatter's run must not be offered to the id's rightful owner)."""
    owned = await _owned(log, run_input, principal)
    if isinstance(owned, Response):
        return owned
    detail = (
        "is running or ran on this server; to follow it send Last-Event-ID (0: from its "
        "first event)"
        if owned
        else "is taken on this server; start your run with a new runId"
    )
    return _problem(409, f"run {run_input.run_id!r} {detail}", runId=run_input.run_id)


async def _cancel(
    log: EventLog | None, authorize: Authorize | None, request: Request, run_input: RunAgentInput
) -> Response:
    """
    Answer a cancel request: ``204`` once the run it names is cancelled (on this worker
    at once; on another sharing the log through the log's cancel flag, waiting up to
    :data:`_CANCEL_WAIT` seconds for the run to end); ``404``, the same answer whatever
    the reason, when the log holds no such running run for this caller (unknown, over,
    started on another thread or by another principal, or a connection-bound endpoint,
    where hanging up stops a run); the ``authorize`` hook's refusal as for a start.
    """
    access = Access("cancel", run_input.thread_id, run_input.run_id)
    allowed = await _authorized(authorize, request, access)
    if isinstance(allowed, Response):
        return allowed
    if log is not None:
        owned = await _owned(log, run_input, allowed)
        if isinstance(owned, Response):
            return owned
        run = _LoggedRun.here(log, run_input.run_id) if owned else None
        if run is not None:
            await run.cancel()
            return Response(status_code=204)
        if owned:
            running = await _consult_log(log.cancel(run_input.run_id))
            if isinstance(running, Response):
                return running
            if running:
                deadline = time.monotonic() + _CANCEL_WAIT
                while running and time.monotonic() < deadline:
                    await asyncio.sleep(CANCEL_POLL / 2)
                    running = await _consult_log(log.cancel(run_input.run_id))
                    if isinstance(running, Response):
                        return running
                return Response(status_code=204)
    return _problem(
        404,
        f"no run {run_input.run_id!r} that this request may cancel is running here "
        "(a run bound to its connection stops when its client hangs up)",
        runId=run_input.run_id,
    )


async def _end_in_thread(
    threads: ThreadStore,
    thread_id: str,
    run_id: str,
    events: Sequence[Mapping[str, Any]],
    principal: str | None,
) -> None:
    """Record the end of the background run ``run_id`` (its whole ``events``, whose
    ``RUN_STARTED`` carries its input) into its thread, logging a store that fails."""
    first = events[0] if events else {}
    given = first.get("input") if first.get("type") == "RUN_STARTED" else None
    try:
        await threads.end(thread_id, run_id, events, owner=principal, given=given)
    except ThreadError as error:
        LOGGER.error("run %r: its end not recorded into its thread: %s", run_id, error)


async def _settle_in_thread(
    threads: ThreadStore, log: EventLog, thread_id: str, run_id: str, principal: str | None
) -> None:
    """After a connecting client followed the background run ``run_id``: when the log
    holds its end (its producer's, or the ``RUN_ERROR`` a follower wrote once the
    producer's lease lapsed, ``AGUI-E021``), record that end into the thread, which its
    dead producer never did; a live producer records first and this changes nothing."""
    try:
        events = [wire for _, wire in await log.read(run_id)]
    except Exception as exc:
        LOGGER.warning("run %r: reading its end back from the log failed: %r", run_id, exc)
        return
    if events and events[-1].get("type") in _TERMINAL:
        await _end_in_thread(threads, thread_id, run_id, events, principal)


async def _stop_run(log: EventLog, run_id: str) -> None:
    """Ask the run ``run_id`` to stop, on whichever worker runs it: at once when it is this
    process's, else through the log's cancel flag; a log that cannot answer is logged."""
    here = _LoggedRun.here(log, run_id)
    if here is not None:
        _detach(here.cancel())
        return
    try:
        await asyncio.wait_for(log.cancel(run_id), LOG_TIMEOUT)
    except Exception as exc:
        LOGGER.warning("run %r: its cancel request could not be logged: %r", run_id, exc)


def _jsonl_bytes(wire: Mapping[str, Any]) -> bytes:
    return jsonl.encode_line(wire).encode("utf-8")


def agui_endpoint(
    handler: Handler,
    *,
    mode: Mode = "strict",
    keepalive: float | None = 15.0,
    queue_size: int = 64,
    snapshot_every: int = 0,
    event_log: EventLog | Literal[_OwnLog.OWN_MEMORY_LOG] | None = None,
    resume_grace: float = 30.0,
    authorize: Authorize | None = None,
    on_error: ErrorReport | None = None,
    expose_errors: bool = False,
    max_body_bytes: int = MAX_BODY_BYTES,
    telemetry: Observe | None = None,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
    threads: ThreadStore | None = None,
    background: bool = False,
    allow_background: bool = False,
    max_run_seconds: float = DEFAULT_MAX_RUN_SECONDS,
) -> Callable[[Request], Awaitable[Response]]:
    """
    Wrap ``handler`` as an HTTP endpoint that answers AG-UI run requests.

    The result is an ``async def endpoint(request) -> Response``: a Starlette
    ``Route("/agent", endpoint, methods=["POST"])`` and a FastAPI path operation
    (``app.post("/agent")(endpoint)``) alike, so the same handler serves from either.

    Args:
        handler: ``async def handler(input, run)``; ``run`` is a :class:`RunWriter` that
            has already sent ``RUN_STARTED`` and will end the run itself.  Or an async
            generator yielding events (``ag_ui.core`` events, typed events or wire
            dicts), its own ``RUN_STARTED`` and ``RUN_FINISHED`` included, as a handler
            written for the official SDK does: each is fed to a :class:`RunWriter`
            (:meth:`RunWriter.feed`), so it is verified in ``mode`` exactly as ``emit``
            verifies, and a refusal is raised inside the generator at its ``yield``.
            Its first parameter annotated ``ag_ui.core.RunAgentInput`` gets the SDK's
            model.  Anything else (a synchronous function, say) raises
            :class:`TypeError` here, saying what to write.
        mode: The writer's mode for every run (``strict``, ``repair`` or ``audit``).
        keepalive: Seconds of silence after which an SSE comment is sent so proxies and
            load balancers keep the connection (``None``: never).
        queue_size: Frames buffered between the handler and the socket; past it (or
            past :data:`QUEUED_BYTES` of them) the handler's next ``emit`` waits for the
            client.
        snapshot_every: Passed to each :class:`RunWriter`.
        event_log: ``None`` (the default) binds each run to its one connection, as
            the standard HTTP binding does: no ids, frames exactly the SDK encoder's,
            and a disconnect cancels the handler at once.  An event log opts into
            resumption, an aguikit extension (see :mod:`aguikit.server.eventlog` and
            ``docs/resume.md``): each SSE frame carries its ``id:`` before the SDK
            encoder's bytes, the answer declares ``X-AGUI-Resume``, a dropped client
            does not cancel the run at once (``resume_grace``), a request carrying
            ``Last-Event-ID`` follows the run after that id (``410`` when the log
            cannot: unknown run, expired, another thread's or principal's, an id never
            issued, or nothing left after it; ``409`` for a run id already claimed,
            without the header), and one carrying ``X-AGUI-Cancel`` cancels it, on any
            worker sharing the log (``204``; ``404`` for a run that is not the caller's,
            unknown or over).  A :class:`MemoryEventLog` serves one process
            (:data:`OWN_MEMORY_LOG` builds one for this endpoint); a
            :class:`~aguikit.server.redis_log.RedisEventLog` several workers.
        resume_grace: With a log, the seconds a run goes on after its last reader left
            (an SSE client's dropped connection, or a client that hung up without a
            cancel request, such as the official ``HttpAgent.abortRun()``), waiting for
            a reconnect; past them with no reader, the handler is cancelled and the
            run's log ends there.  A JSONL or protobuf answer cannot be resumed, so its
            run gets no grace.
        authorize: ``authorize(request, access) -> principal | None``, sync or async,
            called before a run starts (and before a resume, join or cancel) with an
            :class:`~aguikit.server.access.Access`; it raises
            :class:`~aguikit.server.access.Denied` to refuse (``401``/``403``, a problem
            document, ``WWW-Authenticate`` passed through).  The principal it returns
            is the writer's :attr:`RunWriter.principal`.  ``docs/authorize.md`` shows a
            bearer token.
        on_error: ``on_error(exc) -> (message, code) | None``: what a run's
            ``RUN_ERROR`` says for an exception that escaped the handler; ``None`` sends
            the default, a generic message and the code ``AGUI-E020`` (or the rule id of
            an aguikit error).  The exception is logged on ``aguikit.server`` whatever it
            answers.
        expose_errors: Send an exception's text in the ``RUN_ERROR`` (development only:
            exceptions carry keys, SQL, paths and provider payloads).
        max_body_bytes: The largest request body read, in bytes (``413`` beyond it; read
            incrementally).  It also bounds the work of a ``422``'s explanation
            (``docs/limits.md``).
        telemetry: An :class:`aguikit.otel.Telemetry` tracing every run this endpoint
            serves (``docs/otel.md``); each run's span continues the request's W3C
            ``traceparent``/``tracestate``.  ``None``: the one
            ``AguikitInstrumentor().instrument()`` installed, if any.
        send_timeout: Seconds the client may take nothing while bytes wait for it before
            it is treated as gone, as if it had disconnected: without a log its handler
            is cancelled, with one the run's resume grace starts (``None``: wait for
            ever, a client that never reads then holds its handler).  Under
            :func:`create_app` on uvicorn and Linux, what the client took is read from
            the kernel's TCP acknowledgements, so the deadline runs from the client's
            last progress whatever the socket buffers hold; elsewhere from the first
            write that waited, once they filled (``docs/resume.md``).
        threads: A thread store (:class:`~aguikit.server.threads.MemoryThreadStore`, a
            :class:`~aguikit.server.redis_threads.RedisThreadStore`): each run that ends
            is folded into its thread (with the conversation and state its request
            carried), owned by the principal ``authorize`` named; a request whose
            ``forwardedProps`` hold ``{"aguikit": {"hydrate": true}}`` gets the thread's
            restating run (``<runId>.history``) ahead of its own run, on the same stream
            (``404``/``413``/``409``/``503`` with the store's rule id when it cannot be
            had).  ``docs/threads.md``.
        background: Run every run detached (needs ``event_log`` and ``threads``): it goes
            on with no reader until it ends or ``max_run_seconds`` pass (then it is
            cancelled, ending with the cancelled outcome), its ``RUN_STARTED`` carries its
            input, and a client that connects meanwhile (``POST {path}/connect``) gets the
            thread restated, then the run restated compactly, then its live tail.
        allow_background: Let a request ask for a background run itself, with
            ``forwardedProps`` ``{"aguikit": {"background": true}}`` (refused with
            ``403`` otherwise).
        max_run_seconds: The longest a background run goes on.

    Raises:
        TypeError: ``handler`` is neither a coroutine function nor an async generator
            function taking the arguments above.

    .. versionchanged:: 0.3.0  async generator handlers; ``authorize``, ``on_error``,
       ``expose_errors``, ``max_body_bytes``, ``send_timeout``; refusals are problem
       documents, a failing event log a ``503``.
    .. versionchanged:: 0.4.0  ``event_log`` defaults to ``None`` (a run bound to its
       connection); the cancel request (``X-AGUI-Cancel``) for a logged run; ``threads``.
    """
    if send_timeout is not None and not send_timeout > 0:
        raise ValueError("send_timeout must be positive (or None)")
    if queue_size < 1:
        raise ValueError("queue_size must be at least 1")
    if resume_grace < 0:
        raise ValueError("resume_grace must not be negative")
    if max_body_bytes < 1:
        raise ValueError("max_body_bytes must be at least 1")
    serve = _serving(handler)
    log: EventLog | None = MemoryEventLog() if event_log is OWN_MEMORY_LOG else event_log
    if (background or allow_background) and (log is None or threads is None):
        raise ValueError(
            "background runs need an event_log (their events outlive every connection) "
            "and threads (where a connecting client finds the run in progress)"
        )
    if not max_run_seconds > 0:
        raise ValueError("max_run_seconds must be positive")

    async def endpoint(request: Request) -> Response:
        media_type = negotiate(request.headers.get("accept"))
        read = await _read_input(request, max_body_bytes)
        if isinstance(read, Response):
            return read
        data, run_input = read
        if CANCEL_HEADER in request.headers:
            return await _cancel(log, authorize, request, run_input)
        principal: str | None = None
        resume_after = request.headers.get("last-event-id")
        if log is not None and resume_after is not None:
            refused = await _may_follow(log, authorize, request, run_input)
            if refused is not None:
                return refused
        else:
            access = Access("start", run_input.thread_id, run_input.run_id, data)
            allowed = await _authorized(authorize, request, access)
            if isinstance(allowed, Response):
                return allowed
            principal = allowed
            # The claim, not a look-up, decides: of two requests racing to start the
            # same run id, exactly one gets it.
            if log is not None:
                owner = Owner(run_input.thread_id, principal)
                claimed = await _consult_log(log.claim(run_input.run_id, owner))
                if isinstance(claimed, Response):
                    return claimed
                if not claimed:
                    return await _taken(log, run_input, principal)
        detached: float | None = None
        if resume_after is None and (background or _option(run_input, "background")):
            if not (background or allow_background):
                return _problem(403, "this endpoint does not run background runs on request")
            assert threads is not None  # checked when the endpoint was built
            try:
                await threads.begin(run_input.thread_id, run_input.run_id, owner=principal)
            except ThreadError as error:
                return _thread_problem(error)
            detached = max_run_seconds
        history: list[dict[str, Any]] | None = None
        if resume_after is None and _option(run_input, "hydrate"):
            # Replaying the history reads the thread, as a connect does: the hook is asked
            # that too, so a hook that guards reads guards this one.
            reading = Access("connect", run_input.thread_id, run_input.run_id, data)
            reader = await _authorized(authorize, request, reading)
            if isinstance(reader, Response):
                return reader
            hydration = await _hydration(threads, run_input, reader)
            if isinstance(hydration, Response):
                return hydration
            history, run_input = hydration
        return EventStreamResponse(
            serve,
            run_input,
            media_type=media_type,
            mode=mode,
            keepalive=keepalive,
            queue_size=queue_size,
            snapshot_every=snapshot_every,
            event_log=log,
            resume_after=resume_after if log is not None else None,
            join_prelude=request.headers.get(JOIN_HEADER, "").strip().lower() == "prelude",
            resume_grace=resume_grace,
            on_error=on_error,
            expose_errors=expose_errors,
            principal=principal,
            telemetry=telemetry,
            trace_headers=request.headers,
            send_timeout=send_timeout,
            history=history,
            threads=threads,
            max_life=detached,
        )

    endpoint.__name__ = getattr(handler, "__name__", "agui_endpoint")
    endpoint.__doc__ = getattr(handler, "__doc__", None)
    return endpoint


def connect_endpoint(
    threads: ThreadStore,
    *,
    event_log: EventLog | None = None,
    authorize: Authorize | None = None,
    keepalive: float | None = 15.0,
    max_body_bytes: int = MAX_BODY_BYTES,
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
) -> Callable[[Request], Awaitable[Response]]:
    """
    An endpoint answering a ``POST`` of a ``RunAgentInput`` with its thread's restating
    run: what the official TypeScript client's ``connectAgent()`` asks an agent's
    ``connect()`` for, so a reloaded page gets its conversation back.

    The answer is one run under the request's ``runId``: ``RUN_STARTED``,
    ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT``, ``RUN_FINISHED`` (with the pending
    interrupts), framed as ``Accept`` asks and verified by a :class:`RunWriter` like any
    run.  The ``authorize`` hook is asked with action ``"connect"``; only the principal
    that owns the thread gets it, anyone else the ``404`` of a thread that does not exist
    (``AGUI-E030``); ``413``/``409``/``503`` for a thread too large, damaged, or a store
    that cannot answer.  :func:`create_app` mounts it at ``{path}/connect`` when given
    ``threads``.  ``docs/threads.md`` has the TypeScript subclass.

    While a background run is in progress on the thread (``event_log`` is the agent
    endpoint's), the restating run is ``<runId>.history`` and the answer goes on with
    the run in progress restated compactly (the late joiner's prelude, from its start)
    and then its live tail, to its end.  A run whose producer died ends there with the
    ``RUN_ERROR`` (``AGUI-E021``) the log writes once its lease lapsed, and the connect
    records that end into the thread; a run the log no longer holds (expired) is not
    attached to, and the thread's mark of it is cleared.

    .. versionadded:: 0.4.0
    """

    async def endpoint(request: Request) -> Response:
        media_type = negotiate(request.headers.get("accept"))
        read = await _read_input(request, max_body_bytes)
        if isinstance(read, Response):
            return read
        data, run_input = read
        access = Access("connect", run_input.thread_id, run_input.run_id, data)
        principal = await _authorized(authorize, request, access)
        if isinstance(principal, Response):
            return principal
        try:
            thread = await threads.load(run_input.thread_id, principal)
        except ThreadError as error:
            return _thread_problem(error)
        running = thread.running if event_log is not None else None
        if running is not None and event_log is not None:
            # The log, not the thread's mark, says whether the run can be followed: a
            # run whose log expired (its worker died long ago) is no longer in progress.
            held = await _owned(event_log, attrs.evolve(run_input, run_id=running), principal)
            if isinstance(held, Response):
                return held
            if not held:
                await _end_in_thread(threads, run_input.thread_id, running, [], principal)
                running = None
        attach = running is not None
        try:
            events = restate(thread, run_input.run_id + (HISTORY_SUFFIX if attach else ""))
        except ThreadError as error:
            return _thread_problem(error)

        async def replay(given: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
            for wire in events:
                yield wire

        if running is not None and event_log is not None:
            log = event_log
            return EventStreamResponse(
                _serving(replay),
                attrs.evolve(run_input, run_id=running),
                media_type=media_type,
                mode="strict",
                keepalive=keepalive,
                queue_size=64,
                snapshot_every=0,
                event_log=event_log,
                resume_after="0",
                join_prelude=True,
                principal=principal,
                send_timeout=send_timeout,
                history=events,
                after=lambda: _settle_in_thread(
                    threads, log, run_input.thread_id, running, principal
                ),
            )
        return EventStreamResponse(
            _serving(replay),
            run_input,
            media_type=media_type,
            mode="strict",
            keepalive=keepalive,
            queue_size=len(events),
            snapshot_every=0,
            principal=principal,
            send_timeout=send_timeout,
        )

    return endpoint


def delete_thread_endpoint(
    threads: ThreadStore,
    *,
    event_log: EventLog | None = None,
    authorize: Authorize | None = None,
) -> Callable[[Request], Awaitable[Response]]:
    """
    An endpoint deleting the thread its path names (``{thread_id}``, percent-encoded):
    ``204`` once every trace of it is gone from the store (on Redis its one key).

    The ``authorize`` hook is asked with action ``"delete"`` (``run_id`` ``None``); only
    the thread's owner may delete it, and anyone else gets the ``404`` (``AGUI-E030``) of
    a thread that does not exist, as an unknown, expired or already deleted thread does.
    A damaged or too large thread can be deleted (its owner's way out).  A background run
    in progress on it is asked to stop (a cancel request, on whichever worker runs it),
    and its end is not recorded: a deleted thread is never brought back by a run that
    ends after.  The ended runs' events go from ``event_log`` too (they name the thread),
    rather than its ``ttl`` after they ended.  ``503`` (``AGUI-E033``) when the store
    cannot answer, or with the log's code when it cannot (the thread is then kept, so
    the ``DELETE`` can be repeated).
    :func:`create_app` mounts it at ``DELETE {path}/threads/{thread_id}``.

    .. versionadded:: 0.4.0
    """

    async def endpoint(request: Request) -> Response:
        thread_id = str(request.path_params["thread_id"])
        access = Access("delete", thread_id, None)
        principal = await _authorized(authorize, request, access)
        if isinstance(principal, Response):
            return principal
        try:
            thread = owned(await threads.get(thread_id), thread_id, principal)
        except ThreadError as error:
            return _thread_problem(error)
        if event_log is not None:
            if thread.running is not None:
                await _stop_run(event_log, thread.running)
            # The ended runs' events name the thread too: gone with it, not ttl later;
            # first, so a log that fails leaves the thread for a repeated DELETE.
            for run in thread.runs:
                forgotten = await _consult_log(event_log.forget(run.run_id))
                if isinstance(forgotten, Response):
                    return forgotten
        try:
            await threads.delete(thread_id)
        except ThreadError as error:
            return _thread_problem(error)
        LOGGER.info("thread %r deleted", thread_id)
        return Response(status_code=204)

    return endpoint


def create_app(
    handler: Handler,
    *,
    path: str = "/",
    capabilities: AgentCapabilities | Mapping[str, Any] | None = None,
    **options: Any,
) -> Starlette:
    """
    A one-route ASGI app serving ``handler`` with ``POST`` on ``path``; ``options`` are
    those of :func:`agui_endpoint`.  ``uvicorn module:app`` runs it.

    With ``threads`` (an option of :func:`agui_endpoint`) it also answers
    ``POST {path}/connect`` with a thread's restating run (:func:`connect_endpoint`) and
    ``DELETE {path}/threads/{thread_id}`` by deleting the thread
    (:func:`delete_thread_endpoint`).
    With ``capabilities`` it also answers ``GET {path}/capabilities`` with them (see
    :func:`capabilities_endpoint`), where :meth:`aguikit.Agent.capabilities` looks, and
    declares there whether the endpoint's runs can be resumed: ``transport.resumable`` is
    ``true`` with an ``event_log``, ``false`` without (the spec's flag speaks of resuming by
    sequence number, which is what aguikit's ``Last-Event-ID`` extension does;
    ``docs/spec-decisions.md``).

    Raises:
        SchemaValidationError: ``capabilities`` is not a valid ``AgentCapabilities``.
        ValueError: ``capabilities`` declares ``transport.resumable`` otherwise than the
            endpoint is built (an ``event_log`` or not): a declaration that does not hold
            misleads the client built on it.

    .. versionchanged:: 0.3.0  ``capabilities``.
    .. versionchanged:: 0.4.0  ``transport.resumable`` declared from ``event_log``.
    """
    if options.get("event_log") is OWN_MEMORY_LOG:  # one log the thread routes share
        options = {**options, "event_log": MemoryEventLog()}
    routes = [Route(path, agui_endpoint(handler, **options), methods=["POST"])]
    threads = options.get("threads")
    if threads is not None:
        log = options.get("event_log")
        connect = connect_endpoint(
            threads,
            event_log=log,
            **{
                name: options[name]
                for name in ("authorize", "keepalive", "max_body_bytes", "send_timeout")
                if name in options
            },
        )
        base = path.rstrip("/")
        routes.append(Route(base + "/connect", connect, methods=["POST"]))
        delete = delete_thread_endpoint(threads, event_log=log, authorize=options.get("authorize"))
        routes.append(Route(base + "/threads/{thread_id:path}", delete, methods=["DELETE"]))
    if capabilities is not None:
        declared = _declare_resumable(capabilities, options.get("event_log") is not None)
        where = path.rstrip("/") + "/capabilities"
        routes.append(Route(where, capabilities_endpoint(declared), methods=["GET"]))
    return _App(routes=routes)


class _App(Starlette):
    """
    :func:`create_app`'s app: a Starlette app that leaves the connection's transport in
    the scope (:data:`_TRANSPORT`) when the ASGI server's ``send`` is a method of an
    object holding it (uvicorn's ``RequestResponseCycle``), before any middleware wraps
    ``send``, so an answer can ask the kernel whether its client reads (:class:`_Progress`).
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        if transport is not None:
            scope[_TRANSPORT] = transport
        await super().__call__(scope, receive, send)


def _declare_resumable(
    capabilities: AgentCapabilities | Mapping[str, Any], resumable: bool
) -> Mapping[str, Any]:
    """The capabilities' wire dict with ``transport.resumable`` set to ``resumable``
    (left to the schema check when it is not of the schema's shape)."""
    wire = dict(capabilities) if isinstance(capabilities, Mapping) else to_wire(capabilities)
    transport = wire.get("transport", {})
    given = transport.get("resumable") if isinstance(transport, Mapping) else None
    if not isinstance(transport, Mapping) or not isinstance(given, bool | None):
        return wire  # not the schema's shape: capabilities_endpoint names the pointer
    if given is not None and given is not resumable:
        raise ValueError(
            f"capabilities declare transport.resumable {json.dumps(given)}, but the endpoint "
            + (
                "logs its runs (event_log): they can be resumed"
                if resumable
                else "has no event_log: its runs end with their connection; pass one to "
                "make them resumable"
            )
        )
    wire["transport"] = {**transport, "resumable": resumable}
    return wire


def capabilities_endpoint(
    capabilities: AgentCapabilities | Mapping[str, Any],
) -> Callable[[Request], Awaitable[Response]]:
    """
    An endpoint answering ``GET`` with the agent's declared capabilities as JSON.

    Mount it at ``<agent path>/capabilities``, where clients look (the official
    TypeScript client and :meth:`aguikit.Agent.capabilities`): a Starlette
    ``Route("/agent/capabilities", endpoint, methods=["GET"])`` or a FastAPI
    ``app.get("/agent/capabilities")(endpoint)``; :func:`create_app` does it itself.

    ``capabilities`` is an :class:`~aguikit.models.AgentCapabilities` or its wire dict.
    It is checked strictly against the schema and serialised here, once: a misspelt
    member or a wrong type fails where the app is built, naming its JSON pointer, rather
    than in a client that asks later.  Declare only what the agent really does (a missing
    member means "not declared", not "unsupported").

    Raises:
        SchemaValidationError: The declaration is not a valid ``AgentCapabilities``.
        WireFormatError: It is neither a mapping nor a generated model.

    .. versionadded:: 0.3.0
    """
    wire = dict(capabilities) if isinstance(capabilities, Mapping) else to_wire(capabilities)
    validate(wire, "AgentCapabilities", strict=True)
    body = dumps_wire(wire).encode("utf-8")

    async def endpoint(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return endpoint
