"""
Event logs: every event of a run kept, numbered, so a client that lost its connection can
ask for what it missed (``Last-Event-ID``) and then follow the run live.

An SSE connection is not a run.  A phone changes network, a proxy cuts an idle socket, a
load balancer sends the reconnect to another worker; none of that should lose the answer
the agent is still producing.  So an endpoint with an event log (every endpoint, unless
built with ``event_log=None``) decouples the run from the connection: the handler writes
each event to the log (the event's number there is its SSE ``id:``), and every
connection, the first one included, is a reader *following* the log from a position.  A
reconnect is then the same code as the first request, starting after the last id the
client saw.

The log also says who is still listening, because a run nobody follows any more should
stop costing tokens: :meth:`EventLog.readers` counts the readers following a run right
now (on any worker), and the endpoint cancels a run whose readers all left and none came
back within its resume grace window.  And it decides, atomically, which request starts a
run (:meth:`EventLog.claim`): two requests racing with the same new run id cannot both
start it.

Two logs share one interface (:class:`EventLog`):

* :class:`MemoryEventLog`, the default (each endpoint builds its own) and the one to use
  unless several workers serve the same runs: per process, bounded per run (the oldest
  events are dropped past ``max_events``, and a resume from before them is refused rather
  than silently skipping), and a run's log expires ``ttl`` seconds after its last event;
* :class:`aguikit.server.redis_log.RedisEventLog`: Redis Streams, for several workers or
  hosts, so that a client reconnecting to another worker resumes the same run.

Ids are decimal integers counting a run's events from 1, the same in both logs, so a
client treats them as opaque strings and a server can switch logs without changing what
a client sees.  The log stores wire dicts; the encoding (SSE, JSONL) is the connection's.

What it deliberately does not do: replay a run that was never logged, or keep a run after
it expired; both are answered ``410 Gone`` by the endpoint, never an empty stream.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final, Protocol

import attrs

from ..catalogue import render_message
from ..errors import AguiError
from .prelude import prelude

__all__ = ["EventLog", "EventLogError", "MemoryEventLog", "lost_run_error", "parse_id", "prelude"]

PRODUCER_LOST: Final = "AGUI-E021"
"""The ``RUN_ERROR`` code of a run whose producer stopped holding its lease (its worker
died or lost the log for longer than the lease)."""
LOG_FAILED: Final = "AGUI-E022"
"""The ``RUN_ERROR`` code of a run one of whose events could not be logged, and of an
event log that could not answer (``503`` at the endpoint)."""


class EventLogError(AguiError):
    """
    The event log could not do what was asked (Redis unreachable, stalled past its socket
    timeout, restarted without the run): raised at the handler's ``emit`` when its event
    could not be logged (the run then ends with ``RUN_ERROR`` code ``AGUI-E022``, never
    with a hole in its ids), and answered ``503`` by the endpoint when a request could
    not be checked against the log.
    """

    rule = LOG_FAILED

    def __init__(self, run_id: str, what: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r}: {what}")

    @property
    def location(self) -> str:
        return f"run {self.run_id!r}"


def lost_run_error(rule_id: str) -> dict[str, Any]:
    """The ``RUN_ERROR`` an event log writes to end a run its producer can no longer end
    (``rule_id``: :data:`PRODUCER_LOST` or :data:`LOG_FAILED`), so every follower and
    resume gets a terminal event rather than a silence or a truncation read as success."""
    return {"type": "RUN_ERROR", "message": render_message(rule_id), "code": rule_id}


DEFAULT_TTL: Final = 300.0
"""Seconds a run's log is kept after its last event: long enough to ride out a network
change, short enough that a busy server's memory follows its live runs."""

DEFAULT_MAX_EVENTS: Final = 100_000
"""Events kept per run; past it the oldest are dropped (a resume before them is refused)."""


def parse_id(event_id: str | None) -> int | None:
    """The event number an id names, or ``None`` for no id or one this server never issued."""
    if event_id is None or not event_id.isdigit():
        return None
    return int(event_id)


class EventLog(Protocol):
    """What :func:`aguikit.server.agui_endpoint` needs from an event log."""

    async def claim(self, run_id: str) -> bool:
        """
        Take ``run_id`` for a new run: ``True`` for exactly one caller while the run's log
        exists (on every worker sharing the log), ``False`` for every other.  Atomic, so
        two requests racing to start the same run id cannot both start it; a claimed run
        then expires like any other (``ttl`` after its last event).
        """

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        """Record the next event of ``run_id``; returns its id."""

    async def end(self, run_id: str) -> None:
        """Record that ``run_id`` produces nothing more (followers then stop)."""

    async def resumable(self, run_id: str, after: str | None) -> bool:
        """Whether :meth:`follow` can deliver every event of ``run_id`` after ``after``
        (``None``: from the first), and whether there is anything to deliver: ``False``
        for an id at or past the end of a run that ended (cancelled before its last
        event, say), where following would only ever deliver nothing."""

    async def read(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        """Every event of ``run_id`` logged so far (and retained), in order."""

    async def readers(self, run_id: str) -> int:
        """How many readers follow ``run_id`` now (on every worker sharing the log)."""

    def follow(
        self, run_id: str, after: str | None
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """
        ``(id, wire)`` for each event after ``after``, then live ones, until the end.

        Counts as a reader (:meth:`readers`) from its first step until it is closed,
        so iterate it under :func:`contextlib.aclosing` (or to its end): an abandoned
        iterator would count until garbage collection.

        Ends early, never skipping, when events the reader has not seen were dropped
        (the window moved past them, or the log expired): the client's reconnect is then
        refused with ``410`` and it reports the truncation.
        """


@attrs.define
class _Run:
    events: deque[tuple[int, dict[str, Any]]]
    last: int = 0
    done: bool = False
    touched: float = 0.0
    changed: asyncio.Event = attrs.Factory(asyncio.Event)


class MemoryEventLog:
    """
    An in-process :class:`EventLog`: a bounded deque per run, expiring ``ttl`` seconds
    after the run's last event (finished or abandoned).

    Args:
        ttl: Seconds a run is kept after its last event.
        max_events: Events kept per run.
    """

    def __init__(self, *, ttl: float = DEFAULT_TTL, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self.ttl = ttl
        self.max_events = max_events
        self._runs: dict[str, _Run] = {}
        self._readers: dict[str, int] = {}
        self._next_sweep = 0.0

    def _sweep(self, now: float) -> None:
        # Amortised: at most once a second, so append stays O(1).
        if now < self._next_sweep:
            return
        self._next_sweep = now + 1.0
        expired = [rid for rid, run in self._runs.items() if now - run.touched > self.ttl]
        for rid in expired:
            del self._runs[rid]

    def _live(self, run_id: str) -> _Run | None:
        run = self._runs.get(run_id)
        if run is not None and time.monotonic() - run.touched > self.ttl:
            del self._runs[run_id]
            return None
        return run

    async def claim(self, run_id: str) -> bool:
        # No await from the check to the set: nothing else runs in between.
        if self._live(run_id) is not None:
            return False
        now = time.monotonic()
        self._sweep(now)
        self._runs[run_id] = _Run(deque(maxlen=self.max_events), touched=now)
        return True

    async def readers(self, run_id: str) -> int:
        return self._readers.get(run_id, 0)

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        now = time.monotonic()
        self._sweep(now)
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run(deque(maxlen=self.max_events))
        run.last += 1
        run.events.append((run.last, dict(wire)))
        run.touched = now
        changed, run.changed = run.changed, asyncio.Event()
        changed.set()  # wake every follower; they wait on the new one next
        return str(run.last)

    async def end(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            run.done = True
            run.touched = time.monotonic()
            run.changed.set()

    async def resumable(self, run_id: str, after: str | None) -> bool:
        run = self._live(run_id)
        if run is None:
            return False
        first = run.events[0][0] if run.events else run.last + 1
        position = 0 if after is None else parse_id(after)
        if position is None or (run.done and position >= run.last):
            return False
        return first - 1 <= position <= run.last

    async def read(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        run = self._live(run_id)
        return [] if run is None else [(str(seq), wire) for seq, wire in run.events]

    async def follow(
        self, run_id: str, after: str | None
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        position = parse_id(after) if after is not None else 0
        if position is None:
            return
        self._readers[run_id] = self._readers.get(run_id, 0) + 1
        try:
            while True:
                run = self._live(run_id)
                if run is None:
                    return
                waiter = run.changed
                if run.events and run.events[0][0] > position + 1:
                    return  # what the reader missed was dropped: end rather than skip it
                for seq, wire in list(run.events):
                    if seq > position:
                        position = seq
                        yield str(seq), wire
                if run.done and position >= run.last:
                    return
                if position >= run.last:
                    await waiter.wait()
        finally:
            left = self._readers[run_id] - 1
            if left:
                self._readers[run_id] = left
            else:
                del self._readers[run_id]
