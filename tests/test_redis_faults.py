"""
The Redis event log under faults, against a real ``redis-server`` (issue 29, items 4-6).

* A silence longer than redis-py's socket timeout (a slow tool call) cuts no follower.
* A producer that dies is visible: its lease lapses and a follower ends the run with
  ``RUN_ERROR`` ``AGUI-E021``, for real with two uvicorn workers, the producing one
  SIGKILLed while a client follows through the other.
* A failed append fails the run loudly: the handler is told at its ``emit``, the run ends
  with ``RUN_ERROR`` ``AGUI-E022`` numbered right after the last logged event (no hole),
  whether Redis lost the stream, stalled (``SIGSTOP``) or restarted empty.
* An append cancelled after Redis carried it out (its reply lost to the cancellation)
  spends its number: the run goes on, and ends as a cancelled run does, its ids whole.
* A reader's heartbeat outlives a failed refresh; a request the log cannot answer is a
  ``503`` problem document.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.redis_server import WithholdingProxy, close_client, redis_process
from tests.servers import free_port, uvicorn_workers

import aguikit
from aguikit.server import RunAgentInput, RunWriter, create_app
from aguikit.server.eventlog import EventLogError
from aguikit.transport.sse import iter_frames

pytest.importorskip("redis")

from redis.asyncio import Redis

from aguikit.server.redis_log import DEFAULT_PRODUCER_TTL, RedisEventLog

ROOT = Path(__file__).parent.parent
STARTED = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}


def _text(n: int) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"w{n}"}


@pytest.fixture
def redis_url() -> Iterator[str]:
    with redis_process() as (url, _):
        yield url


async def _follow(log: RedisEventLog, run_id: str, after: str | None = None) -> list[Any]:
    return [(event_id, wire) async for event_id, wire in log.follow(run_id, after)]


def test_a_silence_longer_than_the_socket_timeout_cuts_no_follower(redis_url: str) -> None:
    """Item 4: ten followers through a 12 s pause, with redis-py's 5 s socket timeout set
    explicitly (the default of redis-py 8): every one gets every event and the end."""

    async def scenario() -> list[list[Any]]:
        producer = RedisEventLog(Redis.from_url(redis_url, socket_timeout=5), prefix="q:")
        follower = RedisEventLog(Redis.from_url(redis_url, socket_timeout=5), prefix="q:")
        assert follower.block_ms < 5000 / 2 + 1
        assert await producer.claim("r")
        await producer.append("r", STARTED)
        followers = [asyncio.create_task(_follow(follower, "r")) for _ in range(10)]
        await asyncio.sleep(12)  # a slow tool call: nothing is written
        await producer.append("r", _text(1))
        await producer.end("r")
        return await asyncio.wait_for(asyncio.gather(*followers), 30)

    for seen in asyncio.run(scenario()):
        assert [event_id for event_id, _ in seen] == ["1", "2"]


def test_a_lapsed_lease_ends_the_run_with_producer_lost_and_fences_the_producer(
    redis_url: str,
) -> None:
    """Item 5, in one process: the producer stops renewing (as a SIGKILLed worker does);
    within the lease plus a blocking read its follower gets RUN_ERROR AGUI-E021, and a
    producer that was only stalled finds its next number taken: its append raises."""

    async def scenario() -> None:
        producer = RedisEventLog.from_url(redis_url, prefix="l:", producer_ttl=1.0)
        follower = RedisEventLog.from_url(redis_url, prefix="l:", producer_ttl=1.0)
        assert await producer.claim("r")
        await producer.append("r", STARTED)
        await producer.append("r", _text(1))
        producer._leases["r"].cancel()  # the producer's renewals stop, as in a dead worker
        began = time.monotonic()
        seen = await asyncio.wait_for(_follow(follower, "r", "1"), 15)
        waited = time.monotonic() - began
        assert [(i, w["type"], w.get("code")) for i, w in seen] == [
            ("2", "TEXT_MESSAGE_CONTENT", None),
            ("3", "RUN_ERROR", "AGUI-E021"),
        ]
        assert waited < 1.0 + follower.block_ms / 1000 + 3
        with pytest.raises(EventLogError) as refused:
            await producer.append("r", _text(2))
        assert refused.value.rule == "AGUI-E022"
        await producer.end("r")  # the run already ended: nothing more is written
        assert [i for i, _ in await follower.read("r")] == ["1", "2", "3"]
        assert not await follower.resumable("r", "3")

    asyncio.run(scenario())


def test_a_silent_producer_keeps_its_lease(redis_url: str) -> None:
    """The lease is renewed by a task of its own: a handler silent for three leases is
    not declared dead."""

    async def scenario() -> list[Any]:
        producer = RedisEventLog.from_url(redis_url, prefix="s:", producer_ttl=0.6)
        follower = RedisEventLog.from_url(redis_url, prefix="s:", producer_ttl=0.6)
        assert await producer.claim("r")
        await producer.append("r", STARTED)
        following = asyncio.create_task(_follow(follower, "r"))
        await asyncio.sleep(2.0)
        await producer.append("r", _text(1))
        await producer.end("r")
        return await asyncio.wait_for(following, 10)

    assert [w["type"] for _, w in asyncio.run(scenario())] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_CONTENT",
    ]


def test_a_producer_back_before_anyone_ended_its_run_takes_its_lease_back(
    redis_url: str,
) -> None:
    """A lease that lapsed while nobody followed (a stall longer than the lease) is taken
    back by the producer's next renewal: the run goes on, and a follower later sees it
    whole."""

    async def scenario() -> list[Any]:
        producer = RedisEventLog.from_url(redis_url, prefix="b:", producer_ttl=0.6)
        assert await producer.claim("r")
        await producer.append("r", STARTED)
        await producer.redis.delete(producer.lease_prefix + "r")  # as if it expired
        await asyncio.sleep(0.6)  # a renewal or two
        assert await producer.redis.get(producer.lease_prefix + "r") is not None
        await producer.append("r", _text(1))
        await producer.end("r")
        return await asyncio.wait_for(_follow(producer, "r"), 10)

    assert [w["type"] for _, w in asyncio.run(scenario())] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_CONTENT",
    ]


def test_a_failed_append_tells_the_handler_and_ends_the_run_without_a_hole(
    redis_url: str,
) -> None:
    """Item 6: the stream vanishes under the run (Redis restarted empty, or flushed):
    the append raises at the handler, later ones too, and the end writes RUN_ERROR
    AGUI-E022 numbered right after the last event a follower saw."""

    async def scenario() -> None:
        log = RedisEventLog.from_url(redis_url, prefix="h:")
        assert await log.claim("r")
        await log.append("r", STARTED)
        await log.append("r", _text(1))
        await log.redis.delete("h:r")
        with pytest.raises(EventLogError):
            await log.append("r", _text(2))
        with pytest.raises(EventLogError):  # and every later one: no event after a hole
            await log.append("r", _text(3))
        await log.end("r")
        seen = await asyncio.wait_for(_follow(log, "r", "2"), 10)
        assert [(i, w["type"], w.get("code")) for i, w in seen] == [("3", "RUN_ERROR", "AGUI-E022")]
        assert not await log.resumable("r", "3")

    asyncio.run(scenario())


def test_a_stalled_redis_fails_the_run_loudly_and_a_readers_heartbeat_survives(
    redis_url: str,
) -> None:
    """Redis stalled (SIGSTOP) past the socket timeout mid-run: the handler's append
    raises, the reader's heartbeat and the follower ride it out, and once Redis is back
    the run ends with RUN_ERROR AGUI-E022, the follower still counted and delivered it."""
    with redis_process() as (url, process):

        async def scenario() -> None:
            options: dict[str, Any] = {"prefix": "x:", "reader_ttl": 1.5}
            log = RedisEventLog(Redis.from_url(url, socket_timeout=0.5), **options)
            reader = RedisEventLog(Redis.from_url(url, socket_timeout=0.5), **options)
            assert await log.claim("r")
            await log.append("r", STARTED)
            following = asyncio.create_task(_follow(reader, "r"))
            await asyncio.sleep(0.3)
            process.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(EventLogError):
                    await log.append("r", _text(1))
                await asyncio.sleep(1.0)  # the heartbeat's refresh fails meanwhile
            finally:
                process.send_signal(signal.SIGCONT)
            await asyncio.sleep(1.2)  # a refresh after Redis came back
            assert await reader.readers("r") == 1
            await log.end("r")
            seen = await asyncio.wait_for(following, 15)
            # The timed-out write may still have reached Redis once it resumed (redis-py
            # cannot know): the run then ends right after it.  Either way, no hole.
            assert [i for i, _ in seen] == [str(n) for n in range(1, len(seen) + 1)]
            assert [w["type"] for _, w in seen][:: len(seen) - 1] == ["RUN_STARTED", "RUN_ERROR"]
            assert seen[-1][1]["code"] == "AGUI-E022"
            assert len(seen) in (2, 3)

        asyncio.run(scenario())


def test_a_redis_restarted_empty_mid_run_fails_it_loudly() -> None:
    """Redis restarted without persistence mid-run: the run's next append fails (the
    stream is not re-created without its beginning), the end writes RUN_ERROR; a resume
    from before it is refused rather than told the run succeeded."""
    port = free_port()

    async def produce(url: str) -> RedisEventLog:
        log = RedisEventLog.from_url(url, prefix="z:")
        assert await log.claim("r")
        await log.append("r", STARTED)
        return log

    async def after_restart(log: RedisEventLog) -> list[Any]:
        with pytest.raises(EventLogError):
            for _ in range(3):  # the first may meet the broken connection, then the void
                await log.append("r", _text(1))
        await log.end("r")
        assert not await log.resumable("r", "0")
        return await log.read("r")

    loop = asyncio.new_event_loop()
    try:
        with redis_process(port) as (url, _):
            log = loop.run_until_complete(produce(url))
        with redis_process(port):
            logged = loop.run_until_complete(after_restart(log))
    finally:
        loop.close()
    assert [(i, w["type"], w.get("code")) for i, w in logged] == [("2", "RUN_ERROR", "AGUI-E022")]


def test_a_request_the_log_cannot_answer_is_a_503_problem() -> None:
    """Redis down: a start and a resume get 503 with a problem document, never a 500."""

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        await run.emit(_text(1))

    dead = f"redis://127.0.0.1:{free_port()}/0"
    app = create_app(handler, path="/agent", event_log=RedisEventLog.from_url(dead))

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://a") as client:
            body = {"threadId": "t", "runId": "r", "messages": []}
            return [
                await client.post("/agent", json=body, headers=headers)
                for headers in ({}, {"Last-Event-ID": "3"})
            ]

    for answer in asyncio.run(scenario()):
        assert answer.status_code == 503
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.json()["code"] == "AGUI-E022"


def test_sigkill_of_the_producing_worker_ends_the_run_for_its_followers(
    redis_url: str, tmp_path: Path
) -> None:
    """Item 5 for real: two uvicorn workers on one Redis; the run starts on worker A, a
    client follows it through worker B; A is SIGKILLed mid-run.  With the default lease
    the follower gets RUN_ERROR AGUI-E021 within the documented bound, and a later
    resume through B gets it too."""
    env = {
        **os.environ,
        "AGUIKIT_TEST_REDIS": redis_url,
        "AGUIKIT_TEST_HANDLER": "endless",
        "AGUIKIT_TEST_MARKS": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(Path(aguikit.__file__).parent.parent), str(ROOT)]),
    }
    body = {"threadId": "t", "runId": "killed", "messages": []}
    with uvicorn_workers("tests.resume_app:app", 2, env, ROOT) as workers:
        (a, producer), (b, _) = workers
        with (
            httpx.Client(timeout=60) as client,
            client.stream("POST", a + "/agent", json=body) as started,
        ):
            assert started.status_code == 200
            with client.stream(
                "POST", b + "/agent", json=body, headers={"Last-Event-ID": "1"}
            ) as followed:
                assert followed.status_code == 200
                chunks = followed.iter_bytes()
                next(chunks)
                producer.send_signal(signal.SIGKILL)
                producer.wait(10)
                killed = time.monotonic()
                received = b"".join(chunks)
                waited = time.monotonic() - killed
        frames = list(iter_frames([received]))
        print(f"\nSIGKILL of the producer: RUN_ERROR reached the follower {waited:.1f} s later")
        last = json.loads(frames[-1].data)
        assert last["type"] == "RUN_ERROR" and last["code"] == "AGUI-E021"
        assert waited <= DEFAULT_PRODUCER_TTL + 2 + 5  # the bound, and the machine's load
        assert waited <= 30
        resumed = httpx.post(
            b + "/agent", json=body, headers={"Last-Event-ID": frames[-2].id or "1"}, timeout=30
        )
        assert json.loads(list(iter_frames([resumed.content]))[-1].data)["code"] == "AGUI-E021"


def test_the_handler_is_told_at_its_emit_and_the_client_gets_the_terminal_event(
    redis_url: str,
) -> None:
    """Item 6 through the endpoint: the log loses the run under the handler; its emit
    raises EventLogError (rule AGUI-E022), and the answer ends with RUN_ERROR AGUI-E022
    right after the last event logged, not a clean end of a truncated run."""
    log = RedisEventLog(Redis.from_url(redis_url, socket_timeout=0.3), prefix="e:")
    told: list[BaseException] = []

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        await run.emit({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
        # Redis holds every write for a second: the next append times out.
        await log.redis.execute_command("CLIENT", "PAUSE", 1000, "WRITE")
        try:
            await run.emit(_text(1))
        except EventLogError as exc:
            told.append(exc)
            raise

    app = create_app(handler, path="/agent", event_log=log)

    async def scenario() -> bytes:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://a") as client:
            body = {"threadId": "t", "runId": "told", "messages": []}
            answer = await client.post("/agent", json=body)
            return answer.content

    frames = list(iter_frames([asyncio.run(scenario())]))
    assert [type(exc).__name__ for exc in told] == ["EventLogError"]
    kinds = [(f.id, json.loads(f.data)["type"]) for f in frames]
    # The timed-out write may still be carried out once Redis resumes: then it is logged,
    # and the run ends right after it.  Either way the ids have no hole.
    assert kinds[:2] == [("1", "RUN_STARTED"), ("2", "TEXT_MESSAGE_START")]
    assert kinds[2:] in (
        [("3", "RUN_ERROR")],
        [("3", "TEXT_MESSAGE_CONTENT"), ("4", "RUN_ERROR")],
    )
    assert json.loads(frames[-1].data)["code"] == "AGUI-E022"


def test_an_append_cancelled_after_redis_carried_it_out_spends_its_number(
    redis_url: str,
) -> None:
    """Issue 29: the handler is cancelled while its append's XADD has reached Redis but
    the reply has not come back (a proxy holds it).  The cancelled run then ends as the
    endpoint ends one (the open message closed, RUN_FINISHED with the cancelled outcome),
    and its log holds every event once, numbered 1, 2, 3... with no AGUI-E022 and no
    number used twice."""
    finished = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
    cancelled = {**finished, "outcome": {"type": "cancelled"}}

    async def scenario() -> list[Any]:
        direct = Redis.from_url(redis_url)
        async with WithholdingProxy(redis_url) as proxy:
            log = RedisEventLog.from_url(proxy.url, prefix="c:")
            assert await log.claim("r")
            await log.append("r", STARTED)
            await log.append("r", {"type": "TEXT_MESSAGE_START", "messageId": "m"})
            proxy.withhold()
            appending = asyncio.create_task(log.append("r", _text(1)))
            await asyncio.wait_for(proxy.withheld.wait(), 10)
            assert await direct.xlen("c:r") == 4  # claim, 2 events, and the unanswered one
            appending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await appending
            proxy.release()
            await log.append("r", {"type": "TEXT_MESSAGE_END", "messageId": "m"})
            await log.append("r", cancelled)
            await log.end("r")
            seen = await asyncio.wait_for(_follow(log, "r"), 10)
            await close_client(log.redis)
        await close_client(direct)
        return seen

    seen = asyncio.run(scenario())
    assert [(i, w["type"]) for i, w in seen] == [
        ("1", "RUN_STARTED"),
        ("2", "TEXT_MESSAGE_START"),
        ("3", "TEXT_MESSAGE_CONTENT"),
        ("4", "TEXT_MESSAGE_END"),
        ("5", "RUN_FINISHED"),
    ]
    assert seen[-1][1]["outcome"] == {"type": "cancelled"}


def test_sixty_concurrent_runs_are_logged_whole_in_order_in_batches(redis_url: str) -> None:
    """Issue 28 item 4: 60 runs written at once through one log (the appends of a worker's
    concurrent runs batched into shared round trips): every run's log, read back and
    followed, is complete and in order, ended, with no RUN_ERROR; and Redis read far fewer
    requests than events were logged (``total_reads_processed``, Redis's own count)."""
    runs, events = 60, 40

    async def produce(log: RedisEventLog, run_id: str) -> None:
        assert await log.claim(run_id)
        await log.append(run_id, {**STARTED, "runId": run_id})
        for n in range(events):
            await log.append(run_id, _text(n))
            if n % 7 == int(run_id[1:]) % 7:
                await asyncio.sleep(0)  # the runs interleave unevenly
        await log.end(run_id)

    async def reads(client: Redis) -> int:
        return int((await client.info("stats"))["total_reads_processed"])

    async def scenario() -> tuple[int, list[list[Any]], list[list[Any]]]:
        direct = Redis.from_url(redis_url)
        log = RedisEventLog.from_url(redis_url, prefix="n:")
        ids = [f"r{k}" for k in range(runs)]
        before = await reads(direct)
        await asyncio.wait_for(asyncio.gather(*(produce(log, i) for i in ids)), 30)
        spent = await reads(direct) - before - 1  # the second INFO is one read
        stored = [await log.read(i) for i in ids]
        followed = [await asyncio.wait_for(_follow(log, i), 10) for i in ids]
        await close_client(log.redis)
        await close_client(direct)
        return spent, stored, followed

    spent, stored, followed = asyncio.run(scenario())
    expected = ["RUN_STARTED", *[f"w{n}" for n in range(events)]]
    for seen in (*stored, *followed):
        assert [i for i, _ in seen] == [str(n) for n in range(1, events + 2)]
        assert [w.get("delta", w["type"]) for _, w in seen] == expected
    logged = runs * (events + 2)  # with the end entry; the claims are one request each
    print(f"\n{logged} entries of {runs} runs in {spent} requests: {spent / logged:.3f} per entry")
    assert spent < logged / 4


def test_a_write_whose_answer_never_comes_fails_the_run_within_the_lease(redis_url: str) -> None:
    """Redis carries a batch out but its answer never comes back (the proxy holds it):
    the append raises within ``producer_ttl`` instead of hanging the worker's writes,
    and the run ends with RUN_ERROR AGUI-E022 right after what Redis holds."""

    async def scenario() -> tuple[float, list[Any]]:
        async with WithholdingProxy(redis_url) as proxy:
            log = RedisEventLog.from_url(proxy.url, prefix="w:", producer_ttl=1.0)
            assert await log.claim("r")
            await log.append("r", STARTED)
            proxy.withhold()
            began = time.monotonic()
            with pytest.raises(EventLogError):
                await asyncio.wait_for(log.append("r", _text(1)), 10)
            waited = time.monotonic() - began
            proxy.release()
            await log.end("r")
            seen = await asyncio.wait_for(_follow(log, "r"), 10)
            await close_client(log.redis)
        return waited, seen

    waited, seen = asyncio.run(scenario())
    assert 1.0 <= waited < 3
    assert [(i, w["type"], w.get("code")) for i, w in seen] == [
        ("1", "RUN_STARTED", None),
        ("2", "TEXT_MESSAGE_CONTENT", None),
        ("3", "RUN_ERROR", "AGUI-E022"),
    ]


def test_a_log_from_a_url_serves_more_followers_than_redis_pys_default_pool(
    redis_url: str,
) -> None:
    """Each follower holds a pooled connection for its blocking read, and redis-py 8's
    default pool has 100: the bench's 40 and 100 concurrent streams lost runs to it
    (``MaxConnectionsError`` at the writes).  ``from_url`` sizes its pool for
    ``MAX_CONNECTIONS``: 120 followers of one run each get every event and the end."""

    async def scenario() -> list[list[Any]]:
        log = RedisEventLog.from_url(redis_url, prefix="p:")
        assert await log.claim("r")
        await log.append("r", STARTED)
        following = [asyncio.create_task(_follow(log, "r")) for _ in range(120)]
        await asyncio.sleep(0.3)  # every follower in its blocking read
        for n in range(3):
            await log.append("r", _text(n))
        await log.end("r")
        seen = await asyncio.wait_for(asyncio.gather(*following), 20)
        await close_client(log.redis)
        return seen

    for seen in asyncio.run(scenario()):
        assert [i for i, _ in seen] == ["1", "2", "3", "4"]


def test_a_follower_on_the_producing_worker_is_handed_the_events_without_reading_redis(
    redis_url: str,
) -> None:
    """A follower on the worker that writes its run (the starting connection, always) is
    handed each batch by the writer task once Redis acknowledged it: 300 events reach it
    whole and in order with a handful of XREADs (one per event before), and a follower
    joining late catches up from Redis first."""

    async def xreads(client: Redis) -> int:
        stats = await client.info("commandstats")
        return int(stats.get("cmdstat_xread", {}).get("calls", 0))

    async def scenario() -> tuple[int, list[Any], list[Any]]:
        direct = Redis.from_url(redis_url)
        log = RedisEventLog.from_url(redis_url, prefix="t:")
        assert await log.claim("r")
        await log.append("r", STARTED)
        before = await xreads(direct)
        first = asyncio.create_task(_follow(log, "r"))
        for n in range(300):
            await log.append("r", _text(n))
            if n == 150:
                late = asyncio.create_task(_follow(log, "r", "100"))
        await log.end("r")
        seen = await asyncio.wait_for(asyncio.gather(first, late), 10)
        spent = await xreads(direct) - before
        await close_client(log.redis)
        await close_client(direct)
        return spent, seen[0], seen[1]

    spent, first, late = asyncio.run(scenario())
    assert [i for i, _ in first] == [str(n) for n in range(1, 302)]
    assert [w.get("delta") for _, w in first[1:]] == [f"w{n}" for n in range(300)]
    assert [i for i, _ in late] == [str(n) for n in range(101, 302)]
    assert spent <= 6


def test_a_tapped_follower_gets_the_failed_runs_end_from_redis(redis_url: str) -> None:
    """A write of the run fails under a follower on the producing worker (the stream
    vanished): the follower is sent back to Redis and gets RUN_ERROR AGUI-E022 right after
    the last event it was handed, never a silence or a hole."""

    async def scenario() -> list[Any]:
        log = RedisEventLog.from_url(redis_url, prefix="f:")
        assert await log.claim("r")
        await log.append("r", STARTED)
        following = asyncio.create_task(_follow(log, "r"))
        await log.append("r", _text(1))
        await asyncio.sleep(0.1)  # handed over
        await log.redis.delete("f:r")
        with pytest.raises(EventLogError):
            await log.append("r", _text(2))
        await log.end("r")
        seen = await asyncio.wait_for(following, 10)
        await close_client(log.redis)
        return seen

    seen = asyncio.run(scenario())
    assert [(i, w["type"], w.get("code")) for i, w in seen] == [
        ("1", "RUN_STARTED", None),
        ("2", "TEXT_MESSAGE_CONTENT", None),
        ("3", "RUN_ERROR", "AGUI-E022"),
    ]
