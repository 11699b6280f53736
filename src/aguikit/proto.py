"""
The protobuf converter: AG-UI events to ``ag_ui.Event`` messages and back, as ``@ag-ui/proto`` does.

The binary transport (``application/vnd.ag-ui.event+proto``) carries the same events as
SSE in a different shape: the envelope members (``type``, ``timestamp``, ``rawEvent``,
``metadata``) ride in a ``BaseEvent``, a run outcome is flattened to its type name plus
its members, a message's content is one of three fields chosen by its role, a patch
operation's ``op`` is an enum, and every JSON-valued member (state, patch values,
``RAW.event``, ``CUSTOM.value``, results) is a ``google.protobuf.Value`` or ``Struct``.
This module is the one place that knows those folds.  It mirrors the official
TypeScript ``encode``/``decode`` rule for rule, so the bytes aguikit writes are the bytes
``@ag-ui/proto`` 1.0.0 writes for the same event (``tests/test_proto_official.py``).

Where protobuf cannot tell two JSON values apart, the decoded value is the official
decoder's: a JSON number comes back as an integer when it is integral (protobuf carries
every number as a double, as JavaScript does), an absent repeated member of a run's input
(``tools``, ``context``, ``resume``) comes back as an empty list, and an empty required
string comes back as ``""``.  Everything else round-trips exactly.

Deliberately not here: the framing (4-byte lengths, :mod:`aguikit.transport.proto`, a
floor below) and ``THINKING_*`` events, which the official encoding has no slot for and
this one refuses with ``AGUI-D006`` (``docs/protobuf.md`` says why).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Final

from google.protobuf import struct_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError as _ProtobufDecodeError
from google.protobuf.message import EncodeError as _ProtobufEncodeError
from google.protobuf.message import Message as _Message
from google.protobuf.unknown_fields import UnknownFieldSet

from ._generated import agui_pb2 as pb
from ._generated.models import Event
from .catalogue import DECODE_RULES
from .errors import DecodeError, EncodeError, short_repr
from .transport.proto import DEFAULT_MAX_MESSAGE_BYTES, aiter_frames, encode_frame, iter_frames
from .wire import parse_event, to_wire

UNKNOWN_ARM_PREFIX: Final = "ag_ui.Event#"
"""The type a decoded frame gets when its envelope arm is one this build does not know
(``ag_ui.Event#42`` for field 42): no event type is spelled so, so the receiver drops it
as unrecognised, with a warning naming it."""

_LENGTH_DELIMITED: Final = 2
"""Protobuf's wire type of a length-delimited field: every envelope arm is a message."""

__all__ = [
    "MEDIA_TYPE",
    "aiter_proto",
    "decode_message",
    "encode_message",
    "encode_proto_frame",
    "from_proto",
    "iter_proto",
    "iter_proto_wire",
    "to_proto",
]

MEDIA_TYPE: Final = "application/vnd.ag-ui.event+proto"

_REPLACEMENT: Final = {
    "THINKING_START": "REASONING_START",
    "THINKING_END": "REASONING_END",
    "THINKING_TEXT_MESSAGE_START": "REASONING_MESSAGE_START",
    "THINKING_TEXT_MESSAGE_CONTENT": "REASONING_MESSAGE_CONTENT",
    "THINKING_TEXT_MESSAGE_END": "REASONING_MESSAGE_END",
}
_ARM_OF_TYPE: Final = {
    t: pb.Event.DESCRIPTOR.fields_by_name[t.lower()].json_name
    for t in pb.EventType.DESCRIPTOR.values_by_name
}
"""Event type → the JSON name of its ``oneof`` arm (``RUN_STARTED`` → ``runStarted``)."""
_TYPE_OF_ARM: Final = {t.lower(): t for t in _ARM_OF_TYPE}
"""The arm's field name, as ``WhichOneof`` gives it → the event type."""
_BASE: Final = ("type", "timestamp", "rawEvent", "metadata")
_PART_KINDS: Final = ("text", "image", "audio", "video", "document")
_SOURCE_KINDS: Final = ("data", "url", "file")
_PARTS_ROLES: Final = frozenset({"user", "tool"})
_KNOWN_ROLES: Final = frozenset(
    {"developer", "system", "assistant", "user", "tool", "activity", "reasoning"}
)


# --------------------------------------------------------------------------- the mechanism
#
# Messages are filled and read through their descriptors, member by member, with the JSON
# name protobuf derives from each field (``message_id`` → ``messageId``, the wire name).
# ``google.protobuf.json_format`` does the same job generically and several times slower;
# this keeps to what AG-UI's messages use: strings, bools, int64, enums, nested and
# repeated messages, and ``Value``/``Struct`` for JSON.

_VALUE: Final = "google.protobuf.Value"
_STRUCT: Final = "google.protobuf.Struct"
_Plan = dict[str, tuple[str, FieldDescriptor]]
_PLANS: dict[str, _Plan] = {}


def _plan(descriptor: Any) -> _Plan:  # a Descriptor (pure-Python or upb)
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = {f.json_name: (f.name, f) for f in descriptor.fields}
        _PLANS[descriptor.full_name] = plan
    return plan


MAX_MESSAGE_DEPTH: Final = 100
"""
How deeply the ``protobuf`` runtime nests messages when it parses (upb's default, not
configurable from Python).  JSON rides as nested ``Value``/``Struct`` messages, three per
object level and two per array level, so this bounds a JSON value at roughly 30 levels of
objects: the encoder refuses deeper values with an :class:`EncodeError` instead of writing
bytes no Python reader could parse.
"""


def _too_deep(depth: int) -> None:
    if depth > MAX_MESSAGE_DEPTH:
        raise EncodeError(
            f"a JSON value nests deeper than the protobuf runtime reads "
            f"({MAX_MESSAGE_DEPTH} messages, about 30 levels of objects)"
        )


def _set_value(target: struct_pb2.Value, value: Any, depth: int) -> None:
    _too_deep(depth)
    if value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, dict):
        _set_struct(target.struct_value, value, depth + 1)
    elif isinstance(value, list):
        items = target.list_value
        items.SetInParent()
        for item in value:
            _set_value(items.values.add(), item, depth + 2)
    else:
        raise TypeError(f"a JSON value cannot be a {type(value).__name__}")


def _set_struct(target: struct_pb2.Struct, value: Mapping[str, Any], depth: int) -> None:
    _too_deep(depth)
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    target.SetInParent()
    fields = target.fields
    for key, item in value.items():
        _set_value(fields[key], item, depth + 2)


def _fill(message: _Message, data: Mapping[str, Any], depth: int = 1) -> None:
    """Set every member of ``data`` the message has a field for; ignore the rest."""
    plan = _plan(message.DESCRIPTOR)
    message.SetInParent()
    for key, value in data.items():
        entry = plan.get(key)
        if entry is None:
            continue
        name, field = entry
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            full = field.message_type.full_name if field.message_type else ""
            if field.is_repeated:
                container = getattr(message, name)
                for item in value:
                    _fill(container.add(), item, depth + 1)
            elif full == _VALUE:
                _set_value(getattr(message, name), value, depth + 1)
            elif full == _STRUCT:
                _set_struct(getattr(message, name), value, depth + 1)
            else:
                _fill(getattr(message, name), value, depth + 1)
        elif field.is_repeated:
            getattr(message, name).extend(value)
        elif field.type == FieldDescriptor.TYPE_ENUM:
            enum = field.enum_type
            assert enum is not None  # an enum field always has its enum
            setattr(message, name, enum.values_by_name[value].number)
        else:
            setattr(message, name, value)


def _value_of(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        # Integral doubles back to integers, as JavaScript prints them (below 1e21):
        # protobuf, like JavaScript, has only doubles.
        return int(number) if number.is_integer() and abs(number) < 1e21 else number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return _struct_of(value.struct_value)
    if kind == "list_value":
        return [_value_of(item) for item in value.list_value.values]
    if kind == "null_value":
        return None
    raise ValueError("a google.protobuf.Value with no kind set")


def _struct_of(struct: struct_pb2.Struct) -> dict[str, Any]:
    return {key: _value_of(item) for key, item in struct.fields.items()}


def _read(message: _Message) -> dict[str, Any]:
    """Every field as ``json_format`` prints it with defaults, minus its string int64s."""
    out: dict[str, Any] = {}
    for json_name, (name, field) in _plan(message.DESCRIPTOR).items():
        if field.has_presence and not message.HasField(name):
            continue
        value = getattr(message, name)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            full = field.message_type.full_name if field.message_type else ""
            if field.is_repeated:
                out[json_name] = [_read(item) for item in value]
            elif full == _VALUE:
                out[json_name] = _value_of(value)
            elif full == _STRUCT:
                out[json_name] = _struct_of(value)
            else:
                out[json_name] = _read(value)
        elif field.is_repeated:
            out[json_name] = list(value)
        elif field.type == FieldDescriptor.TYPE_ENUM:
            enum = field.enum_type
            named = None if enum is None else enum.values_by_number.get(value)
            out[json_name] = named.name if named is not None else value
        else:
            out[json_name] = value
    return out


# --------------------------------------------------------------------------- to protobuf


def _metadata(value: Any) -> Any:
    return value if isinstance(value, dict) else None


def _source_to(source: Mapping[str, Any]) -> dict[str, Any]:
    kind = source.get("type")
    return {str(kind): {k: v for k, v in source.items() if k != "type"}}


def _part_to(part: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in part.items() if k != "type"}
    if "source" in body:
        body["source"] = _source_to(body["source"])
    return {str(part.get("type")): body}


def _message_to(message: Mapping[str, Any]) -> dict[str, Any]:
    wire = dict(message)
    content = wire.get("content")
    if isinstance(content, list):
        wire["contentParts"] = [_part_to(p) for p in content]
        del wire["content"]
    elif wire.get("role") == "activity":
        wire["activityContent"] = content if isinstance(content, dict) else {}
        wire.pop("content", None)
    return wire


def _ops_to(ops: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**op, "op": str(op.get("op", "")).upper()} for op in ops]


def _envelope(wire: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ag_ui.Event`` of a wire dict, as a protobuf-JSON dict (``@ag-ui/proto`` encode)."""
    kind = wire.get("type")
    arm = _ARM_OF_TYPE.get(kind) if isinstance(kind, str) else None
    if arm is None:
        if isinstance(kind, str) and kind in _REPLACEMENT:
            raise EncodeError(
                f"{kind} has no protobuf encoding; send {_REPLACEMENT[kind]} instead",
                rule=DECODE_RULES["thinking"],
                event_type=str(kind),
            )
        raise EncodeError(f"{short_repr(kind)} is not an event type the protobuf encoding has")
    base: dict[str, Any] = {"type": kind}
    for member in ("timestamp", "rawEvent"):
        if member in wire:
            base[member] = wire[member]
    if _metadata(wire.get("metadata")) is not None:
        base["metadata"] = wire["metadata"]
    rest = {k: v for k, v in wire.items() if k not in _BASE}
    if kind == "MESSAGES_SNAPSHOT":
        rest["messages"] = [_message_to(m) for m in rest.get("messages", [])]
    elif kind == "RUN_FINISHED":
        outcome = rest.pop("outcome", None)
        if isinstance(outcome, Mapping):
            rest["outcome"] = outcome.get("type", "")
            if outcome.get("type") == "success":
                rest["pendingToolCallIds"] = outcome.get("pendingToolCallIds", [])
            elif outcome.get("type") == "interrupt":
                rest["interrupts"] = outcome.get("interrupts", [])
    elif kind == "SUBAGENT_FINISHED":
        outcome = rest.pop("outcome", None)
        if isinstance(outcome, Mapping):
            rest["outcome"] = outcome.get("type", "")
            if outcome.get("type") == "suspended":
                rest["interruptIds"] = outcome.get("interruptIds", [])
    elif kind == "STATE_DELTA":
        rest["delta"] = _ops_to(rest.get("delta", []))
    elif kind == "ACTIVITY_DELTA":
        rest["patch"] = _ops_to(rest.get("patch", []))
    elif kind == "TOOL_CALL_RESULT" and isinstance(rest.get("content"), list):
        rest["contentParts"] = [_part_to(p) for p in rest.pop("content")]
    elif kind == "RUN_STARTED" and isinstance(rest.get("input"), Mapping):
        given = rest["input"]
        rest["input"] = {**given, "messages": [_message_to(m) for m in given.get("messages", [])]}
    return {arm: {"baseEvent": base, **rest}}


def to_proto(event: Event | Mapping[str, Any]) -> pb.Event:
    """
    The ``ag_ui.Event`` message of a typed event or a wire dict.

    Members the protobuf encoding has no field for (an undeclared extra member) are left
    out, as ``@ag-ui/proto`` leaves them out.

    Raises:
        EncodeError: A ``THINKING_*`` event (``AGUI-D006``), or a value the message cannot
            hold.
    """
    wire = event if isinstance(event, Mapping) else to_wire(event)
    message = pb.Event()
    try:
        _fill(message, _envelope(wire))
    except EncodeError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
        detail = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise EncodeError(f"{short_repr(wire.get('type'))}: {detail}") from None
    return message


def encode_message(event: Event | Mapping[str, Any]) -> bytes:
    """
    One event as protobuf bytes, without the length prefix: what ``@ag-ui/proto``'s
    ``encode`` returns for the same event when its objects' keys come in this encoder's
    order. Map members are written in protobuf's deterministic order, so the bytes are
    reproducible: by UTF-8 bytes, a key after the longer keys it begins (upb's order; see
    ``docs/protobuf.md``).

    Raises:
        EncodeError: See :func:`to_proto`.
    """
    try:
        return to_proto(event).SerializeToString(deterministic=True)
    except _ProtobufEncodeError as error:  # pragma: no cover - ParseDict fills every field
        raise EncodeError(str(error)) from None


# --------------------------------------------------------------------------- from protobuf


def _one_arm(record: Mapping[str, Any], kinds: tuple[str, ...], what: str) -> tuple[str, Any]:
    arms = [k for k in kinds if k in record]
    if len(arms) != 1:
        raise ValueError(f"{what} carries {len(arms)} arms, not one")
    return arms[0], record[arms[0]]


def _source_from(source: Mapping[str, Any]) -> dict[str, Any]:
    kind, body = _one_arm(source, _SOURCE_KINDS, "a content source")
    return {"type": kind, **body}


def _part_from(part: Mapping[str, Any]) -> dict[str, Any]:
    kind, body = _one_arm(part, _PART_KINDS, "a content part")
    out = {"type": kind, **body}
    if "source" in out:
        out["source"] = _source_from(out["source"])
    return out


def _message_from(wire: Mapping[str, Any]) -> dict[str, Any]:
    message = dict(wire)
    role = message.get("role", "")
    parts = message.pop("contentParts", [])
    activity = message.pop("activityContent", None)
    if role in _KNOWN_ROLES:
        if parts and role not in _PARTS_ROLES:
            raise ValueError(f"a {role} message carries content parts")
        if activity is not None and role != "activity":
            raise ValueError(f"a {role} message carries activity content")
        if role in _PARTS_ROLES and "content" in message and parts:
            raise ValueError("a message carries both string content and content parts")
    if role in _PARTS_ROLES and "content" not in message:
        message["content"] = [_part_from(p) for p in parts]
    if role == "activity" and activity is not None:
        message["content"] = activity
    if not message.get("toolCalls"):
        message.pop("toolCalls", None)
    return message


def _ops_from(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**op, "op": str(op.get("op", "ADD")).lower()} for op in ops]


def from_proto(message: pb.Event) -> dict[str, Any]:
    """
    The wire dict of an ``ag_ui.Event`` message, as ``@ag-ui/proto``'s ``decode`` builds it.

    Raises:
        ValueError: The message names no event, or one whose base event declares another
            type, or a content part with no arm or two (the callers locate it as
            ``AGUI-D005``).
    """
    arm = message.WhichOneof("event")
    if arm is None:
        # An envelope arm this build was not compiled against carries no type name to hand
        # on; name it by its field number, so the receiver drops it with a warning as it
        # drops an unknown type from SSE (the processing page: "Such a frame MUST be
        # dropped, with a warning, rather than failing the run").
        unknown = UnknownFieldSet(message)
        for index in range(len(unknown)):
            field = unknown[index]
            if field.wire_type == _LENGTH_DELIMITED:
                return {"type": f"{UNKNOWN_ARM_PREFIX}{field.field_number}"}
        raise ValueError("the envelope names no event this version knows")
    body = _read(getattr(message, arm))
    base = body.pop("baseEvent", None)
    kind = _TYPE_OF_ARM[arm]
    if base is None or base.get("type", "TEXT_MESSAGE_START") != kind:
        declared = None if base is None else base.get("type", "TEXT_MESSAGE_START")
        raise ValueError(f"the envelope carries {kind} but its base event declares {declared}")
    wire: dict[str, Any] = {"type": kind}
    for member in _BASE[1:]:
        if member in base:
            wire[member] = base[member]
    wire.update(body)
    if kind == "MESSAGES_SNAPSHOT":
        wire["messages"] = [_message_from(m) for m in wire["messages"]]
    elif kind == "RUN_FINISHED":
        outcome = wire.pop("outcome", "")
        pending = wire.pop("pendingToolCallIds", [])
        interrupts = wire.pop("interrupts", [])
        if outcome:
            shaped: dict[str, Any] = {"type": outcome}
            if pending:
                shaped["pendingToolCallIds"] = pending
            if interrupts or outcome == "interrupt":
                shaped["interrupts"] = interrupts
            wire["outcome"] = shaped
        else:
            if pending:
                wire["pendingToolCallIds"] = pending
            if interrupts:
                wire["interrupts"] = interrupts
    elif kind == "SUBAGENT_FINISHED":
        outcome = wire.pop("outcome", "")
        ids = wire.pop("interruptIds", [])
        if outcome:
            wire["outcome"] = {"type": outcome, **({"interruptIds": ids} if ids else {})}
        elif ids:
            wire["interruptIds"] = ids
    elif kind == "STATE_DELTA":
        wire["delta"] = _ops_from(wire["delta"])
    elif kind == "ACTIVITY_DELTA":
        wire["patch"] = _ops_from(wire["patch"])
    elif kind == "TOOL_CALL_RESULT":
        parts = wire.pop("contentParts", [])
        if "content" in wire and parts:
            raise ValueError("a tool result carries both string content and content parts")
        if "content" not in wire:
            wire["content"] = [_part_from(p) for p in parts]
    elif kind == "RUN_STARTED" and "input" in wire:
        given = wire["input"]
        given["messages"] = [_message_from(m) for m in given.get("messages", [])]
    if kind in ("RUN_FINISHED", "RUN_ERROR") and not wire.get("usage"):
        wire.pop("usage", None)
    return wire


def decode_message(
    payload: bytes,
    *,
    source: str | None = None,
    frame: int | None = None,
    byte_offset: int | None = None,
) -> dict[str, Any]:
    """
    The wire dict of one protobuf event message (a frame's payload, without its prefix).

    Raises:
        DecodeError: The bytes are not an ``ag_ui.Event`` naming one known event
            (``AGUI-D005``), located by ``source``, ``frame`` and ``byte_offset``.
    """
    message = pb.Event()
    try:
        # protobuf's parser bounds nesting itself (100 levels, under MAX_JSON_DEPTH), so a
        # hostile Value tree fails here as a bad message, never as a RecursionError.
        message.ParseFromString(payload)
        wire = from_proto(message)
    except (_ProtobufDecodeError, ValueError, KeyError, TypeError, RecursionError) as error:
        detail = str(error) or type(error).__name__
        raise DecodeError(
            f"not a valid AG-UI protobuf event: {detail}",
            rule=DECODE_RULES["protobuf"],
            source=source,
            frame=frame,
            byte_offset=byte_offset,
        ) from None
    return wire


def iter_proto_wire(
    chunks: Iterable[bytes],
    *,
    source: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Iterator[dict[str, Any]]:
    """
    Decode a length-prefixed protobuf stream into wire dicts, frames split anywhere.

    Raises:
        DecodeError: A cut frame or a bad message, after every good event before it.
        LimitExceededError: A frame larger than ``max_message_bytes``.
    """
    for payload, frame, offset in iter_frames(
        chunks, source=source, max_message_bytes=max_message_bytes
    ):
        yield decode_message(payload, source=source, frame=frame, byte_offset=offset)


def iter_proto(
    chunks: Iterable[bytes],
    *,
    source: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Iterator[Event]:
    """
    Decode a length-prefixed protobuf stream into typed events (validated, like SSE's).

    Raises:
        DecodeError: See :func:`iter_proto_wire`.
        SchemaValidationError: A decoded event the schema refuses.
    """
    for wire in iter_proto_wire(chunks, source=source, max_message_bytes=max_message_bytes):
        yield parse_event(wire)


async def aiter_proto(
    chunks: AsyncIterable[bytes],
    *,
    source: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[dict[str, Any]]:
    """The asynchronous twin of :func:`iter_proto_wire` (wire dicts)."""
    async for payload, frame, offset in aiter_frames(
        chunks, source=source, max_message_bytes=max_message_bytes
    ):
        yield decode_message(payload, source=source, frame=frame, byte_offset=offset)


def encode_proto_frame(event: Event | Mapping[str, Any]) -> bytes:
    """One event as a length-prefixed frame (what a server writes per event)."""
    return encode_frame(encode_message(event))
