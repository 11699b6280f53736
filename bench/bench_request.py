"""
What a hostile run request costs the server: the ``422`` path, bounded (issue 29).

A body the schema refuses is explained (up to 100 issues with their pointers); the
explanation used to walk every message with the pure-Python validator, so 439 KB of
wrong-typed messages held a worker's event loop for 17.8 s.  Two measurements, for bodies
as large as the default ``max_body_bytes`` admits (``aguikit.limits.MAX_BODY_BYTES``),
in several hostile shapes:

1. *CPU per answer.*  The endpoint is called in process through ASGI (the body arriving
   in 64 KB pieces, as uvicorn hands it over) and ``time.process_time`` is read around
   the whole request: reading, parsing, the verdict, the explanation and the problem
   document.  Warm (one small invalid body first: the validators are built once).  The
   target is 100 ms of CPU for every shape.
2. *Gaps in a concurrent stream.*  One uvicorn worker in a subprocess serves a run that
   emits an event every 10 ms; while a reader follows it, another process posts the
   hostile bodies one after another.  Reported, alone and while the posts ran: the
   largest lag of the server's event loop (each event says how late its 10 ms sleep
   woke) and the largest gap between two arrivals at the reader (which also counts the
   machine's scheduling of three processes).  The target is no gap over 100 ms.

Prints numbers and asserts nothing: timings depend on the machine (and on the other
processes sharing it: the gaps above all).

Usage::

    python bench/bench_request.py [--mib 4] [--posts 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aguikit.limits import MAX_BODY_BYTES
from aguikit.models import RunAgentInput
from aguikit.server import RunWriter, agui_endpoint, create_app
from aguikit.transport.sse import iter_events

HERE = Path(__file__).resolve().parent


def _fill(item: Callable[[int], Any], size: int) -> list[Any]:
    """Items ``item(0)``, ``item(1)``... until their JSON reaches ``size`` bytes."""
    out, total = [], 0
    while total < size:
        out.append(item(len(out)))
        total += len(json.dumps(item(len(out)))) + 2
    return out


def hostile_bodies(size: int) -> dict[str, bytes]:
    """Request bodies of about ``size`` bytes (just under it), each refused with a 422."""
    base = {"threadId": "t", "runId": "r"}
    valid = {"id": "m", "role": "user", "content": "a valid message of some length"}
    part = {"type": "text", "text": "a valid part"}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    shapes: dict[str, Any] = {
        "every message wrong-typed": lambda n: {
            **base,
            "messages": _fill(lambda i: {"id": i, "role": "user", "content": i}, n),
        },
        "valid messages, the last one wrong": lambda n: {
            **base,
            "messages": [*_fill(lambda i: valid, n), {"id": 1, "role": "user"}],
        },
        "valid messages, threadId wrong": lambda n: {
            **base,
            "threadId": 5,
            "messages": _fill(lambda i: valid, n),
        },
        "one message of many parts, the last wrong": lambda n: {
            **base,
            "messages": [
                {**valid, "content": [*_fill(lambda i: part, n), {"type": "text", "text": 5}]}
            ],
        },
        "one message of many tool calls, the last wrong": lambda n: {
            **base,
            "messages": [
                {"id": "a", "role": "assistant", "toolCalls": [*_fill(lambda i: call, n), {}]}
            ],
        },
        "every tool wrong-typed": lambda n: {
            **base,
            "messages": [],
            "tools": _fill(lambda i: {"name": i, "description": "d", "parameters": {}}, n),
        },
        "an array of wrong messages": lambda n: _fill(
            lambda i: {"id": i, "role": "user", "content": i}, n
        ),
    }
    bodies = {}
    for name, build in shapes.items():
        body = json.dumps(build(size - 200)).encode()
        while len(body) > size:  # trim to what the limit admits
            body = json.dumps(build(int(size * size / len(body)) - 200)).encode()
        bodies[name] = body
    return bodies


async def _noop(run_input: RunAgentInput, run: RunWriter) -> None:
    pass


def answer_cpu(endpoint: Any, body: bytes) -> tuple[int, float]:
    """The status and CPU milliseconds of one request, through ASGI in this process."""
    from starlette.requests import Request

    pieces = [body[i : i + 65536] for i in range(0, len(body), 65536)] or [b""]

    async def main() -> tuple[int, float]:
        sent = iter(range(len(pieces)))

        async def receive() -> dict[str, Any]:
            i = next(sent)
            return {"type": "http.request", "body": pieces[i], "more_body": i + 1 < len(pieces)}

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/",
            "headers": [(b"content-type", b"application/json")],
        }
        start = time.process_time()
        response = await endpoint(Request(scope, receive))
        return response.status_code, 1000 * (time.process_time() - start)

    return asyncio.run(main())


def cpu_section(bodies: dict[str, bytes], limit: int) -> float:
    endpoint = agui_endpoint(_noop, max_body_bytes=limit)
    answer_cpu(endpoint, b'{"threadId": 5, "messages": [{"id": 1}]}')  # warm
    worst = 0.0
    print(f"CPU per 422 answer (max_body_bytes = {limit:,} bytes), best of 3:")
    for name, body in bodies.items():
        runs = [answer_cpu(endpoint, body) for _ in range(3)]
        status, ms = runs[0][0], min(ms for _, ms in runs)
        worst = max(worst, ms)
        print(f"  {name:48s} {len(body):>10,} B  {status}  {ms:7.1f} ms")
    print(f"  worst: {worst:.1f} ms (target 100 ms)")
    return worst


# ---------------------------------------------------------------------------------------
# The gap section: a server process, a reader, a poster process
# ---------------------------------------------------------------------------------------


async def ticking(run_input: RunAgentInput, run: RunWriter) -> None:
    """A delta every 10 ms, for as long as ``forwardedProps.seconds`` says, each carrying
    the server's clock and how late its 10 ms sleep woke (the event loop's lag):
    ``"<monotonic>:<lag ms> "`` (one clock for every process of the machine)."""
    seconds = float((run_input.forwarded_props or {}).get("seconds", 10))
    async with run.text_message() as message:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            asleep = time.monotonic()
            await asyncio.sleep(0.01)
            now = time.monotonic()
            await message.write(f"{now:.4f}:{1000 * (now - asleep - 0.01):.1f} ")


app = create_app(
    ticking,
    event_log=None,
    max_body_bytes=int(os.environ.get("BENCH_MAX_BODY_BYTES", MAX_BODY_BYTES)),
)


def serve(port: int, limit: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path]),
        "BENCH_MAX_BODY_BYTES": str(limit),
    }
    code = (
        "import uvicorn, bench_request; "
        f"uvicorn.run(bench_request.app, host='127.0.0.1', port={port}, log_level='error')"
    )
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.05)
    raise RuntimeError("the server did not start")


def gap_section(bodies: dict[str, bytes], posts: int, limit: int) -> tuple[float, float]:
    import socket

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    server = serve(port, limit)
    # Written before the reader starts: dumping them holds this process's interpreter.
    path = HERE / ".hostile-bodies.json"
    path.write_text(json.dumps([b.decode() for b in bodies.values()] * posts))
    arrivals: list[float] = []
    received: list[bytes] = []
    quiet = 5.0
    try:
        seconds = quiet + 2 + 2.5 * posts * len(bodies)
        run = {
            "threadId": "t",
            "runId": "r",
            "messages": [],
            "forwardedProps": {"seconds": seconds},
        }

        def read() -> None:
            with httpx.stream("POST", url, json=run, timeout=120) as response:
                for chunk in response.iter_raw():
                    arrivals.append(time.monotonic())
                    received.append(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        while len(arrivals) < 50:  # streaming: the quiet window starts now
            time.sleep(0.05)
        quiet_start = time.monotonic()
        time.sleep(quiet)
        quiet_end = time.monotonic()
        poster = (
            "import httpx, json, sys\n"
            f"for body in json.load(open({str(path)!r})):\n"
            f"    r = httpx.post({url!r}, content=body.encode(), "
            "headers={'Content-Type': 'application/json'}, timeout=120)\n"
            "    assert r.status_code == 422, r.status_code\n"
        )
        subprocess.run([sys.executable, "-c", poster], check=True)
        hostile_end = time.monotonic()
        reader.join()
    finally:
        path.unlink(missing_ok=True)
        server.terminate()
        server.wait(30)

    def worst(start: float, end: float) -> float:
        inside = [t for t in arrivals if start <= t <= end]
        return 1000 * max((b - a for a, b in itertools.pairwise(inside)), default=0)

    lags = [
        tuple(map(float, tick.split(":")))
        for event in iter_events([b"".join(received)])
        if event["type"] == "TEXT_MESSAGE_CONTENT"
        for tick in event["delta"].split()
    ]

    def lag(start: float, end: float) -> float:
        return max((ms for at, ms in lags if start <= at <= end), default=0.0)

    quiet_gap, hostile_gap = worst(quiet_start, quiet_end), worst(quiet_end, hostile_end)
    load = ", ".join(f"{n:.1f}" for n in os.getloadavg())
    print(
        f"a concurrent stream (an event every 10 ms), {quiet:.0f} s alone, then {posts} x "
        f"{len(bodies)} posts (load average {load}: wall-clock gaps grow with it):"
    )
    print(
        f"  the server's event loop, largest lag: alone {lag(quiet_start, quiet_end):6.1f} ms; "
        f"during the posts {lag(quiet_end, hostile_end):6.1f} ms (target 100 ms)"
    )
    print(
        f"  the reader, largest gap between arrivals: alone {quiet_gap:6.1f} ms; "
        f"during the posts {hostile_gap:6.1f} ms"
    )
    return quiet_gap, hostile_gap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--mib", type=float, default=MAX_BODY_BYTES / 2**20)
    parser.add_argument("--posts", type=int, default=3)
    args = parser.parse_args()
    limit = int(args.mib * 2**20)
    bodies = hostile_bodies(limit)
    cpu_section(bodies, limit)
    gap_section(bodies, args.posts, limit)


if __name__ == "__main__":
    main()
