"""
Serve a run handler over HTTP: ``agui_endpoint(handler)`` for Starlette and FastAPI, and
``create_app(handler)`` for a one-line ASGI app.

What an agent server gets wrong in production is mostly not the protocol but the serving:
a proxy that buffers the stream until it ends, an idle connection a load balancer cuts
after 60 seconds, a handler that keeps generating (and paying for tokens) after the user
closed the tab, a fast model filling memory for a slow reader.  The endpoint does the
serving once:

* the body is read with :mod:`aguikit.jsonio` and validated against ``RunAgentInput``
  (``400`` when it is not JSON, ``422`` listing every problem with its JSON pointer);
* ``Accept`` picks the framing: SSE by default (each frame's ``data:`` line
  byte-identical to the official SDK's ``EventEncoder``, after the frame's ``id:`` when
  the run is logged), JSONL for ``application/jsonl`` / ``application/x-ndjson``,
  and length-prefixed protobuf (``application/vnd.ag-ui.event+proto``, the bytes
  ``@ag-ui/proto`` writes) for a client that prefers it; ``406`` when none is acceptable;
* ``Cache-Control: no-cache``, ``X-Accel-Buffering: no`` (nginx) and
  ``Connection: keep-alive``; an SSE comment after ``keepalive`` seconds of silence;
* every event is sent as it is written (one ASGI body message, which the server flushes);
* a bounded queue between the handler and the socket: a slow reader blocks the handler's
  next ``emit`` (the server's own flow control blocks the send), so memory per stream is
  the queue plus the socket buffer, whatever the handler produces (plus the run's event
  log, which keeps the whole run, up to the log's ``max_events``, for a resume);
* every run goes to an event log (a :class:`~aguikit.server.eventlog.MemoryEventLog` of
  the endpoint's own unless it is given one): each SSE frame carries its ``id:``, a client
  that lost its connection reconnects with ``Last-Event-ID`` (on any worker sharing the
  log) and gets what it missed, then the rest live; ``docs/resume.md`` is the protocol;
* a run nobody follows any more is cancelled (the handler sees
  :class:`asyncio.CancelledError` at its next ``await``) and nothing is written after
  it: with a log, once ``resume_grace`` seconds pass with no reader (time for the client
  to reconnect); with ``event_log=None``, the run is bound to its one connection (no
  ids, frames exactly the SDK encoder's) and a disconnect cancels it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._generated.models import AgentCapabilities, RunAgentInput
from ..encode import encode_proto
from ..errors import DecodeError
from ..jsonio import dumps_wire, loads
from ..proto import MEDIA_TYPE as PROTO_MEDIA_TYPE
from ..transport import jsonl, sse
from ..validate import is_valid, iter_schema_errors, validate
from ..wire import parse_run_agent_input, to_wire
from .eventlog import EventLog, MemoryEventLog, prelude
from .writer import Mode, RunWriter

__all__ = [
    "OWN_MEMORY_LOG",
    "PROTOBUF_MEDIA_TYPE",
    "Handler",
    "agui_endpoint",
    "capabilities_endpoint",
    "create_app",
    "negotiate",
]

Handler = Callable[[RunAgentInput, RunWriter], Awaitable[None]]
"""``async def handler(input, run)``: answer one run request by emitting on ``run``."""

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
LOGGER: Final = logging.getLogger("aguikit.server")
_DONE: Final[Any] = object()
"""Ends the frame queue: the run is over, or the client left."""
_POLL: Final = 1.0
"""Seconds between two looks at the readers of a run that lost its first connection."""


class _OwnLog(enum.Enum):
    OWN_MEMORY_LOG = "OWN_MEMORY_LOG"

    def __repr__(self) -> str:
        return "OWN_MEMORY_LOG"


OWN_MEMORY_LOG: Final = _OwnLog.OWN_MEMORY_LOG
"""The default ``event_log`` of :func:`agui_endpoint`: a new
:class:`~aguikit.server.eventlog.MemoryEventLog` for each endpoint.  A sentinel rather
than ``None``, because ``event_log=None`` means something else: no log at all."""


def negotiate(accept: str | None) -> str | None:
    """
    The media type to answer with for an ``Accept`` header: ``text/event-stream``, a JSONL
    type, the protobuf type, or ``None`` when nothing the endpoint serves is acceptable
    (406).

    The highest ``q`` wins, the earlier range on a tie; no header means SSE.
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
    for _, _, media in sorted(ranges):
        if media in _SSE_RANGES:
            return sse.MEDIA_TYPE
        if media in _JSONL_TYPES or media == PROTOBUF_MEDIA_TYPE:
            return media
    return None


def _problem(status: int, title: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"title": title, "status": status, **extra}, status_code=status)


async def _read_input(request: Request) -> RunAgentInput | Response:
    body = await request.body()
    try:
        data = loads(body, source="request body")
    except DecodeError as error:
        return _problem(400, "the request body is not JSON", detail=str(error))
    # Tolerant: a newer client may send members this server's schema does not declare.
    # The fast verdict first; the explanation only for a body that fails it.
    if not is_valid(data, "RunAgentInput", strict=False):
        issues = list(iter_schema_errors(data, "RunAgentInput", strict=False))
        return _problem(
            422,
            "the request body is not a valid RunAgentInput",
            issues=[
                {"pointer": issue.pointer, "keyword": issue.keyword, "message": issue.message}
                for issue in issues
            ],
        )
    return parse_run_agent_input(data, check=False)


class EventStreamResponse(Response):
    """
    The streamed answer to one run request: the handler runs in its own task, feeding a
    bounded queue of encoded frames that this response writes to the socket.
    """

    def __init__(
        self,
        handler: Handler,
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
        self.keepalive = keepalive if media_type == sse.MEDIA_TYPE else None
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
        if event_log is not None and media_type == sse.MEDIA_TYPE:
            # Tells a client that was cut off before its first event that it may resume.
            self.raw_headers.append((RESUMABLE_HEADER.encode("latin-1"), b"last-event-id"))
        self.event_log = event_log
        self.resume_after = resume_after
        """With a log: follow the run after this id rather than start it."""
        self.join_prelude = join_prelude
        """With a log and ``resume_after``: start with a prelude rather than the log."""
        self.resume_grace = resume_grace if media_type == sse.MEDIA_TYPE else 0.0
        """With a log: seconds a run this answer started outlives its last reader.  Only
        an SSE answer can be resumed (JSONL and protobuf carry no ids), so another
        framing's run gets none: it lives on only while a joiner follows it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        queue: asyncio.Queue[Any] = asyncio.Queue(self.queue_size)
        encode = self.encode

        async def sink(wire: Mapping[str, Any]) -> None:
            if not self.disconnected:
                await queue.put(encode(wire))

        async def produce() -> None:
            try:
                await self.run_handler(sink)
            finally:
                if not self.disconnected:
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
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await self._pump(queue, send)
        except OSError:  # the connection broke under a send
            self.disconnected = True
        finally:
            watcher.cancel()
            if not producer.done():
                producer.cancel()
            try:
                with contextlib.suppress(asyncio.CancelledError):
                    await producer
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            finally:  # also when following failed: the run must not wait for this reader
                if started is not None:
                    started.reader_left()

    async def run_handler(self, sink: Callable[[Mapping[str, Any]], Awaitable[None]]) -> None:
        """Run the handler on a :class:`RunWriter` writing to ``sink``."""
        run = RunWriter(
            self.run_input, sink=sink, mode=self.mode, snapshot_every=self.snapshot_every
        )
        async with run:
            # Let the writer send RUN_STARTED before the handler fills the queue: under
            # many concurrent streams the first event then leaves at once.
            await asyncio.sleep(0)
            await self.handler(self.run_input, run)

    async def _follow(
        self, log: EventLog, queue: asyncio.Queue[Any], started: _LoggedRun | None
    ) -> None:
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
            # Closed on cancellation too, so the log stops counting this reader at once.
            async with contextlib.aclosing(log.follow(self.run_input.run_id, after)) as live:
                async for event_id, wire in live:
                    frame = self.encode(wire)
                    # The id line, then exactly the frame the connection-bound mode sends.
                    await queue.put(f"id: {event_id}\n".encode() + frame if sse_framing else frame)
                    if started is not None:
                        started.queued(event_id)
        finally:
            if not self.disconnected:
                await queue.put(_DONE)

    async def _pump(self, queue: asyncio.Queue[Any], send: Send) -> None:
        keepalive = self.keepalive
        while True:
            try:
                frame = queue.get_nowait()
            except asyncio.QueueEmpty:
                try:
                    frame = await asyncio.wait_for(queue.get(), keepalive)
                except TimeoutError:
                    frame = _KEEPALIVE
            if self.disconnected:
                return
            if frame is _DONE:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.body", "body": frame, "more_body": True})


_DETACHED: Final[set[asyncio.Task[None]]] = set()
"""Runs that outlive their connection; held here so the loop does not drop them."""


class _LoggedRun:
    """
    A run started as a task of its own, writing every event to ``log``: a logged run
    belongs to the log, not to the connection, so a dropped client does not cancel it at
    once (it reconnects and follows on, on any worker sharing the log).

    While the connection that started it is there, that reader paces it: the handler's
    ``emit`` waits while the run is more than ``queue_size`` events ahead of what the
    connection has taken, so a slow reader slows the producer as without a log (the log
    itself keeps the run, up to its ``max_events``, for a resume).

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
        self.task = _detach(self._produce(response))

    def queued(self, event_id: str) -> None:
        """The starting connection took the event ``event_id``."""
        self.taken = int(event_id)
        self.progress.set()

    async def _produce(self, response: EventStreamResponse) -> None:
        async def sink(wire: Mapping[str, Any]) -> None:
            number = int(await self.log.append(self.run_id, wire))
            self.logged.set()
            while self.attached and number - self.taken > self.window:
                self.progress.clear()
                await self.progress.wait()

        try:
            await response.run_handler(sink)
        finally:
            self.logged.set()
            # Shielded: a cancelled run is still marked ended, so its followers stop.
            await asyncio.shield(self.log.end(self.run_id))

    def reader_left(self) -> None:
        """The connection that started the run ended: from now on the run lives only
        while some reader follows it, give or take the grace window."""
        self.attached = False
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
                    cancelled = True
                    self.task.cancel()
                    wait = _POLL
            else:
                alone_since = None
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
    if not task.cancelled() and task.exception() is not None:
        LOGGER.error("a logged run's task failed", exc_info=task.exception())


def _jsonl_bytes(wire: Mapping[str, Any]) -> bytes:
    return jsonl.encode_line(wire).encode("utf-8")


def agui_endpoint(
    handler: Handler,
    *,
    mode: Mode = "strict",
    keepalive: float | None = 15.0,
    queue_size: int = 64,
    snapshot_every: int = 0,
    event_log: EventLog | Literal[_OwnLog.OWN_MEMORY_LOG] | None = OWN_MEMORY_LOG,
    resume_grace: float = 30.0,
) -> Callable[[Request], Awaitable[Response]]:
    """
    Wrap ``handler`` as an HTTP endpoint that answers AG-UI run requests.

    The result is an ``async def endpoint(request) -> Response``: a Starlette
    ``Route("/agent", endpoint, methods=["POST"])`` and a FastAPI path operation
    (``app.post("/agent")(endpoint)``) alike, so the same handler serves from either.

    Args:
        handler: ``async def handler(input, run)``; ``run`` is a :class:`RunWriter` that
            has already sent ``RUN_STARTED`` and will end the run itself.
        mode: The writer's mode for every run (``strict``, ``repair`` or ``audit``).
        keepalive: Seconds of silence after which an SSE comment is sent so proxies and
            load balancers keep the connection (``None``: never).
        queue_size: Frames buffered between the handler and the socket; past it the
            handler's next ``emit`` waits for the client.
        snapshot_every: Passed to each :class:`RunWriter`.
        event_log: Where runs are logged, which makes them resumable (see
            :mod:`aguikit.server.eventlog` and ``docs/resume.md``): each SSE frame
            carries its ``id:`` before the SDK encoder's bytes, a dropped client does
            not cancel the run at once, and a request carrying ``Last-Event-ID`` follows
            the run after that id (``410`` when the log cannot: unknown run, expired, an
            id never issued, or nothing left after it; ``409`` for a run id already
            claimed, without the header).  The default, :data:`OWN_MEMORY_LOG`, is a
            new :class:`MemoryEventLog` for this endpoint (one process); pass a
            :class:`~aguikit.server.redis_log.RedisEventLog` for several workers.
            ``None`` keeps each run bound to its one connection: no ids, frames exactly
            the SDK encoder's, and a disconnect cancels the handler at once.
        resume_grace: With a log, the seconds a run goes on after its last reader left
            (an SSE client's dropped connection), waiting for a reconnect; past them
            with no reader, the handler is cancelled and the run's log ends there.  A
            JSONL or protobuf answer cannot be resumed, so its run gets no grace.
    """
    if queue_size < 1:
        raise ValueError("queue_size must be at least 1")
    if resume_grace < 0:
        raise ValueError("resume_grace must not be negative")
    log: EventLog | None = MemoryEventLog() if event_log is OWN_MEMORY_LOG else event_log

    async def endpoint(request: Request) -> Response:
        media_type = negotiate(request.headers.get("accept"))
        if media_type is None:
            return _problem(
                406,
                "no acceptable framing",
                detail=f"Accept: {request.headers.get('accept')!r}; this endpoint serves "
                f"{sse.MEDIA_TYPE}, {', '.join(_JSONL_TYPES)} and {PROTOBUF_MEDIA_TYPE}",
            )
        run_input = await _read_input(request)
        if isinstance(run_input, Response):
            return run_input
        resume_after = request.headers.get("last-event-id")
        if log is not None and resume_after is not None:
            if not await log.resumable(run_input.run_id, resume_after):
                return _problem(
                    410,
                    "the run cannot be resumed from this event id",
                    detail=f"run {run_input.run_id!r} has no logged events after "
                    f"{resume_after!r} on this server: unknown run, expired log, an id this "
                    "server never issued, or the run ended (or was cancelled, nobody "
                    "following it) with nothing after it; start a new run",
                    runId=run_input.run_id,
                    lastEventId=resume_after,
                )
        elif log is not None and not await log.claim(run_input.run_id):
            # The claim, not a look-up, decides: of two requests racing to start the
            # same run id, exactly one gets it.
            return _problem(
                409,
                "this run has already started",
                detail=f"run {run_input.run_id!r} is running or ran on this server; "
                "to follow it send Last-Event-ID (0: from its first event)",
                runId=run_input.run_id,
            )
        return EventStreamResponse(
            handler,
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
        )

    endpoint.__name__ = getattr(handler, "__name__", "agui_endpoint")
    endpoint.__doc__ = getattr(handler, "__doc__", None)
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

    With ``capabilities`` it also answers ``GET {path}/capabilities`` with them (see
    :func:`capabilities_endpoint`), where :meth:`aguikit.Agent.capabilities` looks.

    Raises:
        SchemaValidationError: ``capabilities`` is not a valid ``AgentCapabilities``.

    .. versionchanged:: 0.3.0  ``capabilities``.
    """
    routes = [Route(path, agui_endpoint(handler, **options), methods=["POST"])]
    if capabilities is not None:
        where = path.rstrip("/") + "/capabilities"
        routes.append(Route(where, capabilities_endpoint(capabilities), methods=["GET"]))
    return Starlette(routes=routes)


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
