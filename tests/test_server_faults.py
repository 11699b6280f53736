"""
The server under faults and hostile clients (issue 29, the endpoint's and the memory log's
part): a lost cancellation never hangs a request, a client that never reads is treated as
gone, the memory log never expires a running run and is bounded, a follower's wake-up
costs what it delivers, a long prelude leaves the event loop free, hostile ids get a 4xx,
an unwritable event fails its run loudly, and a run stopped on purpose ends with the
cancelled outcome.  Faults are injected with :class:`aguikit.server.faults.FaultyLog`,
over the memory log and over a real ``redis-server``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from tests.redis_server import redis_server
from tests.resume_app import Endless
from tests.servers import (
    free_port,
    read_then_hang_up,
    serve_asgi,
    uvicorn_workers,
    wait_listening,
)
from tests.test_resume import CuttingTransport

import aguikit
from aguikit import Agent
from aguikit.errors import WireFormatError
from aguikit.server import RunAgentInput, RunWriter, agui_endpoint, create_app, eventlog
from aguikit.server import http as server_http
from aguikit.server.eventlog import EventLog, EventLogFull, MemoryEventLog, parse_id
from aguikit.server.faults import FaultyLog
from aguikit.transport.sse import iter_frames

ROOT = Path(__file__).resolve().parent.parent
BODY = {"threadId": "t1", "runId": "r1", "messages": []}


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(params=["memory", "redis"])
def make_log(request: pytest.FixtureRequest) -> Callable[[], EventLog]:
    """A fresh log of each kind (Redis: a real server, a prefix of the test's own)."""
    if request.param == "memory":
        return MemoryEventLog
    url = request.getfixturevalue("redis_url")
    from aguikit.server.redis_log import RedisEventLog

    prefix = f"faults{time.monotonic_ns()}:"
    return lambda: RedisEventLog.from_url(url, prefix=prefix)


def _logged(log: EventLog, run_id: str = "r1") -> list[dict[str, Any]]:
    """What a reader resuming from the start reads, in a loop of its own."""

    async def read() -> list[dict[str, Any]]:
        return [wire for _, wire in await log.read(run_id)]

    return asyncio.run(read())


def _ending(url: str, run_id: str = "r1") -> list[dict[str, Any]]:
    """The run read from its first event over HTTP (``Last-Event-ID: 0``)."""
    answer = httpx.post(
        url + "/", json={**BODY, "runId": run_id}, headers={"Last-Event-ID": "0"}, timeout=30
    )
    assert 200 == answer.status_code, answer.text
    return [json.loads(frame.data) for frame in iter_frames([answer.content])]


# -- item 1: a lost cancellation never hangs a request -------------------------------------


def test_a_follower_that_loses_its_cancellation_does_not_keep_the_run_alive(
    make_log: Callable[[], EventLog],
) -> None:
    """The follower of the starting connection hangs at its 2nd event and swallows the
    cancellation the response sends when the client leaves: the response still ends
    (bounded), the run is told its reader left, the zombie is cancelled again, and with
    nobody reading the run is stopped one grace window later, with the cancelled outcome
    every resumer reads.  (On the code issue 29 was filed on, the response waited for
    the follower for ever: the handler was never cancelled.)"""
    inner = make_log()
    faulty = FaultyLog(inner).lose_cancellation("follow", after=1)
    endless = Endless()
    app = create_app(endless, event_log=faulty, resume_grace=0.5, keepalive=0.2)
    with serve_asgi(app) as url:
        # Half a second of reading (keep-alives come while the follower hangs at event 2):
        # under load event 2 may come well after the first frame, and a client gone by
        # then cancels a follower the fault has not yet reached.
        read_then_hang_up(url + "/", BODY, seconds=0.5)
        deadline = time.monotonic() + 10  # recorded when the server loses the cancellation
        while not faulty.fired and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [("lose", "follow", 1)] == faulty.fired
        assert endless.cancelled.wait(20)
        time.sleep(0.3)
        events = _ending(url)
    assert 1 == faulty.lost
    assert ["TEXT_MESSAGE_END", "RUN_FINISHED"] == [e["type"] for e in events[-2:]]
    assert {"type": "cancelled"} == events[-1]["outcome"]


def test_uvicorn_exits_on_sigterm_within_5s_with_runs_in_flight() -> None:
    """A worker with a run being read, a run whose follower lost its cancellation and a
    run nobody reads any more exits within 5 s of SIGTERM (with uvicorn's
    ``--timeout-graceful-shutdown``, as docs/resume.md says): no task holds it."""
    port = free_port()
    env = {
        **os.environ,
        "AGUIKIT_TEST_LOG": "memory",
        "AGUIKIT_TEST_HANDLER": "endless",
        "AGUIKIT_TEST_GRACE": "30",
        "AGUIKIT_TEST_LOSE_CANCELLATION": "1",
        "PYTHONPATH": os.pathsep.join([str(Path(aguikit.__file__).parent.parent), str(ROOT)]),
    }
    env.pop("AGUIKIT_TEST_REDIS", None)
    command = [sys.executable, "-m", "uvicorn", "tests.resume_app:app", "--port", str(port)]
    command += ["--log-level", "warning", "--timeout-graceful-shutdown", "1"]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        wait_listening(port, process, "a uvicorn worker")
        url = f"http://127.0.0.1:{port}/agent"
        read_then_hang_up(url, {**BODY, "runId": "lost"})  # its follower hangs at event 2
        read_then_hang_up(url, {**BODY, "runId": "left"})
        reading = httpx.stream("POST", url, json={**BODY, "runId": "read"}, timeout=30)
        with reading as response:
            next(response.iter_bytes())
            time.sleep(0.5)
            began = time.monotonic()
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=15)
            took = time.monotonic() - began
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
    assert took < 5, took


def test_no_task_outlives_the_runs_of_a_worker_even_with_a_lost_cancellation() -> None:
    """A run whose follower swallows three cancellations when its client hangs up (the
    disconnect's, the ending answer's and the reaper's first), read to its end by a
    resume, then runs cut at random and resumed by :class:`aguikit.Agent`, on one uvicorn
    worker: once every run ended, the worker's own count of asyncio tasks (``GET /tasks``
    of the test app, beyond uvicorn's) falls to none within a few seconds; no follower,
    grace watch, cancel poll or reaper outlives its run.  (Without the reaper the
    follower stays, hung; on the code issue 29 was filed on, the request waiting for it
    never ended.)"""
    env = {
        **os.environ,
        "AGUIKIT_TEST_LOG": "memory",
        "AGUIKIT_TEST_LOSE_CANCELLATION": "1",
        "AGUIKIT_TEST_LOSE_TIMES": "3",
        "PYTHONPATH": os.pathsep.join([str(Path(aguikit.__file__).parent.parent), str(ROOT)]),
    }
    env.pop("AGUIKIT_TEST_REDIS", None)
    with uvicorn_workers("tests.resume_app:app", 1, env, ROOT) as [(url, _)]:
        read_then_hang_up(url + "/agent", {**BODY, "runId": "lost"})  # hangs at event 2
        rest = httpx.post(
            url + "/agent",
            json={**BODY, "runId": "lost"},
            headers={"Last-Event-ID": "1"},
            timeout=60,
        )
        assert b"RUN_FINISHED" in rest.content
        transport = CuttingTransport([url], random.Random(29), rate=0.9, max_cut=1500)

        async def runs() -> list[str]:
            done = []
            for _ in range(3):
                agent = Agent(url + "/agent", transport=transport, max_reconnects=50, backoff=0.01)
                done.append((await agent.run()).run_id)
            return done

        assert 3 == len(asyncio.run(runs()))
        assert transport.cuts >= 3
        deadline = time.monotonic() + 10
        while (stray := httpx.get(url + "/tasks").json()) and time.monotonic() < deadline:
            time.sleep(0.2)
    assert [] == stray


# -- item 8: a client that never reads ------------------------------------------------------


def _never_reading_client(port: int, body: dict[str, Any]) -> socket.socket:
    """Send a run request and never read a byte of the answer (a tiny receive buffer, so
    the server's sends block soon)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    payload = json.dumps(body).encode()
    sock.sendall(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return sock


class _Flood:
    """A handler writing 16 KiB deltas, a millisecond apart, until it is cancelled."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.runs: list[RunWriter] = []

    async def __call__(self, run_input: RunAgentInput, run: RunWriter) -> None:
        self.runs.append(run)
        try:
            async with run.text_message() as message:
                while True:
                    await message.write("x" * 16384)
                    await asyncio.sleep(0.001)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


@pytest.mark.parametrize(
    ("logged", "mounted"),
    [(False, False), (True, False), (False, True)],
    ids=["bound", "logged", "mounted"],
)
def test_a_client_that_never_reads_is_treated_as_gone_after_the_send_timeout(
    logged: bool, mounted: bool
) -> None:
    """Its sends block once the socket buffers are full; past ``send_timeout`` the
    endpoint treats it as gone: the handler is cancelled (with a log, one grace window
    later), never held for ever by a connection that takes nothing.  Also when the
    endpoint is mounted in an app of its own (``mounted``), where the connection's socket
    is not known and the deadline runs from the first send that waited."""
    flood = _Flood()
    options: dict[str, Any] = {"send_timeout": 0.5, "resume_grace": 0.3}
    if logged:
        options["event_log"] = MemoryEventLog()
    app = (
        Starlette(routes=[Route("/", agui_endpoint(flood, **options), methods=["POST"])])
        if mounted
        else create_app(flood, **options)
    )
    with serve_asgi(app) as url:
        port = int(url.rsplit(":", 1)[1])
        sock = _never_reading_client(port, BODY)
        try:
            assert flood.cancelled.wait(20)
        finally:
            sock.close()
    assert flood.runs[0].ended


class _Trickle:
    """A handler writing 1 KiB every 20 ms (50 kB/s) until it is cancelled, noting when."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.at = 0.0

    async def __call__(self, run_input: RunAgentInput, run: RunWriter) -> None:
        try:
            async with run.text_message() as message:
                while True:
                    await message.write("x" * 1024)
                    await asyncio.sleep(0.02)
        finally:
            self.at = time.monotonic()
            self.stopped.set()


@pytest.mark.parametrize("logged", [False, True], ids=["bound", "logged"])
def test_a_client_that_never_reads_is_gone_by_the_deadline_whatever_the_socket_buffers(
    logged: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The deadline runs from the client's last progress (the last byte its TCP stack
    acknowledged), not from when the server's own socket buffers filled: with a 2 MiB
    send buffer a 50 kB/s handler would fill it for 40 s before a send waited, and the
    handler would run that long plus ``send_timeout``.  Here it stops within
    ``send_timeout`` + a look (+ ``resume_grace`` + the run's poll, with a log) of
    the connect, and the server's log says why."""
    caplog.set_level(logging.INFO, "aguikit.server")
    trickle = _Trickle()
    options: dict[str, Any] = {"send_timeout": 0.5, "resume_grace": 0.3, "keepalive": None}
    if logged:
        options["event_log"] = MemoryEventLog()
    bound = 0.5 + 0.125 + (0.3 + 1.0 if logged else 0.0) + 1.0  # +1 s: the client's buffer
    with serve_asgi(create_app(trickle, **options), sndbuf=1 << 20) as url:
        port = int(url.rsplit(":", 1)[1])
        connected = time.monotonic()
        sock = _never_reading_client(port, BODY)
        try:
            assert trickle.stopped.wait(bound + 5), "the handler outlived its deadline"
        finally:
            sock.close()
    assert trickle.at - connected < bound
    assert "the client took nothing for 0.5 s; treated as gone" in caplog.text


def test_a_connection_that_takes_nothing_buffers_a_bounded_number_of_bytes() -> None:
    """The frame queue is bounded in bytes as well as frames: with the client taking
    nothing, a handler writing 100 kB deltas is held after about ``QUEUED_BYTES`` of them,
    not after ``queue_size`` (64) of them, 6.4 MB per connection.  Driven through ASGI
    with a send that never returns (uvicorn's, its flow control paused), so nothing
    leaves and no socket buffer hides how much the worker holds."""
    emitted = 0

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        nonlocal emitted
        async with run.text_message() as message:
            while True:
                await message.write("x" * 100_000)
                emitted += 1

    app = create_app(handler, send_timeout=None, keepalive=None)

    async def scenario() -> int:
        requests = [{"type": "http.request", "body": json.dumps(BODY).encode()}]
        forever = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if requests:
                return requests.pop()
            await forever.wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                await forever.wait()  # the client takes nothing, ever

        scope = {
            "type": "http", "method": "POST", "path": "/", "query_string": b"",
            "root_path": "", "scheme": "http", "http_version": "1.1",
            "headers": [(b"content-type", b"application/json")],
        }  # fmt: skip
        serving = asyncio.create_task(app(scope, receive, send))
        seen, still = -1, time.monotonic()
        while time.monotonic() - still < 0.3:  # until the handler is held
            await asyncio.sleep(0.02)
            if emitted != seen:
                seen, still = emitted, time.monotonic()
        serving.cancel()
        return seen

    held_after = asyncio.run(scenario())
    assert 1 <= held_after <= server_http.QUEUED_BYTES // 100_000 + 1


# -- item 7: the memory log -------------------------------------------------------------------


def test_the_memory_log_never_expires_a_running_run_and_ttl_counts_from_its_end() -> None:
    """A run quiet for longer than ``ttl`` is still there and its id cannot be claimed
    again (ids never restart at 1); once it ended, it expires ``ttl`` later."""

    async def scenario() -> None:
        log = MemoryEventLog(ttl=0.05)
        assert await log.claim("r1")
        await log.append("r1", {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"})
        await asyncio.sleep(0.15)  # three ttls of silence: a slow tool call
        assert not await log.claim("r1")
        assert await log.resumable("r1", "0")
        assert "2" == await log.append("r1", {"type": "STEP_STARTED", "stepName": "s"})
        await log.end("r1")
        assert not await log.claim("r1")
        await asyncio.sleep(0.15)
        assert not await log.resumable("r1", "0")
        assert await log.claim("r1")

    asyncio.run(scenario())


_GIVES_BACK = """
import asyncio, sys
from aguikit.server.eventlog import MemoryEventLog

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

async def main(trim):
    # A block mapped on its own and freed: from then on glibc takes blocks up to its size
    # from the heap (its dynamic mmap threshold), as in any server after its first while.
    block = bytes(8 << 20)
    del block
    log = MemoryEventLog(trim_memory=trim)
    kept = []  # live blocks allocated among the frames, as a server's other work leaves them
    before = rss()
    for run in range(24):
        run_id = f"r{run}"
        await log.claim(run_id)
        start = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
        await log.append(run_id, start)
        for n in range(256):
            delta = str(n % 10) * 16384
            content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta}
            await log.append(run_id, content)
            kept.append(bytes(1024 + n))
        await log.end(run_id)
    peak = rss()
    for run in range(24):
        await log.forget(f"r{run}")  # as their expiry would
    for _ in range(150):  # the trim runs a second later, in a thread
        await asyncio.sleep(0.02)
        if rss() - before < (peak - before) / 20:
            break
    print(before, peak, rss())

asyncio.run(main(sys.argv[1] == "trim"))
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or eventlog._TRIM is None,
    reason="glibc's malloc_trim is what gives a heap's free pages back (musl and others "
    "return memory themselves)",
)
def test_the_memory_log_gives_what_expired_runs_freed_back_to_the_system() -> None:
    """About 100 MiB of runs, logged among live blocks (which pin glibc's heap: it keeps
    what they freed), end and expire: with ``trim_memory`` (the default) the worker's
    RSS goes back down, without it the memory stays taken."""

    def grew(mode: str) -> tuple[float, float]:
        done = subprocess.run(
            [sys.executable, "-c", _GIVES_BACK, mode],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        before, peak, after = map(float, done.stdout.split())
        assert peak - before > 80, "the runs did not take the memory they should"
        return peak - before, after - before

    peak, kept = grew("keep")
    assert kept > peak / 2, f"glibc gave back {peak - kept:.0f} of {peak:.0f} MiB untrimmed"
    peak, trimmed = grew("trim")
    assert trimmed < peak / 10, f"{trimmed:.0f} of {peak:.0f} MiB still taken after the trim"


def _timed_releases(monkeypatch: pytest.MonkeyPatch, interval: float) -> list[float]:
    """The times of the memory log's releases, each due 0.05 s after a byte let go and
    at most once per ``interval``; none does anything."""
    released: list[float] = []
    monkeypatch.setattr(eventlog, "_TRIM", lambda pad: 0)
    monkeypatch.setattr(eventlog, "_release_memory", lambda: released.append(time.monotonic()))
    monkeypatch.setattr(eventlog, "RELEASE_BYTES", 1)
    monkeypatch.setattr(eventlog, "RELEASE_DELAY", 0.05)
    monkeypatch.setattr(eventlog, "RELEASE_INTERVAL", interval)
    return released


def test_the_memory_log_releases_memory_a_moment_later_and_at_most_once_per_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs let go in a burst cost one release (a full collection and a trim), a moment
    after them; more let go soon after wait for the interval, however many they are."""
    released = _timed_releases(monkeypatch, interval=0.4)

    async def scenario() -> None:
        log = MemoryEventLog()
        for run in range(6):
            await log.claim(f"r{run}")
            await log.append(f"r{run}", {"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
            await log.end(f"r{run}")
        began = time.monotonic()
        await log.forget("r0")
        await log.forget("r1")
        await asyncio.sleep(0.15)
        assert len(released) == 1 and released[0] - began >= 0.05
        for run in range(2, 6):
            await log.forget(f"r{run}")
        await asyncio.sleep(0.15)
        assert len(released) == 1  # the interval holds the next one back
        await asyncio.sleep(0.4)
        assert len(released) == 2 and released[1] - released[0] >= 0.4

    asyncio.run(scenario())


def test_a_release_of_memory_leaves_no_thread_behind() -> None:
    """The trim runs in a thread that ends with it, not in the loop's default executor,
    which would keep an idle thread for the process's life from the first release
    (``bench/bench_silent_clients.py --survivors`` found its objects among the few that
    outlive a peak)."""
    before = {thread.ident for thread in threading.enumerate()}

    async def scenario() -> set[int | None]:
        eventlog._release_memory()
        for _ in range(250):
            await asyncio.sleep(0.02)
            left = {thread.ident for thread in threading.enumerate()} - before
            if not left:
                break
        return left

    assert asyncio.run(scenario()) == set(), "a thread outlived the trim"


def test_a_log_moved_to_another_loop_releases_memory_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A log used from a second event loop (a test's, a worker's restart) schedules its
    release on that loop, at once, not after the first loop's interval."""
    released = _timed_releases(monkeypatch, interval=60)
    log = MemoryEventLog()

    async def let_go(run: str) -> None:
        await log.claim(run)
        await log.append(run, {"type": "RUN_STARTED", "threadId": "t", "runId": run})
        await log.end(run)
        await log.forget(run)
        await asyncio.sleep(0.15)

    asyncio.run(let_go("r1"))
    asyncio.run(let_go("r2"))

    assert len(released) == 2


def _progress_objects() -> list[object]:
    return [thing for thing in gc.get_objects() if isinstance(thing, server_http._Progress)]


def test_a_cancelled_logged_run_is_let_go_at_once_not_at_the_next_collection() -> None:
    """A run cancelled (here by the cancel request) ends its task with a
    ``CancelledError`` whose traceback holds the run's frames, which hold the task: freed
    by reference counting once the task is done, not kept (writer, state, log frames)
    until the cyclic collector's next full pass; and so is its answer's reader-progress
    deadline once the answer ended."""
    endless = Endless()
    app = create_app(endless, event_log=MemoryEventLog(), resume_grace=60)
    gc.collect()
    gc.disable()  # only reference counting frees anything during the test
    try:
        with serve_asgi(app) as base:
            body = {"threadId": "t1", "runId": "r-cycle", "messages": []}
            with httpx.stream("POST", base + "/", json=body, timeout=10) as answer:
                lines = answer.iter_lines()
                while not endless.runs or endless.count < 5:
                    next(lines)
                cancel = httpx.post(base + "/", json=body, headers={"X-AGUI-Cancel": "1"})
                assert cancel.status_code == 204, cancel.text
                assert endless.cancelled.wait(5)
            writer = weakref.ref(endless.runs.pop())
            deadline = time.monotonic() + 5
            while writer() is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert writer() is None, "the cancelled run's writer waits for the collector"
            # Its answer's reader-progress deadline too (its looks held its socket).
            while time.monotonic() < deadline and _progress_objects():
                time.sleep(0.02)
            assert not _progress_objects(), "the answer's deadline waits for the collector"
    finally:
        gc.enable()


def test_the_memory_log_is_bounded_in_total_evicting_ended_runs_first() -> None:
    """Past ``max_total_events``: an ended run is evicted for a new one; with only
    running runs left, a claim and a non-terminal append raise :class:`EventLogFull`
    (``AGUI-E024``), and a terminal event is still logged."""

    async def scenario() -> None:
        log = MemoryEventLog(max_total_events=4)
        for run_id in ("a", "b"):
            assert await log.claim(run_id)
            await log.append(run_id, {"type": "RUN_STARTED", "threadId": "t", "runId": run_id})
            await log.append(run_id, {"type": "STEP_STARTED", "stepName": "s"})
        await log.end("a")
        assert await log.claim("c")  # "a" ended: evicted for it
        assert [] == await log.read("a")
        await log.append("c", {"type": "RUN_STARTED", "threadId": "t", "runId": "c"})
        await log.append("c", {"type": "STEP_STARTED", "stepName": "s"})
        with pytest.raises(EventLogFull) as full:
            await log.claim("d")
        assert "AGUI-E024" == full.value.rule
        with pytest.raises(EventLogFull):
            await log.append("b", {"type": "STEP_FINISHED", "stepName": "s"})
        assert "3" == await log.append("b", {"type": "RUN_ERROR", "message": "full"})
        assert 5 == log.total_events

    asyncio.run(scenario())


def _filled(max_total_events: int, events: int) -> MemoryEventLog:
    """A memory log holding ``events`` of a run still running (``busy``)."""
    log = MemoryEventLog(max_total_events=max_total_events)

    async def fill() -> None:
        await log.claim("busy")
        for n in range(events):
            await log.append("busy", {"type": "CUSTOM", "name": "n", "value": n})

    asyncio.run(fill())
    return log


def test_a_full_log_refuses_a_new_run_with_503_and_ends_a_growing_one_with_agui_e024() -> None:
    """Over HTTP: the run that fills the log ends with ``RUN_ERROR`` ``AGUI-E024`` (its
    handler told at its ``emit``), and a new run on a log full of running runs is
    refused ``503`` with a problem document naming the code."""
    endless = Endless()
    with (
        serve_asgi(create_app(endless, event_log=_filled(50, 48))) as url,
        httpx.stream("POST", url + "/", json=BODY, timeout=30) as answer,
    ):
        frames = list(iter_frames(answer.iter_bytes()))
    with serve_asgi(create_app(Endless(), event_log=_filled(50, 50))) as url:
        refused = httpx.post(url + "/", json=BODY)
    events = [json.loads(frame.data) for frame in frames]
    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "RUN_ERROR"] == [e["type"] for e in events]
    assert "AGUI-E024" == events[-1]["code"]
    assert 503 == refused.status_code
    assert "application/problem+json" == refused.headers["content-type"]
    assert "AGUI-E024" == refused.json()["code"]


# -- item 9: a follower's wake-up costs what it delivers ---------------------------------------


def test_following_the_end_of_a_long_run_costs_what_a_short_run_costs() -> None:
    """Delivering 2,000 events live to 5 followers of a run that already holds 60,000
    costs about what it costs on a fresh run (a ratio in one process, never a time): a
    wake-up reads the new events by index.  (The code issue 29 was filed on copied and
    scanned the whole retained run at each wake-up: about 30 times slower here.)"""

    async def live(prefill: int) -> float:
        log = MemoryEventLog()
        await log.claim("r")
        for n in range(prefill):
            await log.append("r", {"type": "CUSTOM", "name": "n", "value": n})
        after = str(prefill)

        async def follower() -> int:
            count = 0
            async for _ in log.follow("r", after):
                count += 1
            return count

        tasks = [asyncio.ensure_future(follower()) for _ in range(5)]
        await asyncio.sleep(0)
        began = time.perf_counter()
        for n in range(2000):
            await log.append("r", {"type": "CUSTOM", "name": "n", "value": n})
            await asyncio.sleep(0)  # every follower wakes for every event
        await log.end("r")
        assert [2000] * 5 == await asyncio.gather(*tasks)
        return time.perf_counter() - began

    async def measure() -> tuple[float, float]:
        return min([await live(0) for _ in range(3)]), min([await live(60_000) for _ in range(3)])

    fresh, long = asyncio.run(measure())
    assert long < 3 * fresh, (fresh, long)


def test_a_late_join_with_a_prelude_over_a_long_run_leaves_the_loop_free() -> None:
    """Restating a 60,000-event run (about 0.4 s of folding) happens off the event loop: a
    ticker on the loop keeps ticking meanwhile.  (Folded on the loop, as on the code
    issue 29 was filed on, it could not tick once: the loop was held throughout.)"""
    from aguikit.server.prelude import prelude

    async def scenario() -> tuple[int, list[dict[str, Any]] | None]:
        log = MemoryEventLog(recent_events=10**6)  # every delta kept as sent: a long fold
        await log.append("r", {"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
        await log.append("r", {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
        for n in range(60_000):
            await log.append(
                "r", {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{n} "}
            )
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                await asyncio.sleep(0.002)
                ticks += 1

        ticking = asyncio.ensure_future(ticker())
        await asyncio.sleep(0.02)
        before = ticks
        start = await prelude(log, "r")
        during = ticks - before
        done = True
        await ticking
        return during, None if start is None else start[0]

    during, events = asyncio.run(scenario())
    assert events is not None and "MESSAGES_SNAPSHOT" in [e["type"] for e in events]
    assert during >= 5, during


# -- item 10: never a 500 -----------------------------------------------------------------------


@pytest.mark.parametrize("last", ["²", "¹", "1³", "1" * 4301, "-1", "1e3"])
def test_a_hostile_last_event_id_is_a_410_problem_document(last: str) -> None:
    """Digits Python's ``isdigit`` admits but ``int`` refuses, and more digits than
    ``int`` reads, are ids this server never issued: ``410``, never a 500."""
    assert parse_id(last) is None
    with serve_asgi(create_app(Endless(), event_log=MemoryEventLog())) as url:
        answer = httpx.post(
            url + "/",
            json={**BODY, "runId": "nobody"},
            headers={"Last-Event-ID": last.encode("latin-1")},  # what the server reads,
        )
    assert 410 == answer.status_code
    assert "application/problem+json" == answer.headers["content-type"]


@pytest.mark.parametrize("resume", [False, True], ids=["409-path", "410-path"])
def test_a_lone_surrogate_in_the_run_id_is_a_422_problem_document(resume: bool) -> None:
    """On the claim (409) path and the resume (410) path alike."""
    body = b'{"threadId": "t1", "runId": "r\\ud800", "messages": []}'
    headers = {"Content-Type": "application/json"}
    if resume:
        headers["Last-Event-ID"] = "1"
    with serve_asgi(create_app(Endless(), event_log=MemoryEventLog())) as url:
        answer = httpx.post(url + "/", content=body, headers=headers)
    assert 422 == answer.status_code
    assert "/runId" == answer.json()["issues"][0]["pointer"]


def test_an_unwritable_event_is_refused_at_its_emit_and_the_logged_run_stays_readable(
    make_log: Callable[[], EventLog],
) -> None:
    """A lone surrogate in an emitted event: the handler is told at its ``emit`` (a
    :class:`WireFormatError` naming the pointer and ``AGUI-E025``), the event is never
    logged, and every reader, the first and a resumer, gets the run's ``RUN_ERROR``
    carrying ``AGUI-E025``.  (Before, the log took it and every reader's stream ended
    there, with no terminal event and the handler never told.)"""
    told: list[WireFormatError] = []

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        await run.say("before")
        try:
            await run.emit({"type": "CUSTOM", "name": "bad\ud800", "value": 1})
        except WireFormatError as error:
            told.append(error)
            raise

    with serve_asgi(create_app(handler, event_log=make_log())) as url:
        first = httpx.post(url + "/", json=BODY, timeout=30)
        again = _ending(url)
    events = [json.loads(frame.data) for frame in iter_frames([first.content])]
    assert events == again
    assert {"type": "RUN_ERROR", "code": "AGUI-E025"} == {
        k: events[-1][k] for k in ("type", "code")
    }
    assert "/name" == told[0].pointer
    assert "AGUI-E025" == told[0].rule


# -- the fault wrapper over both logs ------------------------------------------------------------


def test_a_failed_append_fails_the_run_loudly_on_both_logs(
    make_log: Callable[[], EventLog],
) -> None:
    """The 4th append fails (the log's connection broke): the handler is told at its
    ``emit``, the run ends with ``RUN_ERROR`` in the log, and a resumer reads every event
    up to it with no hole."""
    seen: list[BaseException] = []

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        try:
            for word in range(10):
                await run.emit({"type": "CUSTOM", "name": "word", "value": word})
        except ConnectionError as error:
            seen.append(error)
            raise

    faulty = FaultyLog(make_log()).fail("append", after=3)
    with serve_asgi(create_app(handler, event_log=faulty)) as url:
        httpx.post(url + "/", json=BODY, timeout=30)
        events = _ending(url)
    assert [("fail", "append", 3)] == faulty.fired
    assert 1 == len(seen)
    assert ["RUN_STARTED", "CUSTOM", "CUSTOM", "RUN_ERROR"] == [e["type"] for e in events]
    assert "AGUI-E020" == events[-1]["code"]


def test_a_dropped_log_connection_ends_the_stream_and_a_resume_gets_the_rest(
    make_log: Callable[[], EventLog],
) -> None:
    """A follower whose log connection drops ends its answer (no terminal event: the
    client sees a cut), and the client's resume from its last id reads the rest."""

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        for word in range(20):
            await run.emit({"type": "CUSTOM", "name": "word", "value": word})

    faulty = FaultyLog(make_log()).drop_connection(after=5)
    with serve_asgi(create_app(handler, event_log=faulty)) as url:
        cut = httpx.post(url + "/", json=BODY, timeout=30)
        frames = list(iter_frames([cut.content]))
        time.sleep(0.2)
        rest = httpx.post(
            url + "/", json=BODY, headers={"Last-Event-ID": frames[-1].id or ""}, timeout=30
        )
    later = list(iter_frames([rest.content]))
    assert 5 == len(frames)
    assert [str(n) for n in range(1, 23)] == [f.id for f in frames + later]
    assert "RUN_FINISHED" == json.loads(later[-1].data)["type"]


def test_a_failing_heartbeat_does_not_cancel_a_run_that_is_read(
    make_log: Callable[[], EventLog],
) -> None:
    """The grace watch's looks at the readers fail three times in a row: the run is
    neither cancelled under its reader nor left going on once that reader leaves."""
    endless = Endless()
    faulty = FaultyLog(make_log()).fail("readers", times=3)
    with serve_asgi(create_app(endless, event_log=faulty, resume_grace=0.3)) as url:
        last = read_then_hang_up(url + "/", BODY)
        read_then_hang_up(url + "/", BODY, last, seconds=2.0)
        assert not endless.cancelled.is_set()
        assert endless.cancelled.wait(20)
    assert 3 == len([f for f in faulty.fired if f[0] == "fail"])


def test_a_stalled_or_failing_log_is_a_503_never_a_hang_or_a_500(
    make_log: Callable[[], EventLog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that does not answer within the log timeout, and a resume whose check of the
    run's owner raises (Redis down), are answered ``503`` with ``Retry-After``."""
    monkeypatch.setattr(server_http, "LOG_TIMEOUT", 0.5)
    faulty = FaultyLog(make_log()).stall("claim", 5.0).fail("owner")
    with serve_asgi(create_app(Endless(), event_log=faulty)) as url:
        began = time.monotonic()
        stalled = httpx.post(url + "/", json=BODY, timeout=30)
        took = time.monotonic() - began
        failed = httpx.post(url + "/", json=BODY, headers={"Last-Event-ID": "1"}, timeout=30)
    assert (503, 503) == (stalled.status_code, failed.status_code)
    assert took < 4
    assert "5" == failed.headers["retry-after"]


def test_the_fault_wrapper_refuses_an_operation_the_log_does_not_have() -> None:
    """A misspelt operation is a plan that could never fire: refused when planned."""
    with pytest.raises(ValueError, match="no log operation 'apend'"):
        FaultyLog(MemoryEventLog()).fail("apend")  # type: ignore[arg-type]


def test_a_run_nobody_follows_waits_for_a_reader_instead_of_filling_the_log() -> None:
    """Once its connection is gone and no reader follows, a run goes at most
    ``queue_size`` events further, then waits for a reader or the end of its grace; a
    reconnect sets it going again.  (Before, it ran at full speed into the log all through
    its grace window: 200 silent clients of a fast handler took a worker to 3.5 GB.)"""
    endless = Endless()
    log = MemoryEventLog()
    with serve_asgi(create_app(endless, event_log=log, queue_size=8, resume_grace=4.0)) as url:
        last = read_then_hang_up(url + "/", BODY)
        time.sleep(2.0)  # 400 events' worth of the handler's pace
        waiting = endless.count
        time.sleep(0.5)
        assert waiting == endless.count  # it waits
        read_then_hang_up(url + "/", BODY, last, seconds=1.5)
        resumed = endless.count
        assert endless.cancelled.wait(20)
    assert waiting < int(last) + 100  # two windows and what was in flight, not 400
    assert resumed > waiting + 50  # the reconnect set it going


def test_the_fault_wrapper_passes_follow_frames_through_with_its_faults_per_event() -> None:
    """Over a log with ``follow_frames`` the wrapper has it too (the endpoint sends the
    logged frames over a faulty log as over the log), and a ``follow`` fault still fires at
    the event it names: the batch is cut there, the events before it delivered first.
    Over a log without it, the wrapper has none (the endpoint then uses ``follow``)."""

    async def scenario() -> tuple[list[str], list[tuple[str, str, int]]]:
        log = MemoryEventLog()
        for word in range(6):
            await log.append("r", {"type": "CUSTOM", "name": "w", "value": word})
        await log.end("r")
        faulty = FaultyLog(log).stall("follow", 0.0, after=2).drop_connection(after=4)
        ids: list[str] = []
        with pytest.raises(ConnectionError):
            async for event_id, batch in faulty.follow_frames("r", "0"):
                frames = list(iter_frames([batch]))
                assert event_id == frames[-1].id
                ids.extend(f.id or "" for f in frames)
        return ids, faulty.fired

    ids, fired = asyncio.run(scenario())
    assert ["1", "2", "3", "4"] == ids
    assert [("stall", "follow", 2), ("drop", "follow", 4)] == fired
    assert not hasattr(FaultyLog(object()), "follow_frames")  # type: ignore[arg-type]
