"""
What ``aguikit proxy`` costs: the delay it adds to each event's arrival, and its CPU per
event over forwarding alone.

One uvicorn worker (a raw ASGI agent, so the agent's own cost stays out of the numbers)
serves ``--streams`` concurrent runs of ``--events`` valid events, one every
``--interval`` ms per stream, each stream on its own phase of the interval (stream ``k``
of ``n`` at ``k/n`` of it: 100 conversations do not tick together), or all at the same
instants with ``--lockstep`` (the worst burst: every stream's event arrives at once, so
the last one forwarded waits for all the others).  Proxies run beside it, one worker each:

* ``forward``: ``aguikit proxy --no-validate``, forwarding alone;
* ``judge``: ``aguikit proxy`` judging every request, event and thread, as a user runs it;
* ``record``: the same with ``--record DIR``, whose recordings give the proxy's own measure.

The machine this runs on is shared, so nothing is compared across runs, only within one:

* **Paired delays.**  Every stream is requested twice at once, directly and through the
  round's proxy; the agent writes each event to both connections back to back, each
  stamped (``rawEvent.sent``, ns) just before its write.  The client reads the kernel's
  receive time of each read (``SO_TIMESTAMPNS``), so its own scheduling is out of the
  measure; an event's delay is that time minus its stamp, and what the proxy adds is, per
  event, its delay through the proxy minus the same event's delay direct.
* **The proxy's own stamps** (issue 25, item 4): in the ``record`` round, per event, the
  time from the read that completed it leaving the upstream connection (httpx handing it
  over) to its being written downstream, from the recording's ``upstreamMs`` and
  ``downstreamMs``.  The difference between this and the added delay is the time the
  bytes waited for the proxy's loop to get to them (the machine's and the other streams'
  share).
* **Rotated CPU.**  Rounds rotate through the proxies (``--repeat`` sets, the order
  rotated every set); a round's CPU is the proxy process's user plus system time over it
  (``/proc``), per event; the judging's cost is the median over the sets of
  ``judge``/``forward``.
* **Pinning** (``--pin``): the proxies on the last CPU, the agent and the clients on the
  first, so the proxy never waits behind the agent's own writes (other work on the
  machine still can: each round prints the proxy's run-queue share).

* **Before and after** (``--before SRC``): every proxy also runs from another source tree
  (``PYTHONPATH=SRC``, say ``main``'s ``src``), as ``<way>@before``, in the same rotation,
  so a change is measured against the code it replaces in the same run.

* **Probes** (``--probe``): each proxy notes every cyclic collection of its garbage
  collector (generation, pause) and every time its event loop ran a 5 ms timer more than
  2 ms late; each round prints those that fell in it, and how many of the events above
  the round's p99 were among each stream's first or last ten (the streams start and end
  together, so those 200 ms hold 100 connections opened or closed at once).  A judging
  proxy also times each answer's batch (``_Watch.judge``, ``time.thread_time``): judging's
  own CPU per event, and apart that of the first answer of each slice, judged after the
  forwarding had the loop (``bench/bench_judge.py`` is the same judging in a tight loop).

* **Fresh or kept connections**: every round starts on fresh upstream connections (the
  agent closes idle ones after :data:`FRESH` seconds, and the bench waits that long), or,
  with ``--reuse``, on the connections the proxy kept from a warm-up round run just before
  it (the proxy's httpx lets a connection go after 5 s idle, so only a round run right
  after another reuses its connections): a round's 100 requests take their connections
  differently in the two states (httpcore's pool once held the loop for a second at a
  kept round's start, ``docs/proxy.md``, "Kept upstream connections"), so rounds do not
  mix them, and ``--reuse`` keeps that case measured.

The targets (issue 25): at most 2 ms added at p99 and at most +20% CPU per event over
forwarding alone.  It asserts only that every stream arrived whole: timings depend on
the machine.

Usage::

    python bench/bench_proxy.py [--streams 100] [--events 1000] [--interval 20] [--repeat 3]
        [--lockstep] [--pin] [--ways forward,judge,record] [--before SRC] [--probe] [--reuse]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.machinery
import json
import os
import re
import selectors
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; Python names it from 3.13 on
_SENT = re.compile(rb'"sent": (\d+)}')
_END = b"\r\n0\r\n\r\n"  # the last chunk of a chunked body


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


class _Pair:
    """The connections asking for one stream; the last to arrive writes to all."""

    def __init__(self) -> None:
        self.sends: list[Callable[[Any], Awaitable[None]]] = []
        self.done = asyncio.Event()


def run_plan(thread: str, run: str, events: int) -> list[dict[str, Any]]:
    """The agent's run of ``events`` events: one text message, a content event each
    (``bench/bench_judge.py`` judges the same stream)."""
    plan: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "protocolVersion": "1.1"},
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
    return plan


def agent_app(events: int, interval: float) -> Any:
    pairs: dict[str, _Pair] = {}

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
        props = body["forwardedProps"]
        key, ways, phase = props["pair"], props["ways"], props["phase"]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        pair = pairs.setdefault(key, _Pair())
        pair.sends.append(send)
        if len(pair.sends) < ways:
            await pair.done.wait()
            return
        del pairs[key]
        plan = run_plan(thread, run, events)
        loop = asyncio.get_running_loop()
        start = loop.time() + phase * interval / 1000  # each event at its own time, no drift
        try:
            for n, event in enumerate(plan):
                await asyncio.sleep(max(0.0, start + (n + 1) * interval / 1000 - loop.time()))
                head = b"data: " + json.dumps(event)[:-1].encode() + b', "rawEvent": {"sent": '
                # who is written first alternates, so neither connection gains on the other
                for way in pair.sends[n % 2 :] + pair.sends[: n % 2]:
                    frame = head + b"%d}}\n\n" % time.time_ns()
                    await way({"type": "http.response.body", "body": frame, "more_body": True})
            for way in pair.sends:
                await way({"type": "http.response.body", "body": b""})
        finally:
            pair.done.set()

    return app


def serve_agent(port: int, events: int, interval: float, keep_alive: int) -> None:
    import uvicorn

    uvicorn.run(
        agent_app(events, interval),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_keep_alive=keep_alive,
    )


# -- the client (its own process) ----------------------------------------------------------


class _Connection:
    def __init__(self, sock: socket.socket, stream: int, way: int) -> None:
        self.sock, self.stream, self.way = sock, stream, way
        self.pending = b""
        self.delays: list[float] = []  # µs, kernel receive time minus the agent's stamp
        self.over = False


def _received(ancillary: list[tuple[int, int, bytes]]) -> int:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            return int(seconds) * 1_000_000_000 + int(nanoseconds)
    return time.time_ns()  # no kernel stamp: the read's own time (said in the output)


def run_client(
    urls: list[str], streams: int, events: int, tag: str, spread: bool
) -> dict[str, Any]:
    """Reads every stream from each of ``urls`` at once (a blocking selector loop, raw
    sockets: the kernel's receive time is all it measures, so it needs no HTTP client)."""
    selector = selectors.DefaultSelector()
    connections: list[_Connection] = []
    for stream in range(streams):
        for way, url in enumerate(urls):
            parts = urlsplit(url)
            body = json.dumps(
                {
                    "threadId": f"t{tag}-{stream}",
                    "runId": f"r{tag}-{stream}",
                    "messages": [],
                    "state": {},
                    "tools": [],
                    "context": [],
                    "forwardedProps": {
                        "pair": f"{tag}-{stream}",
                        "ways": len(urls),
                        "phase": stream / streams if spread else 0.0,
                    },
                    "protocolVersion": "1.1",
                }
            ).encode()
            sock = socket.create_connection((parts.hostname, parts.port))
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(
                b"POST %s HTTP/1.1\r\nHost: %s\r\ncontent-type: application/json\r\n"
                b"accept: text/event-stream\r\ncontent-length: %d\r\n\r\n%s"
                % ((parts.path or "/").encode(), parts.netloc.encode(), len(body), body)
            )
            sock.setblocking(False)
            connection = _Connection(sock, stream, way)
            connections.append(connection)
            selector.register(sock, selectors.EVENT_READ, connection)
    unstamped = reads = 0
    open_ = len(connections)
    space = socket.CMSG_SPACE(16)
    while open_:
        for key, _ in selector.select():
            connection = key.data
            data, ancillary, _, _ = connection.sock.recvmsg(65536, space)
            if data:
                reads += 1
                unstamped += not ancillary  # the kernel's timestamping starts with a lag
            received = _received(ancillary)
            pending = connection.pending + data
            last = 0
            for match in _SENT.finditer(pending):
                connection.delays.append((received - int(match[1])) / 1000)
                last = match.end()
            connection.pending = pending[last:][-4096:]
            done = len(connection.delays) >= events and connection.pending.endswith(_END)
            if done or not data:
                connection.over = True
                selector.unregister(connection.sock)
                connection.sock.close()
                open_ -= 1
    delays: list[list[list[float]]] = [[[] for _ in urls] for _ in range(streams)]
    for connection in connections:
        delays[connection.stream][connection.way] = connection.delays
    return {"delays": delays, "unstamped": unstamped / max(reads, 1)}


# -- the probes (in the proxy's process) -------------------------------------------------


def _probed(path: str, argv: list[str]) -> None:
    """``aguikit`` with ``argv``, noting into ``path`` (every second: the proxy is ended by
    a signal) each collection of the garbage collector, ``(ns, generation, pause ms)``, and
    each time the event loop ran a 5 ms timer more than 2 ms late, ``(ns, late ms)``.

    Each second appends only the notes taken since the last, one JSON line, and lets them
    go: the probe once rewrote every note it had ever taken, every second, in the proxy's
    process (a judging proxy notes each answer's batch, 27,000 a round), so its CPU per
    event, its GIL holds (the loop late by the dump, 30-70 ms by the third round) and its
    full collections grew round after round (``docs/proxy.md``, "Judging's CPU")."""
    import gc
    import threading

    notes: dict[str, list[Any]] = {"gc": [], "late": [], "judged": []}
    began = [0]

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter_ns()
        else:
            pause = (time.perf_counter_ns() - began[0]) / 1e6
            notes["gc"].append((time.time_ns(), info["generation"], pause))

    gc.callbacks.append(collected)
    run_forever = asyncio.base_events.BaseEventLoop.run_forever

    def probed(loop: asyncio.base_events.BaseEventLoop) -> None:
        def probe(due: float) -> None:
            now = loop.time()
            if now - due > 0.002:
                notes["late"].append((time.time_ns(), (now - due) * 1000))
            loop.call_at(now + 0.005, probe, now + 0.005)

        loop.call_soon(probe, loop.time())
        run_forever(loop)

    asyncio.base_events.BaseEventLoop.run_forever = probed  # type: ignore[method-assign,assignment]

    # Judging's own thread time, per answer judged: (ns, µs, events, its place in the slice).
    from aguikit import proxy

    place = [0]
    judge_waiting, judge = proxy.ProxyApp._judge_waiting, proxy._Watch.judge

    def timed_waiting(self: proxy.ProxyApp, budget: float | None = proxy.JUDGE_SLICE) -> None:
        place[0] = 0
        judge_waiting(self, budget)

    def timed(self: proxy._Watch) -> None:
        summary = self.proxy.summary
        events, spent = summary.events, time.thread_time()
        judge(self)
        spent = time.thread_time() - spent
        notes["judged"].append((time.time_ns(), spent * 1e6, summary.events - events, place[0]))
        place[0] += 1

    proxy.ProxyApp._judge_waiting = timed_waiting  # type: ignore[method-assign]
    proxy._Watch.judge = timed  # type: ignore[method-assign]

    def dump() -> None:
        with open(path, "a") as out:
            while True:
                time.sleep(1)
                _dump(notes, out)

    threading.Thread(target=dump, daemon=True).start()
    from aguikit.cli import main

    sys.exit(main(argv))


def _dump(notes: dict[str, list[Any]], out: TextIO) -> None:
    """Append the notes taken since the last dump to ``out``, one JSON line, and let them
    go, each list replaced by an empty one (a note the proxy's thread appends meanwhile
    lands in the list written or in the new one, never lost): a dump costs what is new,
    not everything noted since the proxy started."""
    taken = {}
    for name in list(notes):
        taken[name], notes[name] = notes[name], []
    out.write(json.dumps(taken) + "\n")
    out.flush()


def _read_notes(path: Path) -> dict[str, list[Any]]:
    """Every note :func:`_dump` wrote to ``path``, by kind."""
    notes: dict[str, list[Any]] = {"gc": [], "late": [], "judged": []}
    for line in path.read_text().split("\n")[:-1]:  # whole lines: the last may be half written
        for name, taken in json.loads(line).items():
            notes[name] += taken
    return notes


def _probes(path: Path, start: int, end: int) -> str:
    """What the probes of one proxy noted between ``start`` and ``end`` (ns)."""
    time.sleep(1.2)  # the proxy writes its notes every second
    notes = _read_notes(path)
    collections = [c for c in notes["gc"] if start <= c[0] <= end]
    late = sorted((lag for at, lag in notes["late"] if start <= at <= end), reverse=True)
    counts = "/".join(str(sum(1 for c in collections if c[1] == g)) for g in range(3))
    pause = max((c[2] for c in collections), default=0.0)
    worst = ", ".join(f"{lag:.0f}" for lag in late[:3])
    judged = [j for j in notes["judged"] if start <= j[0] <= end and j[2]]
    judging = ""
    if judged:
        first = [j for j in judged if j[3] == 0]
        rest = [j for j in judged if j[3] > 0]

        def per(rows: list[list[float]]) -> str:
            events = sum(r[2] for r in rows)
            return f"{sum(r[1] for r in rows) / events:.1f}" if events else "-"

        judging = (
            f"; judging {per(judged)} µs/event of thread time ({len(judged)} answers' "
            f"batches, {sum(j[2] for j in judged) / len(judged):.1f} events each; "
            f"first of a slice {per(first)}, the others {per(rest)})"
        )
    return (
        f"   probes: GC {counts} collections (gen 0/1/2), longest {pause:.1f} ms; "
        f"loop late >2 ms {len(late)} times (worst {worst or '-'} ms){judging}"
    )


# -- the measurement -----------------------------------------------------------------------


def _cpu(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as fp:
        fields = fp.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _waited(pid: int) -> float:
    """Seconds the threads of process ``pid`` spent ready to run but waiting for a CPU
    (``/proc/<pid>/task/*/schedstat``): how much the machine's load delayed the proxy."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as fp:
            total += int(fp.read().split()[1])
    return total / 1e9


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[round(q * 1000) - 1]


def _build() -> str:
    import aguikit.session

    compiled = aguikit.session.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    return "compiled (mypyc)" if compiled else "pure Python"


def _held(directory: Path, tag: str) -> list[float]:
    """The proxy's own measure, from its recordings of round ``tag`` (issue 25, item 4): per
    event, ms from the read that completed it leaving the upstream connection to the read
    written downstream (``downstreamMs - upstreamMs``)."""
    held: list[float] = []
    for path in directory.glob(f"t{tag}-*.har"):
        for entry in json.loads(path.read_text())["log"]["entries"]:
            held += [e["downstreamMs"] - e["upstreamMs"] for e in entry["_aguikit"]["events"]]
    return held


def measure(way: str, proxy: Proxy, agent: str, tag: str, args: Any) -> dict[str, Any]:
    """One round: every stream direct and through ``proxy`` at once."""
    pid = proxy.process.pid
    cpu_before, waited_before, started = _cpu(pid), _waited(pid), time.monotonic()
    wall = time.time_ns()
    out = subprocess.run(
        [
            *(sys.executable, __file__, "--client", agent, proxy.url),
            *("--streams", str(args.streams), "--events", str(args.events), "--tag", tag),
            *(["--lockstep"] if args.lockstep else []),
            *(["--cpu", "0"] if args.pin else []),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    cpu = _cpu(pid) - cpu_before
    ended = time.time_ns()
    waited = (_waited(pid) - waited_before) / (time.monotonic() - started)
    result = json.loads(out.stdout)
    direct: list[float] = []
    through: list[float] = []
    added: list[float] = []
    edges: list[bool] = []  # among its stream's first or last ten events
    for stream, (d, p) in enumerate(result["delays"]):
        assert len(d) == len(p) == args.events, f"{way}: stream {stream} got {len(d)}, {len(p)}"
        direct += d
        through += p
        added += [b - a for a, b in zip(d, p, strict=True)]
        edges += [n < 10 or n >= args.events - 10 for n in range(args.events)]
    p99 = _quantile(added, 0.99)
    above = [edge for value, edge in zip(added, edges, strict=True) if value >= p99]
    events = len(through)
    held = _held(proxy.record, tag) if proxy.record is not None else []
    return {
        "way": way,
        "cpu_us": cpu / events * 1e6,
        "direct": (_quantile(direct, 0.5) / 1000, _quantile(direct, 0.99) / 1000),
        "through": (_quantile(through, 0.5) / 1000, _quantile(through, 0.99) / 1000),
        "added": (_quantile(added, 0.5) / 1000, _quantile(added, 0.99) / 1000),
        "held": (_quantile(held, 0.5), _quantile(held, 0.99)) if held else None,
        "unstamped": result["unstamped"],
        "waited": waited,
        "edges": sum(above) / len(above),
        "probes": _probes(proxy.probe, wall, ended) if proxy.probe is not None else "",
    }


def _line(r: dict[str, Any]) -> str:
    held = (
        f"   held in the proxy p50/p99 {r['held'][0]:5.2f}/{r['held'][1]:5.2f} ms"
        if r["held"]
        else ""
    )
    return (
        f"  {r['way']:14}  CPU {r['cpu_us']:6.1f} us/event   "
        f"direct p50/p99 {r['direct'][0]:6.2f}/{r['direct'][1]:7.2f} ms   "
        f"proxied {r['through'][0]:6.2f}/{r['through'][1]:7.2f} ms   "
        f"added per event p50/p99 {r['added'][0]:6.2f}/{r['added'][1]:7.2f} ms{held}   "
        f"waited for a CPU {r['waited'] * 100:4.1f}% of the round   "
        f"above p99: {r['edges']:.0%} at the streams' ends{r['probes']}"
    )


@dataclasses.dataclass
class Proxy:
    process: subprocess.Popen[bytes]
    url: str
    record: Path | None
    probe: Path | None = None


def _start_proxy(
    agent: str, way: str, pin: bool, scratch: Path, src: str | None, probe: bool
) -> Proxy:
    """The proxy of ``way`` (``<way>@before``: imported from ``src``)."""
    port = _free_port()
    env = dict(os.environ)
    if way.endswith("@before"):
        assert src is not None
        env["PYTHONPATH"] = src
        way = way.removesuffix("@before")
    probed = scratch / f"probe-{port}.json" if probe else None
    command = [sys.executable, "-m", "aguikit"]
    if probed is not None:
        command = [sys.executable, __file__, "--probed", str(probed)]
    command += ["proxy", "--upstream", agent]
    command += ["--port", str(port)]
    record = None
    if way == "forward":
        command.append("--no-validate")
    elif way == "record":
        record = scratch / f"{way}-{port}"
        command += ["--record", str(record)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    if pin:  # the proxy alone on the last CPU, the agent and the clients on the first
        os.sched_setaffinity(process.pid, {max(os.sched_getaffinity(0))})
    _wait(port)
    return Proxy(process, f"http://127.0.0.1:{port}/", record, probed)


WAYS = ("forward", "judge", "record")
FRESH = 1
"""Seconds the agent keeps an idle connection (uvicorn's ``timeout_keep_alive``) unless
``--reuse``: the bench waits longer than this before each round, so every proxy starts
every round on fresh upstream connections.  Rotated rounds once left the proxy that had
run the round before on the connections it kept (the agent's 5 s default outlived the
gap), and those rounds cost it 15-20% more CPU per event and ~19 ms at p99 where a fresh
start cost 2 ms (httpcore's pool, since replaced for the proxy: ``docs/proxy.md``, "Kept
upstream connections"): the comparison was between two states."""
KEPT = 3600
"""The agent's ``timeout_keep_alive`` with ``--reuse``: the agent never closes a
proxy's idle connection first."""


def main() -> None:
    if sys.argv[1:2] == ["--probed"]:
        _probed(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=20.0, help="ms between events")
    parser.add_argument("--repeat", type=int, default=3, help="sets of rounds, one per way")
    parser.add_argument(
        "--lockstep",
        action="store_true",
        help="every stream's events at the same instants (the worst burst), not spread",
    )
    parser.add_argument(
        "--pin", action="store_true", help="the proxies on one CPU, agent and clients on another"
    )
    parser.add_argument(
        "--ways", default=",".join(WAYS), help=f"proxies to measure ({','.join(WAYS)})"
    )
    parser.add_argument(
        "--before",
        metavar="SRC",
        help="also run every proxy from this source tree (PYTHONPATH), as <way>@before",
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="note each proxy's garbage collections and late event-loop turns, per round",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="every round on the upstream connections the proxy kept from a warm-up round "
        "run just before it, not on fresh ones",
    )
    parser.add_argument("--keep-alive", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    parser.add_argument("--agent", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    if args.client:
        result = run_client(args.client, args.streams, args.events, args.tag, not args.lockstep)
        print(json.dumps(result))
        return
    if args.agent:
        serve_agent(args.agent, args.events, args.interval, args.keep_alive)
        return
    ways = [w for w in args.ways.split(",") if w]
    assert ways and set(ways) <= set(WAYS) and "forward" in ways, "--ways needs forward"
    if args.before:
        ways += [f"{way}@before" for way in ways]
    port = _free_port()
    agent_process = subprocess.Popen(
        [
            *(sys.executable, __file__, "--agent", str(port)),
            *("--events", str(args.events), "--interval", str(args.interval)),
            *("--keep-alive", str(KEPT if args.reuse else FRESH)),
            *(["--cpu", "0"] if args.pin else []),
        ]
    )
    proxies: dict[str, Proxy] = {}
    rounds: list[dict[str, Any]] = []
    scratch = Path(tempfile.mkdtemp(prefix="bench_proxy-"))
    try:
        _wait(port)
        agent = f"http://127.0.0.1:{port}/"
        print(
            f"bench_proxy ({_build()}): {args.streams} streams x {args.events} events, one "
            f"every {args.interval:g} ms per stream "
            f"({'in lockstep' if args.lockstep else 'their phases spread over it'}), one "
            f"proxy worker{' pinned to its own CPU' if args.pin else ''}, {args.repeat} sets "
            f"of rounds ({', '.join(ways)}, the order rotated), each round on "
            + ("the upstream connections kept from a warm-up" if args.reuse else "fresh ones"),
            flush=True,
        )
        proxies = {
            way: _start_proxy(agent, way, args.pin, scratch, args.before, args.probe)
            for way in ways
        }
        for pair in range(args.repeat):
            for way in ways[pair % len(ways) :] + ways[: pair % len(ways)]:
                tag = f"{pair}{way[0]}{'b' if way.endswith('@before') else ''}"
                if args.reuse:  # the proxy's pool then holds a connection per stream
                    warm = measure(way, proxies[way], agent, tag + "w", args)
                    print("  (warm-up)" + _line(warm), flush=True)
                else:
                    time.sleep(FRESH * 1.5)  # the agent closed the last round's connections
                result = measure(way, proxies[way], agent, tag, args)
                result["pair"] = pair
                rounds.append(result)
                print(_line(result), flush=True)
    finally:
        summaries = {}
        for way, proxy in proxies.items():
            proxy.process.terminate()
            summaries[way] = proxy.process.communicate(timeout=60)[0].decode().splitlines()
        agent_process.terminate()
        agent_process.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    for way, lines in summaries.items():
        head = [line.strip() for line in lines if line.startswith("aguikit proxy:")]
        print(f"  {way} proxy: " + " / ".join(head))
    unstamped = max(r["unstamped"] for r in rounds)
    if unstamped:
        print(
            f"  ({unstamped:.3%} of a round's reads at most had no kernel receive time: those"
            " delays include the client's own)"
        )
    print("  medians over the rounds, ms (p50/p99 of each round):")
    mine = rounds
    print(
        "    direct : p50 "
        f"{statistics.median(r['direct'][0] for r in mine):.2f}, p99 "
        f"{statistics.median(r['direct'][1] for r in mine):.2f}"
    )
    for way in ways:
        mine = [r for r in rounds if r["way"] == way]
        each = ", ".join(f"{r['added'][1]:.2f}" for r in mine)
        held = [r["held"] for r in mine if r["held"]]
        print(
            f"    {way:14}: CPU {statistics.median(r['cpu_us'] for r in mine):.1f} us/event;"
            f" arrival p50 {statistics.median(r['through'][0] for r in mine):.2f},"
            f" p99 {statistics.median(r['through'][1] for r in mine):.2f};"
            f" added p50 {statistics.median(r['added'][0] for r in mine):.2f},"
            f" p99 {statistics.median(r['added'][1] for r in mine):.2f} (rounds: {each})"
            + (
                f"; held in the proxy (its own stamps) p50 "
                f"{statistics.median(h[0] for h in held):.3f}, p99 "
                f"{statistics.median(h[1] for h in held):.3f}"
                if held
                else ""
            )
        )

    def ratios(way: str, base: str) -> list[float]:
        return [
            next(r for r in rounds if r["pair"] == p and r["way"] == way)["cpu_us"]
            / next(r for r in rounds if r["pair"] == p and r["way"] == base)["cpu_us"]
            for p in range(args.repeat)
        ]

    comparisons = [
        (way, "forward@before" if way.endswith("@before") else "forward", "forwarding")
        for way in ways
        if way.split("@")[0] != "forward"
    ]
    comparisons += [(way, f"{way}@before", "before") for way in ways if f"{way}@before" in ways]
    for way, base, name in comparisons:
        sets = ratios(way, base)
        pairs = ", ".join(f"x{x:.2f}" for x in sets)
        print(
            f"  {way} over {name}: CPU per event x{statistics.median(sets):.2f} median "
            f"(sets: {pairs})"
        )
    print("  targets (issue 25): judging x1.20 CPU over forwarding, +2 ms added at p99")


if __name__ == "__main__":
    main()
