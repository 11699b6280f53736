"""
What making runs resumable costs per event: the event log's append (and a follower's read)
next to encoding the event as an SSE frame, for the in-memory log and for Redis Streams.

Every event of a logged run is appended once by the worker running it and read once by
each connection following it; encoding is what every server pays anyway, so it is the
yardstick.  Redis is measured against a real ``redis-server`` started on a free loopback
port (``--redis URL`` to use one of your own); the numbers include the round trip, which
on a real deployment is a network hop rather than loopback.

``--state`` measures instead what the memory log keeps of a delta-heavy state (a
``STATE_SNAPSHOT`` then mostly ``STATE_DELTA``, some text): the bytes it holds (tracemalloc)
while the run runs and once it ended, and the append time, against the same run without
its leading snapshot, whose deltas the log cannot fold (no known state to fold them on) and
keeps as sent, measured in the same process, the two alternating ``--rounds`` times.

Usage::

    python bench/bench_resume.py               # 20 000 events
    python bench/bench_resume.py --events 100000 --redis redis://127.0.0.1:6379/0
    python bench/bench_resume.py --state --events 20000 --rounds 3

Never asserts; numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

from aguikit.server.eventlog import MemoryEventLog
from aguikit.transport.sse import encode_bytes


def events(count: int) -> list[dict[str, Any]]:
    """A realistic mix: mostly text deltas, some tool arguments and state deltas."""
    out: list[dict[str, Any]] = []
    for n in range(count):
        kind = n % 10
        if kind < 7:
            out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"word{n} "})
        elif kind < 9:
            out.append({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"city": "Par'})
        else:
            out.append({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": n}]})
    return out


def state_events(count: int, *, snapshot: bool) -> list[dict[str, Any]]:
    """A delta-heavy state: a board of 50 tasks, nine events in ten a ``STATE_DELTA``
    (progress, one task's flag, an entry appended to a log of the last ten), one in ten
    a text delta; with or without the leading ``STATE_SNAPSHOT`` the deltas apply to."""
    tasks = [{"title": f"task {k}", "done": False} for k in range(50)]
    out: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    if snapshot:
        out.append(
            {"type": "STATE_SNAPSHOT", "snapshot": {"tasks": tasks, "progress": 0, "log": []}}
        )
    out.append({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
    for n in range(count - len(out) - 2):
        kind = n % 10
        if kind == 9:
            out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"word{n} "})
        elif kind < 4:
            out.append(
                {
                    "type": "STATE_DELTA",
                    "delta": [{"op": "replace", "path": "/progress", "value": n}],
                }
            )
        elif kind < 7:
            path = f"/tasks/{n % 50}/done"
            out.append(
                {
                    "type": "STATE_DELTA",
                    "delta": [{"op": "replace", "path": path, "value": n % 3 == 0}],
                }
            )
        else:
            ops: list[dict[str, Any]] = [{"op": "add", "path": "/log/-", "value": f"step {n}"}]
            if n >= 70:  # the log keeps its last ten entries
                ops.append({"op": "remove", "path": "/log/0"})
            out.append({"type": "STATE_DELTA", "delta": ops})
    out.append({"type": "TEXT_MESSAGE_END", "messageId": "m1"})
    out.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return out


async def kept(batch: list[dict[str, Any]]) -> tuple[int, int, float]:
    """Bytes a fresh memory log holds for ``batch`` when its last event is logged and once
    the run ended (tracemalloc), and seconds to append it and end the run (another log,
    untraced: tracing slows allocation)."""
    log = MemoryEventLog()
    start = time.perf_counter()
    for wire in batch:
        await log.append("r", wire)
    await log.end("r")
    appended = time.perf_counter() - start
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        log = MemoryEventLog()
        for wire in batch:
            await log.append("r", wire)
        running = tracemalloc.get_traced_memory()[0] - before
        await log.end("r")
        ended = tracemalloc.get_traced_memory()[0] - before
        assert len(await log.read("r")) <= len(batch)
        return running, ended, appended
    finally:
        tracemalloc.stop()


def main_state(count: int, rounds: int) -> None:
    with_base = state_events(count, snapshot=True)
    without = state_events(count, snapshot=False)
    print(f"{count} events, 9 in 10 a STATE_DELTA; memory log, tracemalloc; A/B alternating")
    print(f"{'round':>5} {'':28} {'running KiB':>12} {'ended KiB':>10} {'append µs/ev':>13}")
    ratios: list[tuple[float, float, float]] = []
    for round_ in range(1, rounds + 1):
        rows = {}
        for name, batch in (
            ("no snapshot (kept as sent)", without),
            ("snapshot, then deltas", with_base),
        ):
            rows[name] = asyncio.run(kept(batch))
            running, ended, appended = rows[name]
            print(
                f"{round_:>5} {name:28} {running / 1024:12.0f} {ended / 1024:10.0f}"
                f" {appended / len(batch) * 1e6:13.2f}"
            )
        a, b = rows["snapshot, then deltas"], rows["no snapshot (kept as sent)"]
        ratios.append((a[0] / b[0], a[1] / b[1], a[2] / b[2]))
    for what, k in (("running", 0), ("ended", 1), ("append time", 2)):
        low, *_, high = values = sorted([r[k] for r in ratios] * 2)
        median = values[len(values) // 2]
        print(f"folded / as sent, {what}: {median:.3f} (min {low:.3f}, max {high:.3f})")


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as workdir:
        args = [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir]
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        try:
            for _ in range(500):
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                time.sleep(0.01)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait()


async def measure(
    log: Any, batch: list[dict[str, Any]], run_id: str, *, frames: bool = False
) -> tuple[float, float]:
    """Seconds to append ``batch`` and end the run, and to follow it from its start: as
    wire dicts, or (``frames``) as the SSE frames the memory log keeps encoded.  The ended
    run may come compacted (fewer events standing for the same ids): its last id counts."""
    start = time.perf_counter()
    for wire in batch:
        await log.append(run_id, wire)
    await log.end(run_id)
    appended = time.perf_counter() - start
    start = time.perf_counter()
    ids = [item[0] async for item in (log.follow_frames if frames else log.follow)(run_id, "0")]
    assert ids[-1] == str(len(batch))
    return appended, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--redis", help="a Redis URL (default: start a redis-server)")
    parser.add_argument("--state", action="store_true", help="a delta-heavy state's memory")
    parser.add_argument("--rounds", type=int, default=3, help="with --state: A/B rounds")
    args = parser.parse_args()
    if args.state:
        main_state(args.events, args.rounds)
        return
    batch = events(args.events)
    n = len(batch)

    start = time.perf_counter()
    for wire in batch:
        encode_bytes(wire)
    encode = time.perf_counter() - start
    rows = [("encode as SSE frame (yardstick)", encode, None)]

    append, follow = asyncio.run(measure(MemoryEventLog(), batch, "bench"))
    rows.append(("MemoryEventLog", append, follow))
    append, follow = asyncio.run(measure(MemoryEventLog(), batch, "bench", frames=True))
    rows.append(("MemoryEventLog, SSE (follow_frames)", append, follow))

    with contextlib.ExitStack() as stack:
        url = args.redis or stack.enter_context(redis_server())
        if url is None:
            print("redis-server not found: the Redis log is not measured")
        else:
            from aguikit.server.redis_log import RedisEventLog

            log = RedisEventLog.from_url(url, prefix="bench:")
            append, follow = asyncio.run(measure(log, batch, f"bench-{time.time_ns()}"))
            rows.append(("RedisEventLog (loopback)", append, follow))

    print(f"{n} events; µs per event")
    print(f"{'':34} {'append/encode':>14} {'follow (read)':>14}")
    for name, first, second in rows:
        read = "" if second is None else f"{second / n * 1e6:14.2f}"
        print(f"{name:34} {first / n * 1e6:14.2f} {read:>14}")


if __name__ == "__main__":
    main()
