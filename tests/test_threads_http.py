"""
Threads over HTTP: each ended run recorded into its thread, a page reload restated by the
``connect`` endpoint (``aguikit.Agent.connect`` and the official ``@ag-ui/client`` with the
documented ``ThreadAgent`` subclass, in Node), history replayed ahead of a requested run,
and every refusal a problem document carrying the store's rule id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from starlette.requests import Request
from tests.node_client import NODE_DIR, run_node_script
from tests.redis_server import close_client, redis_server
from tests.servers import serve_asgi

from aguikit import Agent, Session
from aguikit.errors import HTTPStatusError
from aguikit.server import Access, Denied, MemoryEventLog, RunAgentInput, RunWriter, create_app
from aguikit.server.threads import MemoryThreadStore, new_thread_id
from aguikit.wire import to_wire

ROOT = Path(__file__).resolve().parent.parent


async def echo(run_input: RunAgentInput, run: RunWriter) -> None:
    """Answers the last user message, counts the runs in state, and pauses on an
    interrupt when asked to."""
    last = next(m for m in reversed(run_input.messages) if m.role == "user")
    text = str(last.content)
    await run.say(f"echo: {text}")
    state = dict(run_input.state or {})
    state["turns"] = int(state.get("turns", 0)) + 1
    await run.set_state(state)
    if text == "pause":
        run.interrupt("approval", interrupt_id="approve-1", message="Go on?")


def _user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def _bearer(request: Request, access: Access) -> str:
    token = request.headers.get("authorization", "")
    if not token.startswith("Bearer "):
        raise Denied(401, www_authenticate="Bearer")
    return token.removeprefix("Bearer ")


def _view(messages: list[Any]) -> list[tuple[str, str, str]]:
    wires = [m if isinstance(m, dict) else to_wire(m) for m in messages]
    return [(w["id"], w["role"], str(w.get("content"))) for w in wires]


def test_a_reloaded_agent_connects_and_gets_the_thread_the_first_page_held() -> None:
    """Two runs from one page; a fresh ``Agent`` on the thread connects and holds the same
    conversation and state, then runs on from it (the server keeps the history)."""
    store = MemoryThreadStore()
    app = create_app(echo, path="/agent", threads=store)
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> tuple[Agent, Agent]:
            page = Agent(url, thread_id="thread-1")
            page.add_message(_user("u1", "hello"))
            await page.run()
            page.add_message(_user("u2", "again"))
            await page.run()
            reloaded = Agent(url, thread_id="thread-1")
            await reloaded.connect()
            return page, reloaded

        page, reloaded = asyncio.run(scenario())
    assert _view(page.messages) == _view(reloaded.messages)
    assert page.state == reloaded.state == {"turns": 2}
    assert ["u1", "u2"] == [m["id"] for m in store._threads["thread-1"][0].messages][0::2]


def test_connect_to_an_unknown_or_foreign_thread_is_404_with_the_rule_id() -> None:
    """Unknown, deleted and another user's threads get the same ``404`` (``AGUI-E030``);
    without credentials the hook's ``401``; the owner gets the thread."""
    store = MemoryThreadStore()
    app = create_app(echo, path="/agent", threads=store, authorize=_bearer)
    body = {"threadId": "t1", "runId": "c1", "messages": [], "state": {}, "tools": []}
    run = {**body, "runId": "r1", "messages": [_user("u1", "hi")]}
    with serve_asgi(app) as base:
        alice = {"Authorization": "Bearer alice"}
        mallory = {"Authorization": "Bearer mallory"}
        with httpx.Client(base_url=base, timeout=30) as client:
            assert 200 == client.post("/agent", json=run, headers=alice).status_code
            owner = client.post("/agent/connect", json=body, headers=alice)
            foreign = client.post("/agent/connect", json=body, headers=mallory)
            unknown = client.post("/agent/connect", json={**body, "threadId": "t9"}, headers=alice)
            anonymous = client.post("/agent/connect", json=body)
            asyncio.run(store.delete("t1"))
            deleted = client.post("/agent/connect", json=body, headers=alice)
    assert 200 == owner.status_code
    kinds = [
        json.loads(line[6:])["type"] for line in owner.text.splitlines() if line[:6] == "data: "
    ]
    assert ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"] == kinds
    for answer in (foreign, unknown, deleted):
        assert (404, "AGUI-E030") == (answer.status_code, answer.json()["code"])
    assert foreign.json()["detail"] == unknown.json()["detail"].replace("t9", "t1")
    assert 401 == anonymous.status_code


def test_a_run_request_may_ask_for_the_history_ahead_of_its_run() -> None:
    """``forwardedProps.aguikit.hydrate``: a fresh page sends its new message only and gets,
    on one stream, the restating run then its own run; the handler sees the whole thread,
    and the thread keeps every message."""
    store = MemoryThreadStore()
    app = create_app(echo, path="/agent", threads=store)
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> tuple[Agent, Agent]:
            first = Agent(url, thread_id="t1")
            first.add_message(_user("u1", "hello"))
            await first.run()
            fresh = Agent(url, thread_id="t1", forwarded_props={"aguikit": {"hydrate": True}})
            fresh.add_message(_user("u2", "more"))
            await fresh.run()
            return first, fresh

        first, fresh = asyncio.run(scenario())
        with httpx.Client(base_url=base, timeout=30) as client:
            body = {
                "threadId": "nope",
                "runId": "r9",
                "messages": [],
                "state": {},
                "tools": [],
                "forwardedProps": {"aguikit": {"hydrate": True}},
            }
            refused = client.post("/agent", json=body)
    kept = list(store._threads["t1"][0].messages)
    assert ["u1", "u2"] == [m["id"] for m in kept if m["role"] == "user"]
    assert 4 == len(kept)
    # The page held u2 before the answer: a snapshot reconciling by id leaves it where it
    # was (the spec's rule, and the official client's); every message is there, once.
    assert sorted(_view(kept)) == sorted(_view(fresh.messages))
    assert _view(kept[:2]) == _view(first.messages)
    assert {"turns": 2} == fresh.state
    assert (404, "AGUI-E030") == (refused.status_code, refused.json()["code"])


def test_an_interrupted_thread_is_restated_with_its_pending_interrupt() -> None:
    """The last run paused: a connecting agent learns the interrupt it must answer."""
    app = create_app(echo, path="/agent", threads=MemoryThreadStore())
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> Agent:
            page = Agent(url, thread_id="t1")
            page.add_message(_user("u1", "pause"))
            await page.run()
            reloaded = Agent(url, thread_id="t1")
            await reloaded.connect()
            return reloaded

        reloaded = asyncio.run(scenario())
    assert ["approve-1"] == [i.id for i in reloaded.interrupts]


def test_the_official_client_connects_with_the_documented_subclass() -> None:
    """``@ag-ui/client`` 1.0.0 ``connectAgent()`` on ``ThreadAgent`` (tests/node, shown in
    docs/threads.md) holds what the Python page held, and runs on from it; the thread the
    server keeps then folds to what the Node agent holds."""
    store = MemoryThreadStore()
    app = create_app(echo, path="/agent", threads=store)
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def first_page() -> Agent:
            page = Agent(url, thread_id="t1")
            page.add_message(_user("u1", "hello"))
            await page.run()
            return page

        page = asyncio.run(first_page())
        out = run_node_script(
            "connect_thread.mjs", url, {"threadId": "t1", "runAfter": {"message": "from node"}}
        )
        unknown = run_node_script("connect_thread.mjs", url, {"threadId": "t9"})
    assert "error" not in out, out
    assert _view(page.messages) == _view(out["messages"])
    assert page.state == out["state"]
    after = out["after"]
    assert _view(after["messages"]) == _view(list(store._threads["t1"][0].messages))
    assert {"turns": 2} == after["state"] == store._threads["t1"][0].state
    assert "404" in unknown["error"]


def test_docs_show_the_subclass_the_test_runs() -> None:
    """``docs/threads.md`` carries ``tests/node/thread_agent.mjs`` verbatim."""
    docs = (ROOT / "docs" / "threads.md").read_text(encoding="utf-8")
    shown = re.search(r"```js\n(// ThreadAgent.*?)```", docs, re.DOTALL)

    assert shown is not None
    assert (NODE_DIR / "thread_agent.mjs").read_text(encoding="utf-8") == shown.group(1)


def test_a_restated_thread_passes_a_verifying_session_and_the_http_status_errors() -> None:
    """What the connect endpoint sends is one verified run, and a client without the
    thread gets ``HTTPStatusError`` 404 from ``Agent.connect``."""
    app = create_app(echo, path="/agent", threads=MemoryThreadStore())
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> None:
            with pytest.raises(HTTPStatusError) as refused:
                await Agent(url, thread_id="none").connect()
            assert 404 == refused.value.status_code

        asyncio.run(scenario())
        page = Agent(url, thread_id="t1")
        page.add_message(_user("u1", "hello"))
        page.run_sync()
        with httpx.Client(base_url=base, timeout=30) as client:
            body = {"threadId": "t1", "runId": "c1", "messages": [], "state": {}, "tools": []}
            answer = client.post(
                "/agent/connect", json=body, headers={"Accept": "application/jsonl"}
            )
    session = Session()
    session.feed_all(json.loads(line) for line in answer.text.splitlines())
    session.finish()
    assert _view(page.messages) == _view(session.messages)


# ---- background runs --------------------------------------------------------------------

WORDS = 30
PAUSE = {"seconds": 0.03}
"""Between two words; the Node test lengthens it so that Node starts well inside the run."""


async def slow(run_input: RunAgentInput, run: RunWriter) -> None:
    """Answers word by word (a few seconds in all), then counts the turn in state."""
    state = dict(run_input.state or {})
    state["turns"] = int(state.get("turns", 0)) + 1
    await run.set_state(state)
    async with run.text_message() as message:
        for index in range(WORDS):
            await message.write(f"w{index} ")
            await asyncio.sleep(PAUSE["seconds"])


def _background_app(**options: Any) -> tuple[Any, MemoryThreadStore]:
    store = MemoryThreadStore()
    app = create_app(
        slow, path="/agent", event_log=MemoryEventLog(), threads=store, background=True, **options
    )
    return app, store


def _answering(page: Agent, count: int) -> bool:
    """Whether ``page``'s run has streamed the fourth word of its answer, message
    ``count`` of its conversation."""
    session = page.session
    return (
        session is not None and len(session.messages) >= count and "w3" in str(session.messages[-1])
    )


async def _until(predicate: Any, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_an_agent_connecting_during_a_background_run_folds_what_its_starter_folds() -> None:
    """History restated, the run in progress restated compactly, then its live tail: the
    joiner ends with exactly the starter's conversation and state."""
    app, store = _background_app()
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> tuple[Agent, Agent]:
            page = Agent(url, thread_id="t1")
            page.add_message(_user("u1", "first"))
            await page.run()
            page.add_message(_user("u2", "second"))
            running = asyncio.ensure_future(page.run())
            await _until(lambda: _answering(page, 4))
            joiner = Agent(url, thread_id="t1")
            await joiner.connect()
            await running
            return page, joiner

        page, joiner = asyncio.run(scenario())
    assert _view(page.messages) == _view(joiner.messages)
    assert page.state == joiner.state == {"turns": 2}
    assert f"w{WORDS - 1} " in str(_view(joiner.messages))
    thread = store._threads["t1"][0]
    assert (None, ["finished", "finished"]) == (thread.running, [r.status for r in thread.runs])


def test_a_background_run_goes_on_without_a_reader_and_a_later_page_gets_it_whole() -> None:
    """The page that started the run leaves after a few words; the run ends anyway, is
    recorded, and a page connecting afterwards holds the whole answer."""
    app, store = _background_app()
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> Agent:
            body = {
                "threadId": "t1",
                "runId": "r1",
                "messages": [_user("u1", "go")],
                "state": {},
                "tools": [],
            }
            # The page reloads: its connection drops after a few words, no cancel request.
            async with (
                httpx.AsyncClient(timeout=30) as client,
                client.stream("POST", url, json=body) as answer,
            ):
                async for line in answer.aiter_lines():
                    if '"w2 "' in line:
                        break
            assert "r1" == store._threads["t1"][0].running
            await _until(lambda: store._threads["t1"][0].running is None)
            later = Agent(url, thread_id="t1")
            await later.connect()
            return later

        later = asyncio.run(scenario())
    text = "".join(f"w{index} " for index in range(WORDS))
    assert [("u1", "user", "go"), ("assistant", text)] == [
        _view(later.messages)[0],
        _view(later.messages)[1][1:],
    ]
    assert {"turns": 1} == later.state


def test_the_official_client_attaches_to_a_background_run_with_the_subclass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``connectAgent()`` on ``ThreadAgent`` during the run: the Node agent ends with the
    starter's conversation and state, once the run ended."""
    monkeypatch.setitem(PAUSE, "seconds", 0.2)
    app, store = _background_app()
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> tuple[Agent, dict[str, Any]]:
            page = Agent(url, thread_id="t1")
            page.add_message(_user("u1", "first"))
            await page.run()
            page.add_message(_user("u2", "second"))
            running = asyncio.ensure_future(page.run())
            await _until(lambda: _answering(page, 4))
            # Six seconds of run left: Node starts well inside it.
            assert store._threads["t1"][0].running is not None
            out = await asyncio.to_thread(
                run_node_script, "connect_thread.mjs", url, {"threadId": "t1"}
            )
            await running
            return page, out

        page, out = asyncio.run(scenario())
    assert "error" not in out, out
    assert _view(page.messages) == _view(out["messages"])
    assert page.state == out["state"]


def test_background_runs_need_a_log_and_threads_and_a_request_needs_permission() -> None:
    """Built without a log or threads: ``ValueError``; a request asking for a background
    run of an endpoint that does not allow it: ``403``."""
    with pytest.raises(ValueError, match="event_log"):
        create_app(slow, background=True, threads=MemoryThreadStore())
    with pytest.raises(ValueError, match="threads"):
        create_app(slow, allow_background=True, event_log=MemoryEventLog())
    app = create_app(slow, path="/agent", event_log=MemoryEventLog(), threads=MemoryThreadStore())
    body = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [_user("u1", "go")],
        "state": {},
        "tools": [],
        "forwardedProps": {"aguikit": {"background": True}},
    }
    with serve_asgi(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        assert 403 == client.post("/agent", json=body).status_code


# ---- deletion, and what a thread route refuses -----------------------------------------

HYDRATE = {"hydrate": True}
_CONNECT = {"threadId": "t1", "runId": "c1", "messages": [], "state": {}, "tools": []}


def _run_body(thread: str, run: str, text: str) -> dict[str, Any]:
    return {**_CONNECT, "threadId": thread, "runId": run, "messages": [_user(f"u-{run}", text)]}


class _Recording:
    """A bearer hook that keeps each ``Access`` it was asked, and refuses ``refuse``."""

    def __init__(self, refuse: str | None = None) -> None:
        self.seen: list[Access] = []
        self.refuse = refuse

    def __call__(self, request: Request, access: Access) -> str:
        self.seen.append(access)
        if access.action == self.refuse:
            raise Denied(403, f"no {access.action}")
        return _bearer(request, access)


def test_deleting_a_thread_over_http_leaves_nothing_of_it_in_redis() -> None:
    """On a real ``redis-server`` holding the threads and the runs' event log:
    ``DELETE {path}/threads/{id}`` asks the hook (``"delete"``, no run), answers another
    user and an unknown thread the same ``404`` (``AGUI-E030``, the thread untouched),
    deletes the owner's (``204``) with its runs' logs, so that a SCAN of the whole
    keyspace finds no key naming it or its runs and a connect is ``404``; a corrupt entry
    beside it is a located ``409`` (``AGUI-E032``) that leaves the other thread readable,
    and its owner may delete it."""
    from aguikit.server.redis_log import RedisEventLog
    from aguikit.server.redis_threads import RedisThreadStore

    hook = _Recording()

    async def keys() -> list[bytes]:
        redis = Redis.from_url(redis_url)
        found = [key async for key in redis.scan_iter(match="*")]
        await close_client(redis)
        return found

    with redis_server() as redis_url:
        store = RedisThreadStore.from_url(redis_url)
        log = RedisEventLog.from_url(redis_url)
        app = create_app(echo, path="/agent", threads=store, event_log=log, authorize=hook)
        alice = {"Authorization": "Bearer alice"}
        mallory = {"Authorization": "Bearer mallory"}
        with serve_asgi(app) as base, httpx.Client(base_url=base, timeout=30) as client:
            for thread, run in (("t1", "r1"), ("t1", "r2"), ("t2", "r3")):
                answer = client.post("/agent", json=_run_body(thread, run, "hi"), headers=alice)
                assert 200 == answer.status_code
            foreign = client.delete("/agent/threads/t1", headers=mallory)
            unknown = client.delete("/agent/threads/t9", headers=alice)
            anonymous = client.delete("/agent/threads/t1")
            kept = client.post("/agent/connect", json=_CONNECT, headers=alice)

            async def corrupt() -> list[bytes]:
                redis = Redis.from_url(redis_url)  # the server's client is its loop's
                raw = json.loads(await redis.get("aguikit:thread:t2"))
                raw["messages"] = "oops"
                await redis.set("aguikit:thread:t2", json.dumps(raw))
                found = [key async for key in redis.scan_iter(match="*")]
                await close_client(redis)
                return found

            before = sorted(asyncio.run(corrupt()))
            damaged = client.post(
                "/agent/connect", json={**_CONNECT, "threadId": "t2"}, headers=alice
            )
            deleted = client.delete("/agent/threads/t1", headers=alice)
            left = sorted(asyncio.run(keys()))
            again = client.delete("/agent/threads/t1", headers=alice)
            gone = client.post("/agent/connect", json=_CONNECT, headers=alice)
            cleared = client.delete("/agent/threads/t2", headers=alice)
            after = asyncio.run(keys())
    of_t1 = {b"aguikit:thread:t1", b"aguikit:run:r1", b"aguikit:run:r2", b"aguikit:owner:r1"}
    assert of_t1 | {b"aguikit:thread:t2", b"aguikit:run:r3"} <= set(before)
    assert {b"aguikit:thread:t2", b"aguikit:run:r3", b"aguikit:owner:r3"} <= set(left)
    assert not [k for k in left if b"t1" in k or k.endswith((b":r1", b":r2"))], left
    for answer in (foreign, unknown, again, gone):
        assert (404, "AGUI-E030") == (answer.status_code, answer.json()["code"])
    assert foreign.json()["detail"] == unknown.json()["detail"].replace("t9", "t1")
    assert 401 == anonymous.status_code
    assert 200 == kept.status_code and "RUN_FINISHED" in kept.text
    assert (409, "AGUI-E032") == (damaged.status_code, damaged.json()["code"])
    assert "(at /messages)" in damaged.json()["detail"]
    assert (204, 204) == (deleted.status_code, cleared.status_code)
    # The corrupt entry named no readable runs: r3's log is left to its ttl.
    assert [b"aguikit:owner:r3", b"aguikit:run:r3"] == sorted(after)
    assert ("delete", "t1", None) in [(a.action, a.thread_id, a.run_id) for a in hook.seen]


def test_expired_and_oversized_threads_are_refused_with_their_rule_never_cut() -> None:
    """A thread past its ``ttl`` is the ``404`` of an unknown one; a history over
    ``max_thread_bytes`` is ``413`` (``AGUI-E031``) to a connect and to a run asking for
    it ahead of its own, never a shorter snapshot; the thread's owner may still delete it."""
    store = MemoryThreadStore(max_thread_bytes=2_000)
    app = create_app(echo, path="/agent", threads=store)
    with serve_asgi(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        assert 200 == client.post("/agent", json=_run_body("t2", "r1", "short")).status_code
        store.ttl = 0.2
        time.sleep(0.3)
        expired = client.post("/agent/connect", json={**_CONNECT, "threadId": "t2"})
        store.ttl = 600.0
        assert 200 == client.post("/agent", json=_run_body("t1", "r1", "x" * 3_000)).status_code
        large = client.post("/agent/connect", json=_CONNECT)
        hydrate = {
            **_run_body("t1", "r3", "more"),
            "forwardedProps": {"aguikit": {"hydrate": True}},
        }
        ahead = client.post("/agent", json=hydrate)
        deleted = client.delete("/agent/threads/t1")
    assert (404, "AGUI-E030") == (expired.status_code, expired.json()["code"])
    for answer in (large, ahead):
        assert (413, "AGUI-E031") == (answer.status_code, answer.json()["code"])
        assert "max_thread_bytes" in answer.json()["detail"]
    assert 204 == deleted.status_code


def test_reading_a_thread_asks_the_hook_connect_also_when_a_run_asks_for_history() -> None:
    """A hook refusing ``"connect"`` refuses a connect and a run request asking for the
    history ahead of its run (it is asked after ``"start"``), while plain runs go on."""
    hook = _Recording(refuse="connect")
    app = create_app(echo, path="/agent", threads=MemoryThreadStore(), authorize=hook)
    alice = {"Authorization": "Bearer alice"}
    hydrate = {**_run_body("t1", "r2", "more"), "forwardedProps": {"aguikit": HYDRATE}}
    with serve_asgi(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        plain = client.post("/agent", json=_run_body("t1", "r1", "hi"), headers=alice)
        connect = client.post("/agent/connect", json=_CONNECT, headers=alice)
        ahead = client.post("/agent", json=hydrate, headers=alice)
    assert (200, 403, 403) == (plain.status_code, connect.status_code, ahead.status_code)
    assert ["start", "connect", "start", "connect"] == [a.action for a in hook.seen]


def test_deleting_a_thread_stops_its_background_run_and_its_end_does_not_bring_it_back() -> None:
    """``DELETE`` while a background run is in progress: the run is cancelled, and its end,
    recorded only into a thread that still marks it in progress, creates nothing."""
    app, store = _background_app()
    with serve_asgi(app) as base:
        url = base + "/agent"

        async def scenario() -> int:
            page = Agent(url, thread_id="t1")
            page.add_message(_user("u1", "go"))
            running = asyncio.ensure_future(page.run())
            await _until(lambda: _answering(page, 2))
            async with httpx.AsyncClient(timeout=30) as client:
                deleted = await client.delete(url + "/threads/t1")
            with contextlib.suppress(Exception):
                await running
            await asyncio.sleep(0.5)  # the run's end would have been recorded by now
            return deleted.status_code

        status = asyncio.run(scenario())
    assert 204 == status
    assert "t1" not in store._threads


def test_a_thread_the_agent_names_itself_is_an_unguessable_uuid4() -> None:
    """aguikit's server never names a thread (a run request names its own); where aguikit
    makes an id, ``Agent`` and ``new_thread_id``, it has 122 or 128 random bits."""
    ids = {Agent("http://agent.invalid/").thread_id for _ in range(200)}
    assert 200 == len(ids)
    assert {4} == {uuid.UUID(i).version for i in ids}
    assert 200 == len({new_thread_id() for _ in range(200)})
