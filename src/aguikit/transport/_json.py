"""
Turning one unit of text (an SSE frame's data, a JSONL line) into a JSON object, safely.

``json.loads`` is fast and correct, but it has three habits a stream reader cannot let
through: it recurses once per nesting level (100,000 ``[`` raise ``RecursionError``, and a
few hundred levels are enough to make every later recursive consumer - cattrs, the
schema validator, ``jsonpatch`` - pay for them), it accepts ``NaN`` and ``Infinity`` which
are not JSON, and it happily returns a list or a number where an event must be an object.
This module puts a depth guard in front of it that never recurses and costs two C-level
``str.count`` calls on an ordinary event, and reports every failure as a
:class:`~aguikit.errors.DecodeError` carrying the caller's location.

What it deliberately leaves alone: whether the object is an *event*.  That is the schema's
and the wire converter's business, one layer up.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, Final

from ..errors import DecodeError, LimitExceededError
from ..limits import MAX_JSON_DEPTH

__all__ = ["DEFAULT_MAX_DEPTH", "loads_object"]

DEFAULT_MAX_DEPTH: Final = MAX_JSON_DEPTH
"""Deepest array/object nesting accepted in one event (setting ``max_depth``); the same
default as :func:`aguikit.wire.loads_event` (:data:`aguikit.limits.MAX_JSON_DEPTH`)."""

_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")
_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
"""One decoder for every call: ``json.loads`` with an option builds a new one each time."""


def nesting_depth(text: str) -> int:
    """
    The deepest bracket nesting of JSON ``text``, computed without recursion.

    String literals are removed first so that brackets inside them do not count.  For text
    that is not JSON the result is only an estimate, which is all a guard needs: the parser
    rejects such text anyway.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(0, max(accumulate(_STEP[c] for c in brackets), default=0))


def loads_object(text: str, *, max_depth: int = DEFAULT_MAX_DEPTH, **where: Any) -> dict[str, Any]:
    """
    Parse ``text`` as one JSON object, refusing what a stream reader must not accept.

    Args:
        text: The frame data or line, already decoded from UTF-8.
        max_depth: Deepest nesting accepted; deeper input raises before parsing starts.
        **where: Location keywords for the error (``source``, ``line``, ``frame``,
            ``byte_offset``), passed to :class:`~aguikit.errors.DecodeError`.

    Returns:
        The parsed object.

    Raises:
        LimitExceededError: The nesting is deeper than ``max_depth`` (setting
            ``max_depth``).
        DecodeError: The text is not JSON, uses ``NaN``/``Infinity``, or is not an object.
    """
    # Cheap pre-check: a document cannot nest deeper than it has opening brackets.
    if text.count("[") + text.count("{") > max_depth:
        depth = nesting_depth(text)
        if depth > max_depth:
            raise LimitExceededError(
                "max_depth", max_depth, f"JSON nesting depth {depth} is too deep", **where
            )
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise DecodeError(
            f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})", **where
        ) from None
    except RecursionError:
        raise LimitExceededError(
            "max_depth", max_depth, "JSON nesting is too deep to parse", **where
        ) from None
    except ValueError as exc:  # NaN/Infinity, integers beyond the digit limit
        raise DecodeError(f"not valid JSON: {exc}", **where) from None
    if not isinstance(value, dict):
        raise DecodeError(f"expected a JSON object, got {_json_kind(value)}", **where)
    return value


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
