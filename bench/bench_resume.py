"""
What making runs resumable costs per event: the event log's append (and a follower's read)
next to encoding the event as an SSE frame, for the in-memory log and for Redis Streams.

Every event of a logged run is appended once by the worker running it and read once by
each connection following it; encoding is what every server pays anyway, so it is the
yardstick.  Redis is measured against a real ``redis-server`` started on a free loopback
port (``--redis URL`` to use one of your own); the numbers include the round trip, which
on a real deployment is a network hop rather than loopback.

Usage::

    python bench/bench_resume.py               # 20 000 events
    python bench/bench_resume.py --events 100000 --redis redis://127.0.0.1:6379/0

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
    args = parser.parse_args()
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
