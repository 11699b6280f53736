"""
Stop stops: the time from a client's stop to the handler's cancellation, median of
``--runs`` runs, against a real uvicorn on loopback (an endless handler writing a token
every 5 ms).

* the official TypeScript client (``@ag-ui/client`` 1.0.0 ``HttpAgent``), ``abortRun()``
  after four events: against the default endpoint (connection-bound, the hang-up is the
  stop); against a resumable one (``event_log=MemoryEventLog()``) with the cancel request
  sent after ``abortRun()``; and against a resumable one it only hangs up on, which ends
  the run one ``resume_grace`` window later (``--grace``, 2 s here; 30 s by default);
* aguikit's ``Agent.abort()`` against a resumable endpoint (it sends the cancel request).

The clock is each process's wall clock (Node's ``Date.now()`` and Python's
``time.time()``, the same machine), so a figure is good to a millisecond or so.

It prints numbers and asserts nothing: timings depend on the machine.  Needs Node and
``tests/node`` installed (``npm ci`` there), as the test suite does.

Usage::

    python bench/bench_stop.py [--runs 10] [--grace 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.node_client import run_http_agent  # noqa: E402
from tests.resume_app import Endless  # noqa: E402
from tests.servers import serve_asgi  # noqa: E402

from aguikit import Agent  # noqa: E402
from aguikit.server import MemoryEventLog, create_app  # noqa: E402


def _official(grace: float | None, script: dict[str, Any], runs: int) -> list[float]:
    """Seconds from ``abortRun()`` to the handler's cancellation, one per run, against
    the default endpoint (``grace`` ``None``) or a resumable one with that grace."""
    delays = []
    for n in range(runs):
        endless = Endless()
        options: dict[str, Any] = {}
        if grace is not None:
            options = {"event_log": MemoryEventLog(), "resume_grace": grace}
        with serve_asgi(create_app(endless, path="/agent", **options)) as base:
            out = run_http_agent(base + "/agent", {"threadId": f"t{n}", **script})
            if not endless.cancelled.wait(120):
                raise SystemExit("the handler was never cancelled")
        delays.append(endless.cancelled_at - out["abortedAt"] / 1000)
    return delays


def _agent_abort(runs: int) -> list[float]:
    """Seconds from ``Agent.abort()`` to the handler's cancellation, one per run."""
    delays = []
    for _ in range(runs):
        endless = Endless()
        app = create_app(endless, path="/agent", event_log=MemoryEventLog(), resume_grace=30)
        with serve_asgi(app) as base:

            async def abort(url: str = base + "/agent", handler: Endless = endless) -> float:
                agent = Agent(url)
                task = asyncio.create_task(agent.run())
                while not handler.runs or handler.count < 4:
                    await asyncio.sleep(0.005)
                stopped = time.time()
                agent.abort()
                await task
                return stopped

            stopped = asyncio.run(abort())
            if not endless.cancelled.wait(120):
                raise SystemExit("the handler was never cancelled")
        delays.append(endless.cancelled_at - stopped)
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--grace", type=float, default=2.0, help="resume_grace of the hang-up row")
    options = parser.parse_args()
    stop: dict[str, Any] = {"abortAfterEvents": 4}
    runs, grace = options.runs, options.grace
    rows = [
        ("HttpAgent.abortRun(), default endpoint", _official(None, stop, runs)),
        (
            "HttpAgent.abortRun() + cancel request, resumable",
            _official(30.0, {**stop, "cancelOnAbort": True}, runs),
        ),
        (f"HttpAgent.abortRun() only, resumable, grace {grace:g} s", _official(grace, stop, runs)),
        ("Agent.abort(), resumable", _agent_abort(runs)),
    ]
    print(f"From a client's stop to the handler's cancellation, {options.runs} runs each")
    for what, delays in rows:
        print(
            f"  {what:<58} median {statistics.median(delays) * 1e3:8.1f} ms, "
            f"max {max(delays) * 1e3:8.1f} ms"
        )


if __name__ == "__main__":
    main()
