"""
The Redis Streams event log: resumable runs across worker processes and hosts.

With several workers behind a load balancer, the reconnect of a dropped client lands on
any of them, most likely not the one running the agent.  Each run is therefore one Redis
stream (``<prefix><runId>``): the worker running the handler appends every event with
``XADD`` under the explicit id ``<n>-0`` (``n`` counting from 1, the SSE ``id:`` the client
sees, the same numbering as :class:`~aguikit.server.eventlog.MemoryEventLog`), and any
worker follows it with ``XRANGE`` (what was missed) then blocking ``XREAD`` (what comes
next).  The end of the run is one more entry, ``end``, so followers stop without polling.

Bounds: ``MAXLEN ~ max_events`` per stream (a resume from before the retained window is
refused), and the key expires ``ttl`` seconds after its last write.  One round trip per
event: ``XADD`` and ``EXPIRE`` go in one pipeline.

Needs ``aguikit[redis]`` (redis-py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Final  # redis-py's stream replies are loosely typed: read as Any

from redis.asyncio import Redis

from ..jsonio import dumps_wire, loads_object
from .eventlog import DEFAULT_MAX_EVENTS, DEFAULT_TTL, parse_id

__all__ = ["RedisEventLog"]

_EVENT: Final = b"e"
_END: Final = b"end"
_BLOCK_MS: Final = 5000
"""How long one blocking read waits before checking the key still exists."""


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
        prefix: Prepended to each run id to make its key.
    """

    def __init__(
        self,
        redis: Redis,
        *,
        ttl: float = DEFAULT_TTL,
        max_events: int = DEFAULT_MAX_EVENTS,
        prefix: str = "aguikit:run:",
    ) -> None:
        self.redis = redis
        self.ttl = ttl
        self.max_events = max_events
        self.prefix = prefix
        self._next: dict[str, int] = {}
        """The next number of each run this worker writes (one writer per run)."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisEventLog:
        """A log over a new client for ``url`` (``redis://host:port/db``)."""
        return cls(Redis.from_url(url), **options)

    def _key(self, run_id: str) -> str:
        return self.prefix + run_id

    async def append(self, run_id: str, wire: Mapping[str, Any]) -> str:
        return await self._add(run_id, {_EVENT: dumps_wire(wire)})

    async def _add(self, run_id: str, fields: Any) -> str:
        seq = self._next.get(run_id, 1)
        self._next[run_id] = seq + 1
        key = self._key(run_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(key, fields, id=f"{seq}-0", maxlen=self.max_events, approximate=True)
            pipe.expire(key, max(1, round(self.ttl)))
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
        return _seq(first[0][0]) - 1 <= position <= _seq(last[0][0])

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
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        position = 0 if after is None else parse_id(after)
        if position is None:
            return
        key = self._key(run_id)
        cursor = f"{position}-0"
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
                yield str(_seq(stream_id)), loads_object(fields[_EVENT], source=key)
