"""
The producer's side of a run: :class:`RunWriter` emits an AG-UI stream that is checked as
it is written.

The same producer bugs recur across the ecosystem: a tool call result while the call is
still streaming, ``RUN_FINISHED`` with a message left open, a state delta computed against
something the client never held, a server that dies mid-run without a ``RUN_ERROR``.
aguikit already has the engine that knows every rule, so the writer puts it on the
producer's side: every event goes through the same stages a receiver runs, in the same
order, before a byte is written::

    typed event / wire dict / ag_ui.core event
        ─► strict schema check (aguikit.validate / aguikit.wire.parse_event)
        ─► chunk expansion (aguikit.chunks.ChunkNormalizer)
        ─► ordering and attribution (aguikit.verify.Verifier)
        ─► the sink (the HTTP endpoint encodes it as an SSE frame or a JSONL line)

Nothing here restates a rule: the verifier decides, and the writer only chooses what to do
with a violation (its *mode*):

``strict`` (the default)
    A producer bug raises :class:`~aguikit.errors.ProtocolError` at the offending call,
    naming the rule; the run then ends with ``RUN_ERROR`` whose ``code`` is that rule.
``repair``
    When the verifier refuses an event because something is still open (``RUN_FINISHED``
    with an open message, a result for a call still streaming, a start for an id already
    open), the writer closes it first, then emits the event.  Each repair is a
    :class:`~aguikit.session.SessionWarning` with code ``producer-repaired``
    (``AGUI-W021``) in :attr:`RunWriter.warnings` and a log record on ``aguikit.server``.
    Violations that closing cannot fix are raised as in strict mode.
``audit``
    Sends every event the handler hands over as given, a dict the schema refuses
    included, and records each violation (a warning and a log record naming the rule),
    for measuring a producer before enforcing anything.  It never ends a run on the
    handler's behalf: only the run's terminal event does.

Every log record of a repair or a violation starts with the rule's id and symbol
(``AGUI-W021 producer-repaired``), in every mode, so a log search finds what
``aguikit rules`` explains.

Whatever the mode, the run's lifecycle is the writer's: it sends ``RUN_STARTED`` (a
handler that sends its own first, as code written for the official SDK does, has sent
the start, and a second raises), and the first ``RUN_FINISHED`` or ``RUN_ERROR`` sent,
the writer's or the handler's, ends the run: the writer adds no terminal event of its
own after it, and any later event raises at its call (``AGUI-V003``/``AGUI-V004``, "the
run already ended at event N"), except a late ``RUN_ERROR`` after ``RUN_FINISHED``, which the
specification lets a producer send once for a failure that surfaced after the run reported
success.

An exception that ends a run reaches the client as a ``RUN_ERROR`` with a generic
message and a stable code (the broken rule's id for aguikit's own errors, else
``AGUI-E020``), never as its text: exceptions carry URLs with keys, SQL, paths and
provider payloads.  The traceback goes to the ``aguikit.server`` log with the run's
ids; ``on_error`` maps an exception to what is sent, ``expose_errors`` sends its text
(for development).

The typed helpers make the legal order the easy one: every ``async with`` closes what it
opened, also when the body raises.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, ClassVar, Final, Literal

import attrs
import jsonpatch

from .. import _observe
from .._generated.models import Event, RunAgentInput, StateDeltaEvent, StateSnapshotEvent
from .._generated.registry import EVENT_CLASSES, PROTOCOL_VERSION
from ..catalogue import RULES_BY_ID, RULES_BY_SYMBOL, Stage, render_message
from ..chunks import ChunkNormalizer
from ..errors import AguiError, PatchError, ProtocolError, SchemaValidationError, WireFormatError
from ..interop import is_sdk_model, sdk_wire
from ..jsonio import dumps_wire, find_lone_surrogate, utf8
from ..limits import MAX_OPEN_ENTITIES
from ..patch import UNSET, apply_patch, copy_json
from ..receiver import compare_protocol_versions, omit_newer_members
from ..rules import Family
from ..session import SessionWarning
from ..validate import fast_check, validate_event
from ..verify import Verifier
from ..wire import parse_event, parse_run_agent_input, to_wire

__all__ = [
    "HANDLER_FAILED",
    "Activity",
    "ErrorReport",
    "EventWriter",
    "Mode",
    "ReasoningBlock",
    "ReasoningMessage",
    "RunWriter",
    "Sink",
    "SubagentWriter",
    "TextMessage",
    "ToolCall",
]

LOGGER: Final = logging.getLogger("aguikit.server")

Mode = Literal["strict", "repair", "audit"]
"""What a writer does with a violation: raise it, close what blocks the event, or log it."""

Sink = Callable[[Mapping[str, Any]], Awaitable[None]]
"""Receives each checked event as its wire dict, in order; awaiting it is backpressure."""

REPAIR_RULE: Final = "AGUI-W021"
"""The catalogue row every repair is reported under."""

HANDLER_FAILED: Final = "AGUI-E020"
"""The ``RUN_ERROR`` code of a run (or subagent) an exception ended that reports no rule
of aguikit's: the stable code a client can act on, in place of the exception's class."""

UNWRITABLE_EVENT: Final = "AGUI-E025"
"""The ``RUN_ERROR`` code of a run whose handler emitted an event no connection can write
(a lone surrogate in a string): refused at the ``emit``, never logged, so a run's log
holds only events every reader can be sent."""

_CHECKER: Final = json.JSONEncoder(ensure_ascii=False, check_circular=False)


def _writable(wire: Mapping[str, Any], kind: Any) -> None:
    """Refuse an event UTF-8 cannot carry before any reader (or log) gets it."""
    try:
        _CHECKER.encode(wire).encode("utf-8")
    except UnicodeEncodeError:
        where, char = find_lone_surrogate(wire) or ("", "?")
        error = WireFormatError(
            kind if isinstance(kind, str) else "Event",
            where,
            f"a lone surrogate {char!r} cannot be written as UTF-8: no connection could "
            "send this event",
        )
        error.rule = UNWRITABLE_EVENT
        raise error from None
    except (TypeError, ValueError):
        return  # not JSON at all: the schema check and the encoder say so, located


ErrorReport = Callable[[BaseException], "tuple[str, str] | None"]
"""``on_error(exc) -> (message, code) | None``: what a ``RUN_ERROR`` (or
``SUBAGENT_ERROR``) says for an exception; ``None`` sends the default."""

_TERMINAL: Final = {"RUN_FINISHED": "AGUI-V003", "RUN_ERROR": "AGUI-V004"}
"""The events that end a run, and the rule an event sent after each breaks."""

_CLOSERS: Final[Mapping[Family, tuple[str, str | None]]] = {
    Family.TEXT_MESSAGE: ("TEXT_MESSAGE_END", "messageId"),
    Family.TOOL_CALL: ("TOOL_CALL_END", "toolCallId"),
    Family.REASONING_MESSAGE: ("REASONING_MESSAGE_END", "messageId"),
    Family.REASONING_SPAN: ("REASONING_END", "messageId"),
    Family.THINKING_MESSAGE: ("THINKING_TEXT_MESSAGE_END", None),
    Family.THINKING_BLOCK: ("THINKING_END", None),
    Family.STEP: ("STEP_FINISHED", "stepName"),
    Family.SUBAGENT: ("SUBAGENT_FINISHED", "subagentRunId"),
}
"""The event that closes an open entity of each family, and the member naming it."""

REPAIRABLE: Final[Mapping[str, Family | None]] = {
    "AGUI-V005": None,  # RUN_FINISHED with anything open: close everything
    "AGUI-V015": Family.TOOL_CALL,  # a result for a call still streaming
    "AGUI-V036": Family.THINKING_MESSAGE,  # THINKING_END inside a thinking message
    "AGUI-V011": Family.TEXT_MESSAGE,  # a start for an id already open
    "AGUI-V013": Family.TOOL_CALL,
    "AGUI-V021": Family.REASONING_SPAN,
    "AGUI-V023": Family.REASONING_MESSAGE,
    "AGUI-V031": Family.THINKING_BLOCK,
    "AGUI-V033": Family.THINKING_MESSAGE,
    "AGUI-V041": Family.STEP,
}
"""The verifier's rules a close can satisfy, and the family it closes (``None``: all)."""

_NESTED: Final = frozenset({"STEP_FINISHED", "SUBAGENT_FINISHED"})


def _new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:16]}"


def _event_type(item: Any) -> str:
    """The ``type`` an emitted item names, for a message, whatever it is."""
    kind = item.get("type") if isinstance(item, Mapping) else getattr(item, "type", None)
    kind = getattr(kind, "value", kind)  # an enum member (typed and SDK events)
    return kind if isinstance(kind, str) else type(item).__name__


def _spoken(peer_version: str | None) -> str | None:
    """
    The protocol version a run's ``RUN_STARTED`` declares: the one its stream speaks.

    The versioning page: "A producer declares the version *it* speaks on
    ``RUN_STARTED.protocolVersion``: its own, never an echo of the input's", and "An
    implementation of this version MUST send its declaration".  That is this package's
    version, except:

    * for a client declaring an older ``MAJOR.MINOR``, the writer writes the stream down
      to it (members the peer lacks omitted), and the declaration "names what the run's
      stream *speaks*";
    * for a client that declares no version, or a pre-1.0 one (``0.0.57``, named by its
      package version), the peer predates the declaration: the writer already treats it
      as such (every member newer than it omitted), and leaves the declaration out too,
      as the page's own exception does for a consumer facing an old parser (``None``).
    """
    if peer_version is None:
        return None
    verdict = compare_protocol_versions(PROTOCOL_VERSION, peer_version)
    if verdict == "newer":
        return peer_version
    if verdict == "?" and peer_version.startswith("0."):
        return None
    return PROTOCOL_VERSION


class _Stream:
    """One HTTP response's checks, shared by a run's writer and its subagents' writers."""

    __slots__ = (
        "client_state",
        "count",
        "downgrade",
        "ended_at",
        "ended_by",
        "events",
        "expose_errors",
        "fatal",
        "interrupts",
        "mode",
        "normalizer",
        "observer",
        "on_error",
        "peer_version",
        "pending",
        "sink",
        "snapshot_every",
        "snapshot_sent",
        "started",
        "state_updates",
        "verifier",
        "warnings",
    )

    def __init__(
        self,
        *,
        sink: Sink | None,
        mode: Mode,
        thread_id: str,
        snapshot_every: int,
        max_open_entities: int,
        initial_state: Any = UNSET,
        peer_version: str | None = PROTOCOL_VERSION,
        on_error: ErrorReport | None = None,
        expose_errors: bool = False,
    ) -> None:
        if mode not in ("strict", "repair", "audit"):
            raise ValueError(f"mode must be 'strict', 'repair' or 'audit', not {mode!r}")
        self.sink = sink
        self.mode = mode
        self.on_error = on_error
        self.expose_errors = expose_errors
        self.started = False
        """Whether ``RUN_STARTED`` was sent (by the writer, or by hand before it)."""
        self.ended_at: int | None = None
        """The 0-based index of the event that ended the run (``RUN_FINISHED`` or
        ``RUN_ERROR``, whoever sent it); ``None`` while it runs."""
        self.ended_by = ""
        """The type of that event."""
        self.normalizer = ChunkNormalizer(max_open_entities=max_open_entities)
        self.verifier = Verifier(thread_id=thread_id, max_open_entities=max_open_entities)
        self.events: list[Mapping[str, Any]] = []
        self.warnings: list[SessionWarning] = []
        self.count = 0
        self.fatal: AguiError | None = None
        self.client_state: Any = (
            UNSET if initial_state is UNSET or initial_state is None else copy_json(initial_state)
        )
        self.snapshot_sent = False
        self.snapshot_every = snapshot_every
        self.state_updates = 0
        self.interrupts: list[Any] = []
        self.pending: list[Mapping[str, Any]] = []
        # A client that declared an older protocol (or none) gets events without the
        # members its version does not have, rather than warnings for each one.
        self.peer_version = peer_version
        # (omit_newer_members decides what an older, newer or unreadable version lacks.)
        self.downgrade = peer_version != PROTOCOL_VERSION
        self.observer: _observe.RunObserver | None = None
        """Told every event sent and every finding (``aguikit.otel``); ``None``: nobody."""

    # -- checking -------------------------------------------------------------------------

    def typed(self, item: Any, tag: str | None) -> tuple[Event, Mapping[str, Any]]:
        """The typed event and its exact wire dict, schema-checked strictly."""
        if is_sdk_model(item):
            item = sdk_wire(item)
        if isinstance(item, Mapping):
            if tag is not None and "subagentRunId" not in item and _taggable(item.get("type")):
                item = {**item, "subagentRunId": tag}
            return parse_event(item, strict=True), item
        if type(item) not in _EVENT_CLASS_SET:
            hint = (
                " (send the event itself, not its encoded text: the endpoint encodes it)"
                if isinstance(item, str | bytes)
                else ""
            )
            raise TypeError(
                "emit takes an aguikit event, a wire dict or an ag_ui.core event, "
                f"not {type(item).__name__}{hint}"
            )
        if tag is not None and getattr(item, "subagent_run_id", tag) is None:
            wire = {**to_wire(item), "subagentRunId": tag}
            return parse_event(wire, strict=True), wire
        wire = to_wire(item)
        if not fast_check(type(item).__name__, strict=True)(wire):
            validate_event(wire, strict=True)
        return item, wire

    @property
    def live(self) -> bool:
        """Whether events may still be sent: the run neither failed nor ended."""
        return self.fatal is None and self.ended_at is None

    def warn(self, code: str, message: str, index: int | None = None) -> None:
        """Record a repair or a violation: a warning, and a log record that starts with the
        rule's id and symbol (``AGUI-W021 producer-repaired``)."""
        at = self.count if index is None else index
        self.warnings.append(SessionWarning(code, message, at))
        if self.observer is not None:
            self.observer.warning(code, at)
        LOGGER.warning("%s %s (event %s): %s", RULES_BY_SYMBOL[code].id, code, at, message)

    def report(self, exc: BaseException) -> tuple[str, str]:
        """
        The ``(message, code)`` a ``RUN_ERROR`` or ``SUBAGENT_ERROR`` sends for ``exc``:
        ``on_error``'s answer, else a generic message and a stable code (the rule id of
        an aguikit error, else :data:`HANDLER_FAILED`); the exception's text only with
        ``expose_errors``.  A failing or malformed ``on_error`` is logged, never sent.
        """
        if self.on_error is not None:
            try:
                mapped = self.on_error(exc)
            except Exception:
                LOGGER.exception("on_error raised for %r; the default RUN_ERROR was sent", exc)
                mapped = None
            if mapped is not None:
                if (
                    isinstance(mapped, tuple)
                    and len(mapped) == 2
                    and all(isinstance(part, str) for part in mapped)
                ):
                    return mapped
                LOGGER.error(
                    "on_error returned %r, not (message, code) or None; the default "
                    "RUN_ERROR was sent",
                    mapped,
                )
        rule_id = exc.rule if isinstance(exc, AguiError) else None
        rule = RULES_BY_ID.get(rule_id) if rule_id is not None else None
        if rule is not None and rule.stage is Stage.PRODUCER:  # the server's own rows
            code, message = rule.id, render_message(rule.id)
        elif rule is not None:
            code, message = rule.id, f"The agent broke rule {rule.id} ({rule.symbol})."
        else:
            code, message = HANDLER_FAILED, render_message(HANDLER_FAILED)
        if self.expose_errors:
            message = str(exc) if isinstance(exc, AguiError) else f"{type(exc).__name__}: {exc}"
        return message, code

    def _closers(self, error: ProtocolError, event: Event) -> list[tuple[dict[str, Any], Any]]:
        """The closing events (and the entity each closes) that satisfy ``error``, if a
        close can: nothing for a rule closing cannot fix."""
        rule = error.rule or ""
        if rule not in REPAIRABLE:
            return []
        family = REPAIRABLE[rule]
        tag = getattr(event, "subagent_run_id", None)
        return self.closers(
            lambda open_family, entity, owner: (
                family is None
                or not (
                    open_family is not family
                    or (error.entity_id is not None and str(entity) != error.entity_id)
                    or (open_family is Family.STEP and owner != tag)
                )
            )
        )

    def closers(
        self, keep: Callable[[Family, Any, Any], bool] = lambda *_: True
    ) -> list[tuple[dict[str, Any], Any]]:
        """The closing events (and the entity each closes) of what is open and ``keep``
        admits, in an order the verifier accepts."""
        found: list[tuple[dict[str, Any], Any]] = []
        for open_family, entity, owner in self.verifier.open_entities():
            if not keep(open_family, entity, owner):
                continue
            event_type, member = _CLOSERS[open_family]
            closer: dict[str, Any] = {"type": event_type}
            if member is not None:
                closer[member] = entity
            if owner is not None and open_family is not Family.SUBAGENT:
                closer["subagentRunId"] = owner
            found.append((closer, entity))
        # Steps and subagents nest: within each, the later-opened closes first, and a
        # subagent's steps close before the subagent.
        flat = [c for c in found if c[0]["type"] not in _NESTED]
        steps = [c for c in found if c[0]["type"] == "STEP_FINISHED"]
        subagents = [c for c in found if c[0]["type"] == "SUBAGENT_FINISHED"]
        return flat + steps[::-1] + subagents[::-1]

    def _verify(self, event: Event) -> None:
        """Verify one expanded event under this stream's mode."""
        try:
            self.verifier.verify(event)
            return
        except ProtocolError as refused:
            if self.mode == "audit":
                self.warn(refused.symbol, refused.message)
                return
            closers = self._closers(refused, event) if self.mode == "repair" else []
            if not closers:
                raise
            error = refused
        for closer, entity in closers:
            self.verifier.verify(parse_event(closer, check=False))
            message = render_message(
                REPAIR_RULE,
                closing=closer["type"],
                entity_id=entity,
                event_type=error.event_type,
                violated=error.rule,
            )
            self.warn(RULES_BY_ID[REPAIR_RULE].symbol, message, self.count + len(self.pending))
            self.pending.append(closer)
        self.verifier.verify(event)

    def _lifecycle(self, item: Any) -> None:
        """Refuse, in every mode, what no mode may send: anything after the run's terminal
        event but a late ``RUN_ERROR`` after ``RUN_FINISHED`` ("A producer MAY emit
        RUN_ERROR after RUN_FINISHED, reporting a failure that surfaced after the run
        reported success", events/lifecycle), and a second ``RUN_STARTED``."""
        if self.ended_at is None:
            if not self.started:  # the first RUN_STARTED starts it, the writer's or not
                return
            kind = item.get("type") if type(item) is dict else _event_type(item)
            if kind != "RUN_STARTED":
                return
            raise ProtocolError(
                "AGUI-V002",
                RULES_BY_ID["AGUI-V002"].symbol,
                "RUN_STARTED is sent by the writer, and this run already started at "
                "event 0: emit the run's content, and end it by returning (or with "
                "RUN_FINISHED or RUN_ERROR)",
                event_index=self.count,
                event_type=kind,
            )
        kind = _event_type(item)
        if kind == "RUN_ERROR" and self.ended_by == "RUN_FINISHED":
            return  # a late failure; the verifier admits it once, and it ends the run again
        rule = _TERMINAL[self.ended_by]
        admitted = " but a late RUN_ERROR" if self.ended_by == "RUN_FINISHED" else ""
        raise ProtocolError(
            rule,
            RULES_BY_ID[rule].symbol,
            f"{kind} emitted after the run already ended at event {self.ended_at} "
            f"({self.ended_by}); nothing{admitted} can follow it",
            event_index=self.count,
            event_type=kind,
        )

    async def submit(self, item: Any, tag: str | None = None) -> Event | None:
        """Check one event and hand it (after any repairs) to the sink; ``None`` for a
        document audit mode sent although the schema refuses it."""
        try:
            self._lifecycle(item)
        except ProtocolError as refused:
            if self.mode != "audit" and self.ended_at is None:
                self.fatal = refused  # a second RUN_STARTED fails the run, as any bug does
            raise
        if self.fatal is not None:
            raise self.fatal
        if not self.started and self.observer is not None:
            item = self._traced(item)
        try:
            try:
                event, wire = self.typed(item, tag)
            except SchemaValidationError as refused:
                if self.mode != "audit" or not isinstance(item, Mapping):
                    raise
                await self._audit_invalid(item, refused)
                return None
            _writable(wire, wire.get("type"))
            self.pending = []
            try:
                expanded = self.normalizer.normalize(event)
            except ProtocolError as refused:  # a chunk that cannot be expanded
                if self.mode != "audit":
                    raise
                self.warn(refused.symbol, refused.message)
                expanded = []
            for each in expanded:
                self._verify(each)
            self._track_state(event)
        except PatchError as error:
            if self.mode != "audit":
                error.event_index = self.count
                self.fatal = error
                raise
            self.warn("patch-failed", str(error))
        except AguiError as error:
            for closer in self.pending:  # repairs the verifier accepted before the refusal
                await self._send(closer)
            if self.observer is not None:
                self._observed(())
            error.event_index = self.count
            if self.mode != "audit":  # audit raises at the call, and the run goes on
                self.fatal = error
            raise
        for closer in self.pending:
            await self._send(closer)
        await self._send(wire)
        observer = self.observer
        if observer is not None:
            if self.pending:
                self._observed(())
            for each in expanded:
                observer.event(each)
        return event

    def _traced(self, item: Any) -> Any:
        """
        A ``RUN_STARTED`` (the writer's, or a handler's own, as an SDK-style generator
        sends) with the observer's trace added to its ``metadata``, beside whatever the
        handler put there, so a browser correlates either way; any other item as it is.
        A ``metadata`` that is not an object is left for the schema to refuse.
        """
        if _event_type(item) != "RUN_STARTED":
            return item
        assert self.observer is not None
        found = self.observer.metadata()
        if found is None:
            return item
        if is_sdk_model(item):
            wire: Mapping[str, Any] = sdk_wire(item)
        elif isinstance(item, Mapping):
            wire = item
        elif type(item) in _EVENT_CLASS_SET:
            wire = to_wire(item)
        else:  # not an event at all: typed() refuses it
            return item
        given = wire.get("metadata")
        if given is not None and not isinstance(given, Mapping):
            return item
        return {**wire, "metadata": {**(given or {}), **found}}

    def _observed(self, expanded: Any) -> None:
        """Tell the observer what was just sent: the repairs' closers, then the events."""
        observer = self.observer
        assert observer is not None
        for closer in self.pending:
            observer.event(parse_event(closer, check=False))
        for each in expanded:
            observer.event(each)

    async def _audit_invalid(self, item: Mapping[str, Any], refused: SchemaValidationError) -> None:
        """Audit mode: send a document the schema refuses as given, once the violation is
        recorded; only a document JSON cannot carry at all is refused at the call."""
        utf8(dumps_wire(item), item.get("type"))  # WireFormatError: no sink could write it
        symbol = RULES_BY_ID[refused.rule or "AGUI-S001"].symbol
        self.warn(symbol, str(refused))
        await self._send(item, as_given=True)

    async def _send(self, wire: Mapping[str, Any], *, as_given: bool = False) -> None:
        if self.downgrade and not as_given:  # (a document the schema refused: as given)
            wire, _ = omit_newer_members(wire, self.peer_version)
        kind = wire.get("type")
        if kind == "RUN_STARTED":
            self.started = True
        self.count += 1
        if self.sink is None:
            self.events.append(wire)
        else:
            await self.sink(wire)
        if kind in _TERMINAL:
            self.ended_at, self.ended_by = self.count - 1, str(kind)

    def _track_state(self, event: Event) -> None:
        """Keep the state the client holds, so a delta is always against it."""
        if isinstance(event, StateSnapshotEvent):
            self.client_state = copy_json(event.snapshot)
            self.snapshot_sent = True
        elif isinstance(event, StateDeltaEvent):
            held = self.client_state
            if held is UNSET:
                raise PatchError(
                    "state", "the request carried no state and no STATE_SNAPSHOT was sent"
                )
            # In place: the copy is this stream's own, and a failing patch leaves it as it was.
            self.client_state = apply_patch(held, event.delta)


_EVENT_CLASS_SET: Final = frozenset(EVENT_CLASSES.values())
_TAGGABLE: Final = frozenset(
    name
    for name, cls in EVENT_CLASSES.items()
    if any(field.name == "subagent_run_id" for field in attrs.fields(cls))
)


def _taggable(event_type: Any) -> bool:
    return event_type in _TAGGABLE and event_type not in (
        "SUBAGENT_STARTED",
        "SUBAGENT_FINISHED",
        "SUBAGENT_ERROR",
    )


# ---------------------------------------------------------------------------------------
# Handles the helpers yield
# ---------------------------------------------------------------------------------------


class _Streamed:
    """Something open whose content arrives in pieces: one event type appends a piece."""

    _APPEND: ClassVar[tuple[str, str]]
    """The appending event's type and the member naming the entity."""

    def __init__(self, writer: EventWriter, entity_id: str) -> None:
        self._writer = writer
        self.id = entity_id
        """The entity's id: a message's ``messageId``, a call's ``toolCallId``."""

    async def _append(self, delta: str) -> None:
        event_type, member = self._APPEND
        await self._writer._emit_tagged({"type": event_type, member: self.id, "delta": delta})


class TextMessage(_Streamed):
    """An open text message: :meth:`write` appends, leaving the ``async with`` ends it."""

    _APPEND = ("TEXT_MESSAGE_CONTENT", "messageId")

    async def write(self, delta: str) -> None:
        """Append ``delta`` (``TEXT_MESSAGE_CONTENT``)."""
        await self._append(delta)


class ToolCall(_Streamed):
    """An open tool call: :meth:`args` streams argument text, leaving the block ends it."""

    _APPEND = ("TOOL_CALL_ARGS", "toolCallId")

    def __init__(self, writer: EventWriter, tool_call_id: str, name: str) -> None:
        super().__init__(writer, tool_call_id)
        self.name = name
        """The tool's name (``toolCallName``)."""

    async def args(self, fragment: str) -> None:
        """Append a fragment of the JSON arguments (``TOOL_CALL_ARGS``)."""
        await self._append(fragment)


class ReasoningMessage(_Streamed):
    """An open reasoning message inside a reasoning block."""

    _APPEND = ("REASONING_MESSAGE_CONTENT", "messageId")

    async def write(self, delta: str) -> None:
        """Append ``delta`` (``REASONING_MESSAGE_CONTENT``)."""
        await self._append(delta)


class ReasoningBlock:
    """An open reasoning span (``REASONING_START``): holds reasoning messages."""

    def __init__(self, writer: EventWriter, message_id: str) -> None:
        self._writer = writer
        self.id = message_id

    @contextlib.asynccontextmanager
    async def message(self, *, message_id: str | None = None) -> AsyncIterator[ReasoningMessage]:
        """A reasoning message: ``REASONING_MESSAGE_START`` … ``REASONING_MESSAGE_END``."""
        mid = message_id or _new_id("reasoning")
        writer = self._writer
        async with writer._bracket(
            {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"},
            {"type": "REASONING_MESSAGE_END", "messageId": mid},
            ReasoningMessage(writer, mid),
        ) as message:
            yield message

    async def think(self, text: str, *, message_id: str | None = None) -> str:
        """One whole reasoning message; returns its id."""
        async with self.message(message_id=message_id) as message:
            await message.write(text)
        return message.id


class Activity:
    """An activity message: :meth:`update` sends the minimal ``ACTIVITY_DELTA``."""

    def __init__(self, writer: EventWriter, message_id: str, activity_type: str, content: Any):
        self._writer = writer
        self.id = message_id
        self.activity_type = activity_type
        self._content = copy_json(content)

    async def update(self, content: Mapping[str, Any]) -> None:
        """Send the RFC 6902 delta from the content the client holds to ``content``."""
        patch = jsonpatch.make_patch(self._content, content).patch
        if not patch:
            return
        await self._writer._emit_tagged(
            {
                "type": "ACTIVITY_DELTA",
                "messageId": self.id,
                "activityType": self.activity_type,
                "patch": patch,
            }
        )
        self._content = copy_json(content)


# ---------------------------------------------------------------------------------------
# The writers
# ---------------------------------------------------------------------------------------


class EventWriter:
    """
    What a run's writer and a subagent's writer share: :meth:`emit` and the typed
    helpers.  Annotate code that may write for either (a helper streaming a message from
    the parent agent or from a subagent) with this class.
    """

    _stream: _Stream
    _tag: str | None

    async def emit(self, event: Any) -> Event | None:
        """
        Emit one event: an aguikit typed event, a wire dict, or an ``ag_ui.core`` event.

        The event is schema-checked strictly, chunk-expanded and verified against the
        stream so far before anything is written; inside a subagent an event without a
        ``subagentRunId`` is attributed to the subagent.

        ``RUN_FINISHED`` and ``RUN_ERROR`` may be emitted by hand: the first one sent ends
        the run, and the writer sends no terminal event of its own after it.
        ``RUN_STARTED`` is the writer's (a run's first event may be a hand-sent one, as
        an official SDK generator yields it; see :meth:`RunWriter.feed`).

        Returns:
            The typed event as emitted; ``None`` for a dict the schema refuses that audit
            mode sent as given (there is no typed event for it).

        Raises:
            SchemaValidationError: the event is malformed (every issue with its pointer;
                audit mode sends it instead).
            ProtocolError: it breaks an ordering rule (strict mode, or a violation repair
                mode cannot close its way out of); in every mode, an event after the run's
                terminal event but one late ``RUN_ERROR`` after ``RUN_FINISHED``
                (``AGUI-V003``/``AGUI-V004``, "the run already ended at event N") and a
                ``RUN_STARTED`` after the run started (``AGUI-V002``).
            PatchError: a ``STATE_DELTA`` that does not apply to the state the client
                holds (not in audit mode).
            WireFormatError: audit mode, a dict no JSON can carry (``NaN``, a lone
                surrogate, an object of a foreign type).
            TypeError: not an event at all (a string, say).

        .. versionchanged:: 0.3.0  a hand-sent terminal event ends the run; audit mode
           sends a schema-invalid dict and returns ``None`` for it.
        """
        return await self._stream.submit(event, self._tag)

    async def _emit_tagged(self, wire: dict[str, Any]) -> None:
        if self._tag is not None:
            wire["subagentRunId"] = self._tag
        await self._stream.submit(wire)

    async def _close(self, wire: dict[str, Any]) -> None:
        """Close what a helper opened; a stream that already failed or ended (a terminal
        event sent inside the block) stays as it is."""
        if self._stream.live:
            await self._emit_tagged(wire)

    @contextlib.asynccontextmanager
    async def _bracket(
        self, opening: dict[str, Any], closing: dict[str, Any], handle: Any
    ) -> AsyncIterator[Any]:
        """Emit ``opening``, yield ``handle``, emit ``closing`` however the body ends,
        except by cancellation (the client left: nothing more is written)."""
        await self._emit_tagged(opening)
        try:
            yield handle
        except Exception:
            await self._close(closing)
            raise
        await self._close(closing)

    # -- text -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def text_message(
        self, *, message_id: str | None = None, name: str | None = None
    ) -> AsyncIterator[TextMessage]:
        """
        An assistant text message: ``TEXT_MESSAGE_START``, the deltas the body writes,
        ``TEXT_MESSAGE_END`` when the block is left, however it is left.
        """
        mid = message_id or _new_id("msg")
        start: dict[str, Any] = {"type": "TEXT_MESSAGE_START", "messageId": mid}
        start["role"] = "assistant"
        if name is not None:
            start["name"] = name
        closing = {"type": "TEXT_MESSAGE_END", "messageId": mid}
        async with self._bracket(start, closing, TextMessage(self, mid)) as message:
            yield message

    async def say(self, text: str, *, message_id: str | None = None) -> str:
        """One whole assistant message; returns its id."""
        async with self.text_message(message_id=message_id) as message:
            await message.write(text)
        return message.id

    # -- tools ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def tool_call(
        self,
        name: str,
        *,
        tool_call_id: str | None = None,
        parent_message_id: str | None = None,
    ) -> AsyncIterator[ToolCall]:
        """
        A tool call: ``TOOL_CALL_START``, the argument fragments the body streams,
        ``TOOL_CALL_END`` when the block is left.  A call with no result in this run is
        one the client (a frontend tool) is asked to execute.
        """
        call_id = tool_call_id or _new_id("call")
        start: dict[str, Any] = {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": name,
        }
        if parent_message_id is not None:
            start["parentMessageId"] = parent_message_id
        closing = {"type": "TOOL_CALL_END", "toolCallId": call_id}
        async with self._bracket(start, closing, ToolCall(self, call_id, name)) as call:
            yield call

    async def call_tool(
        self,
        name: str,
        arguments: Any,
        *,
        tool_call_id: str | None = None,
        parent_message_id: str | None = None,
    ) -> str:
        """A whole tool call whose arguments (any JSON value) are sent at once; its id."""
        async with self.tool_call(
            name, tool_call_id=tool_call_id, parent_message_id=parent_message_id
        ) as call:
            await call.args(json.dumps(arguments, ensure_ascii=False, separators=(",", ":")))
        return call.id

    async def tool_result(
        self, tool_call_id: str, content: Any, *, message_id: str | None = None
    ) -> str:
        """
        The result of an ended tool call (``TOOL_CALL_RESULT``, a tool message); content
        that is not a string is sent as its JSON text.  Returns the tool message's id.
        """
        mid = message_id or _new_id("result")
        text = (
            content
            if isinstance(content, str)
            else json.dumps(content, ensure_ascii=False, separators=(",", ":"))
        )
        await self._emit_tagged(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": mid,
                "toolCallId": tool_call_id,
                "content": text,
                "role": "tool",
            }
        )
        return mid

    # -- reasoning, steps, activities -----------------------------------------------------

    @contextlib.asynccontextmanager
    async def reasoning(self, *, message_id: str | None = None) -> AsyncIterator[ReasoningBlock]:
        """A reasoning span (``REASONING_START`` … ``REASONING_END``) holding messages."""
        mid = message_id or _new_id("reasoning-span")
        async with self._bracket(
            {"type": "REASONING_START", "messageId": mid},
            {"type": "REASONING_END", "messageId": mid},
            ReasoningBlock(self, mid),
        ) as block:
            yield block

    @contextlib.asynccontextmanager
    async def step(self, name: str) -> AsyncIterator[None]:
        """A named step: ``STEP_STARTED`` … ``STEP_FINISHED``."""
        async with self._bracket(
            {"type": "STEP_STARTED", "stepName": name},
            {"type": "STEP_FINISHED", "stepName": name},
            None,
        ):
            yield

    async def activity(
        self, activity_type: str, content: Mapping[str, Any], *, message_id: str | None = None
    ) -> Activity:
        """
        Show an activity (``ACTIVITY_SNAPSHOT``); the returned handle's
        :meth:`Activity.update` sends minimal deltas from what the client holds.
        """
        mid = message_id or _new_id("activity")
        await self._emit_tagged(
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": mid,
                "activityType": activity_type,
                "content": copy_json(dict(content)),
            }
        )
        return Activity(self, mid, activity_type, content)

    # -- state ----------------------------------------------------------------------------

    async def set_state(self, state: Any) -> None:
        """
        Make the client's state ``state``: a ``STATE_SNAPSHOT`` the first time (and every
        ``snapshot_every``-th update), otherwise the minimal RFC 6902 ``STATE_DELTA`` from
        the state the client holds, which is always the last one this stream sent (a
        snapshot or delta emitted by hand moves it too).  No change sends nothing.

        A ``STATE_DELTA`` emitted by hand before any snapshot is checked against the
        request's ``state``, which is what the client holds when the run starts.
        """
        stream = self._stream
        held = stream.client_state
        stream.state_updates += 1
        every = stream.snapshot_every
        if not stream.snapshot_sent or (every > 0 and stream.state_updates % every == 0):
            await self._emit_tagged({"type": "STATE_SNAPSHOT", "snapshot": copy_json(state)})
            return
        patch = jsonpatch.make_patch(held, state).patch
        if patch:
            await self._emit_tagged({"type": "STATE_DELTA", "delta": patch})

    @property
    def state(self) -> Any:
        """The state the client holds: the request's, then what this stream sent
        (``None`` when neither gave one)."""
        held = self._stream.client_state
        return None if held is UNSET else copy_json(held)

    # -- subagents and interrupts ---------------------------------------------------------

    @contextlib.asynccontextmanager
    async def subagent(
        self,
        name: str,
        *,
        subagent_run_id: str | None = None,
        description: str | None = None,
        parent_tool_call_id: str | None = None,
        parent_message_id: str | None = None,
    ) -> AsyncIterator[SubagentWriter]:
        """
        A subagent invocation: ``SUBAGENT_STARTED``, then a child writer whose events all
        carry its ``subagentRunId``; leaving the block sends ``SUBAGENT_FINISHED`` (with
        the child's :attr:`SubagentWriter.result`), or ``SUBAGENT_ERROR`` with the
        exception's message and code when the body raised (the exception propagates).
        """
        run_id = subagent_run_id or _new_id("subagent")
        start: dict[str, Any] = {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": run_id,
            "name": name,
        }
        for member, value in (
            ("description", description),
            ("parentSubagentRunId", self._tag),
            ("parentToolCallId", parent_tool_call_id),
            ("parentMessageId", parent_message_id),
        ):
            if value is not None:
                start[member] = value
        await self._stream.submit(start)
        child = SubagentWriter(self._stream, run_id)
        try:
            yield child
        except BaseException as exc:
            if isinstance(exc, Exception) and self._stream.live:
                message, code = self._stream.report(exc)
                LOGGER.error(
                    "subagent %r failed; sent SUBAGENT_ERROR %s: %s",
                    run_id,
                    code,
                    exc,
                    exc_info=exc,
                    extra={"subagentRunId": run_id},
                )
                await self._stream.submit(
                    {
                        "type": "SUBAGENT_ERROR",
                        "subagentRunId": run_id,
                        "message": message,
                        "code": code,
                    }
                )
            raise
        finished: dict[str, Any] = {"type": "SUBAGENT_FINISHED", "subagentRunId": run_id}
        if child.result is not None:
            finished["result"] = child.result
        if self._stream.ended_at is None:  # a terminal event sent inside the block ended it
            await self._stream.submit(finished)

    def interrupt(
        self,
        reason: str,
        *,
        interrupt_id: str | None = None,
        message: str | None = None,
        tool_call_id: str | None = None,
        response_schema: Mapping[str, Any] | None = None,
    ) -> str:
        """
        Pause the run on a question for the user: ``RUN_FINISHED`` will carry an
        ``interrupt`` outcome listing every interrupt raised, and the client resumes with
        a ``resume`` entry naming the returned id.
        """
        iid = interrupt_id or _new_id("interrupt")
        entry: dict[str, Any] = {"id": iid, "reason": reason}
        for member, value in (
            ("subagentRunId", self._tag),
            ("message", message),
            ("toolCallId", tool_call_id),
            ("responseSchema", None if response_schema is None else dict(response_schema)),
        ):
            if value is not None:
                entry[member] = value
        self._stream.interrupts.append(entry)
        return iid

    @property
    def warnings(self) -> list[SessionWarning]:
        """Every repair and (in audit mode) every violation so far, as structured records."""
        return list(self._stream.warnings)


class SubagentWriter(EventWriter):
    """The writer a subagent block yields: every event it emits carries its run id."""

    def __init__(self, stream: _Stream, subagent_run_id: str) -> None:
        self._stream = stream
        self._tag = subagent_run_id
        self.result: Any = None
        """What ``SUBAGENT_FINISHED.result`` carries (any JSON value; ``None``: absent)."""

    @property
    def subagent_run_id(self) -> str:
        """The invocation's ``subagentRunId``."""
        assert self._tag is not None
        return self._tag


class RunWriter(EventWriter):
    """
    Emit one run, checked as it is written.

    One writer per run, bound to the run's :class:`~aguikit.models.RunAgentInput`: it
    emits ``RUN_STARTED`` first and ``RUN_FINISHED`` last by itself (with an ``interrupt``
    outcome when :meth:`interrupt` was called, else ``success``), so a handler cannot
    forget either, unless the handler sent its own terminal event, which ended the run.
    An exception escaping the handler becomes ``RUN_ERROR`` and the stream still ends
    cleanly: by default with a generic message and a stable code (the rule id of an
    aguikit error, else :data:`HANDLER_FAILED`), the exception and its traceback logged
    on ``aguikit.server`` with the run's ids.  Cancellation (the client went away) writes
    nothing more.

    Use it as ``async with RunWriter(input, sink=...) as run:``, or let
    :func:`aguikit.server.agui_endpoint` do that for you.

    Args:
        run_input: The request: an aguikit ``RunAgentInput``, its wire dict, or an
            ``ag_ui.core.RunAgentInput``.
        sink: Awaited with each event's wire dict, in order; ``None`` collects them in
            :attr:`events` (for tests and batch producers).
        mode: ``"strict"``, ``"repair"`` or ``"audit"`` (see :mod:`aguikit.server.writer`).
        snapshot_every: With ``N > 0``, every ``N``-th :meth:`set_state` sends a full
            ``STATE_SNAPSHOT`` instead of a delta, so a client that joined late or lost an
            update re-synchronises in a long run.
        max_open_entities: The verifier's safety limit (:mod:`aguikit.limits`).
        on_error: ``on_error(exc) -> (message, code) | None``: what the ``RUN_ERROR``
            (or a subagent block's ``SUBAGENT_ERROR``) says for an exception, so a
            deployment can map its own errors to codes its UI knows; ``None`` (or a
            failing hook) sends the default.
        expose_errors: Send the exception's text as the message (the code stays
            stable): for development, never for a client you do not trust with your
            exceptions.
        principal: Who sent the request, as the endpoint's ``authorize`` hook named
            them (:attr:`principal`).
        telemetry: An :class:`aguikit.otel.Telemetry` observing this run (a span tree
            and metrics from the events it sends, ``docs/otel.md``); ``None`` uses the
            one ``AguikitInstrumentor().instrument()`` installed, if any.  Its trace id
            rides in ``RUN_STARTED.metadata["aguikit.otel"]``, the writer's or one the
            handler sends itself (beside the handler's own metadata).
        trace_headers: The request's headers, whose ``traceparent``/``tracestate`` the
            run's span continues (the endpoint passes them).
        restate_input: ``RUN_STARTED`` carries the request as its ``input``, so a reader
            joining the run later (a background run, ``docs/threads.md``) folds the
            conversation the run started from.

    A request declaring an older ``protocolVersion`` than aguikit speaks (or none) gets
    every event without the members its version does not have yet
    (:func:`aguikit.receiver.omit_newer_members`, read from the schema's ``x-since``).
    """

    def __init__(
        self,
        run_input: RunAgentInput | Mapping[str, Any] | Any,
        *,
        sink: Sink | None = None,
        mode: Mode = "strict",
        snapshot_every: int = 0,
        max_open_entities: int = MAX_OPEN_ENTITIES,
        on_error: ErrorReport | None = None,
        expose_errors: bool = False,
        principal: str | None = None,
        telemetry: _observe.Observe | None = None,
        trace_headers: Mapping[str, str] | None = None,
        restate_input: bool = False,
    ) -> None:
        if is_sdk_model(run_input):
            run_input = sdk_wire(run_input)
        if isinstance(run_input, Mapping):
            run_input = parse_run_agent_input(run_input)
        if not isinstance(run_input, RunAgentInput):
            raise TypeError("RunWriter needs a RunAgentInput (typed, wire dict or ag_ui.core)")
        self.input: RunAgentInput = run_input
        """The request this run answers."""
        self.restate_input = restate_input
        """Whether ``RUN_STARTED`` carries the request (``input``), so a reader that joins
        the run later (a background run) learns the conversation it started from."""
        self.principal = principal
        """Who sent the request, as the endpoint's ``authorize`` hook named them (an
        opaque string, a user id say); ``None``: anonymous, or no hook.  A handler scopes
        what it reads and does to it."""
        self._tag = None
        self._stream = _Stream(
            sink=sink,
            mode=mode,
            thread_id=run_input.thread_id,
            snapshot_every=snapshot_every,
            max_open_entities=max_open_entities,
            initial_state=run_input.state,
            peer_version=run_input.protocol_version,
            on_error=on_error,
            expose_errors=expose_errors,
        )
        self.result: Any = None
        """What ``RUN_FINISHED.result`` carries (any JSON value; ``None``: absent)."""
        self.error: BaseException | None = None
        """The exception that ended the run with ``RUN_ERROR``, if one did."""
        self._closed = False
        """Cancelled (the client left): nothing more is written, terminal event included."""
        self._stream.observer = _observe.observe(
            telemetry, run_input, side="server", headers=trace_headers
        )

    def activate_trace(self) -> Any:
        """
        A context manager making this run's span the current one, so spans the handler
        starts itself (a model call an instrumented client makes) nest under the run;
        a no-op without telemetry.  The endpoint enters it around the handler.
        """
        observer = self._stream.observer
        return contextlib.nullcontext() if observer is None else observer.activate()

    @property
    def mode(self) -> Mode:
        """How this writer treats a violation."""
        return self._stream.mode

    @property
    def events(self) -> list[Mapping[str, Any]]:
        """The wire dicts emitted so far, when the writer has no sink."""
        return list(self._stream.events)

    @property
    def ended(self) -> bool:
        """Whether the run is over: its terminal event (``RUN_FINISHED`` or ``RUN_ERROR``)
        was sent, by the writer or by hand, or it was cancelled (nothing more is sent)."""
        return self._closed or self._stream.ended_at is not None

    async def start(self) -> None:
        """Emit ``RUN_STARTED`` (once, and not when a hand-sent one started the run;
        ``async with`` calls it)."""
        if self._stream.started:
            return
        started: dict[str, Any] = {
            "type": "RUN_STARTED",
            "threadId": self.input.thread_id,
            "runId": self.input.run_id,
        }
        spoken = _spoken(self._stream.peer_version)
        if spoken is not None:
            started["protocolVersion"] = spoken
        if self.input.parent_run_id is not None:
            started["parentRunId"] = self.input.parent_run_id
        if self.restate_input:
            started["input"] = to_wire(self.input)
        await self._stream.submit(started)  # which adds the trace to its metadata

    async def finish(self) -> None:
        """
        Emit ``RUN_FINISHED`` with the run's outcome and :attr:`result` (``async with``
        calls it when the body returns).

        Raises:
            ProtocolError: something is still open (``AGUI-V005``) in strict mode; repair
                mode closes it first, audit mode sends the event anyway.
        """
        if self.ended:
            return
        await self.start()
        stream = self._stream
        finished: dict[str, Any] = {
            "type": "RUN_FINISHED",
            "threadId": self.input.thread_id,
            "runId": self.input.run_id,
        }
        if self.result is not None:
            finished["result"] = self.result
        if stream.interrupts:
            finished["outcome"] = {"type": "interrupt", "interrupts": list(stream.interrupts)}
        else:
            finished["outcome"] = {"type": "success"}
        await stream.submit(finished)

    async def fail(self, error: BaseException) -> None:
        """
        Emit ``RUN_ERROR`` for ``error``: the ``(message, code)`` ``on_error`` maps it to,
        else a generic message and a stable code (see the class); nothing when the run
        already ended.
        """
        if self._closed:
            return
        extra = {"threadId": self.input.thread_id, "runId": self.input.run_id}
        if self.ended:
            LOGGER.error(
                "%s failed after it had ended (no RUN_ERROR sent): %s",
                self._ids,
                error,
                exc_info=error,
                extra=extra,
            )
            return
        self.error = error
        stream = self._stream
        if stream.observer is not None:
            stream.observer.failed(error)
        stream.fatal = None  # the terminal event is still owed after a strict failure
        message, code = stream.report(error)
        # The server's record: what the client gets instead of the exception, and why.
        LOGGER.error(
            "%s failed; sent RUN_ERROR %s: %s", self._ids, code, error, exc_info=error, extra=extra
        )
        try:
            await self.start()
            await stream.submit({"type": "RUN_ERROR", "message": message, "code": code})
        except AguiError as refused:
            LOGGER.error("%s: RUN_ERROR refused: %s", self._ids, refused)

    async def stopped(self) -> None:
        """
        End a run its server stopped on purpose (nobody followed it through the resume
        grace window, say) with ``RUN_FINISHED`` carrying the cancelled outcome, after
        closing what the run opened (messages, tool calls, steps, subagents), as the
        spec's "Cancelled runs" asks of a producer: a stopped run is neither a success
        nor silence for whoever still reads it.  When it cannot close in order (the run
        had already failed, or a close is refused), the run ends with ``RUN_ERROR``
        instead; nothing when it already ended.

        The endpoint calls it after cancelling the handler; a handler never needs to.

        .. versionadded:: 0.3.0
        """
        stream = self._stream
        self._closed = False  # the cancellation closed the writer; this one ending is owed
        if stream.ended_at is not None:
            return
        if stream.fatal is not None:
            await self.fail(stream.fatal)
            return
        try:
            await self.start()
            for closer, _ in stream.closers():
                await stream.submit(closer)
            await stream.submit(
                {
                    "type": "RUN_FINISHED",
                    "threadId": self.input.thread_id,
                    "runId": self.input.run_id,
                    "outcome": {"type": "cancelled"},
                }
            )
        except AguiError as refused:
            await self.fail(refused)

    async def feed(self, events: AsyncIterable[Any]) -> None:
        """
        Emit every event ``events`` yields, in order, each exactly as :meth:`emit` would:
        the official SDK's pattern, an async generator yielding ``ag_ui.core`` events
        (its own ``RUN_STARTED`` and ``RUN_FINISHED`` included), served unchanged.

        A writer that has not started yet takes a ``RUN_STARTED`` yielded first as the
        run's start (and sends its own before anything else).  A refused event is
        thrown back into an async generator at the ``yield`` that produced it, so the
        refusal is raised where the bug is; a generator that catches it goes on.  The
        generator is closed however this ends.

        Raises:
            Whatever :meth:`emit` raises and the generator does not catch, and whatever
            the generator itself raises.

        .. versionadded:: 0.3.0
        """
        source = aiter(events)
        throw = getattr(source, "athrow", None)
        try:
            item = await anext(source)
            while True:
                if not self._stream.started and _event_type(item) != "RUN_STARTED":
                    await self.start()
                try:
                    await self.emit(item)
                except (AguiError, TypeError) as refused:
                    if throw is None:
                        raise
                    item = await throw(refused)
                else:
                    item = await anext(source)
        except StopAsyncIteration:
            return
        finally:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()

    @property
    def _ids(self) -> str:
        return f"run {self.input.run_id!r} (thread {self.input.thread_id!r})"

    async def __aenter__(self) -> RunWriter:
        await self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            return await self._exit(exc)
        finally:
            if self._stream.observer is not None:
                self._stream.observer.end()

    async def _exit(self, exc: BaseException | None) -> bool:
        if exc is None:
            try:
                await self.finish()
            except AguiError as error:
                await self.fail(error)
            else:
                if self._stream.fatal is not None:  # a strict failure the handler swallowed
                    await self.fail(self._stream.fatal)
            return False
        if not isinstance(exc, Exception):
            self._closed = True  # cancelled (the client left) or exiting: write nothing more
            return False
        await self.fail(exc)
        return True
