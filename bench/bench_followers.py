"""
A long run followed live by several readers on one worker: the starting connection and
four joiners (``Last-Event-ID: 0``) of a run of 100,000 events on the memory log.

Issue 29 measured 68 events/s here: each wake-up of a follower copied and scanned the
whole retained run, so the cost of an event grew with the run.  The target is at least
20,000 events/s (the run's events over the time until every reader has its end), one
uvicorn worker in a process of its own.  Each reader is a process of its own that only
counts bytes, so reading does not take the worker's core; the worker's CPU seconds
(user + system, from ``/proc``) are reported too.

Usage::

    python bench/bench_followers.py                       # 100 000 events, 5 readers
    python bench/bench_followers.py --events 20000 --readers 3

Never asserts; numbers only.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx


def app(events: int) -> Any:
    from aguikit.server import MemoryEventLog, RunAgentInput, RunWriter, create_app

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        async with run.text_message() as message:
            for n in range(events):
                await message.write(f"w{n} ")

    return create_app(handler, keepalive=None, event_log=MemoryEventLog())


def serve(port: int, events: int) -> None:
    import uvicorn

    uvicorn.run(app(events), host="127.0.0.1", port=port, log_level="warning")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("the server did not start")


def _cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read(url: str, headers: dict[str, str], started: Any, out: Any) -> None:
    """Read the answer to its end, counting bytes only; send when it ended, and its size."""
    body = {"threadId": "t", "runId": "bench", "messages": []}
    size = 0
    with httpx.stream("POST", url, json=body, headers=headers, timeout=120) as answer:
        assert answer.status_code == 200, answer.status_code
        started.set()  # the run is in the log: the joiners may follow it
        for chunk in answer.iter_raw():
            size += len(chunk)
    out.put((time.perf_counter(), size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--readers", type=int, default=5)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.events)
        return
    port = _port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--events", str(args.events)],
        env=os.environ,
    )
    context = multiprocessing.get_context("spawn")
    try:
        _wait(port)
        url = f"http://127.0.0.1:{port}/"
        started, out = context.Event(), context.Queue()
        cpu = _cpu(server.pid)
        began = time.perf_counter()
        readers = [context.Process(target=read, args=(url, {}, started, out))]
        readers[0].start()
        started.wait(30)
        for _ in range(1, args.readers):
            joiner = context.Process(target=read, args=(url, {"Last-Event-ID": "0"}, started, out))
            joiner.start()
            readers.append(joiner)
        results = [out.get(timeout=300) for _ in readers]
        cpu = _cpu(server.pid) - cpu
        for process in readers:
            process.join()
    finally:
        server.terminate()
        server.wait(timeout=10)
    took = max(ended for ended, _ in results) - began
    total = args.events + 4  # RUN_STARTED, TEXT_MESSAGE_START, ..._END, RUN_FINISHED
    print(f"followers: {args.events} events, {args.readers} readers on one worker (memory log)")
    print(f"  every reader had the run's end after {took:.2f} s: {total / took:,.0f} events/s")
    print(f"  worker CPU {cpu:.2f} s ({cpu / total * 1e6:.1f} µs per event)")
    print(f"  bytes per reader: {', '.join(f'{size:,}' for _, size in results)}")


if __name__ == "__main__":
    main()
