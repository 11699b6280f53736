"""
Expand the ``*_CHUNK`` shorthand into the explicit start/content/end events.

A producer that cannot bracket its output (most provider adapters: the upstream API only
says a message ended when the next one begins) sends chunks instead, and a chunk names its
message or tool call **only the first time**::

    TEXT_MESSAGE_CHUNK  messageId=m1 delta="Hel"
    TEXT_MESSAGE_CHUNK               delta="lo"
    TEXT_MESSAGE_CHUNK  messageId=m2 delta="Bye"     <- m1 has just ended

So the open id must be remembered, and the end of a stream is only known from what comes
after it: the next stream of the same owner, a tool result, ``REASONING_END``, the owner's
``SUBAGENT_FINISHED``/``SUBAGENT_ERROR``, the end of the run (``RUN_FINISHED``,
``RUN_ERROR``; also ``RUN_STARTED`` and ``MESSAGES_SNAPSHOT``, which restate the run), an
owner's ``CUSTOM``/``STEP_*``/``REASONING_START`` (the producer has moved on), or
:meth:`ChunkNormalizer.finish` when the transport ends.  That bookkeeping is this module.

*Per owner.*  Once subagents stream concurrently, "the previous chunk" only means something
within one producer, so there is one open stream per owner (``subagentRunId``; ``None`` is
the parent agent).  A chunk that names no id continues the stream of the subagent it is
attributed to; an untagged one continues the parent's open stream, else the only open
stream of its kind, and when several could claim it the chunk is rejected rather than
guessed at, because guessing puts text in the wrong message.

*Explicit events are observed, not changed.*  An explicitly opened message absorbs a
following id-less chunk, and an explicit end for a chunk-opened stream is not duplicated.
``STATE_SNAPSHOT``, ``STATE_DELTA``, ``RAW``, activities, encrypted values and
``SUBAGENT_STARTED`` stand aside: a state delta between two chunks of one message must not
split it in half (conformance: ``raw-does-not-close-chunk-stream``), while ``CUSTOM`` does
close its owner's stream (``custom-closes-chunk-stream-fatal``).

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
    A stream in flight; at most one per owner.

    ``owed`` says whether this normalizer synthesized the opener and therefore owes the end.
    ``fields`` holds what the opener established (role/name, toolCallName/parentMessageId)
    so a repeating continuation can be judged; ``None`` when the stream was opened by an
    explicit content event and nothing was established.  (A plain class: one is built per
    stream, and compiled it is a native one, where an attrs class would stay Python.)
    """

    kind: _Kind
    id: str
    owner: str | None
    owed: bool
    fields: dict[str, str | None] | None

    def __init__(
        self,
        kind: _Kind,
        id: str,
        owner: str | None,
        owed: bool,
        fields: dict[str, str | None] | None,
    ) -> None:
        self.kind = kind
        self.id = id
        self.owner = owner
        self.owed = owed
        self.fields = fields


@attrs.frozen
class StreamInFlight:
    """
    The stream one owner has in flight: what an id-less chunk of that owner continues,
    and, when a chunk opened it, the end the normalizer owes (see
    :meth:`ChunkNormalizer.streams`).

    ``kind`` is ``"text"``, ``"tool"`` or ``"reasoning"``; ``fields`` what the opener
    established (``role``/``name``, ``toolCallName``/``parentMessageId``), empty when
    nothing was.
    """

    kind: str
    id: str
    owner: str | None
    chunked: bool
    """Opened by a chunk: the normalizer synthesizes its end when the owner moves on."""
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
        max_open_entities: Most streams tracked at once (one per owner).  A producer that
            opens streams under ever new ``subagentRunId`` values and never closes them is
            stopped with ``AGUI-V093`` instead of growing this normalizer without bound.
    """

    __slots__ = ("_by_id", "_lanes", "_max_open")

    def __init__(self, *, max_open_entities: int = MAX_OPEN_ENTITIES) -> None:
        self._lanes: dict[str | None, _Stream] = {}
        self._by_id: dict[tuple[_Kind, str], str | None] = {}
        self._max_open = max_open_entities

    @property
    def is_open(self) -> bool:
        """Whether any stream (chunk-opened or explicit) is currently tracked."""
        return bool(self._lanes)

    def streams(self) -> list[StreamInFlight]:
        """
        Each owner's stream in flight, in the order they were taken up.

        A consumer that restates a stream (a late joiner's prelude,
        :mod:`aguikit.server.prelude`) reads here which items chunks may continue and
        which ends are owed, instead of re-deriving this normalizer's bookkeeping.
        """
        return [
            StreamInFlight(
                str(stream.kind), stream.id, stream.owner, stream.owed, dict(stream.fields or {})
            )
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
                    reason=f"subagent '{tag}' has no {_NOUN[kind]} open to continue.",
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
            reason=f"no {_NOUN[kind]} is open to continue.",
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
        out.extend(self._close_owner(stream.owner))
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
                _Kind.TEXT,
                message_id,
                owner,
                True,
                {"role": str(established), "name": chunk.name},
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
                True,
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
            stream = _Stream(_Kind.REASONING, message_id, owner, True, {})
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
        self,
        kind: _Kind,
        entity_id: str,
        tag: str | None,
        event: Event,
        fields: dict[str, str | None] | None,
    ) -> list[Event]:
        # The owner: the event's tag, else the owner of the stream already open under that
        # id, else the parent (an untagged continuation of a subagent's stream is legal and
        # is not the parent's).
        owner = tag if tag is not None else self._by_id.get((kind, entity_id))
        current = self._lanes.get(owner)
        if current is not None and current.kind is kind and current.id == entity_id:
            # Already tracked (possibly a stream this normalizer opened: the end stays owed).
            if current.fields is None and fields is not None:
                current.fields = fields
            return [event]
        # The same id tracked under another owner is a contradiction the verifier reports;
        # keep the bookkeeping consistent and let it.
        self._check_room(owner, str(event.type), entity_id)
        self._forget(kind, entity_id)
        out = self._close_owner(owner)
        stream = _Stream(kind, entity_id, owner, False, fields)
        self._lanes[owner] = stream
        self._by_id[(kind, entity_id)] = owner
        out.append(event)
        return out

    def _forget(self, kind: _Kind, entity_id: str) -> None:
        key = (kind, entity_id)
        if key in self._by_id:
            self._lanes.pop(self._by_id.pop(key), None)

    def _text_start(self, event: TextMessageStartEvent) -> list[Event]:
        role = TextMessageRole.ASSISTANT if event.role is None else event.role
        return self._explicit(
            _Kind.TEXT,
            event.message_id,
            event.subagent_run_id,
            event,
            {"role": str(role), "name": event.name},
        )

    def _text_content(self, event: TextMessageContentEvent) -> list[Event]:
        return self._explicit(_Kind.TEXT, event.message_id, event.subagent_run_id, event, None)

    def _text_end(self, event: TextMessageEndEvent) -> list[Event]:
        self._forget(_Kind.TEXT, event.message_id)
        return [event]

    def _tool_start(self, event: ToolCallStartEvent) -> list[Event]:
        fields: dict[str, str | None] = {
            "toolCallName": event.tool_call_name,
            "parentMessageId": event.parent_message_id,
        }
        return self._explicit(_Kind.TOOL, event.tool_call_id, event.subagent_run_id, event, fields)

    def _tool_args(self, event: ToolCallArgsEvent) -> list[Event]:
        return self._explicit(_Kind.TOOL, event.tool_call_id, event.subagent_run_id, event, None)

    def _tool_end(self, event: ToolCallEndEvent) -> list[Event]:
        self._forget(_Kind.TOOL, event.tool_call_id)
        return [event]

    def _tool_result(self, event: ToolCallResultEvent) -> list[Event]:
        # A result answers a call, so the call is over, and a chunk-streamed call has no end
        # of its own: without this the result would overtake the end this normalizer owes.
        # The answering party has also moved on from whatever else it was streaming.
        out = self._close_id(_Kind.TOOL, event.tool_call_id)
        out.extend(self._close_owner(event.subagent_run_id))
        out.append(event)
        return out

    def _reasoning_start(self, event: ReasoningMessageStartEvent) -> list[Event]:
        return self._explicit(_Kind.REASONING, event.message_id, event.subagent_run_id, event, {})

    def _reasoning_content(self, event: ReasoningMessageContentEvent) -> list[Event]:
        return self._explicit(_Kind.REASONING, event.message_id, event.subagent_run_id, event, None)

    def _reasoning_end(self, event: ReasoningMessageEndEvent) -> list[Event]:
        self._forget(_Kind.REASONING, event.message_id)
        return [event]

    def _reasoning_block_end(self, event: ReasoningEndEvent) -> list[Event]:
        # A closing reasoning block implies its message closed, whether it shares the
        # block's id or is simply the owner's open reasoning stream.
        out = self._close_id(_Kind.REASONING, event.message_id)
        current = self._lanes.get(event.subagent_run_id)
        if current is not None and current.kind is _Kind.REASONING:
            out.extend(self._close_owner(event.subagent_run_id))
        out.append(event)
        return out

    def _owner_moves_on(
        self, event: CustomEvent | StepStartedEvent | StepFinishedEvent | ReasoningStartEvent
    ) -> list[Event]:
        out = self._close_owner(event.subagent_run_id)
        out.append(event)
        return out

    def _subagent_terminal(self, event: SubagentFinishedEvent | SubagentErrorEvent) -> list[Event]:
        # A stream must not be closed on behalf of an owner that has already ended, or a
        # consumer grouping by subagent attaches it to a group it marked complete.
        out = self._close_owner(event.subagent_run_id)
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

    def _close_owner(self, owner: str | None) -> list[Event]:
        stream = self._lanes.pop(owner, None)
        if stream is None:
            return []
        del self._by_id[(stream.kind, stream.id)]
        return _settle(stream)

    def _close_id(self, kind: _Kind, entity_id: str) -> list[Event]:
        key = (kind, entity_id)
        if key not in self._by_id:
            return []
        return self._close_owner(self._by_id[key])

    def _close_all(self) -> list[Event]:
        out: list[Event] = []
        for stream in self._lanes.values():
            out.extend(_settle(stream))
        self._lanes.clear()
        self._by_id.clear()
        return out


def _settle(stream: _Stream) -> list[Event]:
    """The end this normalizer owes for ``stream``, carrying the stream's attribution."""
    if not stream.owed:
        return []
    end: Event
    if stream.kind is _Kind.TEXT:
        end = TextMessageEndEvent(message_id=stream.id, subagent_run_id=stream.owner)
    elif stream.kind is _Kind.TOOL:
        end = ToolCallEndEvent(tool_call_id=stream.id, subagent_run_id=stream.owner)
    else:
        end = ReasoningMessageEndEvent(message_id=stream.id, subagent_run_id=stream.owner)
    return [end]


_HANDLERS: Final[dict[type, Callable[[ChunkNormalizer, Any], list[Event]]]] = complete(
    "the chunk normalizer",
    {
        TextMessageChunkEvent: ChunkNormalizer._text_chunk,
        ToolCallChunkEvent: ChunkNormalizer._tool_chunk,
        ReasoningMessageChunkEvent: ChunkNormalizer._reasoning_chunk,
        TextMessageStartEvent: ChunkNormalizer._text_start,
        TextMessageContentEvent: ChunkNormalizer._text_content,
        TextMessageEndEvent: ChunkNormalizer._text_end,
        ToolCallStartEvent: ChunkNormalizer._tool_start,
        ToolCallArgsEvent: ChunkNormalizer._tool_args,
        ToolCallEndEvent: ChunkNormalizer._tool_end,
        ToolCallResultEvent: ChunkNormalizer._tool_result,
        ReasoningMessageStartEvent: ChunkNormalizer._reasoning_start,
        ReasoningMessageContentEvent: ChunkNormalizer._reasoning_content,
        ReasoningMessageEndEvent: ChunkNormalizer._reasoning_end,
        ReasoningEndEvent: ChunkNormalizer._reasoning_block_end,
        ReasoningStartEvent: ChunkNormalizer._owner_moves_on,
        CustomEvent: ChunkNormalizer._owner_moves_on,
        StepStartedEvent: ChunkNormalizer._owner_moves_on,
        StepFinishedEvent: ChunkNormalizer._owner_moves_on,
        SubagentFinishedEvent: ChunkNormalizer._subagent_terminal,
        SubagentErrorEvent: ChunkNormalizer._subagent_terminal,
        RunStartedEvent: ChunkNormalizer._run_level,
        RunFinishedEvent: ChunkNormalizer._run_level,
        RunErrorEvent: ChunkNormalizer._run_level,
        MessagesSnapshotEvent: ChunkNormalizer._run_level,
        # Standing aside on purpose: a state delta or a raw event between two chunks of one
        # message must not split it (corpus raw-does-not-close-chunk-stream).
        StateSnapshotEvent: ChunkNormalizer._passes,
        StateDeltaEvent: ChunkNormalizer._passes,
        ActivitySnapshotEvent: ChunkNormalizer._passes,
        ActivityDeltaEvent: ChunkNormalizer._passes,
        RawEvent: ChunkNormalizer._passes,
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
