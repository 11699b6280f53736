"""Tests for aguikit.transport.http: AgentClient against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from tests import corpus, support
from tests.servers import RecordingServer, Route, serve

from aguikit._generated import models as m
from aguikit._generated.registry import PROTOCOL_VERSION
from aguikit.client import AgentClient, Update, prepare_input
from aguikit.errors import (
    ContentTypeError,
    DecodeError,
    HTTPStatusError,
    ProtocolError,
    SchemaValidationError,
    TransportError,
    TruncatedStreamError,
)
from aguikit.transport.sse import encode_bytes
from aguikit.wire import to_wire

GOOD = [
    support.run_started(),
    *support.text_message("m1", "Hello, ", "wörld 🌞"),
    support.state_snapshot({"n": 1}),
    support.run_finished(),
]

INPUT = m.RunAgentInput(thread_id="t1", run_id="r1", messages=[])


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    with serve() as running:
        yield running


def test_run_sync_yields_updates_and_materialises_the_conversation(
    server: RecordingServer,
) -> None:
    """Frames split at odd byte boundaries still become one update per event, in order."""
    url = server.add(
        "/agent", Route(support.split_every(support.sse_bytes(GOOD), [1, 7, 3, 64, 2]))
    )
    client = AgentClient(url)

    updates = list(client.run_sync(INPUT))

    assert [e["type"] for e in GOOD] == [u.event.type for u in updates]
    assert all(isinstance(u, Update) for u in updates)
    assert "Hello, wörld 🌞" == client.messages[0].content
    assert {"n": 1} == client.state


def test_request_is_made_as_the_official_clients_make_it(server: RecordingServer) -> None:
    """POST, JSON body via to_wire, SSE accepted, protocol version declared, headers kept."""
    url = server.add("/agent", Route([support.sse_bytes(GOOD)]))
    client = AgentClient(url, headers={"Authorization": "Bearer x"})

    list(client.run_sync(INPUT))
    request = server.requests[0]

    assert "text/event-stream" == request.headers["accept"]
    assert "application/json" == request.headers["content-type"]
    assert "Bearer x" == request.headers["authorization"]
    assert support.run_input(protocolVersion=PROTOCOL_VERSION) == request.json()


def test_async_run_matches_the_sync_run(server: RecordingServer) -> None:
    """The async client yields the same updates from a slow, chunked answer."""
    url = server.add(
        "/agent", Route(support.split_every(support.sse_bytes(GOOD), [5, 11]), delay=0.001)
    )
    client = AgentClient(url)

    async def collect() -> list[str]:
        return [str(u.event.type) async for u in client.run(INPUT)]

    assert [e["type"] for e in GOOD] == asyncio.run(collect())
    assert {"n": 1} == client.state


def test_non_2xx_raises_http_status_error_with_the_body_start(server: RecordingServer) -> None:
    """A 500 is an HTTPStatusError carrying the status and the start of the body."""
    url = server.add(
        "/agent",
        Route([b'{"error": "model overloaded"}'], status=503, content_type="application/json"),
    )

    with pytest.raises(HTTPStatusError) as info:
        list(AgentClient(url).run_sync(INPUT))

    assert 503 == info.value.status_code
    assert "model overloaded" in info.value.body


def test_async_non_2xx_raises_http_status_error(server: RecordingServer) -> None:
    """The async client reports a non-2xx answer the same way."""
    url = server.add("/agent", Route([b"nope"], status=401, content_type="text/plain"))

    async def collect() -> None:
        async for _ in AgentClient(url).run(INPUT):
            pass

    with pytest.raises(HTTPStatusError) as info:
        asyncio.run(collect())

    assert (401, "nope") == (info.value.status_code, info.value.body)


def test_wrong_content_type_raises_content_type_error(server: RecordingServer) -> None:
    """A 200 that is not an event stream is refused before any byte is decoded."""
    url = server.add("/agent", Route([b"<html></html>"], content_type="text/html; charset=utf-8"))

    with pytest.raises(ContentTypeError) as info:
        list(AgentClient(url).run_sync(INPUT))

    assert "text/html; charset=utf-8" == info.value.content_type


def test_a_checker_sees_the_answer_and_may_read_a_mislabelled_body(
    server: RecordingServer,
) -> None:
    """``on_response`` gets status and headers; ``require_event_stream=False`` reads on."""
    from aguikit.transport.http import apost_stream, post_stream

    url = server.add("/agent", Route([support.sse_bytes(GOOD)], content_type="text/plain"))
    seen: list[tuple[int, str | None]] = []

    def hook(status: int, headers: Any) -> None:
        seen.append((status, headers.get("content-type")))

    wire = to_wire(INPUT)
    body = b"".join(post_stream(url, wire, on_response=hook, require_event_stream=False))

    async def collect() -> bytes:
        chunks = apost_stream(url, wire, on_response=hook, require_event_stream=False)
        return b"".join([chunk async for chunk in chunks])

    assert support.sse_bytes(GOOD) == body == asyncio.run(collect())
    assert [(200, "text/plain"), (200, "text/plain")] == seen
    with pytest.raises(ContentTypeError):
        list(post_stream(url, wire))


def test_content_type_parameters_are_accepted(server: RecordingServer) -> None:
    """``text/event-stream; charset=utf-8`` is still an event stream."""
    url = server.add(
        "/agent", Route([support.sse_bytes(GOOD)], content_type="Text/Event-Stream; charset=utf-8")
    )

    assert len(GOOD) == len(list(AgentClient(url).run_sync(INPUT)))


def test_stream_ending_before_run_finished_is_truncated(server: RecordingServer) -> None:
    """Events up to the break are delivered, then TruncatedStreamError is raised."""
    url = server.add("/agent", Route([support.sse_bytes(GOOD[:3])]))
    client = AgentClient(url)
    seen: list[str] = []

    with pytest.raises(TruncatedStreamError):
        for update in client.run_sync(INPUT):
            seen.append(str(update.event.type))

    assert ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"] == seen


def test_stream_ending_inside_a_frame_is_a_decode_error(server: RecordingServer) -> None:
    """Bytes that stop mid-frame are a DecodeError naming the frame."""
    body = support.sse_bytes(GOOD)
    url = server.add("/agent", Route([body[: len(body) - 30]]))

    with pytest.raises(DecodeError) as info:
        list(AgentClient(url).run_sync(INPUT))

    assert len(GOOD) == info.value.frame


def test_connection_dropped_mid_body_is_a_transport_error(server: RecordingServer) -> None:
    """A connection closed before the chunked body ends is a TransportError, not httpx's."""
    url = server.add("/agent", Route([support.sse_bytes(GOOD[:2])], drop=True))

    with pytest.raises(TransportError) as info:
        list(AgentClient(url).run_sync(INPUT))

    assert url == info.value.url


def test_nothing_listening_is_a_transport_error() -> None:
    """A refused connection is a TransportError."""
    with serve() as dead:
        url = dead.url("/agent")

    with pytest.raises(TransportError):
        list(AgentClient(url, timeout=2).run_sync(INPUT))


def test_protocol_violation_raises_protocol_error(server: RecordingServer) -> None:
    """Content for a message that was never started is a ProtocolError with its rule."""
    bad = [GOOD[0], {"type": "TEXT_MESSAGE_CONTENT", "messageId": "zz", "delta": "x"}, GOOD[-1]]
    url = server.add("/agent", Route([support.sse_bytes(bad)]))

    with pytest.raises(ProtocolError) as info:
        list(AgentClient(url).run_sync(INPUT))

    assert info.value.rule.startswith("AGUI-")
    assert 1 == info.value.event_index


def _slow(count: int = 200) -> Route:
    events = [GOOD[0], GOOD[1]]
    events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "x"}] * count
    return Route([encode_bytes(e) for e in events], delay=0.02)


def test_closing_the_sync_iterator_closes_the_connection(server: RecordingServer) -> None:
    """Breaking out early hangs up: the server's next write fails."""
    url = server.add("/slow", _slow())
    updates = AgentClient(url).run_sync(INPUT)
    for update in updates:
        if update.event.type == "TEXT_MESSAGE_START":
            break
    updates.close()  # type: ignore[attr-defined]

    assert server.disconnected.wait(5)
    assert not server.completed.is_set()


def test_cancelling_the_async_run_closes_the_connection(server: RecordingServer) -> None:
    """Cancelling the consuming task hangs up too."""
    url = server.add("/slow", _slow())

    streaming = asyncio.Event()

    async def consume() -> None:
        async for _ in AgentClient(url).run(INPUT):
            streaming.set()

    async def main() -> None:
        task = asyncio.create_task(consume())
        # Cancelled once the answer streams: cancelled before it connects, there is nothing
        # to hang up (on a loaded machine a fixed sleep can end before the connection).
        await asyncio.wait_for(streaming.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())

    assert server.disconnected.wait(5)


def test_caller_protocol_version_is_kept() -> None:
    """An input that declares its own protocolVersion is sent as declared."""
    body = prepare_input(support.run_input(protocolVersion="0.9"))

    assert "0.9" == body["protocolVersion"]


def test_legacy_binary_part_is_upgraded_to_a_modern_media_part() -> None:
    """A retired ``binary`` part becomes the image/audio/document part it stands for."""
    legacy = {"type": "binary", "mimeType": "audio/ogg", "data": "AAAA", "filename": "a.ogg"}
    body = prepare_input(
        support.run_input(messages=[{"id": "u", "role": "user", "content": [legacy]}])
    )

    assert [
        {
            "type": "audio",
            "source": {"type": "data", "value": "AAAA", "mimeType": "audio/ogg"},
            "metadata": {"filename": "a.ogg"},
        }
    ] == body["messages"][0]["content"]


def test_the_request_leaves_out_activity_messages_and_undescribed_material_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Immediately before transmission the client removes what the schema does not describe
    and says so (the processing page's "Outgoing material"), and activity messages, which
    never travel back to the producer (the run input page: "a consumer MUST strip them");
    a malformed known field still raises before anything is sent."""
    warnings: list[str] = []
    body = prepare_input(
        support.run_input(
            messages=[
                {"id": "a1", "role": "activity", "activityType": "search", "content": {}},
                {"id": "u1", "role": "user", "content": "hi", "mood": "curious"},
            ],
            futureInput={"x": 1},
        ),
        warnings=warnings,
    )

    assert (
        support.run_input(
            messages=[{"id": "u1", "role": "user", "content": "hi"}],
            protocolVersion=PROTOCOL_VERSION,
        )
        == body
    )
    assert ["AGUI-W002", "AGUI-W002", "AGUI-W023"] == [w.split()[0] for w in warnings]
    assert ["/messages/1/mood", "/futureInput"] == [w.split("'")[1] for w in warnings[:2]]
    assert "'a1'" in warnings[2]
    logged = [r.getMessage() for r in caplog.records if r.name == "aguikit"]
    assert all(any(w.split(": ", 1)[1] in line for line in logged) for w in warnings[:2])
    with pytest.raises(SchemaValidationError):
        prepare_input(support.run_input(messages=[{"id": "u1", "role": "user", "content": 5}]))


def test_a_lossy_downgrade_names_what_it_dropped_and_what_keeps_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A downgrade that drops content warns, naming the shape dropped and the version that
    keeps it (the versioning page: "It MUST identify the shape that was dropped, and
    SHOULD say what to upgrade to remove it"), and is never silent by default."""
    message = {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "url", "value": "https://x/a.png"}},
        ],
        "encryptedValue": "b3BhcXVl",
        "encryptedValueType": "acme.sig",
    }
    for peer, expected in (
        ("1.0", ["/messages/0/encryptedValueType left out", "a peer of 1.1 keeps it"]),
        ("0.0.39", ["DROPS non-text parts: image", "a peer of 0.0.40 or newer keeps them"]),
    ):
        warnings: list[str] = []
        caplog.clear()
        prepare_input(
            support.run_input(messages=[message]), max_protocol_version=peer, warnings=warnings
        )

        assert all(any(part in w for w in warnings) for part in expected), warnings
        assert len(warnings) == len(caplog.records)


def test_a_run_folds_its_deltas_against_the_state_its_input_carried(
    server: RecordingServer,
) -> None:
    """The consumer's baseline at the start of a run is the input's state (the snapshots
    page), so the run's first STATE_DELTA applies to it rather than to ``{}``."""
    stream = [
        support.run_started(),
        support.state_delta([{"op": "replace", "path": "/count", "value": 2}]),
        support.run_finished(),
    ]
    url = server.add("/agent", Route([support.sse_bytes(stream)]))
    client = AgentClient(url)

    list(client.run_sync(support.run_input(state={"count": 1, "name": "n"})))

    assert {"count": 2, "name": "n"} == client.state
    assert [] == client.session.warnings


# --- the corpus's request expectations ---------------------------------------------------


def _request_cases() -> list[Any]:
    return corpus.params(
        [s for s in corpus.streams() if "request" in s.expect or "requestAbsentPaths" in s.expect]
    )


@pytest.mark.parametrize("case", _request_cases())
def test_corpus_request_expectations(case: corpus.Stream, server: RecordingServer) -> None:
    """The RunAgentInput sent for each corpus fixture matches its request expectations."""
    expect = case.expect
    # Each corpus is written for a client of its own version; aguikit's default speaks the
    # newest (1.1), and the older corpora get a client declaring what they were written for.
    written_for = {"draft": "1.0", "1.0": "1.0"}.get(case.corpus)
    versioned = {} if written_for is None else {"protocol_version": written_for}
    started = case.events[0]
    run_input = support.run_input(
        run_id=started.get("runId", "r"),
        thread_id=started.get("threadId", "t"),
        **(case.input or {}),
    )
    url = server.add("/corpus", Route([support.sse_bytes(case.events)]))
    client = AgentClient(
        url, max_protocol_version=(case.client or {}).get("maxProtocolVersion"), **versioned
    )

    list(client.run_sync(run_input))
    sent = server.requests[-1].json()

    assert corpus.subset_match(expect.get("request", {}), sent), sent
    for path in expect.get("requestAbsentPaths", []):
        assert corpus.MISSING is corpus.dotted_get(sent, path), path
    for fragment in expect.get("warnings", []):
        assert any(fragment in w for w in client.request_warnings), client.request_warnings


class _FailedImports:
    """A last finder on ``sys.meta_path``: asked only for a module no other finder found,
    it notes the name."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        self.names.append(name)


def test_a_request_imports_nothing_that_fails(server: RecordingServer) -> None:
    """A run through ``AgentClient`` (httpx and httpcore) attempts no import that fails:
    Python does not remember a failed import, so each attempt searches ``sys.path`` again
    (about 0.1 ms), and httpcore attempted ``sniffio`` at every lock and event it set up
    when nothing had installed it (``pyproject.toml``)."""
    import sys

    url = server.add("/agent", Route([support.sse_bytes(GOOD)]))

    async def run() -> None:
        async for _ in AgentClient(url).run(INPUT):
            pass

    asyncio.run(run())  # what a first run imports for good
    failed = _FailedImports()
    sys.meta_path.append(failed)
    try:
        asyncio.run(run())
        asyncio.run(run())
    finally:
        sys.meta_path.remove(failed)
    assert failed.names == []
