"""
Reconnect and resume: numbered SSE frames, event logs (memory and Redis Streams), and a
client that survives dropped connections, delivering what an uninterrupted run delivers.

The proof: two uvicorn worker processes behind one real Redis, the client's connection
cut at seeded random byte offsets and every reconnect sent to the *other* worker; every
run's messages and state must equal the uninterrupted run's.  And the two rules that
keep a logged run honest, on one process and on two: a run id starts once however many
requests race for it, and a run nobody follows is cancelled once its grace window passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.redis_server import redis_server
from tests.resume_app import make_app
from tests.servers import read_then_hang_up, serve_asgi, uvicorn_workers

import aguikit
from aguikit import Agent, AgentClient, Session
from aguikit.errors import TruncatedStreamError
from aguikit.proto import MEDIA_TYPE, encode_proto_frame
from aguikit.server import RunAgentInput, RunWriter, create_app
from aguikit.server.eventlog import EventLog, MemoryEventLog
from aguikit.transport.sse import iter_frames
from aguikit.wire import to_wire

ROOT = Path(__file__).resolve().parent.parent
BODY = {"threadId": "t", "runId": "r1", "messages": []}


class _Cut(httpx.AsyncByteStream):
    """A response body that breaks, like a dropped connection, after ``limit`` bytes."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int | None, request: httpx.Request):
        self.inner, self.limit, self.request = inner, limit, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        async for chunk in self.inner:
            if self.limit is not None and sent + len(chunk) > self.limit:
                yield chunk[: self.limit - sent]
                raise httpx.ReadError("connection cut by the test", request=self.request)
            sent += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CuttingTransport(httpx.AsyncBaseTransport):
    """
    Sends request ``n`` to worker ``n % len(workers)`` (so every reconnect lands on
    another worker) and, with probability ``rate``, cuts its answer at a seeded random
    byte offset.
    """

    def __init__(
        self,
        workers: list[str],
        rng: random.Random,
        rate: float = 0.8,
        min_cut: int = 1,
        max_cut: int = 2500,
    ) -> None:
        self.workers, self.rng, self.rate, self.min_cut = workers, rng, rate, min_cut
        self.max_cut = max_cut
        self.inner = httpx.AsyncHTTPTransport()
        self.requests = 0
        self.cuts = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        base = httpx.URL(self.workers[self.requests % len(self.workers)])
        self.requests += 1
        request.url = request.url.copy_with(host=base.host, port=base.port)
        response = await self.inner.handle_async_request(request)
        cut = self.rng.random() < self.rate
        limit = self.rng.randint(self.min_cut, self.max_cut) if cut else None
        if limit is not None:
            self.cuts += 1
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Cut(response.stream, limit, request),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _result(agent: Agent, run_id: str) -> str:
    """Messages and state, with the run id (which the scripted ids embed) factored out."""
    text = json.dumps({"messages": [to_wire(m) for m in agent.messages], "state": agent.state})
    return text.replace(run_id, "RUN")


async def _runs(url: str, transport: httpx.AsyncBaseTransport | None, count: int) -> list[str]:
    results = []
    for _ in range(count):
        agent = Agent(url, transport=transport, max_reconnects=50, backoff=0.001, max_backoff=0.02)
        result = await agent.run()
        results.append(_result(agent, result.run_id))
    return results


def test_frames_carry_ids_and_a_resume_replays_after_the_id() -> None:
    """Every SSE frame is numbered; Last-Event-ID gets the rest of the same run."""
    with serve_asgi(make_app(MemoryEventLog())) as base:
        url = base + "/agent"
        full = httpx.post(url, json=BODY, headers={"Accept": "text/event-stream"}, timeout=30)
        frames = list(iter_frames([full.content]))
        assert [f.id for f in frames] == [str(n) for n in range(1, len(frames) + 1)]
        again = httpx.post(url, json=BODY, headers={"Last-Event-ID": "5"}, timeout=30)
        rest = list(iter_frames([again.content]))
        # The ended run is kept compacted: its deltas come merged, under the last one's id.
        assert _folded(frames[:5] + rest) == _folded(frames)
        assert [int(f.id or 0) for f in rest] == sorted({int(f.id or 0) for f in rest})
        assert int(rest[0].id or 0) >= 6 and rest[-1].id == frames[-1].id


def _folded(frames: list[Any]) -> str:
    """Messages and state a Session folds SSE ``frames`` to."""
    session = Session()
    session.feed_all(json.loads(f.data) for f in frames)
    session.finish()
    return json.dumps({"messages": [to_wire(m) for m in session.messages], "state": session.state})


def test_an_unknown_run_or_id_is_gone_and_a_started_run_conflicts() -> None:
    """410 for what the log cannot replay, 409 for starting a run id twice."""
    with serve_asgi(make_app(MemoryEventLog())) as base:
        url = base + "/agent"
        httpx.post(url, json=BODY, timeout=30)
        for body, last in [({**BODY, "runId": "nope"}, "3"), (BODY, "99999"), (BODY, "x")]:
            answer = httpx.post(url, json=body, headers={"Last-Event-ID": last}, timeout=30)
            assert answer.status_code == 410
            assert answer.json()["lastEventId"] == last
        assert httpx.post(url, json=BODY, timeout=30).status_code == 409


def test_a_run_cut_many_times_equals_the_uninterrupted_run_in_memory() -> None:
    """One worker, the in-memory log: seeded cuts, same messages and state every time."""
    with serve_asgi(make_app(MemoryEventLog())) as base:
        url = base + "/agent"
        (reference,) = asyncio.run(_runs(url, None, 1))
        transport = CuttingTransport([base], random.Random(13))
        results = asyncio.run(_runs(url, transport, 8))
    assert transport.cuts >= 8
    assert results == [reference] * 8


class _SyncCut(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, limit: int, request: httpx.Request):
        self.inner, self.limit, self.request = inner, limit, request

    def __iter__(self) -> Iterator[bytes]:
        data = b"".join(self.inner)
        yield data[: self.limit]
        if len(data) > self.limit:
            raise httpx.ReadError("connection cut by the test", request=self.request)

    def close(self) -> None:
        self.inner.close()


class SyncCuttingTransport(httpx.BaseTransport):
    """Every answer cut after ``step`` more bytes than the last: a sync client's drops."""

    def __init__(self, step: int) -> None:
        self.inner, self.step, self.cuts = httpx.HTTPTransport(), step, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        assert isinstance(response.stream, httpx.SyncByteStream)
        self.cuts += 1
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_SyncCut(response.stream, self.step, request),
            request=request,
        )


def test_the_sync_client_resumes_a_dropped_stream_too() -> None:
    """``run_sync`` reconnects with Last-Event-ID and folds the same conversation."""
    with serve_asgi(make_app(MemoryEventLog())) as base:
        url = base + "/agent"
        plain = AgentClient(url)
        list(plain.run_sync({**BODY, "runId": "sync-a"}))
        transport = SyncCuttingTransport(700)
        cut = AgentClient(url, transport=transport, max_reconnects=50, backoff=0.001)
        list(cut.run_sync({**BODY, "runId": "sync-b"}))
    assert transport.cuts > 3
    assert json.dumps([to_wire(m) for m in cut.messages]).replace("sync-b", "X") == json.dumps(
        [to_wire(m) for m in plain.messages]
    ).replace("sync-a", "X")
    assert cut.state == plain.state


def test_an_unresumable_stream_ends_with_truncated_stream_naming_the_last_event() -> None:
    """A log that dropped what the client missed: TruncatedStreamError, not a gap."""
    with serve_asgi(make_app(MemoryEventLog(max_events=10))) as base:
        transport = CuttingTransport([base], random.Random(1), rate=1.0, min_cut=400)
        agent = Agent(base + "/agent", transport=transport, backoff=0.2, max_backoff=0.2)
        with pytest.raises(TruncatedStreamError, match=r"after event \d+ \(\w+\)"):
            asyncio.run(agent.run())


def test_a_late_joiner_with_a_prelude_folds_to_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Snapshots and re-opened items, then live: the same messages and state as the log."""
    monkeypatch.setenv("AGUIKIT_TEST_PAUSE", "0.02")  # still running when the joiner comes
    with serve_asgi(make_app(MemoryEventLog())) as base:
        url = base + "/agent"

        async def scenario() -> tuple[str, str, int, int]:
            agent = Agent(url)
            running = asyncio.ensure_future(agent.run())
            while agent.session is None or len(agent.session.messages) < 3:
                await asyncio.sleep(0.005)
            body = {"threadId": agent.thread_id, "runId": agent.session.run_id, "messages": []}
            headers = {"Last-Event-ID": "0", "X-AGUI-Join": "prelude"}
            async with httpx.AsyncClient(timeout=30) as client:
                joined = (await client.post(url, json=body, headers=headers)).content
                whole = (await client.post(url, json=body, headers={"Last-Event-ID": "0"})).content
            result = await running
            late = Session()
            frames = list(iter_frames([joined]))
            late.feed_all(json.loads(f.data) for f in frames)
            late.finish()
            folded = json.dumps(
                {"messages": [to_wire(m) for m in late.messages], "state": late.state}
            ).replace(result.run_id, "RUN")
            return (
                _result(agent, result.run_id),
                folded,
                len(frames),
                int(list(iter_frames([whole]))[-1].id or 0),  # the run's events
            )

        original, joined, joined_frames, all_frames = asyncio.run(scenario())
    assert joined == original
    assert joined_frames < all_frames


def test_an_agent_joins_a_run_in_progress_and_ends_with_the_same_conversation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Agent.join``: prelude then live, the starter's messages and state."""
    monkeypatch.setenv("AGUIKIT_TEST_PAUSE", "0.02")
    with serve_asgi(make_app(MemoryEventLog())) as base:
        url = base + "/agent"

        async def scenario() -> tuple[str, str]:
            starter = Agent(url)
            running = asyncio.ensure_future(starter.run())
            while starter.session is None or len(starter.session.messages) < 3:
                await asyncio.sleep(0.005)
            assert starter.session.run_id is not None
            joiner = Agent(url, thread_id=starter.thread_id)
            joined = await joiner.join(starter.session.run_id)
            result = await running
            return _result(starter, result.run_id), _result(joiner, joined.run_id)

        started, joined = asyncio.run(scenario())
    assert joined == started


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def test_the_redis_log_numbers_replays_and_ends_like_the_memory_log(redis_url: str) -> None:
    """Append, resumable, follow from a position and to the end, on a real Redis."""
    from aguikit.server.redis_log import RedisEventLog

    async def scenario() -> None:
        for log in (MemoryEventLog(), RedisEventLog.from_url(redis_url, prefix="unit:")):
            ids = [await log.append("r", {"type": "CUSTOM", "name": str(n)}) for n in range(4)]
            assert ids == ["1", "2", "3", "4"]
            assert [i for i, _ in await log.read("r")] == ids
            assert await log.resumable("r", "2") and await log.resumable("r", None)
            assert not await log.resumable("r", "9") and not await log.resumable("q", "1")

            async def tail(log: Any = log) -> list[str]:
                return [i async for i, _ in log.follow("r", "2")]

            follower = asyncio.ensure_future(tail())
            await asyncio.sleep(0.05)
            await log.append("r", {"type": "CUSTOM", "name": "late"})
            await log.end("r")
            assert await asyncio.wait_for(follower, 10) == ["3", "4", "5"]

    asyncio.run(scenario())


@contextlib.contextmanager
def _workers(redis: str, count: int, **extra: str) -> Iterator[list[str]]:
    """``count`` uvicorn processes serving tests/resume_app.py over the same Redis
    (``extra``: more environment, such as ``AGUIKIT_TEST_HANDLER``)."""
    env = {
        **os.environ,
        "AGUIKIT_TEST_REDIS": redis,
        # The aguikit this process imported (src/, or the installed compiled wheel), then
        # the checkout for tests.resume_app.
        "PYTHONPATH": os.pathsep.join([str(Path(aguikit.__file__).parent.parent), str(ROOT)]),
        **extra,
    }
    with uvicorn_workers("tests.resume_app:app", count, env, ROOT) as workers:
        yield [url for url, _ in workers]


def test_both_logs_claim_a_run_once_and_count_its_readers(redis_url: str) -> None:
    """claim is True once per run id; a follower counts while it follows, not after; an
    ended run has nothing after its last event."""
    from aguikit.server.redis_log import RedisEventLog

    async def scenario(log: EventLog) -> None:
        assert await log.claim("c") and not await log.claim("c")
        assert await log.resumable("c", "0") and not await log.resumable("c", "1")
        await log.append("c", {"type": "CUSTOM", "name": "one", "value": 1})
        assert not await log.claim("c") and await log.claim("d")
        assert await log.readers("c") == 0
        follower = log.follow("c", "0")
        assert (await anext(follower))[0] == "1"
        assert await log.readers("c") == 1 and await log.readers("d") == 0
        await follower.aclose()
        assert await log.readers("c") == 0
        await log.end("c")
        assert await log.resumable("c", "0") and not await log.resumable("c", "1")
        assert [i async for i, _ in log.follow("c", "0")] == ["1"]
        assert await log.readers("c") == 0

    asyncio.run(scenario(MemoryEventLog()))
    asyncio.run(scenario(RedisEventLog.from_url(redis_url, prefix="claim:")))


def test_the_redis_log_refuses_prefixes_that_would_mix_runs_and_readers() -> None:
    """A run id must never name another run's readers' key."""
    pytest.importorskip("redis")
    from redis.asyncio import Redis

    from aguikit.server.redis_log import RedisEventLog

    for prefix, readers in [("a:", "a:readers:"), ("a:run:", "a:")]:
        with pytest.raises(ValueError, match="overlap"):
            RedisEventLog(Redis(), prefix=prefix, readers_prefix=readers)


async def _race(urls: list[str], run_id: str, count: int) -> list[int]:
    """``count`` requests to start ``run_id`` at once, spread over ``urls``; statuses."""
    body = {**BODY, "runId": run_id}
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def start(n: int) -> int:
            # The status only: the one run started may be endless.
            async with client.stream("POST", urls[n % len(urls)], json=body) as response:
                return response.status_code

        return list(await asyncio.gather(*(start(n) for n in range(count))))


def test_racing_requests_for_one_new_run_id_start_it_once_in_memory() -> None:
    """One uvicorn, a memory log: of 24 simultaneous starts, one 200, the rest 409."""
    started: list[str] = []

    async def once(run_input: RunAgentInput, run: RunWriter) -> None:
        started.append(run_input.run_id)
        await run.say("only once")

    with serve_asgi(create_app(once, path="/agent", event_log=MemoryEventLog())) as base:
        statuses = asyncio.run(_race([base + "/agent"], "raced", 24))
    assert sorted(statuses) == [200] + [409] * 23
    assert started == ["raced"]


def _marks(folder: str, what: str) -> list[str]:
    return [name for name in os.listdir(folder) if f".{what}." in name]


def test_racing_requests_for_one_new_run_id_start_it_once_on_two_workers(
    redis_url: str,
) -> None:
    """Two uvicorn workers, one Redis: of 24 simultaneous starts, one 200, one handler."""
    with (
        tempfile.TemporaryDirectory() as marks,
        _workers(
            redis_url,
            2,
            AGUIKIT_TEST_HANDLER="endless",
            AGUIKIT_TEST_GRACE="0",
            AGUIKIT_TEST_MARKS=marks,
        ) as workers,
    ):
        statuses = asyncio.run(_race([w + "/agent" for w in workers], "raced-redis", 24))
        time.sleep(0.5)
        started = _marks(marks, "started")
    assert sorted(statuses) == [200] + [409] * 23
    assert len(started) == 1


def _readers_of(redis_url: str, run_id: str) -> str:
    """What Redis holds about a run's readers, for a failure's message."""
    import redis

    client = redis.Redis.from_url(redis_url)
    entries = client.zrange("aguikit:readers:" + run_id, 0, -1, withscores=True)
    seconds, micros = client.time()
    return f"readers {entries} at server time {seconds + micros / 1e6:.3f}"


def test_a_run_followed_on_another_worker_lives_and_is_cancelled_when_its_reader_leaves(
    redis_url: str,
) -> None:
    """Worker A runs the handler; its client drops and reconnects to worker B in time,
    reading for several grace windows: A sees B's reader in Redis and keeps the run.
    When B's reader leaves too, A cancels the handler one window later, and the log ends
    where the handler stopped."""
    grace = 1.0
    with (
        tempfile.TemporaryDirectory() as marks,
        _workers(
            redis_url,
            2,
            AGUIKIT_TEST_HANDLER="endless",
            AGUIKIT_TEST_GRACE=str(grace),
            AGUIKIT_TEST_MARKS=marks,
        ) as (a, b),
    ):
        body = {**BODY, "runId": "graced"}
        first = read_then_hang_up(a + "/agent", body, seconds=0.3)
        second = read_then_hang_up(b + "/agent", body, first, seconds=4 * grace)
        dropped = time.monotonic()
        assert not _marks(marks, "cancelled")  # four windows on B: still running on A
        while not _marks(marks, "cancelled") and time.monotonic() - dropped < 15:
            time.sleep(0.05)
        waited = time.monotonic() - dropped
        # Checked before following: a live run would never end.
        assert 0.9 * grace <= waited < 10, _readers_of(redis_url, "graced")
        time.sleep(0.3)
        rest = httpx.post(
            a + "/agent", json={**BODY, "runId": "graced"}, headers={"Last-Event-ID": second}
        )
        frames = list(iter_frames([rest.content]))
        late = httpx.post(
            b + "/agent",
            json={**BODY, "runId": "graced"},
            headers={"Last-Event-ID": frames[-1].id or ""},
        )
        started = _marks(marks, "started")
    assert int(second) > int(first) + 100  # B delivered the run's events live
    assert len(started) == 1
    assert rest.status_code == 200 and frames  # what was logged up to the cancellation
    ending = [json.loads(frame.data) for frame in frames[-3:]]
    assert ["TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"] == [
        event["type"] for event in ending
    ]  # the endpoint closed the run with the cancelled outcome (life-08), on Redis too
    assert {"type": "cancelled"} == ending[-1]["outcome"]
    assert late.status_code == 410


RUNS = 40


def test_two_workers_one_redis_cut_at_random_points_every_run_equals_the_uninterrupted_one(
    redis_url: str,
) -> None:
    """The proof: reconnects land on the other worker and resume the same run."""
    with _workers(redis_url, 2) as workers:
        url = workers[0] + "/agent"
        (reference,) = asyncio.run(_runs(url, None, 1))
        transport = CuttingTransport(workers, random.Random(2026))
        results = asyncio.run(_runs(url, transport, RUNS))
    equal = sum(result == reference for result in results)
    print(
        f"\nresume proof: {RUNS} runs, {transport.cuts} cuts, "
        f"{transport.requests} requests, {equal} equal to the uninterrupted run"
    )
    assert transport.cuts >= RUNS
    assert equal == RUNS


_PARTIAL = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
]
_REST = [
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
]


def _sse(events: list[dict[str, Any]], first: int) -> bytes:
    return b"".join(
        f"id: {n}\ndata: {json.dumps(e)}\n\n".encode() for n, e in enumerate(events, first)
    )


def test_a_binary_client_resumes_an_sse_answer_asking_for_sse_only() -> None:
    """binary=True prefers protobuf on the first request; the reconnect asks for SSE alone."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = _sse(_PARTIAL, 1) if len(seen) == 1 else _sse(_REST, 3)
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=body)

    client = AgentClient(
        "http://agent.test/", binary=True, transport=httpx.MockTransport(answer), backoff=0.001
    )
    list(client.run_sync(BODY))
    assert [m.content for m in client.messages] == ["hi"]
    assert "application/vnd.ag-ui.event+proto" in seen[0].headers["accept"]
    assert "last-event-id" not in seen[0].headers
    assert seen[1].headers["accept"] == "text/event-stream"
    assert seen[1].headers["last-event-id"] == "2"


def test_a_protobuf_answer_is_never_reconnected() -> None:
    """No frame ids, no resume: a cut protobuf answer is truncated, even if declared resumable."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        headers = {"Content-Type": MEDIA_TYPE, "X-AGUI-Resume": "last-event-id"}
        body = b"".join(encode_proto_frame(e) for e in _PARTIAL)
        return httpx.Response(200, headers=headers, content=body)

    transport = httpx.MockTransport(answer)
    client = AgentClient("http://agent.test/", binary=True, transport=transport, backoff=0.001)
    with pytest.raises(TruncatedStreamError):
        list(client.run_sync(BODY))
    assert len(seen) == 1
    aclient = AgentClient("http://agent.test/", binary=True, async_transport=transport)

    async def run() -> None:
        async for _ in aclient.run(BODY):
            pass

    with pytest.raises(TruncatedStreamError):
        asyncio.run(run())
    assert len(seen) == 2
