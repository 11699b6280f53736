"""
An in-process ASGI transport for httpx that streams: the answer arrives as the app sends it.

Talking to an ASGI app without a socket is what tests and notebooks want, and
``httpx.ASGITransport`` does it by running the app *to completion* and only then handing
over the body it collected.  For an AG-UI endpoint that is a different program, not a
faster one: a subscriber sees nothing until the run has ended, a stream that never ends
hangs the request, cancelling the client cannot cut a live run (the app never hears that
the client left), a slow reader applies no backpressure (the app writes into an unbounded
list), and an app that fails half-way raises its own exception instead of the broken
connection a real client would see.  A test of streaming behaviour over it tests nothing.

:class:`ASGIStreamTransport` behaves like a server (uvicorn is the model) instead:

* the app runs as a task; the request returns its :class:`httpx.Response` as soon as the
  app sends ``http.response.start``, and each ``http.response.body`` message reaches the
  reader as it is sent;
* the body passes through a bounded queue, so the app's ``send`` waits while the reader is
  behind (``queue_size`` chunks ahead, like a full socket buffer);
* closing the response early (``aclose()``, a cancelled task, an exception in the
  consumer) delivers ``http.disconnect`` to the app's ``receive``, drops whatever it sends
  afterwards (as uvicorn does under ASGI spec 2.3), and waits up to ``close_timeout``
  seconds for the app to wind down before cancelling it, so when the close returns the
  app is done;
* the request body is delivered through ``http.request`` messages, and after it
  ``receive`` waits until the response is over or the client left, then says
  ``http.disconnect``;
* an exception the app raises before ``http.response.start`` is raised by the request
  itself (the app's own exception: it is a bug to see, not a network condition); one
  raised mid-body is an :class:`httpx.ReadError` for the reader (chained to the app's
  exception), and an app that returns without finishing its body an
  :class:`httpx.RemoteProtocolError`: what a client sees when a server drops the
  connection, so reconnect logic is exercised as it would be in production;
* the request's read timeout applies to the start of the answer and between chunks
  (:class:`httpx.ReadTimeout`), as over a socket.

It runs on asyncio (the app is an ``asyncio`` task), as the rest of aguikit does.
What it deliberately does not do: the ``lifespan`` protocol (an app whose routes need
startup state should be entered with its own lifespan context, e.g. Starlette's
``TestClient``, or served by uvicorn), WebSockets, HTTP/2, trailers or ``pathsend``.
It imports only ``httpx``, so it sits with the other transports, below the models.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Final, TypeAlias
from urllib.parse import unquote

import httpx

__all__ = ["ASGIApp", "ASGIStreamTransport"]

Message: TypeAlias = MutableMapping[str, Any]
ASGIApp: TypeAlias = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]
"""An ASGI 3 application: ``await app(scope, receive, send)``."""

LOGGER: Final = logging.getLogger("aguikit.transport.asgi")

_END: Final[Any] = object()
"""Ends the body queue: the response is complete, or failed (see ``_Exchange.failure``)."""

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class _Exchange:
    """One request and its response: the app's ``receive`` and ``send``, and the body queue."""

    def __init__(self, request: httpx.Request, queue_size: int) -> None:
        self.request = request
        self.head = request.method == "HEAD"
        stream = request.stream
        if not isinstance(stream, httpx.AsyncByteStream):
            raise TypeError("ASGIStreamTransport needs an async request body (httpx.AsyncClient)")
        self.body_chunks: AsyncIterator[bytes] = stream.__aiter__()
        self.request_complete = False
        self.started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = (
            asyncio.get_running_loop().create_future()
        )
        self.queue: asyncio.Queue[Any] = asyncio.Queue(queue_size)
        self.complete = False
        """The app sent its last body message."""
        self.closed = False
        """The client closed the response (or gave up on it) before the app was done."""
        self.over = asyncio.Event()
        """Set once the response is complete or closed: ``receive`` then says disconnect."""
        self.failure: httpx.TransportError | None = None
        """What the reader raises at the end of the queue instead of ending cleanly."""

    async def receive(self) -> Message:
        if not self.request_complete and not self.closed:
            try:
                chunk = await self.body_chunks.__anext__()
            except StopAsyncIteration:
                self.request_complete = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.request", "body": bytes(chunk), "more_body": True}
        await self.over.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.closed:
            # The client is gone: what the app sends now is dropped, as uvicorn drops it.
            # Yield anyway, so an app that only ever sends can still be cancelled.
            await asyncio.sleep(0)
            return
        kind = message["type"]
        if kind == "http.response.start":
            if self.started.done():
                raise RuntimeError("the ASGI app sent 'http.response.start' twice")
            headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            self.started.set_result((int(message["status"]), headers))
        elif kind == "http.response.body":
            if not self.started.done():
                raise RuntimeError("the ASGI app sent a body before 'http.response.start'")
            if self.complete:
                raise RuntimeError("the ASGI app sent a body after completing the response")
            body = bytes(message.get("body", b""))
            if body and not self.head:
                await self.queue.put(body)
            if not message.get("more_body", False):
                self.complete = True
                self.over.set()
                await self.queue.put(_END)
        else:
            raise RuntimeError(f"ASGIStreamTransport does not handle {kind!r} messages")

    async def run(self, app: ASGIApp, scope: MutableMapping[str, Any]) -> None:
        """Run the app, turning how it ended into what the request or the reader sees."""
        try:
            await app(scope, self.receive, self.send)
        except Exception as exc:
            if not self.started.done():
                self.started.set_exception(exc)
            elif self.closed or self.complete:
                # Nobody is reading any more: log it, as a server logs a failed app.
                LOGGER.error("the ASGI app raised after its response was over", exc_info=exc)
            else:
                failure = httpx.ReadError(
                    f"the ASGI app raised {type(exc).__name__} mid-body: {exc}",
                    request=self.request,
                )
                failure.__cause__ = exc
                await self._fail(failure)
            return
        if not self.started.done():
            self.started.set_exception(
                httpx.RemoteProtocolError(
                    "the ASGI app returned without starting a response", request=self.request
                )
            )
        elif not self.complete and not self.closed:
            await self._fail(
                httpx.RemoteProtocolError(
                    "the ASGI app returned before completing the response body",
                    request=self.request,
                )
            )

    async def _fail(self, failure: httpx.TransportError) -> None:
        self.failure = failure
        self.over.set()
        await self.queue.put(_END)

    def close(self) -> None:
        """The client left: tell the app, and unblock a ``send`` waiting on a full queue."""
        if self.complete and self.queue.empty():
            self.over.set()
            return
        self.closed = True
        self.over.set()
        while not self.queue.empty():
            self.queue.get_nowait()


class _ResponseBody(httpx.AsyncByteStream):
    """The response body: chunks from the queue as the app sends them; closing disconnects."""

    def __init__(
        self,
        exchange: _Exchange,
        task: asyncio.Task[None],
        read_timeout: float | None,
        close_timeout: float,
    ) -> None:
        self._exchange = exchange
        self._task = task
        self._read_timeout = read_timeout
        self._close_timeout = close_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self._exchange
        while True:
            if exchange.closed:
                raise httpx.StreamClosed()
            try:
                async with asyncio.timeout(self._read_timeout):
                    chunk = await exchange.queue.get()
            except TimeoutError:
                raise httpx.ReadTimeout(
                    f"the ASGI app sent nothing for {self._read_timeout} seconds",
                    request=exchange.request,
                ) from None
            if chunk is _END:
                if exchange.failure is not None:
                    raise exchange.failure
                return
            yield chunk

    async def aclose(self) -> None:
        self._exchange.close()
        await _wind_down(self._task, self._close_timeout)


async def _wind_down(task: asyncio.Task[None], timeout: float) -> None:
    """Give the app ``timeout`` seconds to end after the client left, then cancel it."""
    if not task.done():
        await asyncio.wait({task}, timeout=timeout)
    if not task.done():
        LOGGER.warning("the ASGI app ignored the disconnect for %s s: cancelling it", timeout)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class ASGIStreamTransport(httpx.AsyncBaseTransport):
    """
    An ``httpx`` async transport that runs an ASGI app in process and streams its answer.

    ``httpx.ASGITransport`` returns a response only after the app has finished, so
    nothing streams through it (see the module docstring for everything that changes);
    this one returns at ``http.response.start`` and delivers each body message as it is
    sent, with backpressure, disconnects and failures as a real server has them::

        transport = ASGIStreamTransport(app)
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("POST", "http://agent.test/agent", json=body) as answer:
                async for chunk in answer.aiter_bytes():
                    ...

    Args:
        app: The ASGI 3 application (Starlette, FastAPI, :func:`aguikit.server.create_app`).
        root_path: The ``root_path`` of the scope: the prefix the app is mounted under.
            ``path`` is the full path the client asked for, which includes it, as ASGI
            servers deliver it.
        client: The ``(host, port)`` the app sees as the peer.
        queue_size: Body chunks the app may send ahead of the reader; past it the app's
            ``send`` waits, as it would on a full socket.
        close_timeout: Seconds the app has to end after the client closed the response
            before it is cancelled.

    The ``lifespan`` protocol is not run: enter the app's lifespan yourself if its
    routes need it.

    .. versionadded:: 0.3.0
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        root_path: str = "",
        client: tuple[str, int] = ("127.0.0.1", 123),
        queue_size: int = 1,
        close_timeout: float = 5.0,
    ) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self.app = app
        self.root_path = root_path
        self.client = client
        self.queue_size = queue_size
        self.close_timeout = close_timeout

    def scope(self, request: httpx.Request) -> dict[str, Any]:
        """The ASGI ``http`` scope for ``request``, with the fields a server provides."""
        url = request.url
        raw_path = url.raw_path.split(b"?", 1)[0]
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": url.scheme,
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": url.query,
            "root_path": self.root_path,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "server": (url.host, url.port or _DEFAULT_PORTS.get(url.scheme, 80)),
            "client": self.client,
            "state": {},
            "extensions": {},
        }

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """
        Start the app on ``request`` and return as soon as it starts its answer.

        Raises:
            Exception: Whatever the app raised before starting its answer.
            httpx.RemoteProtocolError: The app returned without starting an answer.
            httpx.ReadTimeout: The app did not start its answer within the read timeout.
        """
        timeouts = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read") if isinstance(timeouts, dict) else None
        exchange = _Exchange(request, self.queue_size)
        task = asyncio.create_task(exchange.run(self.app, self.scope(request)))
        try:
            async with asyncio.timeout(read_timeout):
                pending: set[asyncio.Future[Any]] = {exchange.started, task}
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if not exchange.started.done():  # the app was cancelled from outside
                    await task
                status, headers = await exchange.started
        except BaseException as exc:
            exchange.close()
            await _wind_down(task, self.close_timeout)
            if exchange.started.done() and not exchange.started.cancelled():
                exchange.started.exception()  # retrieved: raised below, or moot
            if isinstance(exc, TimeoutError):
                raise httpx.ReadTimeout(
                    f"the ASGI app did not answer within {read_timeout} seconds", request=request
                ) from None
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=_ResponseBody(exchange, task, read_timeout, self.close_timeout),
            extensions={"http_version": b"HTTP/1.1"},
        )
