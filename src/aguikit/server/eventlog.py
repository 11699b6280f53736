"""
Event logs: every event of a run kept, numbered, so a client that lost its connection can
ask for what it missed (``Last-Event-ID``) and then follow the run live.

An SSE connection is not a run.  A phone changes network, a proxy cuts an idle socket, a
load balancer sends the reconnect to another worker; none of that should lose the answer
the agent is still producing.  So an endpoint given an event log (resumption is an
extension it opts into; by default a run is bound to its connection) decouples the run
from the connection: the handler writes each event to the log (the event's number there
is its SSE ``id:``), and every connection, the first one included, is a reader
*following* the log from a position.  A reconnect is then the same code as the first
request, starting after the last id the client saw.

The log also says who is still listening, because a run nobody follows any more should
stop costing tokens: :meth:`EventLog.readers` counts the readers following a run right
now (on any worker), and the endpoint cancels a run whose readers all left and none came
back within its resume grace window.  And it decides, atomically, which request starts a
run (:meth:`EventLog.claim`): two requests racing with the same new run id cannot both
start it.

Two logs share one interface (:class:`EventLog`):

* :class:`MemoryEventLog`, the one to use unless several workers serve the
  same runs: per process, bounded per run (the oldest
  events are dropped past ``max_events``, and a resume from before them is refused rather
  than silently skipping) and in total (``max_total_events``: past it a new run is refused
  and a running one ends with ``RUN_ERROR`` ``AGUI-E024``), and a run's log expires ``ttl``
  seconds after the run *ended* (a run still running never expires, however quiet, and
  its id cannot be claimed again while it lives);
* :class:`aguikit.server.redis_log.RedisEventLog`: Redis Streams, for several workers or
  hosts, so that a client reconnecting to another worker resumes the same run.

Ids are decimal integers counting a run's events from 1, the same in both logs, so a
client treats them as opaque strings and a server can switch logs without changing what
a client sees.  A log takes and gives wire dicts; the memory log keeps each event as its
SSE frame, encoded once, and compacts content deltas and state deltas
(:class:`MemoryEventLog`).

What it deliberately does not do: replay a run that was never logged, or keep a run after
it expired; both are answered ``410 Gone`` by the endpoint, never an empty stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import gc
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

import attrs

from ..catalogue import render_message
from ..errors import AguiError, PatchError
from ..jsonio import loads_object
from ..patch import UNSET, apply_patch
from ..transport.sse import encode_bytes
from .prelude import prelude

__all__ = [
    "EventLog",
    "EventLogError",
    "EventLogFull",
    "MemoryEventLog",
    "Owner",
    "lost_run_error",
    "parse_id",
    "prelude",
]

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
"""Seconds a run's log is kept after the run ended: long enough to ride out a network
change, short enough that a busy server's memory follows its live runs."""

DEFAULT_MAX_EVENTS: Final = 100_000
"""Events kept per run; past it the oldest are dropped (a resume before them is refused)."""

DEFAULT_MAX_TOTAL_EVENTS: Final = 1_000_000
"""Events a :class:`MemoryEventLog` keeps over all its runs (a few hundred MiB of typical
small events); past it ended runs are evicted first, then new runs are refused."""

MAX_ID_DIGITS: Final = 19
"""The longest event id read (``2**63`` events is more than any run logs): a longer
``Last-Event-ID`` is one this server never issued, never a 4,300-digit ``int()``."""

CANCEL_POLL: Final = 0.25
"""Seconds between two looks of a producing worker at its run's cancel flag
(:meth:`EventLog.cancel_requested`): a cancel request on any worker stops the run within
about this plus the handler's next ``await``."""

_TERMINAL: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_T = TypeVar("_T")


class EventLogFull(AguiError):
    """
    The log holds as much as it was allowed to (``max_total_events``): a new run is
    refused (the endpoint answers ``503``), and a running run's next event fails at its
    ``emit``, so the run ends with ``RUN_ERROR`` carrying ``AGUI-E024``.  A terminal event
    is always logged, so every reader still learns how the run ended.
    """

    rule = "AGUI-E024"


@attrs.frozen
class Owner:
    """
    Who started a run, kept with it in the log from its claim: the ``threadId`` of the
    starting request and the principal the endpoint's ``authorize`` hook named for it
    (``None`` without a hook).  A resume, join or cancel must name the same thread and
    principal, on whichever worker it lands, so the record lives in the log, not in the
    process that started the run.

    .. versionadded:: 0.4.0
    """

    thread_id: str
    principal: str | None = None


def parse_id(event_id: str | None) -> int | None:
    """The event number an id names, or ``None`` for no id or one this server never issued
    (only ASCII digits are read: ``"\u00b2"`` is a digit to :meth:`str.isdigit`, not to
    :func:`int`; and at most :data:`MAX_ID_DIGITS` of them)."""
    if (
        event_id is None
        or not event_id.isascii()
        or not event_id.isdigit()
        or len(event_id) > MAX_ID_DIGITS
    ):
        return None
    return int(event_id)


class EventLog(Protocol):
    """What :func:`aguikit.server.agui_endpoint` needs from an event log."""

    async def claim(self, run_id: str, owner: Owner | None = None) -> bool:
        """
        Take ``run_id`` for a new run: ``True`` for exactly one caller while the run's log
        exists (on every worker sharing the log), ``False`` for every other.  Atomic, so
        two requests racing to start the same run id cannot both start it; a claimed run
        is never released while it runs (``ttl`` counts from its end).  ``owner`` is
        stored with the run in the same step (:meth:`owner`).

        Raises:
            EventLogFull: the log is full and takes no new run (the endpoint's ``503``).
        """

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        """Record the next event of ``run_id``; returns its id.

        Raises:
            EventLogFull: the log is full (never for a terminal event).
        """

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

    async def owner(self, run_id: str) -> Owner | None:
        """Who claimed ``run_id`` (:meth:`claim`), or ``None`` when the log does not hold
        the run (unknown, expired) or it was logged without a claim."""

    async def cancel(self, run_id: str) -> bool:
        """
        Ask the producer of ``run_id``, on whichever worker, to cancel it
        (:meth:`cancel_requested`); returns whether the run is still running (``False``:
        unknown, expired or ended), so a caller asks again to learn when it ended.
        """

    async def cancel_requested(self, run_id: str) -> bool:
        """Whether :meth:`cancel` was asked for ``run_id``: the producing worker polls it
        (at most every :data:`CANCEL_POLL` seconds) and cancels its handler."""

    async def forget(self, run_id: str) -> None:
        """Remove everything the log holds of the ended run ``run_id`` at once, rather
        than ``ttl`` after its end (the runs of a deleted thread, ``docs/threads.md``);
        a resume of it is then answered as for an unknown run."""

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


_DELTAS: Final[Mapping[str, str]] = {
    "TEXT_MESSAGE_CONTENT": "messageId",
    "REASONING_MESSAGE_CONTENT": "messageId",
    "TOOL_CALL_ARGS": "toolCallId",
}
"""The content events a :class:`MemoryEventLog` compacts, with the member naming what
they append to: consecutive ones for the same id add up to one with the deltas joined."""

DEFAULT_RECENT_EVENTS: Final = 64
"""Events a :class:`MemoryEventLog` keeps as sent (one encoded frame each) behind a run's
newest; older content deltas are kept compacted, older state events folded into a snapshot
(a batch of about this many at a time).  The starting connection, paced at most
``queue_size`` (64 by default) events behind, so gets every delta as sent: a compacted
stretch of one delta is that very event."""

RELEASE_BYTES: Final = 32 * 1024 * 1024
"""Bytes of frames the runs a :class:`MemoryEventLog` let go (expired, evicted, forgotten)
may add up to before it gives the freed memory back to the system (``trim_memory``)."""


RELEASE_DELAY: Final = 1.0
"""Seconds from the runs being let go to their memory's release (:data:`RELEASE_BYTES`):
what the requests that let them go hold is freed by then."""

RELEASE_INTERVAL: Final = 10.0
"""Fewest seconds between two releases of memory by one log (:data:`RELEASE_BYTES`),
however many runs it lets go: a busy worker spends at most one full collection (tens of
ms) per this long on them."""


def _find_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, which hands the free pages inside the C heap back to the
    system; ``None`` where the C library has none (musl, macOS, Windows return memory
    themselves or differently)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM: Final = _find_trim()
_TRIMMING = threading.Lock()
"""Held while a trim runs: one at a time, one asked for meanwhile runs after it (for what
was freed in between)."""


def _trim() -> None:
    """Give the C heap's free pages back to the system.  Called in a thread: ctypes lets
    go of the GIL, so the event loop goes on (it waits on the heap's lock only if it asks
    the C allocator for memory meanwhile)."""
    if _TRIM is not None:
        with _TRIMMING:
            _TRIM(0)


def _release_memory() -> None:
    """Free what only a full collection frees, then trim the C heap in a thread.

    The collection (about 20 to 35 ms on a worker that just served 200 connections)
    empties the interpreter's free lists and the reference cycles of closed connections
    (asyncio's transports are cycles): a few MiB that would otherwise stay in the heap
    the trim returns, and with ``PYTHONMALLOC=malloc`` nearly everything that remained.
    A process that turned the collector off (``gc.disable()``) is not collected."""
    if gc.isenabled():
        gc.collect()
    # A thread of its own, gone once the trim is done: the loop's default executor would
    # keep an idle thread (and the executor) for the process's life from the first release.
    threading.Thread(target=_trim, name="aguikit-malloc-trim", daemon=True).start()


_SEAL: Final = 16
"""Deltas of a compacted stretch joined into one string at a time."""

BATCH_BYTES: Final = 32 * 1024
"""Bytes of frames a follower takes from a :class:`MemoryEventLog` in one step
(:meth:`MemoryEventLog.follow_frames`): one write to the socket for many small events."""


def _frame(number: int, wire: Mapping[str, Any]) -> bytes:
    """The SSE frame of event ``number``, its ``id:`` line included, as every follower sends it."""
    return b"id: %d\n" % number + encode_bytes(wire)


def _wire(frame: bytes) -> dict[str, Any]:
    """The wire dict of a frame :func:`_frame` wrote (for a follower that does not speak SSE)."""
    return loads_object(frame[frame.index(b"data: ") + 6 : -2])


@attrs.define
class _Deltas:
    """
    A stretch of consecutive content events of one message or tool call (events ``first``
    to ``last``), as the text they add up to: ``ends[k]`` is the length of the deltas of
    events ``first`` to ``first + k``.  Events up to ``compacted`` are kept only here (their
    slot in the run's window points to this stretch); later ones also as their frames.
    A reader resuming inside the compacted part gets the rest of it as one event carrying
    the id of its last delta: it folds to what the deltas fold to, with no gap and no
    duplicate.
    """

    kind: str
    key: str
    target: str
    first: int
    last: int
    compacted: int
    chunks: list[str] = attrs.Factory(list)
    pieces: list[str] = attrs.Factory(list)
    ends: array[int] = attrs.Factory(lambda: array("I"))

    def add(self, delta: str) -> None:
        self.ends.append((self.ends[-1] if self.ends else 0) + len(delta))
        self.pieces.append(delta)
        self.last += 1
        if len(self.pieces) >= _SEAL:
            self.chunks.append("".join(self.pieces))
            self.pieces.clear()

    def merged(self, start: int, stop: int) -> dict[str, Any]:
        """One content event standing for events ``start`` to ``stop`` of this stretch."""
        text = "".join(self.chunks) + "".join(self.pieces)
        self.chunks, self.pieces = [text], []  # the next merge does not join again
        begin = self.ends[start - self.first - 1] if start > self.first else 0
        return {
            "type": self.kind,
            self.key: self.target,
            "delta": text[begin : self.ends[stop - self.first]],
        }


_STATE: Final[Mapping[str, str]] = {"STATE_SNAPSHOT": "snapshot", "STATE_DELTA": "delta"}
"""The state events a :class:`MemoryEventLog` folds into one ``STATE_SNAPSHOT``, with the
member carrying the snapshot or the patch."""


class _Folded(enum.Enum):
    """The slot of a state event folded into a later ``STATE_SNAPSHOT``: a reader skips it."""

    STATE = 0


_Entry = bytes | _Deltas | _Folded | None


@attrs.define
class _Run:
    """One run's window: ``slots[head:]`` are its retained events, ``slots[i]`` being
    event ``offset + i + 1``: its encoded frame, or the compacted stretch standing for it.
    Dropped events are cleared in place and the list compacted once half of it is dropped,
    so both dropping and a follower's index stay O(1)."""

    slots: list[_Entry] = attrs.Factory(list)
    offset: int = 0
    head: int = 0
    last: int = 0
    size: int = 0
    """Bytes of the frames logged (what letting the run go frees, give or take)."""
    done: bool = False
    ended: float = 0.0
    owner: Owner | None = None
    cancel: bool = False
    changed: asyncio.Event = attrs.Factory(asyncio.Event)
    open: _Deltas | None = None
    """The stretch the next event continues when it is a delta of the same id."""
    pending: deque[_Deltas] = attrs.Factory(deque)
    """Stretches with events still kept as frames, oldest first."""
    states: deque[int] = attrs.Factory(deque)
    """The state events not folded yet (:meth:`fold_state`), oldest first."""
    state: Any = UNSET
    """The state after the last folded state event; ``UNSET`` while unknown (no
    ``STATE_SNAPSHOT`` yet, or a delta that did not apply since)."""
    held: int = 0
    """The event standing for the folded stretch (a ``STATE_SNAPSHOT`` of ``state`` once
    :meth:`flush_state` ran); 0 for none."""
    stale: bool = False
    """Whether ``held``'s frame is still the delta it was, not the snapshot it stands for."""

    @property
    def first(self) -> int:
        """The number of the oldest retained event (``last + 1`` when none is)."""
        return self.offset + self.head + 1

    def drop_oldest(self) -> None:
        self.slots[self.head] = None
        self.head += 1
        if self.head * 2 >= len(self.slots):
            del self.slots[: self.head]
            self.offset += self.head
            self.head = 0

    def add(self, frame: bytes, wire: Mapping[str, Any]) -> None:
        """Keep ``frame``, the encoded ``wire``, as event ``last + 1``; a delta also joins
        its stretch, a state event waits to be folded."""
        self.last += 1
        self.size += len(frame)
        self.slots.append(frame)
        kind = wire.get("type")
        if kind in _STATE:
            self.states.append(self.last)
        key = _DELTAS.get(kind) if isinstance(kind, str) else None
        stretch = None
        if key is not None and isinstance(kind, str) and len(wire) == 3:
            delta, target = wire.get("delta"), wire.get(key)
            if isinstance(delta, str) and delta and isinstance(target, str):
                stretch = self.open
                if not (
                    stretch is not None
                    and stretch.last == self.last - 1
                    and stretch.kind == kind
                    and stretch.target == target
                ):
                    stretch = _Deltas(kind, key, target, self.last, self.last - 1, self.last - 1)
                    self.pending.append(stretch)
                stretch.add(delta)
        self.open = stretch

    def compact(self, upto: int) -> None:
        """Keep the deltas up to event ``upto`` compacted only (their frames let go)."""
        pending = self.pending
        while pending:
            stretch = pending[0]
            stop = min(stretch.last, upto)
            base = self.offset + 1
            for number in range(max(stretch.compacted + 1, base + self.head), stop + 1):
                self.slots[number - base] = stretch
            stretch.compacted = max(stretch.compacted, stop)
            if stretch.compacted < stretch.last or stretch is self.open:
                return
            pending.popleft()

    def fold_state(self, upto: int) -> None:
        """
        Fold the state events up to event ``upto`` into one ``STATE_SNAPSHOT`` per stretch,
        kept at the last one's id (its frame rewritten by :meth:`flush_state`), the others
        skipped by readers.  A stretch needs a known base, so it starts at a
        ``STATE_SNAPSHOT`` (the input's state is not in the log); a delta that does not
        apply to it, or a state event carrying more than its type and value (kept as
        sent), ends it.
        """
        states = self.states
        base = self.offset + 1
        while states and states[0] <= upto:
            number = states.popleft()
            if number < self.first:  # dropped before it was folded: the base is gone
                self.state, self.held, self.stale = UNSET, 0, False
                continue
            slot = self.slots[number - base]
            assert isinstance(slot, bytes)
            wire = _wire(slot)
            kind = wire["type"]
            value = wire.get(_STATE[kind], UNSET)
            plain = len(wire) == 2
            if not plain:  # a timestamp, a rawEvent: kept as sent, a new stretch after it
                self.flush_state()
                self.held = 0
            state: Any = UNSET
            if kind == "STATE_SNAPSHOT":
                state = value
            elif self.state is not UNSET and isinstance(value, list):
                # In place (the held frame is rewritten at the next flush); atomic, so a
                # delta that fails (for readers too) leaves the state as it was.
                with contextlib.suppress(PatchError, AttributeError, TypeError):
                    state = apply_patch(self.state, value)
            if state is UNSET or not plain:
                self.flush_state()
                self.state, self.held = state, 0
                continue
            if self.held >= self.first:
                self.slots[self.held - base] = _Folded.STATE
            self.state, self.held, self.stale = state, number, kind == "STATE_DELTA"

    def flush_state(self) -> None:
        """Rewrite the frame of the event standing for the folded stretch as the
        ``STATE_SNAPSHOT`` of the state it reached (once per fold, not per delta)."""
        if self.stale and self.held >= self.first:
            snapshot = {"type": "STATE_SNAPSHOT", "snapshot": self.state}
            self.slots[self.held - self.offset - 1] = _frame(self.held, snapshot)
        self.stale = False

    def entry(self, after: int) -> tuple[int, bytes | dict[str, Any]]:
        """The event after ``after`` (retained): its frame, or the merged content event of
        the compacted deltas from there; and the number of the last event it stands for.
        Folded state events are skipped: the stretch's snapshot comes later, before the
        run's newest event."""
        slot = self.slots[after - self.offset]
        while slot is _Folded.STATE:
            after += 1
            slot = self.slots[after - self.offset]
        if isinstance(slot, bytes):
            return after + 1, slot
        assert isinstance(slot, _Deltas)
        return slot.compacted, slot.merged(after + 1, slot.compacted)

    def one(self, after: int) -> tuple[int, tuple[str, dict[str, Any]]]:
        """:meth:`entry` as ``(id, wire)``."""
        number, item = self.entry(after)
        return number, (str(number), _wire(item) if isinstance(item, bytes) else item)

    def batch(self, after: int) -> tuple[int, tuple[str, bytes]]:
        """The frames after ``after``, up to :data:`BATCH_BYTES` of them (at least one), as
        one write: ``(id of the last, frames)``."""
        parts: list[bytes] = []
        size = 0
        last = self.last
        while after < last and size < BATCH_BYTES:
            number, item = self.entry(after)
            frame = item if isinstance(item, bytes) else _frame(number, item)
            parts.append(frame)
            size += len(frame)
            after = number
        return after, (str(after), b"".join(parts))


class MemoryEventLog:
    """
    An in-process :class:`EventLog`: a bounded window per run, kept until ``ttl`` seconds
    after the run ended.

    Memory is bounded twice: each run keeps its last ``max_events`` events, and the log
    keeps at most ``max_total_events`` over all runs.  When the total is reached, runs
    that ended are evicted first (the earliest-ended first); when only running runs are
    left, :meth:`claim` and :meth:`append` raise :class:`EventLogFull` (a terminal event
    is still logged), so the endpoint refuses new runs with ``503`` and a growing run
    ends with ``RUN_ERROR`` (``AGUI-E024``) instead of taking the worker's memory.

    A follower's wake-up costs what it delivers: it reads the events after its position
    by index, never copying or scanning the retained run.

    Each event is kept once, as the SSE frame its followers send (encoded at
    :meth:`append`; :meth:`follow_frames` hands them out several to a write), and
    consecutive content deltas of one message or tool call are kept as their joined text
    once ``recent_events`` behind the newest event, and all of them once the run ended: a
    finished message costs one content event, and a reader resuming inside such a stretch
    gets the rest of it as one event under its last delta's id (the same fold, no gap, no
    duplicate).  Likewise, a stretch of state events after a ``STATE_SNAPSHOT`` of the run is
    kept as one ``STATE_SNAPSHOT`` of the state it reached (the deltas applied with
    :func:`aguikit.patch.apply_patch`), under the id of its last event, the events between
    them kept in place: a resume before or inside it folds to the same final state.  Deltas
    before the run's first snapshot (the log does not know the request's state), one that
    does not apply and those after it, and state events carrying more than their value, are
    kept as sent.  The bounds count events, compacted or not.

    Args:
        ttl: Seconds a run is kept after it ended.
        max_events: Events kept per run.
        max_total_events: Events kept over all runs.
        recent_events: Content and state deltas kept as sent behind a run's newest event.
        trim_memory: Whether, once the runs it let go held :data:`RELEASE_BYTES` of frames,
           the log has the C allocator give the memory they freed back to the system: a
           full garbage collection, then glibc's ``malloc_trim`` in a thread, a second
           later and at most once per :data:`RELEASE_INTERVAL` (nothing where the C
           library has no ``malloc_trim``).
           glibc keeps what a burst of runs freed, pinned by a few live blocks above it:
           200 silent clients left a worker at 14 times its starting RSS with nothing of
           theirs held (``docs/resume.md``, "What a run held").

    .. versionchanged:: 0.5.0  Events kept encoded, content deltas compacted, state
       deltas folded into snapshots; ``recent_events``; ``trim_memory``.
    .. versionchanged:: 0.3.0  ``ttl`` counts from the run's end, not its last event;
       ``max_total_events``.
    """

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_total_events: int = DEFAULT_MAX_TOTAL_EVENTS,
        recent_events: int = DEFAULT_RECENT_EVENTS,
        trim_memory: bool = True,
    ) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        if max_total_events < 1:
            raise ValueError("max_total_events must be at least 1")
        self.ttl = ttl
        self.max_events = max_events
        self.max_total_events = max_total_events
        self.recent_events = max(0, recent_events)
        self.trim_memory = trim_memory
        self._released = 0
        """Bytes of frames of the runs let go since the last release of memory."""
        self._releasing: tuple[asyncio.AbstractEventLoop, asyncio.TimerHandle] | None = None
        """The release of memory scheduled, and the loop it is scheduled on."""
        self._released_at: tuple[asyncio.AbstractEventLoop | None, float] = (None, 0.0)
        """The loop and loop time of the last release of memory."""
        self._runs: dict[str, _Run] = {}
        self._ended: dict[str, _Run] = {}
        """Ended runs in the order they ended: the first to expire or be evicted."""
        self._total = 0
        self._readers: dict[str, int] = {}

    @property
    def total_events(self) -> int:
        """Events retained over all runs (at most ``max_total_events``, terminal events
        of full logs aside)."""
        return self._total

    def _forget(self, run_id: str) -> None:
        run = self._runs.pop(run_id)
        self._ended.pop(run_id, None)
        self._total -= len(run.slots) - run.head
        self._released += run.size
        run.changed.set()  # a follower waiting on it sees it gone and ends
        self._release()

    def _release(self) -> None:
        """Once the runs let go add up to :data:`RELEASE_BYTES`, release the memory they
        freed (:func:`_release_memory`) :data:`RELEASE_DELAY` later, at most once per
        :data:`RELEASE_INTERVAL` (``trim_memory``)."""
        if self._released < RELEASE_BYTES or not self.trim_memory or _TRIM is None:
            return
        self._released = 0
        loop = asyncio.get_running_loop()
        if self._releasing is not None and self._releasing[0] is loop:
            return  # it comes later than what was freed now
        at = loop.time() + RELEASE_DELAY
        if self._released_at[0] is loop:
            at = max(at, self._released_at[1] + RELEASE_INTERVAL)
        self._releasing = (loop, loop.call_at(at, self._release_now, loop))

    def _release_now(self, loop: asyncio.AbstractEventLoop) -> None:
        self._releasing, self._released_at = None, (loop, loop.time())
        _release_memory()

    def _expire(self, now: float) -> None:
        # Ended runs expire in the order they ended: only the front is ever looked at.
        while self._ended:
            run_id, run = next(iter(self._ended.items()))
            if now - run.ended <= self.ttl:
                return
            self._forget(run_id)

    def _make_room(self, wire: Mapping[str, Any] | None) -> None:
        while self._total >= self.max_total_events and self._ended:
            self._forget(next(iter(self._ended)))
        if self._total >= self.max_total_events and (
            wire is None or wire.get("type") not in _TERMINAL
        ):
            raise EventLogFull(
                f"the event log holds its limit of {self.max_total_events} events over "
                "runs still running: "
                + ("no new run is taken" if wire is None else "this run cannot log more")
            )

    def _live(self, run_id: str) -> _Run | None:
        self._expire(time.monotonic())
        return self._runs.get(run_id)

    async def claim(self, run_id: str, owner: Owner | None = None) -> bool:
        # No await from the check to the set: nothing else runs in between.
        if self._live(run_id) is not None:
            return False
        self._make_room(None)
        self._runs[run_id] = _Run(owner=owner)
        return True

    async def owner(self, run_id: str) -> Owner | None:
        run = self._live(run_id)
        return None if run is None else run.owner

    async def cancel(self, run_id: str) -> bool:
        run = self._live(run_id)
        if run is None or run.done:
            return False
        run.cancel = True
        return True

    async def cancel_requested(self, run_id: str) -> bool:
        run = self._live(run_id)
        return run is not None and run.cancel

    async def forget(self, run_id: str) -> None:
        run = self._live(run_id)
        if run is not None and run.done:
            self._forget(run_id)

    async def readers(self, run_id: str) -> int:
        return self._readers.get(run_id, 0)

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        run = self._live(run_id)
        self._make_room(wire)
        # Encoded once, before anything changes (a value with no JSON form is refused here,
        # at the handler's emit); every SSE follower sends these very bytes.
        frame = _frame(1 if run is None else run.last + 1, wire)
        if run is None:
            run = self._runs[run_id] = _Run()
        run.add(frame, wire)
        self._total += 1
        if run.last - run.first >= self.max_events:
            run.drop_oldest()
            self._total -= 1
        upto = run.last - self.recent_events
        if run.pending:
            run.compact(upto)
        if run.states and run.states[0] <= upto - self.recent_events:
            # Folded a batch at a time: the snapshot is encoded once per batch of deltas.
            run.fold_state(upto)
            run.flush_state()
        changed, run.changed = run.changed, asyncio.Event()
        changed.set()  # wake every follower; they wait on the new one next
        return str(run.last)

    async def end(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and not run.done:
            run.done = True
            run.ended = time.monotonic()
            run.open = None
            run.compact(run.last)  # an ended run is kept compacted whole
            run.fold_state(run.last)
            run.flush_state()
            run.state = UNSET  # nothing more to fold: the snapshot's frame is what is kept
            self._ended[run_id] = run
            run.changed.set()

    async def resumable(self, run_id: str, after: str | None) -> bool:
        run = self._live(run_id)
        if run is None:
            return False
        position = 0 if after is None else parse_id(after)
        if position is None or (run.done and position >= run.last):
            return False
        return run.first - 1 <= position <= run.last

    async def read(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        run = self._live(run_id)
        if run is None:
            return []
        events = []
        position = run.first - 1
        while position < run.last:
            position, event = run.one(position)
            events.append(event)
        return events

    def follow(
        self, run_id: str, after: str | None
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """:meth:`EventLog.follow`; compacted deltas come as one content event."""
        return self._tail(run_id, after, _Run.one)

    def follow_frames(
        self, run_id: str, after: str | None
    ) -> AsyncGenerator[tuple[str, bytes], None]:
        """
        :meth:`follow` as SSE bytes: ``(id, frames)``, ``frames`` being the encoded frames
        (``id:`` lines included) of every event after ``after`` available now, up to
        :data:`BATCH_BYTES`, and ``id`` the last one's.  The frames were encoded once, when
        logged, so a follower costs one copy and one write per step, not an encoding per
        event.

        .. versionadded:: 0.5.0
        """
        return self._tail(run_id, after, _Run.batch)

    async def _tail(
        self, run_id: str, after: str | None, take: Callable[[_Run, int], tuple[int, _T]]
    ) -> AsyncGenerator[_T, None]:
        position = parse_id(after) if after is not None else 0
        if position is None:
            return
        self._readers[run_id] = self._readers.get(run_id, 0) + 1
        try:
            while True:
                run = self._live(run_id)
                if run is None:
                    return
                waiter = run.changed  # taken before reading: no append can slip past it
                while position < run.last:
                    if run.first > position + 1:
                        return  # what the reader missed was dropped: end rather than skip it
                    position, item = take(run, position)
                    yield item
                    if self._runs.get(run_id) is not run:
                        return  # evicted or expired while the reader held the event
                if run.done:
                    return
                await waiter.wait()
        finally:
            left = self._readers[run_id] - 1
            if left:
                self._readers[run_id] = left
            else:
                del self._readers[run_id]
