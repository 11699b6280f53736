"""
The producer side under load, and its per-event cost next to the official SDK's encoder.

1. *Producer overhead.*  The same realistic run (text deltas, tool calls and results,
   state deltas, reasoning) is encoded event by event by the official SDK
   (``ag_ui.encoder.EventEncoder().encode`` on ``ag_ui.core`` events: pydantic dump, no
   checks) and emitted through ``aguikit.server.RunWriter`` (strict schema check, chunk
   expansion, verification, state tracking, SSE encoding), side by side in one process.
   The target is RunWriter at most 2x the SDK's encoder.
2. *Load.*  One uvicorn worker on loopback serves ``--streams`` concurrent runs of
   ``--events`` events each (``create_app`` around a handler streaming numbered deltas);
   client processes read them all and check that every stream completed with every event
   in order.  Reported: events/s over the whole load, p50/p99 time to first event, and the
   server's peak RSS growth per concurrent stream (``VmHWM`` minus the idle ``VmRSS``).
   The endpoint is the default one, each run bound to its connection; ``--log memory``
   measures a resumable one (``event_log=MemoryEventLog()``: numbered frames, kept
   ``ttl`` after the run, so the peak includes every run's log), and ``--log sdk`` the
   official SDK's path (a Starlette ``StreamingResponse`` of ``EventEncoder`` output).
   ``--log redis`` measures the Redis log (``RedisEventLog`` on a ``redis-server``
   the bench starts on a free loopback port): also reported are Redis's memory per
   logged stream (``used_memory``), the requests Redis read per event delivered
   (``total_reads_processed``: the producer's batches, the followers' reads, the
   heartbeats, all of them; an upper bound on the write round trips), and every
   stream is read back from Redis and checked complete and in order.
3. *Side by side* (after 2., or alone with ``--side-by-side``): the load of 2. with
   ``--side-streams`` streams, once for each server in one run
   (the SDK's path, the default endpoint, the resumable one), ``--rounds`` times in turn;
   reported: the server process's CPU time (user + system) per event delivered, the
   best round of each, and each endpoint's ratio to the SDK's path.  Issue 10's target,
   held for the default endpoint in the pure build: at most 2x.

4. *Logged rows* (``--logged-rows``): issue 28's table, the load of 2. against the
   unlogged endpoint, the memory log and the Redis log, interleaved ``--rounds`` times
   in one run: throughput, peak RSS per stream (and Redis's memory per stream), the
   ratios logged / unlogged, and Redis requests per event.

It prints numbers and asserts nothing but completeness: timings depend on the machine.

Usage::

    python bench/bench_server.py [--streams 500] [--events 1000] [--clients 4] [--log memory]
    python bench/bench_server.py --overhead-only
    python bench/bench_server.py --side-by-side [--side-streams 100] [--rounds 3]
    python bench/bench_server.py --logged-rows [--side-streams 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from aguikit.models import RunAgentInput
from aguikit.server import MemoryEventLog, RunWriter, create_app
from aguikit.transport.sse import encode_bytes
from aguikit.wire import parse_event

HERE = Path(__file__).resolve().parent
EVENTS_PER_STREAM_DEFAULT = 1000


# ---------------------------------------------------------------------------------------
# The load run's server
# ---------------------------------------------------------------------------------------


async def numbered(run_input: RunAgentInput, run: RunWriter) -> None:
    """RUN_STARTED, a message of ``events - 4`` numbered deltas, RUN_FINISHED."""
    total = int((run_input.forwarded_props or {}).get("events", EVENTS_PER_STREAM_DEFAULT))
    async with run.text_message(message_id="m") as message:
        for n in range(total - 4):
            await message.write(f"{n} ")


def sdk_app() -> Any:
    """The official SDK's serving path for the same run: the request parsed into its
    ``RunAgentInput``, each event an ``ag_ui.core`` model encoded by ``EventEncoder``, the
    frames streamed by Starlette's ``StreamingResponse`` (what its FastAPI example does)."""
    from ag_ui import core
    from ag_ui.encoder import EventEncoder
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def endpoint(request: Request) -> StreamingResponse:
        run_input = core.RunAgentInput.model_validate(await request.json())
        encoder = EventEncoder(accept=request.headers.get("accept"))
        total = int((run_input.forwarded_props or {}).get("events", EVENTS_PER_STREAM_DEFAULT))
        ids = {"thread_id": run_input.thread_id, "run_id": run_input.run_id}

        async def frames() -> Any:
            yield encoder.encode(core.RunStartedEvent(**ids))
            yield encoder.encode(core.TextMessageStartEvent(message_id="m", role="assistant"))
            for n in range(total - 4):
                yield encoder.encode(core.TextMessageContentEvent(message_id="m", delta=f"{n} "))
            yield encoder.encode(core.TextMessageEndEvent(message_id="m"))
            yield encoder.encode(core.RunFinishedEvent(**ids))

        return StreamingResponse(frames(), media_type=encoder.get_content_type())

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


def _event_log(name: str) -> Any:
    """The event log the bench's server writes to, by ``AGUIKIT_BENCH_LOG``."""
    if name == "memory":
        return MemoryEventLog()
    if name == "redis":
        from aguikit.server.redis_log import RedisEventLog

        return RedisEventLog.from_url(os.environ["AGUIKIT_BENCH_REDIS"])
    return None


_LOG = os.environ.get("AGUIKIT_BENCH_LOG", "none")
app = (
    sdk_app()
    if _LOG == "sdk"
    else create_app(
        numbered,
        path="/agent",
        queue_size=int(os.environ.get("AGUIKIT_BENCH_QUEUE", "64")),
        event_log=_event_log(_LOG),
    )
)


# ---------------------------------------------------------------------------------------
# 1. Producer overhead
# ---------------------------------------------------------------------------------------


def realistic_run(target: int) -> list[dict[str, Any]]:
    """The in-run events of one long run (RunWriter adds RUN_STARTED and RUN_FINISHED)."""
    events: list[dict[str, Any]] = []
    turn = 0
    state: dict[str, Any] = {"todos": []}
    events.append({"type": "STATE_SNAPSHOT", "snapshot": {"todos": []}})
    while len(events) < target:
        turn += 1
        rs, rm = f"rs-{turn}", f"rm-{turn}"
        events.append({"type": "REASONING_START", "messageId": rs})
        events.append({"type": "REASONING_MESSAGE_START", "messageId": rm, "role": "reasoning"})
        events += [
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": rm, "delta": f"option {i} "}
            for i in range(8)
        ]
        events.append({"type": "REASONING_MESSAGE_END", "messageId": rm})
        events.append({"type": "REASONING_END", "messageId": rs})
        mid, call = f"m-{turn}", f"call-{turn}"
        events.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        events += [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"word{i} "}
            for i in range(60)
        ]
        events.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
        events.append(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call,
                "toolCallName": "add_todo",
                "parentMessageId": mid,
            }
        )
        events += [
            {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": piece}
            for piece in ('{"title":', f'"task {turn}"', "}")
        ]
        events.append({"type": "TOOL_CALL_END", "toolCallId": call})
        events.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": f"r-{turn}",
                "toolCallId": call,
                "content": "ok",
                "role": "tool",
            }
        )
        state["todos"].append({"title": f"task {turn}", "done": False})
        events.append(
            {
                "type": "STATE_DELTA",
                "delta": [{"op": "add", "path": "/todos/-", "value": {"title": f"task {turn}"}}],
            }
        )
    return events


def _best(seconds: list[float], count: int) -> tuple[float, float]:
    per = [s / count * 1e6 for s in seconds]
    return min(per), statistics.median(per)


async def emit_all(
    items: list[Any], *, telemetry: Any = None, clock: Any = time.perf_counter
) -> float:
    """Seconds (by ``clock``) to emit ``items`` through one writer into an SSE-encoding
    sink, the writer's start and finish not counted."""
    frames: list[bytes] = []

    async def sink(wire: Mapping[str, Any]) -> None:
        frames.append(encode_bytes(wire))

    run_input = {"threadId": "t", "runId": "r", "messages": []}
    run = RunWriter(run_input, sink=sink, telemetry=telemetry)
    await run.start()
    start = clock()
    for item in items:
        await run.emit(item)
    elapsed: float = clock() - start
    await run.finish()
    assert len(frames) == len(items) + 2
    return elapsed


def overhead(events: int, repeats: int) -> float:
    """Print µs/event of the SDK encoder and of RunWriter; return the ratio of minimums."""
    from ag_ui.core import Event as SdkEvent
    from ag_ui.encoder import EventEncoder
    from pydantic import TypeAdapter

    docs = realistic_run(events)
    typed = [parse_event(d) for d in docs]
    sdk_events = [TypeAdapter(SdkEvent).validate_python(d) for d in docs]
    encoder = EventEncoder()

    sdk_times: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        for event in sdk_events:
            encoder.encode(event)
        sdk_times.append(time.perf_counter() - start)

    ours_typed = [asyncio.run(emit_all(typed)) for _ in range(repeats)]
    ours_dicts = [asyncio.run(emit_all(docs)) for _ in range(repeats)]
    ours_sdk = [asyncio.run(emit_all(sdk_events)) for _ in range(max(1, repeats // 2))]

    n = len(docs)
    sdk_min, sdk_med = _best(sdk_times, n)
    rows = [
        ("SDK EventEncoder.encode (ag_ui.core event -> SSE)", sdk_min, sdk_med),
        ("RunWriter.emit, typed aguikit event -> SSE", *_best(ours_typed, n)),
        ("RunWriter.emit, wire dict -> SSE", *_best(ours_dicts, n)),
        ("RunWriter.emit, ag_ui.core event -> SSE", *_best(ours_sdk, n)),
    ]
    print(f"Producer overhead, {n} events of one run (validate + verify + encode)")
    for label, best, median in rows:
        print(f"  {label:<52} {best:6.2f} µs/event min  {median:6.2f} median")
    ratio = rows[1][1] / sdk_min
    print(f"  ratio RunWriter (typed) / SDK encoder: {ratio:.2f}x (target <= 2x)")
    print(f"  ratio RunWriter (wire dict) / SDK encoder: {rows[2][1] / sdk_min:.2f}x")
    return ratio


# ---------------------------------------------------------------------------------------
# 2. Load
# ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu(pid: int) -> float:
    """The process's CPU seconds so far, user plus system (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


async def _one_stream(port: int, index: int, events: int) -> dict[str, Any]:
    """One run over a raw HTTP/1.0 connection (the body is the bytes up to the close), so
    the client costs next to nothing and the figures are the server's."""
    body = json.dumps(
        {
            "threadId": f"t{index}",
            "runId": f"r{index}",
            "messages": [],
            "forwardedProps": {"events": events},
        }
    ).encode()
    request = (
        b"POST /agent HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    started_at = time.time()
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    first: float | None = None
    buffer = b""
    headers_done = False
    count = 0
    expected = 0
    in_order = True
    last: dict[str, Any] = {}
    while chunk := await reader.read(65536):
        buffer += chunk
        if not headers_done:
            head, sep, rest = buffer.partition(b"\r\n\r\n")
            if not sep:
                continue
            assert head.startswith(b"HTTP/1.1 200"), head[:40]
            headers_done, buffer = True, rest
        if first is None and buffer:
            first = time.perf_counter() - start
        *frames, buffer = buffer.split(b"\n\n")
        for frame in frames:
            if frame.startswith(b"id: "):  # a logged run's frame: its id, then the frame
                frame = frame[frame.index(b"\n") + 1 :]
            if not frame.startswith(b"data: "):
                continue  # a keep-alive comment
            count += 1
            if frame.startswith(b'data: {"type":"TEXT_MESSAGE_CONTENT"'):
                # Cheaper than json.loads: the client must not be the bottleneck.
                delta = frame[frame.rindex(b'"delta":"') + 9 : -2]
                in_order = in_order and delta == b"%d " % expected
                expected += 1
            else:
                last = json.loads(frame[6:])
    writer.close()
    return {
        "started_at": started_at,
        "ended_at": time.time(),
        "ttfe": first if first is not None else float("nan"),
        "count": count,
        "in_order": in_order and expected == events - 4,
        "finished": last.get("type") == "RUN_FINISHED",
    }


def _client_process(args: tuple[int, list[int], int]) -> list[dict[str, Any]]:
    port, indexes, events = args

    async def main() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(_one_stream(port, i, events) for i in indexes)))

    return asyncio.run(main())


@contextlib.contextmanager
def _redis_for(log: str) -> Iterator[str | None]:
    """A fresh ``redis-server`` (its URL in ``AGUIKIT_BENCH_REDIS``) when the load's log
    is Redis's; ``None`` otherwise."""
    if log != "redis":
        yield None
        return
    sys.path.insert(0, str(HERE.parent))
    from tests.redis_server import redis_server

    with redis_server() as url:
        os.environ["AGUIKIT_BENCH_REDIS"] = url
        yield url


def _redis_figures(client: Any) -> dict[str, int]:
    """Redis's memory in use, the requests it has read so far, and its XREAD calls (three
    requests of ``client``'s, connected before the load: its handshake is not counted)."""
    memory = client.info("memory")["used_memory"]
    reads = client.info("stats")["total_reads_processed"]
    xread = client.info("commandstats").get("cmdstat_xread", {}).get("calls", 0)
    return {"memory": memory, "reads": reads, "xread": xread}


def _redis_complete(url: str, streams: int, events: int) -> int:
    """How many of the runs' streams Redis holds complete and in order: the claim, the
    events numbered 1 to ``events`` (RUN_STARTED first, the deltas in order, RUN_FINISHED
    last), then the end entry; a stream with anything else is counted out."""
    import redis

    client = redis.Redis.from_url(url)
    whole = 0
    try:
        for index in range(streams):
            entries = client.xrange(f"aguikit:run:r{index}")
            ids = [entry_id.decode() for entry_id, _ in entries]
            expected = ["0-1", *[f"{n}-0" for n in range(1, events + 2)]]
            if ids != expected or b"end" not in entries[-1][1]:
                continue
            wires = [json.loads(fields[b"e"]) for _, fields in entries[1:-1]]
            deltas = [w["delta"] for w in wires if w["type"] == "TEXT_MESSAGE_CONTENT"]
            if (
                wires[0]["type"] == "RUN_STARTED"
                and wires[-1]["type"] == "RUN_FINISHED"
                and deltas == [f"{n} " for n in range(events - 4)]
            ):
                whole += 1
    finally:
        client.close()
    return whole


def load(
    streams: int,
    events: int,
    clients: int,
    *,
    quiet: bool = False,
    figures: dict[str, float] | None = None,
) -> float:
    """Run the load against a fresh server; print what it measured (unless ``quiet``)
    and return the server's CPU seconds per event delivered (``figures``, if given, gets
    the throughput, the peak RSS per stream and, on Redis, its figures per stream)."""
    log = os.environ.get("AGUIKIT_BENCH_LOG", "none")
    with _redis_for(log) as url:
        return _load(streams, events, clients, quiet, figures if figures is not None else {}, url)


def _load(
    streams: int,
    events: int,
    clients: int,
    quiet: bool,
    figures: dict[str, float],
    url: str | None,
) -> float:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "bench_server:app",
            "--port",
            str(port),
            "--workers",
            "1",
            "--log-level",
            "warning",
            "--no-access-log",
            "--backlog",
            str(max(2048, streams * 2)),
        ],
        env=env,
        cwd=HERE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.1)
        idle = _status(server.pid, "VmRSS")
        cpu_before = _cpu(server.pid)
        watcher = None
        if url:
            import redis

            watcher = redis.Redis.from_url(url)
            watcher.ping()  # connected now: its handshake is before the count
        redis_before = _redis_figures(watcher) if watcher else None
        shares = [list(range(i, streams, clients)) for i in range(clients)]
        with multiprocessing.get_context("spawn").Pool(clients) as pool:
            results = [
                r
                for part in pool.map(_client_process, [(port, s, events) for s in shares])
                for r in part
            ]
        # From the first request sent to the last stream read (client start-up excluded).
        elapsed = max(r["ended_at"] for r in results) - min(r["started_at"] for r in results)
        peak = _status(server.pid, "VmHWM")
        cpu = _cpu(server.pid) - cpu_before
        redis_after = _redis_figures(watcher) if watcher else None
    finally:
        if watcher is not None:
            watcher.close()
        server.terminate()
        server.wait(timeout=30)

    complete = [r for r in results if r["count"] == events and r["finished"]]
    ordered = [r for r in complete if r["in_order"]]
    ttfe = sorted(r["ttfe"] for r in results)
    total = sum(r["count"] for r in results)
    queue = os.environ.get("AGUIKIT_BENCH_QUEUE", "64")
    log = os.environ.get("AGUIKIT_BENCH_LOG", "none")
    if len(ordered) != streams:
        short = sorted({r["count"] for r in results if r["count"] != events})
        raise SystemExit(
            f"{log}: {streams - len(complete)} streams incomplete (delivered: {short[:5]}), "
            f"{len(complete) - len(ordered)} reordered"
        )
    figures["throughput"] = total / elapsed
    figures["rss_per_stream"] = (peak - idle) / streams
    if url and redis_before and redis_after:
        stored = _redis_complete(url, streams, events)
        if stored != streams:
            raise SystemExit(f"Redis holds {stored} of {streams} streams complete and in order")
        figures["redis_per_stream"] = (redis_after["memory"] - redis_before["memory"]) / streams
        # Less the watcher's own: the commandstats before, the memory and stats after.
        figures["requests_per_event"] = (redis_after["reads"] - redis_before["reads"] - 3) / total
        figures["xreads_per_event"] = (redis_after["xread"] - redis_before["xread"]) / total
    if quiet:
        return cpu / total
    print(
        f"Load: {streams} concurrent streams x {events} events, one uvicorn worker, loopback "
        f"(queue_size={queue}, event log: {log})"
    )
    print(f"  complete streams            {len(complete)}/{streams} (in order: {len(ordered)})")
    print(f"  events received            {total} of {streams * events}")
    print(f"  wall time                  {elapsed:.2f} s")
    print(f"  throughput                 {total / elapsed:,.0f} events/s")
    print(
        f"  time to first event        p50 {statistics.median(ttfe) * 1e3:.1f} ms, "
        f"p99 {ttfe[min(len(ttfe) - 1, int(len(ttfe) * 0.99))] * 1e3:.1f} ms"
    )
    print(
        f"  server RSS                 idle {idle / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB, "
        f"{(peak - idle) / streams / 1024:.1f} KiB per concurrent stream"
    )
    print(f"  server CPU                 {cpu:.2f} s, {cpu / total * 1e6:.2f} µs per event")
    if "redis_per_stream" in figures:
        print(f"  Redis streams              {streams}/{streams} read back complete and in order")
        print(
            f"  Redis memory               {figures['redis_per_stream'] / 1024:.1f} KiB per stream"
        )
        asked, followed = figures["requests_per_event"], figures["xreads_per_event"]
        print(f"  Redis requests per event   {asked:.3f} (the followers' XREAD: {followed:.3f})")
    return cpu / total


SERVERS = {
    "sdk": "the SDK's path (StreamingResponse of EventEncoder output)",
    "none": "aguikit, the default endpoint (connection-bound)",
    "memory": "aguikit, resumable (event_log=MemoryEventLog())",
}


def side_by_side(streams: int, events: int, clients: int, rounds: int) -> None:
    """The load against each server of :data:`SERVERS` in turn, ``rounds`` times; the
    best round's server CPU per event of each, and its ratio to the SDK's path."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name in SERVERS:
            os.environ["AGUIKIT_BENCH_LOG"] = name
            per_event = load(streams, events, clients, quiet=True)
            best[name] = min(best.get(name, per_event), per_event)
    print(
        f"Side by side: {streams} concurrent streams x {events} events, one uvicorn worker, "
        f"server CPU per event delivered, best of {rounds} rounds"
    )
    for name, what in SERVERS.items():
        ratio = best[name] / best["sdk"]
        print(f"  {what:<58} {best[name] * 1e6:6.2f} µs  {ratio:.2f}x")
    ratio = best["none"] / best["sdk"]
    print(f"  target: the default endpoint <= 2x the SDK's path: {ratio:.2f}x")


LOGGED = {
    "none": "unlogged (the default endpoint)",
    "memory": "MemoryEventLog",
    "redis": "RedisEventLog",
}


def logged_rows(streams: int, events: int, clients: int, rounds: int) -> None:
    """Issue 28's table: the load against each server of :data:`LOGGED` in turn,
    ``rounds`` times; each one's best throughput and median memory per stream, and the
    logged ones' ratios to the unlogged endpoint of the same run."""
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in LOGGED}
    for _ in range(rounds):
        for name in LOGGED:
            os.environ["AGUIKIT_BENCH_LOG"] = name
            figures: dict[str, float] = {}
            load(streams, events, clients, quiet=True, figures=figures)
            seen[name].append(figures)
    print(
        f"Logged rows: {streams} concurrent streams x {events} events, one uvicorn worker, "
        f"{rounds} interleaved rounds (throughput: best; memory: median)"
    )
    base = max(f["throughput"] for f in seen["none"])
    base_rss = statistics.median(f["rss_per_stream"] for f in seen["none"])
    for name, what in LOGGED.items():
        best = max(f["throughput"] for f in seen[name])
        rss = statistics.median(f["rss_per_stream"] for f in seen[name])
        line = (
            f"  {what:<34} {best:9,.0f} events/s ({best / base:.2f}x)  "
            f"worker {rss / 1024:6.1f} KiB/stream ({rss / base_rss:.2f}x)"
        )
        if name == "redis":
            kept = statistics.median(f["redis_per_stream"] for f in seen[name])
            asked = statistics.median(f["requests_per_event"] for f in seen[name])
            read = statistics.median(f["xreads_per_event"] for f in seen[name])
            line += (
                f"  + Redis {kept / 1024:.1f} KiB/stream, {asked:.3f} requests/event "
                f"({read:.3f} of them the followers' XREAD)"
            )
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--events", type=int, default=EVENTS_PER_STREAM_DEFAULT)
    parser.add_argument(
        "--clients",
        type=int,
        default=max(1, (os.cpu_count() or 2) - 1),
        help="client processes (default: one per CPU but the server's)",
    )
    parser.add_argument("--queue-size", type=int, default=64, help="agui_endpoint queue_size")
    parser.add_argument(
        "--log",
        choices=[*SERVERS, "redis"],
        default="none",
        help="the server: none (the default endpoint, connection-bound), memory (resumable), "
        "sdk (the official SDK's path), redis (resumable, on a redis-server it starts)",
    )
    parser.add_argument("--side-by-side", action="store_true", help="3. alone")
    parser.add_argument("--logged-rows", action="store_true", help="4. alone")
    parser.add_argument("--side-streams", type=int, default=100, help="side-by-side streams")
    parser.add_argument("--rounds", type=int, default=3, help="side-by-side rounds")
    parser.add_argument("--overhead-events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--overhead-only", action="store_true")
    options = parser.parse_args()
    os.environ["AGUIKIT_BENCH_QUEUE"] = str(options.queue_size)
    if options.logged_rows:
        logged_rows(options.side_streams, options.events, options.clients, options.rounds)
        return
    if not options.side_by_side:
        overhead(options.overhead_events, options.repeats)
    if not (options.overhead_only or options.side_by_side):
        print()
        os.environ["AGUIKIT_BENCH_LOG"] = options.log
        load(options.streams, options.events, options.clients)
    if not options.overhead_only:
        print()
        side = options.side_streams
        side_by_side(side, options.events, options.clients, options.rounds)


if __name__ == "__main__":
    main()
