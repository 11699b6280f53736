"""
The client under real cuts (issue 29, item 12): a real uvicorn server behind a TCP proxy
(tests/servers.py ``CuttingProxy``) that breaks chosen connections before the answer's
headers, inside a join's prelude, or answers 503 as a gateway would.

* A request cut before its headers is resumed when the agent declared resumption, and
  started when the resume finds that the run never began.
* A 502/503/504 on a reconnect is retried with backoff.
* Every reconnect counts against ``max_reconnects``: a join cut inside its prelude again
  and again stops after ``1 + max_reconnects`` requests, having delivered nothing twice.
* Only aguikit errors escape: a lone surrogate in a request, an unreadable URL, a header
  that is not Latin-1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from tests.resume_app import make_app
from tests.servers import CuttingProxy, serve_asgi

from aguikit import AgentClient, Session
from aguikit.errors import AguiError, HTTPStatusError, TransportError, TruncatedStreamError
from aguikit.server.eventlog import MemoryEventLog
from aguikit.wire import to_wire


@pytest.fixture
def served() -> Iterator[tuple[str, MemoryEventLog]]:
    log = MemoryEventLog()
    with serve_asgi(make_app(log)) as url:
        yield url, log


def _body(run_id: str) -> dict[str, Any]:
    return {"threadId": "t", "runId": run_id, "messages": [], "tools": [], "context": []}


async def _collect(client: AgentClient, run_id: str, *, join: bool = False) -> list[Any]:
    return [event async for event in client.aevents(_body(run_id), join=join)]


def _logged(log: MemoryEventLog, run_id: str) -> list[Any]:
    return [wire for _, wire in asyncio.run(log.read(run_id))]


def _folded(events: list[Any]) -> Any:
    """What a Session folds ``events`` to: the log keeps an ended run compacted, so a
    delivered run is compared with it by its fold (a gap or a duplicate changes it)."""
    session = Session()
    session.feed_all(events)
    session.finish()
    return [to_wire(message) for message in session.messages], session.state


def _plan(steps: dict[int, tuple[Any, ...]]) -> Any:
    return lambda n: steps.get(n)


@pytest.mark.parametrize("cut", [("before_headers",), ("refuse",)])
def test_a_cut_before_the_headers_is_resumed_when_the_agent_declared_resumption(
    served: tuple[str, MemoryEventLog], cut: tuple[str]
) -> None:
    """The first run teaches the client that the agent resumes; the second run's request
    is cut before its answer's headers, the run already started (``before_headers``) or
    not (``refuse``): the client resumes with Last-Event-ID 0 (a 410 then starts it) and
    delivers exactly the logged run, once."""
    url, log = served
    proxy = CuttingProxy(url, _plan({1: cut}))
    with proxy.running() as proxied:
        client = AgentClient(proxied + "/agent", backoff=0.01)
        asyncio.run(_collect(client, "taught"))
        assert client.server_resumes
        delivered = asyncio.run(_collect(client, "cut-early"))
    assert _folded(delivered) == _folded(_logged(log, "cut-early"))
    assert delivered[-1]["type"] == "RUN_FINISHED"
    assert proxy.connections == (3 if cut == ("before_headers",) else 4)


def test_a_cut_before_the_headers_is_final_when_the_agent_never_declared_resumption(
    served: tuple[str, MemoryEventLog],
) -> None:
    """Resending a request the agent may have started is only safe when it resumes."""
    url, _ = served
    with CuttingProxy(url, _plan({0: ("before_headers",)})).running() as proxied:
        client = AgentClient(proxied + "/agent", backoff=0.01)
        with pytest.raises(TransportError):
            asyncio.run(_collect(client, "unknown-agent"))


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_gateway_error_on_a_reconnect_is_retried(
    served: tuple[str, MemoryEventLog], status: int
) -> None:
    """Cut mid-run, the first reconnect meets a gateway error: the next one resumes."""
    url, log = served
    proxy = CuttingProxy(url, _plan({0: ("frames", 5), 1: ("status", status)}))
    with proxy.running() as proxied:
        client = AgentClient(proxied + "/agent", backoff=0.01)
        delivered = asyncio.run(_collect(client, f"gateway-{status}"))
    assert _folded(delivered) == _folded(_logged(log, f"gateway-{status}"))
    assert proxy.connections == 3


def test_gateway_errors_count_against_max_reconnects(served: tuple[str, MemoryEventLog]) -> None:
    url, _ = served
    steps = {0: ("frames", 5), **dict.fromkeys(range(1, 20), ("status", 503))}
    proxy = CuttingProxy(url, _plan(steps))
    with proxy.running() as proxied:
        client = AgentClient(proxied + "/agent", backoff=0.001, max_reconnects=3)
        with pytest.raises(TruncatedStreamError, match="3 reconnects failed"):
            asyncio.run(_collect(client, "gateway-down"))
    assert proxy.connections == 4


def test_a_join_cut_inside_its_prelude_stops_at_max_reconnects_delivering_nothing_twice(
    served: tuple[str, MemoryEventLog],
) -> None:
    """The filed case: a join broken during the prelude reconnected 1,951 times in 3 s,
    delivering 1,951 duplicates, despite max_reconnects=5.  Each answer is cut after the
    prelude's first frame: nothing is delivered (the prelude comes whole or not at all)
    and the client stops after 1 + max_reconnects requests."""
    url, _ = served
    direct = AgentClient(url + "/agent")
    asyncio.run(_collect(direct, "joined"))
    proxy = CuttingProxy(url, lambda n: ("frames", 1))
    delivered: list[Any] = []

    async def join(client: AgentClient) -> None:
        async for event in client.aevents(_body("joined"), join=True):
            delivered.append(event)

    with proxy.running() as proxied:
        client = AgentClient(proxied + "/agent", backoff=0.001, max_reconnects=5)
        with pytest.raises(TruncatedStreamError):
            asyncio.run(asyncio.wait_for(join(client), 30))
    assert proxy.connections == 6
    assert delivered == []


def test_a_join_cut_inside_its_prelude_then_served_whole_delivers_it_once(
    served: tuple[str, MemoryEventLog],
) -> None:
    url, _ = served
    asyncio.run(_collect(AgentClient(url + "/agent"), "joined-once"))
    whole = asyncio.run(_collect(AgentClient(url + "/agent"), "joined-once", join=True))
    proxy = CuttingProxy(url, _plan({0: ("frames", 1), 1: ("frames", 2)}))
    with proxy.running() as proxied:
        client = AgentClient(proxied + "/agent", backoff=0.001)
        delivered = asyncio.run(_collect(client, "joined-once", join=True))
    assert delivered == whole
    assert [e["type"] for e in delivered].count("RUN_STARTED") == 1


def test_only_aguikit_errors_escape_the_client(served: tuple[str, MemoryEventLog]) -> None:
    """A lone surrogate in a request, an unreadable URL, a header httpx cannot send."""
    url, _ = served
    body = _body("surrogate")
    body["messages"] = [{"id": "u1", "role": "user", "content": "bad \ud800"}]
    cases = [
        (AgentClient(url + "/agent"), body),
        (AgentClient("http://[::1/agent"), _body("bad-url")),
        (AgentClient(url + "/agent", headers={"X-Name": "\u263a"}), _body("bad-header")),
    ]
    for client, request in cases:
        with pytest.raises(AguiError):
            asyncio.run(_collect_body(client, request))
        with pytest.raises(AguiError):
            list(client.events(request))


async def _collect_body(client: AgentClient, body: dict[str, Any]) -> list[Any]:
    return [event async for event in client.aevents(body)]


def test_a_first_request_refused_is_raised_as_it_was(served: tuple[str, MemoryEventLog]) -> None:
    """A 503 to the first request (nothing started) stays the caller's to retry."""
    url, _ = served
    proxy = CuttingProxy(url, _plan({0: ("status", 503)}))
    with proxy.running() as proxied, pytest.raises(HTTPStatusError) as refused:
        asyncio.run(_collect(AgentClient(proxied + "/agent"), "first-503"))
    assert refused.value.status_code == 503
