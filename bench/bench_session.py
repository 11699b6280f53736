"""
What a whole :class:`aguikit.Session` and ``aguikit check`` cost, measured against
``json.loads`` in the same run, through public API only, so that one script gives the
"before" and the "after" numbers of a refactor.

Targets (printed next to the numbers, never asserted):

* a whole ``Session`` - wire dicts in: validate, parse, normalize, verify, apply - costs at
  most 3x ``json.loads`` per event on the realistic corpus, with ``json.loads`` timed on
  the very JSON lines the session's dicts were decoded from; and its cost per event stays
  flat over one long message and over one long conversation;
* ``aguikit check FILE``, end to end in a subprocess, reads at least 100,000 events/s of
  the "chat + tools" JSONL stream, and its peak RSS stays flat in the file's length (the
  same stream at 1x and 3x the length; and the 1x turns carrying 4x the text, which is what
  must stay flat: what grows with more turns is the ids the rules must remember).

What is printed:

1. The realistic corpus (chunked and explicit text, parallel tool calls with results,
   state deltas against a large state, reasoning, a subagent), as compact JSON lines:
   microseconds per event for ``json.loads`` of each line, for a fresh ``Session`` fed the
   decoded dicts and finished, and the ratio of the two.
2. Flatness through the same ``Session``: one message receiving 100,000 deltas (first
   10,000 against last 10,000), and one run carrying 5,000 messages (first 1,000 events
   against last 1,000).
3. ``aguikit check`` as a subprocess on the "chat + tools" stream written as JSONL at
   about 100,000 and 300,000 events (28 events per turn: 96,575 and 289,663 by default):
   wall time, events/s and the child's peak RSS (``ru_maxrss`` of that one child, read
   with ``os.wait4`` by a small measuring parent), next to ``json.loads`` of the same
   file's lines in this process.  A 31-event file gives the interpreter's start-up cost
   and the baseline RSS, so the share of the wall time that is start-up can be read off
   (the "excl. start-up" column); the target is on the end-to-end number.

The header names the build measured (``build: compiled (mypyc)`` or ``build: pure Python``,
from the file ``aguikit.session`` was imported from; ``nox -s bench`` measures both).  The
last line is ``BENCH_SESSION_JSON {...}``: every number above and the environment (Python,
aguikit's path, commit and build, load average), for a script comparing two runs.

Method:

* Only ``aguikit.Session()`` (default arguments, so the session keeps what it delivered),
  ``Session.feed(dict)``, ``Session.finish()`` and the ``aguikit`` command (``python -m
  aguikit check``, with this process's aguikit first on ``PYTHONPATH``) are used: names a
  refactor of the internals keeps.  The corpus and the stream come from the generators of
  ``bench_pipeline.py`` and ``bench_transport.py`` (to measure a tree older than the
  renovation, run this script from the newer tree's ``bench/`` with the older ``src`` on
  ``PYTHONPATH``, as the renovation's before-and-after numbers were).
* A session may keep references to what it is fed, so no dict is fed twice: every pass
  decodes its own dicts from the JSON lines, outside the timed region.
* The machine is shared and noisy: reference and subject alternate within each
  repetition (and swap order every other one), there is one untimed warm-up pass, ``gc``
  runs before each timed region, and the table shows the median of the repetitions (best
  in parentheses); the corpus ratio is the median of each repetition's own ratio, its two
  halves having run back to back.  ``aguikit check`` also reports the child's CPU time,
  which waiting for a shared core does not inflate.  Ratios are computed within the run;
  absolute times are only context.

Run with ``python bench/bench_session.py`` (``--quick`` for a smoke run, ``--help`` for
the sizes).
"""

from __future__ import annotations

import argparse
import gc
import importlib.machinery
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aguikit
from aguikit import Session

HERE = Path(__file__).resolve().parent

SESSION_TARGET_RATIO = 3.0
CHECK_TARGET_EVENTS_PER_S = 100_000


# ---- inputs: the generators of bench_pipeline.py and bench_transport.py ---------------------

from bench_pipeline import realistic_corpus  # noqa: E402 - bench/ is the script's own path
from bench_transport import generate as chat_and_tools  # noqa: E402


def line(event: dict[str, Any]) -> str:
    """One compact JSON line, as the SDK writes it (no spaces, UTF-8 kept)."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def decode(lines: list[str]) -> list[dict[str, Any]]:
    """Fresh dicts for one pass (never timed)."""
    loads = json.loads
    return [loads(text) for text in lines]


# ---- small statistics ------------------------------------------------------------------------


def summary(samples: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(samples), "best": min(samples), "samples": samples}


def micros(seconds: float, count: int) -> float:
    return seconds / count * 1e6


# ---- 1. realistic corpus ---------------------------------------------------------------------


def time_loads(lines: list[str]) -> float:
    loads = json.loads
    gc.collect()
    start = time.perf_counter()
    for text in lines:
        loads(text)
    return time.perf_counter() - start


def time_session(documents: list[dict[str, Any]]) -> float:
    gc.collect()
    start = time.perf_counter()
    session = Session()
    feed = session.feed
    for document in documents:
        feed(document)
    session.finish()
    elapsed = time.perf_counter() - start
    del session  # tearing the session down is not part of its per-event cost
    return elapsed


def corpus_section(turns: int, repeat: int) -> dict[str, Any]:
    lines = [line(event) for event in realistic_corpus(turns)]
    count = len(lines)
    time_loads(lines)  # warm-up: validators compiled, caches filled, code paged in
    time_session(decode(lines))
    loads_s: list[float] = []
    session_s: list[float] = []
    for rep in range(repeat):
        documents = decode(lines)
        if rep % 2:
            session_s.append(time_session(documents))
            loads_s.append(time_loads(lines))
        else:
            loads_s.append(time_loads(lines))
            session_s.append(time_session(documents))
        del documents
    loads_us = summary([micros(s, count) for s in loads_s])
    session_us = summary([micros(s, count) for s in session_s])
    # Each repetition's pair ran back to back, under the same load: the median of the
    # paired ratios is steadier than a ratio of medians taken from different moments.
    ratios = [s / r for s, r in zip(session_s, loads_s, strict=True)]
    ratio = statistics.median(ratios)
    result = {
        "events": count,
        "bytes": sum(len(text.encode()) + 1 for text in lines),
        "repeat": repeat,
        "json_loads_us": loads_us,
        "session_us": session_us,
        "ratio_median": ratio,
        "ratio_best": session_us["best"] / loads_us["best"],
        "ratio_of_medians": session_us["median"] / loads_us["median"],
        "ratio_per_repetition": ratios,
    }
    print(f"1. realistic corpus: {count:,} events, {result['bytes'] / 1e6:.2f} MB of JSON lines")
    print(f"   median of {repeat} interleaved repetitions (best in parentheses)")
    print(f"   {'json.loads per line':<44} {_us(loads_us)}")
    print(f"   {'Session().feed(dict) ... finish()':<44} {_us(session_us)}")
    print(
        f"   {'ratio Session / json.loads (paired)':<44} {ratio:7.2f}x"
        f"   ({result['ratio_best']:.2f}x)"
        f"   target <= {SESSION_TARGET_RATIO:g}x"
    )
    return result


def _us(stats: dict[str, Any]) -> str:
    return f"{stats['median']:7.3f} µs/event ({stats['best']:.3f})"


# ---- 2. flatness -----------------------------------------------------------------------------


def windows_through_session(
    head: list[str], body: list[list[str]], tail: list[str], repeat: int
) -> list[dict[str, Any]]:
    """
    Feed ``head``, then each window of ``body`` timed on its own, then ``tail``; per window
    the µs/event of every repetition.  Each window's dicts are decoded just before it.
    """
    per_window: list[list[float]] = [[] for _ in body]
    for _ in range(repeat):
        session = Session()
        for document in decode(head):
            session.feed(document)
        for index, window in enumerate(body):
            documents = decode(window)
            feed = session.feed
            gc.collect()
            start = time.perf_counter()
            for document in documents:
                feed(document)
            per_window[index].append(micros(time.perf_counter() - start, len(window)))
            del documents
        for document in decode(tail):
            session.feed(document)
        session.finish()
        del session
    return [summary(samples) for samples in per_window]


def flatness_report(
    label: str, unit: str, window: int, stats: list[dict[str, Any]]
) -> dict[str, Any]:
    first, last = stats[0], stats[-1]
    result = {
        "window": window,
        "windows": len(stats),
        "first_us": first,
        "last_us": last,
        "ratio_median": last["median"] / first["median"],
        "ratio_best": last["best"] / first["best"],
        "window_medians_us": [s["median"] for s in stats],
    }
    print(f"   {label}")
    print(
        f"     first {window:,} {unit} {_us(first)}; last {window:,} {_us(last)};"
        f" ratio {result['ratio_median']:.2f} ({result['ratio_best']:.2f})   target ~1"
    )
    return result


def long_message_section(deltas: int, window: int, repeat: int) -> dict[str, Any]:
    head = [
        line({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        line({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
    ]
    delta = line({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "token "})
    body = [[delta] * window for _ in range(deltas // window)]
    tail = [
        line({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        line({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
    ]
    stats = windows_through_session(head, body, tail, repeat)
    result = flatness_report(
        f"one message receiving {deltas:,} deltas (median of {repeat}, best in parentheses)",
        "deltas",
        window,
        stats,
    )
    result["deltas"] = deltas
    return result


def many_messages_section(messages: int, window: int, repeat: int) -> dict[str, Any]:
    head = [line({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})]
    events: list[str] = []
    for n in range(messages):
        events += [
            line({"type": "TEXT_MESSAGE_START", "messageId": f"m{n}", "role": "assistant"}),
            line({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{n}", "delta": "x"}),
            line({"type": "TEXT_MESSAGE_END", "messageId": f"m{n}"}),
        ]
    body = [events[at : at + window] for at in range(0, len(events) - window + 1, window)]
    finished = line({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    tail = [*events[len(body) * window :], finished]
    stats = windows_through_session(head, body, tail, repeat)
    result = flatness_report(
        f"one run carrying {messages:,} messages ({len(events) + 2:,} events)",
        "events",
        window,
        stats,
    )
    result["messages"] = messages
    return result


# ---- 3. aguikit check ------------------------------------------------------------------------


BYTECODE: dict[str, str] = {}
"""With ``--pyc``: the child's bytecode cache, as an installed package has one."""


def child_env() -> dict[str, str]:
    """The environment of the child: it must import the aguikit this process imported."""
    root = str(Path(aguikit.__file__).resolve().parent.parent)
    inherited = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root + (os.pathsep + inherited if inherited else "")}
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(BYTECODE)
    return env


def write_stream(path: Path, count: int, stretch: int = 1) -> dict[str, int]:
    """The chat + tools stream of about ``count`` events; ``stretch`` writes each text delta
    that many times, so the same turns carry that much more text."""
    events = text = 0
    with path.open("w", encoding="utf-8") as fp:
        for event in chat_and_tools(count):
            times = stretch if event["type"] == "TEXT_MESSAGE_CONTENT" else 1
            for _ in range(times):
                fp.write(line(event) + "\n")
                events += 1
                if event["type"] in ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"):
                    text += len(event["delta"])
    return {"events": events, "bytes": path.stat().st_size, "conversation_text_bytes": text}


_MEASURE = r"""
import json, os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - started
with open(sys.argv[1], "w") as fp:
    cpu = usage.ru_utime + usage.ru_stime
    json.dump([wall, os.waitstatus_to_exitcode(status), usage.ru_maxrss, cpu], fp)
"""
"""
Runs ``aguikit check`` and reports its wall time and peak RSS.  A small process of its own
is the parent because on Linux a child's ``ru_maxrss`` starts from its parent's RSS at the
fork (``exec`` keeps the high-water mark of the image it replaces): launched from this
process, grown by the sections before, every check would report this process's size.
"""


def run_check(path: Path, scratch: Path) -> dict[str, Any]:
    """Wall seconds, exit code, peak RSS (KiB) and summary of one ``aguikit check``."""
    command = [sys.executable, "-m", "aguikit", "check", str(path)]
    measured = scratch / "measured.json"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        subprocess.run(
            [sys.executable, "-c", _MEASURE, str(measured), *command],
            stdout=out,
            stderr=err,
            env=child_env(),
            check=True,
        )
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace").strip()
        stderr = err.read().decode("utf-8", "replace").strip()
    wall, code, maxrss, cpu = json.loads(measured.read_text())
    peak_kib = maxrss // 1024 if sys.platform == "darwin" else maxrss
    if code != 0:
        print(stdout[-2000:], stderr[-2000:], sep="\n", file=sys.stderr)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "exit": code,
        "peak_rss_kib": peak_kib,
        "summary": stdout.splitlines()[-1] if stdout else stderr[-300:],
    }


def time_loads_file(path: Path) -> float:
    """``json.loads`` of every line of ``path``, read from the (cached) file."""
    loads = json.loads
    gc.collect()
    start = time.perf_counter()
    with path.open("rb") as fp:
        for raw in fp:
            loads(raw)
    return time.perf_counter() - start


def check_section(events: int, repeat: int, directory: Path) -> dict[str, Any]:
    tiny = directory / "baseline.jsonl"
    tiny_events = write_stream(tiny, 30)["events"]
    base = [run_check(tiny, directory) for _ in range(repeat)]
    startup = statistics.median(r["wall_s"] for r in base)
    startup_cpu = statistics.median(r["cpu_s"] for r in base)
    base_rss = statistics.median(r["peak_rss_kib"] for r in base)
    print(f"3. aguikit check (subprocess, {sys.executable} -m aguikit), chat + tools JSONL")
    print(f"   median of {repeat}; json.loads of the same file's lines in this process")
    print(
        f"   start-up ({tiny_events}-event file): {startup:.3f} s (cpu {startup_cpu:.3f} s),"
        f" peak RSS {base_rss / 1024:.1f} MiB, exit {base[0]['exit']}"
    )
    header = (
        f"   {'events':>9} {'MB':>6} {'wall s':>7} {'cpu s':>6} {'events/s':>9}"
        f" {'excl. start-up':>14} {'peak RSS MiB':>12} {'loads ev/s':>11} {'x loads':>8}  exit"
    )
    print(header)
    runs = []
    # 1x; 3x the turns; the 1x turns with 4x the text (each text delta written four times).
    for size, stretch in ((events, 1), (3 * events, 1), (events, 4)):
        path = directory / f"chat-tools-{size}-{stretch}.jsonl"
        info = write_stream(path, size, stretch)
        time_loads_file(path)  # warm-up: the file into the page cache
        checks: list[dict[str, Any]] = []
        loads_s: list[float] = []
        for rep in range(repeat):
            if rep % 2:
                checks.append(run_check(path, directory))
                loads_s.append(time_loads_file(path))
            else:
                loads_s.append(time_loads_file(path))
                checks.append(run_check(path, directory))
        path.unlink()
        wall = statistics.median(c["wall_s"] for c in checks)
        loads_med = statistics.median(loads_s)
        peak = statistics.median(c["peak_rss_kib"] for c in checks)
        run = {
            **info,
            "text_stretch": stretch,
            "wall_s": summary([c["wall_s"] for c in checks]),
            "cpu_s": summary([c["cpu_s"] for c in checks]),
            "events_per_s": info["events"] / wall,
            # None when noise made the start-up run slower than this one.
            "events_per_s_excluding_startup": (
                info["events"] / (wall - startup) if wall > startup else None
            ),
            "peak_rss_kib": summary([float(c["peak_rss_kib"]) for c in checks]),
            "json_loads_s": summary(loads_s),
            "json_loads_events_per_s": info["events"] / loads_med,
            "ratio_check_to_loads": wall / loads_med,
            "exit": [c["exit"] for c in checks],
            "summary": checks[-1]["summary"],
        }
        runs.append(run)
        print(
            f"   {info['events']:>9,} {info['bytes'] / 1e6:>6.1f} {wall:>7.2f}"
            f" {run['cpu_s']['median']:>6.2f}"
            f" {run['events_per_s']:>9,.0f} {_rate(run['events_per_s_excluding_startup']):>14}"
            f" {peak / 1024:>12.1f} {run['json_loads_events_per_s']:>11,.0f}"
            f" {run['ratio_check_to_loads']:>7.1f}x  {checks[-1]['exit']}"
        )
    growth = runs[1]["peak_rss_kib"]["median"] / runs[0]["peak_rss_kib"]["median"]
    text_growth = runs[2]["peak_rss_kib"]["median"] / runs[0]["peak_rss_kib"]["median"]
    over_base = [(r["peak_rss_kib"]["median"] - base_rss) / 1024 for r in runs]
    text = [r["conversation_text_bytes"] / 2**20 for r in runs]
    print(
        f"   peak RSS 3x/1x: {growth:.2f} (over start-up: {over_base[0]:.1f} -> "
        f"{over_base[1]:.1f} MiB; conversation text {text[0]:.1f} -> {text[1]:.1f} MiB)"
    )
    print(
        f"   peak RSS, the 1x turns with 4x the text / 1x: {text_growth:.2f} (over start-up: "
        f"{over_base[0]:.1f} -> {over_base[2]:.1f} MiB; conversation text {text[0]:.1f} -> "
        f"{text[2]:.1f} MiB, file {runs[2]['bytes'] / runs[0]['bytes']:.1f}x)"
    )
    per_turn = (runs[1]["peak_rss_kib"]["median"] - runs[0]["peak_rss_kib"]["median"]) * 1024
    turns = (runs[1]["events"] - runs[0]["events"]) / 29  # bench_transport: 29 events a turn
    print(
        f"   what grows with the turns: {per_turn / turns:,.0f} bytes per turn for the three"
        " messages and the call it adds (ids and skeletons, no text: the id rules remember them)"
    )
    print(
        f"   target >= {CHECK_TARGET_EVENTS_PER_S:,} events/s end to end, peak RSS flat in the"
        " text (4x text / 1x)"
    )
    print(f"   {runs[1]['summary']}")
    return {
        "repeat": repeat,
        "startup_wall_s": summary([r["wall_s"] for r in base]),
        "startup_cpu_s": summary([r["cpu_s"] for r in base]),
        "startup_peak_rss_kib": base_rss,
        "runs": runs,
        "peak_rss_ratio_3x_to_1x": growth,
        "peak_rss_ratio_4x_text_to_1x": text_growth,
    }


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


# ---- environment and entry point -------------------------------------------------------------


def environment() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(Path(aguikit.__file__).resolve().parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "aguikit_version": getattr(aguikit, "__version__", None),
        "aguikit_path": str(Path(aguikit.__file__).resolve().parent),
        "aguikit_commit": commit,
        "build": build(),
        "loadavg_start": os.getloadavg(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def build() -> str:
    """Which aguikit is measured: the compiled wheel's extension modules or the ``.py`` files
    (docs/DESIGN.md, "The hot core is compiled"), told by the file ``aguikit.session`` came from."""
    import aguikit.session

    compiled = aguikit.session.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    return "compiled (mypyc)" if compiled else "pure Python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="repetitions in this process")
    parser.add_argument("--turns", type=int, default=200, help="turns of the realistic corpus")
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--events", type=int, default=100_000, help="the 1x check stream")
    parser.add_argument("--check-repeat", type=int, default=3, help="runs per check size")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--only-check", action="store_true", help="run section 3 (aguikit check) alone"
    )
    parser.add_argument(
        "--pyc",
        action="store_true",
        help="let aguikit check write and read bytecode (in a temporary cache), as an "
        "installed package does, whatever PYTHONDONTWRITEBYTECODE says: without it, "
        "every start-up compiles aguikit's source",
    )
    args = parser.parse_args()
    if args.quick:
        args.turns, args.deltas, args.messages, args.events = 20, 20_000, 1_000, 5_000
        args.repeat, args.check_repeat = 5, 1
    env = environment()
    env["check_bytecode_cache"] = args.pyc
    print(f"aguikit {env['aguikit_version']} from {env['aguikit_path']} ({env['aguikit_commit']})")
    print(f"Python {env['python']} on {env['platform']}, {env['cpus']} CPUs")
    print(f"build: {env['build']}")
    results: dict[str, Any] = {"environment": env}
    if not args.only_check:
        results["corpus"] = corpus_section(args.turns, args.repeat)
        print("2. flatness (Session fed dicts; µs/event per window)")
        results["long_message"] = long_message_section(args.deltas, args.deltas // 10, args.repeat)
        results["many_messages"] = many_messages_section(args.messages, 1_000, args.repeat)
    with tempfile.TemporaryDirectory(prefix="aguikit-bench-session-") as tmp:
        if args.pyc:  # the start-up runs come first and fill the cache
            BYTECODE["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        results["check"] = check_section(args.events, args.check_repeat, Path(tmp))
    env["loadavg_end"] = os.getloadavg()
    results["targets"] = {
        "session_to_json_loads_ratio_max": SESSION_TARGET_RATIO,
        "check_events_per_s_min": CHECK_TARGET_EVENTS_PER_S,
    }
    print("BENCH_SESSION_JSON " + json.dumps(results, separators=(",", ":")))


if __name__ == "__main__":
    main()
