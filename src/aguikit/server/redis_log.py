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

Readers say they are there: while it follows a run, a reader keeps an entry in the sorted
set ``<readers_prefix><runId>`` (member: a random token, score: when it expires, from the
Redis server's clock, so hosts' clocks never matter), refreshed every ``reader_ttl / 3``
seconds by a task of its own (a reader stalled by a slow client still counts) and removed
when it stops.  A worker whose run lost its own reader asks :meth:`RedisEventLog.readers`
(expired entries dropped, the rest counted) to learn whether another worker's reader took
over; a reader on a worker that died without removing its entry counts until it expires.

Bounds: ``MAXLEN ~ max_events`` per stream (a resume from before the retained window is
refused), and the key expires ``ttl`` seconds after its last write.  One round trip per
event: ``XADD`` and ``EXPIRE`` go in one pipeline.

Needs ``aguikit[redis]`` (redis-py).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final  # redis-py's stream replies are loosely typed: read as Any

from redis.asyncio import Redis

from ..jsonio import dumps_wire, loads_object
from .eventlog import DEFAULT_MAX_EVENTS, DEFAULT_TTL, parse_id

__all__ = ["RedisEventLog"]

_EVENT: Final = b"e"
_END: Final = b"end"
_CLAIM: Final = b"claim"
_BLOCK_MS: Final = 5000
"""How long one blocking read waits before checking the key still exists."""
DEFAULT_READER_TTL: Final = 15.0
"""Seconds a reader counts after its last heartbeat (it beats every third of that)."""

_LEAVING: Final[set[asyncio.Future[Any]]] = set()
"""Removals of readers still on their way to Redis (the loop keeps only weak references
to tasks; a removal whose reader was cancelled has nobody else holding it)."""

_CLAIM_SCRIPT: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('XADD', KEYS[1], '0-1', 'claim', '1')
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""
"""Create the run's stream if, and only if, it does not exist (atomic: one script)."""

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


def _seq(stream_id: bytes | str) -> int:
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(text.split("-", 1)[0])


class RedisEventLog:
    """
    An :class:`~aguikit.server.eventlog.EventLog` in Redis Streams.

    Args:
        redis: A ``redis.asyncio.Redis`` client (its connection pool is shared by every
            run this worker writes or follows).
        ttl: Seconds a run's stream is kept after its last event.
        max_events: Events kept per run (approximately: ``MAXLEN ~``).
        prefix: Prepended to each run id to make its stream's key.
        readers_prefix: Prepended to each run id to make the key of its readers' set;
            neither prefix may start the other, so no run's keys meet another's.
        reader_ttl: Seconds a reader counts after its last heartbeat: how long a reader
            on a worker that died goes on keeping its run alive.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        ttl: float = DEFAULT_TTL,
        max_events: int = DEFAULT_MAX_EVENTS,
        prefix: str = "aguikit:run:",
        readers_prefix: str = "aguikit:readers:",
        reader_ttl: float = DEFAULT_READER_TTL,
    ) -> None:
        if prefix.startswith(readers_prefix) or readers_prefix.startswith(prefix):
            raise ValueError(
                f"prefix {prefix!r} and readers_prefix {readers_prefix!r} overlap: a run id "
                "could then name another run's readers"
            )
        if reader_ttl <= 0:
            raise ValueError("reader_ttl must be positive")
        self.redis = redis
        self.ttl = ttl
        self.max_events = max_events
        self.prefix = prefix
        self.readers_prefix = readers_prefix
        self.reader_ttl = reader_ttl
        self._next: dict[str, int] = {}
        """The next number of each run this worker writes (one writer per run)."""
        self._claim = redis.register_script(_CLAIM_SCRIPT)
        self._beat = redis.register_script(_BEAT_SCRIPT)
        self._count = redis.register_script(_COUNT_SCRIPT)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisEventLog:
        """A log over a new client for ``url`` (``redis://host:port/db``)."""
        return cls(Redis.from_url(url), **options)

    def _key(self, run_id: str) -> str:
        return self.prefix + run_id

    def _seconds(self, seconds: float) -> int:
        return max(1, round(seconds))

    async def claim(self, run_id: str) -> bool:
        return bool(await self._claim(keys=[self._key(run_id)], args=[self._seconds(self.ttl)]))

    async def readers(self, run_id: str) -> int:
        return int(await self._count(keys=[self.readers_prefix + run_id]))

    async def _mark_reader(self, key: str, token: str, refresh: bool) -> None:
        ttl = self.reader_ttl
        await self._beat(
            keys=[key], args=[token, ttl, self._seconds(ttl * 2), "XX" if refresh else ""]
        )

    async def _heartbeat(self, key: str, token: str) -> None:
        """Refresh a reader's entry until cancelled."""
        while True:
            await asyncio.sleep(self.reader_ttl / 3)
            await self._mark_reader(key, token, refresh=True)

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        return await self._add(run_id, {_EVENT: dumps_wire(wire)})

    async def _add(self, run_id: str, fields: Any) -> str:
        seq = self._next.get(run_id, 1)
        self._next[run_id] = seq + 1
        key = self._key(run_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(key, fields, id=f"{seq}-0", maxlen=self.max_events, approximate=True)
            pipe.expire(key, self._seconds(self.ttl))
            await pipe.execute()
        return str(seq)

    async def end(self, run_id: str) -> None:
        await self._add(run_id, {_END: b"1"})
        self._next.pop(run_id, None)

    async def resumable(self, run_id: str, after: str | None) -> bool:
        key = self._key(run_id)
        first: Any = await self.redis.xrange(key, count=1)
        if not first:
            return False
        position = 0 if after is None else parse_id(after)
        if position is None:
            return False
        last: Any = await self.redis.xrevrange(key, count=1)
        ((last_id, fields),) = last
        if _END in fields:  # ended: its last event is the one before the end entry
            return _seq(first[0][0]) - 1 <= position < _seq(last_id) - 1
        return _seq(first[0][0]) - 1 <= position <= _seq(last_id)

    async def read(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        key = self._key(run_id)
        entries: Any = await self.redis.xrange(key)
        return [
            (str(_seq(stream_id)), loads_object(fields[_EVENT], source=key))
            for stream_id, fields in entries
            if _EVENT in fields
        ]

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
        try:
            await self._mark_reader(readers, token, refresh=False)
            heartbeat = asyncio.create_task(self._heartbeat(readers, token))
            while True:
                found: Any = await self.redis.xread({key: cursor}, block=_BLOCK_MS, count=512)
                if not found:
                    if not await self.redis.exists(key):
                        return  # expired or never existed: nothing more will come
                    continue
                for stream_id, fields in found[0][1]:
                    if _seq(stream_id) > position + 1:
                        return  # trimmed past what the reader has seen: end, never skip
                    position = _seq(stream_id)
                    cursor = stream_id.decode() if isinstance(stream_id, bytes) else str(stream_id)
                    if _END in fields:
                        return
                    if _EVENT in fields:  # not the claim entry
                        yield str(position), loads_object(fields[_EVENT], source=key)
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            # Shielded, and held until done: a reader is often closed by a cancellation
            # and cancelled again while it leaves; the removal must still reach Redis, or
            # the reader would count until its entry expires.
            leaving = asyncio.ensure_future(self.redis.zrem(readers, token))
            _LEAVING.add(leaving)
            leaving.add_done_callback(_LEAVING.discard)
            await asyncio.shield(leaving)
