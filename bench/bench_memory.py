"""
Peak memory of ``aguikit check`` on large valid streams: it must follow the materialised
conversation, not the size of the input.

For each size a valid SSE stream is written to disk in a streaming fashion (never held in
memory), then ``aguikit check`` runs on it in a fresh child process, and the child's peak
RSS is read with ``resource.getrusage(RUSAGE_CHILDREN)`` from a fresh measuring process per
size (``ru_maxrss`` of RUSAGE_CHILDREN is the maximum over every child ever waited for, so
each measurement needs a parent of its own).

The stream is many sequential runs, each a short conversation: a few text messages streamed
in small deltas, a tool call with argument fragments, state deltas replacing and appending,
a step (``--shape chat``, the default: the conversation grows with the input, as a real
one does).  ``--shape flat`` keeps the conversation constant - runs of state deltas,
custom events and steps, no messages - so any growth with the input would be a leak.
Reported per size: bytes,
events, wall time, peak RSS, and the conversation's own text size, so "bounded by the
conversation" can be read off the table.

Usage::

    python bench/bench_memory.py                 # 5 MB and 20 MB (a quick look)
    python bench/bench_memory.py --size 50M --size 200M --size 1G
    python bench/bench_memory.py --size 1G --dir /tmp --keep

Never asserts; numbers only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(text)


def _frame(event: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


def generate_flat(path: Path, size: int) -> tuple[int, int]:
    """Runs that change state and nothing else: the conversation never grows."""
    events = written = run = 0
    with path.open("wb", buffering=1024 * 1024) as out:
        out.write(_frame({"type": "RUN_STARTED", "threadId": "t", "runId": "run-0"}))
        out.write(_frame({"type": "STATE_SNAPSHOT", "snapshot": {"counter": 0, "note": ""}}))
        out.write(_frame({"type": "RUN_FINISHED", "threadId": "t", "runId": "run-0"}))
        while written < size:
            run += 1
            frames = [
                _frame({"type": "RUN_STARTED", "threadId": "t", "runId": f"run-{run}"}),
                _frame({"type": "STEP_STARTED", "stepName": "work"}),
            ]
            for i in range(60):
                op = {"op": "replace", "path": "/counter", "value": run * 100 + i}
                frames.append(_frame({"type": "STATE_DELTA", "delta": [op]}))
            for i in range(10):
                frames.append(_frame({"type": "CUSTOM", "name": "progress", "value": i}))
            frames.append(_frame({"type": "STEP_FINISHED", "stepName": "work"}))
            frames.append(_frame({"type": "RUN_FINISHED", "threadId": "t", "runId": f"run-{run}"}))
            block = b"".join(frames)
            out.write(block)
            written += len(block)
            events += len(frames)
    return events, 0


def generate(path: Path, size: int, deltas_per_message: int = 40) -> tuple[int, int]:
    """Write runs to ``path`` until it holds at least ``size`` bytes; (events, text bytes)."""
    events = 0
    text_bytes = 0
    run = 0
    written = 0
    word = "lorem ipsum "
    with path.open("wb", buffering=1024 * 1024) as out:
        while written < size:
            run += 1
            thread = "bench-thread"
            run_id = f"run-{run}"
            frames = [
                _frame({"type": "RUN_STARTED", "threadId": thread, "runId": run_id}),
                _frame({"type": "STEP_STARTED", "stepName": "answer"}),
            ]
            for m in range(3):
                mid = f"m-{run}-{m}"
                frames.append(
                    _frame({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
                )
                for _ in range(deltas_per_message):
                    frames.append(
                        _frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": word})
                    )
                    text_bytes += len(word)
                frames.append(_frame({"type": "TEXT_MESSAGE_END", "messageId": mid}))
            call = f"c-{run}"
            frames.append(
                _frame(
                    {
                        "type": "TOOL_CALL_START",
                        "toolCallId": call,
                        "toolCallName": "search",
                        "parentMessageId": f"m-{run}-2",
                    }
                )
            )
            for piece in ('{"q":', '"weather', ' in Lisbon"', "}"):
                frames.append(
                    _frame({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": piece})
                )
            frames.append(_frame({"type": "TOOL_CALL_END", "toolCallId": call}))
            frames.append(
                _frame(
                    {
                        "type": "STATE_DELTA",
                        "delta": [
                            {"op": "replace", "path": "/run", "value": run},
                            {"op": "add", "path": "/log/-", "value": run % 7},
                        ],
                    }
                )
                if run > 1
                else _frame({"type": "STATE_SNAPSHOT", "snapshot": {"run": 1, "log": []}})
            )
            frames.append(_frame({"type": "STEP_FINISHED", "stepName": "answer"}))
            frames.append(_frame({"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}))
            block = b"".join(frames)
            out.write(block)
            written += len(block)
            events += len(frames)
    return events, text_bytes


_MEASURE = r"""
import resource, subprocess, sys, time
started = time.perf_counter()
result = subprocess.run(
    [sys.executable, "-m", "aguikit", "check", sys.argv[1]],
    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
)
wall = time.perf_counter() - started
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(result.returncode, wall, peak_kib)
print(result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-500:])
"""


def measure(path: Path) -> tuple[int, float, int, str]:
    """Run ``aguikit check`` in a fresh measuring process; (exit, seconds, peak KiB, summary)."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout.splitlines()
    code, wall, peak = out[0].split()
    return int(code), float(wall), int(peak), out[1] if len(out) > 1 else ""


def _baseline() -> int:
    """Peak RSS of ``aguikit check`` on a 2-run file: the interpreter and the imports."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tiny.sse"
        generate(path, 1)
        return measure(path)[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", action="append", help="e.g. 50M, 200M, 1G (repeatable)")
    parser.add_argument("--dir", default=None, help="where to write the streams (a tmp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--shape", choices=("chat", "flat"), default="chat")
    args = parser.parse_args()
    sizes = [parse_size(s) for s in (args.size or ["5M", "20M"])]
    directory = Path(args.dir or tempfile.gettempdir())
    base = _baseline()
    print(f"baseline (imports, a 2-run stream): peak RSS {base / 1024:.1f} MiB")
    header = (
        f"{'size':>10} {'events':>11} {'gen s':>7} {'check s':>8} {'µs/event':>9} "
        f"{'peak RSS MiB':>13} {'over base':>10} {'text MiB':>9}  exit"
    )
    print(header)
    for size in sizes:
        path = directory / f"aguikit-bench-{size}.sse"
        started = time.perf_counter()
        events, text = (generate if args.shape == "chat" else generate_flat)(path, size)
        generated = time.perf_counter() - started
        actual = path.stat().st_size
        try:
            code, wall, peak, summary = measure(path)
        finally:
            if not args.keep:
                path.unlink(missing_ok=True)
        print(
            f"{actual / 1024**2:>8.0f}MB {events:>11,} {generated:>7.1f} {wall:>8.1f} "
            f"{wall / events * 1e6:>9.2f} {peak / 1024:>13.1f} {(peak - base) / 1024:>10.1f} "
            f"{text / 1024**2:>9.1f}  {code}"
        )
        if code != 0:
            print(f"    {summary}")
    print(f"peak RSS is ru_maxrss of RUSAGE_CHILDREN ({os.uname().sysname}: KiB)")


if __name__ == "__main__":
    main()
