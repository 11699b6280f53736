"""
Expand the ``*_CHUNK`` shorthand into the explicit start/content/end events.

A producer that cannot bracket its output (most provider adapters: the upstream API only
says a message ended when the next one begins) sends chunks instead, and a chunk names its
message or tool call **only the first time**::

    TEXT_MESSAGE_CHUNK  messageId=m1 delta="Hel"
    TEXT_MESSAGE_CHUNK               delta="lo"
    TEXT_MESSAGE_CHUNK  messageId=m2 delta="Bye"     <- m1 has just ended

So the open id must be remembered, and the end of a chunk stream is only known from what
comes after it.  That bookkeeping is this module, and it follows the specification's list
("Closing a chunk stream", ``basic/patterns/streaming``) and nothing else.  A chunk stream
is closed (its ``*_END`` synthesized, before the event that closed it):

* when a chunk opens a different item in the same lane;
* when a message, tool-call, step, state, custom or reasoning event arrives in the item's
  lane: ``TEXT_MESSAGE_*``, ``TOOL_CALL_*`` (``TOOL_CALL_RESULT`` included), ``STEP_*``,
  ``STATE_SNAPSHOT``, ``STATE_DELTA``, ``CUSTOM``, ``REASONING_START``/``REASONING_END`` and
  ``REASONING_MESSAGE_*``;
* when an explicit content or end event carries the identifier the chunk stream is
  assembling, in any lane (the two spellings do not mix within one item: the explicit
  event ends the shorthand, and what it says is judged by the triad rules, so an explicit
  ``TEXT_MESSAGE_CONTENT`` for a chunk-opened message is content for a closed message,
  ``AGUI-V012``); an explicit start (or a tool call's result) from another lane ends
  nothing, since closing is by lane, and is judged against the item still open (a second
  start of it is refused, as the official client refuses it);
* when a run-level event arrives (``RUN_STARTED``, ``RUN_FINISHED``, ``RUN_ERROR``,
  ``MESSAGES_SNAPSHOT``), which closes every lane, or the owner's ``SUBAGENT_FINISHED`` /
  ``SUBAGENT_ERROR``, which closes that subagent's lane;
* or by :meth:`ChunkNormalizer.finish` when the transport ends.

Exactly five events stand aside and close nothing: ``RAW``, ``ACTIVITY_SNAPSHOT``,
``ACTIVITY_DELTA``, ``REASONING_ENCRYPTED_VALUE`` and ``SUBAGENT_STARTED`` (which opens a new
lane rather than touching this one).  A state event between two chunks of one message does
end it, as the specification lists, so the id-less continuation after it is a first chunk
without an id (``AGUI-C001``), as in the official client.

*Lanes.*  Once subagents stream concurrently, "the previous chunk" only means something
within one producer, so there is one chunk stream per lane (``subagentRunId``; ``None`` is
the parent agent).  An event is in the lane its ``subagentRunId`` names ("An absent
``subagentRunId`` means the parent agent", the subagents page; the official client reads
it the same way).  A chunk that names no id continues the stream of the subagent it is
attributed to; an untagged one continues the parent's chunk stream, else the only chunk
stream of its kind, and when several could claim it the chunk is rejected rather than
guessed at (``AGUI-C003``).  A chunk naming an id continues the chunk stream assembling
it, in whatever lane (its tag must agree, ``AGUI-C004``).

*Explicit events are observed, never changed or absorbed.*  An item opened by a
``*_START`` is continued and closed explicitly: an id-less chunk never continues it, and a
chunk naming it opens it again (which the verifier refuses).

*What a synthesized event carries.*  The opener carries the chunk's ``timestamp`` and
``metadata`` and the stream's attribution; the content event additionally carries the
chunk's ``rawEvent`` (one provider payload, one carrier) and the chunk's own
``subagentRunId`` when it has one.  A continuation that carries only ``metadata`` or
``rawEvent`` becomes an empty-delta content event so the payload still reaches the applier.
A synthesized end carries only the id and the attribution: a chunk's metadata belongs to
the stream it opens, never to the one it closes.

Deliberately left alone: ordering rules (a content event for a message nobody opened is
passed on untouched; :mod:`aguikit.verify` rejects it) and the ``THINKING_*`` family (the
receiver boundary in :mod:`aguikit.receiver` translates it).

Rule ids raised here (all :class:`~aguikit.errors.ProtocolError`): ``AGUI-C001`` to
``AGUI-C005``, rows of :mod:`aguikit.catalogue` like every other id (``aguikit rules C003``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

import attrs
from mypy_extensions import mypyc_attr

from ._dispatch import complete
from ._generated.models import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    CustomEvent,
    Event,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageRole,
    TextMessageStartEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
    ThinkingTextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ._guard import check_delta, malformed_event
from .catalogue import RULES as _CATALOGUE
from .catalogue import RULES_BY_ID, Rule
from .errors import ProtocolError
from .limits import MAX_OPEN_ENTITIES

__all__ = ["RULES", "ChunkNormalizer", "StreamInFlight", "normalize_all"]

RULES: Final[Mapping[str, Rule]] = MappingProxyType(
    {rule.id: rule for rule in _CATALOGUE if rule.id.startswith("AGUI-C")}
)
"""The normalizer's rows of :mod:`aguikit.catalogue`, by id."""


def _fail(rule_id: str, event_type: str, entity_id: str | None, **fields: Any) -> ProtocolError:
    rule = RULES_BY_ID[rule_id]
    message = rule.template.format(event_type=event_type, entity_id=entity_id, **fields)
    return ProtocolError(rule.id, rule.symbol, message, event_type=event_type, entity_id=entity_id)


class _Kind(StrEnum):
    TEXT = "text"
    TOOL = "tool"
    REASONING = "reasoning"


_CHUNK_TYPE: Final = {
    _Kind.TEXT: "TEXT_MESSAGE_CHUNK",
    _Kind.TOOL: "TOOL_CALL_CHUNK",
    _Kind.REASONING: "REASONING_MESSAGE_CHUNK",
}
_ID_FIELD: Final = {_Kind.TEXT: "messageId", _Kind.TOOL: "toolCallId", _Kind.REASONING: "messageId"}
_NOUN: Final = {
    _Kind.TEXT: "text message",
    _Kind.TOOL: "tool call",
    _Kind.REASONING: "reasoning message",
}


class _Stream:
    """
    A chunk stream in flight; at most one per lane.

    ``fields`` holds what the opening chunk established (role/name,
    toolCallName/parentMessageId) so a repeating continuation can be judged.  (A plain
    class: one is built per stream, and compiled it is a native one, where an attrs class
    would stay Python.)
    """

    kind: _Kind
    id: str
    owner: str | None
    fields: dict[str, str | None]

    def __init__(
        self, kind: _Kind, id: str, owner: str | None, fields: dict[str, str | None]
    ) -> None:
        self.kind = kind
        self.id = id
        self.owner = owner
        self.fields = fields


@attrs.frozen
class StreamInFlight:
    """
    The chunk stream one lane has in flight: what an id-less chunk of that lane continues,
    and the end the normalizer owes when the stream closes (see
    :meth:`ChunkNormalizer.streams`).

    ``kind`` is ``"text"``, ``"tool"`` or ``"reasoning"``; ``fields`` what the opening chunk
    established (``role``/``name``, ``toolCallName``/``parentMessageId``), empty for a
    reasoning message.

    .. versionchanged:: 0.4.0  Only chunk-opened streams are in flight (an explicitly
       opened item is never continued by a chunk), so ``chunked`` is gone.
    """

    kind: str
    id: str
    owner: str | None
    fields: Mapping[str, str | None]


_Chunk = TextMessageChunkEvent | ToolCallChunkEvent | ReasoningMessageChunkEvent


def _with_content(
    out: list[Event],
    chunk: _Chunk,
    owner: str | None,
    content: Callable[..., Event],
    **entity: str,
) -> list[Event]:
    """
    Finish a chunk's expansion with its content event, when it carries anything to deliver.

    The content event is attributed to the chunk's own tag, else to the stream's owner, and
    carries the chunk's base fields; a chunk that only opened its stream and carries
    nothing else adds no empty content event, and members a newer producer added ride on
    whatever event the chunk became.
    """
    attribution = chunk.subagent_run_id if chunk.subagent_run_id is not None else owner
    if (
        chunk.delta is not None
        or chunk.raw_event is not None
        or (not out and (chunk.metadata is not None or chunk.extra_members))
    ):
        out.append(
            content(
                **entity,
                delta="" if chunk.delta is None else chunk.delta,
                timestamp=chunk.timestamp,
                raw_event=chunk.raw_event,
                metadata=chunk.metadata,
                subagent_run_id=attribution,
                extra_members=chunk.extra_members,
            )
        )
    elif chunk.extra_members and out:
        out[-1] = attrs.evolve(out[-1], extra_members=chunk.extra_members)
    return out


# Subclassable from Python in the compiled build too (docs/DESIGN.md, "The hot core is compiled").
@mypyc_attr(allow_interpreted_subclasses=True)
class ChunkNormalizer:
    """
    Turns chunk events into the explicit events the rest of the protocol is written in.

    Feed every event of a stream through :meth:`normalize`, in order, and apply what comes
    out; call :meth:`finish` when the transport ends.  Events that are not chunks come out
    unchanged.  A call that raises leaves the normalizer exactly as it was.

    Args:
        max_open_entities: Most chunk streams in flight at once (one per lane).  A producer
            that opens streams under ever new ``subagentRunId`` values and never closes
            them is stopped with ``AGUI-V093`` instead of growing this normalizer without
            bound.
    """

    __slots__ = ("_by_id", "_lanes", "_max_open")

    def __init__(self, *, max_open_entities: int = MAX_OPEN_ENTITIES) -> None:
        self._lanes: dict[str | None, _Stream] = {}
        self._by_id: dict[tuple[_Kind, str], str | None] = {}
        self._max_open = max_open_entities

    @property
    def is_open(self) -> bool:
        """Whether any chunk stream is in flight (an end is owed)."""
        return bool(self._lanes)

    def streams(self) -> list[StreamInFlight]:
        """
        Each lane's chunk stream in flight, in the order they were opened.

        A consumer that restates a stream (a late joiner's prelude,
        :mod:`aguikit.server.prelude`) reads here which items chunks may continue and
        which ends are owed, instead of re-deriving this normalizer's bookkeeping.
        """
        return [
            StreamInFlight(str(stream.kind), stream.id, stream.owner, dict(stream.fields))
            for stream in self._lanes.values()
        ]

    def normalize(self, event: Event) -> list[Event]:
        """
        Expand one event.

        Returns:
            Between zero and three events: the synthesized end of the owner's previous
            stream, the synthesized start of this one, and the content.  A non-chunk event
            comes back as itself, preceded by the ends it implies.

        Raises:
            ProtocolError: ``AGUI-C001`` to ``AGUI-C005`` (see the module docstring);
                ``AGUI-V092`` for something that is not an event or carries an id of the
                wrong type (an in-process producer skipping the wire parser);
                ``AGUI-V093`` past ``max_open_entities``.
        """
        try:
            handler = _HANDLERS.get(type(event))
            if handler is None:
                raise TypeError("it is not an AG-UI event object")
            return handler(self, event)
        except (TypeError, AttributeError, RecursionError) as exc:
            # Lookups by id run before any bookkeeping changes, so nothing is half-done.
            raise malformed_event(event, exc) from None

    def finish(self) -> list[Event]:
        """
        Close every stream this normalizer opened and was never told the end of.

        A chunk stream that simply stops is the normal case, not an error: the last message
        of a stream has nothing after it to imply its end.
        """
        return self._close_all()

    # ---- chunks ---------------------------------------------------------------------------

    def _resolve(
        self, kind: _Kind, named: str | None, tag: str | None
    ) -> tuple[str | None, _Stream | None]:
        """The lane a chunk belongs to and the stream it continues there (``None``: opens)."""
        chunk_type = _CHUNK_TYPE[kind]
        if named is not None:
            key = (kind, named)
            if key in self._by_id:
                holder = self._by_id[key]
                if tag is not None and tag != holder:
                    raise _fail(
                        "AGUI-C004",
                        chunk_type,
                        named,
                        noun=_NOUN[kind],
                        tag=tag,
                        holder=holder if holder is not None else "(the parent agent)",
                    )
                return holder, self._lanes[holder]
            return tag, None
        if tag is not None:
            stream = self._lanes.get(tag)
            if stream is None or stream.kind is not kind:
                raise _fail(
                    "AGUI-C001",
                    chunk_type,
                    None,
                    id_field=_ID_FIELD[kind],
                    reason=f"subagent '{tag}' has no {_NOUN[kind]} chunk stream open to continue.",
                )
            return tag, stream
        parent = self._lanes.get(None)
        if parent is not None and parent.kind is kind:
            return None, parent
        candidates = [s for s in self._lanes.values() if s.kind is kind]
        if len(candidates) == 1:
            return candidates[0].owner, candidates[0]
        if candidates:
            raise _fail(
                "AGUI-C003",
                chunk_type,
                None,
                id_field=_ID_FIELD[kind],
                count=len(candidates),
                noun=_NOUN[kind],
            )
        raise _fail(
            "AGUI-C001",
            chunk_type,
            None,
            id_field=_ID_FIELD[kind],
            reason=f"no {_NOUN[kind]} chunk stream is open to continue.",
        )

    @staticmethod
    def _agree(stream: _Stream, incoming: Mapping[str, str | None], chunk_type: str) -> None:
        if stream.fields is None:
            return
        for field, value in incoming.items():
            if value is None:
                continue
            established = stream.fields.get(field)
            if value != established:
                shown = "(absent)" if established is None else f"'{established}'"
                raise _fail(
                    "AGUI-C005",
                    chunk_type,
                    stream.id,
                    noun=_NOUN[stream.kind],
                    field=field,
                    value=value,
                    shown=shown,
                )

    def _check_room(self, owner: str | None, event_type: str, entity_id: str) -> None:
        """Refuse, before anything changes, to open one more lane past the limit."""
        if owner in self._lanes or len(self._lanes) < self._max_open:
            return
        rule = RULES_BY_ID["AGUI-V093"]
        message = rule.template.format(
            event_type=event_type,
            entity_id=entity_id,
            noun="stream",
            count=len(self._lanes),
            limit=self._max_open,
        )
        raise ProtocolError(
            rule.id, rule.symbol, message, event_type=event_type, entity_id=entity_id
        )

    def _open(self, stream: _Stream, out: list[Event]) -> None:
        self._check_room(stream.owner, _CHUNK_TYPE[stream.kind], stream.id)
        out.extend(self._close_lane(stream.owner))
        self._lanes[stream.owner] = stream
        self._by_id[(stream.kind, stream.id)] = stream.owner

    def _text_chunk(self, chunk: TextMessageChunkEvent) -> list[Event]:
        check_delta(chunk.delta)
        role = None if chunk.role is None else str(chunk.role)
        owner, stream = self._resolve(_Kind.TEXT, chunk.message_id, chunk.subagent_run_id)
        out: list[Event] = []
        if stream is not None:
            if role is not None or chunk.name is not None:  # a bare continuation agrees
                self._agree(stream, {"role": role, "name": chunk.name}, "TEXT_MESSAGE_CHUNK")
            message_id = stream.id
        else:
            assert chunk.message_id is not None  # _resolve opens only a named stream
            message_id = chunk.message_id
            established = TextMessageRole.ASSISTANT if chunk.role is None else chunk.role
            stream = _Stream(
                _Kind.TEXT, message_id, owner, {"role": str(established), "name": chunk.name}
            )
            self._open(stream, out)
            out.append(
                TextMessageStartEvent(
                    message_id=message_id,
                    role=established,
                    name=chunk.name,
                    timestamp=chunk.timestamp,
                    metadata=chunk.metadata,
                    subagent_run_id=owner,
                )
            )
        return _with_content(out, chunk, owner, TextMessageContentEvent, message_id=message_id)

    def _tool_chunk(self, chunk: ToolCallChunkEvent) -> list[Event]:
        check_delta(chunk.delta)
        owner, stream = self._resolve(_Kind.TOOL, chunk.tool_call_id, chunk.subagent_run_id)
        out: list[Event] = []
        if stream is not None:
            if chunk.tool_call_name is not None or chunk.parent_message_id is not None:
                self._agree(
                    stream,
                    {
                        "toolCallName": chunk.tool_call_name,
                        "parentMessageId": chunk.parent_message_id,
                    },
                    "TOOL_CALL_CHUNK",
                )
            call_id = stream.id
        else:
            assert chunk.tool_call_id is not None
            call_id = chunk.tool_call_id
            if chunk.tool_call_name is None:
                # Checked before anything is emitted: the owner's previous stream must not
                # be closed on the way to finding out this call cannot be opened.
                raise _fail("AGUI-C002", "TOOL_CALL_CHUNK", call_id)
            stream = _Stream(
                _Kind.TOOL,
                call_id,
                owner,
                {
                    "toolCallName": chunk.tool_call_name,
                    "parentMessageId": chunk.parent_message_id,
                },
            )
            self._open(stream, out)
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=chunk.tool_call_name,
                    parent_message_id=chunk.parent_message_id,
                    timestamp=chunk.timestamp,
                    metadata=chunk.metadata,
                    subagent_run_id=owner,
                )
            )
        return _with_content(out, chunk, owner, ToolCallArgsEvent, tool_call_id=call_id)

    def _reasoning_chunk(self, chunk: ReasoningMessageChunkEvent) -> list[Event]:
        check_delta(chunk.delta)
        owner, stream = self._resolve(_Kind.REASONING, chunk.message_id, chunk.subagent_run_id)
        out: list[Event] = []
        if stream is not None:
            message_id = stream.id
        else:
            assert chunk.message_id is not None
            message_id = chunk.message_id
            stream = _Stream(_Kind.REASONING, message_id, owner, {})
            self._open(stream, out)
            out.append(
                ReasoningMessageStartEvent(
                    message_id=message_id,
                    timestamp=chunk.timestamp,
                    metadata=chunk.metadata,
                    subagent_run_id=owner,
                )
            )
        return _with_content(out, chunk, owner, ReasoningMessageContentEvent, message_id=message_id)

    # ---- explicit events ------------------------------------------------------------------

    def _explicit(
        self, kind: _Kind, entity_id: str, lane: str | None, event: Event, *, opens: bool = False
    ) -> list[Event]:
        """
        An explicit event naming ``entity_id`` arrives in ``lane`` (its ``subagentRunId``;
        absent, the parent agent's): the lane's chunk stream ends, whichever item it is
        assembling (an explicit event for that item is not a continuation: the two spellings
        do not mix within one item).

        A chunk stream of *another* lane assembling ``entity_id`` ends too when the event
        continues or ends that item (its content or end, which the triad rules then refuse
        as for a closed item, ``AGUI-V012``/``V014``/``V024``), but not when it ``opens``
        one (a start, or a tool call's result): "Closing a chunk stream" closes by lane, so
        the item is still open and a second start of it is ``AGUI-V011``/``V013``/``V023``,
        a result for it ``AGUI-V015``, as the official client refuses them ("already in
        progress").
        """
        key = (kind, entity_id)
        # Both lookups before either close, so an unhashable id or tag (an in-process
        # producer skipping the wire parser) raises with nothing closed yet.
        assembler, owned = self._by_id.get(key, lane), lane in self._lanes
        out = [] if opens or assembler == lane else self._close_lane(assembler)
        if owned:
            out.extend(self._close_lane(lane))
        out.append(event)
        return out

    def _text(
        self, event: TextMessageStartEvent | TextMessageContentEvent | TextMessageEndEvent
    ) -> list[Event]:
        opens = isinstance(event, TextMessageStartEvent)
        return self._explicit(
            _Kind.TEXT, event.message_id, event.subagent_run_id, event, opens=opens
        )

    def _tool(
        self,
        event: ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent | ToolCallResultEvent,
    ) -> list[Event]:
        # A result is a message of its own, in its own lane: it does not end another lane's
        # chunk stream assembling its call (that call is still open, which the verifier
        # judges).
        opens = isinstance(event, ToolCallStartEvent | ToolCallResultEvent)
        return self._explicit(
            _Kind.TOOL, event.tool_call_id, event.subagent_run_id, event, opens=opens
        )

    def _reasoning(
        self,
        event: ReasoningMessageStartEvent | ReasoningMessageContentEvent | ReasoningMessageEndEvent,
    ) -> list[Event]:
        opens = isinstance(event, ReasoningMessageStartEvent)
        return self._explicit(
            _Kind.REASONING, event.message_id, event.subagent_run_id, event, opens=opens
        )

    def _in_lane(
        self,
        event: StateSnapshotEvent
        | StateDeltaEvent
        | CustomEvent
        | StepStartedEvent
        | StepFinishedEvent
        | ReasoningStartEvent
        | ReasoningEndEvent,
    ) -> list[Event]:
        # A state, custom, step or reasoning-span event ends the chunk stream of the lane it
        # is attributed to (its tag is provenance: who produced it).  A span's id names a
        # span, never a message, so it ends no stream by id.
        out = self._close_lane(event.subagent_run_id)
        out.append(event)
        return out

    def _subagent_terminal(self, event: SubagentFinishedEvent | SubagentErrorEvent) -> list[Event]:
        # A chunk stream must not outlive its owner, and must not be closed on behalf of an
        # owner that has already ended, or a consumer grouping by subagent attaches it to a
        # group it marked complete.
        out = self._close_lane(event.subagent_run_id)
        out.append(event)
        return out

    def _passes(self, event: Event) -> list[Event]:
        return [event]

    def _run_level(
        self, event: RunStartedEvent | RunFinishedEvent | RunErrorEvent | MessagesSnapshotEvent
    ) -> list[Event]:
        out = self._close_all()
        out.append(event)
        return out

    # ---- bookkeeping ----------------------------------------------------------------------

    def _close_lane(self, lane: str | None) -> list[Event]:
        stream = self._lanes.pop(lane, None)
        if stream is None:
            return []
        del self._by_id[(stream.kind, stream.id)]
        return [_end(stream)]

    def _close_all(self) -> list[Event]:
        out = [_end(stream) for stream in self._lanes.values()]
        self._lanes.clear()
        self._by_id.clear()
        return out


def _end(stream: _Stream) -> Event:
    """The end this normalizer owes for ``stream``, carrying the stream's attribution."""
    if stream.kind is _Kind.TEXT:
        return TextMessageEndEvent(message_id=stream.id, subagent_run_id=stream.owner)
    if stream.kind is _Kind.TOOL:
        return ToolCallEndEvent(tool_call_id=stream.id, subagent_run_id=stream.owner)
    return ReasoningMessageEndEvent(message_id=stream.id, subagent_run_id=stream.owner)


_HANDLERS: Final[dict[type, Callable[[ChunkNormalizer, Any], list[Event]]]] = complete(
    "the chunk normalizer",
    {
        TextMessageChunkEvent: ChunkNormalizer._text_chunk,
        ToolCallChunkEvent: ChunkNormalizer._tool_chunk,
        ReasoningMessageChunkEvent: ChunkNormalizer._reasoning_chunk,
        TextMessageStartEvent: ChunkNormalizer._text,
        TextMessageContentEvent: ChunkNormalizer._text,
        TextMessageEndEvent: ChunkNormalizer._text,
        ToolCallStartEvent: ChunkNormalizer._tool,
        ToolCallArgsEvent: ChunkNormalizer._tool,
        ToolCallEndEvent: ChunkNormalizer._tool,
        ToolCallResultEvent: ChunkNormalizer._tool,
        ReasoningMessageStartEvent: ChunkNormalizer._reasoning,
        ReasoningMessageContentEvent: ChunkNormalizer._reasoning,
        ReasoningMessageEndEvent: ChunkNormalizer._reasoning,
        # "a message, tool-call, step, state, custom or reasoning event arrives in the
        # item's lane" closes it (basic/patterns/streaming, "Closing a chunk stream").
        ReasoningStartEvent: ChunkNormalizer._in_lane,
        ReasoningEndEvent: ChunkNormalizer._in_lane,
        CustomEvent: ChunkNormalizer._in_lane,
        StepStartedEvent: ChunkNormalizer._in_lane,
        StepFinishedEvent: ChunkNormalizer._in_lane,
        StateSnapshotEvent: ChunkNormalizer._in_lane,
        StateDeltaEvent: ChunkNormalizer._in_lane,
        SubagentFinishedEvent: ChunkNormalizer._subagent_terminal,
        SubagentErrorEvent: ChunkNormalizer._subagent_terminal,
        RunStartedEvent: ChunkNormalizer._run_level,
        RunFinishedEvent: ChunkNormalizer._run_level,
        RunErrorEvent: ChunkNormalizer._run_level,
        MessagesSnapshotEvent: ChunkNormalizer._run_level,
        # The specification's exceptions, which "stand aside from assembly and close
        # nothing" (SUBAGENT_STARTED opens a new lane rather than touching this one), and
        # nothing else: a new event stands aside only where its specification says so.
        RawEvent: ChunkNormalizer._passes,
        ActivitySnapshotEvent: ChunkNormalizer._passes,
        ActivityDeltaEvent: ChunkNormalizer._passes,
        ReasoningEncryptedValueEvent: ChunkNormalizer._passes,
        SubagentStartedEvent: ChunkNormalizer._passes,
        # Deprecated events are the receiver's to translate; untranslated, they touch no
        # stream this normalizer tracks.
        ThinkingStartEvent: ChunkNormalizer._passes,
        ThinkingEndEvent: ChunkNormalizer._passes,
        ThinkingTextMessageStartEvent: ChunkNormalizer._passes,
        ThinkingTextMessageContentEvent: ChunkNormalizer._passes,
        ThinkingTextMessageEndEvent: ChunkNormalizer._passes,
    },
    stage="normalizer",
    passes=ChunkNormalizer._passes,
)
"""Every event class, and what it does to the open streams (``_passes``: nothing, on purpose)."""


def normalize_all(events: Iterable[Event]) -> list[Event]:
    """
    Normalize a whole recorded stream, closing whatever is left open at the end.

    The streaming form is :class:`ChunkNormalizer`; this is for tests, recordings and
    anything else that already holds every event.

    Raises:
        ProtocolError: as :meth:`ChunkNormalizer.normalize`.
    """
    normalizer = ChunkNormalizer()
    out: list[Event] = []
    for event in events:
        out.extend(normalizer.normalize(event))
    out.extend(normalizer.finish())
    return out
