"""
What tracing costs the producer: ``RunWriter``'s per-event cost without telemetry, with a
``Telemetry`` and no OpenTelemetry SDK, and with the SDK recording spans and metrics into
memory, side by side in one process (issue 27's budget: at most +2% without an SDK, at
most +15% with one).

Four workloads, each emitted as typed events into an SSE-encoding sink: one long
``bench_server.realistic_run`` (reasoning, text deltas, a tool call with its result and a
state delta per turn: two spans every ~80 events) and one long message (the per-event
path alone, no span but the run's); and several runs, so that each run's own cost (its
span's start and end, the trace in ``RUN_STARTED``, its metrics) weighs as a run's
length makes it: short runs of one realistic turn each (~84 events, where that
fixed cost weighs most) and runs of ten turns (~810 events, the length of an agent's
turn that streams a few hundred tokens of reasoning and text a few tokens per delta).
Every run is timed whole, from the writer's start to its finish, so span work a
telemetry leaves to a run's end is counted; where there are several runs the figure is
also given per run (µs over no telemetry), the fixed part that a run's length spreads
over its events.  The SDK runs with each of its span processors:
``SimpleSpanProcessor`` exports each span as it ends, in the writer's thread;
``BatchSpanProcessor`` (what a deployment uses) queues it for a thread of its own, whose
CPU the process time counts too.

One more variant is the floor under them: the same tracer provider asked for only the
spans and span events the realistic run must have (its run with its outcome, each
reasoning block and tool call as a child of it with the same attributes, the state
snapshot's event), started and ended directly on the SDK by an observer that does
nothing else.  The difference between it and the ``Telemetry`` with the same SDK is
what aguikit adds to what the issue's spans cost by themselves (metrics included), when
each is started and ended on the SDK as its events come; ``Telemetry`` hands a run's
reasoning and tool spans to the SDK together (``aguikit.otel``), so it can cost less
than this floor.  Before measuring, one run through each must export the same spans
(names, parents, span events), or the script stops.

Two measures, because a loaded two-core machine makes one alone untrustworthy:

1. *Process time, paired.*  Each repeat runs every variant once, in an order rotated per
   repeat, each after a full garbage collection and with the in-memory exporter emptied
   (a deployment's exporter does not keep every span of the process: keeping them would
   make each later collection slower for whichever variant happens to run then).  A
   variant's overhead in a repeat is its time over the no-telemetry time of the same
   repeat, so drift in the machine's speed cancels; the figure is the median of those
   ratios over the repeats, printed with their quartiles.  A second no-telemetry variant
   (``A/A``) runs the very same code: its spread is the noise of the measure itself.
2. *Instructions* (``--instructions``, needs ``valgrind``): the script runs itself under
   ``valgrind --tool=callgrind``, which counts every instruction each variant executes
   between the two reads of the clock (the same part of each workload as in 1.),
   repeatably whatever else the machine runs.  It counts work, not time (cache
   misses, the batch processor's thread and the system's share are not in it), so it is
   the second measure, not the figure the budget is stated in.

It prints numbers and asserts nothing about time.

Usage::

    python bench/bench_otel.py [--events 4000] [--repeats 31] [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench_server import realistic_run
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from aguikit.otel import Telemetry
from aguikit.server import RunWriter
from aguikit.transport.sse import encode_bytes
from aguikit.wire import parse_event

CPU = time.process_time
"""Process time, not wall time: the other processes of a loaded machine would otherwise
decide the figure."""

BASE = "no telemetry"
FLOOR = "floor: bare SDK spans, simple"
SIMPLE = "SDK to memory, simple"
CONTROL = "no telemetry again (A/A)"
COUNTED = (BASE, "Telemetry(), no SDK", FLOOR, SIMPLE)
"""The variants whose instructions are counted: the batch processor's export runs in a
thread of its own at moments of its choosing, so its count would not repeat."""


def text_run(target: int) -> list[dict[str, Any]]:
    """One message of ``target - 2`` deltas: the per-event path alone, no span but the run's."""
    deltas = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"word{i} "}
        for i in range(target - 2)
    ]
    start = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    return [start, *deltas, {"type": "TEXT_MESSAGE_END", "messageId": "m"}]


class Workload:
    """
    What one measured repetition does: ``runs`` runs of the ``typed`` events each, each
    timed whole (its span's start and end, its metrics, and whatever span work the
    telemetry leaves to the run's end), from the writer's start to its finish.
    """

    def __init__(self, label: str, typed: list[Any], runs: int = 1) -> None:
        self.label = label
        self.typed = typed
        self.runs = runs

    @property
    def events(self) -> int:
        """Events sent per repetition, the writer's RUN_STARTED and RUN_FINISHED included."""
        return self.runs * (len(self.typed) + 2)

    def run(self, telemetry: Any, clock: Callable[[], float]) -> float:
        return asyncio.run(emit_runs(self.typed, self.runs, telemetry=telemetry, clock=clock))


async def emit_runs(
    typed: list[Any], runs: int, *, telemetry: Any, clock: Callable[[], float]
) -> float:
    """Seconds (by ``clock``) for ``runs`` whole runs of ``typed`` through ``RunWriter``."""
    frames: list[bytes] = []

    async def sink(wire: Mapping[str, Any]) -> None:
        frames.append(encode_bytes(wire))

    start = clock()
    for number in range(runs):
        run_input = {"threadId": "t", "runId": f"r{number}", "messages": []}
        run = RunWriter(run_input, sink=sink, telemetry=telemetry)
        await run.start()
        for item in typed:
            await run.emit(item)
        await run.finish()
    elapsed = clock() - start
    assert len(frames) == runs * (len(typed) + 2)
    return elapsed


LONG_TURNS = 10
"""Turns of the longer whole runs: a run's fixed cost spread over ~820 events, as an
agent's turn of a few hundred tokens of reasoning and text, streamed a few per delta,
has."""


def turns(count: int) -> list[Any]:
    """The typed in-run events of ``count`` realistic turns (the first with the snapshot)."""
    one = len(realistic_run(2)) - 1  # a turn's events, the opening snapshot left out
    return [parse_event(d) for d in realistic_run(1 + (count - 1) * one + 1)]


def workloads(events: int) -> list[Workload]:
    """The runs measured: one long run of the realistic mix, one long message, short runs
    of one realistic turn each (about 80 events) and longer runs of ``LONG_TURNS`` turns,
    adding up to as many events."""
    turn = turns(1)
    long = turns(LONG_TURNS)
    return [
        Workload(
            "one long realistic run (a reasoning span and a tool span every ~80 events)",
            [parse_event(d) for d in realistic_run(events)],
        ),
        Workload(
            "one long message (the per-event path alone)",
            [parse_event(d) for d in text_run(events)],
        ),
        Workload(
            f"short runs of {len(turn) + 2} events, one realistic turn each (whole runs)",
            turn,
            runs=max(1, events // (len(turn) + 2)),
        ),
        Workload(
            f"runs of {len(long) + 2} events, {LONG_TURNS} realistic turns each (whole runs)",
            long,
            runs=max(1, events // (len(long) + 2)),
        ),
    ]


class BareSpans:
    """
    The floor: the realistic run's required spans straight on the SDK (its run span with
    its outcome, each reasoning block and tool call, the state snapshot's span event),
    nothing else (no counts, no metrics, no tree bookkeeping, no trace in
    ``RUN_STARTED``), through the same seam the writer calls.
    """

    def __init__(self, tracer_provider: TracerProvider) -> None:
        self.tracer = tracer_provider.get_tracer("bench")

    def observe(
        self, run_input: Any, *, side: str, headers: Mapping[str, str] | None = None
    ) -> Any:
        return _BareRun(self.tracer)


class _BareRun:
    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer
        self.span = tracer.start_span(
            "invoke_agent",
            kind=trace.SpanKind.SERVER,
            attributes={"gen_ai.operation.name": "invoke_agent", "agui.run.id": "r"},
        )
        self.context = trace.set_span_in_context(self.span)
        self.open: dict[tuple[str, str], Any] = {}
        self.ended = False

    def event(self, event: Any) -> None:
        kind = event.type
        if kind == "REASONING_START":
            self.open[("r", event.message_id)] = self.tracer.start_span(
                "reasoning", self.context, attributes={"agui.message.id": event.message_id}
            )
        elif kind == "TOOL_CALL_START":
            self.open[("t", event.tool_call_id)] = self.tracer.start_span(
                f"execute_tool {event.tool_call_name}",
                self.context,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.tool_call_name,
                    "gen_ai.tool.call.id": event.tool_call_id,
                },
            )
        elif kind == "REASONING_END":
            self.open.pop(("r", event.message_id)).end()
        elif kind == "TOOL_CALL_RESULT":
            self.open.pop(("t", event.tool_call_id)).end()
        elif kind == "STATE_SNAPSHOT":
            self.span.add_event("agui.state_snapshot", {"agui.event.index": 0})
        elif kind == "RUN_FINISHED":
            self.end()

    def end(self) -> None:
        # At RUN_FINISHED, as the Telemetry's run does: the writer calls end() only when
        # it is left as a context manager, which the bench's runs are not.
        if not self.ended:
            self.ended = True
            self.span.set_attribute("agui.run.outcome", "success")
            self.span.end()

    def warning(self, code: str, index: int | None) -> None: ...

    def failed(self, error: BaseException) -> None: ...

    def metadata(self) -> None:
        return None

    def headers(self) -> dict[str, str]:
        return {}

    def activate(self) -> Any:
        return contextlib.nullcontext()

    def mark(self, name: str) -> None: ...


class Setup:
    """The variants, and what must be emptied between two measured runs."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.simple = TracerProvider()
        self.simple.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.batched = TracerProvider()
        self.batched.add_span_processor(BatchSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.reader])
        self.variants: dict[str, Any] = {
            BASE: None,
            CONTROL: None,
            "Telemetry(), no SDK": Telemetry(),
            FLOOR: BareSpans(self.simple),
            SIMPLE: Telemetry(tracer_provider=self.simple, meter_provider=meter_provider),
            "SDK to memory, batch": Telemetry(
                tracer_provider=self.batched, meter_provider=meter_provider
            ),
        }

    def settle(self) -> None:
        """Drop what the last run left (its exported spans, its metric points), then collect."""
        self.batched.force_flush()
        self.exporter.clear()
        self.reader.get_metrics_data()
        gc.collect()

    def close(self) -> None:
        self.batched.shutdown()
        self.simple.shutdown()


def same_spans(setup: Setup, load: Workload) -> None:
    """
    Refuse to measure a floor that asks the SDK for fewer spans than ``Telemetry`` does:
    one run of ``load``'s events through each must export the same spans (names,
    parents, span events), each ended.
    """
    found = []
    for name in (FLOOR, SIMPLE):
        setup.settle()
        Workload(load.label, load.typed).run(setup.variants[name], time.perf_counter)
        spans = setup.exporter.get_finished_spans()
        names = {span.context.span_id: span.name for span in spans}
        found.append(
            sorted(
                (
                    span.name,
                    names.get(span.parent.span_id) if span.parent is not None else None,
                    tuple(event.name for event in span.events),
                )
                for span in spans
            )
        )
    if found[0] != found[1]:
        raise SystemExit(f"the floor's spans are not Telemetry's: {found[0]} != {found[1]}")


def run_once(setup: Setup, load: Workload, name: str, clock: Callable[[], float]) -> float:
    setup.settle()
    return load.run(setup.variants[name], clock)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def timed(setup: Setup, load: Workload, repeats: int) -> None:
    """Print each variant's µs/event and its paired overhead (median, quartiles)."""
    names = list(setup.variants)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        turn = repeat % len(names)
        for name in names[turn:] + names[:turn]:
            seconds[name].append(run_once(setup, load, name, CPU))
    n = load.events
    print(f"RunWriter, {load.label}: {n} events -> SSE, process time, {repeats} repeats")
    whole = load.runs > 1
    extra = f" {'µs/run more':>11}" if whole else ""
    print(
        f"  {'variant':<32} {'µs/event':>9} {'overhead':>9}  {'quartiles':<17}"
        f" {'min..max':<17}{extra}"
    )
    for name in names:
        pairs = list(zip(seconds[name], seconds[BASE], strict=True))
        ratios = [100 * (v / b - 1) for v, b in pairs]
        q1, median, q3 = quartiles(ratios)
        per = statistics.median(seconds[name]) / n * 1e6
        # Whole runs: what each run costs over no telemetry (paired, median), the fixed
        # part (its span, its trace, its metrics) that the run's length spreads.
        more = (
            f" {statistics.median((v - b) / load.runs * 1e6 for v, b in pairs):+11.1f}"
            if whole
            else ""
        )
        print(
            f"  {name:<32} {per:9.2f} {median:+8.1f}%  {q1:+6.1f}%..{q3:+6.1f}%"
            f"  {min(ratios):+6.1f}%..{max(ratios):+6.1f}%{more}"
        )


class Triggers:
    """
    The clock ``emit_runs`` reads before and after the measured runs, made into callgrind's
    markers: ``getppid`` zeroes its counters (``--zero-before``), ``getuid`` writes them
    out (``--dump-before``), so each dump holds exactly one measured loop.
    """

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        (os.getppid if self.calls % 2 else os.getuid)()
        return 0.0


def count_inside(events: int, counts: int) -> None:
    """Under callgrind: each counted variant of each workload, warmed up, then ``counts``
    measured loops (each one dump)."""
    setup = Setup()
    for load in workloads(events):
        for name in COUNTED:
            run_once(setup, load, name, time.perf_counter)  # warm up
            for _ in range(counts):
                run_once(setup, load, name, Triggers())
    setup.close()


def instructions(events: int, counts: int) -> None:
    """Run :func:`count_inside` under callgrind and print instructions per event."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("instructions: valgrind is not on PATH; not counted")
        return
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        subprocess.run(
            [
                valgrind,
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--zero-before=getppid",
                "--dump-before=getuid",
                sys.executable,
                __file__,
                "--count-inside",
                f"--events={events}",
                f"--counts={counts}",
            ],
            check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            stderr=subprocess.DEVNULL,
        )
        dumps = sorted(Path(folder).glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        totals = [
            int(re.search(r"^summary: (\d+)$", p.read_text(), re.M).group(1))  # type: ignore[union-attr]
            for p in dumps
        ]
    loads = workloads(events)
    expected = len(loads) * len(COUNTED) * counts
    if len(totals) != expected:
        raise SystemExit(f"instructions: {len(totals)} callgrind dumps, {expected} expected")
    at = iter(totals)
    for load in loads:
        n = load.events
        print(f"RunWriter, {load.label}: {n} events, instructions (callgrind), {counts} counts")
        per = {name: [next(at) / n for _ in range(counts)] for name in COUNTED}
        # The fewest of the counts: the process's first count does some one-off work
        base = min(per[BASE])
        for name, values in per.items():
            spread = 100 * (max(values) - min(values)) / base
            print(
                f"  {name:<32} {min(values):9.0f} instructions/event"
                f" {100 * (min(values) / base - 1):+7.2f}%"
                f"  (spread over counts {spread:.2f}%)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions under callgrind"
    )
    parser.add_argument("--instruction-events", type=int, default=1040)
    parser.add_argument("--counts", type=int, default=2, help="counted loops per variant")
    parser.add_argument("--count-inside", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.count_inside:
        count_inside(options.events, options.counts)
        return

    setup = Setup()
    same_spans(setup, workloads(2000)[2])
    for load in workloads(2000):  # warm up every variant
        for name in setup.variants:
            run_once(setup, load, name, CPU)
    for load in workloads(options.events):
        timed(setup, load, options.repeats)
    setup.close()
    if options.instructions:
        instructions(options.instruction_events, options.counts)
    print("  budget: no SDK <= +2%, SDK to memory <= +15%")


if __name__ == "__main__":
    main()
