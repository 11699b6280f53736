"""
``aguikit.server.agui_endpoint`` served by a real uvicorn on loopback, read by httpx and by
``AgentClient``: bodies, negotiation, headers, keep-alive, disconnect and backpressure,
in the default mode (each run bound to its connection, frames exactly the SDK encoder's)
and the resumable one (an event log: frames numbered, a resume grace window, a cancel
request).
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
from tests.resume_app import Endless
from tests.servers import read_then_hang_up, serve_asgi

from aguikit.client import AgentClient
from aguikit.models import RunAgentInput
from aguikit.server import MemoryEventLog, RunWriter, agui_endpoint, create_app
from aguikit.server.http import negotiate
from aguikit.transport.sse import iter_events, iter_frames

BODY = {"threadId": "t1", "runId": "r1", "messages": []}


async def greet(run_input: RunAgentInput, run: RunWriter) -> None:
    """A small handler touching text, a tool call and state."""
    await run.say("Bonjour")
    call = await run.call_tool("get_weather", {"city": "Paris"})
    await run.tool_result(call, {"temperature": 21})
    await run.set_state({"city": "Paris"})
    await run.set_state({"city": "Lyon"})


def _sdk_encoding(frames: list[bytes]) -> list[bytes]:
    """What ``ag_ui.encoder.EventEncoder().encode`` writes for each frame's event."""
    core = pytest.importorskip("ag_ui.core")
    from ag_ui.encoder import EventEncoder
    from pydantic import TypeAdapter

    adapter = TypeAdapter(core.Event)
    encoder = EventEncoder()
    return [
        encoder.encode(adapter.validate_python(json.loads(f[len(b"data: ") :]))).encode()
        for f in frames
    ]


def test_sse_frames_are_byte_identical_to_the_sdk_encoder() -> None:
    """Connection-bound (the default): each frame is what ``EventEncoder().encode``
    writes for its event, and the answer declares no resumption."""
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json=BODY)

    frames = [f + b"\n\n" for f in response.content.split(b"\n\n") if f]
    assert 200 == response.status_code
    assert _sdk_encoding(frames) == frames
    assert 11 == len(frames)
    assert "x-agui-resume" not in response.headers


def test_with_a_log_a_frame_is_its_id_then_the_sdk_encoders_bytes() -> None:
    """Logged: ``id: N`` counting from 1, then exactly the SDK's frame."""
    with serve_asgi(create_app(greet, event_log=MemoryEventLog())) as url:
        response = httpx.post(url + "/", json=BODY)

    numbered = [f + b"\n\n" for f in response.content.split(b"\n\n") if f]
    ids = [f.split(b"\n", 1)[0] for f in numbered]
    frames = [f.split(b"\n", 1)[1] for f in numbered]
    assert 200 == response.status_code
    assert [f"id: {n}".encode() for n in range(1, 12)] == ids
    assert _sdk_encoding(frames) == frames
    assert "last-event-id" == response.headers["x-agui-resume"]


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


def test_negotiation_admits_protobuf_when_named_and_answers_sse_otherwise() -> None:
    """
    The parser behind the Accept handling, per the protobuf binding's Negotiation: naming
    the protobuf type opts in whatever its quality against SSE, everything else is SSE
    (never a refusal), and wildcards stay SSE (aguikit's documented decision).
    """
    proto = "application/vnd.ag-ui.event+proto"
    assert "text/event-stream" == negotiate(None)
    assert "text/event-stream" == negotiate("*/*")
    assert "text/event-stream" == negotiate("application/*")
    assert "application/jsonl" == negotiate("application/jsonl, text/event-stream;q=0.5")
    assert "text/event-stream" == negotiate("application/jsonl;q=0.5, text/event-stream")
    assert proto == negotiate(f"{proto}, text/event-stream")
    assert proto == negotiate(f"{proto};q=0.5, text/event-stream")
    assert proto == negotiate(f"text/event-stream, {proto};q=0.1")
    assert proto == negotiate(proto)
    assert "text/event-stream" == negotiate(f"{proto};q=0, text/event-stream")
    assert "text/event-stream" == negotiate("application/xml")
    assert "text/event-stream" == negotiate("text/event-stream;q=0")


def test_an_accept_naming_nothing_the_endpoint_writes_is_answered_in_sse() -> None:
    """'MUST answer SSE otherwise': an unknown media type gets the run, not a 406."""
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json=BODY, headers={"Accept": "application/xml"})

    assert 200 == response.status_code
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "RUN_FINISHED" in response.text


def test_a_client_preferring_protobuf_gets_the_same_run_as_length_prefixed_frames() -> None:
    """The binary transport (issue 14) is negotiated like the others: same events, other bytes."""
    from aguikit.proto import iter_proto_wire

    with serve_asgi(create_app(greet)) as url:
        binary = httpx.post(
            url + "/", json=BODY, headers={"Accept": "application/vnd.ag-ui.event+proto"}
        )
        # A fresh run id: a logged endpoint starts a run id once (409 for a second start).
        text = httpx.post(
            url + "/", json={**BODY, "runId": "r2"}, headers={"Accept": "text/event-stream"}
        )

    assert 200 == binary.status_code
    assert "application/vnd.ag-ui.event+proto" == binary.headers["content-type"]

    def shape(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The writer mints fresh message and tool-call ids per run, and the run ids
        # differ; the rest must be equal.
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
        list(binary_client.run_sync({**BODY, "runId": "r2"}))

    assert [(m.role, m.content) for m in sse_client.messages] == [
        (m.role, m.content) for m in binary_client.messages
    ]
    assert sse_client.state == binary_client.state


def test_an_invalid_body_is_422_listing_each_problem_with_its_pointer() -> None:
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json={"threadId": 5, "runId": "r", "messages": [{}]})

    assert 422 == response.status_code
    assert {"/threadId", "/messages/0"} <= {i["pointer"] for i in response.json()["issues"]}


def test_an_input_member_the_endpoint_does_not_know_does_not_invalidate_it() -> None:
    """The processing model's asymmetry binds the run input too: a member a newer client
    adds leaves the input valid and the run is served, while a malformed known field is
    refused (the processing page: "A producer receiving a run input MUST apply the same
    asymmetry to it")."""
    body = {
        **BODY,
        "futureInput": {"x": 1},
        "messages": [{"id": "u", "role": "user", "content": "hi", "mood": 1}],
    }
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(url + "/", json=body)

    assert 200 == response.status_code
    assert "RUN_FINISHED" in response.text


def test_a_body_that_is_not_json_is_400() -> None:
    with serve_asgi(create_app(greet)) as url:
        response = httpx.post(
            url + "/", content=b"{not json", headers={"Content-Type": "application/json"}
        )

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


# The first frame of each mode: connection-bound (the default), then logged.
FIRST_FRAMES = {
    "bound": b'data: {"type":"RUN_STARTED"',
    "logged": b'id: 1\ndata: {"type":"RUN_STARTED"',
}
MODES: dict[str, Any] = {"bound": dict, "logged": lambda: {"event_log": MemoryEventLog()}}
"""Each mode's ``create_app`` options, built anew for each app (a log of its own)."""


@pytest.mark.parametrize("mode", MODES)
def test_each_event_is_flushed_as_it_is_written(mode: str) -> None:
    """The first frame arrives while the handler is still working."""
    release = threading.Event()

    async def waits(run_input: RunAgentInput, run: RunWriter) -> None:
        await run.say("first")
        while not release.is_set():
            await asyncio.sleep(0.01)

    with (
        serve_asgi(create_app(waits, **MODES[mode]())) as url,
        httpx.stream("POST", url + "/", json=BODY) as r,
    ):
        chunks = r.iter_bytes()
        first = next(chunks)
        release.set()
        rest = b"".join(chunks)

    assert first.startswith(FIRST_FRAMES[mode])
    assert rest.rstrip().endswith(b'"outcome":{"type":"success"}}')


def test_a_client_disconnect_cancels_the_handler_and_nothing_is_written_after() -> None:
    """Connection-bound (the default): the handler sees CancelledError at once; nothing
    more is emitted."""
    endless = Endless()
    with serve_asgi(create_app(endless)) as url:
        with httpx.stream("POST", url + "/", json=BODY) as response:
            for _ in response.iter_bytes():
                break
        assert endless.cancelled.wait(5)
        time.sleep(0.2)

    assert endless.count_at_cancel == endless.count
    assert endless.runs[0].ended


def test_with_a_log_a_disconnect_cancels_the_handler_once_the_grace_passes() -> None:
    """The run outlives its connection for ``resume_grace``, then, with no reader back,
    the handler sees CancelledError and the handler writes nothing more; the endpoint
    closes what it left open and ends the run with the cancelled outcome (spec
    events/lifecycle, "Cancelled runs": life-08), which a resume reads rather than
    silence, and a late reconnect is told the run cannot go on (410)."""
    endless = Endless()
    with serve_asgi(create_app(endless, event_log=MemoryEventLog(), resume_grace=1.0)) as url:
        last = read_then_hang_up(url + "/", BODY)
        dropped = time.monotonic()
        assert not endless.cancelled.wait(0.6)  # waiting for a reconnect
        assert endless.cancelled.wait(10)
        waited = time.monotonic() - dropped
        time.sleep(0.2)
        logged = httpx.post(url + "/", json=BODY, headers={"Last-Event-ID": last}, timeout=30)
        frames = list(iter_frames([logged.content]))
        late = httpx.post(url + "/", json=BODY, headers={"Last-Event-ID": frames[-1].id or ""})

    assert 0.9 <= waited < 5  # the window, give or take the clocks of two threads
    assert endless.count_at_cancel + 2 == endless.count  # the endpoint's close, the end
    assert endless.runs[0].ended
    assert 200 == logged.status_code
    assert str(endless.count) == frames[-1].id  # every event logged, nothing after
    closing = [json.loads(frame.data) for frame in frames[-3:]]
    assert "TEXT_MESSAGE_CONTENT" == closing[0]["type"]
    assert {"type": "TEXT_MESSAGE_END", "messageId": closing[0]["messageId"]} == closing[1]
    assert "RUN_FINISHED" == closing[2]["type"]
    assert {"type": "cancelled"} == closing[2]["outcome"]
    assert 410 == late.status_code


def test_a_reconnect_within_the_grace_keeps_the_run_and_its_drop_starts_the_window_again() -> None:
    """A reader back in time takes the run over, past several windows; when it leaves
    too, the run is cancelled one window later."""
    endless = Endless()
    with serve_asgi(create_app(endless, event_log=MemoryEventLog(), resume_grace=0.5)) as url:
        first = read_then_hang_up(url + "/", BODY)
        time.sleep(0.2)
        second = read_then_hang_up(url + "/", BODY, first, seconds=2.0)
        assert not endless.cancelled.is_set()  # 2 s of reading: four windows
        dropped = time.monotonic()
        assert endless.cancelled.wait(10)
        waited = time.monotonic() - dropped

    assert int(second) > int(first) + 100
    assert 1 == len(endless.runs)
    assert 0.45 <= waited < 5


class _Stubborn:
    """A handler that loses the first cancellation it is sent (as a library swallowing
    one would) and goes on writing; the second one ends it."""

    def __init__(self) -> None:
        self.lost = threading.Event()
        self.ended = threading.Event()

    async def __call__(self, run_input: RunAgentInput, run: RunWriter) -> None:
        async with run.text_message() as message:
            while True:
                try:
                    await message.write("token ")
                    await asyncio.sleep(0.005)
                except asyncio.CancelledError:
                    if self.lost.is_set():
                        self.ended.set()
                        raise
                    self.lost.set()


def test_a_run_nobody_follows_is_cancelled_again_when_a_cancellation_was_lost() -> None:
    """The grace watch keeps watching until the run has ended, not until it cancelled it
    once: a lost cancellation must not leave an abandoned run going on for ever."""
    stubborn = _Stubborn()
    with serve_asgi(create_app(stubborn, event_log=MemoryEventLog(), resume_grace=0.5)) as url:
        read_then_hang_up(url + "/", BODY)
        assert stubborn.lost.wait(10)
        assert stubborn.ended.wait(10)


def test_a_failing_look_at_the_readers_does_not_end_the_grace_watch() -> None:
    """A log whose count of readers fails once (a broken pooled connection) still has its
    abandoned run cancelled: the watch looks again."""
    from aguikit.server.eventlog import MemoryEventLog

    class Flaky(MemoryEventLog):
        failures = 0

        async def readers(self, run_id: str) -> int:
            if not Flaky.failures:
                Flaky.failures += 1
                raise ConnectionError("the pooled connection broke")
            return await super().readers(run_id)

    endless = Endless()
    with serve_asgi(create_app(endless, event_log=Flaky(), resume_grace=0.5)) as url:
        read_then_hang_up(url + "/", BODY)
        assert endless.cancelled.wait(10)
    assert 1 == Flaky.failures


@pytest.mark.parametrize("media_type", ["application/jsonl", "application/vnd.ag-ui.event+proto"])
def test_with_a_log_a_framing_without_ids_gets_no_grace(media_type: str) -> None:
    """JSONL and protobuf answers cannot be resumed: a disconnect cancels at once."""
    endless = Endless()
    with serve_asgi(create_app(endless, event_log=MemoryEventLog(), resume_grace=30)) as url:
        with httpx.stream("POST", url + "/", json=BODY, headers={"Accept": media_type}) as r:
            assert media_type == r.headers["content-type"].split(";")[0]
            for _ in r.iter_bytes():
                break
        assert endless.cancelled.wait(5)

    # A joiner could still read the logged run: the endpoint closed the open message and
    # ended it with the cancelled outcome, nothing else.
    assert endless.count_at_cancel + 2 == endless.count


@pytest.mark.parametrize("mode", MODES)
def test_a_slow_reader_slows_the_producer(mode: str) -> None:
    """With a bounded queue the handler cannot run ahead of a reader that stopped (logged
    too: the connection that started the run paces it)."""
    emitted: list[int] = []
    total = 2000
    big = "x" * 16384

    async def firehose(run_input: RunAgentInput, run: RunWriter) -> None:
        async with run.text_message() as message:
            for n in range(total):
                await message.write(big)
                emitted.append(n)

    with (
        serve_asgi(create_app(firehose, queue_size=4, **MODES[mode]())) as url,
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


def test_a_run_id_starts_once_per_log_and_freely_without_one() -> None:
    """A second start of a run id in a log is 409, the same id on an endpoint with
    another log starts; a connection-bound endpoint (the default) keeps no run ids."""
    with (
        serve_asgi(create_app(greet, event_log=MemoryEventLog())) as logged,
        serve_asgi(create_app(greet, event_log=MemoryEventLog())) as other,
        serve_asgi(create_app(greet)) as bound,
    ):
        first = httpx.post(logged + "/", json=BODY)
        again = httpx.post(logged + "/", json=BODY)
        elsewhere = httpx.post(other + "/", json=BODY)
        unlogged = [httpx.post(bound + "/", json=BODY).status_code for _ in range(2)]

    assert (200, 409, 200) == (first.status_code, again.status_code, elsewhere.status_code)
    assert "r1" == again.json()["runId"]
    assert [200, 200] == unlogged


def test_a_negative_grace_is_refused() -> None:
    with pytest.raises(ValueError, match="resume_grace"):
        agui_endpoint(greet, resume_grace=-1)
