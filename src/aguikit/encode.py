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

from collections.abc import Iterable, Mapping
from typing import IO, Any

from ._generated.models import Event
from .jsonio import dumps_wire, loads
from .limits import MAX_JSON_DEPTH
from .proto import encode_proto_frame
from .transport import jsonl, sse
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


def wire_of(event: Event | Mapping[str, Any]) -> Mapping[str, Any]:
    """
    The wire dict of ``event``: converted when typed, taken as it is when already a mapping.

    Raises:
        WireFormatError: ``event`` is neither a generated model nor a mapping.
    """
    if isinstance(event, Mapping):
        return event
    return to_wire(event)


def dumps_event(event: Event | Mapping[str, Any]) -> str:
    """
    Encode an event as compact JSON, byte for byte what the official Python SDK's encoder
    writes for the same event (no spaces, non-ASCII kept as UTF-8, the envelope first).

    Raises:
        WireFormatError: ``event`` is not a generated model or a mapping, or holds a value
            JSON cannot carry (``NaN``, an object of a foreign type).
    """
    return dumps_wire(wire_of(event))


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


def encode_sse(event: Event | Mapping[str, Any]) -> str:
    """
    One SSE frame for ``event`` (``data: <json>`` and a blank line), exactly as
    ``ag_ui.encoder.EventEncoder().encode()`` writes it.

    Raises:
        WireFormatError: As :func:`dumps_event`.
    """
    return sse.encode(wire_of(event))


def encode_sse_bytes(event: Event | Mapping[str, Any]) -> bytes:
    """:func:`encode_sse`, as the UTF-8 bytes a streaming response writes."""
    return sse.encode_bytes(wire_of(event))


def encode_jsonl(event: Event | Mapping[str, Any]) -> str:
    """
    One JSONL line for ``event``: the SDK's compact JSON and ``\\n``.

    Raises:
        WireFormatError: As :func:`dumps_event`.
    """
    return jsonl.encode_line(wire_of(event))


def write_jsonl(events: Iterable[Event | Mapping[str, Any]], fp: IO[str]) -> int:
    """
    Write events (typed or wire dicts) to a text stream, one per line.

    Returns:
        How many events were written.
    """
    return jsonl.write_jsonl((wire_of(event) for event in events), fp)


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
