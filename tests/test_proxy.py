"""
``aguikit proxy`` between a real client and a real agent: bytes forwarded as they are,
findings printed as they happen, recordings readable after a crash.

The agents are real servers on loopback sockets (the example agent on uvicorn, the stdlib
recording server for exact bytes and broken answers); the UI is the official
``@ag-ui/client`` ``HttpAgent`` in Node, or httpx where a test needs the bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.node_client import run_http_agent
from tests.servers import Route, free_port, serve, serve_asgi, wait_listening
from tests.test_server_integration import QUESTION, _example

from aguikit.proto import encode_message
from aguikit.proxy import ProxyApp
from aguikit.transport.proto import encode_frame

pytest.importorskip("uvicorn")

HELLO: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]
RUN = {
    "threadId": "t1",
    "runId": "r1",
    "messages": [],
    "state": {},
    "tools": [],
    "context": [],
    # "intermediaries MUST NOT alter it" (run-input.mdx): nulls and unknown keys arrive as sent
    "forwardedProps": {"x": None, "nested": [1, {"y": None}]},
}


def _sse(events: list[dict[str, Any]]) -> list[bytes]:
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events]


@contextlib.contextmanager
def _proxy(upstream: str, record: Path | None = None) -> Iterator[tuple[str, io.StringIO]]:
    """The proxy in this process, on a real uvicorn (no Server/Date header of its own)."""
    out = io.StringIO()
    app = ProxyApp(upstream, out=out, record=record)
    with serve_asgi(app, lifespan="on", server_header=False, date_header=False) as url:
        yield url, out


def _raw(url: str, headers: dict[str, str]) -> tuple[httpx.Response, bytes]:
    """POST the run request; the answer and its body exactly as sent (not decompressed)."""
    with httpx.stream("POST", url, json=RUN, headers=headers) as response:
        return response, b"".join(response.iter_raw())


def _same_ids(value: Any) -> Any:
    """``value`` with every minted id replaced by its order of first appearance."""
    seen: dict[str, str] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (rename(v) if k.endswith("Id") or k == "id" else walk(v))
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    def rename(v: Any) -> Any:
        if not isinstance(v, str):
            return walk(v)
        return seen.setdefault(v, f"id{len(seen)}")

    return walk(value)


def test_the_official_client_ends_with_the_same_conversation_through_the_proxy(
    tmp_path: Path,
) -> None:
    """HttpAgent against the example agent, directly and through the proxy (two fresh
    servers: the agent refuses a run id twice): the same messages and state, no finding,
    and a recording of both runs with every event timed."""
    script = {**QUESTION, "answerFrontendTool": "confirmed"}
    with serve_asgi(_example().app) as url:
        direct = run_http_agent(url + "/agent", script)
    with serve_asgi(_example().app) as url, _proxy(url + "/agent", tmp_path) as (proxy, out):
        proxied = run_http_agent(proxy + "/", script)

    assert _same_ids(direct) == _same_ids(proxied)
    assert [{"result": None}, {"result": None}] == proxied["runs"]
    assert "aguikit proxy: 2 exchanges" in out.getvalue()
    assert "0 findings" in out.getvalue(), out.getvalue()
    har = json.loads((tmp_path / "t1.har").read_text("utf-8"))
    entries = har["log"]["entries"]
    assert ["1.2", "aguikit"] == [har["log"]["version"], har["log"]["creator"]["name"]]
    assert [200, 200] == [e["response"]["status"] for e in entries]
    assert [True, True] == [e["_aguikit"]["complete"] for e in entries]
    for entry in entries:
        events = entry["_aguikit"]["events"]
        body = entry["response"]["content"]["text"].encode()
        assert events and all(e["upstreamMs"] <= e["downstreamMs"] for e in events)
        assert len(body) == events[-1]["end"] or body[events[-1]["end"] :].strip() == b""
        assert json.loads(entry["request"]["postData"]["text"])["threadId"] == "t1"


@pytest.mark.parametrize(
    ("media", "pieces", "encoding"),
    [
        ("text/event-stream", [b": keep-alive\n\n", *_sse(HELLO), b": bye\n\n"], None),
        ("application/jsonl", [json.dumps(e).encode() + b"\n" for e in HELLO], None),
        (
            "application/vnd.ag-ui.event+proto",
            [encode_frame(encode_message(e)) for e in HELLO],
            None,
        ),
        ("text/event-stream", [gzip.compress(b"".join(_sse(HELLO)))], "gzip"),
    ],
    ids=["sse", "jsonl", "protobuf", "gzip"],
)
def test_every_byte_status_and_header_is_forwarded(
    media: str, pieces: list[bytes], encoding: str | None
) -> None:
    """What the UI receives through the proxy is what the agent sent: the body byte for
    byte (keep-alive comments, protobuf frames, a compressed body still compressed), the
    status and every header but the hop-by-hop ones."""
    headers = {"X-Trace": "abc", "X-Accel-Buffering": "no"}
    if encoding:
        headers["Content-Encoding"] = encoding
    with serve() as agent:
        url = agent.add("/agent", Route(pieces, status=201, content_type=media, headers=headers))
        direct, sent = _raw(url, {"Accept-Encoding": "gzip"})
        with _proxy(url) as (proxy, _):
            proxied, received = _raw(proxy + "/", {"Accept-Encoding": "gzip", "X-Mine": "1"})

    assert 201 == proxied.status_code
    assert b"".join(pieces) == sent == received
    drop = {"transfer-encoding", "date"}
    assert [(k, v) for k, v in direct.headers.multi_items() if k not in drop] == [
        (k, v) for k, v in proxied.headers.multi_items() if k not in drop
    ]
    assert "1" == agent.requests[-1].headers["x-mine"]  # the request's headers went too
    assert RUN == agent.requests[-1].json()


def test_findings_are_printed_as_they_happen_with_exchange_event_and_pointer() -> None:
    """A request that is not a RunAgentInput, one that is not JSON, and an answer that
    breaks the protocol: each finding names its exchange, and the answer's its event."""
    broken = [HELLO[0], HELLO[2], HELLO[4]]  # content for a message never started
    with serve() as agent:
        url = agent.add("/agent", Route(_sse(broken)))
        with _proxy(url) as (proxy, out):
            httpx.post(proxy + "/", json={**RUN, "messages": "nope"})
            httpx.post(
                proxy + "/", content=b"{not json", headers={"Content-Type": "application/json"}
            )
            printed = out.getvalue()

    lines = printed.splitlines()
    assert any(
        line.startswith("[exchange 1 request] AGUI-R002 error RunAgentInput /messages:")
        for line in lines
    ), printed
    assert any(
        line.startswith("[exchange 1] AGUI-V") and "event 2 TEXT_MESSAGE_CONTENT" in line
        for line in lines
    ), printed
    assert any(
        line.startswith("[exchange 2 request] AGUI-R002 error") and "not JSON" in line
        for line in lines
    ), printed
    assert 2 == len(agent.requests)  # judged, and forwarded all the same


def test_the_thread_rules_judge_each_run_against_the_one_before_it_live() -> None:
    """The first run leaves state {"n": 1}; the next request of the thread carries {}:
    AGUI-R013 for exchange 2, printed when its answer ends (the request alone cannot say,
    the previous run's end is the evidence)."""
    events = [HELLO[0], {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}, HELLO[4]]
    with serve() as agent:
        url = agent.add("/agent", Route(_sse(events)))
        with _proxy(url) as (proxy, out):
            httpx.post(proxy + "/", json={**RUN, "protocolVersion": "1.1"})
            httpx.post(proxy + "/", json={**RUN, "runId": "r2", "protocolVersion": "1.1"})
            printed = _when(out, "[exchange 2] AGUI-R013")

    lines = [line for line in printed.splitlines() if "AGUI-R013" in line]
    assert 1 == len(lines) and lines[0].startswith("[exchange 2] AGUI-R013"), printed


def test_an_unreachable_agent_is_a_502_and_the_proxy_keeps_serving(tmp_path: Path) -> None:
    """Connection refused: the UI gets 502 with the reason, the proxy prints AGUI-T001 and
    records it, and answers the next request the same way (nothing was left broken)."""
    dead = f"http://127.0.0.1:{free_port()}"
    with _proxy(dead, tmp_path) as (proxy, out):
        refused = httpx.post(proxy + "/", json=RUN)
        again = httpx.post(proxy + "/", json={**RUN, "runId": "r2"})

    assert 502 == refused.status_code == again.status_code
    assert b"could not be reached" in refused.content
    assert 2 == out.getvalue().count("] AGUI-T001 error: http://127.0.0.1:")
    entries = json.loads((tmp_path / "t1.har").read_text())["log"]["entries"]
    assert [502, 502] == [e["response"]["status"] for e in entries]
    assert "ConnectError" in entries[0]["_aguikit"]["error"]


def test_html_and_a_cut_stream_are_findings_and_forwarded_as_they_are(tmp_path: Path) -> None:
    """A login page instead of a stream is forwarded and named (AGUI-T003); a stream cut
    inside a frame reaches the UI cut (no clean end it never had), is named, and its
    recording keeps what arrived, marked incomplete."""
    html = [b"<html><body>Please log in</body></html>"]
    cut = [*_sse(HELLO[:2]), b'data: {"type": "TEXT_MESS']
    with serve() as agent:
        login = agent.add("/login", Route(html, content_type="text/html"))
        agent.add("/cut", Route(cut, drop=True))
        with _proxy(login.rsplit("/", 1)[0], tmp_path) as (proxy, out):
            page = httpx.post(proxy + "/login", json=RUN)
            with pytest.raises(httpx.RemoteProtocolError):
                httpx.post(proxy + "/cut", json={**RUN, "runId": "r2"})
            served = httpx.post(proxy + "/login", json={**RUN, "runId": "r3"})

    assert html[0] == page.content and 200 == served.status_code
    printed = out.getvalue()
    assert "[exchange 1] AGUI-T003" in printed
    assert re.search(r"\[exchange 2\] AGUI-T001 error event 3", printed), printed
    entries = json.loads((tmp_path / "t1.har").read_text())["log"]["entries"]
    cut_entry = entries[1]
    assert cut_entry["_aguikit"]["complete"] is False
    assert b"".join(cut) == cut_entry["response"]["content"]["text"].encode()
    assert 2 == len(cut_entry["_aguikit"]["events"])


def _when(out: io.StringIO, text: str, seconds: float = 20.0) -> str:
    """What the proxy printed, once it holds ``text`` (the thread rules run after the
    answer ended, off the event loop) or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while text not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    return out.getvalue()


def _command(upstream: str, port: int) -> list[str]:
    return [sys.executable, "-m", "aguikit", "proxy", "--upstream", upstream, "--port", str(port)]


def _endless() -> Iterator[bytes]:
    yield from _sse(HELLO[:2])
    for n in range(100_000):
        delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"{n} "}
        yield f"data: {json.dumps(delta)}\n\n".encode()


def test_a_recording_survives_the_proxy_being_killed_mid_stream(tmp_path: Path) -> None:
    """SIGKILL while a stream is flowing: the file on disk is a complete HAR document whose
    entry holds what had arrived by the last rewrite, marked incomplete."""
    with serve() as agent:
        url = agent.add("/agent", Route(_endless(), delay=0.01))
        port = free_port()
        process = subprocess.Popen(
            [*_command(url, port), "--record", str(tmp_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_listening(port, process, "aguikit proxy")
            with httpx.stream("POST", f"http://127.0.0.1:{port}/", json=RUN) as response:
                read = 0
                for chunk in response.iter_bytes():
                    read += chunk.count(b"\n\n")
                    if read >= 60:  # a few rewrites have happened (every 250 ms at most)
                        break
                os.kill(process.pid, signal.SIGKILL)
        finally:
            process.kill()
            process.wait(timeout=10)

    har = json.loads((tmp_path / "t1.har").read_text("utf-8"))
    (entry,) = har["log"]["entries"]
    assert entry["_aguikit"]["complete"] is False
    events = entry["_aguikit"]["events"]
    assert len(events) >= 10
    text = entry["response"]["content"]["text"]
    assert text.startswith('data: {"type": "RUN_STARTED"')
    assert len(text.encode()) >= events[-1]["end"]


def test_the_proxy_command_prints_a_summary_when_stopped(tmp_path: Path) -> None:
    """SIGTERM, as a service manager stops it: the summary and the recordings written."""
    with serve() as agent:
        url = agent.add("/agent", Route(_sse(HELLO)))
        port = free_port()
        process = subprocess.Popen(
            [*_command(url, port), "--record", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_listening(port, process, "aguikit proxy")
            assert 200 == httpx.post(f"http://127.0.0.1:{port}/", json=RUN).status_code
        finally:
            process.send_signal(signal.SIGTERM)
            printed, _ = process.communicate(timeout=20)

    assert "aguikit proxy: 1 exchanges, 5 events, 2 findings" in printed  # R010 twice
    assert str(tmp_path / "t1.har") in printed
    time.sleep(0)  # the file is closed: it parses
    assert 1 == len(json.loads((tmp_path / "t1.har").read_text())["log"]["entries"])


def test_a_bug_in_the_judging_never_breaks_forwarding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live check raising on every event (a bug, simulated): the UI still gets every
    byte, the proxy says once that it could not judge that exchange, and goes on."""
    import aguikit.proxy

    class Broken:
        """A live check whose every event raises (the checker's class is compiled in one
        build, so the proxy's name for it is what is replaced)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def feed(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug in the judging")

        def close(self, *args: Any, **kwargs: Any) -> Any:
            return []

    monkeypatch.setattr(aguikit.proxy, "StreamCheck", Broken)
    with serve() as agent:
        url = agent.add("/agent", Route(_sse(HELLO)))
        with _proxy(url) as (proxy, out):
            first, sent = _raw(proxy + "/", {})
            second, again = _raw(proxy + "/", {})
            printed = out.getvalue()

    assert 200 == first.status_code == second.status_code
    assert b"".join(_sse(HELLO)) == sent == again
    assert 2 == printed.count("could not judge this exchange (RuntimeError: a bug in the judging)")


def test_each_chunk_reaches_the_ui_as_it_arrives(tmp_path: Path) -> None:
    """An agent writing an event every 0.5 s: through the proxy the UI reads the first
    long before the last (nothing held back), and the recording's times say the same
    (bounds loose: only buffering, which would put them all at the end, fails)."""
    with serve() as agent:
        url = agent.add("/agent", Route(_sse(HELLO[:4]), delay=0.5))
        with _proxy(url, tmp_path) as (proxy, _):
            arrivals = []
            start = time.monotonic()
            with httpx.stream("POST", proxy + "/", json=RUN) as response:
                for chunk in response.iter_raw():
                    arrivals.append((time.monotonic() - start, chunk))

    assert b"".join(_sse(HELLO[:4])) == b"".join(chunk for _, chunk in arrivals)
    assert arrivals[-1][0] - arrivals[0][0] >= 0.75  # three 0.5 s pauses passed through
    events = json.loads((tmp_path / "t1.har").read_text())["log"]["entries"][0]["_aguikit"]
    downstream = [e["downstreamMs"] for e in events["events"]]
    assert 4 == len(downstream) and downstream[-1] - downstream[0] >= 750


def test_the_threads_kept_for_the_thread_rules_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With room for one thread, a thread another thread displaced is judged afresh when
    it returns: its state no longer compared with a run the proxy has let go of."""
    import aguikit.proxy

    monkeypatch.setattr(aguikit.proxy, "THREADS_KEPT", 1)
    events = [HELLO[0], {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}, HELLO[4]]
    version = {"protocolVersion": "1.1"}
    with serve() as agent:
        url = agent.add("/agent", Route(_sse(events)))
        with _proxy(url) as (proxy, out):
            httpx.post(proxy + "/", json={**RUN, **version})
            httpx.post(proxy + "/", json={**RUN, **version, "threadId": "t2"})
            _when(out, "[exchange 2] AGUI-R010")  # exchange 2's thread rules have run
            httpx.post(proxy + "/", json={**RUN, **version, "runId": "r3"})
            printed = _when(out, "[exchange 3] AGUI-R010")

    assert "[exchange 3] AGUI-R010" in printed
    assert "AGUI-R013" not in printed, printed


def test_the_live_check_starts_from_what_the_request_sent() -> None:
    """A result for a tool call the request's history made is no orphan (AGUI-K001), and
    a delta to the state the request sent applies: live findings are what `aguikit check`
    finds on the recording, which seeds its session the same way."""
    history = [
        {"id": "u1", "role": "user", "content": "weather?"},
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
            ],
        },
    ]
    events = [
        HELLO[0],
        {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "sun"},
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 2}]},
        HELLO[4],
    ]
    body = {**RUN, "messages": history, "state": {"n": 1}, "protocolVersion": "1.1"}
    with serve() as agent:
        url = agent.add("/agent", Route(_sse(events)))
        with _proxy(url) as (proxy, out):
            httpx.post(proxy + "/", json=body)
            printed = _when(out, "[exchange 1] AGUI-R010")  # the thread rules ran too

    assert "AGUI-K001" not in printed and "AGUI-P001" not in printed, printed


def test_the_reads_are_judged_in_batches_that_leave_the_loop_to_the_forwarding() -> None:
    """
    Reads are judged after ``JUDGE_DELAY``, every answer's together; a batch holds the event
    loop for about ``JUDGE_SLICE`` and goes on ``JUDGE_GAP`` later, so no forwarding
    waits behind all of it; each answer's reads, joined into one feed, find what judging
    them one at a time finds (the same findings, at the same events).
    """
    import asyncio

    from aguikit.proxy import Flow, _Watch

    # a content for a message never started, then a second RUN_STARTED mid-run
    broken = HELLO[:1] + [HELLO[2]] + HELLO[1:2] + [HELLO[2]] * 100 + HELLO[:1] + HELLO[3:]
    reads = _sse(broken)

    async def run(batched: bool) -> tuple[ProxyApp, io.StringIO, list[int]]:
        out = io.StringIO()
        app = ProxyApp("http://127.0.0.1:9/", out=out)
        watches = []
        for n in range(20):
            body = json.dumps(RUN).encode()
            flow = Flow(n + 1, "POST", "http://127.0.0.1:9/", [], body, 0.0, "")
            app._request(flow)
            flow.status = 200
            watches.append(_Watch(app, flow, "text/event-stream", None))
        for read in reads:
            for watch in watches:
                watch.chunk(read, 0.0, 0.0)
                if not batched:
                    app._settle(watch)
        assert app.summary.events == (0 if batched else 20 * len(broken))
        while batched and not app.summary.events:  # the first batch waits JUDGE_DELAY
            await asyncio.sleep(0.005)
        slices = []
        while app._waiting:  # then a slice a turn of the loop
            slices.append(app.summary.events)
            await asyncio.sleep(0)
        for watch in watches:
            watch.end(None)
        return app, out, slices

    batched, printed, slices = asyncio.run(run(True))
    alone, printed_alone, _ = asyncio.run(run(False))
    assert batched.summary.events == alone.summary.events == 20 * len(broken)
    assert len(slices) > 1, slices  # the batch gave the loop back before it was done
    assert batched.summary.findings == alone.summary.findings
    assert {"AGUI-V012", "AGUI-V002"} <= set(batched.summary.findings), printed.getvalue()
    assert sorted(printed.getvalue().splitlines()) == sorted(printed_alone.getvalue().splitlines())


def test_the_forwarding_client_reads_on_the_loops_own_transports() -> None:
    """The proxy's upstream connections are the event loop's own transports (no anyio
    cancel scope and reading resumed then paused per read): a body far larger than a
    connection holds unread, read slowly (so reading is paused and resumed), arrives
    whole and in order; the kept-alive connection serves the next request; an answer cut
    mid-body is a TransportError and the request after it gets a fresh connection."""
    import asyncio

    from aguikit.errors import TransportError
    from aguikit.transport.http import aforward, aforward_client, aread

    pieces = [bytes([65 + n % 26]) * 65536 for n in range(64)]  # 4 MiB

    async def fetch(client: httpx.AsyncClient, url: str, slow: bool = False) -> tuple[bytes, Any]:
        got = bytearray()
        async with aforward(client, "POST", url, [], b"{}") as response:
            stream = response.extensions["network_stream"]
            async for chunk in aread(response):
                got += chunk
                if slow and len(got) < 1 << 20:
                    await asyncio.sleep(0.02)  # the agent writes on: it piles up unread
        return bytes(got), stream

    async def main(agent: Any) -> None:
        whole = agent.add("/whole", Route(pieces, content_type="application/octet-stream"))
        cut = agent.add("/cut", Route([b"data: {}\n\n"], drop=True))
        small = agent.add("/small", Route([b"ok"], content_type="text/plain"))
        client = aforward_client(httpx.Timeout(10.0), httpx.Limits())
        async with client:
            body, first = await fetch(client, whole, slow=True)
            assert b"".join(pieces) == body
            assert "aguikit.transport.http" == type(first).__module__
            assert (b"ok", first) == await fetch(client, small)  # kept alive, reused
            with pytest.raises(TransportError):
                await fetch(client, cut)
            assert b"ok" == (await fetch(client, small))[0]

    with serve() as agent:
        asyncio.run(main(agent))


def test_the_forwarding_client_hands_each_kept_connection_to_one_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streams that start together on the connections kept from the streams before them
    (a long-running proxy's every burst) each get a kept connection of their own at the
    first try: one pass of the pool per request and per answer's end, each looking at
    every connection about once.  httpcore 1.0's pass handed an idle connection to every
    waiting request, the losers tried again, and each pass counted the connections once
    per idle one: at 100 streams, 1,100 passes of 1-1.5 ms held the proxy's loop for a
    second, 11-24 ms added at p99 (``docs/proxy.md``, "Kept upstream connections")."""
    import asyncio

    import httpcore

    from aguikit.transport.http import aforward, aforward_client, aread

    streams = 30
    ports: list[int] = []  # the client port of each request the agent served

    async def agent(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        ports.append(scope["client"][1])
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await asyncio.sleep(0.2)  # every stream of a burst is open at once
        await send({"type": "http.response.body", "body": b"data: {}\n\n"})

    looks = [0]
    is_idle = httpcore.AsyncHTTPConnection.is_idle

    def counted(connection: httpcore.AsyncHTTPConnection) -> bool:
        looks[0] += 1
        return is_idle(connection)

    monkeypatch.setattr(httpcore.AsyncHTTPConnection, "is_idle", counted)

    async def burst(client: httpx.AsyncClient, url: str) -> None:
        async def one() -> bytes:
            async with aforward(client, "POST", url, [], b"{}") as response:
                return b"".join([chunk async for chunk in aread(response)])

        assert [b"data: {}\n\n"] * streams == await asyncio.gather(*(one() for _ in range(streams)))

    async def main(url: str) -> list[int]:
        client = aforward_client(httpx.Timeout(10.0), httpx.Limits())
        pool = client._transport._pool  # type: ignore[attr-defined]
        assign = pool._assign_requests_to_connections
        passes: list[int] = []  # connections looked at (is_idle) by each pass

        def counting() -> Any:
            before = looks[0]
            try:
                return assign()
            finally:
                passes.append(looks[0] - before)

        pool._assign_requests_to_connections = counting
        async with client:
            await burst(client, url)  # 30 fresh connections, then kept
            passes.clear()
            await burst(client, url)
        return passes

    with serve_asgi(agent) as base:
        passes = asyncio.run(main(base + "/"))
    assert len(set(ports)) == streams and set(ports[streams:]) == set(ports[:streams])
    assert len(passes) == 2 * streams, len(passes)  # 229 passes before
    assert max(passes) <= 2 * streams, max(passes)  # 960 looks a pass before


def test_the_forwarding_client_speaks_tls_to_an_https_agent(tmp_path: Path) -> None:
    """An ``https`` agent: the loop's own transport is upgraded to TLS (the certificate
    checked against the authority given), and the answer streams through it chunk by
    chunk."""
    import asyncio
    import shutil
    import ssl

    from aguikit.transport.http import aforward, aforward_client, aread

    openssl = shutil.which("openssl")
    assert openssl is not None, (
        "the openssl command makes the test's certificate (.ci/run installs it)"
    )
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    pieces = _sse(HELLO)

    async def agent(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for piece in pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b""})

    async def main(url: str) -> None:
        trust = ssl.create_default_context(cafile=str(cert))
        client = aforward_client(httpx.Timeout(10.0), httpx.Limits(), verify=trust)
        async with client, aforward(client, "POST", url, [], b"{}") as response:
            stream = response.extensions["network_stream"]
            got = [chunk async for chunk in aread(response)]
        assert b"".join(pieces) == b"".join(got) and len(got) > 1
        assert "aguikit.transport.http" == type(stream).__module__
        assert stream.get_extra_info("ssl_object") is not None

    with serve_asgi(agent, ssl_certfile=str(cert), ssl_keyfile=str(key)) as url:
        asyncio.run(main(url.replace("http://", "https://") + "/"))
