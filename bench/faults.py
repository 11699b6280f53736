"""
The fault campaign of issue 29 (``nox -s faults``; opt-in: minutes, not a unit test).

Random connection cuts over many runs of tests/resume_app.py's scripted agent (about 120
events each), served by real uvicorn processes, in three set-ups: the memory log (one
worker), Redis with one worker, Redis with two workers and every reconnect landing on the
other one.  The client is :class:`aguikit.Agent` resuming through a transport that cuts
each answer at a seeded random byte (tests/test_resume.py ``CuttingTransport``).

It reports, per set-up: runs, cuts, requests, runs equal to the uninterrupted one, hangs
(a run not done within 60 s), the readers and producer leases still in Redis once every
run ended (zombie followers or producers), the asyncio tasks still in the workers then
(counted in each worker, ``GET /tasks`` of tests/resume_app.py: every follower, watch,
heartbeat and reaper must have ended with its run), and how long each worker took to exit
on SIGTERM with a client still reading a run (at most 5 s).  Exits non-zero if any target is
missed.  ``--runs`` and ``--cuts`` scale it (defaults: 100 runs, at least 1,000 cuts, per
set-up); the redis-py in the environment is the one tested (``nox -s faults`` runs both
ends of the range).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.redis_server import redis_server  # noqa: E402
from tests.servers import uvicorn_workers  # noqa: E402
from tests.test_resume import CuttingTransport, _result  # noqa: E402

import aguikit  # noqa: E402
from aguikit import Agent  # noqa: E402

HANG: float = 60.0
SIGTERM_BOUND: float = 5.0
SETTLE: float = 5.0


@contextlib.contextmanager
def _setup(name: str, redis: str | None) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(aguikit.__file__).parent.parent), str(ROOT)]),
    }
    if redis is None:
        env["AGUIKIT_TEST_LOG"] = "memory"
    else:
        env["AGUIKIT_TEST_REDIS"] = redis
    count = 2 if name == "redis-2-workers" else 1
    with uvicorn_workers("tests.resume_app:app", count, env, ROOT) as workers:
        yield workers


async def _one(url: str, transport: httpx.AsyncBaseTransport | None) -> str | None:
    agent = Agent(url, transport=transport, max_reconnects=50, backoff=0.001, max_backoff=0.02)
    try:
        result = await asyncio.wait_for(agent.run(), HANG)
    except TimeoutError:
        return None
    return _result(agent, result.run_id)


def _leftovers(redis: str) -> tuple[int, int]:
    """Readers still counted and producer leases still held, across every run."""
    import redis as redis_py

    client = redis_py.Redis.from_url(redis)
    now = float(client.time()[0])
    readers = sum(client.zcount(key, now, "+inf") for key in client.scan_iter("aguikit:readers:*"))
    leases = sum(1 for _ in client.scan_iter("aguikit:lease:*"))
    return readers, leases


def _stray_tasks(urls: list[str]) -> list[str]:
    """The asyncio tasks left in the workers once every run ended (tests/resume_app.py's
    ``GET /tasks``: beyond uvicorn's own), looked at for up to :data:`SETTLE` seconds so
    that a task the endpoint reaps (a lost cancellation, cancelled again every second)
    may stop: what is left then is a zombie."""
    deadline = time.monotonic() + SETTLE
    while True:
        stray = [task for url in urls for task in httpx.get(url + "/tasks").json()]
        if not stray or time.monotonic() > deadline:
            return stray
        time.sleep(0.5)


def _sigterm(workers: list[tuple[str, subprocess.Popen[bytes]]]) -> float:
    """Seconds the slowest worker took to exit on SIGTERM with a client mid-run."""
    slowest = 0.0
    for url, process in workers:
        body = {"threadId": "t", "runId": f"term-{random.random()}", "messages": []}
        with (
            httpx.Client(timeout=30) as client,
            client.stream("POST", url + "/agent", json=body) as answer,
        ):
            next(answer.iter_bytes())
            began = time.monotonic()
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            slowest = max(slowest, time.monotonic() - began)
    return slowest


def campaign(name: str, redis: str | None, runs: int, cuts: int, seed: int) -> dict[str, Any]:
    with _setup(name, redis) as workers:
        urls = [url for url, _ in workers]
        reference = asyncio.run(_one(urls[0] + "/agent", None))
        transport = CuttingTransport(urls, random.Random(seed), rate=0.9, max_cut=1500)

        async def all_runs() -> list[str | None]:
            done: list[str | None] = []
            while len(done) < runs or transport.cuts < cuts:
                done.append(await _one(urls[0] + "/agent", transport))
            return done

        began = time.monotonic()
        results = asyncio.run(all_runs())
        seconds = time.monotonic() - began
        time.sleep(1.0)  # the last readers' removals land
        readers, leases = _leftovers(redis) if redis else (0, 0)
        stray = _stray_tasks(urls)
        for task in stray[:5]:
            print(f"  zombie task: {task}", flush=True)
        exit_seconds = _sigterm(workers)
    return {
        "set-up": name,
        "runs": len(results),
        "cuts": transport.cuts,
        "requests": transport.requests,
        "equal": sum(r == reference for r in results),
        "hangs": sum(r is None for r in results),
        "readers left": readers,
        "leases left": leases,
        "tasks left": len(stray),
        "SIGTERM exit s": round(exit_seconds, 2),
        "seconds": round(seconds, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--cuts", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--setups", default="memory,redis-1-worker,redis-2-workers")
    args = parser.parse_args()
    import redis as redis_py

    print(f"redis-py {redis_py.__version__}, Python {sys.version.split()[0]}")
    failed = False
    with redis_server_or_none() as redis:
        for name in args.setups.split(","):
            url = None if name == "memory" else redis
            row = campaign(name, url, args.runs, args.cuts, args.seed)
            print("  ".join(f"{key}: {value}" for key, value in row.items()), flush=True)
            failed |= (
                row["equal"] != row["runs"]
                or row["hangs"] > 0
                or row["readers left"] > 0
                or row["leases left"] > 0
                or row["tasks left"] > 0
                or row["SIGTERM exit s"] > SIGTERM_BOUND
            )
    print("FAILED: a target was missed" if failed else "every target held")
    return 1 if failed else 0


@contextlib.contextmanager
def redis_server_or_none() -> Iterator[str]:
    os.environ.setdefault("AGUIKIT_REQUIRE_REDIS", "1")  # a campaign without Redis is no proof
    with tempfile.TemporaryDirectory(), redis_server() as url:
        yield url


if __name__ == "__main__":
    sys.exit(main())
