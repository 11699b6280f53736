"""
The thread stores: what a thread's runs fold to, kept bounded, restated by snapshots, and
shared by workers on a real ``redis-server`` without a lost update.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest
from tests.redis_server import close_client, redis_server

from aguikit import Session
from aguikit.server.threads import (
    THREAD_DAMAGED,
    THREAD_STORE_FAILED,
    THREAD_TOO_LARGE,
    THREAD_UNKNOWN,
    MemoryThreadStore,
    Thread,
    ThreadError,
    fold,
    new_thread_id,
    restate,
)
from aguikit.wire import to_wire

ROOT = Path(__file__).resolve().parent.parent


def _run(thread: str, run: str, text: str, **finished: Any) -> list[dict[str, Any]]:
    """One run answering ``text`` in message ``<run>-m`` and setting ``/<run>`` in state."""
    ids = {"threadId": thread, "runId": run}
    return [
        {"type": "RUN_STARTED", **ids},
        {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-m", "delta": text[:3]},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-m", "delta": text[3:]},
        {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-m"},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": f"/{run}", "value": text}]},
        {"type": "RUN_FINISHED", **ids, **finished},
    ]


def _interrupted(thread: str, run: str, *expiries: str | None) -> list[dict[str, Any]]:
    interrupts: list[dict[str, Any]] = []
    for index, expiry in enumerate(expiries):
        interrupt: dict[str, Any] = {"id": f"i{index}", "reason": "approval"}
        if expiry is not None:
            interrupt["expiresAt"] = expiry
        interrupts.append(interrupt)
    return _run(thread, run, "Shall I?", outcome={"type": "interrupt", "interrupts": interrupts})


def _folded(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
    """What a conformant consumer folds ``events`` to (the verifier on)."""
    session = Session()
    session.feed_all(events)
    session.finish()
    return [to_wire(m) for m in session.messages], session.state


def test_a_thread_is_what_a_reader_of_every_run_folds_and_restating_it_folds_the_same() -> None:
    """Two runs folded by the store equal one reader's fold of both; the restating run
    (RUN_STARTED, MESSAGES_SNAPSHOT, STATE_SNAPSHOT, RUN_FINISHED) folds to it again, and
    is idempotent for a client that already holds the thread."""
    usage = [{"provider": "openai", "model": "gpt", "inputTokens": 12, "outputTokens": 3}]
    first, second = _run("t1", "r1", "Hello there"), _run("t1", "r2", "Again", usage=usage)
    store = MemoryThreadStore()

    async def go() -> Thread:
        await store.record("t1", first)
        return await store.record("t1", second)

    thread = asyncio.run(go())
    messages, state = _folded(first + second)

    assert (messages, state) == (list(thread.messages), thread.state)
    assert [("r1", "finished", None), ("r2", "finished", usage)] == [
        (r.run_id, r.status, r.usage) for r in thread.runs
    ]
    restated = restate(thread, "r3")
    assert ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"] == [
        e["type"] for e in restated
    ]
    assert (messages, state) == _folded(restated)
    assert (messages, state) == _folded(first + second + restated)


def test_pending_interrupts_are_restated_until_they_expire() -> None:
    """The last run paused on three interrupts: the restatement's RUN_FINISHED carries the
    two that can still be answered; a later run that is not a pause clears them."""
    store = MemoryThreadStore()
    events = _interrupted("t1", "r1", None, "2020-01-01T00:00:00Z", "2999-01-01T00:00:00Z")
    thread = asyncio.run(store.record("t1", events))

    end = restate(thread, "r2")[-1]

    assert ["i0", "i2"] == [i["id"] for i in end["outcome"]["interrupts"]]
    assert "interrupted" == thread.runs[-1].status
    _folded(restate(thread, "r2"))  # a conformant consumer accepts it
    later = asyncio.run(store.record("t1", _run("t1", "r3", "Done it")))
    assert () == later.interrupts
    assert "outcome" not in restate(later, "r4")[-1]


def test_encrypted_values_ride_their_messages_and_are_listed() -> None:
    """A reasoning message's encrypted artefact is stored with it (so the restatement
    carries it back) and listed by ``encrypted_values``."""
    events = [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {"type": "REASONING_START", "messageId": "rs"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "hmm"},
        {"type": "REASONING_MESSAGE_END", "messageId": "rm"},
        {
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": "message",
            "entityId": "rm",
            "encryptedValue": "b3BhcXVl",
            "encryptedValueType": "acme.sig",
        },
        {"type": "REASONING_END", "messageId": "rs"},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
    ]
    thread = asyncio.run(MemoryThreadStore().record("t1", events))

    assert [
        {
            "entityId": "rm",
            "subtype": "message",
            "encryptedValue": "b3BhcXVl",
            "encryptedValueType": "acme.sig",
        }
    ] == thread.encrypted_values()
    assert thread.messages == tuple(_folded(restate(thread, "r2"))[0])


def test_unknown_deleted_expired_and_foreign_threads_get_the_same_answer() -> None:
    """Never recorded, deleted, expired, or another principal's: ``AGUI-E030`` each time."""
    store = MemoryThreadStore(ttl=3600)

    async def go() -> list[str | None]:
        await store.record("mine", _run("mine", "r1", "Hello"), owner="alice")
        await store.record("gone", _run("gone", "r1", "Hello"))
        await store.record("old", _run("old", "r1", "Hello"))
        assert await store.delete("gone")
        thread, size = store._threads["old"]
        store._threads["old"] = (attrs.evolve(thread, updated=0.0), size)
        found: list[str | None] = []
        for thread_id, principal in [
            ("never", None),
            ("gone", None),
            ("old", None),
            ("mine", "mallory"),
            ("mine", None),
        ]:
            try:
                await store.load(thread_id, principal)
                found.append(None)
            except ThreadError as error:
                found.append(error.rule)
        assert "Hello" in str((await store.load("mine", "alice")).messages)
        with pytest.raises(ThreadError) as foreign:
            await store.record("mine", _run("mine", "r2", "Mine now"), owner="mallory")
        found.append(foreign.value.rule)
        return found

    assert [THREAD_UNKNOWN] * 6 == asyncio.run(go())
    assert "old" not in store._threads


def test_a_history_over_the_bound_is_refused_never_truncated() -> None:
    """A fold over ``max_thread_bytes`` keeps the runs' outcomes and nothing of the
    conversation, and loading it is ``AGUI-E031`` saying the size and the bound."""
    store = MemoryThreadStore(max_thread_bytes=600)

    async def go() -> Thread:
        await store.record("t1", _run("t1", "r1", "short"))
        await store.load("t1", None)
        return await store.record("t1", _run("t1", "r2", "x" * 1000))

    thread = asyncio.run(go())
    with pytest.raises(ThreadError) as refused:
        asyncio.run(store.load("t1", None))

    assert THREAD_TOO_LARGE == refused.value.rule
    assert "over the store's bound of 600" in str(refused.value)
    assert ((), {}) == (thread.messages, thread.state)
    assert ["r1", "r2"] == [run.run_id for run in thread.runs]
    with pytest.raises(ThreadError):
        restate(thread, "r3")


def test_a_run_the_fold_refuses_marks_its_thread_damaged_and_no_other() -> None:
    """A recorded run no verifier accepts: the thread is ``AGUI-E032`` naming the event
    and the rule; the thread beside it is restated as before."""
    store = MemoryThreadStore()
    bad = _run("t1", "r2", "Hello")
    bad[2]["messageId"] = "nowhere"

    async def go() -> Thread:
        await store.record("t1", _run("t1", "r1", "Hello"))
        await store.record("t2", _run("t2", "r1", "Fine"))
        await store.record("t1", bad)
        with pytest.raises(ThreadError) as damaged:
            await store.load("t1", None)
        assert THREAD_DAMAGED == damaged.value.rule
        assert "event 3 of the recorded events" in str(damaged.value)
        assert "AGUI-V" in str(damaged.value)
        return await store.load("t2", None)

    assert "Fine" in json.dumps(asyncio.run(go()).messages)


def test_the_memory_store_is_bounded_by_threads_and_bytes() -> None:
    """Past ``max_threads`` or ``max_total_bytes`` the least recently updated thread goes."""
    store = MemoryThreadStore(max_threads=3)

    async def go(store: MemoryThreadStore, count: int) -> None:
        for index in range(count):
            await store.record(f"t{index}", _run(f"t{index}", "r1", "Hello"))
        await store.record("t2", _run("t2", "r2", "Touch"))

    asyncio.run(go(store, 4))
    assert ["t1", "t3", "t2"] == list(store._threads)

    one = asyncio.run(MemoryThreadStore().record("t", _run("t", "r1", "Hello"))).size()
    small = MemoryThreadStore(max_total_bytes=one * 3)
    asyncio.run(go(small, 5))
    assert small.total_bytes <= one * 3 + 500
    assert "t2" in small._threads and "t0" not in small._threads


def test_thread_ids_made_by_the_server_are_unguessable() -> None:
    """128 random bits, URL-safe, never repeated."""
    ids = {new_thread_id() for _ in range(1000)}

    assert 1000 == len(ids)
    assert all(len(i) >= len("thread-") + 22 for i in ids)


def test_a_stored_thread_that_does_not_read_back_names_where() -> None:
    """Every malformed document is ``AGUI-E032`` with the pointer of what is wrong."""
    folded = fold(Thread("t1"), _run("t1", "r1", "Hi"), now=1.0)
    good = json.loads(folded.to_json())
    cases: list[tuple[Any, str]] = [
        ({**good, "messages": {}}, "/messages"),
        ({**good, "messages": [1]}, "/messages/0"),
        ({**good, "format": 9}, "/format"),
        ({**good, "runs": [{"nope": 1}]}, "/runs/0"),
        ({**good, "threadId": "t2"}, "/threadId"),
    ]
    for document, pointer in cases:
        with pytest.raises(ThreadError) as refused:
            Thread.from_json("t1", json.dumps(document))
        assert (THREAD_DAMAGED, pointer) == (refused.value.rule, refused.value.pointer)
    with pytest.raises(ThreadError) as garbage:
        Thread.from_json("t1", b"{not json")
    assert THREAD_DAMAGED == garbage.value.rule
    assert folded == Thread.from_json("t1", json.dumps(good))


# ---- on a real redis-server ------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from tests.test_threads import _run
    from aguikit.server.redis_threads import RedisThreadStore

    async def main(url, name, count):
        store = RedisThreadStore.from_url(url)
        await store.redis.blpop(["go"], timeout=60)  # both start together
        for index in range(count):
            await store.record("shared", _run("shared", f"{{name}}-{{index}}", "Hello " + name))
        print(store.conflicts)
        await store.redis.aclose()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


def test_two_workers_racing_on_one_thread_lose_no_update() -> None:
    """Two processes, each with its own connection, record 100 runs each into one thread
    at the same time (they really race: some updates are folded again): every run,
    message and state key lands exactly once."""
    from aguikit.server.redis_threads import RedisThreadStore

    count = 100
    with redis_server() as url:
        script = _WORKER.format(root=str(ROOT))
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", script, url, name, str(count)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            for name in ("a", "b")
        ]

        async def start_then_read() -> Thread | None:
            store = RedisThreadStore.from_url(url)
            try:
                for _ in range(600):  # both workers waiting (and this client): at most 30 s
                    if len(await store.redis.client_list()) >= 3:
                        break
                    await asyncio.sleep(0.05)
                await store.redis.rpush("go", 1, 1)
                await asyncio.get_running_loop().run_in_executor(
                    None, lambda: [worker.wait(timeout=120) for worker in workers]
                )
                return await store.get("shared")
            finally:
                await close_client(store.redis)

        thread = asyncio.run(start_then_read())
        outputs = [worker.communicate()[0] for worker in workers]
    assert [0, 0] == [worker.returncode for worker in workers]
    assert sum(int(out) for out in outputs) > 0, "the two workers never raced"
    assert thread is not None
    runs = sorted(run.run_id for run in thread.runs)
    expected = sorted(f"{name}-{index}" for name in "ab" for index in range(count))
    assert expected == runs
    assert expected == sorted(m["id"][:-2] for m in thread.messages)
    assert set(expected) == set(thread.state)
    assert 2 * count == thread.version


def test_on_redis_a_thread_is_one_key_with_a_ttl_and_deletion_leaves_nothing() -> None:
    """Recording writes one key under the prefix with the store's TTL; ``delete`` leaves no
    key naming the thread (a SCAN of the whole keyspace), and the thread is then unknown."""
    from aguikit.server.redis_threads import RedisThreadStore

    async def go(url: str) -> None:
        store = RedisThreadStore.from_url(url, ttl=600)
        other = RedisThreadStore.from_url(url, prefix="other:")
        await store.record("t1", _run("t1", "r1", "Hello"), owner="alice")
        await store.record("t1", _run("t1", "r2", "World"), owner="alice")
        await other.record("t2", _run("t2", "r1", "Kept"))
        keys = [key async for key in store.redis.scan_iter(match="*")]
        assert sorted([b"aguikit:thread:t1", b"other:t2"]) == sorted(keys)
        assert 0 < await store.redis.pttl("aguikit:thread:t1") <= 600_000
        thread = await store.load("t1", "alice")
        assert (list(thread.messages), thread.state) == _folded(
            _run("t1", "r1", "Hello") + _run("t1", "r2", "World")
        )
        assert await store.delete("t1")
        assert not await store.delete("t1")
        assert [b"other:t2"] == [key async for key in store.redis.scan_iter(match="*")]
        assert not [k async for k in store.redis.scan_iter(match="*t1*")]
        with pytest.raises(ThreadError) as gone:
            await store.load("t1", "alice")
        assert THREAD_UNKNOWN == gone.value.rule
        await close_client(store.redis)
        await close_client(other.redis)

    with redis_server() as url:
        asyncio.run(go(url))


def test_a_corrupt_redis_entry_is_marked_damaged_and_other_threads_are_unaffected() -> None:
    """Garbage under a thread's key: loading it is ``AGUI-E032`` naming the pointer; the
    entry is replaced by a damaged thread keeping its owner; the thread beside it loads,
    and recording into the damaged one keeps the run's outcome but never restates it."""
    from aguikit.server.redis_threads import RedisThreadStore

    async def go(url: str) -> None:
        store = RedisThreadStore.from_url(url)
        await store.record("t1", _run("t1", "r1", "Hello"), owner="alice")
        await store.record("t2", _run("t2", "r1", "Fine"), owner="alice")
        raw = json.loads(await store.redis.get("aguikit:thread:t1"))
        raw["messages"] = "oops"
        await store.redis.set("aguikit:thread:t1", json.dumps(raw))
        with pytest.raises(ThreadError) as damaged:
            await store.load("t1", "alice")
        assert THREAD_DAMAGED == damaged.value.rule
        assert "(at /messages)" in str(damaged.value)
        marked = Thread.from_json("t1", await store.redis.get("aguikit:thread:t1"))
        assert ("alice", THREAD_DAMAGED) == (marked.owner, marked.damaged and marked.damaged[0])
        with pytest.raises(ThreadError) as foreign:
            await store.load("t1", "mallory")
        assert THREAD_UNKNOWN == foreign.value.rule
        assert "Fine" in json.dumps((await store.load("t2", "alice")).messages)
        after = await store.record("t1", _run("t1", "r2", "More"), owner="alice")
        assert (["r2"], THREAD_DAMAGED) == (
            [r.run_id for r in after.runs],
            after.damaged and after.damaged[0],
        )
        await store.redis.set("aguikit:thread:t3", b"\xff not json")
        with pytest.raises(ThreadError) as unreadable:
            await store.load("t3", None)
        assert THREAD_DAMAGED == unreadable.value.rule
        await close_client(store.redis)

    with redis_server() as url:
        asyncio.run(go(url))


def test_a_redis_that_is_gone_is_a_store_failure_never_an_empty_thread() -> None:
    """Every operation on a store whose Redis stopped raises ``AGUI-E033``."""
    from aguikit.server.redis_threads import RedisThreadStore

    with redis_server() as url:
        pass
    store = RedisThreadStore.from_url(url)

    async def go() -> list[str]:
        found = []
        for call in (
            store.record("t1", _run("t1", "r1", "Hi")),
            store.load("t1", None),
            store.delete("t1"),
        ):
            with pytest.raises(ThreadError) as failed:
                await call
            found.append(failed.value.rule)
        return found

    assert [THREAD_STORE_FAILED] * 3 == asyncio.run(go())


def test_a_memory_log_forgets_an_ended_run_and_keeps_a_running_one() -> None:
    """``forget`` (a deleted thread's runs): an ended run is then unknown to the log; a
    run still running is kept (its thread's deletion cancels it instead)."""
    from aguikit.server.eventlog import MemoryEventLog, Owner

    async def go() -> tuple[Any, ...]:
        log = MemoryEventLog()
        for run in ("r1", "r2"):
            assert await log.claim(run, Owner("t1", None))
            await log.append(run, {"type": "RUN_STARTED", "threadId": "t1", "runId": run})
        await log.end("r1")
        await log.forget("r1")
        await log.forget("r2")
        return await log.owner("r1"), await log.read("r1"), await log.owner("r2")

    assert (None, [], Owner("t1", None)) == asyncio.run(go())
