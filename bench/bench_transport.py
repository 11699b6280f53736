"""
Transport and CLI throughput: how fast bytes become events, and what ``aguikit check`` costs.

Run with ``python bench/bench_transport.py``.  Nothing is asserted; the numbers are printed
for a human (targets: tens of MB/s for SSE decoding, >= 50,000 events/s end to end for
``aguikit check``, and a peak RSS that does not grow with the file's length).

What is measured:

* SSE frame decoding and SSE -> event objects, in MB/s and events/s, fed in 64 KiB blocks
  as a file or a socket would deliver them;
* the same with 1,460-byte blocks (one TCP segment each), the worst realistic case;
* JSONL decoding;
* ``aguikit check`` as a subprocess on generated 100,000- and 300,000-event streams: wall
  time, events/s and the child's peak RSS (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aguikit.transport.jsonl import encode_line, iter_jsonl
from aguikit.transport.sse import encode, iter_events, iter_frames


def generate(count: int) -> Iterator[dict[str, Any]]:
    """A valid, realistic stream of about ``count`` events: runs of streamed text and tools."""
    thread = "bench-thread"
    yield {"type": "RUN_STARTED", "threadId": thread, "runId": "r1"}
    yield {"type": "STATE_SNAPSHOT", "snapshot": {"turn": 0}}
    produced, n = 2, 0
    while produced < count - 1:
        n += 1
        mid, cid = f"m{n}", f"c{n}"
        yield {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}
        for i in range(20):
            yield {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": mid,
                "delta": f"token {i} of message {n}, with some ordinary prose around it. ",
            }
        yield {"type": "TEXT_MESSAGE_END", "messageId": mid}
        yield {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "search"}
        yield {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": '{"query": "weather", '}
        yield {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": '"limit": 5}'}
        yield {"type": "TOOL_CALL_END", "toolCallId": cid}
        yield {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"t{n}",
            "toolCallId": cid,
            "content": '{"results": [1, 2, 3]}',
        }
        yield {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/turn", "value": n}]}
        produced += 29
    yield {"type": "RUN_FINISHED", "threadId": thread, "runId": "r1"}


def generate_bounded(count: int) -> Iterator[dict[str, Any]]:
    """A stream whose materialised conversation stays the same size: state deltas only."""
    yield {"type": "RUN_STARTED", "threadId": "bounded", "runId": "r1"}
    yield {"type": "STATE_SNAPSHOT", "snapshot": {"turn": 0, "note": "x" * 100}}
    for n in range(count - 3):
        yield {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/turn", "value": n}]}
    yield {"type": "RUN_FINISHED", "threadId": "bounded", "runId": "r1"}


def write_stream(path: Path, count: int, fmt: str, bounded: bool = False) -> int:
    events = 0
    with path.open("w", encoding="utf-8") as fp:
        for event in (generate_bounded if bounded else generate)(count):
            fp.write(encode(event) if fmt == "sse" else encode_line(event))
            events += 1
    return events


def blocks(data: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


def measure(label: str, data: bytes, block: int, run: Callable[[Iterator[bytes]], int]) -> None:
    best = float("inf")
    count = 0
    for _ in range(3):
        start = time.perf_counter()
        count = run(blocks(data, block))
        best = min(best, time.perf_counter() - start)
    mb = len(data) / 1e6
    print(
        f"{label:<44} {mb / best:8.1f} MB/s {count / best:12,.0f} events/s"
        f"   ({count:,} events, {mb:.1f} MB, {best * 1000:.0f} ms)"
    )


def check_subprocess(path: Path) -> tuple[float, int, int]:
    """Wall seconds, exit code and the child's peak RSS in KiB for ``aguikit check``."""
    start = time.perf_counter()
    # Each check runs in its own grandchild-free process, so RUSAGE_CHILDREN's maximum after
    # it returns is that process's peak (the first, smaller file runs first).
    proc = subprocess.run(
        [sys.executable, "-m", "aguikit", "check", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
    return wall, proc.returncode, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        sse_path = Path(tmp) / "bench.sse"
        jsonl_path = Path(tmp) / "bench.jsonl"
        count = write_stream(sse_path, args.events, "sse")
        write_stream(jsonl_path, args.events, "jsonl")
        sse_data = sse_path.read_bytes()
        jsonl_data = jsonl_path.read_bytes()

        print(f"decoding ({count:,} events, best of 3)")
        measure(
            "SSE frames, 64 KiB blocks", sse_data, 65536, lambda c: sum(1 for _ in iter_frames(c))
        )
        measure(
            "SSE frames, 1460-byte blocks", sse_data, 1460, lambda c: sum(1 for _ in iter_frames(c))
        )
        measure(
            "SSE -> event objects, 64 KiB blocks",
            sse_data,
            65536,
            lambda c: sum(1 for _ in iter_events(c)),
        )
        measure(
            "JSONL -> event objects, 64 KiB blocks",
            jsonl_data,
            65536,
            lambda c: sum(1 for _ in iter_jsonl(c)),
        )

        print("\naguikit check (subprocess: validate + verify + apply)")
        # Smaller files first: RUSAGE_CHILDREN keeps the maximum over all children so far.
        for bounded in (True, False):
            kind = "state deltas only (conversation constant)" if bounded else "chat + tools"
            print(kind)
            for n in (args.events, 3 * args.events):
                path = Path(tmp) / f"check-{n}-{bounded}.sse"
                events = write_stream(path, n, "sse", bounded)
                wall, code, peak = check_subprocess(path)
                print(
                    f"{events:>9,} events  {path.stat().st_size / 1e6:7.1f} MB  {wall:6.2f} s"
                    f"  {events / wall:10,.0f} events/s  peak RSS {peak / 1024:6.1f} MiB"
                    f"  exit {code}"
                )


if __name__ == "__main__":
    main()
