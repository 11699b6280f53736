"""
What the consumer pipeline costs per event, and whether that cost grows.

Printed, never asserted:

1. A realistic corpus (chunked and explicit text, parallel tool calls with results, state
   deltas against a large state, reasoning, a subagent), as wire dicts and as typed
   events: microseconds per event for ``normalize`` alone, ``apply`` alone (on the
   normalized events), and the whole :class:`~aguikit.session.Session` fed raw dicts with
   validation and verification on.  Target: the whole session at most 10 µs per event.
2. One message receiving 100,000 deltas: the cost of the first 10,000 against the last
   10,000 (flat means appending does not copy the growing text).
3. One run carrying 5,000 messages: the first 1,000 events against the last 1,000 (flat
   means no per-event scan of the conversation).
4. When Node and ``@ag-ui/client`` are available (``AGUIKIT_REF_TS``, default
   ``../ref-ts``), the same corpus through the official TypeScript client's
   ``transformChunks`` + ``defaultApplyEvents``, via ``bench/ts_reference.mjs``; the
   column is skipped, with the reason, when either is missing.

Run with ``python bench/bench_pipeline.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aguikit.apply import Applier
from aguikit.chunks import ChunkNormalizer, normalize_all
from aguikit.session import Session
from aguikit.wire import parse_event

HERE = Path(__file__).resolve().parent
REF_TS = Path(os.environ.get("AGUIKIT_REF_TS", HERE.parent.parent / "ref-ts"))


def realistic_corpus(turns: int) -> list[dict[str, Any]]:
    """Wire dicts of one run shaped like a real agent conversation."""
    big_state = {"rows": [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(500)]}
    out: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": "1.0"},
        {"type": "STATE_SNAPSHOT", "snapshot": big_state},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "researcher"},
    ]
    for turn in range(turns):
        mid, rid = f"m{turn}", f"r{turn}"
        out += [
            {"type": "REASONING_START", "messageId": rid},
            {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"},
            *(
                {"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": "hmm "}
                for _ in range(5)
            ),
            {"type": "REASONING_MESSAGE_END", "messageId": rid},
            {"type": "REASONING_END", "messageId": rid},
        ]
        if turn % 2:
            out.append(
                {"type": "TEXT_MESSAGE_CHUNK", "messageId": mid, "role": "assistant", "delta": "I"}
            )
            out += [{"type": "TEXT_MESSAGE_CHUNK", "delta": " will look"} for _ in range(20)]
            out.append(
                {
                    "type": "TEXT_MESSAGE_CHUNK",
                    "messageId": f"{mid}s",
                    "delta": "sub",
                    "subagentRunId": "s1",
                }
            )
        else:
            out.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            out += [
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": " word"}
                for _ in range(20)
            ]
            out.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
        calls = [f"c{turn}a", f"c{turn}b"]
        for call in calls:
            out.append(
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": call,
                    "toolCallName": "search",
                    "parentMessageId": mid,
                }
            )
        for _ in range(4):
            for call in calls:
                out.append({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '{"q":1'})
        for call in calls:
            out.append({"type": "TOOL_CALL_END", "toolCallId": call})
        for call in calls:
            out.append(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": f"t{call}",
                    "toolCallId": call,
                    "content": "result",
                }
            )
        out.append(
            {
                "type": "STATE_DELTA",
                "delta": [
                    {"op": "replace", "path": f"/rows/{turn % 500}/name", "value": f"v{turn}"},
                    {"op": "add", "path": f"/rows/{turn % 500}/tags/-", "value": "x"},
                ],
            }
        )
    out.append({"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"})
    out.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    return out


def per_event(label: str, count: int, run: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    micros = best / count * 1e6
    print(f"  {label:<44} {micros:7.2f} µs/event  ({count} events)")
    return micros


def pipeline(corpus: list[dict[str, Any]]) -> None:
    typed = [parse_event(d) for d in corpus]
    normalized = normalize_all(typed)

    def normalize() -> None:
        normalizer = ChunkNormalizer()
        for event in typed:
            normalizer.normalize(event)
        normalizer.finish()

    def apply() -> None:
        applier = Applier()
        for event in normalized:
            applier.apply(event)
        applier.messages  # noqa: B018 - materialise once, as a UI would at the end

    def session() -> None:
        s = Session(keep_delivered=False)
        for document in corpus:
            s.feed(document)
        s.finish()

    print(f"realistic corpus ({len(corpus)} wire events, {len(normalized)} after expansion)")
    per_event("normalize (typed in)", len(typed), normalize)
    per_event("apply (normalized in)", len(normalized), apply)
    per_event("whole session (dicts in, validate+verify)", len(corpus), session)


def long_message(total: int = 100_000, window: int = 10_000) -> None:
    event = parse_event({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "token "})
    first = last = float("inf")
    text = ""
    for _ in range(3):  # best of three per window: single passes are allocator noise
        applier = Applier()
        applier.apply(parse_event({"type": "TEXT_MESSAGE_START", "messageId": "m"}))
        timings = []
        for _block in range(total // window):
            start = time.perf_counter()
            for _ in range(window):
                applier.apply(event)
            timings.append((time.perf_counter() - start) / window * 1e6)
        first, last = min(first, timings[0]), min(last, timings[-1])
        text = applier.text_of("m") or ""
    print(f"one message, {total} deltas ({len(text)} characters)")
    print(
        f"  first {window} deltas {first:7.3f} µs/delta; last {window} {last:7.3f}"
        f" µs/delta; ratio {last / first:.2f}"
    )


def many_messages(messages: int = 5_000, window: int = 1_000) -> None:
    events = [parse_event({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})]
    for n in range(messages):
        events += [
            parse_event({"type": "TEXT_MESSAGE_START", "messageId": f"m{n}"}),
            parse_event({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{n}", "delta": "x"}),
            parse_event({"type": "TEXT_MESSAGE_END", "messageId": f"m{n}"}),
        ]
    first = last = float("inf")
    for _ in range(5):  # best of five: a single pass is dominated by allocator noise
        session = Session(keep_delivered=False)
        start = time.perf_counter()
        for event in events[:window]:
            session.feed(event)
        first = min(first, (time.perf_counter() - start) / window * 1e6)
        for event in events[window:-window]:
            session.feed(event)
        start = time.perf_counter()
        for event in events[-window:]:
            session.feed(event)
        last = min(last, (time.perf_counter() - start) / window * 1e6)
    print(f"one run, {messages} messages ({len(events)} events, typed in, verified)")
    print(
        f"  first {window} events {first:7.3f} µs/event; last {window} {last:7.3f} µs/event;"
        f" ratio {last / first:.2f}"
    )


def typescript(corpus: list[dict[str, Any]]) -> None:
    node = shutil.which("node")
    script = HERE / "ts_reference.mjs"
    client = REF_TS / "node_modules" / "@ag-ui" / "client"
    if node is None:
        print("TypeScript reference: skipped (node is not on PATH)")
        return
    if not client.is_dir():
        print(f"TypeScript reference: skipped (@ag-ui/client not found under {REF_TS})")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(corpus, handle)
    try:
        result = subprocess.run(
            [node, str(script), handle.name],
            capture_output=True,
            text=True,
            timeout=300,
            env={
                **os.environ,
                "NODE_PATH": str(REF_TS / "node_modules"),
                "SUPPRESS_TRANSFORMATION_WARNINGS": "1",
            },
            check=False,
        )
    finally:
        os.unlink(handle.name)
    if result.returncode != 0:
        print(f"TypeScript reference: skipped (node failed: {result.stderr.strip()[:300]})")
        return
    print("TypeScript reference (@ag-ui/client transformChunks + defaultApplyEvents, Node)")
    print("  " + result.stdout.strip().replace("\n", "\n  "))


def main() -> None:
    corpus = realistic_corpus(200)
    pipeline(corpus)
    long_message()
    many_messages()
    typescript(corpus)


if __name__ == "__main__":
    main()
