"""
:class:`aguikit.transport.asgi.ASGIStreamTransport`: an in-process ASGI app streams as a
server would, against the real aguikit server (``create_app``) and plain Starlette apps.

Each test is one a buffering transport fails: ``httpx.ASGITransport`` collects the whole
body before the request returns, so a handler waiting for its client to have seen the
first delta deadlocks (the first test runs that scenario over it too, and requires the
timeout), an abort never reaches the handler, and a slow reader holds no one back.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from tests.resume_app import make_app
from tests.test_resume import _result

from aguikit import Agent, AgentClient
from aguikit.errors import TransportError
from aguikit.server import RunAgentInput, RunWriter, create_app
from aguikit.server.eventlog import MemoryEventLog
from aguikit.transport.asgi import ASGIStreamTransport

URL = "http://agent.test/agent"
BODY = {
    "threadId": "t",
    "runId": "r",
    "messages": [],
    "tools": [],
    "context": [],
    "state": {},
    "forwardedProps": {},
}
GUARD = 5.0
"""Seconds after which a scenario that a buffering transport deadlocks counts as failed."""


def _gated_app(gate: asyncio.Event) -> Any:
    """A handler that streams one delta, then waits until the test has *seen* it."""

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        async with run.text_message(message_id="m1") as message:
            await message.write("Hello")
            await asyncio.wait_for(gate.wait(), GUARD)
            await message.write(", world")

    return create_app(handler, path="/agent")


async def _live_delta(transport: Callable[[Any], httpx.AsyncBaseTransport]) -> list[str]:
    gate = asyncio.Event()
    seen: list[str] = []

    def on_text_delta(message_id: str, delta: str, text: str) -> None:
        seen.append(text)
        gate.set()

    agent = Agent(URL, transport=transport(_gated_app(gate)))
    agent.subscribe(on_text_delta=on_text_delta)
    await asyncio.wait_for(agent.run(), GUARD / 2)
    return seen


def test_a_subscriber_sees_a_delta_while_the_handler_still_runs() -> None:
    """The handler goes on only after the client saw its first delta: no deadlock."""
    assert asyncio.run(_live_delta(ASGIStreamTransport)) == ["Hello", "Hello, world"]


def test_the_same_run_over_httpx_asgi_transport_deadlocks() -> None:
    """What the test above guards against, shown: a buffering transport never delivers."""
    with pytest.raises(TimeoutError):
        asyncio.run(_live_delta(lambda app: httpx.ASGITransport(app=app)))


def test_an_agent_built_with_app_streams_too() -> None:
    """``Agent(url, app=...)`` uses the streaming transport (the gate opens in time)."""

    async def main() -> list[str]:
        gate = asyncio.Event()
        agent = Agent(URL, app=_gated_app(gate))
        texts: list[str] = []
        agent.subscribe(on_text_delta=lambda _mid, _delta, text: (texts.append(text), gate.set()))
        await asyncio.wait_for(agent.run(), GUARD / 2)
        return texts

    assert asyncio.run(main()) == ["Hello", "Hello, world"]


def test_abort_during_a_live_run_cancels_the_handler() -> None:
    """``agent.abort()`` disconnects: the handler sees CancelledError before run() returns."""
    outcome: list[str] = []

    async def main() -> bool:
        waiting = asyncio.Event()

        async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
            async with run.text_message() as message:
                await message.write("thinking")
                waiting.set()
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    outcome.append("cancelled")
                    raise
                outcome.append("finished")

        agent = Agent(URL, app=create_app(handler, path="/agent"))
        texts: list[str] = []
        delivered = asyncio.Event()

        def on_text_delta(_mid: str, _delta: str, text: str) -> None:
            texts.append(text)
            delivered.set()

        agent.subscribe(on_text_delta=on_text_delta)
        task = asyncio.create_task(agent.run())
        await asyncio.wait_for(waiting.wait(), GUARD)
        await asyncio.wait_for(delivered.wait(), GUARD)  # the run is live at the client
        agent.abort()
        result = await asyncio.wait_for(task, GUARD)
        assert texts == ["thinking"]
        return result.aborted

    assert asyncio.run(main()) is True
    assert outcome == ["cancelled"]


def test_a_slow_reader_holds_the_handler_back() -> None:
    """With the client not reading, the handler's emits stop at the queues' size."""
    emitted: list[int] = []
    total = 300

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        async with run.text_message() as message:
            for n in range(total):
                await message.write(f"w{n} ")
                emitted.append(n)

    app = create_app(handler, path="/agent", queue_size=2)

    async def main() -> tuple[int, int, bytes]:
        transport = ASGIStreamTransport(app, queue_size=1)
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("POST", URL, json=BODY) as answer,
        ):
            chunks = answer.aiter_bytes()
            data = await chunks.__anext__()
            await asyncio.sleep(0.3)  # a reader that stopped reading
            held = len(emitted)
            async for chunk in chunks:
                data += chunk
            return held, len(emitted), data

    held, finished, data = asyncio.run(main())
    assert held < 10, f"{held} emits went through while nothing was read"
    assert finished == total
    assert data.count(b"TEXT_MESSAGE_CONTENT") == total


def test_an_app_error_before_the_answer_is_the_requests_error() -> None:
    """Before ``http.response.start`` the app's own exception is raised by the request."""

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("boom before the answer")

    async def silent(scope: Any, receive: Any, send: Any) -> None:
        return None

    async def main() -> None:
        async with httpx.AsyncClient(transport=ASGIStreamTransport(broken)) as client:
            with pytest.raises(RuntimeError, match="boom before the answer"):
                await client.post(URL, json=BODY)
        async with httpx.AsyncClient(transport=ASGIStreamTransport(silent)) as client:
            with pytest.raises(httpx.RemoteProtocolError, match="without starting"):
                await client.post(URL, json=BODY)

    asyncio.run(main())


async def _breaks_mid_body(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    frame = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
    await send({"type": "http.response.body", "body": frame, "more_body": True})
    raise RuntimeError("boom mid-body")


def test_an_app_error_mid_body_is_a_read_error_after_what_was_sent() -> None:
    """After the answer started the reader gets the bytes sent, then ``httpx.ReadError``."""

    async def main() -> None:
        transport = ASGIStreamTransport(_breaks_mid_body)
        got = b""
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("POST", URL, json=BODY) as answer,
        ):
            with pytest.raises(httpx.ReadError, match="boom mid-body") as caught:
                async for chunk in answer.aiter_bytes():
                    got += chunk
        assert got.startswith(b"data: ")
        assert isinstance(caught.value.__cause__, RuntimeError)

    asyncio.run(main())


def test_the_client_reports_a_mid_body_failure_as_a_dropped_connection() -> None:
    """``AgentClient`` over the transport: a TransportError, as for a cut socket."""

    async def main() -> list[str]:
        client = AgentClient(URL, async_transport=ASGIStreamTransport(_breaks_mid_body))
        types: list[str] = []
        with pytest.raises(TransportError, match="ReadError"):
            async for update in client.run(BODY):
                types.append(update.event.type)
        return types

    assert asyncio.run(main()) == ["RUN_STARTED"]


@pytest.mark.parametrize("leave", ["break", "raise"])
def test_a_never_ending_stream_is_read_in_part_and_closed(leave: str) -> None:
    """An endless Starlette stream: read three chunks, then leave (a ``break``, or an
    exception in the consumer); the disconnect reaches the app and its generator ends."""
    closed = asyncio.Event()

    async def forever() -> AsyncIterator[bytes]:
        try:
            n = 0
            while True:
                yield f": tick {n}\n\n".encode()
                n += 1
                await asyncio.sleep(0.001)
        finally:
            closed.set()

    async def endpoint(request: Request) -> StreamingResponse:
        return StreamingResponse(forever(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])

    async def main() -> list[bytes]:
        chunks: list[bytes] = []
        async with httpx.AsyncClient(transport=ASGIStreamTransport(app)) as client:
            with contextlib.suppress(LookupError):
                async with client.stream("POST", URL, json=BODY) as answer:
                    async for chunk in answer.aiter_bytes():
                        chunks.append(chunk)
                        if len(chunks) == 3 and leave == "break":
                            break
                        if len(chunks) == 3:
                            raise LookupError("the consumer failed")
            assert closed.is_set()  # the disconnect reached the app before close returned
        return chunks

    expected = [b": tick 0\n\n", b": tick 1\n\n", b": tick 2\n\n"]
    assert asyncio.run(asyncio.wait_for(main(), GUARD)) == expected


def test_a_silent_app_times_out_like_a_socket() -> None:
    """The request's read timeout applies between chunks (``httpx.ReadTimeout``), and an
    app that ignores the disconnect is cancelled after ``close_timeout``."""
    ends: list[str] = []

    async def stalled(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        frame = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            ends.append("cancelled")
            raise

    async def main() -> None:
        client = AgentClient(
            URL,
            async_transport=ASGIStreamTransport(stalled, close_timeout=0.2),
            timeout=httpx.Timeout(5.0, read=0.2),
        )
        with pytest.raises(TransportError, match="ReadTimeout"):
            async for _ in client.run(BODY):
                pass

    asyncio.run(asyncio.wait_for(main(), GUARD))
    assert ends == ["cancelled"]


def test_the_scope_has_what_starlette_reads() -> None:
    """Path, query, headers, client, server, root path and body reach a Starlette route."""

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "url": str(request.url),
                "path": request.url.path,
                "query": dict(request.query_params),
                "client": list(request.client or ()),
                "root": request.scope["root_path"],
                "http": request.scope["http_version"],
                "header": request.headers.get("x-test"),
                "body": (await request.body()).decode(),
            }
        )

    app = Starlette(routes=[Route("/api/echo", echo, methods=["POST"])])

    async def main() -> Any:
        transport = ASGIStreamTransport(app, client=("10.0.0.7", 4242))
        async with httpx.AsyncClient(transport=transport) as client:
            answer = await client.post(
                "http://agent.test:8080/api/echo?a=1&b=two%20words",
                content=b"payload",
                headers={"X-Test": "yes"},
            )
        return answer.json()

    assert asyncio.run(main()) == {
        "url": "http://agent.test:8080/api/echo?a=1&b=two%20words",
        "path": "/api/echo",
        "query": {"a": "1", "b": "two words"},
        "client": ["10.0.0.7", 4242],
        "root": "",
        "http": "1.1",
        "header": "yes",
        "body": "payload",
    }


class _CutAfter:
    """
    ASGI middleware dropping the connection of the first ``len(cuts)`` requests after
    ``cuts[i]`` body messages: the app's ``send`` raises ``ConnectionResetError``, as a
    server's does when the peer is gone.
    """

    def __init__(self, app: Any, cuts: list[int]) -> None:
        self.app, self.cuts, self.resumes = app, list(cuts), 0

    async def __call__(self, scope: Any, receive: Any, send: Callable[[Any], Any]) -> None:
        headers = dict(scope["headers"])
        self.resumes += b"last-event-id" in headers
        limit = self.cuts.pop(0) if self.cuts else None
        sent = 0

        async def cutting(message: Any) -> None:
            nonlocal sent
            if message["type"] == "http.response.body" and limit is not None:
                if sent >= limit:
                    raise ConnectionResetError("connection cut by the test")
                sent += 1
            await send(message)

        await self.app(scope, receive, cutting)


def test_a_run_cut_in_process_resumes_with_last_event_id() -> None:
    """The resumable server in process, its connection cut mid-run again and again: the
    client reconnects over the transport and ends with the uninterrupted result."""

    async def run(app: Any) -> str:
        agent = Agent(URL, app=app, max_reconnects=50, backoff=0.001, max_backoff=0.01)
        result = await asyncio.wait_for(agent.run(), 30)
        return _result(agent, result.run_id)

    rng = random.Random(13)
    # Counted in writes: a resume of the ended run is a write or two (compacted, batched).
    cuts = [rng.randint(1, 2) for _ in range(8)]
    reference = asyncio.run(run(make_app(MemoryEventLog())))
    cutter = _CutAfter(make_app(MemoryEventLog()), cuts)
    assert asyncio.run(run(cutter)) == reference
    assert cutter.resumes == len(cuts)


def test_many_concurrent_streams_are_live_at_once() -> None:
    """Fifty runs in flight on one app: every handler waits until *all* clients have seen
    their first delta, which only streams that are live at the same time can reach."""
    count = 50

    async def main() -> list[str]:
        everyone = asyncio.Event()
        first_seen: set[str] = set()

        async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
            async with run.text_message() as message:
                await message.write(run_input.thread_id)
                await asyncio.wait_for(everyone.wait(), GUARD)
                await message.write(" done")

        app = create_app(handler, path="/agent")

        async def one(n: int) -> str:
            agent = Agent(URL, app=app, thread_id=f"t{n}")

            def seen(_mid: str, _delta: str, _text: str) -> None:
                first_seen.add(agent.thread_id)
                if len(first_seen) == count:
                    everyone.set()

            agent.subscribe(on_text_delta=seen)
            await agent.run()
            content = agent.messages[-1].content
            assert isinstance(content, str)
            return content

        return await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(count))), GUARD * 2)

    assert asyncio.run(main()) == [f"t{n} done" for n in range(50)]
