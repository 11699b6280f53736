"""
Threads on Redis: one thread store shared by every worker and host.

Each thread is one key, ``<prefix><threadId>``, holding the thread's JSON
(:meth:`~aguikit.server.threads.Thread.to_json`) with a TTL of ``ttl`` seconds, renewed by
every update, so an abandoned thread leaves nothing behind and a deleted one is one
``DEL``.  Nothing else of a thread is stored under any other key.

Updates are compare-and-set (redis-py's own pattern for a read-modify-write: ``WATCH`` the
key, read it, fold in Python, ``MULTI``/``SET``/``EXEC``): when another worker wrote the
thread in between, ``EXEC`` fails and the update is folded again from what that worker
stored, so two workers recording runs into one thread at once both land and neither is
lost.  The fold stays in Python (:func:`aguikit.server.threads.fold`, the
:class:`~aguikit.Session` every consumer runs) rather than in a Lua script, because a
second fold would be a second truth.

An entry that cannot be read back (not JSON, not a thread of this format) is replaced by
a thread marked :data:`~aguikit.server.threads.THREAD_DAMAGED` naming the pointer of what
was wrong (its owner kept when it could be read), so its owner learns why, and nothing
else is affected.  A Redis failure is :class:`ThreadStoreError` (``AGUI-E033``): the
endpoint answers ``503``, never an empty thread.

Needs ``aguikit[redis]``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs
from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError

from ..errors import AguiError
from ..jsonio import loads_object
from .threads import (
    DEFAULT_MAX_THREAD_BYTES,
    DEFAULT_THREAD_TTL,
    THREAD_DAMAGED,
    THREAD_UNKNOWN,
    Thread,
    ThreadError,
    ThreadStoreError,
    ended,
    fold,
    readable,
)

__all__ = ["RedisThreadStore"]

DEFAULT_PREFIX: Final = "aguikit:thread:"
_ATTEMPTS: Final = 100
"""Compare-and-set rounds before an update gives up (each lost only to another update)."""


class RedisThreadStore:
    """
    A :class:`~aguikit.server.threads.ThreadStore` on Redis, shared by every worker.

    Args:
        redis: A ``redis.asyncio.Redis`` client (bytes replies).
        prefix: The keys' prefix: every key of this store starts with it.
        ttl: Seconds a thread is kept after its last update.
        max_thread_bytes: The largest folded thread kept whole (a larger one is kept
            marked :data:`~aguikit.server.threads.THREAD_TOO_LARGE`).

    .. versionadded:: 0.4.0
    """

    def __init__(
        self,
        redis: Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl: float = DEFAULT_THREAD_TTL,
        max_thread_bytes: int = DEFAULT_MAX_THREAD_BYTES,
    ) -> None:
        if ttl <= 0 or max_thread_bytes < 1:
            raise ValueError("ttl and max_thread_bytes must be positive")
        self.redis = redis
        self.prefix = prefix
        self.ttl = ttl
        self.max_thread_bytes = max_thread_bytes
        self.conflicts = 0
        """Updates this store folded again because another wrote the thread meanwhile."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisThreadStore:
        """A store on the Redis at ``url`` (``redis://host:port/db``)."""
        return cls(Redis.from_url(url), **options)

    def key(self, thread_id: str) -> str:
        """The one key holding ``thread_id``."""
        return self.prefix + thread_id

    def _read(self, thread_id: str, raw: bytes | str) -> tuple[Thread, bool]:
        """The stored thread and ``False``, or, for an unreadable entry, the damaged thread
        that replaces it (owner kept when the entry still names one) and ``True``."""
        try:
            return Thread.from_json(thread_id, raw), False
        except ThreadError as error:
            owner = None
            try:
                document = loads_object(raw)
                if isinstance(document.get("owner"), str):
                    owner = document["owner"]
            except AguiError:
                owner = None
            replacement = Thread(
                thread_id=thread_id,
                owner=owner,
                updated=time.time(),
                damaged=(THREAD_DAMAGED, f"{error.detail} (at {error.pointer or '/'})"),
            )
            return replacement, True

    async def record(
        self,
        thread_id: str,
        events: Iterable[Mapping[str, Any]],
        *,
        owner: str | None = None,
        given: Mapping[str, Any] | None = None,
    ) -> Thread:
        wires = list(events)
        changed = await self._update(
            thread_id,
            owner,
            lambda base: fold(base, wires, given=given, max_thread_bytes=self.max_thread_bytes),
        )
        assert changed is not None  # a fold always changes the thread
        return changed

    async def begin(
        self, thread_id: str, run_id: str | None, *, owner: str | None = None
    ) -> Thread:
        changed = await self._update(
            thread_id,
            owner,
            lambda base: attrs.evolve(base, running=run_id, version=base.version + 1),
        )
        assert changed is not None  # marking always changes the thread
        return changed

    async def end(
        self,
        thread_id: str,
        run_id: str,
        events: Iterable[Mapping[str, Any]],
        *,
        owner: str | None = None,
        given: Mapping[str, Any] | None = None,
    ) -> Thread | None:
        wires = list(events)
        try:
            return await self._update(
                thread_id,
                owner,
                lambda base: ended(
                    base, run_id, wires, given=given, max_thread_bytes=self.max_thread_bytes
                ),
                create=False,
            )
        except ThreadError as error:
            if error.rule == THREAD_UNKNOWN:  # another principal's: not this run's thread
                return None
            raise

    async def _update(
        self,
        thread_id: str,
        owner: str | None,
        change: Callable[[Thread], Thread | None],
        *,
        create: bool = True,
    ) -> Thread | None:
        """``change`` applied to the stored thread by compare-and-set (folded again from
        what another worker stored when it wrote in between); ``None``, nothing written,
        when ``change`` returns ``None`` or, without ``create``, there is no thread."""
        key = self.key(thread_id)
        try:
            for _ in range(_ATTEMPTS):
                async with self.redis.pipeline(transaction=True) as pipe:
                    try:
                        await pipe.watch(key)
                        raw = await pipe.get(key)
                        if raw is None and not create:
                            return None
                        base = (
                            Thread(thread_id=thread_id, owner=owner, updated=time.time())
                            if raw is None
                            else self._read(thread_id, raw)[0]
                        )
                        if base.owner != owner:
                            raise ThreadError(
                                THREAD_UNKNOWN, thread_id, "no such thread for this principal"
                            )
                        changed = change(base)
                        if changed is None:
                            return None
                        pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                        pipe.set(key, changed.to_json(), px=int(self.ttl * 1000))
                        await pipe.execute()
                        return changed
                    except WatchError:
                        self.conflicts += 1
                        await asyncio.sleep(random.uniform(0, 0.005))  # jitter, not a secret
        except RedisError as error:
            raise ThreadStoreError(thread_id, f"Redis failed: {error}") from error
        raise ThreadStoreError(thread_id, f"{_ATTEMPTS} concurrent updates won over this one")

    async def get(self, thread_id: str) -> Thread | None:
        key = self.key(thread_id)
        try:
            raw = await self.redis.get(key)
            if raw is None:
                return None
            thread, replaced = self._read(thread_id, raw)
            if replaced:
                # Mark it only if nobody rewrote it meanwhile: a sound update wins.
                async with self.redis.pipeline(transaction=True) as pipe:
                    try:
                        await pipe.watch(key)
                        if await pipe.get(key) == raw:
                            pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                            pipe.set(key, thread.to_json(), px=int(self.ttl * 1000))
                            await pipe.execute()
                    except WatchError:
                        return await self.get(thread_id)
            return thread
        except RedisError as error:
            raise ThreadStoreError(thread_id, f"Redis failed: {error}") from error

    async def load(self, thread_id: str, principal: str | None) -> Thread:
        return readable(await self.get(thread_id), thread_id, principal)

    async def delete(self, thread_id: str) -> bool:
        try:
            return bool(await self.redis.delete(self.key(thread_id)))
        except RedisError as error:
            raise ThreadStoreError(thread_id, f"Redis failed: {error}") from error
