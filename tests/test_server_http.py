"""
``aguikit.server.agui_endpoint`` served by a real uvicorn on loopback, read by httpx and by
``AgentClient``: bodies, negotiation, headers, keep-alive, disconnect and backpressure.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from tests.servers import serve_asgi

from aguikit.client import AgentClient
from aguikit.models import RunAgentInput
from aguikit.server import RunWriter, agui_endpoint, create_app
from aguikit.server.http import negotiate
from aguikit.transport.sse import iter_events

BODY = {"threadId": "t1", "runId": "r1", "messages": []}


async def greet(run_input: RunAgentInput, run: RunWriter) -> None:
    """A small handler touching text, a tool call and state."""
    await run.say("Bonjour")
    call = await run.call_tool("get_weather", {"city": "Paris"})
    await run.tool_result(call, {"temperature": 21})
    await run.set_state({"city": "Paris"})
    await run.set_state({"city": "Lyon"})


def test_sse_frames_are_byte_identical_to_the_sdk_encoder() -> None:
    """Each frame is what ``ag_ui.encoder.EventEncoder().encode`` writes for that event."""
    core = pytest.importorskip("ag_ui.core")
    from ag_ui.encoder import EventEncoder
    from pydantic import TypeAdapter

    adapter = TypeAdapter(core.Event)
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json=BODY)

    frames = [f + b"\n\n" for f in response.content.split(b"\n\n") if f]
    encoder = EventEncoder()
    expected = [
        encoder.encode(adapter.validate_python(json.loads(f[len(b"data: ") :]))).encode()
        for f in frames
    ]
    assert 200 == response.status_code
    assert expected == frames
    assert 11 == len(frames)


def test_serving_headers_defeat_proxy_buffering() -> None:
    """no-cache, X-Accel-Buffering: no, keep-alive; SSE content type."""
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json=BODY)

    assert "no-cache" == response.headers["cache-control"]
    assert "no" == response.headers["x-accel-buffering"]
    assert "keep-alive" == response.headers["connection"]
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "content-length" not in response.headers


@pytest.mark.parametrize("media_type", ["application/jsonl", "application/x-ndjson"])
def test_jsonl_is_served_when_asked_for(media_type: str) -> None:
    """One compact JSON document per line, the same documents as the SSE frames."""
    with serve_asgi(create_app(greet)) as url:
        jsonl = httpx.post(url + "/", json=BODY, headers={"Accept": media_type})

    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert jsonl.headers["content-type"].startswith(media_type)
    assert "RUN_STARTED" == lines[0]["type"]
    assert "RUN_FINISHED" == lines[-1]["type"]


def test_negotiation_prefers_quality_then_order() -> None:
    """The parser behind the Accept handling."""
    assert "text/event-stream" == negotiate(None)
    assert "text/event-stream" == negotiate("*/*")
    assert "application/jsonl" == negotiate("application/jsonl, text/event-stream;q=0.5")
    assert "application/vnd.ag-ui.event+proto" == negotiate(
        "application/vnd.ag-ui.event+proto, text/event-stream"
    )
    assert "text/event-stream" == negotiate(
        "application/vnd.ag-ui.event+proto;q=0.5, text/event-stream"
    )
    assert "application/vnd.ag-ui.event+proto" == negotiate("application/vnd.ag-ui.event+proto")
    assert negotiate("application/xml") is None
    assert negotiate("text/event-stream;q=0") is None


def test_a_client_preferring_protobuf_gets_the_same_run_as_length_prefixed_frames() -> None:
    """The binary transport (issue 14) is negotiated like the others: same events, other bytes."""
    from aguikit.proto import iter_proto_wire

    with serve_asgi(create_app(greet)) as url:
        binary = httpx.post(
            url + "/", json=BODY, headers={"Accept": "application/vnd.ag-ui.event+proto"}
        )
        text = httpx.post(url + "/", json=BODY, headers={"Accept": "text/event-stream"})

    assert 200 == binary.status_code
    assert "application/vnd.ag-ui.event+proto" == binary.headers["content-type"]

    def shape(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The writer mints fresh message and tool-call ids per run; the rest must be equal.
        return [{k: v for k, v in e.items() if not k.endswith("Id")} for e in events]

    assert shape(list(iter_events([text.content]))) == shape(
        list(iter_proto_wire([binary.content]))
    )


def test_agent_client_asking_for_binary_folds_the_protobuf_answer() -> None:
    """``AgentClient(binary=True)`` and the server agree on the binary transport end to end."""
    with serve_asgi(create_app(greet)) as url:
        sse_client = AgentClient(url + "/")
        list(sse_client.run_sync(BODY))
        binary_client = AgentClient(url + "/", binary=True)
        list(binary_client.run_sync(BODY))

    assert [(m.role, m.content) for m in sse_client.messages] == [
        (m.role, m.content) for m in binary_client.messages
    ]
    assert sse_client.state == binary_client.state


def test_nothing_acceptable_is_406() -> None:
    """A client that accepts no framing the endpoint writes is told so."""
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json=BODY, headers={"Accept": "application/xml"})

    assert 406 == response.status_code
    assert "application/xml" in response.json()["detail"]


def test_an_invalid_body_is_422_listing_each_problem_with_its_pointer() -> None:
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json={"threadId": 5, "runId": "r", "messages": [{}]})

    assert 422 == response.status_code
    assert {"/threadId", "/messages/0"} <= {i["pointer"] for i in response.json()["issues"]}


def test_a_body_that_is_not_json_is_400() -> None:
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", content=b"{not json")

    assert 400 == response.status_code


def test_a_silent_handler_gets_keepalive_comments() -> None:
    """After ``keepalive`` seconds without an event, an SSE comment keeps proxies patient."""

    async def slow(run_input: RunAgentInput, run: RunWriter) -> None:
        await asyncio.sleep(0.35)
        await run.say("done")

    with serve_asgi(create_app(slow, keepalive=0.1)) as url:
        response = httpx.post(url + "/", json=BODY)

    assert response.content.count(b": keep-alive\n\n") >= 2
    assert ["RUN_STARTED", "TEXT_MESSAGE_START"] == [
        e["type"] for e in list(iter_events([response.content]))[:2]
    ]


def test_each_event_is_flushed_as_it_is_written() -> None:
    """The first frame arrives while the handler is still working."""
    release = threading.Event()

    async def waits(run_input: RunAgentInput, run: RunWriter) -> None:
        await run.say("first")
        while not release.is_set():
            await asyncio.sleep(0.01)

    with serve_asgi(create_app(waits)) as url, httpx.stream("POST", url + "/", json=BODY) as r:
        chunks = r.iter_bytes()
        first = next(chunks)
        release.set()
        rest = b"".join(chunks)

    assert first.startswith(b'data: {"type":"RUN_STARTED"')
    assert rest.rstrip().endswith(b'"outcome":{"type":"success"}}')


def test_a_client_disconnect_cancels_the_handler_and_nothing_is_written_after() -> None:
    """The handler sees CancelledError; its writer emits nothing more."""
    seen: dict[str, Any] = {}
    cancelled = threading.Event()

    async def endless(run_input: RunAgentInput, run: RunWriter) -> None:
        seen["run"] = run
        try:
            async with run.text_message() as message:
                while True:
                    await message.write("token ")
                    await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            seen["count"] = run._stream.count
            cancelled.set()
            raise

    with serve_asgi(create_app(endless)) as url:
        with httpx.stream("POST", url + "/", json=BODY) as response:
            for _ in response.iter_bytes():
                break
        assert cancelled.wait(5)
        time.sleep(0.2)

    assert seen["count"] == seen["run"]._stream.count
    assert seen["run"].ended


def test_a_slow_reader_slows_the_producer() -> None:
    """With a bounded queue the handler cannot run ahead of a reader that stopped."""
    emitted: list[int] = []
    total = 2000
    big = "x" * 16384

    async def firehose(run_input: RunAgentInput, run: RunWriter) -> None:
        async with run.text_message() as message:
            for n in range(total):
                await message.write(big)
                emitted.append(n)

    with (
        serve_asgi(create_app(firehose, queue_size=4)) as url,
        httpx.stream("POST", url + "/", json=BODY) as response,
    ):
        chunks = response.iter_bytes()
        next(chunks)
        time.sleep(0.5)
        paused_at = len(emitted)
        received = sum(1 for _ in chunks)

    assert paused_at < total // 4  # queue + socket buffers, not the whole run
    assert total == len(emitted)
    assert received > 0


def test_agent_client_consumes_the_endpoint() -> None:
    """aguikit's own client folds the stream: messages and state."""
    with serve_asgi(create_app(greet, path="/agent")) as url:
        client = AgentClient(url + "/agent")
        updates = list(client.run_sync(BODY))

    assert "RUN_FINISHED" == updates[-1].event.type
    assert "Bonjour" == client.session.messages[0].content
    assert {"city": "Lyon"} == client.session.state


def test_the_endpoint_is_a_starlette_route_and_a_fastapi_path_operation() -> None:
    """The same handler, mounted both ways, answers the same stream."""
    fastapi = pytest.importorskip("fastapi")
    api = fastapi.FastAPI()
    api.post("/agent")(agui_endpoint(greet))
    starlette_app = Starlette(routes=[Route("/agent", agui_endpoint(greet), methods=["POST"])])

    answers = []
    for app in (api, starlette_app):
        with serve_asgi(app) as url:
            events = list(iter_events([httpx.post(url + "/agent", json=BODY).content]))
        answers.append([e["type"] for e in events])

    assert answers[0] == answers[1]
    assert "RUN_FINISHED" == answers[0][-1]
