"""
JSON in and out, once: the one reader, the one writer and the one depth guard of aguikit.

Every byte aguikit reads ends up here (an SSE frame's data, a JSONL line, a document given
to :func:`aguikit.encode.loads_event`), and every event it writes leaves through here (the
SSE and JSONL encoders, ``dumps_event``).  Keeping one of each is what makes the answers
agree: a CUSTOM event whose text holds 300 ``[`` is the same event whichever door it comes
through, and ``NaN`` is refused with the same words everywhere.

``json.loads`` is correct, but a stream reader cannot let three of its habits
through: it recurses once per nesting level (100,000 ``[`` raise ``RecursionError``, and a
few hundred levels make every later recursive consumer - cattrs, the schema validator,
``jsonpatch`` - pay for them), it accepts ``NaN`` and ``Infinity``, which are not JSON, and
it returns a list or a number where an event must be an object.  :func:`loads` puts a
depth guard in front of it that never recurses and costs two C-level ``count`` calls on an
ordinary event, and reports every failure as a located
:class:`~aguikit.errors.DecodeError`.

*Two engines, one answer.*  A document is first read by jiter (a dependency already, for
partial tool arguments), three times faster than ``json`` on event-sized documents, which
is most of what ``aguikit check`` spends reading a file.  jiter is used only where it
agrees with the standard library: it refuses ``NaN``, lone surrogate escapes, numbers past
its range and every syntax error instead of guessing, and whatever it refuses is read
again by ``json``, which either accepts it (``"\\ud800"``, a 4,000-digit integer) or
raises the exact, located error it always raised.  So the errors and their words are
``json``'s, and a value is what ``json`` would have returned (floats are correctly rounded
by both; a duplicate member keeps its first place and last value in both).

The writer is compact JSON with the official Python SDK's member order (the event envelope
first), so a stream aguikit writes can be diffed byte for byte against one the SDK wrote.

What it deliberately leaves alone: whether an object is an *event*.  That is the schema's
and the wire converter's business, floors above.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from itertools import accumulate
from typing import Any, Final

from jiter import from_json as _from_json

from .catalogue import DECODE_RULES, LIMIT_RULES
from .errors import DecodeError, LimitExceededError, WireFormatError
from .limits import MAX_JSON_DEPTH

__all__ = [
    "dumps_wire",
    "escape_pointer",
    "find_lone_surrogate",
    "iter_documents",
    "loads",
    "loads_object",
    "nesting_depth",
    "quick_object",
    "utf8",
]

_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")
_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
"""One decoder for every call: ``json.loads`` with an option builds a new one each time."""

_OPENERS: Final = frozenset('{["-0123456789tfn')
"""First characters of a JSON value: anything else (leading blanks) takes the full decode."""
_BLANK: Final = " \t\n\r"
"""JSON's whitespace (RFC 8259): all that may follow a document."""

_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""Built once: ``json.dumps`` with any non-default option builds a new encoder per call."""


def escape_pointer(token: str | int) -> str:
    """One RFC 6901 reference token: ``~`` becomes ``~0`` and ``/`` becomes ``~1``."""
    return str(token).replace("~", "~0").replace("/", "~1")


def nesting_depth(text: str) -> int:
    """
    The deepest bracket nesting of JSON ``text``, computed without recursion.

    String literals are removed first so that brackets inside them do not count.  For text
    that is not JSON the result is only an estimate, which is all a guard needs: the parser
    rejects such text anyway.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(0, max(accumulate(_STEP[c] for c in brackets), default=0))


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _where(source: str | None, line: int | None, frame: int | None) -> dict[str, Any]:
    """An error's location keywords, built only when there is an error to locate."""
    return {"source": source, "line": line, "frame": frame}


def _offset(text: str, position: int) -> int:
    return len(text[:position].encode("utf-8", "surrogatepass"))


_MISS: Final = object()


def _jiter_refuses_deeper_than(depth: int) -> bool:
    """Whether jiter's own recursion limit (about 200 levels today) refuses a document
    nested ``depth + 1`` deep: then a document it reads is within ``depth``."""
    nested = b"[" * (depth + 1) + b"]" * (depth + 1)
    try:
        _from_json(nested)
    except ValueError:
        return True
    return False


_JITER_GUARDS: Final = _jiter_refuses_deeper_than(MAX_JSON_DEPTH)
"""Probed once: with the default depth, jiter's own limit is the guard, and a document of
many small objects (a request body of thousands of messages, more brackets than levels)
is read by jiter rather than scanned and read again by the standard library."""


def _quick(data: str | bytes, max_depth: int) -> Any:
    """jiter's value for an ordinary document within ``max_depth``, else ``_MISS``."""
    try:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        # The depth guard's cheap pre-check, on bytes: ``[`` and ``{`` are ASCII in UTF-8.
        # Needless where jiter refuses anything deeper than the limit itself: a document
        # past its recursion limit is _MISS, and the standard path reports its depth.
        guarded = _JITER_GUARDS and max_depth >= MAX_JSON_DEPTH
        if not guarded and raw.count(b"[") + raw.count(b"{") > max_depth:
            return _MISS
        return _from_json(raw, allow_inf_nan=False, cache_mode="keys")
    except ValueError:  # jiter's syntax errors and recursion limit; a lone surrogate
        return _MISS


def quick_object(data: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any] | None:
    """
    The object ``data`` holds when it is an ordinary JSON object within ``max_depth``, else
    ``None``, which says nothing about why.

    For a reader of many small documents (a JSONL file, ``aguikit check``) that should pay
    for locating an error only when there is one: on ``None`` it calls
    :func:`loads_object` with the location, which reads the document again and raises the
    located error, or returns what only the standard library reads.
    """
    value = _quick(data, max_depth)
    return value if type(value) is dict else None


def loads(
    data: str | bytes,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    source: str | None = None,
    line: int | None = None,
    frame: int | None = None,
    byte_offset: int | None = None,
) -> Any:
    """
    Decode one JSON document, refusing what a stream reader must not accept.

    Args:
        data: The document, as text or UTF-8 bytes.
        max_depth: Deepest array/object nesting accepted; deeper input raises before the
            parser starts, so nothing recurses into it.
        source, line, frame: Where the document came from, for the error.
        byte_offset: Where the unit (frame, line) holding the document starts in its
            stream.  When given, an error reports it; when not, an error reports the byte
            position of the fault inside ``data`` itself.

    Returns:
        The decoded value.

    Raises:
        LimitExceededError: The nesting is deeper than ``max_depth`` (``AGUI-L003``).
        DecodeError: Not UTF-8 (``AGUI-D001``), not JSON or a non-standard constant such
            as ``NaN`` (``AGUI-D002``).
    """
    value = _quick(data, max_depth)
    if value is not _MISS:
        return value
    return _loads_standard(data, max_depth, source, line, frame, byte_offset)


def _loads_standard(
    data: str | bytes,
    max_depth: int,
    source: str | None = None,
    line: int | None = None,
    frame: int | None = None,
    byte_offset: int | None = None,
) -> Any:
    """:func:`loads` by the standard library: what jiter refused, accepted or explained."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as bad:
            if byte_offset is None:
                message, at = f"invalid UTF-8 ({bad.reason})", bad.start
            else:
                message = f"invalid UTF-8 ({bad.reason}) at byte {byte_offset + bad.start}"
                at = byte_offset
            raise DecodeError(
                message, rule=DECODE_RULES["utf8"], byte_offset=at, **_where(source, line, frame)
            ) from None
    # Cheap pre-check: a document cannot nest deeper than it has opening brackets.
    if text.count("[") + text.count("{") > max_depth:
        depth = nesting_depth(text)
        if depth > max_depth:
            raise LimitExceededError(
                "max_depth",
                max_depth,
                f"JSON nesting depth {depth} is too deep",
                rule=LIMIT_RULES["max_depth"],
                byte_offset=byte_offset if byte_offset is not None else 0,
                **_where(source, line, frame),
            )
    try:
        if text[:1] in _OPENERS:
            # The common case, a document that starts at once: the C scanner directly,
            # without ``decode``'s two whitespace regexes; what follows it must be blank.
            value, end = _DECODER.raw_decode(text)
            if end == len(text) or not text[end:].strip(_BLANK):
                return value
        return _DECODER.decode(text)  # the exact error, with its position
    except json.JSONDecodeError as exc:
        at = byte_offset if byte_offset is not None else _offset(exc.doc, exc.pos)
        raise DecodeError(
            f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})",
            rule=DECODE_RULES["json"],
            byte_offset=at,
            **_where(source, line, frame),
        ) from None
    except RecursionError:  # pragma: no cover - the depth guard runs first
        raise LimitExceededError(
            "max_depth",
            max_depth,
            "JSON nesting is too deep to parse",
            rule=LIMIT_RULES["max_depth"],
            byte_offset=byte_offset if byte_offset is not None else 0,
            **_where(source, line, frame),
        ) from None
    except ValueError as refused:  # NaN/Infinity, integers beyond the digit limit
        raise DecodeError(
            f"not valid JSON: {refused}",
            rule=DECODE_RULES["json"],
            byte_offset=byte_offset if byte_offset is not None else 0,
            **_where(source, line, frame),
        ) from None


def loads_object(
    data: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, **where: Any
) -> dict[str, Any]:
    """
    :func:`loads`, for a unit that must hold one JSON object (an event).

    Returns:
        The decoded object (a ``dict``).

    Raises:
        DecodeError: As :func:`loads`, and ``AGUI-D003`` when the value is not an object.
        LimitExceededError: As :func:`loads`.
    """
    value = _quick(data, max_depth)
    if type(value) is dict:
        return value
    if value is _MISS:  # read once more only where jiter refused
        value = _loads_standard(data, max_depth, **where)
    if not isinstance(value, dict):
        if where.get("byte_offset") is None:
            where["byte_offset"] = 0
        raise DecodeError(
            f"expected a JSON object, got {_kind(value)}", rule=DECODE_RULES["object"], **where
        )
    return value


_ENVELOPE: Final = ("type", "timestamp", "rawEvent", "metadata", "subagentRunId")
"""
Members written first, in this order.  JSON member order carries no meaning, but the
official SDK writes the common envelope before an event's own fields, and matching it byte
for byte lets a recorded stream be diffed against one the SDK produced.
"""


_TOKEN: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|(-?\d(?:\.\d+)?e-\d+)', re.DOTALL)
"""A JSON string (skipped whole) or a float Python wrote in exponent form."""


def _sdk_float(match: re.Match[str]) -> str:
    """
    A float in the form pydantic writes it: ``1e-7`` and ``0.000015`` where Python writes
    ``1e-07`` and ``1.5e-05``.

    Both are the same shortest round-trip digits, laid out differently, and only negative
    exponents differ (both write ``1e+16``, and agree on every positional float), so only
    they are rewritten: from ``1e-5`` up pydantic writes positionally, below it drops the
    exponent's leading zero.
    """
    token = match.group(1)
    if token is None:
        return match.group(0)
    sign = "-" if token[0] == "-" else ""
    mantissa, _, exponent = token.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = int(exponent) + len(whole)  # where the decimal point falls in ``digits``
    if -5 < point <= 0:
        text = "0." + "0" * -point + digits
    elif len(digits) == 1:
        text = f"{digits}e{point - 1}"
    else:
        text = f"{digits[0]}.{digits[1:]}e{point - 1}"
    return sign + text


def dumps_wire(wire: Mapping[str, Any]) -> str:
    """
    Compact JSON for a wire dict, in the official SDK's envelope order, with floats as
    pydantic writes them (``1e-7`` where Python writes ``1e-07``).

    Raises:
        WireFormatError: A value JSON cannot carry (``NaN``, an object of a foreign type).
        TypeError: ``wire`` is not a mapping: a typed event is encoded by
            :mod:`aguikit.encode`, which converts it first; this floor knows no events.
    """
    if not isinstance(wire, Mapping):
        raise TypeError(
            f"expected a wire dict, got {type(wire).__name__}; encode typed events with "
            "aguikit.encode (or convert them with aguikit.to_wire first)"
        )
    if (
        next(iter(wire), None) != "type"
        or "timestamp" in wire
        or "rawEvent" in wire
        or "metadata" in wire
        or "subagentRunId" in wire
    ):
        ordered = {key: wire[key] for key in _ENVELOPE if key in wire}
        ordered.update(wire)
        wire = ordered
    try:
        text: str = _ENCODER.encode(wire)
    except (TypeError, ValueError, RecursionError) as exc:
        kind = wire.get("type")
        name = kind if isinstance(kind, str) else "Event"
        raise WireFormatError(name, "", f"not JSON-serialisable: {exc}") from None
    if "e-" in text:  # cheap: most events hold no float in exponent form
        text = _TOKEN.sub(_sdk_float, text)
    return text


def find_lone_surrogate(data: Any) -> tuple[str, str] | None:
    """
    The JSON pointer and character of the first lone surrogate in a document's strings
    (member names included), walked without recursion; ``None`` if it has none.

    A Python string can hold one (a ``\\ud800`` escape decodes to it), UTF-8 cannot, so
    it is what makes a document impossible to write: a request body refused with its
    pointer, an event refused at its ``emit``.
    """
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        pointer, value = stack.pop()
        if isinstance(value, str):
            found = _lone_in(value)
            if found is not None:
                return pointer, found
        elif isinstance(value, dict):
            for key, member in reversed(value.items()):
                found = _lone_in(key)
                if found is not None:
                    return pointer, found
                stack.append((f"{pointer}/{escape_pointer(key)}", member))
        elif isinstance(value, list):
            items: list[Any] = value
            for index in range(len(items) - 1, -1, -1):
                stack.append((f"{pointer}/{index}", items[index]))
    return None


def _lone_in(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as bad:
        return text[bad.start]
    return None


def utf8(text: str, kind: object) -> bytes:
    """
    ``text`` as UTF-8, for a writer that puts an event on the wire.

    Raises:
        WireFormatError: ``text`` holds a lone surrogate (``"\\ud800"``): a Python string
            can, UTF-8 cannot, and the event could not be sent as it is.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        name = kind if isinstance(kind, str) else "Event"
        raise WireFormatError(
            name, "", f"a lone surrogate {text[exc.start]!r} cannot be written as UTF-8"
        ) from None


def iter_documents(
    text: str, *, max_depth: int = MAX_JSON_DEPTH, source: str | None = None
) -> Iterator[tuple[Any, int]]:
    """
    The values of a JSON *document* holding events: the elements of a top-level array, or
    each of one or more concatenated (typically pretty-printed) documents.

    A recording saved from a debugger or an HTTP client is often one of these rather than
    JSONL; a checker reads it as a list of events instead of failing on its first line.

    Yields:
        ``(value, position)``: each value and the index in ``text`` where it starts, so a
        caller can say which line it was on.

    Raises:
        DecodeError: The text is not JSON (``byte_offset`` is where it stops being).
        LimitExceededError: It nests deeper than ``max_depth`` (counting the array).
    """
    if nesting_depth(text) > max_depth:
        raise LimitExceededError(
            "max_depth",
            max_depth,
            f"JSON nesting depth {nesting_depth(text)} is too deep",
            rule=LIMIT_RULES["max_depth"],
            source=source,
            byte_offset=0,
        )
    position = _skip_space(text, 0)
    if text.startswith("\ufeff"):
        position = _skip_space(text, 1)
    in_array = text.startswith("[", position)
    if in_array:
        position = _skip_space(text, position + 1)
        if text.startswith("]", position):
            return
    while position < len(text):
        try:
            value, end = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise DecodeError(
                f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})",
                rule=DECODE_RULES["json"],
                source=source,
                line=exc.lineno,
                byte_offset=_offset(text, exc.pos),
            ) from None
        except ValueError as refused:  # NaN/Infinity, integers beyond the digit limit
            raise DecodeError(
                f"not valid JSON: {refused}",
                rule=DECODE_RULES["json"],
                source=source,
                byte_offset=_offset(text, position),
            ) from None
        yield value, position
        position = _skip_space(text, end)
        if in_array:
            if text.startswith(",", position):
                position = _skip_space(text, position + 1)
            elif text.startswith("]", position):
                if _skip_space(text, position + 1) < len(text):
                    raise DecodeError(
                        "not valid JSON: text after the closing ']'",
                        rule=DECODE_RULES["json"],
                        source=source,
                        byte_offset=_offset(text, position + 1),
                    )
                return
            else:
                raise DecodeError(
                    "not valid JSON: expected ',' or ']' between array elements",
                    rule=DECODE_RULES["json"],
                    source=source,
                    byte_offset=_offset(text, position),
                )
    if in_array:
        raise DecodeError(
            "not valid JSON: the array is never closed",
            rule=DECODE_RULES["json"],
            source=source,
            byte_offset=_offset(text, len(text)),
        )


_SPACE: Final = re.compile(r"[ \t\r\n]*")


def _skip_space(text: str, position: int) -> int:
    match = _SPACE.match(text, position)
    return match.end() if match else position
