"""
Clients that never read: 200 connections start a run each and then take nothing, for
120 s, against one uvicorn worker with the default memory log.

Issue 29 saw such clients hold their handlers for ever (RSS 41 -> 223 MB, still climbing
after two minutes).  Now a client that took nothing for ``send_timeout`` while bytes
waited for it is treated as gone (the reader-progress deadline, read from the kernel's TCP
acknowledgements: ``docs/resume.md``), and its run is cancelled one ``resume_grace``
later.  The report gives, for each connection, how long after its client connected its
handler stopped, against the documented bound ``send_timeout + resume_grace`` plus two
seconds' looks, counted from the client's last progress (here, with a 4 KiB receive
buffer, a moment after it connected).  It also gives when each connection's deadline
started (``treated as gone`` minus ``send_timeout``, at most a look after its last
progress), from the first handler's start.  ``--sndbuf`` serves from a listening socket
with that ``SO_SNDBUF`` (accepted connections inherit it).

RSS is read before the clients (cold, and after one short warm-up run, which loads what
the first request imports), at its peak, and once the clients left and their runs' logs
expired (``--ttl``, 10 s here: the default keeps an ended run 300 s), two seconds after
the look at the log that expired them (the log releases their memory a second later:
``MemoryEventLog(trim_memory=True)``); then after ``gc.collect()`` and ``malloc_trim`` of
the bench's own, which separate what the worker holds from what its allocators keep.
It also counts the asyncio tasks left in the worker beyond uvicorn's own (0 is the
target: no zombie follower, watch or reaper).  ``--trace`` runs the worker under
tracemalloc and reports its Python heap after the warm-up and at the end (after
``malloc_trim``), the source lines and object types that grew: a heap back at its start
with RSS above it is the allocator's fragmentation, not retention.  It takes as long as
``--seconds`` (120 by default); ``nox -s bench`` runs it.

Usage::

    python bench/bench_silent_clients.py                       # 200 clients, 120 s
    python bench/bench_silent_clients.py --clients 50 --seconds 30 --send-timeout 5 --grace 5
    python bench/bench_silent_clients.py --trace                # what the Python heap holds

Never asserts; numbers only.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import bisect
import functools
import json
import logging
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.resume_app


def app(
    clients: int, send_timeout: float, grace: float, ttl: float, survivors: bool = False
) -> Any:
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from tests.resume_app import stray_tasks

    from aguikit.server import RunAgentInput, RunWriter, create_app
    from aguikit.server.eventlog import MemoryEventLog

    # Times go into arrays allocated up front, indexed by client: a float object made
    # for each while the worker's heap is at its peak would survive it, pinning the
    # pymalloc arenas it landed in, and count against the RSS after.
    live: dict[str, Any] = {"handlers": 0, "started": 0}
    first = array.array("d", [math.nan])
    stopped = array.array("d", [math.nan] * clients)
    gone = array.array("d", [math.nan] * clients)

    def client(run_id: str) -> int:
        return int(run_id.rpartition("-")[2])

    class Gone(logging.Handler):
        """Times the endpoint's "treated as gone" lines, one per stalled connection."""

        def emit(self, record: logging.LogRecord) -> None:
            if "treated as gone" in record.getMessage():
                assert isinstance(record.args, tuple)
                gone[client(str(record.args[0]))] = time.monotonic()  # system-wide on Linux

    server_log = logging.getLogger("aguikit.server")
    server_log.setLevel(logging.INFO)
    server_log.addHandler(Gone())

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        if run_input.run_id.startswith("warm-up"):  # a short run, read whole
            async with run.text_message() as message:
                for _ in range(100):
                    await message.write("x" * 16384)
            return
        if math.isnan(first[0]):
            first[0] = time.monotonic()
        live["handlers"] += 1
        live["started"] += 1
        try:
            async with run.text_message() as message:
                while True:  # 16 KiB every 10 ms, for ever: fills the socket buffers
                    await message.write("x" * 16384)
                    await asyncio.sleep(0.01)
        finally:
            live["handlers"] -= 1
            stopped[client(run_input.run_id)] = time.monotonic()

    async def stats(request: Any) -> JSONResponse:
        if request.query_params.get("trim"):
            # What the worker still holds, not what glibc keeps of what it freed.
            import ctypes
            import gc

            gc.collect()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        # The looks once a second during the run take only counts and the allocators'
        # view: whatever else they made (a repr of every task, the times of every
        # connection) could outlive the peak in the worker's heap, pinning the arenas it
        # landed in, and count against the RSS measured after.
        ending = bool(request.query_params.get("end"))
        # A silent client's request still running counts.
        tasks = len(stray_tasks()) if ending else None
        traced = _traced(request.query_params.get("snap"))
        if survivors:
            traced.update(_survivors(request.query_params.get("snap")))
        held = {"heap": _heap()}
        times = {}
        if ending:
            times = {
                "first": None if math.isnan(first[0]) else first[0],
                "stopped": {f"silent-{n}": t for n, t in enumerate(stopped) if not math.isnan(t)},
                "gone": {f"silent-{n}": t for n, t in enumerate(gone) if not math.isnan(t)},
            }
        return JSONResponse(
            {**live, **times, "retained": log.total_events, "tasks": tasks, **traced, **held}
        )

    log = MemoryEventLog(ttl=ttl)
    served = create_app(
        handler, send_timeout=send_timeout, resume_grace=grace, keepalive=None, event_log=log
    )
    served.router.routes.append(Route("/stats", stats, methods=["GET"]))
    return served


_SNAPSHOTS: dict[str, Any] = {}


def _writable_regions() -> array.array[int]:
    """The process's writable mappings (pymalloc's arenas and glibc's heap among them), as
    ``lo, hi`` pairs in an array: no int object per region to land in an arena."""
    spans = array.array("Q")
    with open("/proc/self/maps", encoding="ascii") as maps:
        for line in maps:
            fields = line.split()
            if fields[1].startswith("rw"):
                lo, _, hi = fields[0].partition("-")
                spans.extend((int(lo, 16), int(hi, 16)))
    return spans


def _survivors(snap: str | None) -> dict[str, Any]:
    """With ``--survivors``: at ``snap=before`` the writable mappings are noted; at
    ``snap=after`` the live objects whose address lies outside all of them (so in memory
    mapped since: the arenas the peak added and that something still pins) are counted by
    type, with a few of each shown and what refers to them."""
    import gc
    from collections import Counter

    if snap == "before":
        _SNAPSHOTS["regions"] = _writable_regions()
        _SNAPSHOTS["classes"] = _size_classes()
        return {}
    if snap != "after":
        return {}
    # Size classes whose pools grew: where the blocks that outlived the peak sit (a pool
    # holds blocks of one size; each pool with one live block is 16 KiB kept).
    was, now = _SNAPSHOTS["classes"], _size_classes()
    pools = {
        size: f"{was.get(size, [0, 0, 0])[0]}->{row[0]} pools, "
        f"{was.get(size, [0, 0, 0])[1]}->{row[1]} used"
        for size, row in now.items()
        if row[0] > was.get(size, [0, 0, 0])[0]
    }
    old = _SNAPSHOTS["regions"]  # disjoint, in address order, as /proc/self/maps lists them
    lows, highs = old[0::2], old[1::2]  # arrays: no object per region in the heap

    def new(thing: object) -> bool:
        at = id(thing)
        index = bisect.bisect_right(lows, at) - 1
        return index < 0 or at >= highs[index]

    gc.collect()
    seen: dict[int, object] = {}
    for thing in gc.get_objects():
        if new(thing):
            seen[id(thing)] = thing
        for part in gc.get_referents(thing):
            if not gc.is_tracked(part) and id(part) not in seen and new(part):
                seen[id(part)] = part
    kinds = Counter(type(thing).__qualname__ for thing in seen.values())
    shown: list[str] = []
    per_kind: Counter[str] = Counter()
    for thing in seen.values():
        kind = type(thing).__qualname__
        if per_kind[kind] >= 4:
            continue
        per_kind[kind] += 1
        try:
            text = repr(thing)[:100]
        except Exception as exc:
            text = f"<repr failed: {exc!r}>"
        holders = [
            type(holder).__qualname__
            for holder in gc.get_referrers(thing)[:4]
            if holder is not seen and not isinstance(holder, list)
        ]
        shown.append(f"{kind} {text} <- {holders}")
    return {
        "survivors": kinds.most_common(25),
        "survivor_examples": shown[:120],
        "pools_grew": pools,
    }


@functools.cache
def _mallinfo2() -> Any:
    """glibc's ``mallinfo2``, its result type made once (a ctypes class made per look
    would leave its caches in the heap)."""
    import ctypes

    class Mallinfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
                *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
            )
        ]

    function = ctypes.CDLL("libc.so.6").mallinfo2
    function.restype = Mallinfo2
    return function


def _mallocstats() -> str:
    """What ``sys._debugmallocstats`` writes (to the process's stderr)."""
    import tempfile

    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        return out.read().decode()


def _size_classes() -> dict[str, list[int]]:
    """pymalloc's pools and blocks by size class: ``size: [pools, used, free]``."""
    rows: dict[str, list[int]] = {}
    for line in _mallocstats().splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[0].isdigit():
            rows[fields[1]] = [int(field) for field in fields[2:]]
    return rows


def _resident() -> dict[str, float]:
    """The resident MiB of glibc's main heap (``[heap]``) and of the other anonymous
    mappings (pymalloc's arenas, glibc's mmapped blocks and thread heaps, stacks), from
    ``/proc/self/smaps``: which allocator's pages the RSS after is made of."""
    found = {"rss_heap": 0.0, "rss_anonymous": 0.0}
    kind: str | None = None
    with open("/proc/self/smaps", encoding="ascii", errors="replace") as maps:
        for line in maps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                name = fields[5] if len(fields) > 5 else ""
                kind = "rss_heap" if name == "[heap]" else None if name else "rss_anonymous"
            elif fields[0] == "Rss:" and kind is not None:
                found[kind] += int(fields[1]) / 1024
    return found


def _heap() -> dict[str, float]:
    """What the worker's allocators hold, in MiB: glibc's bytes in use and free in its
    heap (``mallinfo2``), and pymalloc's arenas with the bytes of their live blocks
    (``sys._debugmallocstats``, which writes to the process's stderr)."""

    info = _mallinfo2()()
    text = _mallocstats()
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if name.startswith(("# arenas allocated current", "# bytes in allocated blocks")):
            found[name.strip("# ").strip()] = int(value.strip().replace(",", ""))
    mib = 2**20
    return {
        **_resident(),
        "glibc_chunks": info.ordblks,
        "glibc_used": info.uordblks / mib,
        "glibc_free": info.fordblks / mib,
        "glibc_mmapped": info.hblkhd / mib,
        "pymalloc_arenas": found.get("arenas allocated current", 0),
        "pymalloc_used": found.get("bytes in allocated blocks", 0) / mib,
    }


def _traced(snap: str | None) -> dict[str, Any]:
    """With ``--trace`` (tracemalloc on in the worker): the Python heap now, in MiB; at
    ``snap=before`` a snapshot and the objects' counts by type are kept, and at
    ``snap=after`` the lines and types that grew since are returned too."""
    import gc
    import tracemalloc
    from collections import Counter

    if not tracemalloc.is_tracing():
        return {}
    gc.collect()
    if snap is None:
        return {"traced": tracemalloc.get_traced_memory()[0] / 2**20}
    # The heap without tracemalloc's own snapshots (the one kept at "before" included).
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    found: dict[str, Any] = {
        "traced": sum(stat.size for stat in snapshot.statistics("filename")) / 2**20
    }
    types = Counter(type(thing).__qualname__ for thing in gc.get_objects())
    if snap == "before":
        _SNAPSHOTS.update(snapshot=snapshot, types=types)
        return found
    compared = snapshot.compare_to(_SNAPSHOTS["snapshot"], "lineno")
    grew = compared[:12]
    found["grew"] = [f"{stat.size_diff / 1024:+.0f} KiB {stat.traceback}" for stat in grew]
    # Small blocks (pymalloc's, up to 512 bytes) more numerous than before: what survived
    # the peak, each pinning the arena it was allocated in.
    by_trace = snapshot.compare_to(_SNAPSHOTS["snapshot"], "traceback")
    small = [stat for stat in by_trace if stat.count_diff > 0 and stat.size <= 512 * stat.count]
    small.sort(key=lambda stat: -stat.count_diff)
    found["grew"] += [
        f"{stat.count_diff:+d} blocks, made at "
        + " <- ".join(
            f"{Path(frame.filename).name}:{frame.lineno}" for frame in reversed(stat.traceback)
        )
        for stat in small[:10]
    ]
    more = types - _SNAPSHOTS["types"]
    found["types"] = more.most_common(12)
    return found


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
    parser.add_argument(
        "--trace",
        action="store_true",
        help="tracemalloc in the worker: the Python heap before and after, and what grew",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="the clients come this many times, one after the other; the RSS after each "
        "round shows whether what stays above the start grows with peaks or is kept once",
    )
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="the live objects at the end in memory mapped since the warm start (the arenas "
        "the peak added): what pins them",
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        import uvicorn

        if args.trace:
            import tracemalloc

            tracemalloc.start(8)  # frames per allocation: where a survivor was made

        listening = socket.socket()
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if args.sndbuf:  # inherited by every accepted connection (Linux)
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.sndbuf)
        listening.bind(("127.0.0.1", args.serve))
        served = app(args.clients, args.send_timeout, args.grace, args.ttl, args.survivors)
        config = uvicorn.Config(served, log_level="critical")  # not one line per silent client
        uvicorn.Server(config).run(sockets=[listening])
        return
    port = _port()
    command = [sys.executable, __file__, "--serve", str(port)]
    command += ["--send-timeout", str(args.send_timeout), "--grace", str(args.grace)]
    command += ["--clients", str(args.clients)]
    command += ["--ttl", str(args.ttl), "--sndbuf", str(args.sndbuf)]
    command += ["--trace"] if args.trace else []
    command += ["--survivors"] if args.survivors else []
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
        warm = httpx.get(stats, params={"snap": "before"}, timeout=120).json()
        heap_before, held_before = warm.get("traced"), warm["heap"]
        before = _rss(server.pid)
        peak, arenas, afters = before, held_before["pymalloc_arenas"], []
        for _ in range(args.rounds):  # a later round's peak reuses what the first kept
            began = time.monotonic()
            clients, connected = [], {}
            for n in range(args.clients):
                clients.append(_silent(port, f"silent-{n}"))
                connected[f"silent-{n}"] = time.monotonic()
            stopped_at = None
            bound = args.send_timeout + args.grace + 2.0
            # The clients stay --seconds, and longer (up to the bound again) while a handler
            # still runs: a worker slow to fill the buffers is reported, not cut short.
            while (elapsed := time.monotonic() - began) < max(args.seconds, bound) or (
                stopped_at is None and elapsed < max(args.seconds, bound) + bound
            ):
                time.sleep(1.0)
                peak = max(peak, _rss(server.pid))
                live = httpx.get(stats).json()
                arenas = max(arenas, live["heap"]["pymalloc_arenas"])
                if stopped_at is None and live["started"] and not live["handlers"]:
                    stopped_at = time.monotonic() - began
            at_end = httpx.get(stats, params={"end": "1"}).json()
            for client in clients:
                client.close()
            time.sleep(args.ttl + 2.0)  # the ended runs' logs expire
            httpx.post(  # any look at the log expires them: a resume of an unknown run
                f"http://127.0.0.1:{port}/",
                json={"threadId": "t", "runId": "nobody", "messages": []},
                headers={"Last-Event-ID": "1"},
            )
            time.sleep(2.0)  # the log hands what the runs freed back to the system a second later
            after = _rss(server.pid)
            afters.append(after)
        retained = httpx.get(stats, params={"trim": "1", "end": "1"}).json()["retained"]
        trimmed = _rss(server.pid)
        ended = httpx.get(stats, params={"snap": "after", "end": "1"}, timeout=120).json()
        tasks = ended["tasks"]
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
    first = at_end["first"]
    clock, gone = at_end["stopped"], at_end["gone"]  # monotonic, system-wide on Linux
    if clock.keys() == connected.keys():
        lived = [clock[run] - connected[run] for run in connected]
        print(
            f"  each handler stopped {min(lived):.1f} to {max(lived):.1f} s after its client "
            f"connected (bound {bound:.0f} s once the client's own receive buffer filled)"
        )
    if gone.keys() == connected.keys():
        left = [gone[run] - connected[run] for run in connected]
        print(
            f"  each client was treated as gone {min(left):.1f} to {max(left):.1f} s after it "
            f"connected (deadline {args.send_timeout:.0f} s + a look after its last progress)"
        )
    waited = {run: at - args.send_timeout - first for run, at in gone.items()}
    if waited and waited.keys() <= clock.keys():
        late = max(clock[run] - first - wait for run, wait in waited.items())
        print(
            f"  {len(waited)} connections' deadlines started (treated as gone minus "
            f"send_timeout) {min(waited.values()):.1f} to {max(waited.values()):.1f} s after "
            f"the first handler started; each handler stopped at most {late:.1f} s after its "
            f"deadline started (bound {bound:.0f} s)"
        )
    print(
        f"  RSS: {cold:.1f} MiB cold, {before:.1f} MiB after a warm-up run, {peak:.1f} MiB "
        f"peak, {after:.1f} MiB after ({(after - before) / before:+.1%} on the warm start); "
        f"{retained} events still logged; {trimmed:.1f} MiB after malloc_trim "
        f"({(trimmed - before) / before:+.1%} warm, {(trimmed - cold) / cold:+.1%} cold); "
        f"{tasks} asyncio tasks left beyond uvicorn's"
    )
    if len(afters) > 1:
        print(
            "  RSS after each round: "
            + ", ".join(f"{at:.1f} MiB ({(at - before) / before:+.1%})" for at in afters)
            + " (the handlers' times above are the last round's, from the first's start)"
        )
    held = ended["heap"]
    print(
        "  allocators (MiB), warm start -> end after malloc_trim: "
        + ", ".join(
            f"{name} {held_before[name]:.1f} -> {held[name]:.1f}"
            for name in (
                *("rss_heap", "rss_anonymous", "glibc_used", "glibc_free", "glibc_mmapped"),
                "pymalloc_used",
            )
        )
        + f", glibc free chunks {held_before['glibc_chunks']} -> {held['glibc_chunks']}"
        + f", pymalloc arenas {held_before['pymalloc_arenas']} -> {held['pymalloc_arenas']} "
        f"(peak {arenas})"
    )
    if "survivors" in ended:
        print(f"  pymalloc size classes whose pools grew: {ended['pools_grew']}")
        print(f"  survivors in memory mapped since the warm start: {ended['survivors']}")
        for line in ended["survivor_examples"]:
            print(f"    {line}")
    if heap_before is not None:
        heap_after = ended["traced"]
        print(
            f"  tracemalloc: {heap_before:.2f} MiB of Python heap before, {heap_after:.2f} MiB "
            f"after ({(heap_after - heap_before) / heap_before:+.1%})"
        )
        for line in ended["grew"]:
            print(f"    {line}")
        print(f"    objects that grew: {ended['types']}")


if __name__ == "__main__":
    main()
