"""
Typed events to bytes and back: one document, an SSE frame, a JSONL line.

A producer holds typed events (or wire dicts); what travels is text.  The bytes are the
official Python SDK's, byte for byte (``ag_ui.encoder.EventEncoder``: compact JSON, UTF-8
rather than ``\\u`` escapes, the envelope members first), so a stream aguikit writes can be
diffed against one the SDK wrote and read by every official client.

This floor only composes the ones below it: :func:`aguikit.wire.to_wire` turns a typed
event into its wire dict, :mod:`aguikit.jsonio` writes and reads JSON, and the frame
writers of :mod:`aguikit.transport` put the text in an SSE frame or a JSONL line.  The
transports themselves know only wire dicts, so they can be used, and swapped, without the
models.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any, Final

import attrs

from ._generated import models
from ._generated.models import Event
from ._generated.registry import TAGS, UNIONS
from .errors import SchemaValidationError
from .jsonio import dumps_wire, loads
from .limits import MAX_JSON_DEPTH
from .proto import encode_proto_frame
from .transport import jsonl, sse
from .validate import is_valid, iter_schema_errors
from .wire import parse_event, to_wire

__all__ = [
    "dumps_event",
    "encode_jsonl",
    "encode_proto",
    "encode_sse",
    "encode_sse_bytes",
    "loads_event",
    "wire_of",
    "write_jsonl",
]

_EVENT: Final = ("type", "timestamp", "rawEvent", "metadata", "subagentRunId")
"""The SDK's ``BaseEvent`` fields, which every event writes first."""

_NAMED: Final = ("subagentRunId", "id", "role", "name", "encryptedValue", "metadata")
"""The SDK's ``BaseMessage`` fields, which a named message writes before its content."""

SDK_ORDER: Final[Mapping[str, tuple[str, ...]]] = {
    "ActivityDeltaEvent": (*_EVENT, "messageId", "activityType", "patch"),
    "ActivityMessage": ("subagentRunId", "id", "role", "activityType", "content", "metadata"),
    "ActivitySnapshotEvent": (*_EVENT, "messageId", "activityType", "content", "replace"),
    "AssistantMessage": (*_NAMED, "content", "toolCalls"),
    "AudioPart": ("type", "id", "source", "metadata"),
    "CustomEvent": (*_EVENT, "name", "value"),
    "DeveloperMessage": (*_NAMED, "content"),
    "DocumentPart": ("type", "id", "source", "metadata"),
    "ImagePart": ("type", "id", "source", "metadata"),
    "Interrupt": (
        "subagentRunId",
        "id",
        "reason",
        "message",
        "toolCallId",
        "responseSchema",
        "expiresAt",
        "metadata",
    ),
    "MessagesSnapshotEvent": (*_EVENT[:4], "messages"),
    "RawEvent": (*_EVENT, "event", "source"),
    "ReasoningEncryptedValueEvent": (*_EVENT, "subtype", "entityId", "encryptedValue"),
    "ReasoningEndEvent": (*_EVENT, "messageId"),
    "ReasoningMessage": ("subagentRunId", "id", "role", "content", "encryptedValue", "metadata"),
    "ReasoningMessageContentEvent": (*_EVENT, "messageId", "delta"),
    "ReasoningMessageEndEvent": (*_EVENT, "messageId"),
    "ReasoningMessageStartEvent": (*_EVENT, "messageId", "role"),
    "ReasoningStartEvent": (*_EVENT, "messageId"),
    "RunAgentInput": (
        "threadId",
        "runId",
        "protocolVersion",
        "parentRunId",
        "state",
        "messages",
        "tools",
        "context",
        "forwardedProps",
        "resume",
    ),
    "RunErrorEvent": (*_EVENT[:4], "message", "code", "usage"),
    "RunFinishedEvent": (*_EVENT[:4], "threadId", "runId", "result", "outcome", "usage"),
    "RunStartedEvent": (
        *_EVENT[:4],
        "threadId",
        "runId",
        "protocolVersion",
        "parentRunId",
        "input",
    ),
    "StateDeltaEvent": (*_EVENT, "delta"),
    "StateSnapshotEvent": (*_EVENT, "snapshot"),
    "StepFinishedEvent": (*_EVENT, "stepName"),
    "StepStartedEvent": (*_EVENT, "stepName"),
    "SubagentErrorEvent": (*_EVENT, "message", "code"),
    "SubagentFinishedEvent": (*_EVENT, "result", "outcome"),
    "SubagentStartedEvent": (
        *_EVENT,
        "name",
        "description",
        "parentSubagentRunId",
        "parentToolCallId",
        "parentMessageId",
    ),
    "SystemMessage": (*_NAMED, "content"),
    "TextMessageContentEvent": (*_EVENT, "messageId", "delta"),
    "TextMessageEndEvent": (*_EVENT, "messageId"),
    "TextMessageStartEvent": (*_EVENT, "messageId", "role", "name"),
    "TextPart": ("type", "id", "text", "metadata"),
    "ToolCallArgsEvent": (*_EVENT, "toolCallId", "delta"),
    "ToolCallEndEvent": (*_EVENT, "toolCallId"),
    "ToolCallResultEvent": (*_EVENT, "messageId", "toolCallId", "content", "role"),
    "ToolCallStartEvent": (*_EVENT, "toolCallId", "toolCallName", "parentMessageId"),
    "ToolMessage": (
        "subagentRunId",
        "id",
        "role",
        "content",
        "toolCallId",
        "error",
        "encryptedValue",
        "metadata",
    ),
    "UserMessage": (*_NAMED, "content"),
    "VideoPart": ("type", "id", "source", "metadata"),
}
"""
Member order of the official SDK's pydantic models, where it differs from aguikit's class.

JSON member order means nothing, but ``pydantic`` writes a model's fields in declaration
order (inherited ones first: the event envelope, a message's ``subagentRunId``), and a
stream that is byte-identical to the SDK's can be diffed and cached against it.
``tests/test_encode.py`` compares this table with the installed SDK, so it cannot drift.
"""

_Reorder = Callable[[Any], Any]
_CLASSES: Final = {
    name: cls for name, cls in vars(models).items() if isinstance(cls, type) and attrs.has(cls)
}
_reorderers: dict[type, _Reorder] = {}


def _nested(hint: Any) -> _Reorder | None:
    """How to reorder a value of type ``hint``, or ``None`` when it holds no model."""
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and attrs.has(hint):
        return _reorderer(hint)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        found = _nested(item)
        if found is None:
            return None
        inner: _Reorder = found
        return lambda value: [inner(v) for v in value] if isinstance(value, list) else value
    if origin in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        table: dict[tuple[str, Any], _Reorder] = {}
        others: list[_Reorder] = []
        for member in members:
            if isinstance(member, type) and attrs.has(member) and member.__name__ in TAGS:
                key, value = TAGS[member.__name__]
                table[key, value] = _reorderer(member)
            elif (nested := _nested(member)) is not None:
                others.append(nested)
        keys = {key for key, _ in table}
        if not table and not others:
            return None

        def union(value: Any) -> Any:
            if isinstance(value, Mapping):
                for key in keys:
                    hit = table.get((key, value.get(key)))
                    if hit is not None:
                        return hit(value)
            for other in others:
                value = other(value)
            return value

        return union
    return None


def _reorderer(cls: type) -> _Reorder:
    """The function that writes a wire dict of ``cls`` in the SDK's member order."""
    found = _reorderers.get(cls)
    if found is not None:
        return found
    hints = typing.get_type_hints(cls)
    fields = [f for f in attrs.fields(cls) if f.name != "extra_members"]
    wire_names = {f.name: str(f.metadata.get("wire", f.name)) for f in fields}
    order = SDK_ORDER.get(cls.__name__) or tuple(wire_names.values())
    nested = {wire_names[f.name]: n for f in fields if (n := _nested(hints[f.name])) is not None}

    def reorder(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        out = {
            key: (nested[key](value[key]) if key in nested else value[key])
            for key in order
            if key in value
        }
        if len(out) != len(value):
            out.update(value)  # undeclared members keep their place after the declared ones
        return out

    _reorderers[cls] = reorder  # set before nested ones resolve: classes may recurse
    return reorder


def _event_class(wire: Mapping[str, Any]) -> type | None:
    key, table = UNIONS["Event"]
    name = table.get(wire.get(key))  # type: ignore[arg-type]
    return _CLASSES.get(name) if name is not None else None


def _checked_wire(event: Event | Mapping[str, Any], validate: bool) -> Mapping[str, Any]:
    """The wire dict of ``event`` in the SDK's member order, validated unless told not to."""
    wire = wire_of(event)
    if validate and not is_valid(wire, strict=False):
        issues = list(iter_schema_errors(wire, strict=False))
        kind = wire.get("type")
        raise SchemaValidationError(kind if isinstance(kind, str) else "Event", issues)
    cls = _event_class(wire) if isinstance(wire, Mapping) else None
    if cls is None:
        return wire
    ordered: Mapping[str, Any] = _reorderer(cls)(wire)
    return ordered


def wire_of(event: Event | Mapping[str, Any]) -> Mapping[str, Any]:
    """
    The wire dict of ``event``: converted when typed, taken as it is when already a mapping.

    Raises:
        WireFormatError: ``event`` is neither a generated model nor a mapping.
    """
    if isinstance(event, Mapping):
        return event
    return to_wire(event)


def dumps_event(event: Event | Mapping[str, Any], *, validate: bool = True) -> str:
    """
    Encode an event as compact JSON, byte for byte what the official Python SDK's encoder
    writes for the same event (no spaces, non-ASCII kept as UTF-8, the SDK's member order
    at every depth, floats formatted as pydantic formats them).

    Args:
        event: A typed event or a wire dict.
        validate: Check the event against its schema definition first (tolerantly:
            undeclared members a receiver kept are allowed).  On by default because a
            typed constructor does not check types (``message_id=5``, ``role="bot"``) and
            an encoder is the last place an invalid event can be stopped before every
            consumer sees it; pass ``False`` on a hot path whose events are known good.

    Raises:
        SchemaValidationError: ``validate`` and the event breaks its definition.
        WireFormatError: ``event`` is not a generated model or a mapping, or holds a value
            JSON cannot carry (``NaN``, an object of a foreign type).

    .. versionchanged:: 0.3.0  Validates by default; nested members in the SDK's order.
    """
    return dumps_wire(_checked_wire(event, validate))


def loads_event(text: str | bytes, *, check: bool = True, max_depth: int = MAX_JSON_DEPTH) -> Event:
    """
    Decode and parse one JSON-encoded event.

    Args:
        text: The document, as text or UTF-8 bytes.
        check: Validate before parsing (see :func:`aguikit.parse_event`).
        max_depth: Deepest nesting accepted (:data:`aguikit.limits.MAX_JSON_DEPTH`), the
            same guard every stream decoder applies.

    Raises:
        DecodeError: The text is not JSON (or not UTF-8); ``byte_offset`` is where.
        LimitExceededError: The JSON nests deeper than ``max_depth``.
        UnknownEventTypeError, SchemaValidationError: As :func:`aguikit.parse_event`.
    """
    return parse_event(loads(text, max_depth=max_depth), check=check)


def encode_sse(event: Event | Mapping[str, Any], *, validate: bool = True) -> str:
    """
    One SSE frame for ``event`` (``data: <json>`` and a blank line), exactly as
    ``ag_ui.encoder.EventEncoder().encode()`` writes it.

    Raises:
        SchemaValidationError, WireFormatError: As :func:`dumps_event`.

    .. versionchanged:: 0.3.0  Validates by default (``validate=False`` opts out).
    """
    return sse.encode(_checked_wire(event, validate))


def encode_sse_bytes(event: Event | Mapping[str, Any], *, validate: bool = True) -> bytes:
    """
    :func:`encode_sse`, as the UTF-8 bytes a streaming response writes.

    Raises:
        WireFormatError: Also for a lone surrogate, which UTF-8 cannot carry.
        SchemaValidationError: As :func:`dumps_event`.
    """
    return sse.encode_bytes(_checked_wire(event, validate))


def encode_jsonl(event: Event | Mapping[str, Any], *, validate: bool = True) -> str:
    """
    One JSONL line for ``event``: the SDK's compact JSON and ``\\n``.

    Raises:
        SchemaValidationError, WireFormatError: As :func:`dumps_event`.
    """
    return jsonl.encode_line(_checked_wire(event, validate))


def write_jsonl(
    events: Iterable[Event | Mapping[str, Any]], fp: IO[str], *, validate: bool = True
) -> int:
    """
    Write events (typed or wire dicts) to a text stream, one per line.

    Returns:
        How many events were written.

    Raises:
        SchemaValidationError, WireFormatError: As :func:`dumps_event`, for the first
            event that fails (the ones before it are written).
    """
    return jsonl.write_jsonl((_checked_wire(event, validate) for event in events), fp)


def encode_proto(event: Event | Mapping[str, Any]) -> bytes:
    """
    One event as an ``application/vnd.ag-ui.event+proto`` frame: the 4-byte big-endian
    length, then the ``ag_ui.Event`` message, byte for byte what ``@ag-ui/proto`` encodes
    for the same event.  This is what a server writes per event when a client's ``Accept``
    chose the binary transport.

    Raises:
        EncodeError: A ``THINKING_*`` event (``AGUI-D006``: the binary transport has no slot
            for it; send the ``REASONING_*`` event it translates to).
    """
    return encode_proto_frame(event)
