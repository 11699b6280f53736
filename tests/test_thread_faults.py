"""
Background runs under faults, with real processes (issue 28, item 5; ``docs/threads.md``,
"When the worker running it dies").

* The uvicorn worker running a background run is SIGKILLed (two workers over one
  ``redis-server``): a page connecting afterwards through the other worker gets the
  thread restated, then the run ended with ``RUN_ERROR`` ``AGUI-E021`` within the
  producer lease plus one blocking read, never a hang; the connect records the failed
  run into the thread, so the next connect restates it without attaching.
* ``redis-server`` restarted (no persistence) in the middle of a background run: the run
  fails loudly (the handler's ``emit`` raises ``AGUI-E022``), the page reading it never
  gets a ``RUN_FINISHED``, and the thread Redis forgot is unknown (``404``), never a
  successful run.

Two workers racing to update one thread are
``tests/test_threads.py::test_two_workers_racing_on_one_thread_lose_no_update`` (two
processes, 100 runs each, compare-and-set folded again where they collided).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.redis_server import close_client, redis_process
from tests.servers import free_port, serve_asgi, uvicorn_workers

import aguikit
from aguikit.server import RunAgentInput, RunWriter, create_app
from aguikit.server.eventlog import EventLogError
from aguikit.transport.sse import iter_frames

pytest.importorskip("redis")

from redis.asyncio import Redis

from aguikit.server.redis_log import RedisEventLog
from aguikit.server.redis_threads import RedisThreadStore
from aguikit.server.threads import Thread

ROOT = Path(__file__).parent.parent
LEASE = 2.0
"""The producer lease the killed worker held (``producer_ttl``), in seconds."""
BLOCK = 2.0
"""The longest blocking read of the Redis log before it looks at the lease."""
BODY: dict[str, Any] = {
    "threadId": "t1",
    "runId": "r1",
    "messages": [{"id": "u1", "role": "user", "content": "go"}],
    "state": {},
    "tools": [],
}
CONNECT = {**BODY, "runId": "c1", "messages": []}
REPEATS = int(os.environ.get("AGUIKIT_THREAD_FAULT_REPEATS", "1"))
"""How many times each fault is staged: once in the test sessions, 20 times in
``nox -s faults``."""


def _events(content: bytes) -> list[dict[str, Any]]:
    return [json.loads(frame.data) for frame in iter_frames([content])]


async def _stored(url: str, thread_id: str) -> Thread | None:
    store = RedisThreadStore(Redis.from_url(url))
    try:
        return await store.get(thread_id)
    finally:
        await close_client(store.redis)


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_killed_workers_background_run_ends_with_producer_lost_for_a_connecting_page(
    tmp_path: Path, attempt: int
) -> None:
    """Worker A runs the background run and is SIGKILLed; the page connects through B:
    history, then the run, then ``RUN_ERROR`` ``AGUI-E021`` within the lease plus one
    blocking read (and the machine's load); the thread then records the run failed, and
    the next connect is the restating run alone."""
    with redis_process() as (redis_url, _):
        env = {
            **os.environ,
            "AGUIKIT_TEST_REDIS": redis_url,
            "AGUIKIT_TEST_HANDLER": "background",
            "AGUIKIT_TEST_PRODUCER_TTL": str(LEASE),
            "AGUIKIT_TEST_MARKS": str(tmp_path),
            "PYTHONPATH": os.pathsep.join([str(Path(aguikit.__file__).parent.parent), str(ROOT)]),
        }
        with uvicorn_workers("tests.resume_app:app", 2, env, ROOT) as workers:
            (a, producer), (b, _) = workers
            with httpx.Client(timeout=60) as client:
                # The page starts the run and reloads: its connection goes, the run does not.
                with client.stream("POST", a + "/agent", json=BODY) as started:
                    assert 200 == started.status_code
                    next(started.iter_bytes())
                time.sleep(0.3)
                assert not list(tmp_path.glob("r1.cancelled.*"))
                producer.send_signal(signal.SIGKILL)
                producer.wait(10)
                killed = time.monotonic()
                connected = client.post(b + "/agent/connect", json=CONNECT)
                waited = time.monotonic() - killed
                thread = None
                for _ in range(100):  # the connect records the end once it answered
                    thread = asyncio.run(_stored(redis_url, "t1"))
                    if thread is not None and thread.running is None:
                        break
                    time.sleep(0.05)
                again = client.post(b + "/agent/connect", json=CONNECT)
    print(
        f"\nSIGKILL of a background run's worker: RUN_ERROR reached the page {waited:.1f} s later"
    )
    events = _events(connected.content)
    assert 200 == connected.status_code
    assert ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"] == [
        e["type"] for e in events[:4]
    ]
    assert ("c1.history", "r1") == (events[0]["runId"], events[4]["runId"])
    assert ("RUN_ERROR", "AGUI-E021") == (events[-1]["type"], events[-1].get("code"))
    assert "RUN_FINISHED" not in [e["type"] for e in events[4:]]
    assert waited <= LEASE + BLOCK + 8  # the bound, and the load of a shared machine
    assert thread is not None and thread.running is None
    assert ("r1", "error", "AGUI-E021") == (
        thread.runs[-1].run_id,
        thread.runs[-1].status,
        thread.runs[-1].code,
    )
    assert "u1" in [m["id"] for m in thread.messages]  # the input the run started from
    restated = _events(again.content)
    assert ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"] == [
        e["type"] for e in restated
    ]


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_redis_restarted_mid_background_run_fails_it_loudly_and_nothing_says_it_succeeded(
    attempt: int,
) -> None:
    """``redis-server`` stopped and started again empty on its port while a background run
    streams to its page: the handler's ``emit`` raises ``EventLogError`` (``AGUI-E022``),
    the page's answer ends without ``RUN_FINISHED`` (bounded), and a connect finds the
    thread unknown (Redis kept nothing), never the run as a success."""
    told: list[EventLogError] = []

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        try:
            async with run.text_message() as message:
                for _ in range(100_000):
                    await message.write("token ")
                    await asyncio.sleep(0.01)
        except EventLogError as error:
            told.append(error)
            raise

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    app = create_app(
        handler,
        path="/agent",
        event_log=RedisEventLog(Redis.from_url(url, socket_timeout=2)),
        threads=RedisThreadStore(Redis.from_url(url, socket_timeout=2)),
        background=True,
    )
    with serve_asgi(app) as base, httpx.Client(timeout=60) as client:
        first = contextlib.ExitStack()
        first.enter_context(redis_process(port))
        with first, client.stream("POST", base + "/agent", json=BODY) as page:
            assert 200 == page.status_code
            chunks = page.iter_bytes()
            received = next(chunks)
            first.close()  # Redis stops mid-run, and comes back empty while it streams
            with redis_process(port):
                began = time.monotonic()
                received += b"".join(chunks)
                ended = time.monotonic() - began
                connected = client.post(base + "/agent/connect", json=CONNECT)
    events = _events(received)
    kinds = [e["type"] for e in events]
    print(f"\nRedis restarted mid-run: the page's answer ended {ended:.1f} s on with {kinds[-1]}")
    assert "RUN_FINISHED" not in kinds
    assert kinds[-1] in ("RUN_ERROR", "TEXT_MESSAGE_CONTENT"), kinds[-3:]
    assert kinds[-1] != "RUN_ERROR" or "AGUI-E022" == events[-1]["code"]
    assert ended < 30
    assert ["AGUI-E022"] == [error.rule for error in told]
    assert (404, "AGUI-E030") == (connected.status_code, connected.json()["code"])
