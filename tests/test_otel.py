"""
``aguikit.otel`` against the real OpenTelemetry SDK and the OTLP/HTTP protobuf exporter.

One scenario (a travel agent's thread of two runs: a step with a reasoning block, text, a
backend tool, a subagent with a tool of its own, a state snapshot, a frontend tool and an
interrupt with token usage; then a second run that brings the frontend tool's result and
fails) is produced by a real :class:`RunWriter` and must give exactly :data:`TREE`, read
from the SDK's in-memory exporter and, decoded with the official ``opentelemetry-proto``
messages, from what the OTLP exporter POSTed to a loopback receiver.  A client's trace
goes through a real uvicorn and comes back in ``RUN_STARTED.metadata``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.servers import Route, serve, serve_asgi

from aguikit import PROTOCOL_VERSION, _observe
from aguikit.errors import SchemaValidationError
from aguikit.models import TokenUsage
from aguikit.otel import AguikitInstrumentor, Telemetry, usage_attributes
from aguikit.server import RunWriter, create_app

THREAD = "thread-1"


@attrs.frozen
class Node:
    """One span, from the SDK or from OTLP, in the form the tree is drawn from."""

    name: str
    span_id: int
    parent_id: int | None
    trace_id: int
    kind: str
    error: str | None
    attributes: Mapping[str, Any]
    events: Sequence[tuple[str, Mapping[str, Any]]]
    links: Sequence[int]
    start: int


def from_sdk(spans: Sequence[Any]) -> list[Node]:
    return [
        Node(
            name=s.name,
            span_id=s.context.span_id,
            parent_id=s.parent.span_id if s.parent is not None else None,
            trace_id=s.context.trace_id,
            kind=s.kind.name,
            error=s.status.description or "ERROR"
            if s.status.status_code is trace.StatusCode.ERROR
            else None,
            attributes=dict(s.attributes or {}),
            events=[(e.name, dict(e.attributes or {})) for e in s.events],
            links=[link.context.span_id for link in s.links],
            start=s.start_time,
        )
        for s in spans
    ]


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))


def from_otlp(bodies: Sequence[bytes]) -> list[Node]:
    """Spans decoded from OTLP/HTTP protobuf requests with the official messages."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

    nodes = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                assert scope.scope.name == "aguikit"
                for s in scope.spans:
                    error = s.status.message or "ERROR"
                    nodes.append(
                        Node(
                            name=s.name,
                            span_id=int.from_bytes(s.span_id, "big"),
                            parent_id=int.from_bytes(s.parent_span_id, "big") or None,
                            trace_id=int.from_bytes(s.trace_id, "big"),
                            kind=Span.SpanKind.Name(s.kind).removeprefix("SPAN_KIND_"),
                            error=error if s.status.code == Status.STATUS_CODE_ERROR else None,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            events=[
                                (e.name, {a.key: _value(a.value) for a in e.attributes})
                                for e in s.events
                            ],
                            links=[int.from_bytes(link.span_id, "big") for link in s.links],
                            start=s.start_time_unix_nano,
                        )
                    )
    return nodes


def _attrs(attributes: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={attributes[key]!r}" for key in sorted(attributes))


def draw(nodes: Sequence[Node]) -> str:
    """The span tree as text: each span, its status, events and links, children indented."""
    by_id = {n.span_id: n for n in nodes}
    children: dict[int | None, list[Node]] = {}
    for node in sorted(nodes, key=lambda n: (n.start, n.name)):
        parent = node.parent_id if node.parent_id in by_id else None
        children.setdefault(parent, []).append(node)
    lines: list[str] = []

    def walk(node: Node, depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}{node.name} [{node.kind}]")
        lines.extend(
            f"{pad}  | {key} = {node.attributes[key]!r}" for key in sorted(node.attributes)
        )
        if node.error is not None:
            lines.append(f"{pad}  ! error {node.error}")
        for name, attributes in node.events:
            lines.append(f"{pad}  * {name} {_attrs(attributes)}")
        for link in node.links:
            lines.append(f"{pad}  -> {by_id[link].name}" if link in by_id else f"{pad}  -> ?")
        for child in children.get(node.span_id, []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return "\n".join(lines) + "\n"


TREE = """\
invoke_agent travel [SERVER]
  | agui.run.id = 'run-1'
  | agui.run.outcome = 'interrupt'
  | agui.usage.total_tokens = 1280
  | gen_ai.agent.name = 'travel'
  | gen_ai.conversation.id = 'thread-1'
  | gen_ai.operation.name = 'invoke_agent'
  | gen_ai.provider.name = 'openai'
  | gen_ai.response.model = 'gpt-test'
  | gen_ai.usage.cache_read.input_tokens = 1000
  | gen_ai.usage.input_tokens = 1200
  | gen_ai.usage.output_tokens = 80
  | gen_ai.usage.reasoning.output_tokens = 30
  * agui.state_snapshot agui.event.index=21
  * agui.interrupt agui.event.index=25, agui.interrupt.id='int-1', agui.interrupt.reason='approval'
  step plan [INTERNAL]
    | agui.step.name = 'plan'
    reasoning [INTERNAL]
      | agui.message.id = 'think-1'
  execute_tool search_flights [INTERNAL]
    | gen_ai.operation.name = 'execute_tool'
    | gen_ai.tool.call.id = 'call-search'
    | gen_ai.tool.name = 'search_flights'
  invoke_agent booker [INTERNAL]
    | agui.subagent.outcome = 'success'
    | agui.subagent.run_id = 'sub-1'
    | gen_ai.agent.name = 'booker'
    | gen_ai.operation.name = 'invoke_agent'
    execute_tool hold_seat [INTERNAL]
      | gen_ai.operation.name = 'execute_tool'
      | gen_ai.tool.call.id = 'call-hold'
      | gen_ai.tool.name = 'hold_seat'
  execute_tool confirm_booking [INTERNAL]
    | gen_ai.operation.name = 'execute_tool'
    | gen_ai.tool.call.id = 'call-confirm'
    | gen_ai.tool.name = 'confirm_booking'
    -> invoke_agent travel
invoke_agent travel [SERVER]
  | agui.run.id = 'run-2'
  | agui.run.outcome = 'error'
  | error.type = 'AGUI-E020'
  | gen_ai.agent.name = 'travel'
  | gen_ai.conversation.id = 'thread-1'
  | gen_ai.operation.name = 'invoke_agent'
  ! error AGUI-E020
  * exception exception.type='ConnectionError'
  -> execute_tool confirm_booking
"""
"""The scenario's span tree (``README.md`` shows it too)."""


@attrs.define
class Sdk:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def metric(self, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
        """Each data point of the metric ``name``: its attributes → its value (a sum, or a
        histogram's count)."""
        data = self.reader.get_metrics_data()
        found: dict[tuple[tuple[str, Any], ...], Any] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        key = tuple(sorted(dict(point.attributes or {}).items()))
                        found[key] = getattr(point, "value", None) or getattr(point, "count", None)
        return found


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Sdk(exporter, reader, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def run_input(run_id: str, **more: Any) -> dict[str, Any]:
    return {
        "threadId": THREAD,
        "runId": run_id,
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **more,
    }


async def first_run(telemetry: Telemetry) -> list[Mapping[str, Any]]:
    """Run 1: everything but an error, ending on an interrupt with usage."""
    async with RunWriter(run_input("run-1"), telemetry=telemetry) as run:
        async with run.step("plan"), run.reasoning(message_id="think-1") as block:
            await block.think("Lisbon is cheapest on Tuesday", message_id="thought-1")
        await run.say("Looking for flights to Lisbon.", message_id="msg-1")
        await run.call_tool("search_flights", {"to": "LIS"}, tool_call_id="call-search")
        await run.tool_result("call-search", {"flights": ["TP1", "FR2"]}, message_id="res-1")
        async with run.subagent("booker", subagent_run_id="sub-1") as booker:
            await booker.call_tool("hold_seat", {"flight": "TP1"}, tool_call_id="call-hold")
            await booker.tool_result("call-hold", "held 12A", message_id="res-2")
        await run.set_state({"fare": 120})
        await run.call_tool("confirm_booking", {"flight": "TP1"}, tool_call_id="call-confirm")
        await run.emit(
            {
                "type": "RUN_FINISHED",
                "threadId": THREAD,
                "runId": "run-1",
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [{"id": "int-1", "reason": "approval", "message": "OK?"}],
                },
                "usage": [
                    {
                        "provider": "openai",
                        "model": "gpt-test",
                        "inputTokens": 1200,
                        "cachedInputTokens": 1000,
                        "outputTokens": 80,
                        "reasoningTokens": 30,
                        "totalTokens": 1280,
                    }
                ],
            }
        )
    return run.events


SECRET = "postgres://admin:hunter2@db"


async def second_run(telemetry: Telemetry) -> list[Mapping[str, Any]]:
    """Run 2: brings the frontend tool's result (and the interrupt's answer), then fails."""
    messages = [
        {
            "id": "asst-1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "call-confirm",
                    "type": "function",
                    "function": {"name": "confirm_booking", "arguments": '{"flight":"TP1"}'},
                }
            ],
        },
        {"id": "tool-1", "role": "tool", "toolCallId": "call-confirm", "content": "confirmed"},
    ]
    resume = [{"interruptId": "int-1", "status": "resolved", "payload": {"approved": True}}]
    writer = RunWriter(run_input("run-2", messages=messages, resume=resume), telemetry=telemetry)
    async with writer:
        raise ConnectionError(f"could not reach {SECRET}")
    return writer.events


def scenario(telemetry: Telemetry) -> list[list[Mapping[str, Any]]]:
    return [asyncio.run(first_run(telemetry)), asyncio.run(second_run(telemetry))]


def test_the_scenario_draws_the_expected_tree(sdk: Sdk) -> None:
    scenario(sdk.telemetry(agent_name="travel"))

    drawn = draw(from_sdk(sdk.exporter.get_finished_spans()))

    print(drawn)
    assert TREE == drawn


def test_the_otlp_exporter_sends_the_same_tree(sdk: Sdk) -> None:
    """The official OTLP/HTTP protobuf exporter POSTs to a loopback receiver; the bodies,
    decoded with the official ``opentelemetry-proto`` messages, draw the same tree."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    with serve() as receiver:
        url = receiver.add(
            "/v1/traces", Route([], content_type="application/x-protobuf", status=200)
        )
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url)))
        scenario(Telemetry(tracer_provider=provider, agent_name="travel"))
        provider.shutdown()
        bodies = [r.body for r in receiver.requests if r.path == "/v1/traces"]
        assert {r.headers["content-type"] for r in receiver.requests} == {"application/x-protobuf"}

    nodes = from_otlp(bodies)
    assert TREE == draw(nodes)
    # One trace per run; the frontend tool's span is run 1's child, linked from run 2.
    runs = [n for n in nodes if n.parent_id is None]
    assert len({n.trace_id for n in runs}) == 2
    confirm = next(n for n in nodes if n.name == "execute_tool confirm_booking")
    assert confirm.parent_id == runs[0].span_id
    assert confirm.links == [runs[1].span_id]
    assert runs[1].links == [confirm.span_id]


def test_a_clients_trace_goes_through_the_server_and_back_into_run_started(sdk: Sdk) -> None:
    """The client's run span is the parent of the server's (``traceparent`` on the
    request), a span the handler starts nests in the server's run, and the trace id
    comes back in ``RUN_STARTED.metadata["aguikit.otel"]``."""
    from aguikit import AgentClient

    tracer = sdk.tracer_provider.get_tracer("app")

    async def handler(run_input: Any, run: RunWriter) -> None:
        with tracer.start_as_current_span("chat model"):
            await run.say("Hello.", message_id="msg-1")

    app = create_app(handler, telemetry=sdk.telemetry(agent_name="server-agent"))
    with serve_asgi(app) as base:
        client = AgentClient(base + "/", telemetry=sdk.telemetry(agent_name="client-agent"))
        with tracer.start_as_current_span("checkout") as root:
            updates = list(client.run_sync(run_input("run-9")))

    trace_id = format(root.get_span_context().trace_id, "032x")
    started = updates[0].event
    assert started.type == "RUN_STARTED"
    carried = started.metadata["aguikit.otel"]
    assert carried["traceId"] == trace_id
    assert carried["traceparent"].startswith(f"00-{trace_id}-{carried['spanId']}-")
    nodes = {n.name: n for n in from_sdk(sdk.exporter.get_finished_spans())}
    client_run = nodes["invoke_agent client-agent"]
    server_run = nodes["invoke_agent server-agent"]
    assert {n.trace_id for n in nodes.values()} == {root.get_span_context().trace_id}
    assert client_run.parent_id == nodes["checkout"].span_id
    assert (client_run.kind, server_run.kind) == ("CLIENT", "SERVER")
    assert server_run.parent_id == client_run.span_id
    assert nodes["chat model"].parent_id == server_run.span_id
    assert carried["spanId"] == format(server_run.span_id, "016x")
    assert server_run.attributes["agui.run.outcome"] == "success"
    assert client_run.attributes["agui.run.outcome"] == "success"
    assert client_run.events == []  # text is an event only when capturing content


def test_a_handler_that_sends_its_own_run_started_gets_the_trace_too(sdk: Sdk) -> None:
    """An official-SDK-style generator yields its own ``RUN_STARTED`` (with metadata of
    its own): the endpoint adds the run's trace beside it; a wire dict without metadata
    and a typed event get it the same way through a writer."""
    from ag_ui.core import (
        RunFinishedEvent,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
    )

    from aguikit import AgentClient
    from aguikit.models import RunStartedEvent as TypedRunStarted

    async def handler(run_input: Any) -> Any:
        ids = {"thread_id": run_input.thread_id, "run_id": run_input.run_id}
        yield RunStartedEvent(**ids, metadata={"app": {"tenant": "t-1"}})
        yield TextMessageStartEvent(message_id="m", role="assistant")
        yield TextMessageContentEvent(message_id="m", delta="Hi")
        yield TextMessageEndEvent(message_id="m")
        yield RunFinishedEvent(**ids)

    app = create_app(handler, telemetry=sdk.telemetry(agent_name="sdk-style"))
    with serve_asgi(app) as base:
        updates = list(AgentClient(base + "/").run_sync(run_input("run-s")))

    started = updates[0].event
    assert started.type == "RUN_STARTED"
    (server_run,) = from_sdk(sdk.exporter.get_finished_spans())
    assert started.metadata["app"] == {"tenant": "t-1"}
    assert started.metadata["aguikit.otel"]["spanId"] == format(server_run.span_id, "016x")
    assert server_run.attributes["agui.run.outcome"] == "success"

    async def by_hand(item: Any, run_id: str) -> Mapping[str, Any]:
        async with RunWriter(run_input(run_id), telemetry=sdk.telemetry()) as run:
            await run.emit(item)
        return run.events[0]

    wire = {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-w"}
    typed = TypedRunStarted(thread_id=THREAD, run_id="run-x")
    for item, run_id in ((wire, "run-w"), (typed, "run-x")):
        sent = asyncio.run(by_hand(item, run_id))
        span = next(
            n
            for n in from_sdk(sdk.exporter.get_finished_spans())
            if n.attributes["agui.run.id"] == run_id
        )
        assert set(sent["metadata"]) == {"aguikit.otel"}
        assert sent["metadata"]["aguikit.otel"]["spanId"] == format(span.span_id, "016x")
    assert "metadata" not in wire  # the caller's dict is not changed

    async def not_an_object() -> None:
        async with RunWriter(run_input("run-y"), telemetry=sdk.telemetry()) as run:
            with pytest.raises(SchemaValidationError) as refused:
                await run.emit({**wire, "runId": "run-y", "metadata": "tenant t-1"})
            assert refused.value.event_index == 0  # the schema's refusal, not a TypeError

    asyncio.run(not_an_object())


def test_an_agent_traces_a_frontend_tool_across_its_runs(sdk: Sdk) -> None:
    """:class:`aguikit.Agent`: the frontend tool's span (client side) ends when the next
    run carries its result, linked both ways."""
    from aguikit import Agent

    async def handler(run_input: Any, run: RunWriter) -> None:
        if not any(m.role == "tool" for m in run_input.messages):
            await run.call_tool("pick_date", {"month": 5}, tool_call_id="call-date")
        else:
            await run.say("Booked.")

    app = create_app(handler)

    async def converse() -> None:
        agent = Agent("http://agent/", app=app, telemetry=sdk.telemetry())
        await agent.run()
        agent.messages.append(
            agent._message({"id": "t-1", "role": "tool", "toolCallId": "call-date", "content": "5"})
        )
        await agent.run()

    asyncio.run(converse())

    nodes = from_sdk(sdk.exporter.get_finished_spans())
    runs = [n for n in nodes if n.name == "invoke_agent"]
    tool = next(n for n in nodes if n.name == "execute_tool pick_date")
    assert [r.kind for r in runs] == ["CLIENT", "CLIENT"]
    assert tool.parent_id == runs[0].span_id
    assert tool.links == [runs[1].span_id]
    assert runs[1].links == [tool.span_id]


def test_metrics_count_runs_events_findings_and_time(sdk: Sdk) -> None:
    scenario(sdk.telemetry())

    server = ("agui.side", "server")
    assert sdk.metric("agui.runs") == {
        (("agui.run.outcome", "interrupt"), server): 1,
        (("agui.run.outcome", "error"), server): 1,
    }
    events = sdk.metric("agui.events")
    assert events[(("agui.event.type", "TOOL_CALL_START"), server)] == 3
    assert events[(("agui.event.type", "RUN_STARTED"), server)] == 2
    assert events[(("agui.event.type", "STATE_SNAPSHOT"), server)] == 1
    assert sdk.metric("agui.run.duration") == {
        (("agui.run.outcome", "interrupt"), server): 1,
        (("agui.run.outcome", "error"), server): 1,
    }
    assert sdk.metric("agui.run.time_to_first_event") == {(server,): 2}
    assert sdk.metric("agui.findings") == {}


async def one_run(telemetry: Telemetry, run_id: str) -> None:
    async with RunWriter(run_input(run_id), telemetry=telemetry) as run:
        await run.say("hi", message_id=f"m-{run_id}")


def test_the_counters_are_cumulative_sums_every_telemetry_of_a_provider_adds_to(
    sdk: Sdk,
) -> None:
    """The runs, events and findings counters are exported as the monotonic cumulative
    sums a counter gives, though each run adds its counts only when it ends; two
    ``Telemetry`` objects on one meter provider add to the same sums (the SDK would drop a
    second set of asynchronous counters under the same names), and a later collection
    sees the earlier runs too."""
    from opentelemetry.sdk.metrics.export import AggregationTemporality, Sum

    first, second = sdk.telemetry(), sdk.telemetry()
    asyncio.run(one_run(first, "run-1"))
    asyncio.run(one_run(second, "run-2"))
    success = (("agui.run.outcome", "success"), ("agui.side", "server"))
    assert sdk.metric("agui.runs") == {success: 2}

    asyncio.run(one_run(first, "run-3"))
    assert sdk.metric("agui.runs") == {success: 3}
    content = (("agui.event.type", "TEXT_MESSAGE_CONTENT"), ("agui.side", "server"))
    assert sdk.metric("agui.events")[content] == 3
    data = sdk.reader.get_metrics_data()
    assert data is not None
    (scope,) = data.resource_metrics[0].scope_metrics
    assert scope.scope.name == "aguikit"
    counters = {m.name: m for m in scope.metrics if m.name in ("agui.runs", "agui.events")}
    assert {name: m.unit for name, m in counters.items()} == {
        "agui.runs": "{run}",
        "agui.events": "{event}",
    }
    for metric in counters.values():
        assert isinstance(metric.data, Sum)
        assert metric.data.is_monotonic
        assert metric.data.aggregation_temporality == AggregationTemporality.CUMULATIVE


def test_events_of_one_kind_in_a_row_are_counted_and_indexed_like_any(sdk: Sdk) -> None:
    """A message's deltas in a row are counted without a dictionary update each, and still
    add up: by type across two messages, and in the index a later span event carries."""

    async def produce() -> list[Mapping[str, Any]]:
        async with RunWriter(run_input("run-s"), telemetry=sdk.telemetry()) as run:
            async with run.text_message(message_id="m-1") as message:
                for n in range(5):
                    await message.write(f"{n} ")
            await run.set_state({"a": 1})
            async with run.text_message(message_id="m-2") as message:
                for n in range(3):
                    await message.write(f"{n} ")
        return run.events

    events = asyncio.run(produce())

    (span,) = from_sdk(sdk.exporter.get_finished_spans())
    ((name, found),) = span.events
    assert name == "agui.state_snapshot"
    assert events[found["agui.event.index"]]["type"] == "STATE_SNAPSHOT"
    counted = {
        dict(key)["agui.event.type"]: count for key, count in sdk.metric("agui.events").items()
    }
    assert counted == {
        "RUN_STARTED": 1,
        "TEXT_MESSAGE_START": 2,
        "TEXT_MESSAGE_CONTENT": 8,
        "TEXT_MESSAGE_END": 2,
        "STATE_SNAPSHOT": 1,
        "RUN_FINISHED": 1,
    }
    assert sum(counted.values()) == len(events)


def test_a_meter_provider_that_takes_no_weak_reference_still_counts(sdk: Sdk) -> None:
    """The counters are kept per meter provider, weakly where it allows it; one that does
    not (a ``__slots__`` class) has its counters kept for good instead."""

    class Provider:
        __slots__ = ("inner",)

        def __init__(self, inner: MeterProvider) -> None:
            self.inner = inner

        def get_meter(self, *args: Any, **kwargs: Any) -> Any:
            return self.inner.get_meter(*args, **kwargs)

    provider: Any = Provider(sdk.meter_provider)
    for run_id in ("run-1", "run-2"):
        asyncio.run(one_run(Telemetry(meter_provider=provider), run_id))
    assert sdk.metric("agui.runs") == {
        (("agui.run.outcome", "success"), ("agui.side", "server")): 2
    }


def test_repairs_and_findings_are_span_events_and_counts(sdk: Sdk) -> None:
    """A repair (``AGUI-W021``) and an audited violation, each with its rule id, severity
    and event index."""

    async def produce() -> None:
        async with RunWriter(run_input("run-r"), mode="repair", telemetry=sdk.telemetry()) as run:
            await run.emit({"type": "TEXT_MESSAGE_START", "messageId": "m-1"})
        async with RunWriter(run_input("run-a"), mode="audit", telemetry=sdk.telemetry()) as run:
            await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"})

    asyncio.run(produce())

    repaired, audited = sorted(
        (n for n in from_sdk(sdk.exporter.get_finished_spans())),
        key=lambda n: n.attributes["agui.run.id"],
        reverse=True,
    )
    assert [e for e in repaired.events if e[0] == "agui.repair"] == [
        (
            "agui.repair",
            {
                "agui.rule.id": "AGUI-W021",
                "agui.rule.symbol": "producer-repaired",
                "agui.rule.severity": "warning",
                "agui.event.index": 2,
            },
        )
    ]
    (name, finding), *_ = audited.events
    assert name == "agui.finding"
    assert finding["agui.rule.id"].startswith("AGUI-V")
    assert (finding["agui.rule.severity"], finding["agui.event.index"]) == ("error", 1)
    counted = sdk.metric("agui.findings")
    assert (
        counted[
            (
                ("agui.rule.id", "AGUI-W021"),
                ("agui.rule.severity", "warning"),
                ("agui.side", "server"),
            )
        ]
        == 1
    )
    assert sum(counted.values()) == 2


def _everything(nodes: Sequence[Node]) -> str:
    return json.dumps(
        [[n.name, dict(n.attributes), [list(e) for e in n.events], n.error] for n in nodes],
        default=str,
    )


def test_no_content_state_or_exception_text_is_recorded_by_default(sdk: Sdk) -> None:
    scenario(sdk.telemetry())

    recorded = _everything(from_sdk(sdk.exporter.get_finished_spans()))
    for secret in ("Lisbon", "LIS", "TP1", "12A", "confirmed", "fare", "hunter2", "OK?"):
        assert secret not in recorded


def test_captured_content_is_truncated(sdk: Sdk, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GenAI conventions' switch turns capture on; each value is cut to the limit."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    scenario(sdk.telemetry(max_content_length=12))

    spans = from_sdk(sdk.exporter.get_finished_spans())
    nodes = {n.name: n for n in reversed(spans)}  # the first of a name: run 1's
    search = nodes["execute_tool search_flights"].attributes
    assert search["gen_ai.tool.call.arguments"] == '{"to":"LIS"}'
    assert search["gen_ai.tool.call.result"] == '{"flights":['
    assert nodes["execute_tool confirm_booking"].attributes["gen_ai.tool.call.result"] == (
        "confirmed"
    )
    events = dict(nodes["invoke_agent"].events[:2])
    assert events["agui.text_message"]["agui.message.content"] == "Looking for "
    assert events["agui.state_snapshot"]["agui.state"] == '{"fare":120}'
    assert "hunter2" not in _everything(spans)


def test_usage_sums_only_what_every_entry_reports() -> None:
    """``events/lifecycle.mdx``: parts are inside totals, and absent is not zero."""
    usage = [
        TokenUsage(
            provider="a",
            model="x",
            input_tokens=100,
            output_tokens=10,
            cached_input_tokens=60,
            total_tokens=110,
        ),
        TokenUsage(
            provider="b", model="y", input_tokens=50, output_tokens=5, cached_input_tokens=0
        ),
    ]

    assert usage_attributes(usage) == {
        "gen_ai.usage.input_tokens": 150,
        "gen_ai.usage.output_tokens": 15,
        "gen_ai.usage.cache_read.input_tokens": 60,
    }
    assert usage_attributes([TokenUsage(output_tokens=0)]) == {"gen_ai.usage.output_tokens": 0}
    assert usage_attributes(None) == usage_attributes([]) == {}


def _token_points(sdk: Sdk) -> dict[tuple[tuple[str, Any], ...], tuple[int, int]]:
    """``gen_ai.client.token.usage``'s points: attributes -> (count, sum)."""
    data = sdk.reader.get_metrics_data()
    found = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "gen_ai.client.token.usage":
                    assert metric.unit == "{token}"
                    for point in metric.data.data_points:
                        key = tuple(sorted(dict(point.attributes or {}).items()))
                        found[key] = (point.count, point.sum)
    return found


@pytest.mark.parametrize("tracing", [True, False], ids=["traced", "metrics-only"])
def test_token_usage_is_a_histogram_by_type_provider_and_model(sdk: Sdk, tracing: bool) -> None:
    """One point per usage entry and token type, from ``RUN_FINISHED`` and ``RUN_ERROR``;
    a count an entry leaves out is no point (absent is not zero), a reported 0 is one;
    the same with no tracer recording (the metrics-only path)."""
    telemetry = sdk.telemetry(agent_name="travel")
    if not tracing:
        telemetry = Telemetry(
            tracer_provider=trace.NoOpTracerProvider(),
            meter_provider=sdk.meter_provider,
            agent_name="travel",
        )

    async def produce() -> None:
        async with RunWriter(run_input("run-u1"), telemetry=telemetry) as run:
            await run.emit(
                {
                    "type": "RUN_FINISHED",
                    "threadId": THREAD,
                    "runId": "run-u1",
                    "usage": [
                        {
                            "provider": "openai",
                            "model": "gpt-a",
                            "inputTokens": 100,
                            "cachedInputTokens": 60,
                            "outputTokens": 20,
                        },
                        {"provider": "anthropic", "inputTokens": 50},
                    ],
                }
            )
        async with RunWriter(run_input("run-u2"), telemetry=telemetry) as run:
            await run.emit(
                {"type": "RUN_ERROR", "message": "quota", "usage": [{"outputTokens": 0}]}
            )
        async with RunWriter(run_input("run-u3"), telemetry=telemetry) as run:
            await run.say("no usage at all")

    asyncio.run(produce())

    common = (
        ("agui.side", "server"),
        ("gen_ai.agent.name", "travel"),
        ("gen_ai.operation.name", "invoke_agent"),
    )

    def key(token_type: str, **more: str) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((*common, ("gen_ai.token.type", token_type), *more.items())))

    provider, model = "gen_ai.provider.name", "gen_ai.response.model"
    assert _token_points(sdk) == {
        key("input", **{provider: "openai", model: "gpt-a"}): (1, 100),
        key("output", **{provider: "openai", model: "gpt-a"}): (1, 20),
        key("input", **{provider: "anthropic"}): (1, 50),
        key("output"): (1, 0),
    }


def test_a_run_error_carries_its_code_status_and_usage(sdk: Sdk) -> None:
    async def produce() -> None:
        async with RunWriter(run_input("run-e"), telemetry=sdk.telemetry()) as run:
            await run.emit(
                {
                    "type": "RUN_ERROR",
                    "message": "quota exceeded",
                    "code": "rate_limited",
                    "usage": [{"inputTokens": 7, "outputTokens": 0}],
                }
            )

    asyncio.run(produce())

    (span,) = from_sdk(sdk.exporter.get_finished_spans())
    assert span.error == "rate_limited"
    assert span.attributes["error.type"] == "rate_limited"
    assert span.attributes["agui.run.outcome"] == "error"
    assert span.attributes["gen_ai.usage.input_tokens"] == 7
    assert span.attributes["gen_ai.usage.output_tokens"] == 0
    assert "gen_ai.usage.cache_read.input_tokens" not in span.attributes


def test_the_run_span_ends_with_its_declared_version_and_metadata_naming_it(sdk: Sdk) -> None:
    """The protocol version ``RUN_STARTED`` declares, the terminal event's attributes and
    the outcome reach the exported run span (they are set together when it ends), and
    the trace in ``RUN_STARTED.metadata`` names that span exactly."""

    async def produce() -> list[Mapping[str, Any]]:
        async with RunWriter(
            run_input("run-v", protocolVersion=PROTOCOL_VERSION), telemetry=sdk.telemetry()
        ) as run:
            await run.say("hello", message_id="m-v")
            await run.emit(
                {
                    "type": "RUN_FINISHED",
                    "threadId": THREAD,
                    "runId": "run-v",
                    "usage": [{"inputTokens": 3, "outputTokens": 2}],
                }
            )
        return run.events

    sent = asyncio.run(produce())

    (span,) = sdk.exporter.get_finished_spans()
    assert sent[0]["protocolVersion"] == PROTOCOL_VERSION
    assert {
        key: span.attributes[key]
        for key in (
            "agui.protocol.version",
            "agui.run.outcome",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
        )
    } == {
        "agui.protocol.version": PROTOCOL_VERSION,
        "agui.run.outcome": "success",
        "gen_ai.usage.input_tokens": 3,
        "gen_ai.usage.output_tokens": 2,
    }
    trace_id, span_id = f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"
    assert sent[0]["metadata"] == {
        "aguikit.otel": {
            "traceparent": f"00-{trace_id}-{span_id}-{int(span.context.trace_flags):02x}",
            "traceId": trace_id,
            "spanId": span_id,
        }
    }


def test_leaf_spans_reach_the_sdk_together_with_the_times_of_their_events(sdk: Sdk) -> None:
    """Reasoning and tool call spans are handed to the SDK when the run ends, or when
    ``_DEFERRED_SPANS`` ended, each with the times of its own start and end events."""
    from aguikit.otel import _DEFERRED_SPANS
    from aguikit.wire import parse_event

    observer = sdk.telemetry().observe(run_input("run-l"), side="server")
    assert observer is not None

    def send(kind: str, **members: Any) -> None:
        observer.event(parse_event({"type": kind, **members}))

    send("RUN_STARTED", threadId=THREAD, runId="run-l")
    before = time.time_ns()
    send("REASONING_START", messageId="think-l")
    send("REASONING_END", messageId="think-l")
    after = time.time_ns()
    time.sleep(0.002)
    for number in range(_DEFERRED_SPANS):
        send("TOOL_CALL_START", toolCallId=f"call-{number}", toolCallName="look")
        send("TOOL_CALL_END", toolCallId=f"call-{number}")
        if number < _DEFERRED_SPANS - 2:
            send(
                "TOOL_CALL_RESULT",
                messageId=f"r-{number}",
                toolCallId=f"call-{number}",
                content="x",
            )
            assert not sdk.exporter.get_finished_spans()  # none yet: they wait, together
    assert not sdk.exporter.get_finished_spans()  # the reasoning and 30 calls ended: 31
    send(
        "TOOL_CALL_RESULT",
        messageId="r-last",
        toolCallId=f"call-{_DEFERRED_SPANS - 2}",
        content="x",
    )
    assert len(sdk.exporter.get_finished_spans()) == _DEFERRED_SPANS  # the 32nd: all go
    flushed = time.time_ns()
    send("RUN_FINISHED", threadId=THREAD, runId="run-l")

    spans = {span.name: span for span in sdk.exporter.get_finished_spans()}
    thinking, run = spans["reasoning"], spans["invoke_agent"]
    assert thinking.start_time is not None and thinking.end_time is not None
    assert before <= thinking.start_time <= thinking.end_time <= after  # its events' times
    assert thinking.parent is not None and thinking.parent.span_id == run.context.span_id
    tools = [span for span in sdk.exporter.get_finished_spans() if span.name == "execute_tool look"]
    assert len(tools) == _DEFERRED_SPANS - 1  # the last call, unanswered, waits for its result
    assert all(span.end_time is not None and span.end_time < flushed for span in tools)
    assert [span.attributes["gen_ai.tool.call.id"] for span in tools] == [
        f"call-{number}" for number in range(_DEFERRED_SPANS - 1)
    ]


def test_without_an_sdk_nothing_is_observed() -> None:
    """The API's stand-ins record nothing, so no run keeps an observer or a count."""
    telemetry = Telemetry()

    async def produce() -> list[Mapping[str, Any]]:
        async with RunWriter(run_input("run-n"), telemetry=telemetry) as run:
            assert run._stream.observer is None
            await run.say("hi")
        return run.events

    events = asyncio.run(produce())
    assert "metadata" not in events[0]
    assert telemetry.observe(run_input("run-m"), side="client") is None


def test_the_instrumentor_observes_every_run_until_uninstrumented(sdk: Sdk) -> None:
    """A real ``BaseInstrumentor`` (``opentelemetry-instrumentation`` is a test
    dependency): one instance, instrument() once until uninstrument(), and again after."""
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

    instrumentor = AguikitInstrumentor()
    assert isinstance(instrumentor, BaseInstrumentor)
    assert AguikitInstrumentor() is instrumentor
    options = {"tracer_provider": sdk.tracer_provider, "meter_provider": sdk.meter_provider}
    telemetry = instrumentor.instrument(**options)
    try:
        assert isinstance(telemetry, Telemetry)
        assert instrumentor.is_instrumented_by_opentelemetry
        assert _observe.installed() is telemetry
        assert instrumentor.instrument(**options) is None  # already instrumented: unchanged
        assert _observe.installed() is telemetry
        asyncio.run(first_run_plain("run-i1"))
    finally:
        instrumentor.uninstrument()
    assert not instrumentor.is_instrumented_by_opentelemetry
    assert _observe.installed() is None
    asyncio.run(first_run_plain("run-i2"))
    again = instrumentor.instrument(**options)
    try:
        assert isinstance(again, Telemetry)
        assert again is not telemetry
        asyncio.run(first_run_plain("run-i3"))
    finally:
        instrumentor.uninstrument()

    runs = [n.attributes["agui.run.id"] for n in from_sdk(sdk.exporter.get_finished_spans())]
    assert runs == ["run-i1", "run-i3"]


def _python(code: str, *command: str, **env: str) -> str:
    """What ``code`` prints, run by this interpreter in a fresh process (behind
    ``command``, a launcher such as ``opentelemetry-instrument``)."""
    import os
    import subprocess
    import sys

    return subprocess.run(
        [*command, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
        timeout=120,
    ).stdout.strip()


def test_opentelemetry_instrument_discovers_and_applies_the_instrumentor() -> None:
    """The ``opentelemetry_instrumentor`` entry point names the class, and the
    ``opentelemetry-instrument`` launcher instruments it in the program it starts, unless
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` names ``aguikit``."""
    import sys
    from importlib.metadata import entry_points
    from pathlib import Path

    (found,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "aguikit"]
    assert found.load() is AguikitInstrumentor

    launcher = Path(sys.executable).parent / "opentelemetry-instrument"
    assert launcher.exists(), "opentelemetry-instrumentation is a test dependency"
    code = (
        "from aguikit import _observe\n"
        "from aguikit.otel import AguikitInstrumentor\n"
        "print(AguikitInstrumentor().is_instrumented_by_opentelemetry,"
        " type(_observe.installed()).__name__)"
    )
    quiet = {f"OTEL_{kind}_EXPORTER": "none" for kind in ("TRACES", "METRICS", "LOGS")}
    assert _python(code, str(launcher), **quiet) == "True Telemetry"
    disabled = {**quiet, "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "aguikit"}
    assert _python(code, str(launcher), **disabled) == "False NoneType"
    assert _python(code, **quiet) == "False NoneType"  # without the launcher, nothing


def test_without_the_instrumentation_package_the_instrumentor_works_on_the_api() -> None:
    """``aguikit[otel]`` alone: the same class, not a ``BaseInstrumentor``, with the same
    round trip."""
    code = (
        "import sys\n"
        "sys.modules['opentelemetry.instrumentation'] = None  # not installed\n"
        "from aguikit import _observe\n"
        "from aguikit.otel import AguikitInstrumentor, Telemetry\n"
        "i = AguikitInstrumentor()\n"
        "bases = [c.__module__ for c in type(i).__mro__]\n"
        "t = i.instrument(agent_name='a')\n"
        "print(any(b.startswith('opentelemetry') for b in bases), AguikitInstrumentor() is i,"
        " isinstance(t, Telemetry), _observe.installed() is t, i.instrument() is None)\n"
        "i.uninstrument()\n"
        "print(i.is_instrumented_by_opentelemetry, _observe.installed())"
    )
    assert _python(code).splitlines() == ["False True True True True", "False None"]


async def first_run_plain(run_id: str) -> None:
    async with RunWriter(run_input(run_id)) as run:
        await run.say("hi")


def test_frontend_tools_waiting_past_the_limit_end_unanswered(sdk: Sdk) -> None:
    telemetry = sdk.telemetry(max_pending_tools=1)

    async def ask(run_id: str, call_id: str) -> None:
        async with RunWriter(run_input(run_id), telemetry=telemetry) as run:
            await run.call_tool("pick", {}, tool_call_id=call_id)

    asyncio.run(ask("run-1", "call-1"))
    asyncio.run(ask("run-2", "call-2"))

    ended = [
        n for n in from_sdk(sdk.exporter.get_finished_spans()) if n.name == "execute_tool pick"
    ]
    assert [
        (n.attributes["gen_ai.tool.call.id"], n.attributes["agui.tool.unanswered"]) for n in ended
    ] == [("call-1", True)]
    telemetry.shutdown()
    assert len(sdk.exporter.get_finished_spans()) == 4


def test_the_attribute_names_are_the_installed_semantic_conventions() -> None:
    import warnings

    from aguikit import otel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from opentelemetry.semconv._incubating.attributes import (
            error_attributes,
            gen_ai_attributes,
        )
    names = {
        name: value
        for name, value in vars(otel).items()
        if name.startswith("GEN_AI_") and isinstance(value, str)
    }
    assert names == {name: getattr(gen_ai_attributes, name) for name in names}
    assert otel.ERROR_TYPE == error_attributes.ERROR_TYPE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
    assert otel.TOKEN_USAGE_METRIC == gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE
    token_types = gen_ai_attributes.GenAiTokenTypeValues
    assert {"input", "output"} == {token_types.INPUT.value, token_types.OUTPUT.value}
    values = gen_ai_attributes.GenAiOperationNameValues
    assert (otel.INVOKE_AGENT, otel.EXECUTE_TOOL) == (
        values.INVOKE_AGENT.value,
        values.EXECUTE_TOOL.value,
    )
    usage = {attribute for _, attribute in otel._USAGE if attribute.startswith("gen_ai.")}
    known = {v for v in vars(gen_ai_attributes).values() if isinstance(v, str)}
    assert usage <= known


def test_a_proxy_observes_an_exchange_with_its_own_timing(sdk: Sdk) -> None:
    """What the proxy calls: ``observe(side="proxy")`` in ``observing``, forwarding
    ``headers()`` upstream, feeding the relayed typed events and marking its own points."""
    from aguikit.wire import parse_event

    telemetry = sdk.telemetry()
    caller = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    observer = telemetry.observe(run_input("run-p"), side="proxy", headers={"traceparent": caller})
    assert observer is not None
    assert observer.headers()["traceparent"].startswith("00-" + "ab" * 16)
    agent = "00-" + "ab" * 16 + "-" + "ef" * 8 + "-01"  # the agent's run span, as it says
    with _observe.observing(observer):
        observer.mark("agui.upstream.response")
        for wire in (
            {
                "type": "RUN_STARTED",
                "threadId": THREAD,
                "runId": "run-p",
                "metadata": {"aguikit.otel": {"traceparent": agent}},
            },
            {"type": "RUN_FINISHED", "threadId": THREAD, "runId": "run-p"},
        ):
            observer.event(parse_event(wire))

    (span,) = from_sdk(sdk.exporter.get_finished_spans())
    assert (span.kind, span.attributes["agui.run.outcome"]) == ("SERVER", "success")
    assert span.events == [("agui.upstream.response", {"agui.event.index": 0})]
    assert span.parent_id == int("cd" * 8, 16)  # the caller's side
    assert span.links == [int("ef" * 8, 16)]  # the agent's side
    assert sdk.metric("agui.runs") == {(("agui.run.outcome", "success"), ("agui.side", "proxy")): 1}
    with pytest.raises(ValueError, match="side must be one of"):
        telemetry.observe(run_input("run-q"), side="browser")


def test_a_client_that_stops_reading_ends_its_run_truncated(sdk: Sdk) -> None:
    """A consumer that abandons the stream has a truncated run, not a cancelled one
    (``events/lifecycle.mdx``): the client's span says so and is not an error."""
    from aguikit import AgentClient

    async def handler(run_input: Any, run: RunWriter) -> None:
        for _ in range(3):
            await run.say("more")

    app = create_app(handler)
    with serve_asgi(app) as base:
        client = AgentClient(base + "/", telemetry=sdk.telemetry())
        for update in client.run_sync(run_input("run-t")):
            if update.event.type == "TEXT_MESSAGE_START":
                break

    (span,) = from_sdk(sdk.exporter.get_finished_spans())
    assert (span.kind, span.attributes["agui.run.outcome"], span.error) == (
        "CLIENT",
        "truncated",
        None,
    )


def test_a_replayed_earlier_run_does_not_end_the_observed_one(sdk: Sdk) -> None:
    from aguikit.wire import parse_event

    observer = sdk.telemetry().observe(run_input("run-now"), side="client")
    assert observer is not None
    for run_id in ("run-before", "run-now"):
        observer.event(parse_event({"type": "RUN_STARTED", "threadId": THREAD, "runId": run_id}))
        assert not sdk.exporter.get_finished_spans()
        observer.event(parse_event({"type": "RUN_FINISHED", "threadId": THREAD, "runId": run_id}))

    (span,) = from_sdk(sdk.exporter.get_finished_spans())
    assert span.attributes["agui.run.outcome"] == "success"
    events = sdk.metric("agui.events")
    assert events[(("agui.event.type", "RUN_STARTED"), ("agui.side", "client"))] == 2


def test_the_producer_and_the_clients_import_no_opentelemetry() -> None:
    """Without ``telemetry=`` or the instrumentor nothing loads OpenTelemetry, so the
    extra stays optional (the writer and the clients reach it through ``_observe``)."""
    import subprocess
    import sys

    code = (
        "import sys, aguikit.server, aguikit.client, aguikit.agent\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()

    assert loaded == "[]"


def test_the_endpoint_continues_the_requests_traceparent_and_tracestate(sdk: Sdk) -> None:
    import httpx

    async def handler(run_input: Any, run: RunWriter) -> None:
        await run.say("hi")

    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {
        "traceparent": f"00-{trace_id}-{parent_id}-01",
        "tracestate": "vendor=opaque",
    }
    app = create_app(handler, telemetry=sdk.telemetry())
    with serve_asgi(app) as base:
        answer = httpx.post(base + "/", json=run_input("run-w"), headers=headers, timeout=30)
    assert answer.status_code == 200

    (span,) = sdk.exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == trace_id
    assert span.parent is not None and format(span.parent.span_id, "016x") == parent_id
    assert span.parent.is_remote
    assert span.context.trace_state.get("vendor") == "opaque"
    assert f"00-{trace_id}-{format(span.context.span_id, '016x')}-01" in answer.text


def test_a_clients_findings_are_span_events_with_the_sessions_index(sdk: Sdk) -> None:
    """What the client's session tolerates (an unknown member, ``AGUI-W002``) is a finding
    on the client's run span, and a count."""
    from aguikit import AgentClient

    events = [
        {"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-c"},
        {"type": "STEP_STARTED", "stepName": "s", "surprise": 1},
        {"type": "STEP_FINISHED", "stepName": "s"},
        {"type": "RUN_FINISHED", "threadId": THREAD, "runId": "run-c"},
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    with serve() as server:
        url = server.add("/agent", Route([body]))
        list(AgentClient(url, telemetry=sdk.telemetry()).run_sync(run_input("run-c")))

    (step, run) = from_sdk(sdk.exporter.get_finished_spans())
    assert (step.name, step.parent_id) == ("step s", run.span_id)
    assert run.events == [
        (
            "agui.finding",
            {
                "agui.rule.id": "AGUI-W002",
                "agui.rule.symbol": "unknown-member",
                "agui.rule.severity": "warning",
                "agui.event.index": 1,
            },
        )
    ]
    assert sdk.metric("agui.findings") == {
        (
            ("agui.rule.id", "AGUI-W002"),
            ("agui.rule.severity", "warning"),
            ("agui.side", "client"),
        ): 1
    }


def test_one_telemetry_at_both_ends_keeps_each_sides_frontend_tool(sdk: Sdk) -> None:
    """The instrumentor's one ``Telemetry`` serving an app in process and its client: the
    producer's and the client's span of one frontend call are two spans, both ended by
    the run that answers it."""
    from aguikit import Agent

    async def handler(run_input: Any, run: RunWriter) -> None:
        if not any(m.role == "tool" for m in run_input.messages):
            await run.call_tool("pick_date", {}, tool_call_id="call-both")

    telemetry = sdk.telemetry()
    app = create_app(handler, telemetry=telemetry)

    async def converse() -> None:
        agent = Agent("http://agent/", app=app, telemetry=telemetry)
        await agent.run()
        agent.messages.append(
            agent._message({"id": "t", "role": "tool", "toolCallId": "call-both", "content": "1"})
        )
        await agent.run()

    asyncio.run(converse())

    tools = [n for n in from_sdk(sdk.exporter.get_finished_spans()) if n.name.startswith("exec")]
    assert len(tools) == 2 and all(len(tool.links) == 1 for tool in tools)
    assert "agui.tool.unanswered" not in str([t.attributes for t in tools])


def test_telemetry_that_fails_never_fails_the_run(
    sdk: Sdk, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Telemetry):
        def observe(self, *args: Any, **kwargs: Any) -> Any:
            observed = super().observe(*args, **kwargs)
            observed._handlers = {**observed._handlers, "TOOL_CALL_START": lambda *_: 1 / 0}
            return observed

    async def produce() -> list[Mapping[str, Any]]:
        async with RunWriter(
            run_input("run-b"), telemetry=Broken(tracer_provider=sdk.tracer_provider)
        ) as run:
            await run.call_tool("t", {}, tool_call_id="c")
            await run.tool_result("c", "ok")
        return run.events

    events = asyncio.run(produce())

    assert events[-1]["type"] == "RUN_FINISHED"
    assert "could not record TOOL_CALL_START" in caplog.text
    (span,) = from_sdk(sdk.exporter.get_finished_spans())
    assert span.attributes["agui.run.outcome"] == "success"


def test_the_readme_and_the_guide_show_the_scenarios_tree() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for document in ("README.md", "docs/otel.md"):
        assert f"```text\n{TREE}```" in (root / document).read_text(encoding="utf-8"), document


def test_the_proxy_traces_each_exchange_between_both_sides(sdk: Sdk) -> None:
    """A UI's run through ``aguikit proxy`` to an aguikit agent: the exchange's span is the
    UI's child, the request goes on unchanged (the agent's run is the UI's child too), the
    exchange links the agent's run, and carries its own timing points; a broken answer's
    finding is a span event on its exchange."""

    import io

    import httpx
    from tests.test_proxy import HELLO, RUN, _sse

    from aguikit import AgentClient
    from aguikit.proxy import ProxyApp

    async def handler(run_input: Any, run: RunWriter) -> None:
        await run.say("Hello.", message_id="m-1")

    agent_app = create_app(handler, telemetry=sdk.telemetry(agent_name="agent"))
    broken = [HELLO[0], HELLO[2], HELLO[4]]  # content for a message never started
    with serve_asgi(agent_app) as agent, serve() as raw:
        url = raw.add("/agent", Route(_sse(broken)))
        out = io.StringIO()
        proxy_app = ProxyApp(agent + "/", out=out, telemetry=sdk.telemetry(agent_name="proxy"))
        with serve_asgi(proxy_app, lifespan="on") as proxy:
            ui = AgentClient(proxy + "/", telemetry=sdk.telemetry(agent_name="ui"))
            updates = list(ui.run_sync(run_input("run-1")))
        broken_app = ProxyApp(url, out=out, telemetry=sdk.telemetry(agent_name="proxy-2"))
        with serve_asgi(broken_app, lifespan="on") as proxy:
            httpx.post(proxy + "/", json=RUN)

    assert updates[-1].event.type == "RUN_FINISHED"
    nodes = {n.name: n for n in from_sdk(sdk.exporter.get_finished_spans())}
    ui_run, exchange, agent_run = (
        nodes["invoke_agent ui"],
        nodes["invoke_agent proxy"],
        nodes["invoke_agent agent"],
    )
    assert (ui_run.kind, exchange.kind, agent_run.kind) == ("CLIENT", "SERVER", "SERVER")
    assert exchange.parent_id == ui_run.span_id
    assert agent_run.parent_id == ui_run.span_id  # the request went on unchanged
    assert exchange.links == [agent_run.span_id]
    assert exchange.attributes["agui.run.outcome"] == "success"
    names = [name for name, _ in exchange.events]
    assert names == ["agui.upstream.response", "agui.upstream.first_byte"]
    assert exchange.trace_id == ui_run.trace_id == agent_run.trace_id
    second = nodes["invoke_agent proxy-2"]
    findings = [attrs for name, attrs in second.events if name == "agui.finding"]
    assert findings and findings[0]["agui.event.index"] == 1, second.events
    assert findings[0]["agui.rule.id"].startswith("AGUI-V")
    assert sdk.metric("agui.runs")[(("agui.run.outcome", "success"), ("agui.side", "proxy"))] == 2
