"""
The one HTTP fetch of aguikit: POST a run request, check the answer, hand over its bytes.

Everything that talks to a live agent (:class:`aguikit.client.AgentClient`, ``aguikit
check URL``) needs the same few steps done the same way: POST a JSON body with
``Accept: text/event-stream`` (or, when asked, with the binary transport
``application/vnd.ag-ui.event+proto`` too), refuse a non-2xx answer with the start of its
body, refuse a 2xx answer in a media type it did not ask for, tell the caller which one
the agent chose, and turn every ``httpx`` failure, before or
during the body, into a typed :class:`~aguikit.errors.TransportError`.  They are done
here, once; the caller decodes the bytes (:mod:`aguikit.transport.sse`, or the frames of
:mod:`aguikit.transport.proto`) and decides what the events mean.

Closing is part of the contract: leaving the iteration early (``break``, ``close()``,
``aclose()``, cancelling the task) closes the response and with it the connection, so the
agent sees the client go and can stop spending tokens.

What it deliberately does not do: build or validate the request body (the client's job,
floors above, where the models are), retry, or reconnect (the client reconnects, with
``Last-Event-ID`` among the ``headers`` it passes).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Final

import httpcore
import httpx

from ..errors import ContentTypeError, HTTPStatusError, TransportError
from ..jsonio import dumps_wire, loads, utf8
from .proto import MEDIA_TYPE as PROTO_MEDIA_TYPE
from .sse import MEDIA_TYPE

__all__ = [
    "BOTH",
    "DEFAULT_TIMEOUT",
    "SSE_ONLY",
    "ResponseHook",
    "aforward",
    "aforward_client",
    "aget_json",
    "apost_stream",
    "aread",
    "post_stream",
]

SSE_ONLY: Final = (MEDIA_TYPE,)
"""The default ``accept``: what every AG-UI agent speaks."""

BOTH: Final = (PROTO_MEDIA_TYPE, MEDIA_TYPE)
"""Binary preferred, SSE accepted: the agent picks, the ``Content-Type`` says which."""

ResponseHook = Callable[[int, Mapping[str, str]], None]
"""Called with the status code and headers as soon as the agent's answer begins."""

DEFAULT_TIMEOUT: Final = 60.0
"""Seconds; the read timeout applies between chunks, so a slow agent that keeps talking is
fine."""

_ERROR_BODY_BYTES: Final = 4096
"""How much of a non-2xx body is read for the error: enough to show why, never all of it."""


def _headers(extra: Mapping[str, str] | None, accept: Sequence[str]) -> dict[str, str]:
    return {**(extra or {}), "Content-Type": "application/json", "Accept": ", ".join(accept)}


def _content(body: Mapping[str, Any]) -> bytes:
    """The request body as UTF-8 JSON, written by the one JSON writer before anything is
    sent: a value JSON or UTF-8 cannot carry (a lone surrogate in a message, say) is a
    :class:`~aguikit.errors.WireFormatError`, never an ``httpx`` or ``UnicodeEncodeError``."""
    return utf8(dumps_wire(dict(body)), "RunAgentInput")


_FAILURES: Final = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, UnicodeEncodeError)
"""What ``httpx`` raises for a request it cannot make or finish (a URL it cannot read, a
header value that is not Latin-1, a connection that broke): each a TransportError here."""


def _media_type(response: httpx.Response) -> str | None:
    value = response.headers.get("content-type")
    return None if value is None else value.split(";", 1)[0].strip().lower()


def _describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _check_content_type(
    response: httpx.Response,
    url: str,
    accept: Sequence[str],
    on_media_type: Callable[[str], None] | None,
    required: bool,
) -> None:
    media = _media_type(response)
    if media is None or media not in accept:
        if required:
            raise ContentTypeError(response.headers.get("content-type"), url=url)
        return
    if on_media_type is not None:
        on_media_type(media)


def post_stream(
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
    accept: Sequence[str] = SSE_ONLY,
    on_media_type: Callable[[str], None] | None = None,
    on_response: ResponseHook | None = None,
    require_event_stream: bool = True,
    on_headers: Callable[[httpx.Headers], None] | None = None,
) -> Generator[bytes, None, None]:
    """
    POST ``body`` as JSON to ``url`` and yield the event stream's bytes as they arrive.

    Args:
        url: The agent endpoint.
        body: The request body (a wire ``RunAgentInput``), sent as JSON.
        headers: Extra request headers (authentication, tracing).
        timeout: Seconds, or an ``httpx.Timeout``.
        transport: An ``httpx`` transport to use instead of the network (an ASGI app in
            tests, a mock).
        accept: The media types asked for, in order of preference (:data:`SSE_ONLY`,
            :data:`BOTH`); an answer in any other is a :class:`ContentTypeError`.
        on_media_type: Called with the media type the agent chose, before the first
            byte is yielded, so the caller can pick the decoder (only when it is one of
            ``accept``).
        on_response: Told the status and headers before anything else happens: a checker
            reports what the agent answered (and when) without a second fetch.
        require_event_stream: Refuse a 2xx answer in a media type not in ``accept``
            (a client must); ``False`` hands its bytes over anyway, so a checker can
            report the content type *and* what the body holds.
        on_headers: Called with an accepted 2xx answer's headers (after the media type is
            checked), before its first byte: the client reads from them whether the server
            can resume the stream (``X-AGUI-Resume``).

    Raises:
        HTTPStatusError: The agent answered non-2xx (the error holds the body's start).
        ContentTypeError: The agent answered 2xx in a media type not in ``accept`` (only
            with ``require_event_stream``).
        TransportError: The connection failed, before or during the body (or the URL
            or a header could not be sent at all).
        WireFormatError: The body holds a value JSON or UTF-8 cannot carry (a lone
            surrogate); nothing was sent.

    .. versionchanged:: 0.3.0  ``accept``, ``on_media_type``, ``on_response``,
       ``require_event_stream``, ``on_headers``.
    """
    content = _content(body)
    try:
        with (
            httpx.Client(timeout=timeout, transport=transport) as client,
            client.stream(
                "POST", url, content=content, headers=_headers(headers, accept)
            ) as response,
        ):
            if on_response is not None:
                on_response(response.status_code, response.headers)
            if not response.is_success:
                start = bytearray()
                for chunk in response.iter_bytes():
                    start += chunk
                    if len(start) >= _ERROR_BODY_BYTES:
                        break
                text = bytes(start[:_ERROR_BODY_BYTES]).decode("utf-8", "replace")
                raise HTTPStatusError(response.status_code, text, url=url)
            _check_content_type(response, url, accept, on_media_type, require_event_stream)
            if on_headers is not None:
                on_headers(response.headers)
            yield from response.iter_bytes()
    except _FAILURES as exc:
        raise TransportError(_describe(exc), url=url) from exc


async def apost_stream(
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
    accept: Sequence[str] = SSE_ONLY,
    on_media_type: Callable[[str], None] | None = None,
    on_response: ResponseHook | None = None,
    require_event_stream: bool = True,
    on_headers: Callable[[httpx.Headers], None] | None = None,
) -> AsyncGenerator[bytes, None]:
    """
    The asynchronous twin of :func:`post_stream`.

    An async generator is not closed when dropped, so a caller that may stop early wraps
    it in ``contextlib.aclosing`` (the client does).
    """
    content = _content(body)
    try:
        async with (
            httpx.AsyncClient(timeout=timeout, transport=transport) as client,
            client.stream(
                "POST", url, content=content, headers=_headers(headers, accept)
            ) as response,
        ):
            if on_response is not None:
                on_response(response.status_code, response.headers)
            if not response.is_success:
                start = bytearray()
                async for chunk in response.aiter_bytes():
                    start += chunk
                    if len(start) >= _ERROR_BODY_BYTES:
                        break
                text = bytes(start[:_ERROR_BODY_BYTES]).decode("utf-8", "replace")
                raise HTTPStatusError(response.status_code, text, url=url)
            _check_content_type(response, url, accept, on_media_type, require_event_stream)
            if on_headers is not None:
                on_headers(response.headers)
            async for chunk in response.aiter_bytes():
                yield chunk
    except _FAILURES as exc:
        raise TransportError(_describe(exc), url=url) from exc


_ABSENT: Final = frozenset({404, 405, 501})
"""Statuses that mean "this endpoint offers no such document", not a failure."""


async def aget_json(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Any:
    """
    GET ``url`` and return its JSON body, or ``None`` when the server does not offer it
    (404, 405, 501): an optional document (an agent's capabilities) that is missing is an
    answer, not an error.

    Raises:
        HTTPStatusError: Any other non-2xx answer.
        DecodeError: A 2xx answer that is not JSON.
        TransportError: The connection failed.
    """
    try:
        async with httpx.AsyncClient(timeout=timeout, transport=transport) as client:
            response = await client.get(
                url, headers={**(headers or {}), "Accept": "application/json"}
            )
    except httpx.HTTPError as exc:
        raise TransportError(_describe(exc), url=url) from exc
    if response.status_code in _ABSENT:
        return None
    if not response.is_success:
        text = response.content[:_ERROR_BODY_BYTES].decode("utf-8", "replace")
        raise HTTPStatusError(response.status_code, text, url=url)
    return loads(response.content.decode("utf-8", "replace"), source=url)


_READ_HIGH: Final = 256 * 1024
"""Bytes an upstream connection may hold unread before the kernel is asked to stop
delivering (``pause_reading``); reading resumes once they are taken."""


class _Receiving(asyncio.Protocol):
    """What arrived on one connection and not yet read, and who waits for it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: list[bytes] = []
        self.held = 0
        self.paused = False
        self.over = False  # end of stream, or the connection was lost
        self.error: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.writable: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.held += len(data)
        if self.held > _READ_HIGH and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        self.over = True
        self._wake()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.over = True
        self.error = exc
        self._wake()
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def take(self, max_bytes: int) -> bytes:
        data = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        if len(data) > max_bytes:
            self.chunks = [data[max_bytes:]]
            data = data[:max_bytes]
        else:
            self.chunks = []
        self.held -= len(data)
        if self.paused and self.held <= _READ_HIGH // 4 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data


async def _within(timeout: float | None, waiting: Any) -> Any:
    if timeout is None:
        return await waiting
    async with asyncio.timeout(timeout):
        return await waiting


class _Stream(httpcore.AsyncNetworkStream):
    """
    One upstream connection for httpcore, on the running asyncio loop's own transport.

    httpcore's default stream goes through anyio, which for every read enters a cancel
    scope (even with no timeout), looks up the async library and resumes then pauses the
    socket's reading (two ``epoll_ctl`` calls): about a quarter of what forwarding one
    event cost the proxy (py-spy, 100 streams).  Here a read takes what the protocol
    holds, or waits for it; reading is paused only when much is held unread.
    """

    def __init__(self, transport: asyncio.Transport, protocol: _Receiving) -> None:
        self.transport = transport
        self.protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self.protocol
        while not protocol.chunks:
            if protocol.over:
                if protocol.error is not None:
                    raise httpcore.ReadError(str(protocol.error)) from protocol.error
                return b""
            waiter = protocol.waiter = asyncio.get_running_loop().create_future()
            try:
                await _within(timeout, waiter)
            except TimeoutError as exc:
                raise httpcore.ReadTimeout("timed out reading") from exc
            finally:
                protocol.waiter = None
        return protocol.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self.protocol
        if protocol.over or self.transport.is_closing():
            raise httpcore.WriteError(str(protocol.error or "the connection is closed"))
        self.transport.write(buffer)
        if protocol.writable is not None:
            try:
                await _within(timeout, asyncio.shield(protocol.writable))
            except TimeoutError as exc:
                raise httpcore.WriteTimeout("timed out writing") from exc
            if protocol.error is not None:
                raise httpcore.WriteError(str(protocol.error)) from protocol.error

    async def aclose(self) -> None:
        self.transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            upgraded = await loop.start_tls(
                self.transport,
                self.protocol,
                ssl_context,
                server_hostname=server_hostname,
                ssl_handshake_timeout=timeout,
            )
        except TimeoutError as exc:
            self.transport.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from exc
        except (OSError, ssl.SSLError) as exc:
            self.transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        assert isinstance(upgraded, asyncio.Transport)
        self.protocol.transport = upgraded
        return _Stream(upgraded, self.protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # an idle connection that has anything to say is gone
            return self.protocol.over or bool(self.protocol.chunks)
        if info in ("ssl_object", "socket"):
            return self.transport.get_extra_info(info)
        if info == "client_addr":
            return self.transport.get_extra_info("sockname")
        if info == "server_addr":
            return self.transport.get_extra_info("peername")
        return None


class _Backend(httpcore.AsyncNetworkBackend):
    """httpcore's connections made on the running asyncio loop (:class:`_Stream`)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address is not None else None
        connecting = loop.create_connection(_Receiving, host, port, local_addr=local)
        return await self._connected(connecting, timeout, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        connecting = asyncio.get_running_loop().create_unix_connection(_Receiving, path)
        return await self._connected(connecting, timeout, socket_options)

    async def _connected(
        self, connecting: Any, timeout: float | None, socket_options: Iterable[Any] | None
    ) -> httpcore.AsyncNetworkStream:
        try:
            transport, protocol = await _within(timeout, connecting)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout("timed out connecting") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        sock: socket.socket | None = transport.get_extra_info("socket")
        for option in socket_options or ():
            if sock is not None:
                sock.setsockopt(*option)
        return _Stream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Pool(httpcore.AsyncConnectionPool):
    """
    httpcore's pool, with requests given to connections in one pass, each kept
    connection to one request.

    httpcore 1.0's pass (run at every request and every answer's end) hands an idle
    HTTP/1.1 connection to *every* queued request, since the connection stays idle until
    the first of them starts on it; the others fail (``ConnectionNotAvailable``), queue
    again and run the pass again.  Each pass also counts the connections once per idle
    one.  A proxy whose 100 streams start together on 100 kept connections ran the pass
    1,143 times, up to 1.7 ms each: its loop was held 0.9 s of each round's first second,
    which added 11-24 ms at p99 to the streams' events and a fifth to its CPU
    (``docs/proxy.md``, "Kept upstream connections"; encode/httpcore#1035, still open).
    Here a connection handed to a request that has not started on it is not idle for the
    others, and the pass is linear in connections plus requests.  What stays httpcore's:
    which connection serves (the first available for the origin, else a new one, else an
    idle one closed to make room), eviction of idle ones beyond
    ``max_keepalive_connections`` (counting idle ones, as httpcore means to, longest
    in the pool first) and of expired or closed ones.
    """

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        closing: list[httpcore.AsyncConnectionInterface] = []
        promised = {id(r.connection) for r in self._requests if r.connection is not None}
        kept: list[httpcore.AsyncConnectionInterface] = []
        idle: list[httpcore.AsyncConnectionInterface] = []  # free to serve or to close
        for connection in self._connections:
            if connection.is_closed():
                continue
            if connection.has_expired():
                closing.append(connection)
                continue
            kept.append(connection)
            if id(connection) not in promised and connection.is_idle():
                idle.append(connection)
        surplus = len(idle) - self._max_keepalive_connections
        if surplus > 0:
            evicted = {id(connection) for connection in idle[:surplus]}
            closing += idle[:surplus]
            idle = idle[surplus:]
            kept = [connection for connection in kept if id(connection) not in evicted]
        self._connections = kept
        queued = [request for request in self._requests if request.is_queued()]
        if not queued:
            return closing
        free = {id(connection) for connection in idle}
        # promised and idle: an HTTP/1.1 connection its request has not started on yet
        available = [
            connection
            for connection in kept
            if connection.is_available()
            and (id(connection) not in promised or id(connection) in free)
        ]
        for request in queued:
            origin = request.request.url.origin
            chosen = next((c for c in available if c.can_handle_request(origin)), None)
            if chosen is not None:
                if id(chosen) in free:  # one request per idle connection
                    available.remove(chosen)
                    free.discard(id(chosen))
                    idle.remove(chosen)
            elif len(self._connections) < self._max_connections:
                chosen = self.create_connection(origin)
                self._connections.append(chosen)
            elif idle:
                oldest = idle.pop(0)
                free.discard(id(oldest))
                if oldest in available:
                    available.remove(oldest)
                self._connections.remove(oldest)
                closing.append(oldest)
                chosen = self.create_connection(origin)
                self._connections.append(chosen)
            else:
                break  # the pool is full and busy: the rest wait for an answer to end
            request.assign_to_connection(chosen)
        return closing


def aforward_client(
    timeout: httpx.Timeout, limits: httpx.Limits, *, verify: ssl.SSLContext | bool = True
) -> httpx.AsyncClient:
    """
    The ``httpx`` client :func:`aforward` is fastest with: httpx and httpcore as usual
    (pool, HTTP/1.1 parsing, TLS, proxies from the environment), with the connections made
    on the running asyncio loop's own transports instead of through anyio, which cost a
    cancel scope and two ``epoll_ctl`` calls per read (:class:`_Stream`).  When the
    installed httpx keeps its pool elsewhere, the client is httpx's default, slower but
    the same on the wire.  Not for trio.  ``verify`` is httpx's: an ``https`` agent's
    certificate is checked against the system's authorities unless told otherwise.

    The pool gives each kept connection to one request in one pass (:class:`_Pool`):
    httpcore's own hands an idle connection to every waiting request and makes the losers
    try again, which blocked a proxy's loop for a second when 100 streams started on 100
    kept connections.  Only httpcore 1.0's pool gets it; another keeps its own pass.

    .. versionadded:: 0.5.0
    """
    transport = httpx.AsyncHTTPTransport(limits=limits, verify=verify)
    pool = getattr(transport, "_pool", None)
    if isinstance(pool, httpcore.AsyncConnectionPool) and hasattr(pool, "_network_backend"):
        pool._network_backend = _Backend()
    if (
        type(pool) is httpcore.AsyncConnectionPool
        and httpcore.__version__.startswith("1.0.")  # the pass replaced is 1.0's
        and all(hasattr(pool, name) for name in ("_connections", "_requests", "_max_connections"))
    ):
        pool.__class__ = _Pool  # the same pool, settings and all, with the pass above
    return httpx.AsyncClient(timeout=timeout, transport=transport)


@contextlib.asynccontextmanager
async def aforward(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: Sequence[tuple[bytes, bytes]],
    content: bytes,
) -> AsyncIterator[httpx.Response]:
    """
    Send one request exactly as given and hand over the streaming answer, whatever it is.

    The other fetches here speak for aguikit: they build the body, ask for an event
    stream and refuse anything else.  A proxy (``aguikit proxy``) and a diagnosis
    (``aguikit doctor``) must not: the method, the headers (order and case kept) and the
    body go out as the caller has them, nothing is added but ``Host`` and
    ``Content-Length`` (the request is built directly, so the client's default
    ``Accept-Encoding``, ``User-Agent`` and ``Accept`` are never merged in), and every
    status and media type is an answer to pass on, not an error.  The response is closed
    when the block ends, which closes the upstream connection if the body was not read to
    its end (the agent sees its reader go, as with the other fetches).

    Read the body with :func:`aread`, which keeps the failure typed.

    Raises:
        TransportError: The connection failed before the answer began.

    .. versionadded:: 0.5.0
    """
    request = httpx.Request(method, url, headers=list(headers), content=content)
    try:
        response = await client.send(request, stream=True)
    except httpx.HTTPError as exc:
        raise TransportError(_describe(exc), url=url) from exc
    try:
        yield response
    finally:
        await response.aclose()


async def aread(response: httpx.Response, *, raw: bool = True) -> AsyncGenerator[bytes, None]:
    """
    The body of an :func:`aforward` answer, chunk by chunk as it arrives: ``raw`` as sent
    (still compressed when the answer is, what a proxy forwards), else decoded (what a
    reader parses).

    Raises:
        TransportError: The connection failed during the body (a cut stream).

    .. versionadded:: 0.5.0
    """
    chunks = response.aiter_raw() if raw else response.aiter_bytes()
    try:
        async for chunk in chunks:
            yield chunk
    except httpx.HTTPError as exc:
        raise TransportError(_describe(exc), url=str(response.request.url)) from exc
