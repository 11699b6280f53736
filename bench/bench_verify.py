"""
How much the verifier costs per event, and whether that cost grows with the stream.

Two measurements, printed, never asserted:

1. A realistic mixed stream (text deltas, parallel tool calls inside their message, state
   deltas, reasoning, a subagent with steps), verified end to end: microseconds per event.
2. One run carrying 5,000 messages: the cost of the first 1,000 events against the last
   1,000.  Every check is a dictionary lookup keyed by id, so the two should match; a
   ratio well above 1 would mean some check scans what came before.

Run with ``python bench/bench_verify.py``.  The target is at most 3 µs per event, flat.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aguikit._generated import models
from aguikit.verify import Verifier


def realistic_run(turns: int) -> list[Any]:
    events: list[Any] = [models.RunStartedEvent(thread_id="t", run_id="r")]
    for turn in range(turns):
        mid, rid = f"m{turn}", f"rm{turn}"
        events += [
            models.ReasoningStartEvent(message_id=rid),
            models.ReasoningMessageStartEvent(message_id=rid),
            *[models.ReasoningMessageContentEvent(message_id=rid, delta="hm ") for _ in range(5)],
            models.ReasoningMessageEndEvent(message_id=rid),
            models.ReasoningEndEvent(message_id=rid),
            models.TextMessageStartEvent(message_id=mid, role="assistant"),
            *[models.TextMessageContentEvent(message_id=mid, delta="word ") for _ in range(10)],
        ]
        calls = [f"c{turn}-{n}" for n in range(2)]
        for call in calls:
            events.append(
                models.ToolCallStartEvent(
                    tool_call_id=call, tool_call_name="lookup", parent_message_id=mid
                )
            )
        for _ in range(5):
            events += [models.ToolCallArgsEvent(tool_call_id=c, delta='{"q":1') for c in calls]
        events += [models.ToolCallEndEvent(tool_call_id=c) for c in calls]
        events.append(models.TextMessageEndEvent(message_id=mid))
        events += [
            models.ToolCallResultEvent(message_id=f"tm-{c}", tool_call_id=c, content="ok")
            for c in calls
        ]
        events.append(models.StateDeltaEvent(delta=[models.AddOperation(path="/n", value=turn)]))
        sid = f"s{turn}"
        events += [
            models.SubagentStartedEvent(subagent_run_id=sid, name="helper"),
            models.StepStartedEvent(step_name="work", subagent_run_id=sid),
            models.TextMessageStartEvent(message_id=f"sm{turn}", subagent_run_id=sid),
            *[
                models.TextMessageContentEvent(
                    message_id=f"sm{turn}", delta="sub ", subagent_run_id=sid
                )
                for _ in range(5)
            ],
            models.TextMessageEndEvent(message_id=f"sm{turn}"),
            models.StepFinishedEvent(step_name="work", subagent_run_id=sid),
            models.SubagentFinishedEvent(subagent_run_id=sid),
        ]
    events.append(models.RunFinishedEvent(thread_id="t", run_id="r"))
    return events


def long_run(messages: int) -> list[Any]:
    events: list[Any] = [models.RunStartedEvent(thread_id="t", run_id="r")]
    for n in range(messages):
        mid = f"m{n}"
        events.append(models.TextMessageStartEvent(message_id=mid, role="assistant"))
        events += [models.TextMessageContentEvent(message_id=mid, delta="x") for _ in range(3)]
        events.append(models.TextMessageEndEvent(message_id=mid))
    events.append(models.RunFinishedEvent(thread_id="t", run_id="r"))
    return events


def best_of(repeat: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeat))


def time_stream(events: list[Any]) -> float:
    verifier = Verifier()
    verify = verifier.verify
    start = time.perf_counter()
    for event in events:
        verify(event)
    elapsed = time.perf_counter() - start
    verifier.finish()
    return elapsed


def time_window(events: list[Any], lo: int, hi: int) -> float:
    """Feed the whole stream, timing only events[lo:hi]."""
    verifier = Verifier()
    verify = verifier.verify
    for event in events[:lo]:
        verify(event)
    start = time.perf_counter()
    for event in events[lo:hi]:
        verify(event)
    elapsed = time.perf_counter() - start
    for event in events[hi:]:
        verify(event)
    verifier.finish()
    return elapsed


def main() -> None:
    realistic = realistic_run(200)
    seconds = best_of(7, lambda: time_stream(realistic))
    print(
        f"realistic stream: {len(realistic)} events, {seconds / len(realistic) * 1e6:.2f} µs/event"
    )

    long = long_run(5000)
    first = best_of(7, lambda: time_window(long, 0, 1000)) / 1000
    last = best_of(7, lambda: time_window(long, len(long) - 1000, len(long))) / 1000
    total = best_of(3, lambda: time_stream(long)) / len(long)
    print(f"5,000-message run: {len(long)} events, {total * 1e6:.2f} µs/event overall")
    print(f"  first 1000 events: {first * 1e6:.2f} µs/event")
    print(f"  last 1000 events:  {last * 1e6:.2f} µs/event (ratio {last / first:.2f})")


if __name__ == "__main__":
    main()
