"""
Per-event cost of the wire layer on a realistic stream, next to the official SDK.

A real AG-UI stream is mostly text deltas, with tool calls (and their argument deltas),
state deltas, reasoning and the run lifecycle around them.  This script builds such a
stream (about 10k events), then times each operation over the whole stream several times
with ``time.perf_counter_ns`` and prints the min and median microseconds per event.  The
official SDK's pydantic parse and dump run on the same events in the same process, so the
comparison is like for like.

It prints targets next to the numbers but asserts nothing: timing depends on the machine,
and a benchmark that fails a build on a noisy runner teaches people to ignore it.

Usage::

    python bench/bench_wire.py [--events 10000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from aguikit.encode import dumps_event
from aguikit.validate import validate_event
from aguikit.wire import parse_event, to_wire


def build_stream(target: int) -> list[dict[str, Any]]:
    """A plausible multi-turn run, repeated until ``target`` events: text dominates."""
    events: list[dict[str, Any]] = []
    run = 0
    while len(events) < target:
        run += 1
        thread, run_id = "thread-1", f"run-{run}"
        events.append({"type": "RUN_STARTED", "threadId": thread, "runId": run_id})
        events.append({"type": "REASONING_START", "messageId": f"rs-{run}"})
        events.append(
            {"type": "REASONING_MESSAGE_START", "messageId": f"rm-{run}", "role": "reasoning"}
        )
        for i in range(10):
            events.append(
                {
                    "type": "REASONING_MESSAGE_CONTENT",
                    "messageId": f"rm-{run}",
                    "delta": f"considering option {i} ",
                }
            )
        events.append({"type": "REASONING_MESSAGE_END", "messageId": f"rm-{run}"})
        events.append({"type": "REASONING_END", "messageId": f"rs-{run}"})
        call = f"call-{run}"
        events.append(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call,
                "toolCallName": "search",
                "parentMessageId": f"m-{run}",
            }
        )
        for chunk in ('{"query":', ' "weather', " in Paris", '", "limit":', " 5}"):
            events.append({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": chunk})
        events.append({"type": "TOOL_CALL_END", "toolCallId": call})
        events.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": f"tm-{run}",
                "toolCallId": call,
                "content": '{"temp": 18, "sky": "clear"}',
                "role": "tool",
            }
        )
        events.append(
            {
                "type": "STATE_DELTA",
                "delta": [
                    {"op": "replace", "path": "/status", "value": "answering"},
                    {"op": "add", "path": "/calls/-", "value": {"id": call}},
                ],
            }
        )
        message = f"m-{run}"
        events.append({"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"})
        for i in range(60):
            events.append(
                {
                    "type": "TEXT_MESSAGE_CONTENT",
                    "messageId": message,
                    "delta": f"word{i} ",
                    "timestamp": 1_700_000_000_000 + i,
                }
            )
        events.append({"type": "TEXT_MESSAGE_END", "messageId": message})
        events.append(
            {
                "type": "STATE_DELTA",
                "delta": [{"op": "replace", "path": "/status", "value": "idle"}],
            }
        )
        events.append(
            {
                "type": "RUN_FINISHED",
                "threadId": thread,
                "runId": run_id,
                "outcome": {"type": "success"},
            }
        )
    return events[:target]


def time_per_item(fn: Callable[[Any], Any], items: Sequence[Any], repeats: int) -> list[float]:
    """Microseconds per item, one figure per repeat over the whole sequence."""
    fn(items[0])  # warm caches (validators, converter hooks) outside the timing
    out = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for item in items:
            fn(item)
        out.append((time.perf_counter_ns() - start) / len(items) / 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    docs = build_stream(args.events)
    lines = [json.dumps(d, separators=(",", ":")) for d in docs]
    events = [parse_event(d) for d in docs]
    kinds: dict[str, int] = {}
    for d in docs:
        kinds[d["type"]] = kinds.get(d["type"], 0) + 1

    rows: list[tuple[str, list[float]]] = [
        ("json.loads (same line)", time_per_item(json.loads, lines, args.repeats)),
        ("parse_event", time_per_item(parse_event, docs, args.repeats)),
        (
            "parse_event(check=False)",
            time_per_item(lambda d: parse_event(d, check=False), docs, args.repeats),
        ),
        ("to_wire", time_per_item(to_wire, events, args.repeats)),
        ("dumps_event (validated)", time_per_item(dumps_event, events, args.repeats)),
        (
            "dumps_event(validate=False)",
            time_per_item(lambda e: dumps_event(e, validate=False), events, args.repeats),
        ),
        ("validate_event (strict)", time_per_item(validate_event, docs, args.repeats)),
    ]
    official_available = True
    try:
        from ag_ui.core import Event as OfficialEvent
        from pydantic import TypeAdapter
    except ImportError:
        official_available = False
    if official_available:
        adapter: Any = TypeAdapter(OfficialEvent)
        models = [adapter.validate_python(d) for d in docs]
        rows.append(
            ("official validate_python", time_per_item(adapter.validate_python, docs, args.repeats))
        )
        rows.append(
            (
                "official model_dump",
                time_per_item(
                    lambda m: m.model_dump(by_alias=True, exclude_none=True), models, args.repeats
                ),
            )
        )

    print(f"{len(docs)} events, {args.repeats} repeats; mix: ")
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"    {kind:<28} {count:>6}  ({100 * count / len(docs):4.1f}%)")
    print()
    print(f"{'operation':<28} {'min µs/event':>13} {'median µs/event':>16}")
    print("-" * 59)
    medians = {}
    for name, figures in rows:
        medians[name] = statistics.median(figures)
        print(f"{name:<28} {min(figures):>13.2f} {medians[name]:>16.2f}")
    print()
    print("targets (median):")

    def target(label: str, ok: bool, detail: str) -> None:
        print(f"  [{'met' if ok else 'MISSED'}] {label}: {detail}")

    if official_available:
        parse, official_parse = medians["parse_event"], medians["official validate_python"]
        target(
            "parse_event no slower than the official parse",
            parse <= official_parse,
            f"{parse:.2f} vs {official_parse:.2f} µs",
        )
        wire, official_dump = medians["to_wire"], medians["official model_dump"]
        target(
            "to_wire >= 5x faster than the official dump",
            official_dump >= 5 * wire,
            f"{official_dump / wire:.1f}x",
        )
    else:
        print("  (official SDK not installed: comparisons skipped)")
    check, loads = medians["validate_event (strict)"], medians["json.loads (same line)"]
    target(
        "validate_event within 2x of json.loads",
        check <= 2 * loads,
        f"{check / loads:.1f}x",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
