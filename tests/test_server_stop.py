"""
Stop stops: a run a client stops ends its handler at once, on the default endpoint (bound
to its connection) and on a resumable one (through the cancel request), driven by the
official TypeScript client (``@ag-ui/client`` 1.0.0 ``HttpAgent.abortRun()``) and by
aguikit's own clients, against a real uvicorn on loopback.

"At once" is asserted as under a second (the issue's bar, with the machine loaded); the
medians are measured by ``bench/bench_stop.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from tests.node_client import run_http_agent
from tests.resume_app import Endless
from tests.servers import serve_asgi

from aguikit import Agent, AgentClient
from aguikit.server import Access, Denied, MemoryEventLog, create_app

AT_ONCE = 1.0
"""Seconds from a client's stop to the handler's cancellation that count as at once."""


def _body(run_id: str, thread_id: str = "t-stop") -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": []}


def _wait_events(endless: Endless, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not endless.runs or endless.count < count:
        assert time.monotonic() < deadline, "the handler did not start writing"
        time.sleep(0.01)


def test_the_official_clients_abort_cancels_the_default_endpoints_handler_at_once() -> None:
    """The default endpoint is the standard binding: ``abortRun()`` hangs up, and the
    hang-up cancels the handler (before: 31.6 s later, with a default event log)."""
    endless = Endless()
    with serve_asgi(create_app(endless, path="/agent")) as base:
        out = run_http_agent(base + "/agent", {"threadId": "t-stop", "abortAfterEvents": 4})
        assert endless.cancelled.wait(5)

    assert endless.cancelled_at - out["abortedAt"] / 1000 < AT_ONCE
    assert endless.count_at_cancel == endless.count  # nothing written after


def test_the_official_client_stops_a_resumable_run_with_the_cancel_request() -> None:
    """``abortRun()`` then the cancel request (the run's body, ``X-AGUI-Cancel: 1``), as
    an application adds for a resumable server: ``204``, the handler cancelled at once,
    well inside the grace window."""
    endless = Endless()
    app = create_app(endless, path="/agent", event_log=MemoryEventLog(), resume_grace=30)
    with serve_asgi(app) as base:
        script = {"threadId": "t-stop", "abortAfterEvents": 4, "cancelOnAbort": True}
        out = run_http_agent(base + "/agent", script)
        assert endless.cancelled.wait(5)

    assert 204 == out["cancelStatus"]
    assert endless.cancelled_at - out["abortedAt"] / 1000 < AT_ONCE


def test_a_resumable_run_the_official_client_only_hangs_up_on_ends_with_the_grace() -> None:
    """``abortRun()`` alone sends nothing but the hang-up, which a resumable endpoint
    cannot tell from a dropped connection: the run waits ``resume_grace`` for a
    reconnect, then is cancelled (docs/resume.md)."""
    endless = Endless()
    app = create_app(endless, path="/agent", event_log=MemoryEventLog(), resume_grace=1.5)
    with serve_asgi(app) as base:
        out = run_http_agent(base + "/agent", {"threadId": "t-stop", "abortAfterEvents": 4})
        assert endless.cancelled.wait(10)

    waited = endless.cancelled_at - out["abortedAt"] / 1000
    assert 1.2 <= waited < 6  # the window, give or take a poll of the readers


class _Bearer:
    """An ``authorize`` hook: the principal is the bearer token; records each access."""

    def __init__(self) -> None:
        self.seen: list[Access] = []

    def __call__(self, request: Request, access: Access) -> str:
        self.seen.append(access)
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token == "mallory":
            raise Denied(403, "mallory may do nothing")
        return token


@contextlib.contextmanager
def _started(url: str, body: dict[str, Any], user: str) -> Iterator[Iterator[bytes]]:
    """A run started by ``user`` and read up to its first bytes, its connection open:
    the rest of its body."""
    with httpx.stream("POST", url, json=body, headers=_as(user), timeout=30) as response:
        assert 200 == response.status_code
        chunks = response.iter_bytes()
        next(chunks)
        yield chunks


def _as(user: str, cancel: bool = False) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}", **({"X-AGUI-Cancel": "1"} if cancel else {})}


def test_only_a_request_that_could_have_started_the_run_cancels_it() -> None:
    """Another principal, another thread, an unknown run id: the same ``404``, the run
    untouched; the hook's refusal is its ``403``; the owner's cancel is ``204`` and the
    handler is cancelled before the answer, and the starting connection's stream ends
    after the last event logged, with no terminal event; a second cancel finds nothing."""
    endless = Endless()
    bearer = _Bearer()
    app = create_app(endless, path="/agent", event_log=MemoryEventLog(), authorize=bearer)
    body = _body("r-owned")
    with serve_asgi(app) as base, _started(base + "/agent", body, "alice") as rest:
        url = base + "/agent"
        foreign = httpx.post(url, json=body, headers=_as("bob", cancel=True))
        elsewhere = httpx.post(url, json=_body("r-owned", "t-other"), headers=_as("alice", True))
        unknown = httpx.post(url, json=_body("r-unknown"), headers=_as("alice", cancel=True))
        refused = httpx.post(url, json=body, headers=_as("mallory", cancel=True))
        assert not endless.cancelled.is_set()
        owned = httpx.post(url, json=body, headers=_as("alice", cancel=True))
        assert endless.cancelled.is_set()  # before the answer
        again = httpx.post(url, json=body, headers=_as("alice", cancel=True))
        tail = b"".join(rest)  # ends: the run's log ended where the handler stopped

    last = tail.rstrip().rsplit(b"\n\n", 1)[-1]
    assert b'"type":"TEXT_MESSAGE_CONTENT"' in last
    assert b"RUN_FINISHED" not in tail and b"RUN_ERROR" not in tail
    assert [404, 404, 404, 403, 204, 404] == [
        r.status_code for r in (foreign, elsewhere, unknown, refused, owned, again)
    ]
    assert foreign.json()["detail"] == unknown.json()["detail"].replace("r-unknown", "r-owned")
    assert "application/problem+json" == foreign.headers["content-type"]
    cancels = [a for a in bearer.seen if a.action == "cancel"]
    assert 6 == len(cancels) and cancels[0].input is None
    assert ("t-stop", "r-owned") == (cancels[0].thread_id, cancels[0].run_id)


def test_a_connection_bound_endpoint_answers_a_cancel_request_404() -> None:
    """Nothing to cancel there: a run bound to its connection stops when it hangs up."""
    endless = Endless()
    with serve_asgi(create_app(endless, path="/agent")) as base:
        answer = httpx.post(base + "/agent", json=_body("r-any"), headers={"X-AGUI-Cancel": "1"})
    assert 404 == answer.status_code
    assert "hangs up" in answer.json()["detail"]
    assert not endless.runs


@pytest.fixture
def resumable() -> Iterator[tuple[str, Endless]]:
    """A resumable endpoint with a long grace window (a stop that only hung up would
    leave its run going), and its endless handler."""
    endless = Endless()
    app = create_app(endless, path="/agent", event_log=MemoryEventLog(), resume_grace=60)
    with serve_asgi(app) as base:
        yield base + "/agent", endless


def test_leaving_the_clients_loop_cancels_a_resumable_run(resumable: tuple[str, Endless]) -> None:
    """``AgentClient.run`` closed early (``aclosing``) sends the cancel request."""
    url, endless = resumable

    async def leave() -> float:
        async with contextlib.aclosing(AgentClient(url).run(_body("r-loop"))) as updates:
            async for _ in updates:
                if endless.count > 4:
                    break
        return time.time()

    closed = asyncio.run(leave())
    assert endless.cancelled.is_set() and endless.cancelled_at <= closed


def test_closing_a_sync_run_cancels_a_resumable_run(resumable: tuple[str, Endless]) -> None:
    url, endless = resumable
    updates = AgentClient(url).run_sync(_body("r-sync"))
    for _ in updates:
        if endless.count > 4:
            break
    updates.close()
    assert endless.cancelled.is_set()


def test_agent_abort_cancels_a_resumable_run_at_once(resumable: tuple[str, Endless]) -> None:
    """``Agent.abort()`` (the task cancelled inside the stream) sends the cancel request
    before ``run`` returns its aborted result."""
    url, endless = resumable

    async def abort() -> tuple[bool, float]:
        agent = Agent(url, thread_id="t-stop")
        task = asyncio.create_task(agent.run())
        while not endless.runs or endless.count < 5:
            await asyncio.sleep(0.01)
        stopped = time.time()
        agent.abort()
        return (await task).aborted, stopped

    aborted, stopped = asyncio.run(abort())
    assert aborted
    assert endless.cancelled.is_set() and endless.cancelled_at - stopped < AT_ONCE


def test_a_cancelled_task_cancels_a_resumable_run(resumable: tuple[str, Endless]) -> None:
    url, endless = resumable

    async def consume() -> None:
        async for _ in AgentClient(url).run(_body("r-task")):
            pass

    async def cancel() -> None:
        task = asyncio.create_task(consume())
        while not endless.runs or endless.count < 5:
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    assert endless.cancelled.is_set()


def test_a_joiner_that_leaves_does_not_cancel_the_run(resumable: tuple[str, Endless]) -> None:
    """Following is not owning: a second tab closing stops nothing."""
    url, endless = resumable
    body = _body("r-joined")
    ended = threading.Event()

    async def join_and_leave() -> None:
        agent = Agent(url, thread_id="t-stop")
        task = asyncio.create_task(agent.join("r-joined"))
        await asyncio.sleep(0.5)
        agent.abort()
        assert (await task).aborted

    with httpx.stream("POST", url, json=body, timeout=30) as started:
        next(started.iter_bytes())
        asyncio.run(join_and_leave())
        time.sleep(0.3)
        assert not endless.cancelled.is_set()
        ended.set()
    cancel = httpx.post(url, json=body, headers={"X-AGUI-Cancel": "1"})
    assert 204 == cancel.status_code and endless.cancelled.wait(5)


@pytest.mark.parametrize("when", ["streaming", "before the answer"])
def test_no_cancel_request_reaches_a_server_that_did_not_declare_resumption(when: str) -> None:
    """To a server that did not say ``X-AGUI-Resume`` (or has not answered yet) the run's
    body sent again would be a second run: stopping sends nothing more, and the hang-up
    alone stops the handler."""
    endless = Endless()
    requests: list[dict[str, str]] = []
    inner = create_app(endless, path="/agent")
    late = when == "before the answer"

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            requests.append({k.decode(): v.decode() for k, v in scope["headers"]})
            if late:
                await asyncio.sleep(1.0)  # no answer yet when the client stops
        await inner(scope, receive, send)

    async def stop(url: str) -> None:
        async def consume() -> None:
            async for _ in AgentClient(url).run(_body("r-bound")):
                pass

        task = asyncio.create_task(consume())
        while not requests or not (late or (endless.runs and endless.count > 4)):
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with serve_asgi(recording) as base:
        asyncio.run(stop(base + "/agent"))
        if not late:
            assert endless.cancelled.wait(5)
        time.sleep(1.5)
    assert 1 == len(requests) and "x-agui-cancel" not in requests[0]
