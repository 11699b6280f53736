"""
A real ``redis-server`` for the tests that need one, on a free loopback port.

A fake Redis would test the fake: the stream commands' ids, ``MAXLEN ~`` and blocking
reads are what the Redis event log relies on.  Without ``redis-server`` (or redis-py) the
tests skip with that reason, except where ``AGUIKIT_REQUIRE_REDIS`` is set (CI sets it in
``.ci/run``, which installs both), where a missing Redis is a failure, never a skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from tests.servers import free_port, wait_listening


def _require(what: str) -> None:
    if os.environ.get("AGUIKIT_REQUIRE_REDIS"):
        pytest.fail(f"{what} is required here (AGUIKIT_REQUIRE_REDIS is set)")
    pytest.skip(f"{what} not found: the Redis event log cannot be tested")


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """Start ``redis-server`` (no persistence) on a free port; yields its URL, then stops it."""
    with redis_process() as (url, _):
        yield url


@contextlib.contextmanager
def redis_process(port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`redis_server`, yielding its process too, for the tests that stall it
    (``SIGSTOP``), kill it or start another on the same ``port`` (a restart)."""
    binary = shutil.which("redis-server")
    if binary is None:
        _require("redis-server")
    try:
        import redis  # noqa: F401
    except ImportError:
        _require("redis-py (aguikit[redis])")
    assert binary is not None
    port = free_port() if port is None else port
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_listening(port, process, "redis-server", timeout=10)
            yield f"redis://127.0.0.1:{port}/0", process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a stalled server still stops
                process.terminate()
            process.wait(timeout=10)


async def close_client(client: Any) -> None:
    """Close an asyncio Redis client on every redis-py the project admits: ``aclose``
    came in 5.0.1, and the oldest (5.0.0) has only ``close``."""
    closing = getattr(client, "aclose", None) or client.close
    await closing()


class WithholdingProxy:
    """
    A loopback TCP proxy between a Redis client and a real ``redis-server`` that can hold
    back the server's replies: :meth:`withhold` from now on, :meth:`release` to deliver
    them.  A command sent meanwhile reaches Redis and is carried out, but its client does
    not learn it, which is how a reply is lost to a cancellation (``CLIENT PAUSE`` cannot
    do it: the paused command is never carried out if its client gives up).
    """

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._held = False
        self._released = asyncio.Event()
        self.withheld = asyncio.Event()
        """Set once a reply was held back (Redis carried a command out, unanswered)."""
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self.url = ""

    async def __aenter__(self) -> WithholdingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"redis://127.0.0.1:{port}/0"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    def withhold(self) -> None:
        self._held = True
        self._released.clear()
        self.withheld.clear()

    def release(self) -> None:
        self._held = False
        self._released.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        for pipe in (
            asyncio.ensure_future(self._pipe(reader, up_writer, replies=False)),
            asyncio.ensure_future(self._pipe(up_reader, writer, replies=True)),
        ):
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)

    async def _pipe(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, replies: bool
    ) -> None:
        try:
            while data := await source.read(65536):
                if replies and self._held:
                    self.withheld.set()
                    await self._released.wait()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.close()
