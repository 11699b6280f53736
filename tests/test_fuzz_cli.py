"""
Hostile files and a hostile live server against ``aguikit check`` and :class:`AgentClient`.

The command's contract under garbage: exit 0, 1 or 2 (never a traceback), every problem on
a line of its own, and with ``--format json`` a document that parses.  The client's: every
failure is an :class:`~aguikit.AguiError` that says where (a transport error its URL, a
decode error its frame and offset, a stream error its event index), and a peer that never
finishes a frame is stopped by ``max_frame_bytes`` rather than buffered forever.

Subprocesses cost a third of a second each, so the subprocess counts are a fiftieth of the
in-process ones; the in-process runs of :func:`aguikit.cli.main` carry the volume.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import hostile, support
from tests.servers import RecordingServer, Route, serve
from tests.support import split_every

from aguikit import AguiError, DecodeError, LimitExceededError, TransportError
from aguikit.cli import main
from aguikit.client import AgentClient

pytestmark = pytest.mark.fuzz

STREAMS = hostile.corpus_streams()
SUFFIXES = [".sse", ".jsonl", ".txt", ".json", ""]
RUN_INPUT = support.run_input(thread_id="t", run_id="r")
SUBPROCESSES = max(6, hostile.INPUTS // 50)
REQUESTS = max(10, hostile.INPUTS // 20)


def garbage(rng: random.Random) -> bytes:
    """A mutated stream, framed as SSE or as JSONL, then damaged at the byte level."""
    events = hostile.mutate_stream(rng.choice(STREAMS), rng)
    if rng.random() < 0.5:
        data = hostile.sse_bytes(hostile.serialisable(events))
    else:
        data = b"".join(
            json.dumps(e).encode("utf-8", "surrogatepass") + b"\n"
            for e in hostile.serialisable(events)
        )
    return hostile.mutate_bytes(data, rng) if rng.random() < 0.7 else data


def check_in_process(path: Path, fmt: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", str(path), "--format", fmt])
    return code, out.getvalue(), err.getvalue()


def judge_output(code: int, out: str, err: str, fmt: str) -> None:
    assert code in (0, 1, 2), f"exit {code}"
    assert "Traceback" not in err, err[-2000:]
    if code == 2:
        assert err.startswith("aguikit: "), err[:500]
        if fmt != "json":
            return
    if fmt == "json":  # one document, even for unreadable input (report schema version 1)
        document = json.loads(out)
        assert (code == 0) == document["ok"]
        assert code == document["exit"]
        for source in document["sources"]:
            for problem in source["problems"]:
                assert problem["kind"] in (
                    "schema",
                    "protocol",
                    "patch",
                    "decode",
                    "transport",
                    "warning",
                    "info",
                )
                assert problem["code"] and problem["message"] and problem["rule"]
    else:
        assert (": OK:" in out) == (code == 0), out[-500:]


def test_check_survives_garbage_files_in_process(tmp_path: Path) -> None:
    """``main(["check", file])`` exits 0/1/2 with a report, whatever the file holds."""

    def entry(value: tuple[bytes, str, str]) -> None:
        data, suffix, fmt = value
        path = tmp_path / f"input{suffix}"
        path.write_bytes(data)
        judge_output(*check_in_process(path, fmt), fmt)

    hostile.drive(
        entry,
        lambda rng: (garbage(rng), rng.choice(SUFFIXES), rng.choice(["text", "json"])),
        hostile.no_escape,
    )


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aguikit", "check", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_survives_garbage_files_as_a_subprocess(tmp_path: Path) -> None:
    """The real command on garbage: an exit code and a report, never a traceback."""

    def entry(value: tuple[bytes, str]) -> None:
        data, suffix = value
        path = tmp_path / f"input{suffix}"
        path.write_bytes(data)
        result = run_check(str(path), "--format", "json")
        judge_output(result.returncode, result.stdout, result.stderr, "json")

    hostile.drive(
        entry,
        lambda rng: (garbage(rng), rng.choice(SUFFIXES)),
        hostile.no_escape,
        count=SUBPROCESSES,
    )


# ---- a live server --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[RecordingServer]:
    with serve() as running:
        yield running


def hostile_route(rng: random.Random) -> Route:
    """Garbage bytes served in odd pieces: maybe slowly, maybe cut off mid-frame."""
    data = garbage(rng) or b"data: x"
    roll = rng.random()
    if roll < 0.2:  # a slow drip: the first bytes a few at a time, then the rest
        pieces = [*split_every(data[:200], [1, 7, 3]), data[200:]]
        return Route([p for p in pieces if p], delay=0.0005)
    if roll < 0.4:
        return Route([data[: rng.randrange(len(data) + 1)]], drop=True)
    if roll < 0.5:
        status = rng.choice([400, 404, 500, 503])
        return Route([data], status=status, content_type=rng.choice(["text/plain", "text/html"]))
    if roll < 0.6:
        return Route([data], content_type=rng.choice(["application/json", "text/plain", ""]))
    return Route(split_every(data, [rng.choice([1, 5, 64, 4096])]))


def test_check_survives_a_hostile_server_as_a_subprocess(server: RecordingServer) -> None:
    """``aguikit check URL`` against garbage, drips, drops and wrong answers: 0/1/2."""
    counter = itertools.count()

    def entry(route: Route) -> None:
        url = server.add(f"/cli-{next(counter)}", route)
        result = run_check(url, "--format", "json")
        judge_output(result.returncode, result.stdout, result.stderr, "json")

    hostile.drive(entry, hostile_route, hostile.no_escape, count=SUBPROCESSES)


def test_agent_client_raises_only_located_errors_against_a_hostile_server(
    server: RecordingServer,
) -> None:
    """Every failure of ``run_sync`` is an AguiError with a location; nothing else escapes."""
    counter = itertools.count()

    def entry(route: Route) -> None:
        url = server.add(f"/client-{next(counter)}", route)
        client = AgentClient(url, timeout=10)
        try:
            for _ in client.run_sync(RUN_INPUT):
                pass
        except Exception as error:
            hostile.assert_located(error)

    hostile.drive(entry, hostile_route, hostile.no_escape, count=REQUESTS)


def test_async_agent_client_raises_only_located_errors_against_a_hostile_server(
    server: RecordingServer,
) -> None:
    """The same for ``run``, in one event loop."""
    counter = itertools.count()

    async def one(route: Route) -> None:
        url = server.add(f"/aclient-{next(counter)}", route)
        client = AgentClient(url, timeout=10)
        try:
            async for _ in client.run(RUN_INPUT):
                pass
        except Exception as error:
            hostile.assert_located(error)

    def entry(routes: list[Route]) -> None:
        async def many() -> None:
            for route in routes:
                await one(route)

        asyncio.run(many())

    batch = 10
    hostile.drive(
        entry,
        lambda rng: [hostile_route(rng) for _ in range(batch)],
        hostile.no_escape,
        count=max(2, REQUESTS // batch),
    )


# ---- endless and oversized answers ------------------------------------------------------------


def endless(piece: bytes) -> Iterator[bytes]:
    """The same piece forever (the server writes until the client hangs up)."""
    while True:
        yield piece


def test_an_endless_frame_without_a_line_end_stops_at_max_frame_bytes(
    server: RecordingServer,
) -> None:
    """A peer streaming one never-ending ``data:`` line is cut off at the frame limit."""
    url = server.add("/endless-line", Route(itertools.chain([b"data: "], endless(b"x" * 4096))))
    client = AgentClient(url, max_frame_bytes=64 * 1024)

    with pytest.raises(LimitExceededError) as info:
        list(client.run_sync(RUN_INPUT))

    assert "max_frame_bytes" == info.value.limit
    assert 1 == info.value.frame
    assert 0 == info.value.byte_offset


def test_endless_comments_without_a_blank_line_stop_at_max_frame_bytes(
    server: RecordingServer,
) -> None:
    """Keep-alive comments that never end a frame count toward it; the limit stops them."""
    url = server.add("/endless-comments", Route(endless(b": keep-alive\n" * 100)))
    client = AgentClient(url, max_frame_bytes=64 * 1024)

    with pytest.raises(LimitExceededError, match="max_frame_bytes"):
        list(client.run_sync(RUN_INPUT))


def test_a_server_that_goes_silent_is_bounded_by_the_read_timeout(
    server: RecordingServer,
) -> None:
    """Headers, then nothing: the read timeout ends the run with a located TransportError."""
    url = server.add("/silent", Route([b": hello\n\n", b""], delay=5.0))
    client = AgentClient(url, timeout=0.3)
    started = time.monotonic()

    with pytest.raises(TransportError) as info:
        list(client.run_sync(RUN_INPUT))

    assert url == info.value.location
    assert time.monotonic() - started < 4.0


def test_endless_keep_alives_are_bounded_by_the_callers_deadline(
    server: RecordingServer,
) -> None:
    """Keep-alive frames forever are legal SSE; a caller's deadline cancels the run and the
    client hangs up (the server sees the disconnect)."""
    server.disconnected.clear()
    url = server.add("/keepalive", Route(endless(b":\n\n"), delay=0.01))
    client = AgentClient(url, timeout=5)

    async def consume() -> None:
        async for _ in client.run(RUN_INPUT):
            pass

    async def bounded() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(consume(), timeout=0.5)

    asyncio.run(bounded())

    assert server.disconnected.wait(5.0)


def test_a_huge_response_header_is_a_transport_error_or_harmless(
    server: RecordingServer,
) -> None:
    """A 200 KB header either is refused by the HTTP layer (a TransportError naming the
    URL) or is ignored; it never escapes as an httpx exception."""
    body = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
    body += b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
    url = server.add("/huge-header", Route([body], headers={"X-Huge": "h" * 200_000}))
    client = AgentClient(url, timeout=5)

    try:
        updates = list(client.run_sync(RUN_INPUT))
    except TransportError as error:
        assert url == error.location
    else:
        assert ["RUN_STARTED", "RUN_FINISHED"] == [u.event.type for u in updates]


def test_a_frame_cut_off_by_a_dropped_connection_is_located(server: RecordingServer) -> None:
    """The connection drops inside the second frame: the first is delivered, then a located
    error (the transport's, or the decoder's truncation)."""
    body = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"RU'
    url = server.add("/cut", Route([body], drop=True))
    client = AgentClient(url, timeout=5)
    seen: list[str] = []

    with pytest.raises(AguiError) as info:
        for update in client.run_sync(RUN_INPUT):
            seen.append(update.event.type)

    assert ["RUN_STARTED"] == seen
    assert isinstance(info.value, TransportError | DecodeError)
    assert info.value.location


def test_the_client_keeps_no_second_copy_of_every_event(server: RecordingServer) -> None:
    """Every event reaches the caller as an Update; the session used to keep them all too,
    growing with the stream instead of with the conversation."""
    body = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
    body += b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
    client = AgentClient(server.add("/no-copy", Route([body])))

    updates = list(client.run_sync(RUN_INPUT))

    assert 2 == len(updates)
    assert [] == client.session.delivered
