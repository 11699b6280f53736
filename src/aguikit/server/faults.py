"""
Fault injection for event logs: wrap any :class:`~aguikit.server.eventlog.EventLog` so
that it stalls, fails, loses a cancellation or drops its connection at a chosen point,
and watch what the endpoint does about it.

A server's failure modes live in the seams between its parts: a Redis client that loses
a cancellation (redis-py's ``asyncio.wait_for`` race on Python 3.11), a pooled connection
that breaks under a blocking read, an append that fails once, a reader's heartbeat that
errors.  Waiting for them in production, or provoking them by hand with ``SIGSTOP``, makes
a test slow and rare; a wrapper that produces each one on cue, identically over the memory
log and the Redis log, makes it a unit test::

    log = FaultyLog(MemoryEventLog()).lose_cancellation("follow", after=5)
    app = create_app(handler, event_log=log)

Every fault is planned against one operation of the log (``claim``, ``append``, ``end``,
``resumable``, ``read``, ``readers`` (what a run's grace watch looks at: its heartbeat),
``follow`` (each event a follower delivers, by ``follow_frames`` too)), fires on the
``after``-th call of it (0-based, counted over the wrapper's lifetime) and on the
``times - 1`` calls that follow, and is recorded in :attr:`FaultyLog.fired`.  What it
deliberately does not do: change the wrapped log's behaviour in any other way, or fake its
data; the faults are the real exceptions and waits a failing dependency produces.

It is a test tool: nothing in :mod:`aguikit.server` uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Final, Literal, get_args

import attrs

from .eventlog import EventLog, Owner

__all__ = ["FaultyLog", "Operation"]

Operation = Literal[
    "claim",
    "append",
    "end",
    "resumable",
    "read",
    "readers",
    "follow",
    "owner",
    "cancel",
    "cancel_requested",
    "forget",
]
"""The log operations a fault can be planned against (``follow``: each delivered event)."""

_OPERATIONS: Final = frozenset(get_args(Operation))


@attrs.frozen
class _Plan:
    operation: str
    kind: Literal["stall", "fail", "lose", "drop"]
    after: int
    times: int
    seconds: float = 0.0
    error: Callable[[], BaseException] | None = None
    swallow: int = 1

    def due(self, call: int) -> bool:
        return self.after <= call < self.after + self.times


class FaultyLog:
    """
    An :class:`~aguikit.server.eventlog.EventLog` that forwards to ``log`` and injects the
    faults planned on it (each planning method returns the wrapper, so plans chain).

    Args:
        log: The log to wrap: a :class:`~aguikit.server.eventlog.MemoryEventLog`, a
            :class:`~aguikit.server.redis_log.RedisEventLog`, any other.

    The wrapper has ``follow_frames`` exactly when ``log`` has it, so the endpoint takes
    the same path over the wrapper as over the log; its ``follow`` faults still fire at
    the event they name, a batch of frames being cut before it.

    .. versionadded:: 0.3.0
    .. versionchanged:: 0.5.0  ``follow_frames`` passed through.
    """

    follow_frames: Callable[[str, str | None], AsyncGenerator[tuple[str, bytes], None]]

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.calls: Counter[str] = Counter()
        """How many times each operation was called (``follow``: events delivered)."""
        self.fired: list[tuple[str, str, int]] = []
        """Each fault as it fired: ``(kind, operation, call)``."""
        self.lost = 0
        """Cancellations swallowed so far."""
        self._plans: list[_Plan] = []
        framed = getattr(log, "follow_frames", None)  # not on the protocol: optional
        if framed is not None:
            self._framed: Callable[[str, str | None], AsyncGenerator[tuple[str, bytes], None]]
            self._framed = framed
            self.follow_frames = self._follow_frames

    # -- planning -------------------------------------------------------------------------

    def _plan(self, plan: _Plan) -> FaultyLog:
        if plan.operation not in _OPERATIONS:
            raise ValueError(f"no log operation {plan.operation!r}; one of {sorted(_OPERATIONS)}")
        if plan.after < 0 or plan.times < 1:
            raise ValueError("after must be at least 0 and times at least 1")
        self._plans.append(plan)
        return self

    def stall(
        self, operation: Operation, seconds: float, *, after: int = 0, times: int = 1
    ) -> FaultyLog:
        """Hold the operation ``seconds`` before it runs (a stalled Redis, a GC pause)."""
        return self._plan(_Plan(operation, "stall", after, times, seconds=seconds))

    def fail(
        self,
        operation: Operation,
        *,
        after: int = 0,
        times: int = 1,
        error: Callable[[], BaseException] | None = None,
    ) -> FaultyLog:
        """
        Raise ``error()`` (a :class:`ConnectionError` by default) instead of running the
        operation: ``fail("append")`` is an append that never reached the log,
        ``fail("readers")`` a heartbeat (the grace watch's look) that errors.
        """
        return self._plan(_Plan(operation, "fail", after, times, error=error))

    def lose_cancellation(
        self, operation: Operation, *, after: int = 0, times: int = 1
    ) -> FaultyLog:
        """
        Hang the operation until it is cancelled, swallow that cancellation (as a library
        racing ``asyncio.wait_for`` does) and carry on as if nothing happened; ``times``
        is how many cancellations each firing swallows before one gets through.
        """
        return self._plan(_Plan(operation, "lose", after, 1, swallow=times))

    def drop_connection(self, *, after: int = 0) -> FaultyLog:
        """End a follower with :class:`ConnectionError` before the ``after``-th event
        (0-based, over all followers) it would deliver: the log's connection dropped."""
        return self._plan(_Plan("follow", "drop", after, 1))

    # -- injecting ------------------------------------------------------------------------

    async def _before(self, operation: str) -> None:
        call = self.calls[operation]
        self.calls[operation] += 1
        for plan in self._plans:
            if plan.operation != operation or not plan.due(call):
                continue
            self.fired.append((plan.kind, operation, call))
            if plan.kind == "stall":
                await asyncio.sleep(plan.seconds)
            elif plan.kind == "lose":
                await self._swallow(plan.swallow)
            elif plan.kind == "drop":
                raise ConnectionError(f"the event log's connection dropped (fault, {operation})")
            else:
                raise (plan.error or _connection_error)()

    def _due(self, operation: str) -> bool:
        """Whether a fault fires at the next call of ``operation``."""
        call = self.calls[operation]
        return any(p.operation == operation and p.due(call) for p in self._plans)

    async def _swallow(self, times: int) -> None:
        for _ in range(times):
            try:
                await asyncio.Event().wait()  # until cancelled
            except asyncio.CancelledError:
                self.lost += 1
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()  # lost: the task no longer knows it was cancelled

    # -- the EventLog interface -----------------------------------------------------------

    async def claim(self, run_id: str, owner: Owner | None = None) -> bool:
        await self._before("claim")
        return await self.log.claim(run_id, owner)

    async def owner(self, run_id: str) -> Owner | None:
        await self._before("owner")
        return await self.log.owner(run_id)

    async def cancel(self, run_id: str) -> bool:
        await self._before("cancel")
        return await self.log.cancel(run_id)

    async def cancel_requested(self, run_id: str) -> bool:
        await self._before("cancel_requested")
        return await self.log.cancel_requested(run_id)

    async def forget(self, run_id: str) -> None:
        await self._before("forget")
        await self.log.forget(run_id)

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        await self._before("append")
        return await self.log.append(run_id, wire)

    async def end(self, run_id: str) -> None:
        await self._before("end")
        await self.log.end(run_id)

    async def resumable(self, run_id: str, after: str | None) -> bool:
        await self._before("resumable")
        return await self.log.resumable(run_id, after)

    async def read(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        await self._before("read")
        return await self.log.read(run_id)

    async def readers(self, run_id: str) -> int:
        await self._before("readers")
        return await self.log.readers(run_id)

    async def follow(
        self, run_id: str, after: str | None
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        async with contextlib.aclosing(self.log.follow(run_id, after)) as inner:
            async for item in inner:
                await self._before("follow")
                yield item

    async def _follow_frames(
        self, run_id: str, after: str | None
    ) -> AsyncGenerator[tuple[str, bytes], None]:
        """``follow_frames`` of the wrapped log, a ``follow`` call counted per frame: a
        batch is cut before the frame a fault fires at, so the frames before it are
        delivered first, as :meth:`follow` delivers the events before it."""
        async with contextlib.aclosing(self._framed(run_id, after)) as inner:
            async for event_id, batch in inner:
                start = position = 0
                last = event_id
                while position < len(batch):
                    if self._due("follow") and position > start:
                        yield last, batch[start:position]
                        start = position
                    await self._before("follow")
                    # Each frame begins with its id line and ends with an empty line.
                    last = batch[position + 4 : batch.index(b"\n", position)].decode()
                    position = batch.index(b"\n\n", position) + 2
                yield last, batch[start:]


def _connection_error() -> BaseException:
    return ConnectionError("the event log failed (fault)")
