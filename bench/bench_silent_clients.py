"""
Clients that never read: 200 connections start a run each and then take nothing, for
120 s, against one uvicorn worker with the default memory log.

Issue 29 saw such clients hold their handlers for ever (RSS 41 -> 223 MB, still climbing
after two minutes).  With ``send_timeout`` a client whose write waits that long is treated
as gone, and its run is cancelled one ``resume_grace`` later.  A write waits only once the
kernel's socket buffers are full (several MiB per connection on loopback, in the kernel's
memory, not the worker's), so the handler here writes 16 KiB every 10 ms; a slower one is
caught as many seconds later as it takes to fill them.  This prints how many
handlers still run at the deadline (``send_timeout + resume_grace`` plus a poll), and the
worker's RSS before the clients, at its peak and after they are gone and their runs'
logs expired (``--ttl``, 10 s here: the default keeps an ended run 300 s).  It takes as long as
``--seconds`` (120 by default); ``nox -s bench`` runs it.

Usage::

    python bench/bench_silent_clients.py                       # 200 clients, 120 s
    python bench/bench_silent_clients.py --clients 50 --seconds 30 --send-timeout 5 --grace 5

Never asserts; numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx


def app(send_timeout: float, grace: float, ttl: float) -> Any:
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from aguikit.server import RunAgentInput, RunWriter, create_app
    from aguikit.server.eventlog import MemoryEventLog

    live = {"handlers": 0, "started": 0}

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        live["handlers"] += 1
        live["started"] += 1
        try:
            async with run.text_message() as message:
                while True:  # 16 KiB every 10 ms, for ever: fills the socket buffers
                    await message.write("x" * 16384)
                    await asyncio.sleep(0.01)
        finally:
            live["handlers"] -= 1

    async def stats(request: Any) -> JSONResponse:
        if request.query_params.get("trim"):
            # What the worker still holds, not what glibc keeps of what it freed.
            import ctypes
            import gc

            gc.collect()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        return JSONResponse({**live, "retained": log.total_events})

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
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        import uvicorn

        uvicorn.run(
            app(args.send_timeout, args.grace, args.ttl),
            host="127.0.0.1",
            port=args.serve,
            log_level="error",
        )
        return
    port = _port()
    command = [sys.executable, __file__, "--serve", str(port)]
    command += ["--send-timeout", str(args.send_timeout), "--grace", str(args.grace)]
    command += ["--ttl", str(args.ttl)]
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
        before = _rss(server.pid)
        began = time.monotonic()
        clients = [_silent(port, f"silent-{n}") for n in range(args.clients)]
        peak, stopped_at = before, None
        bound = args.send_timeout + args.grace + 2.0
        while time.monotonic() - began < max(args.seconds, bound):
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
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"silent clients: {args.clients} for {args.seconds:.0f} s, one worker (memory log)")
    print(
        f"  send_timeout {args.send_timeout} s + resume_grace {args.grace} s: every handler "
        f"stopped after {stopped_at if stopped_at is None else round(stopped_at, 1)} s "
        f"(bound {bound:.0f} s); {at_end['handlers']} of {at_end['started']} still running at "
        "the end"
    )
    print(
        f"  RSS: {before:.1f} MiB before, {peak:.1f} MiB peak, {after:.1f} MiB after "
        f"({(after - before) / before:+.1%}); {retained} events still logged; "
        f"{trimmed:.1f} MiB after malloc_trim ({(trimmed - before) / before:+.1%})"
    )


if __name__ == "__main__":
    main()
