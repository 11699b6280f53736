"""
What tracing costs the producer: ``RunWriter``'s per-event cost without telemetry, with a
``Telemetry`` and no OpenTelemetry SDK, and with the SDK recording spans and metrics into
memory, side by side in one process (issue 27's budget: at most +2% without an SDK, at
most +15% with one).

The run is ``bench_server.realistic_run`` (reasoning, text deltas, a tool call with its
result and a state delta per turn: two spans, a span event and about 86 events a turn),
emitted as typed events into an SSE-encoding sink.  The three variants alternate within
each repeat, so drift in a loaded machine's speed hits them alike; the minimum over the
repeats is the figure compared, the median is printed beside it.  The SDK runs with each
of its span processors: ``SimpleSpanProcessor`` exports each span as it ends, in the
writer's thread; ``BatchSpanProcessor`` (what a deployment uses) queues it for a thread
of its own, whose CPU the process time counts too.

One more variant is the floor under them: the same tracer provider asked for only the
spans the realistic run must have (its run, and each reasoning block and tool call as a
child of it, with the same attributes), started and ended directly on the SDK by an
observer that does nothing else.  The difference between it and the ``Telemetry`` with
the same SDK is what aguikit adds to what the issue's spans cost by themselves.  Each
repeat runs the variants in a rotated order, so none always runs right after another.

It prints numbers and asserts nothing about time.

Usage::

    python bench/bench_otel.py [--events 10000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Mapping
from typing import Any

from bench_server import emit_all, realistic_run
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
from aguikit.wire import parse_event

CPU = time.process_time
"""Process time, not wall time: the other processes of a loaded machine would otherwise
decide the figure."""


def text_run(target: int) -> list[dict[str, Any]]:
    """One message of ``target - 2`` deltas: the per-event path alone, no span but the run's."""
    deltas = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"word{i} "}
        for i in range(target - 2)
    ]
    start = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    return [start, *deltas, {"type": "TEXT_MESSAGE_END", "messageId": "m"}]


class BareSpans:
    """
    The floor: the realistic run's required spans straight on the SDK, nothing else (no
    counts, no metrics, no tree bookkeeping), through the same seam the writer calls.
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

    def end(self) -> None:
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


def measure(label: str, typed: list[Any], variants: dict[str, Any], repeats: int) -> None:
    """Print each variant's µs/event (min and median over ``repeats``) and its overhead."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for repeat in range(repeats):
        turn = repeat % len(names)
        for name in names[turn:] + names[:turn]:
            times[name].append(asyncio.run(emit_all(typed, telemetry=variants[name], clock=CPU)))
    n = len(typed)
    per = {name: [s / n * 1e6 for s in seconds] for name, seconds in times.items()}
    base = min(per["no telemetry"])
    print(f"RunWriter.emit with telemetry, {label}: {n} typed events -> SSE (CPU time)")
    for name, values in per.items():
        best = min(values)
        print(
            f"  {name:<36} {best:6.2f} µs/event min  {statistics.median(values):6.2f} median"
            f"  {100 * (best / base - 1):+6.1f}% vs no telemetry"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()

    exporter = InMemorySpanExporter()
    simple = TracerProvider()
    simple.add_span_processor(SimpleSpanProcessor(exporter))
    batched = TracerProvider()
    batched.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    variants: dict[str, Any] = {
        "no telemetry": None,
        "Telemetry(), no SDK": Telemetry(),
        "floor: bare SDK spans, simple": BareSpans(simple),
        "SDK to memory, simple processor": Telemetry(
            tracer_provider=simple, meter_provider=meter_provider
        ),
        "SDK to memory, batch processor": Telemetry(
            tracer_provider=batched, meter_provider=meter_provider
        ),
    }
    asyncio.run(emit_all([parse_event(d) for d in realistic_run(2000)]))  # warm up
    for label, docs in (
        (
            "the realistic run (a reasoning span and a tool span every ~86 events)",
            realistic_run(options.events),
        ),
        ("one long message (the per-event path alone)", text_run(options.events)),
    ):
        measure(label, [parse_event(d) for d in docs], variants, options.repeats)
        exporter.clear()
    print("  budget: no SDK <= +2%, SDK to memory <= +15%")
    batched.shutdown()
    simple.shutdown()


if __name__ == "__main__":
    main()
