"""
The Redis Streams event log: resumable runs across worker processes and hosts.

With several workers behind a load balancer, the reconnect of a dropped client lands on
any of them, most likely not the one running the agent.  Each run is therefore one Redis
stream (``<prefix><runId>``): the worker running the handler appends every event with
``XADD`` under the explicit id ``<n>-0`` (``n`` counting from 1, the SSE ``id:`` the client
sees, the same numbering as :class:`~aguikit.server.eventlog.MemoryEventLog`), and any
worker follows it with ``XRANGE`` (what was missed) then blocking ``XREAD`` (what comes
next).  The end of the run is one more entry, ``end``, so followers stop without polling.

Starting a run is a claim on its stream (:meth:`RedisEventLog.claim`): a Lua script
creates the stream with a first entry ``0-1`` (field ``claim``, before every event) only
if the key does not exist, so of two workers racing to start the same run id exactly one
wins, and the id stays taken for as long as the run's log exists.

The claim also records who started the run, in the same script: the hash
``<owner_prefix><runId>`` (``thread``, and ``principal`` when the endpoint's hook named
one), which every worker reads to check a resume, a join or a cancel
(:meth:`RedisEventLog.owner`); a cancel request on any worker sets its field ``cancel``
(:meth:`RedisEventLog.cancel`, only while the run runs), which the producing worker
polls.  The hash expires with the stream.

Readers say they are there: while it follows a run, a reader keeps an entry in the sorted
set ``<readers_prefix><runId>`` (member: a random token, score: when it expires, from the
Redis server's clock, so hosts' clocks never matter), refreshed every ``reader_ttl / 3``
seconds by a task of its own (a reader stalled by a slow client still counts) and removed
when it stops.  A worker whose run lost its own reader asks :meth:`RedisEventLog.readers`
(expired entries dropped, the rest counted) to learn whether another worker's reader took
over; a reader on a worker that died without removing its entry counts until it expires.

Bounds: ``MAXLEN ~ max_events`` per stream (a resume from before the retained window is
refused), and the key expires ``ttl`` seconds after its last write (the expiry is set
once per batch of a run's events, and renewed with the producer's lease while the run
runs, so a quiet run does not expire under its handler).

Writes are batched: an append takes its number at once, queues its entry and waits for
it to be written by the log's writer task, which sends everything queued as one
pipeline (one round trip) with one call of an append script per run, and, while that
round trip is on its way, queues what comes next for the following batch.  No timer
delays a write: an event waits for at most the batch in flight and its own (two round
trips, each bounded by ``producer_ttl``), and under many concurrent runs on a worker a
logged event costs a fraction of a round trip.  The script appends a run's entries only
right after the run's last entry (otherwise the batch fails, see below), and a batch
Redis already holds whole is acknowledged rather than written twice.  A follower on the
worker writing its run (the connection that started it, always) reads what Redis holds
once, then is handed each batch by the writer task as Redis acknowledges it, without an
``XREAD`` per event; once a write of the run failed, it reads Redis again (the run's end
is then the log's script's, below).

The producer holds a lease (``<lease_prefix><runId>``, a random token with an expiry):
the claim takes it, and the worker writing the run renews it every ``producer_ttl / 3``
seconds by a task of its own (a handler silent in a slow tool call keeps it) until the
run ends.  A follower whose blocking read found nothing looks at the lease; once it has
lapsed (the producing worker was SIGKILLed, or cut from Redis longer than the lease) the
follower ends the run itself, in one script: ``RUN_ERROR`` with code ``AGUI-E021`` and
the end entry, numbered after the last entry, so every follower and every resume gets a
terminal event within ``producer_ttl`` plus one blocking read (12 s by default).  A
producer that was only stalled and comes back finds its next number taken: its ``emit``
raises, and the run stays ended as its followers saw it.

A failed write never leaves a hole.  When a batch fails (a Redis error, no answer
within ``producer_ttl``, the run's stream gone, its number taken), every event of the
run in it fails (:class:`~aguikit.server.eventlog.EventLogError` at the handler's
``emit``), and so does every later append of the run, at once; the run's end writes
``RUN_ERROR`` with code ``AGUI-E022`` after the last event Redis holds (a Redis that
restarted without the run is a failure, never a new stream missing its beginning).  An
append whose caller is cancelled while it waits is still written (Redis may have carried
it out already; the handler's writer counted the event when it was emitted): its number
is spent, and the run's next event, its cancelled outcome say, follows it.  Every Redis
error is raised as :class:`~aguikit.server.eventlog.EventLogError` (the endpoint
answers ``503``).

Blocking reads wait ``min(2 s, socket_timeout / 2)``, so redis-py's socket timeout (5 s
by default in redis-py 8) never fires under a silent run; a read that fails anyway
(Redis stalled, restarted) is retried with backoff for up to ``producer_ttl`` before the
follower gives up, and a reader's heartbeat survives a failed refresh.

Needs ``aguikit[redis]`` (redis-py 5.0 or newer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar  # redis-py's stream replies are loosely typed: Any

import attrs
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError, NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..jsonio import dumps_wire, loads_object
from .eventlog import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_TTL,
    LOG_FAILED,
    PRODUCER_LOST,
    EventLogError,
    Owner,
    lost_run_error,
    parse_id,
)

__all__ = ["RedisEventLog"]

LOGGER: Final = logging.getLogger("aguikit.server")
_T = TypeVar("_T")

_EVENT: Final = b"e"
_END: Final = b"end"
_CLAIM: Final = b"claim"
_BLOCK_MS: Final = 2000
"""The longest one blocking read waits before looking at the key and the producer's lease
(shortened to half the client's socket timeout, so redis-py never times a silence out)."""
MAX_CONNECTIONS: Final = 10_000
"""The pool size :meth:`RedisEventLog.from_url` gives its client (Redis's own default
``maxclients``): one connection per concurrent follower, plus the writes and heartbeats."""
DEFAULT_READER_TTL: Final = 15.0
"""Seconds a reader counts after its last heartbeat (it beats every third of that)."""
DEFAULT_PRODUCER_TTL: Final = 10.0
"""Seconds a run's producer lease lasts after its last renewal (renewed every third of
that): past it with no renewal, a follower ends the run with ``RUN_ERROR``."""

_LEAVING: Final[set[asyncio.Future[Any]]] = set()
"""Removals of readers still on their way to Redis (the loop keeps only weak references
to tasks; a removal whose reader was cancelled has nobody else holding it)."""

_CLAIM_SCRIPT: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('XADD', KEYS[1], '0-1', 'claim', '1')
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('DEL', KEYS[3])
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[3], 'thread', ARGV[5])
  if ARGV[6] == '1' then redis.call('HSET', KEYS[3], 'principal', ARGV[7]) end
  redis.call('EXPIRE', KEYS[3], ARGV[1])
end
return 1
"""
"""Create the run's stream if, and only if, it does not exist (atomic: one script), take
its producer lease and record its owner (``ARGV[4]``: whether one is given; its thread,
whether it has a principal, the principal)."""

_LAST: Final = """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local function is_end(entry)
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'end' then return true end
  end
  return false
end
"""
"""Prefix of a script reading the run's last entry (``last[1]``, absent when the stream
is) and ``is_end(entry)``: whether an entry is the run's end."""

_CANCEL_SCRIPT: Final = (
    _LAST
    + """
if not last[1] or is_end(last[1]) then return 0 end
redis.call('HSET', KEYS[2], 'cancel', '1')
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""
)
"""Flag a running run for cancellation in its owner record (the producing worker polls
the flag); ``0`` when the run is gone or ended."""

_RENEW_SCRIPT: Final = (
    _LAST
    + """
local holder = redis.call('GET', KEYS[2])
if holder ~= ARGV[1] then
  if holder then return 0 end
  if not last[1] or is_end(last[1]) then return 0 end
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
return 1
"""
)
"""Renew the producer's lease (and the stream's expiry: a silent handler's run does not
expire under it) while the lease is this producer's, or take it back when it lapsed (a
stall longer than the lease) and nobody ended the run meanwhile; ``0`` once the run was
ended by a follower (the lease is then nobody's, or another's)."""

_END_RUN_SCRIPT: Final = (
    _LAST
    + """
if ARGV[1] == 'lapsed' and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local n = tonumber(ARGV[3])
if last[1] then
  if is_end(last[1]) then return 0 end
  n = tonumber(string.match(last[1][1], '^(%d+)')) + 1
elseif ARGV[1] == 'lapsed' then
  return -1
end
redis.call('XADD', KEYS[1], n .. '-0', 'e', ARGV[2])
redis.call('XADD', KEYS[1], (n + 1) .. '-0', 'end', '1')
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
redis.call('DEL', KEYS[2])
return 1
"""
)
"""End a run its producer cannot end: ``RUN_ERROR`` (``ARGV[2]``) and the end entry,
numbered after the last entry Redis holds (``ARGV[3]`` when it holds none), unless the
run already ended.  ``lapsed``: a follower's, only once the lease is gone (``-1``: the
stream itself is gone); ``failed``: the producer's own, after a failed append."""
_APPEND_SCRIPT: Final = """
local seq = tonumber(ARGV[1])
local n = (#ARGV - 5) / 2
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if last[1] then
  local top = tonumber(string.match(last[1][1], '^(%d+)'))
  if top ~= seq - 1 then
    if top ~= seq + n - 1 then return -2 end
    local held = redis.call('XRANGE', KEYS[1], seq .. '-0', top .. '-0')
    if #held ~= n then return -2 end
    for i = 1, n do
      local fields = held[i][2]
      if #fields ~= 2 or fields[1] ~= ARGV[4 + 2 * i] or fields[2] ~= ARGV[5 + 2 * i] then
        return -2
      end
    end
    return n
  end
elseif seq > 1 then
  return -1
end
for i = 1, n do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], (seq + i - 1) .. '-0',
    ARGV[4 + 2 * i], ARGV[5 + 2 * i])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
if ARGV[4] ~= '' then redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5]) end
return n
"""
"""Append a run's entries numbered ``ARGV[1]`` on (``ARGV[6]`` on: field, value, ...),
only right after the run's last entry: ``-1`` when the stream is gone (expired, Redis
restarted empty) past the first event, ``-2`` when the number was taken (a follower
ended the run after the producer's lease lapsed).  A batch Redis already holds whole
(sent again after its reply was lost) is acknowledged, not written twice.  The stream
and the owner record expire ``ARGV[3]`` seconds from now (once per batch, not per
event); ``ARGV[4]``, when not empty, takes the producer's lease (``ARGV[5]`` ms)."""
_BATCH: Final = 1024
"""The most entries one batch (one pipeline) carries."""


@attrs.define
class _Entry:
    """One entry queued for the writer task, and the future its writer awaits."""

    run_id: str
    seq: int
    fields: dict[bytes, bytes | str]
    done: asyncio.Future[int]


@attrs.define(eq=False)
class _Tap:
    """A follower of a run this worker writes: the writer task hands it each batch of
    the run's entries once Redis acknowledged them, so it reads them without a round
    trip; ``stale`` once the run's end is no longer the writer task's (a failure)."""

    entries: list[tuple[bytes, dict[bytes, bytes | str]]] = attrs.Factory(list)
    ready: asyncio.Event = attrs.Factory(asyncio.Event)
    stale: bool = False


def _settle(entry: _Entry, outcome: int | EventLogError) -> None:
    """Tell an entry's writer how its write went (unless it stopped waiting)."""
    if entry.done.done():
        return
    if isinstance(outcome, EventLogError):
        entry.done.set_exception(outcome)
    else:
        entry.done.set_result(outcome)


def _no_connection(exc: RedisConnectionError) -> bool:
    """Whether redis-py refused to send for want of a free pooled connection (redis-py
    8 raises ``MaxConnectionsError``; 5.0 a plain ``ConnectionError`` saying so)."""
    return isinstance(exc, MaxConnectionsError) or str(exc) == "Too many connections"


def _failure(answer: Any) -> str | None:
    """What went wrong with one call of the append script, ``None`` if nothing did."""
    if isinstance(answer, BaseException):
        return f"could not be logged: {answer!r}"
    if answer == -1:
        return "could not be logged: the run's log is gone"
    if answer == -2:
        return "could not be logged: its number was taken (the run was ended meanwhile)"
    return None


_NOW: Final = "local t = redis.call('TIME') local now = t[1] + t[2] / 1000000 "
_BEAT_SCRIPT: Final = (
    _NOW
    + """
if ARGV[4] == 'XX' then
  redis.call('ZADD', KEYS[1], 'XX', now + ARGV[2], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now + ARGV[2], ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""
)
"""Keep a reader's entry alive until ``ARGV[2]`` seconds from now, by the server's clock;
``XX`` (a refresh) only if it is still there, so a refresh that reaches Redis after the
reader's removal (another connection, another order) cannot bring it back."""
_COUNT_SCRIPT: Final = (
    _NOW
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""
)
"""Drop the readers whose heartbeat expired; count the rest."""


def _encode(text: str) -> bytes:
    """``text`` as Redis stores it (a lone surrogate in a principal kept, not refused)."""
    return text.encode("utf-8", "surrogatepass")


def _decode(stored: bytes | str) -> str:
    return stored if isinstance(stored, str) else stored.decode("utf-8", "surrogatepass")


def _seq(stream_id: bytes | str) -> int:
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(text.split("-", 1)[0])


class RedisEventLog:
    """
    An :class:`~aguikit.server.eventlog.EventLog` in Redis Streams.

    Args:
        redis: A ``redis.asyncio.Redis`` client (its connection pool is shared by every
            run this worker writes or follows).  Its ``socket_timeout`` (if any) bounds
            each blocking read to half of it.  Each follower holds one of its pooled
            connections during a blocking read, so the pool needs one per concurrent
            follower on the worker, plus a few (redis-py 8's default pool has 100;
            :meth:`from_url` sizes it for :data:`MAX_CONNECTIONS`).
        ttl: Seconds a run's stream is kept after its last event (or its producer's last
            lease renewal).
        max_events: Events kept per run (approximately: ``MAXLEN ~``).
        prefix: Prepended to each run id to make its stream's key.
        readers_prefix: Prepended to each run id to make the key of its readers' set.
        lease_prefix: Prepended to each run id to make the key of its producer's lease.
        owner_prefix: Prepended to each run id to make the key of its owner record (a
            hash: the starting request's thread and principal, and the cancel flag);
            no two of the four prefixes may start one another, so no run's keys meet
            another's.
        reader_ttl: Seconds a reader counts after its last heartbeat: how long a reader
            on a worker that died goes on keeping its run alive.
        producer_ttl: Seconds a producer's lease lasts after its last renewal: a run
            whose worker died gets its ``RUN_ERROR`` (``AGUI-E021``) at most this plus
            one blocking read (2 s) later, as soon as someone follows it.  Longer rides
            out longer Redis stalls; shorter tells followers sooner.  It also bounds
            how long a batch of writes waits for its answer (or for a free pooled
            connection) before its runs fail.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        ttl: float = DEFAULT_TTL,
        max_events: int = DEFAULT_MAX_EVENTS,
        prefix: str = "aguikit:run:",
        readers_prefix: str = "aguikit:readers:",
        lease_prefix: str = "aguikit:lease:",
        owner_prefix: str = "aguikit:owner:",
        reader_ttl: float = DEFAULT_READER_TTL,
        producer_ttl: float = DEFAULT_PRODUCER_TTL,
    ) -> None:
        named = {
            "prefix": prefix,
            "readers_prefix": readers_prefix,
            "lease_prefix": lease_prefix,
            "owner_prefix": owner_prefix,
        }
        for one, first in named.items():
            for other, second in named.items():
                if one != other and first.startswith(second):
                    raise ValueError(
                        f"{one} {first!r} and {other} {second!r} overlap: a run id could "
                        "then name another run's keys"
                    )
        if reader_ttl <= 0:
            raise ValueError("reader_ttl must be positive")
        if producer_ttl <= 0:
            raise ValueError("producer_ttl must be positive")
        self.redis = redis
        self.ttl = ttl
        self.max_events = max_events
        self.prefix = prefix
        self.readers_prefix = readers_prefix
        self.lease_prefix = lease_prefix
        self.owner_prefix = owner_prefix
        self.reader_ttl = reader_ttl
        self.producer_ttl = producer_ttl
        timeout = redis.connection_pool.connection_kwargs.get("socket_timeout")
        self.block_ms = _BLOCK_MS if not timeout else max(1, min(_BLOCK_MS, int(timeout * 500)))
        """How long one blocking read waits (below the client's socket timeout)."""
        self._next: dict[str, int] = {}
        """The next number of each run this worker writes (one writer per run)."""
        self._tokens: dict[str, str] = {}
        """The producer lease token of each run this worker claimed or writes."""
        self._leases: dict[str, asyncio.Task[None]] = {}
        """The renewal task of each run this worker writes."""
        self._failed: set[str] = set()
        """Runs one of whose appends failed: nothing more is appended, the end says so."""
        self._done: dict[str, int] = {}
        """The last number of each run this worker writes that Redis acknowledged."""
        self._pending: list[_Entry] = []
        """Entries queued for the next batch, in the order their numbers were taken."""
        self._flusher: asyncio.Future[None] | None = None
        """The writer task sending the queued entries (none while nothing is queued)."""
        self._append = redis.register_script(_APPEND_SCRIPT)
        self._taps: dict[str, set[_Tap]] = {}
        """The followers on this worker of each run it writes."""
        self._claim = redis.register_script(_CLAIM_SCRIPT)
        self._beat = redis.register_script(_BEAT_SCRIPT)
        self._count = redis.register_script(_COUNT_SCRIPT)
        self._renew = redis.register_script(_RENEW_SCRIPT)
        self._end_run = redis.register_script(_END_RUN_SCRIPT)
        self._flag_cancel = redis.register_script(_CANCEL_SCRIPT)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisEventLog:
        """A log over a new client for ``url`` (``redis://host:port/db``), its pool sized
        for :data:`MAX_CONNECTIONS` connections: each follower holds one for its blocking
        read, and redis-py 8's default pool (100) would refuse the worker's writes and
        reads past about 90 concurrent followers."""
        return cls(Redis.from_url(url, max_connections=MAX_CONNECTIONS), **options)

    def _key(self, run_id: str) -> str:
        return self.prefix + run_id

    def _seconds(self, seconds: float) -> int:
        return max(1, round(seconds))

    async def _ask(self, run_id: str, what: str, call: Awaitable[_T]) -> _T:
        """``call``'s answer, a Redis error raised as the log's own (``503`` at the endpoint)."""
        try:
            return await call
        except RedisError as exc:
            raise EventLogError(run_id, f"Redis failed to {what}: {exc!r}") from exc

    def _keys(self, run_id: str) -> list[str]:
        """The run's stream, producer lease and owner record, as the scripts take them."""
        return [self._key(run_id), self.lease_prefix + run_id, self.owner_prefix + run_id]

    async def claim(self, run_id: str, owner: Owner | None = None) -> bool:
        token = secrets.token_hex(8)
        principal = None if owner is None else owner.principal
        args: list[str | int | bytes] = [
            self._seconds(self.ttl),
            token,
            round(self.producer_ttl * 1000),
            "0" if owner is None else "1",
            b"" if owner is None else _encode(owner.thread_id),
            "0" if principal is None else "1",
            b"" if principal is None else _encode(principal),
        ]
        keys = self._keys(run_id)
        if not await self._ask(run_id, "claim the run", self._claim(keys=keys, args=args)):
            return False
        self._tokens[run_id] = token
        return True

    async def owner(self, run_id: str) -> Owner | None:
        asked = self.redis.hmget(self.owner_prefix + run_id, ["thread", "principal"])
        thread, principal = await self._ask(run_id, "read the run's owner", asked)
        if thread is None:
            return None
        return Owner(_decode(thread), None if principal is None else _decode(principal))

    async def cancel(self, run_id: str) -> bool:
        keys = [self._key(run_id), self.owner_prefix + run_id]
        flagged = self._flag_cancel(keys=keys, args=[self._seconds(self.ttl)])
        return bool(await self._ask(run_id, "flag the run cancelled", flagged))

    async def cancel_requested(self, run_id: str) -> bool:
        asked = self.redis.hexists(self.owner_prefix + run_id, "cancel")
        return bool(await self._ask(run_id, "read the run's cancel flag", asked))

    async def forget(self, run_id: str) -> None:
        keys = [*self._keys(run_id), self.readers_prefix + run_id]
        await self._ask(run_id, "forget the run", self.redis.delete(*keys))

    async def readers(self, run_id: str) -> int:
        counted = self._count(keys=[self.readers_prefix + run_id])
        return int(await self._ask(run_id, "count its readers", counted))

    async def _mark_reader(self, key: str, token: str, refresh: bool) -> None:
        ttl = self.reader_ttl
        await self._beat(
            keys=[key], args=[token, ttl, self._seconds(ttl * 2), "XX" if refresh else ""]
        )

    async def _marked(self, key: str, token: str, refresh: bool) -> bool:
        """Whether marking (or refreshing) a reader's entry worked; a failure is logged,
        not raised: a reader that could not say it is there reads on all the same."""
        try:
            await self._mark_reader(key, token, refresh)
        except RedisError as exc:
            LOGGER.warning("reader %s: marking it failed: %r", key, exc)
            return False
        return True

    async def _heartbeat(self, key: str, token: str, marked: bool) -> None:
        """Keep a reader's entry until cancelled; a failed beat is logged and the next
        one tried (the entry outlives one miss: it lasts three beats), creating the
        entry if no beat has yet."""
        while True:
            await asyncio.sleep(self.reader_ttl / 3)
            marked = await self._marked(key, token, refresh=marked) or marked

    async def _hold_lease(self, run_id: str, token: str) -> None:
        """Renew the producer's lease until cancelled (at the run's end) or taken over (a
        follower ended the run after the lease lapsed: nothing more is the producer's)."""
        keys = self._keys(run_id)
        args: list[str | int] = [token, round(self.producer_ttl * 1000), self._seconds(self.ttl)]
        while True:
            await asyncio.sleep(self.producer_ttl / 3)
            try:
                if not await self._renew(keys=keys, args=args):
                    LOGGER.error("run %r: its producer lease was lost; the run was ended", run_id)
                    return
            except RedisError as exc:
                LOGGER.warning("run %r: renewing its producer lease failed: %r", run_id, exc)

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        if run_id in self._failed:
            raise EventLogError(run_id, "an earlier event could not be logged; the run ends")
        self._tokens.setdefault(run_id, secrets.token_hex(8))
        return str(await self._write(run_id, {_EVENT: dumps_wire(wire)}))

    async def _write(self, run_id: str, fields: dict[bytes, bytes | str]) -> int:
        """Queue one entry of ``run_id`` for the writer task (see :meth:`_flush`) and wait
        for its outcome; its number is taken now, in the order of the calls.

        A caller cancelled while it waits does not take its entry back: the write goes
        on (Redis may already have carried it out), so its number is spent either way
        and the run's next entry follows it.  Until then the writer counts it as written,
        as the handler's writer does (the event was checked and counted before its sink
        was awaited)."""
        seq = self._next.get(run_id, 1)
        self._next[run_id] = seq + 1
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append(_Entry(run_id, seq, fields, done))
        flusher = self._flusher
        if flusher is None or flusher.done() or flusher.get_loop() is not done.get_loop():
            self._flusher = asyncio.ensure_future(self._flush())
        return await done

    async def _flush(self) -> None:
        """The writer task: send every queued entry, in batches, until none is left.

        One batch is one pipeline (one round trip): for each run with entries in it, one
        call of the append script with all of them.  Entries queued while a batch is on
        its way go in the next, so an entry waits for at most the batch in flight and its
        own (two round trips, each bounded by ``producer_ttl``); under many concurrent
        runs a logged event costs a fraction of a round trip."""
        await asyncio.sleep(0)  # the appends made in this turn of the loop join the batch
        while self._pending:
            batch, self._pending = self._pending[:_BATCH], self._pending[_BATCH:]
            runs: dict[str, list[_Entry]] = {}
            for entry in batch:
                if entry.run_id in self._failed:
                    _settle(entry, self._refused(entry.run_id, entry.seq))
                else:
                    runs.setdefault(entry.run_id, []).append(entry)
            if not runs:
                continue
            try:
                await self._send(runs)
            except BaseException as exc:  # a bug, or the loop shutting down: none may hang
                for entries in runs.values():
                    self._failed.add(entries[0].run_id)
                    for entry in entries:
                        _settle(entry, EventLogError(entry.run_id, f"event {entry.seq}: {exc!r}"))
                raise

    def _refused(self, run_id: str, seq: int) -> EventLogError:
        return EventLogError(run_id, f"event {seq} not logged: an earlier one could not be")

    async def _send(self, runs: dict[str, list[_Entry]]) -> None:
        """Write one batch (each run's entries in one script call) and settle its entries:
        a run whose call failed, or whose batch got no answer within ``producer_ttl``
        (Redis carried it out or not: nobody can tell), fails as a whole, every entry in
        the batch and every later one raising :class:`EventLogError`."""
        calls: list[tuple[str, list[_Entry], bool, list[Any]]] = []
        for run_id, entries in runs.items():
            token = self._tokens.get(run_id)
            hold = token is not None and run_id not in self._leases
            args: list[Any] = [
                *self._keys(run_id),
                entries[0].seq,
                self.max_events,
                self._seconds(self.ttl),
                token if hold else "",
                round(self.producer_ttl * 1000),
            ]
            for entry in entries:
                args.extend(*entry.fields.items())
            calls.append((run_id, entries, hold, args))
        answers = await self._pipelined([args for *_, args in calls])
        if any(isinstance(answer, NoScriptError) for answer in answers):
            # Redis lost the script (restarted, flushed): a NOSCRIPT call was not carried
            # out, so it is sent again once the script is loaded.
            again = [i for i, answer in enumerate(answers) if isinstance(answer, NoScriptError)]
            try:
                await self.redis.script_load(_APPEND_SCRIPT)
            except RedisError as exc:
                redone: list[Any] = [exc] * len(again)
            else:
                redone = await self._pipelined([calls[i][3] for i in again])
            for i, answer in zip(again, redone, strict=True):
                answers[i] = answer
        for (run_id, entries, hold, _), answer in zip(calls, answers, strict=True):
            why = _failure(answer)
            if why is not None:
                self._failed.add(run_id)
                self._untap(run_id)
                for entry in entries:
                    _settle(entry, EventLogError(run_id, f"event {entry.seq} {why}"))
                continue
            self._done[run_id] = entries[-1].seq
            token = self._tokens.get(run_id)
            if hold and token is not None and run_id not in self._leases:
                self._leases[run_id] = asyncio.ensure_future(self._hold_lease(run_id, token))
            for tap in self._taps.get(run_id, ()):
                tap.entries.extend((f"{e.seq}-0".encode(), e.fields) for e in entries)
                tap.ready.set()
            for entry in entries:
                _settle(entry, entry.seq)

    async def _pipelined(self, calls: list[list[Any]]) -> list[Any]:
        """The append script called once per item of ``calls`` (its keys and arguments),
        in one pipeline: the answers, an exception for each call that failed (all of them
        when the round trip did, or got no answer within ``producer_ttl``)."""

        async def execute() -> list[Any]:
            pause = 0.005
            while True:
                try:
                    async with self.redis.pipeline(transaction=False) as pipe:
                        for args in calls:
                            pipe.evalsha(self._append.sha, 3, *args)
                        return list(await pipe.execute(raise_on_error=False))
                except RedisConnectionError as exc:
                    if not _no_connection(exc):
                        raise
                # Every pooled connection is taken (followers blocked in XREAD): nothing
                # was sent, so the batch waits for one (up to producer_ttl, see below).
                await asyncio.sleep(pause)
                pause = min(2 * pause, 0.1)

        sending = asyncio.ensure_future(execute())
        try:
            finished, _ = await asyncio.wait({sending}, timeout=self.producer_ttl)
        except asyncio.CancelledError:
            sending.cancel()
            raise
        if not finished:
            sending.cancel()  # not awaited: a cancellation redis-py loses must not hang this
            _LEAVING.add(sending)
            sending.add_done_callback(_LEAVING.discard)
            lost = RedisTimeoutError(f"no answer within producer_ttl ({self.producer_ttl} s)")
            return [lost] * len(calls)
        try:
            return sending.result()
        except Exception as exc:  # RedisError, or anything else redis-py lets out
            return [exc] * len(calls)

    async def end(self, run_id: str) -> None:
        lease = self._leases.pop(run_id, None)
        if lease is not None:
            lease.cancel()
        self._tokens.pop(run_id, None)
        try:
            # Queued even after a failure: it is settled once the run's earlier entries are.
            await self._write(run_id, {_END: b"1"})
        except EventLogError:
            pass  # ended below, as a failed run
        else:
            self._forget_writes(run_id)
            with contextlib.suppress(RedisError):  # else it expires with its lease
                await self.redis.delete(self.lease_prefix + run_id)
            return
        seq = self._done.get(run_id, 0) + 1
        self._forget_writes(run_id)
        self._untap(run_id)  # the end is the script's below: its followers read Redis
        LOGGER.error("run %r: ended with RUN_ERROR %s: an event was not logged", run_id, LOG_FAILED)
        await self._end_with_error(run_id, "failed", LOG_FAILED, seq)

    def _untap(self, run_id: str) -> None:
        """Send the run's tapped followers back to Redis (what comes next is not the
        writer task's to hand over)."""
        for tap in self._taps.get(run_id, ()):
            tap.stale = True
            tap.ready.set()

    def _forget_writes(self, run_id: str) -> None:
        self._next.pop(run_id, None)
        self._done.pop(run_id, None)
        self._failed.discard(run_id)

    async def _end_with_error(self, run_id: str, why: str, code: str, seq: int) -> int:
        """Run the end script (see ``_END_RUN_SCRIPT``): the producer's own, after a failed
        append, is retried (its followers wait for that terminal event); a follower's
        look at a lapsed lease is not (the next silence looks again)."""
        keys = self._keys(run_id)
        error = dumps_wire(lost_run_error(code))
        args: list[str | int] = [why, error, seq, self._seconds(self.ttl)]

        async def end() -> Any:
            return await self._end_run(keys=keys, args=args)

        if why == "failed":
            return int(await self._retried(run_id, "end the run", end))
        return int(await self._ask(run_id, "end the run", end()))

    async def resumable(self, run_id: str, after: str | None) -> bool:
        key = self._key(run_id)
        first: Any = await self._ask(run_id, "read the run", self.redis.xrange(key, count=1))
        if not first:
            return False
        position = 0 if after is None else parse_id(after)
        if position is None:
            return False
        last: Any = await self._ask(run_id, "read the run", self.redis.xrevrange(key, count=1))
        if not last:
            return False
        ((last_id, fields),) = last
        if _END in fields:  # ended: its last event is the one before the end entry
            return _seq(first[0][0]) - 1 <= position < _seq(last_id) - 1
        return _seq(first[0][0]) - 1 <= position <= _seq(last_id)

    async def read(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        key = self._key(run_id)
        entries: Any = await self._ask(run_id, "read the run", self.redis.xrange(key))
        return [
            (str(_seq(stream_id)), loads_object(fields[_EVENT], source=key))
            for stream_id, fields in entries
            if _EVENT in fields
        ]

    async def _retried(self, run_id: str, what: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call()``'s answer, a failure retried with backoff (0.1 s doubling to 1 s) for
        up to ``producer_ttl`` seconds, then raised as :class:`EventLogError`: a stall or
        a restart of Redis shorter than the producer's lease is ridden out."""
        deadline, pause = time.monotonic() + self.producer_ttl, 0.1
        while True:
            try:
                return await call()
            except RedisError as exc:
                if time.monotonic() >= deadline:
                    raise EventLogError(run_id, f"Redis failed to {what}: {exc!r}") from exc
                LOGGER.warning("run %r: Redis failed to %s, retrying: %r", run_id, what, exc)
            await asyncio.sleep(pause)
            pause = min(2 * pause, 1.0)

    async def _next_entries(self, run_id: str, cursor: str) -> Any:
        """The next entries after ``cursor`` (``[]`` after a silent blocking read)."""
        key = self._key(run_id)

        async def read() -> Any:
            return await self.redis.xread({key: cursor}, block=self.block_ms, count=512)

        found = await self._retried(run_id, "follow the run", read)
        return found[0][1] if found else []

    def _drop_tap(self, run_id: str, tap: _Tap) -> None:
        taps = self._taps.get(run_id, set())
        taps.discard(tap)
        if not taps:
            self._taps.pop(run_id, None)

    async def _read_after(self, run_id: str, cursor: str) -> Any:
        """The entries Redis holds after ``cursor`` (up to 512), without waiting."""
        key = self._key(run_id)

        async def read() -> Any:
            return await self.redis.xread({key: cursor}, count=512)

        found = await self._retried(run_id, "follow the run", read)
        return found[0][1] if found else []

    async def _tapped(self, tap: _Tap, position: int) -> Any:
        """The entries the writer task handed ``tap`` after ``position`` (``[]`` after a
        blocking read's silence); ``None`` when Redis must be read instead: the tap went
        stale, or what it holds does not follow ``position`` (a first read cut at 512)."""
        if not tap.entries and not tap.stale:
            tap.ready.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.block_ms / 1000):
                    await tap.ready.wait()
        if tap.stale:
            return None
        taken, tap.entries = tap.entries, []
        taken = [(stream_id, fields) for stream_id, fields in taken if _seq(stream_id) > position]
        if taken and _seq(taken[0][0]) != position + 1:
            return None
        return taken

    async def follow(
        self, run_id: str, after: str | None
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        position = 0 if after is None else parse_id(after)
        if position is None:
            return
        key = self._key(run_id)
        cursor = f"{position}-0"
        readers, token = self.readers_prefix + run_id, secrets.token_hex(8)
        heartbeat: asyncio.Task[None] | None = None
        tap: _Tap | None = None
        try:
            marked = await self._marked(readers, token, refresh=False)
            heartbeat = asyncio.create_task(self._heartbeat(readers, token, marked))
            while True:
                if tap is not None and tap.stale:  # the run failed: its end is in Redis
                    self._drop_tap(run_id, tap)
                    tap = None
                if tap is None and run_id in self._next and run_id not in self._failed:
                    # Written here: from now on the writer task hands the entries over
                    # (after one read of what Redis holds beyond the cursor).
                    tap = _Tap()
                    self._taps.setdefault(run_id, set()).add(tap)
                    entries = await self._read_after(run_id, cursor)
                    if not entries:
                        continue
                elif tap is not None:
                    tapped = await self._tapped(tap, position)
                    if tapped is None and tap.stale:
                        continue
                    if tapped is None:  # a gap: the first read stopped at 512 entries
                        entries = await self._read_after(run_id, cursor)
                    else:  # [] after a silence: looked into below, as a read's
                        entries = tapped
                else:
                    entries = await self._next_entries(run_id, cursor)
                if not entries:
                    # A silence: the run may be gone, or its producer dead.
                    try:
                        ended = await self._end_with_error(run_id, "lapsed", PRODUCER_LOST, 0)
                    except EventLogError as exc:  # looked at again after the next read
                        LOGGER.warning("run %r: looking at its producer failed: %s", run_id, exc)
                        continue
                    if ended < 0:
                        return  # expired or never existed: nothing more will come
                    if ended:
                        LOGGER.error(
                            "run %r: its producer's lease lapsed; ended with RUN_ERROR %s",
                            run_id,
                            PRODUCER_LOST,
                        )
                        if tap is not None:  # (its renewals here stopped): the end is Redis's
                            tap.stale = True
                    continue
                for stream_id, fields in entries:
                    if _seq(stream_id) > position + 1:
                        return  # trimmed past what the reader has seen: end, never skip
                    position = _seq(stream_id)
                    cursor = stream_id.decode() if isinstance(stream_id, bytes) else str(stream_id)
                    if _END in fields:
                        return
                    if _EVENT in fields:  # not the claim entry
                        yield str(position), loads_object(fields[_EVENT], source=key)
        finally:
            if tap is not None:
                self._drop_tap(run_id, tap)
            if heartbeat is not None:
                heartbeat.cancel()
            # Shielded, and held until done: a reader is often closed by a cancellation
            # and cancelled again while it leaves; the removal must still reach Redis, or
            # the reader would count until its entry expires.
            leaving = asyncio.ensure_future(self.redis.zrem(readers, token))
            _LEAVING.add(leaving)
            leaving.add_done_callback(_LEAVING.discard)
            with contextlib.suppress(RedisError):  # then it expires with its heartbeat
                await asyncio.shield(leaving)
