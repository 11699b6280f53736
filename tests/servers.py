"""
A real HTTP server on 127.0.0.1 for transport, client and CLI tests.

Stdlib ``http.server`` in a background thread, so the tests exercise httpx, sockets and
chunked transfer encoding for real instead of a mock transport.  Each route serves a
recorded answer (status, content type, body pieces, a delay between pieces, whether to
drop the connection before the end) and every request is captured, so a test can assert
on the body the client sent and on whether the client hung up early.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.define
class Route:
    """What the server answers on one path."""

    pieces: Iterable[bytes]
    """The body, written as one HTTP chunk per piece (so frames split where pieces split);
    a generator makes an endless body, written until the client hangs up."""
    status: int = 200
    content_type: str = "text/event-stream"
    delay: float = 0.0
    """Seconds to sleep before each piece after the first."""
    drop: bool = False
    """Close the socket without the final zero-length chunk (a broken connection)."""
    headers: dict[str, str] = attrs.Factory(dict)
    """Extra response headers (a huge one, say)."""


@attrs.define
class Captured:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@attrs.define
class RecordingServer:
    """The running server: routes to serve, requests captured, disconnects observed."""

    routes: dict[str, Route] = attrs.Factory(dict)
    requests: list[Captured] = attrs.Factory(list)
    disconnected: threading.Event = attrs.Factory(threading.Event)
    completed: threading.Event = attrs.Factory(threading.Event)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def add(self, path: str, route: Route) -> str:
        self.routes[path] = route
        return self.url(path)


def _handler(server: RecordingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            server.requests.append(
                Captured(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            route = server.routes.get(self.path)
            if route is None:
                route = Route([b"no such route"], status=404, content_type="text/plain")
            try:
                self.send_response(route.status)
                self.send_header("Content-Type", route.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Cache-Control", "no-cache")
                for name, value in route.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for index, piece in enumerate(route.pieces):
                    if index and route.delay:
                        time.sleep(route.delay)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                if route.drop:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                server.completed.set()
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                server.disconnected.set()
                self.close_connection = True

        do_GET = do_POST

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up between requests is what several tests do on purpose.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serve() -> Iterator[RecordingServer]:
    """Run a :class:`RecordingServer` on a free port for the duration of the block."""
    state = RecordingServer()
    httpd = _Server(("127.0.0.1", 0), _handler(state))
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@contextlib.contextmanager
def serve_asgi(app: Any, sndbuf: int = 0, **settings: Any) -> Iterator[str]:
    """
    Run an ASGI app with a real uvicorn server on a free loopback port for the duration of
    the block; yields the base URL (``http://127.0.0.1:PORT``).  ``settings`` replace
    uvicorn's (``lifespan="on"``, ``server_header=False``...); ``sndbuf`` is the listening
    socket's ``SO_SNDBUF`` (0: the kernel's), which accepted connections inherit (Linux).
    """
    import asyncio

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options: dict[str, Any] = {
        "log_level": "warning",
        "lifespan": "off",
        "timeout_graceful_shutdown": 2,
        **settings,
    }
    config = uvicorn.Config(app, **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def read_then_hang_up(
    url: str, body: Any, last_event_id: str | None = None, seconds: float = 0.0
) -> str:
    """
    A client that leaves: start a run (or resume it after ``last_event_id``), read for
    ``seconds`` and at least one whole SSE frame, then close the connection.  Returns the
    id of the last whole frame read, which is what the client would resume after.
    """
    import httpx

    from aguikit.transport.sse import iter_frames

    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200, response.status_code
        received = b""
        deadline = time.monotonic() + seconds
        for chunk in response.iter_bytes():
            received += chunk
            if b"\n\n" in received and time.monotonic() >= deadline:
                break
    whole = received[: received.rindex(b"\n\n") + 2]
    return [frame.id for frame in iter_frames([whole])][-1] or ""


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, process: Any, what: str, timeout: float = 30) -> None:
    """Wait until a child ``process`` accepts connections on ``port``; fail if it died."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.02)


@contextlib.contextmanager
def uvicorn_workers(
    app: str, count: int, env: dict[str, str], cwd: Any
) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """``count`` uvicorn processes serving ``app`` (``module:attribute``) with ``env``:
    ``(base URL, process)`` each, so a test can SIGKILL the one running a handler; each
    is stopped at the end (killed if it does not exit in 10 s)."""
    ports = [free_port() for _ in range(count)]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                app,
                "--port",
                str(port),
                "--log-level",
                "warning",
                "--timeout-graceful-shutdown",
                "2",
            ],
            cwd=cwd,
            env=env,
        )
        for port in ports
    ]
    try:
        for port, process in zip(ports, processes, strict=True):
            wait_listening(port, process, "a uvicorn worker")
        yield [(f"http://127.0.0.1:{port}", p) for port, p in zip(ports, processes, strict=True)]
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:  # a connection it still waits on: stop it
                process.kill()
                process.wait(timeout=10)


class CuttingProxy:
    """
    A TCP proxy in front of a real server that breaks chosen connections for real, as a
    phone changing network or a gateway does: ``plan(n)`` says what happens to the
    ``n``-th connection (from 0): ``None`` passes it through; ``("refuse",)`` closes it
    once the request arrived, before the server sees it; ``("before_headers",)`` forwards
    the request and closes once the server starts answering, before any of the answer
    reaches the client; ``("frames", k)`` cuts after ``k`` whole SSE frames of the body;
    ``("status", code)`` answers ``code`` itself, as a gateway would.
    """

    def __init__(self, upstream: str, plan: Callable[[int], tuple[Any, ...] | None]) -> None:
        self.upstream_port = int(upstream.rsplit(":", 1)[1].split("/", 1)[0])
        self.plan = plan
        self.connections = 0
        self.url = ""

    async def _handle(self, reader: Any, writer: Any) -> None:
        import asyncio

        step = self.plan(self.connections)
        self.connections += 1
        upstream_writer: Any = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            request = head + await reader.readexactly(length)
            if step == ("refuse",):
                return
            if step is not None and step[0] == "status":
                writer.write(
                    f"HTTP/1.1 {step[1]} Gateway\r\ncontent-length: 0\r\n"
                    "connection: close\r\n\r\n".encode()
                )
                await writer.drain()
                return
            upstream_reader, upstream_writer = await asyncio.open_connection(
                "127.0.0.1", self.upstream_port
            )
            upstream_writer.write(request)
            await upstream_writer.drain()
            if step == ("before_headers",):
                await upstream_reader.read(1)
                return
            frames, body = None if step is None else step[1], False
            seen = b""
            while True:
                chunk = await upstream_reader.read(65536)
                if not chunk:
                    return
                if frames is not None:
                    seen += chunk
                    if not body and b"\r\n\r\n" in seen:
                        body, seen = True, seen.split(b"\r\n\r\n", 1)[1]
                    if body and seen.count(b"\n\n") >= frames:
                        cut = len(chunk) - len(seen) + _nth(seen, b"\n\n", frames) + 2
                        writer.write(chunk[: max(cut, 0)])
                        await writer.drain()
                        return
                writer.write(chunk)
                await writer.drain()
        except (OSError, EOFError, ValueError) as exc:  # the client or the server left
            del exc
        finally:
            writer.close()
            if upstream_writer is not None:
                upstream_writer.close()

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Serve on a free loopback port in a thread of its own; yields the proxy's URL."""
        import asyncio

        loop = asyncio.new_event_loop()
        started = threading.Event()
        holder: dict[str, Any] = {}

        async def serve() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            holder["server"] = server
            holder["port"] = server.sockets[0].getsockname()[1]
            started.set()
            async with server:
                await server.serve_forever()

        thread = threading.Thread(target=lambda: _run_until_stopped(loop, serve()), daemon=True)
        thread.start()
        started.wait(10)
        self.url = f"http://127.0.0.1:{holder['port']}"
        try:
            yield self.url
        finally:

            def stop() -> None:
                holder["server"].close()
                for task in asyncio.all_tasks(loop):
                    task.cancel()

            loop.call_soon_threadsafe(stop)
            thread.join(timeout=10)


def _nth(data: bytes, needle: bytes, n: int) -> int:
    """Where the ``n``-th ``needle`` (from 1) starts in ``data``."""
    at = -1
    for _ in range(n):
        at = data.index(needle, at + 1)
    return at


def _run_until_stopped(loop: Any, main: Any) -> None:
    import asyncio

    asyncio.set_event_loop(loop)
    with contextlib.suppress(asyncio.CancelledError):
        loop.run_until_complete(main)
    left = asyncio.all_tasks(loop)
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.close()
