"""
What ``aguikit proxy`` costs: the delay it adds to each event's arrival, and its CPU per
event over forwarding alone.

One uvicorn worker (a raw ASGI agent, so the agent's own cost stays out of the numbers)
streams ``--streams`` concurrent runs of ``--events`` valid events, one every
``--interval`` ms per stream, each stamped with the time it was written
(``rawEvent.sent``, ms: the schema's ``timestamp`` is whole milliseconds).  A client
process reads them all three ways, side by side in the same run:

* ``direct``: from the agent;
* ``forward``: through ``aguikit proxy --no-validate`` (one worker), forwarding alone;
* ``proxy``: through ``aguikit proxy`` (one worker) judging every request, event and
  thread, as a user runs it.

Reported per way: p50/p99 arrival delay (arrival minus the agent's stamp, same clock),
the p99 added over ``direct``, and the proxy process's CPU seconds per event (from
``/proc``), with the ratio ``proxy``/``forward``.  The targets (issue 25): at most 2 ms
added at p99 and at most +20% CPU per event over forwarding alone.  It asserts only that
every stream arrived whole: timings depend on the machine.

Usage::

    python bench/bench_proxy.py [--streams 100] [--events 1000] [--interval 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


# -- the agent (its own process) ---------------------------------------------------------


def agent_app(events: int, interval: float) -> Any:
    async def app(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw)
        thread, run = body["threadId"], body["runId"]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )

        def frame(event: dict[str, Any]) -> bytes:
            # rawEvent carries the send time: the schema's timestamp is whole milliseconds
            event["rawEvent"] = {"sent": time.time() * 1000}
            return b"data: " + json.dumps(event).encode() + b"\n\n"

        plan: list[dict[str, Any]] = [
            {"type": "RUN_STARTED", "threadId": thread, "runId": run},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        ]
        plan += [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{n} "}
            for n in range(events - 4)
        ]
        plan += [
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
        ]
        for event in plan:
            await asyncio.sleep(interval / 1000)
            await send({"type": "http.response.body", "body": frame(event), "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


def serve_agent(port: int, events: int, interval: float) -> None:
    import uvicorn

    uvicorn.run(agent_app(events, interval), host="127.0.0.1", port=port, log_level="warning")


# -- the client (its own process) ----------------------------------------------------------


async def _one(client: httpx.AsyncClient, url: str, n: int, delays: list[float]) -> int:
    body = {"threadId": f"t{n}", "runId": f"r{n}", "messages": [], "protocolVersion": "1.1"}
    count = 0
    pending = b""
    async with client.stream("POST", url, json=body) as response:
        async for chunk in response.aiter_bytes():
            now = time.time() * 1000
            pending += chunk
            *frames, pending = pending.split(b"\n\n")
            for frame in frames:
                if frame.startswith(b"data: "):
                    delays.append(now - json.loads(frame[6:])["rawEvent"]["sent"])
                    count += 1
    return count


async def _client(url: str, streams: int) -> dict[str, Any]:
    delays: list[float] = []
    limits = httpx.Limits(max_connections=streams + 10)
    async with httpx.AsyncClient(timeout=None, limits=limits) as client:
        counts = await asyncio.gather(*(_one(client, url, n, delays) for n in range(streams)))
    return {"counts": counts, "delays": delays}


def run_client(url: str, streams: int) -> dict[str, Any]:
    return asyncio.run(_client(url, streams))


# -- the measurement -----------------------------------------------------------------------


def _cpu(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as fp:
        fields = fp.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 1000) - 1]


def measure(way: str, agent: str, args: argparse.Namespace) -> dict[str, Any]:
    proxy = None
    url = agent
    if way != "direct":
        port = _free_port()
        command = [sys.executable, "-m", "aguikit", "proxy", "--upstream", agent]
        command += ["--port", str(port)] + (["--no-validate"] if way == "forward" else [])
        proxy = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        _wait(port)
        url = f"http://127.0.0.1:{port}/"
    cpu_before = _cpu(proxy.pid) if proxy else 0.0
    out = subprocess.run(
        [sys.executable, __file__, "--client", url, "--streams", str(args.streams)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout)
    cpu = (_cpu(proxy.pid) - cpu_before) if proxy else 0.0
    summary = ""
    if proxy is not None:
        proxy.terminate()
        summary = proxy.communicate(timeout=60)[0].decode().strip().splitlines()[-1:]
    counts, delays = result["counts"], result["delays"]
    assert all(c == args.events for c in counts), f"{way}: incomplete streams {counts}"
    return {
        "way": way,
        "events": sum(counts),
        "p50": _quantile(delays, 0.5),
        "p99": _quantile(delays, 0.99),
        "cpu_per_event_us": cpu / sum(counts) * 1e6,
        "summary": summary,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=20.0, help="ms between events")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--agent", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(run_client(args.client, args.streams)))
        return
    if args.agent:
        serve_agent(args.agent, args.events, args.interval)
        return
    port = _free_port()
    agent_process = subprocess.Popen(
        [
            *(sys.executable, __file__, "--agent", str(port)),
            *("--events", str(args.events), "--interval", str(args.interval)),
        ]
    )
    try:
        _wait(port)
        agent = f"http://127.0.0.1:{port}/"
        print(
            f"bench_proxy: {args.streams} streams x {args.events} events, one every "
            f"{args.interval:g} ms per stream, one proxy worker"
        )
        results = {way: measure(way, agent, args) for way in ("direct", "forward", "proxy")}
    finally:
        agent_process.terminate()
        agent_process.wait()
    for r in results.values():
        print(
            f"  {r['way']:8} p50 {r['p50']:7.2f} ms  p99 {r['p99']:7.2f} ms  "
            f"(+{r['p99'] - results['direct']['p99']:.2f} ms at p99 over direct)  "
            f"proxy CPU {r['cpu_per_event_us']:6.1f} us/event  {' '.join(r['summary'])}"
        )
    forward, proxy = results["forward"], results["proxy"]
    print(
        f"  judging adds {proxy['p99'] - forward['p99']:+.2f} ms at p99 over forwarding alone, "
        f"CPU per event x{proxy['cpu_per_event_us'] / forward['cpu_per_event_us']:.2f} "
        f"(target: +2 ms at p99 over direct, x1.20 CPU over forwarding)"
    )


if __name__ == "__main__":
    main()
