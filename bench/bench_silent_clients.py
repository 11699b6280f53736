"""
Clients that never read: 200 connections start a run each and then take nothing, for
120 s, against one uvicorn worker with the default memory log.

Issue 29 saw such clients hold their handlers for ever (RSS 41 -> 223 MB, still climbing
after two minutes).  With ``send_timeout`` a client whose write waits that long is treated
as gone, and its run is cancelled one ``resume_grace`` later.  A write waits only once the
kernel's socket buffers are full (about 2.8 MiB per connection on loopback by default, in
the kernel's memory, not the worker's), so the handler here writes 16 KiB every 10 ms; a
slower one is caught as many seconds later as it takes to fill them.  How long that takes
is the worker's to say (every byte goes through the run's log first), so the report
separates it: for each connection, when its write first waited (``treated as gone`` minus
``send_timeout``, from the first handler's start), and how long after that its handler
stopped, against the documented bound ``send_timeout + resume_grace`` plus a second's
poll.  ``--sndbuf`` serves from a listening socket with that ``SO_SNDBUF`` (accepted
connections inherit it), the deployment knob that bounds the kernel's share and so the
filling.

RSS is read before the clients (cold, and after one short warm-up run, which loads what
the first request imports), at its peak, and once the clients left and their runs' logs
expired (``--ttl``, 10 s here: the default keeps an ended run 300 s); then after
``malloc_trim``, which separates what the worker holds from what glibc keeps of what it
freed.  It also counts the asyncio tasks left in the worker beyond uvicorn's own (0 is
the target: no zombie follower, watch or reaper).  It takes as long as ``--seconds`` (120
by default); ``nox -s bench`` runs it.

Usage::

    python bench/bench_silent_clients.py                       # 200 clients, 120 s
    python bench/bench_silent_clients.py --clients 50 --seconds 30 --send-timeout 5 --grace 5

Never asserts; numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.resume_app


def app(send_timeout: float, grace: float, ttl: float) -> Any:
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from tests.resume_app import stray_tasks

    from aguikit.server import RunAgentInput, RunWriter, create_app
    from aguikit.server.eventlog import MemoryEventLog

    live: dict[str, Any] = {"handlers": 0, "started": 0, "gone": {}, "stopped": {}}
    first: list[float] = []

    def since_first() -> float:
        return time.monotonic() - first[0]

    class Gone(logging.Handler):
        """Times the endpoint's "treated as gone" lines, one per stalled connection."""

        def emit(self, record: logging.LogRecord) -> None:
            if "treated as gone" in record.getMessage():
                assert isinstance(record.args, tuple)
                live["gone"][record.args[0]] = since_first()  # by run id

    server_log = logging.getLogger("aguikit.server")
    server_log.setLevel(logging.INFO)
    server_log.addHandler(Gone())

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        if run_input.run_id.startswith("warm-up"):  # a short run, read whole
            async with run.text_message() as message:
                for _ in range(100):
                    await message.write("x" * 16384)
            return
        first[:] = first or [time.monotonic()]
        live["handlers"] += 1
        live["started"] += 1
        try:
            async with run.text_message() as message:
                while True:  # 16 KiB every 10 ms, for ever: fills the socket buffers
                    await message.write("x" * 16384)
                    await asyncio.sleep(0.01)
        finally:
            live["handlers"] -= 1
            live["stopped"][run_input.run_id] = since_first()

    async def stats(request: Any) -> JSONResponse:
        if request.query_params.get("trim"):
            # What the worker still holds, not what glibc keeps of what it freed.
            import ctypes
            import gc

            gc.collect()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        tasks = len(stray_tasks())  # a silent client's request still running counts
        return JSONResponse({**live, "retained": log.total_events, "tasks": tasks})

    log = MemoryEventLog(ttl=ttl)
    served = create_app(
        handler, send_timeout=send_timeout, resume_grace=grace, keepalive=None, event_log=log
    )
    served.router.routes.append(Route("/stats", stats, methods=["GET"]))
    return served


def _rss(pid: int) -> float:
    """Resident memory of ``pid`` in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _silent(port: int, run_id: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = json.dumps({"threadId": "t", "runId": run_id, "messages": []}).encode()
    sock.sendall(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--send-timeout", type=float, default=30.0)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--ttl", type=float, default=10.0, help="the memory log's ttl")
    parser.add_argument(
        "--sndbuf", type=int, default=0, help="SO_SNDBUF of the listening socket (0: the kernel's)"
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        import uvicorn

        listening = socket.socket()
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if args.sndbuf:  # inherited by every accepted connection (Linux)
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.sndbuf)
        listening.bind(("127.0.0.1", args.serve))
        served = app(args.send_timeout, args.grace, args.ttl)
        config = uvicorn.Config(served, log_level="critical")  # not one line per silent client
        uvicorn.Server(config).run(sockets=[listening])
        return
    port = _port()
    command = [sys.executable, __file__, "--serve", str(port)]
    command += ["--send-timeout", str(args.send_timeout), "--grace", str(args.grace)]
    command += ["--ttl", str(args.ttl), "--sndbuf", str(args.sndbuf)]
    server = subprocess.Popen(command, env=os.environ)
    stats = f"http://127.0.0.1:{port}/stats"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(stats)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        cold = _rss(server.pid)
        warm_up = {"threadId": "t", "runId": "warm-up", "messages": []}
        httpx.post(f"http://127.0.0.1:{port}/", json=warm_up, timeout=60).raise_for_status()
        before = _rss(server.pid)
        began = time.monotonic()
        clients = [_silent(port, f"silent-{n}") for n in range(args.clients)]
        peak, stopped_at = before, None
        bound = args.send_timeout + args.grace + 2.0
        # The clients stay --seconds, and longer (up to the bound again) while a handler
        # still runs: a worker slow to fill the buffers is reported, not cut short.
        while (elapsed := time.monotonic() - began) < max(args.seconds, bound) or (
            stopped_at is None and elapsed < max(args.seconds, bound) + bound
        ):
            time.sleep(1.0)
            peak = max(peak, _rss(server.pid))
            live = httpx.get(stats).json()
            if stopped_at is None and live["started"] and not live["handlers"]:
                stopped_at = time.monotonic() - began
        at_end = httpx.get(stats).json()
        for client in clients:
            client.close()
        time.sleep(args.ttl + 2.0)  # the ended runs' logs expire
        httpx.post(  # any look at the log expires them: a resume of an unknown run
            f"http://127.0.0.1:{port}/",
            json={"threadId": "t", "runId": "nobody", "messages": []},
            headers={"Last-Event-ID": "1"},
        )
        after = _rss(server.pid)
        retained = httpx.get(stats, params={"trim": "1"}).json()["retained"]
        trimmed = _rss(server.pid)
        tasks = httpx.get(stats).json()["tasks"]
    finally:
        server.terminate()
        server.wait(timeout=10)
    sndbuf = f"SO_SNDBUF {args.sndbuf}" if args.sndbuf else "the kernel's socket buffers"
    print(
        f"silent clients: {args.clients} for {args.seconds:.0f} s, one worker (memory log), "
        f"{sndbuf}"
    )
    print(
        f"  send_timeout {args.send_timeout} s + resume_grace {args.grace} s: every handler "
        f"stopped after {stopped_at if stopped_at is None else round(stopped_at, 1)} s "
        f"(bound {bound:.0f} s once the buffers filled); {at_end['handlers']} of "
        f"{at_end['started']} still running at the end"
    )
    waited = {run: gone - args.send_timeout for run, gone in at_end["gone"].items()}
    stopped = at_end["stopped"]
    if waited and waited.keys() <= stopped.keys():
        late = max(stopped[run] - wait for run, wait in waited.items())
        print(
            f"  {len(waited)} connections' writes first waited {min(waited.values()):.1f} to "
            f"{max(waited.values()):.1f} s after the first handler started (filling the "
            f"buffers); each handler stopped at most {late:.1f} s after its write first waited "
            f"(bound {bound:.0f} s)"
        )
    print(
        f"  RSS: {cold:.1f} MiB cold, {before:.1f} MiB after a warm-up run, {peak:.1f} MiB "
        f"peak, {after:.1f} MiB after ({(after - before) / before:+.1%} on the warm start); "
        f"{retained} events still logged; {trimmed:.1f} MiB after malloc_trim "
        f"({(trimmed - before) / before:+.1%} warm, {(trimmed - cold) / cold:+.1%} cold); "
        f"{tasks} asyncio tasks left beyond uvicorn's"
    )


if __name__ == "__main__":
    main()
