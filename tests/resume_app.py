"""
The agent the resume tests cut connections to: deterministic (ids derived from the run
id, no clock), long enough to be cut many times, slow enough that a cut lands mid-run.

Served by ``uvicorn tests.resume_app:app`` in the two-worker tests, with the Redis event
log named by ``AGUIKIT_TEST_REDIS`` (or a memory log, ``AGUIKIT_TEST_LOG=memory``: the
fault campaign's one-worker set-up); the in-process tests build it with any log.  For the
tests of who starts a run and when a run nobody follows is cancelled, the workers serve
:class:`Endless` instead (``AGUIKIT_TEST_HANDLER=endless``) with ``resume_grace`` from
``AGUIKIT_TEST_GRACE``, and each handler start and cancellation leaves a file in
``AGUIKIT_TEST_MARKS``: the handler runs in another process, so files are what the test
can count (``AGUIKIT_TEST_HANDLER=background``: every run a background run, with a
Redis thread store on the same Redis).  ``AGUIKIT_TEST_LOG=memory`` serves from a
memory log instead of Redis, and
``AGUIKIT_TEST_LOSE_CANCELLATION=N`` wraps the log so that the follower delivering the
N-th event (0-based, over the process) hangs there and swallows its first cancellation
(its first ``AGUIKIT_TEST_LOSE_TIMES``; :class:`aguikit.server.faults.FaultyLog`).
``GET /tasks`` lists the worker's asyncio tasks beyond uvicorn's own (:func:`stray_tasks`):
the zombie count of the fault campaign.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aguikit.server import RunAgentInput, RunWriter, create_app
from aguikit.server.eventlog import EventLog, MemoryEventLog
from aguikit.server.faults import FaultyLog

TURNS = 8


async def scripted(run_input: RunAgentInput, run: RunWriter) -> None:
    """Text streamed word by word, a tool call with streamed arguments, state deltas."""
    rid = run_input.run_id
    pause = float(os.environ.get("AGUIKIT_TEST_PAUSE", "0.002"))
    for turn in range(TURNS):
        mid = f"{rid}-m{turn}"
        await run.emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        for word in range(6):
            await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"w{word} "})
            await asyncio.sleep(pause)
        await run.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
        call = f"{rid}-c{turn}"
        await run.emit(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call,
                "toolCallName": "lookup",
                "parentMessageId": mid,
            }
        )
        for piece in ('{"turn": ', str(turn), ', "q": "x', 'yz"}'):
            await run.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": piece})
            await asyncio.sleep(pause)
        await run.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        await run.set_state({"turn": turn, "seen": list(range(turn + 1))})


def _mark(run_id: str, what: str) -> None:
    marks = os.environ.get("AGUIKIT_TEST_MARKS")
    if marks:
        (Path(marks) / f"{run_id}.{what}.{os.getpid()}.{uuid.uuid4().hex}").touch()


class Endless:
    """
    A handler writing text until it is cancelled.  It records what an in-process test
    checks (its writers, whether and at which event it was cancelled) and marks its start
    and cancellation in ``AGUIKIT_TEST_MARKS`` for a test whose workers are processes.
    """

    def __init__(self) -> None:
        self.runs: list[RunWriter] = []
        self.cancelled = threading.Event()
        self.count_at_cancel = -1
        self.cancelled_at = 0.0
        """When the handler saw its cancellation (``time.time()``: comparable with
        another process's clock on the same machine, such as Node's ``Date.now()``)."""

    async def __call__(self, run_input: RunAgentInput, run: RunWriter) -> None:
        self.runs.append(run)
        _mark(run_input.run_id, "started")
        try:
            async with run.text_message() as message:
                while True:
                    await message.write("token ")
                    await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            self.cancelled_at = time.time()
            self.count_at_cancel = run._stream.count
            self.cancelled.set()
            _mark(run_input.run_id, "cancelled")
            raise

    @property
    def count(self) -> int:
        """Events the last run's writer has sent."""
        return self.runs[-1]._stream.count


def make_app(event_log: EventLog | None) -> Starlette:
    return create_app(scripted, path="/agent", event_log=event_log)


UVICORN_TASKS: Final = ("Server.", "LifespanOn.")
"""Qualified-name prefixes of the coroutines of uvicorn's own long-lived tasks."""


def stray_tasks() -> list[str]:
    """
    The asyncio tasks of this worker beyond uvicorn's server and lifespan tasks and the
    calling one, as ``repr`` strings: once every run has ended, each is a zombie (a
    follower, grace watch, cancel poll, heartbeat or reaper that outlived its run, or a
    request that never finished), counted directly rather than through its traces in
    the log.
    """
    current = asyncio.current_task()
    return [
        repr(task)
        for task in asyncio.all_tasks()
        if task is not current
        and not getattr(task.get_coro(), "__qualname__", "").startswith(UVICORN_TASKS)
    ]


async def _tasks(request: Request) -> JSONResponse:
    """``GET /tasks``: :func:`stray_tasks`, in the test app only."""
    return JSONResponse(stray_tasks())


def _from_env() -> Any:
    url = os.environ.get("AGUIKIT_TEST_REDIS")
    memory = os.environ.get("AGUIKIT_TEST_LOG") == "memory"
    if not url and not memory:
        return None
    log: EventLog
    if memory:
        log = MemoryEventLog()
    else:
        from aguikit.server.redis_log import RedisEventLog

        options: dict[str, Any] = {}
        if os.environ.get("AGUIKIT_TEST_PRODUCER_TTL"):
            options["producer_ttl"] = float(os.environ["AGUIKIT_TEST_PRODUCER_TTL"])
        log = RedisEventLog.from_url(url or "", **options)
    lose = os.environ.get("AGUIKIT_TEST_LOSE_CANCELLATION")
    if lose is not None:  # every follower hangs at that event and swallows a cancellation
        faulty = FaultyLog(log)
        times = int(os.environ.get("AGUIKIT_TEST_LOSE_TIMES", "1"))
        log = faulty.lose_cancellation("follow", after=int(lose), times=times)
    if os.environ.get("AGUIKIT_TEST_HANDLER") == "endless":
        grace = float(os.environ.get("AGUIKIT_TEST_GRACE", "30"))
        served = create_app(Endless(), path="/agent", event_log=log, resume_grace=grace)
    elif os.environ.get("AGUIKIT_TEST_HANDLER") == "background":  # tests/test_thread_faults.py
        from aguikit.server.redis_threads import RedisThreadStore

        threads = RedisThreadStore.from_url(url or "")
        served = create_app(
            Endless(), path="/agent", event_log=log, threads=threads, background=True
        )
    else:
        served = make_app(log)
    served.router.routes.append(Route("/tasks", _tasks, methods=["GET"]))
    return served


app = _from_env()
