"""
OpenTelemetry traces and metrics for AG-UI runs, read from the events themselves.

A run's events already say its structure: where it starts and ends and how, its steps,
tool calls, subagents and reasoning blocks, its interrupts, state snapshots and token
usage.  :class:`Telemetry` turns them into spans and metrics through the OpenTelemetry
*API* only (``pip install 'aguikit[otel]'``); an application configures the SDK and its
exporters as it always does, and without an SDK every span is a non-recording one and
aguikit keeps no per-event record at all.

Switch it on per object, with one argument::

    app = create_app(handler, telemetry=Telemetry())
    client = AgentClient(url, telemetry=Telemetry())

or for the whole process, in the ``opentelemetry-instrumentation`` style::

    AguikitInstrumentor().instrument()

The span tree of one run (names per the GenAI semantic conventions; ``docs/otel.md``)::

    invoke_agent {agent}            SERVER on the producer, CLIENT on a client
    ├── step {stepName}
    ├── execute_tool {toolCallName} ends at its TOOL_CALL_RESULT, or, for a frontend
    │                               tool, when a later run brings its result
    ├── reasoning
    └── invoke_agent {subagent}     SUBAGENT_STARTED .. FINISHED/ERROR, its own steps,
                                    tools and reasoning nested under it

Nothing the user or the model wrote is recorded unless ``capture_content`` is on (the
GenAI conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` switch), and
then each value is cut to ``max_content_length`` characters.

This module observes typed events (after chunk expansion) and session warnings; it
imports neither the writer nor the clients, which sit above it and call it through
:mod:`aguikit._observe`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from . import _observe
from .catalogue import RULES_BY_SYMBOL

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "METADATA_KEY",
    "AguikitInstrumentor",
    "ObservedRun",
    "Telemetry",
    "usage_attributes",
]

METADATA_KEY: Final = "aguikit.otel"
"""The ``RUN_STARTED.metadata`` key carrying the run's trace context (``traceparent``,
``traceId``, ``spanId``): namespaced, because the spec reserves ``ag-ui`` for itself
(``basic/metadata.mdx``)."""

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' content-capture switch, read when ``capture_content`` is unset."""

SCOPE: Final = "aguikit"

LOGGER: Final = logging.getLogger("aguikit.otel")

# The GenAI semantic conventions' names, as opentelemetry-semantic-conventions spells them
# (tests/test_otel.py checks each against the installed package, which this module does
# not need at run time).
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
TOKEN_USAGE_METRIC: Final = "gen_ai.client.token.usage"
"""The GenAI conventions' token histogram: one point per usage entry and token type."""
_TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
"""The conventions' advised bucket boundaries for ``gen_ai.client.token.usage``."""
ERROR_TYPE: Final = "error.type"
INVOKE_AGENT: Final = "invoke_agent"
EXECUTE_TOOL: Final = "execute_tool"

_USAGE: Final = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
    ("cached_input_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_write_input_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
    ("total_tokens", "agui.usage.total_tokens"),
)
"""TokenUsage member → attribute.  ``totalTokens`` has no GenAI name, so it keeps ours."""


def usage_attributes(usage: Sequence[Any] | None) -> dict[str, Any]:
    """
    The ``gen_ai.usage.*`` attributes of a run's ``usage`` entries (``events/lifecycle.mdx``,
    "Token usage").

    Each count is summed across the entries (one per provider and model) only when every
    entry reports it: an absent count is not zero, so a sum missing one entry's part
    would be a wrong number, and the attribute is left out instead.  Cached, cache-write
    and reasoning counts are parts of the input and output totals, as the GenAI
    conventions also count them, so nothing is added to anything.  One entry also names
    its provider and model.
    """
    if not usage:
        return {}
    found: dict[str, Any] = {}
    for member, attribute in _USAGE:
        counts = [getattr(entry, member, None) for entry in usage]
        if all(isinstance(count, int) for count in counts):
            found[attribute] = sum(counts)
    if len(usage) == 1:
        if usage[0].provider is not None:
            found[GEN_AI_PROVIDER_NAME] = usage[0].provider
        if usage[0].model is not None:
            found[GEN_AI_RESPONSE_MODEL] = usage[0].model
    return found


def _api_only(provider: Any) -> bool:
    """Whether a meter provider is the API's own stand-in (no SDK configured yet)."""
    return type(provider).__module__.startswith("opentelemetry.metrics")


class Telemetry:
    """
    Spans and metrics for every run it is given to, through the OpenTelemetry API.

    Pass it as ``telemetry=`` to :class:`~aguikit.server.RunWriter`,
    :func:`~aguikit.server.agui_endpoint` / :func:`~aguikit.server.create_app`,
    :class:`~aguikit.AgentClient` or :class:`~aguikit.Agent`, or install it for the
    process with :class:`AguikitInstrumentor`.  One instance serves any number of runs
    at once; it keeps the spans of frontend tool calls still waiting for their result (a
    later run's input), at most ``max_pending_tools`` of them, the oldest ended first.

    Args:
        tracer_provider: Defaults to the global one (a no-op until an SDK is set).
        meter_provider: Likewise for metrics.
        agent_name: ``gen_ai.agent.name`` of the run spans (and their names,
            ``invoke_agent {agent_name}``).
        capture_content: Record message text, tool arguments and results and state
            (truncated); ``None`` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
            (``true`` to capture).  Off by default: traces are read by more people than
            conversations should be.
        max_content_length: Characters kept of each captured value.
        max_pending_tools: Frontend tool spans kept open for a later run's result.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        agent_name: str | None = None,
        capture_content: bool | None = None,
        max_content_length: int = 1024,
        max_pending_tools: int = 1000,
    ) -> None:
        if max_content_length < 0:
            raise ValueError("max_content_length must not be negative")
        if max_pending_tools < 0:
            raise ValueError("max_pending_tools must not be negative")
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
        self.agent_name = agent_name
        self.capture_content = capture_content
        self.max_content_length = max_content_length
        self.max_pending_tools = max_pending_tools
        self._tracer = trace.get_tracer(SCOPE, _version(), tracer_provider)
        self._meter_provider = meter_provider
        self._totals: _Totals | None = None
        meter = metrics.get_meter(SCOPE, _version(), meter_provider)
        self.duration = meter.create_histogram(
            "agui.run.duration", unit="s", description="From the run's start to its end"
        )
        self.first_event = meter.create_histogram(
            "agui.run.time_to_first_event",
            unit="s",
            description="From the run's start to its first event after RUN_STARTED",
        )
        self.token_usage = meter.create_histogram(
            TOKEN_USAGE_METRIC,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._by_outcome: dict[tuple[str, str], Mapping[str, str]] = {}
        """``agui.run.duration``'s attributes by (outcome, side), built once each."""
        self._pending: OrderedDict[tuple[str, str, str], Span] = OrderedDict()
        """Frontend tool spans by (side, thread id, call id): one process may hold both ends."""
        self._lock = threading.Lock()

    @property
    def metrics_enabled(self) -> bool:
        """Whether a metrics SDK is there to record (else no run keeps counts)."""
        return self._counters() is not None

    def _counters(self) -> _Totals | None:
        """The counts behind ``agui.runs``, ``agui.events`` and ``agui.findings`` of the
        meter provider, once one is configured (the global one may be set after this
        ``Telemetry`` was built, and cannot change once set)."""
        totals = self._totals
        if totals is None:
            provider = self._meter_provider or metrics.get_meter_provider()
            if _api_only(provider):
                return None
            totals = self._totals = _totals_of(provider)
        return totals

    def observe(
        self, run_input: Any, *, side: str, headers: Mapping[str, str] | None = None
    ) -> ObservedRun | None:
        """
        Start observing the run ``run_input`` asks for (an aguikit ``RunAgentInput`` or
        its wire dict): its span starts now, as a child of the trace ``headers`` carry
        (``traceparent``/``tracestate``, on the server) or of the current span.  ``None``
        when neither a tracer nor a meter would record anything.

        ``side`` is ``"server"`` (a ``SERVER`` span: the writer), ``"client"`` (``CLIENT``:
        the clients) or ``"proxy"`` (``SERVER``: one span per proxied exchange, a child
        of the caller's, linking the agent's run its ``RUN_STARTED`` names, since
        ``aguikit proxy`` forwards the request unchanged); it is also the metrics'
        ``agui.side``.

        Raises:
            ValueError: ``side`` is none of those.
        """
        kind = _KINDS.get(side)
        if kind is None:
            raise ValueError(f"side must be one of {sorted(_KINDS)}, not {side!r}")
        thread_id, run_id, parent_run_id = _input_fields(run_input)
        parent = propagate.extract(headers) if headers else None
        links = []
        resolved: list[tuple[Span, Any]] = []
        if self._pending:
            answered = _answered(run_input)
            with self._lock:
                for call_id, content in answered.items():
                    span = self._pending.pop((side, thread_id, call_id), None)
                    if span is not None:
                        resolved.append((span, content))
                        links.append(Link(span.get_span_context()))
        name = f"{INVOKE_AGENT} {self.agent_name}" if self.agent_name else INVOKE_AGENT
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: INVOKE_AGENT,
            GEN_AI_CONVERSATION_ID: thread_id,
            "agui.run.id": run_id,
        }
        if self.agent_name:
            attributes[GEN_AI_AGENT_NAME] = self.agent_name
        if parent_run_id is not None:
            attributes["agui.run.parent_id"] = parent_run_id
        span = self._tracer.start_span(
            name,
            context=parent,
            kind=kind,
            attributes=attributes,
            links=links,
        )
        for tool, content in resolved:
            tool.add_link(span.get_span_context(), {"agui.run.id": run_id})
            if self.capture_content:
                tool.set_attribute(GEN_AI_TOOL_CALL_RESULT, self.clip(content))
            tool.end()
        if not span.is_recording() and not self.metrics_enabled:
            span.end()
            return None
        return ObservedRun(self, span, side, thread_id, run_id)

    def _outcome_attributes(self, outcome: str, side: str) -> Mapping[str, str]:
        """The attributes of a run's duration point: one mapping per (outcome, side),
        shared by every run (the SDK copies what it keeps)."""
        key = (outcome, side)
        found = self._by_outcome.get(key)
        if found is None:
            found = self._by_outcome[key] = {"agui.run.outcome": outcome, "agui.side": side}
        return found

    def clip(self, value: Any) -> str:
        """``value`` as text (JSON unless it is a string), cut to ``max_content_length``."""
        text = (
            value
            if isinstance(value, str)
            else json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        )
        return text[: self.max_content_length]

    def _park(self, key: tuple[str, str, str], span: Span) -> None:
        """Keep a frontend tool's span open until a later run brings its result."""
        if self.max_pending_tools == 0:
            span.set_attribute("agui.tool.unanswered", True)
            span.end()
            return
        with self._lock:
            self._pending[key] = span
            evicted = []
            while len(self._pending) > self.max_pending_tools:
                evicted.append(self._pending.popitem(last=False)[1])
        for old in evicted:
            old.set_attribute("agui.tool.unanswered", True)
            old.end()

    def shutdown(self) -> None:
        """End every frontend tool span still waiting (marked ``agui.tool.unanswered``),
        so an exporter flushed after it sees them."""
        with self._lock:
            waiting = list(self._pending.values())
            self._pending.clear()
        for span in waiting:
            span.set_attribute("agui.tool.unanswered", True)
            span.end()


_W3C: Final = TraceContextTextMapPropagator()
"""``RUN_STARTED.metadata`` carries a W3C ``traceparent`` whatever propagator the process
configured for its headers."""

_KINDS: Final = {"server": SpanKind.SERVER, "client": SpanKind.CLIENT, "proxy": SpanKind.SERVER}

_SIDE_ATTRIBUTES: Final = {side: {"agui.side": side} for side in _KINDS}
"""``agui.run.time_to_first_event``'s attributes, one mapping per side."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aguikit")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


class _Totals:
    """
    The cumulative counts behind ``agui.runs``, ``agui.events`` and ``agui.findings`` for
    one meter provider, which its SDK reads when it collects (asynchronous counters).

    A run adds its counts here once, when it ends: a dictionary update under a lock.  A
    synchronous counter would instead cost the SDK an attribute clean-up, a sort, a hash
    and a lock per event type of every run (as much as a short span each: a run's dozen
    event types cost more than its spans on a run of a hundred events).  What is exported
    is the same monotonic cumulative sum, by the same attributes.

    One per meter provider, shared by every :class:`Telemetry` that records into it: the
    SDK keeps the callbacks of the first asynchronous instrument registered under a name
    and silently drops a second's, so one set of counters per provider is the only way
    two ``Telemetry`` objects' counts both reach it.
    """

    __slots__ = ("_lock", "events", "findings", "runs")

    def __init__(self, meter: metrics.Meter) -> None:
        self._lock = threading.Lock()
        self.runs: dict[tuple[str, ...], int] = {}
        self.events: dict[tuple[str, ...], int] = {}
        self.findings: dict[tuple[str, ...], int] = {}
        for name, totals, keys, unit, description in (
            (
                "agui.runs",
                self.runs,
                ("agui.run.outcome", "agui.side"),
                "{run}",
                "AG-UI runs ended, by outcome and side",
            ),
            (
                "agui.events",
                self.events,
                ("agui.event.type", "agui.side"),
                "{event}",
                "AG-UI events, by type and side",
            ),
            (
                "agui.findings",
                self.findings,
                ("agui.rule.id", "agui.rule.severity", "agui.side"),
                "{finding}",
                "Protocol findings and repairs, by rule",
            ),
        ):
            meter.create_observable_counter(
                name, [self._reader(totals, keys)], unit=unit, description=description
            )

    def _reader(
        self, totals: dict[tuple[str, ...], int], keys: tuple[str, ...]
    ) -> Callable[[metrics.CallbackOptions], list[metrics.Observation]]:
        def read(options: metrics.CallbackOptions) -> list[metrics.Observation]:
            with self._lock:
                found = list(totals.items())
            return [
                metrics.Observation(count, dict(zip(keys, key, strict=True)))
                for key, count in found
            ]

        return read

    def run_ended(self, outcome: str, side: str, counts: Mapping[str, int]) -> None:
        """One run ended with ``outcome``, having seen ``counts`` events by type."""
        with self._lock:
            runs, events = self.runs, self.events
            key: tuple[str, ...] = (outcome, side)
            runs[key] = runs.get(key, 0) + 1
            for kind, count in counts.items():
                key = (kind, side)
                events[key] = events.get(key, 0) + count

    def found(self, rule_id: str, severity: str, side: str) -> None:
        """One finding (or repair) of rule ``rule_id``."""
        key = (rule_id, severity, side)
        with self._lock:
            self.findings[key] = self.findings.get(key, 0) + 1


_TOTALS: Final[weakref.WeakKeyDictionary[Any, _Totals]] = weakref.WeakKeyDictionary()
_STRONG_TOTALS: Final[dict[int, tuple[Any, _Totals]]] = {}
"""For a meter provider that takes no weak reference: kept with its provider, for good."""
_TOTALS_LOCK: Final = threading.Lock()


def _totals_of(provider: Any) -> _Totals:
    """The counters of ``provider``, registered with it on first use (see :class:`_Totals`)."""
    with _TOTALS_LOCK:
        try:
            found = _TOTALS.get(provider)
        except TypeError:  # no weak reference to it
            kept = _STRONG_TOTALS.get(id(provider))
            if kept is None:
                kept = _STRONG_TOTALS[id(provider)] = (
                    provider,
                    _Totals(metrics.get_meter(SCOPE, _version(), provider)),
                )
            return kept[1]
        if found is None:
            found = _TOTALS[provider] = _Totals(metrics.get_meter(SCOPE, _version(), provider))
        return found


def _input_fields(run_input: Any) -> tuple[str, str, str | None]:
    """The thread id, run id and parent run id of a run input (typed or its wire dict)."""
    if isinstance(run_input, Mapping):
        return (
            str(run_input.get("threadId", "")),
            str(run_input.get("runId", "")),
            run_input.get("parentRunId"),
        )
    return run_input.thread_id, run_input.run_id, run_input.parent_run_id


def _answered(run_input: Any) -> dict[str, Any]:
    """Each tool result the input's messages carry, by call id: read only while some
    frontend tool span waits, so a long conversation costs a run nothing otherwise."""
    if isinstance(run_input, Mapping):
        return {
            m["toolCallId"]: m.get("content")
            for m in run_input.get("messages") or ()
            if isinstance(m, Mapping) and m.get("role") == "tool" and "toolCallId" in m
        }
    return {
        m.tool_call_id: m.content
        for m in run_input.messages or ()
        if getattr(m, "role", None) == "tool"
    }


_DEFERRED_SPANS: Final = 32
"""Ended leaf spans (reasoning blocks, tool calls) a run holds before handing them to the
SDK together; the rest go at the run's end."""


class _Leaf:
    """
    A reasoning block's or a tool call's span, which has no child: what it will be (name,
    parent context, attributes) and when it started and ended, given to the SDK once it
    ended, with those times, among others (see :meth:`ObservedRun._flush`).
    """

    __slots__ = ("attributes", "context", "end", "name", "start")

    def __init__(self, name: str, context: Any, attributes: dict[str, Any]) -> None:
        self.name = name
        self.context = context
        self.attributes = attributes
        self.start = time.time_ns()
        self.end = 0

    def span(self, tracer: trace.Tracer) -> Span:
        """The SDK's span for it, started at its start time (and not ended)."""
        return tracer.start_span(
            self.name, context=self.context, attributes=self.attributes, start_time=self.start
        )


class _Tool:
    __slots__ = ("args", "leaf", "owner")

    def __init__(self, leaf: _Leaf, owner: str | None) -> None:
        self.leaf = leaf
        self.owner = owner
        self.args: list[str] = []


class ObservedRun:
    """
    One run's spans and counts (see :mod:`aguikit.otel`), built by :meth:`Telemetry.observe`
    and told the run's events in order: what the writer and the clients do through
    :mod:`aguikit._observe`, and what a proxy does for each exchange it relays.
    """

    __slots__ = (
        "_context",
        "_counts",
        "_done",
        "_first",
        "_handlers",
        "_open",
        "_owners",
        "_protocol",
        "_reasoning",
        "_repeats",
        "_same",
        "_started",
        "_steps",
        "_texts",
        "_tools",
        "ended",
        "recording",
        "run_id",
        "side",
        "span",
        "telemetry",
        "thread_id",
    )

    def __init__(
        self, telemetry: Telemetry, span: Span, side: str, thread_id: str, run_id: str
    ) -> None:
        self.telemetry = telemetry
        self.run_id = run_id
        self.span = span
        self.side = side
        self.thread_id = thread_id
        self.recording = span.is_recording()
        self._context = trace.set_span_in_context(span)
        self._protocol: str | None = None
        self.ended = False
        self._started = time.perf_counter()
        self._first: float | None = None
        self._handlers = (
            (_HANDLERS if telemetry.capture_content else _SHAPING) if self.recording else _ENDING
        )
        self._counts: dict[str, int] = {}
        self._same = ""
        """The kind of the last event when no handler takes it: the next event of that kind
        is only counted, in ``_repeats``, not yet in ``_counts``."""
        self._repeats = 0
        self._owners: dict[str | None, Span] = {None: span}
        self._steps: dict[tuple[str | None, str], Span] = {}
        self._open: dict[str | None, list[Span]] = {}
        self._tools: dict[str, _Tool] = {}
        self._reasoning: dict[str, _Leaf] = {}
        self._done: list[_Leaf] = []
        """Leaf spans that ended and are not yet the SDK's."""
        self._texts: dict[str, list[str]] = {}

    # -- the seam's calls ------------------------------------------------------------------

    def event(self, event: Any) -> None:
        """One typed event, after chunk expansion, in the order it was sent or delivered."""
        kind = event.type
        if kind == self._same:
            # Most events are the deltas of a message, a reasoning block or a tool call's
            # arguments, each kind in a row, and no handler takes them: one comparison
            # and one increment each, the dictionary updated when the kind changes.
            self._repeats += 1
            return
        counts = self._tally()
        if kind in counts:
            counts[kind] += 1
        else:  # the first event after RUN_STARTED is necessarily a kind not seen yet
            counts[kind] = 1
            if self._first is None and kind != "RUN_STARTED":
                self._first = time.perf_counter()
        handler = self._handlers.get(kind)
        if handler is None:
            self._same = kind
            return
        self._same = ""
        if not self.ended:
            try:
                handler(self, event)
            except Exception:  # telemetry must never fail the run it observes
                LOGGER.exception("aguikit.otel could not record %s; the run goes on", kind)

    def _tally(self) -> dict[str, int]:
        """The run's counts by event type, with the repeats of the last kind added."""
        counts = self._counts
        if self._repeats:
            counts[self._same] += self._repeats
            self._repeats = 0
        return counts

    def warning(self, code: str, index: int | None) -> None:
        """A finding (or a repair, ``producer-repaired``): a span event and a count."""
        rule = RULES_BY_SYMBOL.get(code)
        rule_id = rule.id if rule is not None else code
        severity = str(rule.severity) if rule is not None else "warning"
        totals = self.telemetry._counters()
        if totals is not None:
            totals.found(rule_id, severity, self.side)
        if self.recording and not self.ended:
            attributes: dict[str, Any] = {
                "agui.rule.id": rule_id,
                "agui.rule.symbol": code,
                "agui.rule.severity": severity,
            }
            if index is not None:
                attributes["agui.event.index"] = index
            name = "agui.repair" if code == "producer-repaired" else "agui.finding"
            self.span.add_event(name, attributes)

    def failed(self, error: BaseException) -> None:
        """The run failed with ``error``: its type and rule on the span, never its text
        (an exception's text is the server's, see ``docs/DESIGN.md``)."""
        if self.ended or not self.recording:
            return
        rule = getattr(error, "rule", None)
        attributes: dict[str, Any] = {"exception.type": type(error).__qualname__}
        if isinstance(rule, str):
            attributes["agui.rule.id"] = rule
        self.span.add_event("exception", attributes)
        self.span.set_status(Status(StatusCode.ERROR))
        self.span.set_attribute(
            ERROR_TYPE, rule if isinstance(rule, str) else type(error).__qualname__
        )

    def end(self) -> None:
        """The run is over for this side: a run whose terminal event was never seen ends
        ``truncated`` (the client left, or the stream broke)."""
        if not self.ended:
            self._finish("truncated")

    def metadata(self) -> dict[str, Any] | None:
        """``{"aguikit.otel": {"traceparent", "traceId", "spanId"}}`` for ``RUN_STARTED``."""
        found = self.span.get_span_context()
        if not found.is_valid:
            return None
        # One formatting of the context's integers; the ids are slices of it.
        traceparent = f"00-{found.trace_id:032x}-{found.span_id:016x}-{found.trace_flags:02x}"
        return {
            METADATA_KEY: {
                "traceparent": traceparent,
                "traceId": traceparent[3:35],
                "spanId": traceparent[36:52],
            }
        }

    def mark(self, name: str) -> None:
        """A timestamped span event ``name`` on the run span (a proxy's upstream response,
        first byte...): the exchange's timing, beside the events'."""
        if self.recording and not self.ended:
            self.span.add_event(name, {"agui.event.index": sum(self._tally().values())})

    def headers(self) -> dict[str, str]:
        """``traceparent`` (and ``tracestate``, baggage) for the run's request."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=self._context)
        return carrier

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make the run span current, so the handler's own spans (an LLM call) nest in it."""
        token = otel_context.attach(self._context)
        try:
            yield
        finally:
            otel_context.detach(token)

    # -- spans ------------------------------------------------------------------------------

    def _child(self, name: str, owner: str | None, attributes: dict[str, Any]) -> Span:
        """A span under ``owner`` (the run, or a subagent): under its innermost open step."""
        steps = self._open.get(owner)
        if steps:
            context = trace.set_span_in_context(steps[-1])
        elif owner is None:
            context = self._context  # the common case: a child of the run, context made once
        else:
            context = trace.set_span_in_context(self._owners.get(owner, self.span))
        return self.telemetry._tracer.start_span(name, context=context, attributes=attributes)

    def _leaf(self, name: str, owner: str | None, attributes: dict[str, Any]) -> _Leaf:
        """A leaf span under ``owner``, where :meth:`_child` would start it, started now."""
        steps = self._open.get(owner)
        if steps:
            context = trace.set_span_in_context(steps[-1])
        elif owner is None:
            context = self._context
        else:
            context = trace.set_span_in_context(self._owners.get(owner, self.span))
        return _Leaf(name, context, attributes)

    def _ended(self, leaf: _Leaf) -> None:
        """``leaf`` ended now: the SDK gets it with the next :data:`_DEFERRED_SPANS`."""
        leaf.end = time.time_ns()
        done = self._done
        done.append(leaf)
        if len(done) >= _DEFERRED_SPANS:
            self._flush()

    def _flush(self) -> None:
        """
        Give the SDK the leaf spans that ended, each started and ended at its own times,
        one after the other.  The same spans as when each is started at its start event
        and ended at its end, at about half the process time once a run has a few: the
        SDK's span code, run back to back, stays in the processor's caches, where run
        between two events of the writer it does not (``bench/bench_otel.py``).  Span
        processors see them when the run ends, or when ``_DEFERRED_SPANS`` are waiting.
        """
        tracer = self.telemetry._tracer
        done, self._done = self._done, []
        for leaf in done:
            tracer.start_span(
                leaf.name, context=leaf.context, attributes=leaf.attributes, start_time=leaf.start
            ).end(leaf.end)

    def _note(self, name: str, owner: str | None, attributes: dict[str, Any]) -> None:
        attributes["agui.event.index"] = sum(self._tally().values()) - 1
        self._owners.get(owner, self.span).add_event(name, attributes)

    def _finish(
        self,
        outcome: str,
        usage: Sequence[Any] | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        """
        End the run: its open children, then its span with ``attributes`` (the terminal
        event's), the protocol version and the outcome set in one call (one lock and one
        clean-up in the SDK, not one per attribute), then its metrics.
        """
        self.ended = True
        now = time.perf_counter()
        span = self.span
        telemetry = self.telemetry
        if self.recording:
            for reasoning in self._reasoning.values():
                self._ended(reasoning)
            self._flush()
            for tool_call_id, tool in self._tools.items():
                parked = tool.leaf.span(telemetry._tracer)
                telemetry._park((self.side, self.thread_id, tool_call_id), parked)
            for step in self._steps.values():
                step.end()
            for owner, sub in self._owners.items():
                if owner is not None:
                    sub.end()
            final = {} if attributes is None else attributes
            if self._protocol is not None:
                final["agui.protocol.version"] = self._protocol
            final["agui.run.outcome"] = outcome
            span.set_attributes(final)
            span.end()
        totals = telemetry._counters()
        if totals is None:
            return
        side = self.side
        totals.run_ended(outcome, side, self._tally())
        telemetry.duration.record(now - self._started, telemetry._outcome_attributes(outcome, side))
        if self._first is not None:
            telemetry.first_event.record(self._first - self._started, _SIDE_ATTRIBUTES[side])
        if usage:
            self._record_usage(usage)

    def _record_usage(self, usage: Sequence[Any]) -> None:
        """
        ``gen_ai.client.token.usage``: each entry's input and output counts, by token type,
        provider and model, as the GenAI conventions record one model call's.  A count the
        entry does not report is no data point (absent is not zero); cached, cache-write
        and reasoning counts are parts of these two, so they add no point of their own.
        """
        telemetry = self.telemetry
        for entry in usage:
            attributes: dict[str, Any] = {
                GEN_AI_OPERATION_NAME: INVOKE_AGENT,
                "agui.side": self.side,
            }
            if telemetry.agent_name:
                attributes[GEN_AI_AGENT_NAME] = telemetry.agent_name
            if entry.provider is not None:
                attributes[GEN_AI_PROVIDER_NAME] = entry.provider
            if entry.model is not None:
                attributes[GEN_AI_RESPONSE_MODEL] = entry.model
            for token_type, count in (
                ("input", entry.input_tokens),
                ("output", entry.output_tokens),
            ):
                if isinstance(count, int):
                    telemetry.token_usage.record(
                        count, {**attributes, GEN_AI_TOKEN_TYPE: token_type}
                    )

    # -- one handler per event type that shapes the tree ---------------------------------

    def _run_started(self, event: Any) -> None:
        self._protocol = event.protocol_version  # set with the outcome, in one call
        if self.side == "proxy":
            self._link_upstream(event)

    def _link_upstream(self, event: Any) -> None:
        """
        A proxy's exchange span links the agent's run span that the ``RUN_STARTED`` it
        relays names (``metadata["aguikit.otel"]["traceparent"]``, an aguikit agent's), so
        the exchange reaches both sides: its parent is the caller's span (the request's
        ``traceparent``), its link the agent's run, whether or not the proxy forwarded
        its own context upstream.
        """
        metadata = event.metadata
        carried = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
        traceparent = carried.get("traceparent") if isinstance(carried, Mapping) else None
        if not isinstance(traceparent, str):
            return
        upstream = trace.get_current_span(
            _W3C.extract({"traceparent": traceparent})
        ).get_span_context()
        if upstream.is_valid:
            self.span.add_link(upstream, {"agui.run.id": event.run_id})

    def _run_finished(self, event: Any) -> None:
        if event.run_id != self.run_id:  # an earlier run the stream replays first
            return
        outcome = _outcome(event)
        attributes = usage_attributes(event.usage)
        if outcome == "interrupt":
            for interrupt in event.outcome.interrupts:
                found: dict[str, Any] = {"agui.interrupt.id": interrupt.id}
                found["agui.interrupt.reason"] = interrupt.reason
                if interrupt.tool_call_id is not None:
                    found[GEN_AI_TOOL_CALL_ID] = interrupt.tool_call_id
                if interrupt.subagent_run_id is not None:
                    found["agui.subagent.run_id"] = interrupt.subagent_run_id
                self._note("agui.interrupt", None, found)
        if self.telemetry.capture_content and event.result is not None:
            attributes["agui.run.result"] = self.telemetry.clip(event.result)
        self._finish(outcome, event.usage, attributes)

    def _run_error(self, event: Any) -> None:
        attributes = usage_attributes(event.usage)
        attributes[ERROR_TYPE] = event.code or "RUN_ERROR"
        self.span.set_status(Status(StatusCode.ERROR, event.code or "RUN_ERROR"))
        self._finish("error", event.usage, attributes)

    def _step_started(self, event: Any) -> None:
        owner = event.subagent_run_id
        step = self._child(f"step {event.step_name}", owner, {"agui.step.name": event.step_name})
        self._steps[(owner, event.step_name)] = step
        self._open.setdefault(owner, []).append(step)

    def _step_finished(self, event: Any) -> None:
        owner = event.subagent_run_id
        step = self._steps.pop((owner, event.step_name), None)
        if step is not None:
            self._open[owner].remove(step)
            step.end()

    def _tool_call_start(self, event: Any) -> None:
        owner = event.subagent_run_id
        leaf = self._leaf(
            f"{EXECUTE_TOOL} {event.tool_call_name}",
            owner,
            {
                GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
                GEN_AI_TOOL_NAME: event.tool_call_name,
                GEN_AI_TOOL_CALL_ID: event.tool_call_id,
            },
        )
        self._tools[event.tool_call_id] = _Tool(leaf, owner)

    def _tool_call_args(self, event: Any) -> None:
        if self.telemetry.capture_content:
            tool = self._tools.get(event.tool_call_id)
            if tool is not None:
                tool.args.append(event.delta)

    def _tool_call_end(self, event: Any) -> None:
        tool = self._tools.get(event.tool_call_id)
        if tool is not None and self.telemetry.capture_content:
            tool.leaf.attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = self.telemetry.clip(
                "".join(tool.args)
            )

    def _tool_call_result(self, event: Any) -> None:
        tool = self._tools.pop(event.tool_call_id, None)
        telemetry = self.telemetry
        if tool is not None:
            if telemetry.capture_content:
                tool.leaf.attributes[GEN_AI_TOOL_CALL_RESULT] = telemetry.clip(event.content)
            self._ended(tool.leaf)
            return
        # a call an earlier run asked for, answered by this run's own event
        with telemetry._lock:
            key = (self.side, self.thread_id, event.tool_call_id)
            span = telemetry._pending.pop(key, None)
        if span is None:
            return
        span.add_link(self.span.get_span_context())
        if telemetry.capture_content:
            span.set_attribute(GEN_AI_TOOL_CALL_RESULT, telemetry.clip(event.content))
        span.end()

    def _reasoning_start(self, event: Any) -> None:
        self._reasoning[event.message_id] = self._leaf(
            "reasoning", event.subagent_run_id, {"agui.message.id": event.message_id}
        )

    def _reasoning_end(self, event: Any) -> None:
        leaf = self._reasoning.pop(event.message_id, None)
        if leaf is not None:
            self._ended(leaf)

    def _subagent_started(self, event: Any) -> None:
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: INVOKE_AGENT,
            GEN_AI_AGENT_NAME: event.name,
            "agui.subagent.run_id": event.subagent_run_id,
        }
        if event.parent_tool_call_id is not None:
            attributes[GEN_AI_TOOL_CALL_ID] = event.parent_tool_call_id
        self._owners[event.subagent_run_id] = self._child(
            f"{INVOKE_AGENT} {event.name}", event.parent_subagent_run_id, attributes
        )

    def _subagent_finished(self, event: Any) -> None:
        span = self._owners.pop(event.subagent_run_id, None)
        if span is not None:
            outcome = event.outcome.type if event.outcome is not None else "success"
            span.set_attribute("agui.subagent.outcome", outcome)
            span.end()

    def _subagent_error(self, event: Any) -> None:
        span = self._owners.pop(event.subagent_run_id, None)
        if span is not None:
            span.set_attribute(ERROR_TYPE, event.code or "SUBAGENT_ERROR")
            span.set_status(Status(StatusCode.ERROR, event.code or "SUBAGENT_ERROR"))
            span.end()

    def _state_snapshot(self, event: Any) -> None:
        found: dict[str, Any] = {}
        if self.telemetry.capture_content:
            found["agui.state"] = self.telemetry.clip(event.snapshot)
        self._note("agui.state_snapshot", event.subagent_run_id, found)

    def _text_start(self, event: Any) -> None:
        if self.telemetry.capture_content:
            self._texts[event.message_id] = []

    def _text_content(self, event: Any) -> None:
        parts = self._texts.get(event.message_id)
        if parts is not None:
            parts.append(event.delta)

    def _text_end(self, event: Any) -> None:
        found: dict[str, Any] = {"agui.message.id": event.message_id}
        found["agui.message.content"] = self.telemetry.clip(
            "".join(self._texts.pop(event.message_id, ()))
        )
        self._note("agui.text_message", event.subagent_run_id, found)


def _outcome(event: Any) -> str:
    """A ``RUN_FINISHED``'s outcome: an absent one is success (``events/lifecycle.mdx``)."""
    outcome = event.outcome
    return "success" if outcome is None else str(outcome.type)


_HANDLERS: Final = {
    "RUN_STARTED": ObservedRun._run_started,
    "RUN_FINISHED": ObservedRun._run_finished,
    "RUN_ERROR": ObservedRun._run_error,
    "STEP_STARTED": ObservedRun._step_started,
    "STEP_FINISHED": ObservedRun._step_finished,
    "TOOL_CALL_START": ObservedRun._tool_call_start,
    "TOOL_CALL_ARGS": ObservedRun._tool_call_args,
    "TOOL_CALL_END": ObservedRun._tool_call_end,
    "TOOL_CALL_RESULT": ObservedRun._tool_call_result,
    "REASONING_START": ObservedRun._reasoning_start,
    "REASONING_END": ObservedRun._reasoning_end,
    "SUBAGENT_STARTED": ObservedRun._subagent_started,
    "SUBAGENT_FINISHED": ObservedRun._subagent_finished,
    "SUBAGENT_ERROR": ObservedRun._subagent_error,
    "STATE_SNAPSHOT": ObservedRun._state_snapshot,
    "TEXT_MESSAGE_START": ObservedRun._text_start,
    "TEXT_MESSAGE_CONTENT": ObservedRun._text_content,
    "TEXT_MESSAGE_END": ObservedRun._text_end,
}
"""The events that shape the tree; every other event is only counted."""

_SHAPING: Final = {
    kind: handler
    for kind, handler in _HANDLERS.items()
    if kind
    not in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_ARGS")
}
"""The same without the handlers that only collect or report content: the table when not
capturing (a text message is then no span event at all: each costs the SDK as much as a
short span, and without its text it would say only that a message ended)."""

_ENDING: Final = {
    "RUN_FINISHED": lambda observer, event: (
        observer._finish(_outcome(event), event.usage) if event.run_id == observer.run_id else None
    ),
    "RUN_ERROR": lambda observer, event: observer._finish("error", event.usage),
}
"""The table of a run no tracer records (metrics only): its end is all that matters."""


class _ApiOnlyInstrumentor:
    """
    ``opentelemetry-instrumentation``'s ``BaseInstrumentor`` as :class:`AguikitInstrumentor`
    uses it, for a process without that package (``aguikit[otel]`` needs only the API): one
    instance per class, ``instrument()`` once until ``uninstrument()``, the same options
    accepted.  With the package installed the real base is used instead, so
    ``opentelemetry-instrument`` and its dependency checks see an ordinary instrumentor.
    """

    _instance: Any = None
    _is_instrumented_by_opentelemetry = False

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    @property
    def is_instrumented_by_opentelemetry(self) -> bool:
        """Whether :meth:`instrument` is in effect."""
        return self._is_instrumented_by_opentelemetry

    def instrumentation_dependencies(self) -> Collection[str]:
        raise NotImplementedError

    def _instrument(self, **options: Any) -> Any:
        raise NotImplementedError

    def _uninstrument(self, **options: Any) -> Any:
        raise NotImplementedError

    def instrument(self, **options: Any) -> Any:
        """Instrument once (a second call warns and returns ``None``); the base's own
        options (``skip_dep_check``, ``raise_exception_on_conflict``) are accepted and
        have nothing to check."""
        if self._is_instrumented_by_opentelemetry:
            LOGGER.warning("Attempting to instrument while already instrumented")
            return None
        options.pop("skip_dep_check", None)
        options.pop("raise_exception_on_conflict", None)
        result = self._instrument(**options)
        self._is_instrumented_by_opentelemetry = True
        return result

    def uninstrument(self, **options: Any) -> Any:
        """Undo :meth:`instrument` (a warning when it is not in effect)."""
        if not self._is_instrumented_by_opentelemetry:
            LOGGER.warning("Attempting to uninstrument while already uninstrumented")
            return None
        result = self._uninstrument(**options)
        self._is_instrumented_by_opentelemetry = False
        return result


if TYPE_CHECKING:
    _Instrumentor = _ApiOnlyInstrumentor
else:
    try:
        from opentelemetry.instrumentation.instrumentor import BaseInstrumentor as _Instrumentor
    except ImportError:  # aguikit[otel] alone: the API, not the instrumentation package
        _Instrumentor = _ApiOnlyInstrumentor


class AguikitInstrumentor(_Instrumentor):
    """
    Observe every run of the process, in the ``opentelemetry-instrumentation`` style:
    ``AguikitInstrumentor().instrument()`` makes every :class:`~aguikit.server.RunWriter`
    (so every endpoint), :class:`~aguikit.AgentClient` and :class:`~aguikit.Agent` built
    without a ``telemetry=`` argument use one :class:`Telemetry`; ``uninstrument()``
    stops it.  The keyword arguments of ``instrument()`` are :class:`Telemetry`'s.

    With ``opentelemetry-instrumentation`` installed (``pip install
    'aguikit[otel-instrument]'``) it is a ``BaseInstrumentor``, registered under the
    ``opentelemetry_instrumentor`` entry point ``aguikit``, so ``opentelemetry-instrument
    python app.py`` switches it on with every other instrumentation (and
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=aguikit`` leaves it off).  Without it the
    same class works on the API alone.  Either way it is one instance per process, and a
    second ``instrument()`` before ``uninstrument()`` warns and changes nothing.

    .. versionchanged:: 0.4.0
       A ``BaseInstrumentor`` when ``opentelemetry-instrumentation`` is installed, and an
       ``opentelemetry_instrumentor`` entry point.
    """

    _telemetry: Telemetry | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        """
        The packages that must be installed for :meth:`instrument` to act: none to check,
        since what this instruments is aguikit, which ships it (naming ``aguikit`` would
        only make a source checkout without package metadata refuse to instrument).
        """
        return ()

    def _instrument(self, **options: Any) -> Telemetry:
        """Install a :class:`Telemetry` built from ``options`` for every run; returns it."""
        telemetry = Telemetry(**options)
        AguikitInstrumentor._telemetry = telemetry
        _observe.install(telemetry)
        return telemetry

    def _uninstrument(self, **options: Any) -> None:
        """Stop observing runs that were not given their own ``telemetry=``, ending the
        frontend tool spans still waiting."""
        if AguikitInstrumentor._telemetry is not None:
            AguikitInstrumentor._telemetry.shutdown()
        AguikitInstrumentor._telemetry = None
        _observe.uninstall()
