"""
What ``aguikit proxy``'s judging costs per event in a tight loop, against ``json.loads`` of
the same lines in the same run (issue 25's "+20% CPU over forwarding": forwarding costs
the proxy 64-75 µs an event, so judging may add about 14).

The stream is ``bench/bench_proxy.py``'s: ``RUN_STARTED``, ``TEXT_MESSAGE_START``, the
content events (each with the agent's ``rawEvent.sent`` stamp), ``TEXT_MESSAGE_END`` and
``RUN_FINISHED``, as SSE frames, cut into reads of one event each and judged the way the
proxy judges them (``aguikit.proxy._Watch``: a batch joins a stream's waiting reads into
one feed of the SSE decoder and JSON reader, then the live check's recovering session and
the checker's rows; the session seeded from the request, as ``live_session`` makes it).

Printed, never asserted, medians of ``--repeat`` interleaved repetitions:

1. ``json.loads`` of each frame's JSON, µs per event (the yardstick);
2. decoding alone (SSE framing and the JSON reader: ``_Events.feed``);
3. judging whole (decoding, then ``StreamCheck.feed``), and its ratio to ``json.loads``;
4. the same judged through the proxy's own ``_Watch`` (its reads kept, joined, fed, the
   findings gathered), 100 streams interleaved a batch (``--batch`` reads) at a time;
5. each request's own judging (its rows and the live session seeded from it), spread
   over its answer's events as the proxy pays it;
6. with ``--churn KB``: each batch preceded by touching that much memory, as the
   forwarding between two batches does to the caches.

Run with ``python bench/bench_judge.py`` (``--before /path/to/main/src``: every
repetition also from the code before, alternating, and each way's ratio over it;
``nox -s bench -- bench/bench_judge.py``).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench_proxy import run_plan  # bench/ is the script's own path

from aguikit.checker import CheckConfig, StreamCheck
from aguikit.conversation import Exchange, check_request, live_session
from aguikit.proxy import Flow, ProxyApp, _Events, _Watch


def request(stream: int) -> dict[str, Any]:
    """The bench's request body (``bench/bench_proxy.py``'s client)."""
    return {
        "threadId": f"t-{stream}",
        "runId": f"r-{stream}",
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {"pair": f"p-{stream}", "ways": 2, "phase": 0.0},
        "protocolVersion": "1.1",
    }


def frames(stream: int, events: int) -> list[bytes]:
    """The bench agent's frames, one per read, stamped as it stamps them."""
    plan = run_plan(f"t-{stream}", f"r-{stream}", events)
    stamp = 1_764_000_000_000_000_000
    return [
        b"data: "
        + json.dumps(event)[:-1].encode()
        + b', "rawEvent": {"sent": %d}}\n\n' % (stamp + n * 20_000_000)
        for n, event in enumerate(plan)
    ]


def batches(reads: list[bytes], batch: int) -> list[list[bytes]]:
    return [reads[i : i + batch] for i in range(0, len(reads), batch)]


def time_loads(streams: list[list[bytes]]) -> float:
    lines = [frame[6:-2] for reads in streams for frame in reads]
    loads = json.loads
    start = time.thread_time()
    for line in lines:
        loads(line)
    return time.thread_time() - start


def time_decode(streams: list[list[list[bytes]]]) -> float:
    config = CheckConfig()
    decoders = [_Events("sse", "http://agent/", config) for _ in streams]
    rounds = max(len(s) for s in streams)
    start = time.thread_time()
    for n in range(rounds):
        for decoder, stream in zip(decoders, streams, strict=True):
            if n < len(stream):
                decoder.feed(b"".join(stream[n]))
    return time.thread_time() - start


def time_judge(streams: list[list[list[bytes]]]) -> float:
    config = CheckConfig()
    pairs = [
        (
            _Events("sse", "http://agent/", config),
            StreamCheck("http://agent/", config, session=live_session(request(i))),
        )
        for i in range(len(streams))
    ]
    rounds = max(len(s) for s in streams)
    found = 0
    start = time.thread_time()
    for n in range(rounds):
        for (decoder, check), stream in zip(pairs, streams, strict=True):
            if n < len(stream):
                for wire, where, _ in decoder.feed(b"".join(stream[n])):
                    found += len(check.feed(wire, where))
    for decoder, check in pairs:
        decoder.feed(None)
        found += len(check.close())
    spent = time.thread_time() - start
    assert not found, f"the bench's stream is valid, yet judging found {found}"
    return spent


def _proxy() -> ProxyApp:
    return ProxyApp("http://agent", out=io.StringIO())


def time_request(streams: int) -> float:
    """Each request's own judging in the proxy: its rows (``check_request``) and the live
    session seeded from it (``live_session``), for ``streams`` requests."""
    bodies = [request(i) for i in range(streams)]
    exchanges = [
        Exchange(1, b, b"", request_text=json.dumps(b), url="http://agent/") for b in bodies
    ]
    start = time.thread_time()
    for exchange, body in zip(exchanges, bodies, strict=True):
        assert not check_request(exchange)
        live_session(body)
    return time.thread_time() - start


def time_watch(streams: list[list[list[bytes]]], churn: int) -> float:
    """Through ``_Watch``: reads kept by ``chunk``, judged by the batch, ``churn`` KB of
    memory touched before each batch (what forwarding does to the caches meanwhile)."""
    proxy = _proxy()
    watches = []
    for i in range(len(streams)):
        flow = Flow(
            number=i + 1,
            method="POST",
            url="http://agent/",
            request_headers=[],
            request_body=json.dumps(request(i)).encode(),
            started=time.perf_counter(),
            started_iso="",
        )
        proxy._request(flow)
        flow.status = 200
        watches.append(_Watch(proxy, flow, "text/event-stream", None))
    scratch = bytearray(churn * 1024)
    rounds = max(len(s) for s in streams)
    spent = 0.0
    for n in range(rounds):
        for watch, stream in zip(watches, streams, strict=True):
            if n < len(stream):
                for read in stream[n]:
                    watch.waiting.append((read, 0.0, 0.0))
        if churn:
            for k in range(0, len(scratch), 64):
                scratch[k] = n & 0xFF
        start = time.thread_time()
        for watch in watches:
            watch.judge()
        spent += time.thread_time() - start
    start = time.thread_time()
    for watch in watches:
        watch.end(None)
    spent += time.thread_time() - start
    out = proxy.out
    assert not proxy.summary.findings and isinstance(out, io.StringIO), out
    return spent


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """µs per event of every way, ``args.repeat`` times, interleaved."""
    reads = [frames(i, args.events) for i in range(args.streams)]
    one = [batches(reads[0], args.batch)]
    many = [batches(r, args.batch) for r in reads]
    events = args.streams * args.events
    ways: dict[str, Callable[[], float]] = {
        "json.loads": lambda: time_loads(reads) / events,
        "decode, 1 stream": lambda: time_decode(one) / args.events,
        "judge, 1 stream": lambda: time_judge(one) / args.events,
        f"judge, {args.streams} streams": lambda: time_judge(many) / events,
        f"_Watch, {args.streams} streams": lambda: time_watch(many, 0) / events,
        "requests' checks, over their answers": lambda: time_request(args.streams) / events,
    }
    if args.churn:
        ways[f"_Watch, {args.streams} streams, churn {args.churn} KB"] = lambda: (
            time_watch(many, args.churn) / events
        )
    results: dict[str, list[float]] = {way: [] for way in ways}
    for run in ways.values():  # once untimed: validators built, caches filled
        run()
    gc.collect()
    for _ in range(args.repeat):  # interleaved: the machine's drift hits every way alike
        for way, run in ways.items():
            results[way].append(run() * 1e6)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=5, help="reads per stream per batch")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--churn", type=int, default=0, help="KB touched before each batch")
    parser.add_argument(
        "--before",
        metavar="SRC",
        help="also run every repetition from another source tree (PYTHONPATH=SRC), "
        "alternating with this one, and print each way's cost over its before",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args)))
        return
    print(
        f"{args.streams} streams of {args.events} events, {args.batch} reads a batch, "
        f"medians of {args.repeat}"
    )
    if args.before is None:
        _table(measure(args))
        return
    trees = {"now": None, "before": args.before}
    runs: dict[str, dict[str, list[float]]] = {"now": {}, "before": {}}
    for n in range(args.repeat):  # one repetition each, in turn, the order alternating
        for tree in ("now", "before") if n % 2 == 0 else ("before", "now"):
            env = dict(os.environ)
            if trees[tree] is not None:
                env["PYTHONPATH"] = str(trees[tree])
            argv = [sys.executable, __file__, "--json", "--repeat", "1"]
            argv += ["--streams", str(args.streams), "--events", str(args.events)]
            argv += ["--batch", str(args.batch), "--churn", str(args.churn)]
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            for way, values in json.loads(done.stdout).items():
                runs[tree].setdefault(way, []).extend(values)
    for tree in ("before", "now"):
        print(f"{tree} ({trees[tree] or 'this tree'}):")
        _table(runs[tree])
    print("now over before, per way (medians; each repetition's ratio in brackets):")
    for way, now in runs["now"].items():
        before = runs["before"][way]
        each = ", ".join(f"x{a / b:.2f}" for a, b in zip(now, before, strict=True))
        ratio = statistics.median(now) / statistics.median(before)
        print(f"  {way:<40} x{ratio:.2f} ({each})")


def _table(results: dict[str, list[float]]) -> None:
    base = statistics.median(results["json.loads"])
    for way, values in results.items():
        median = statistics.median(values)
        spread = f"{min(values):.2f}-{max(values):.2f}"
        print(f"  {way:<40} {median:7.2f} µs/event ({spread})  x{median / base:5.1f} json.loads")


if __name__ == "__main__":
    main()
