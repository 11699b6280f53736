"""
Every exception aguikit raises, under one base class.

aguikit's input is somebody else's process.  A caller that consumes it needs to tell *what*
went wrong (a schema violation, an ordering rule, a patch that does not apply, bytes that
are not a stream) and *where* (a JSON pointer, an event index, a line or frame number)
without parsing a message string.  So every error is structured: the message is derived
from the fields, never the other way round, and every error carries a location.

Nothing else escapes the public entry points: a ``KeyError`` from cattrs, a
``RecursionError`` from a deeply nested document or a ``jsonpatch`` exception is a bug in
aguikit, and the fuzz suite treats it as one.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

import attrs

from .catalogue import LIMIT_RULES

__all__ = [
    "AguiError",
    "ContentTypeError",
    "DecodeError",
    "EncodeError",
    "HTTPStatusError",
    "LimitExceededError",
    "PatchError",
    "ProtocolError",
    "SchemaIssue",
    "SchemaValidationError",
    "StageOrderError",
    "TransportError",
    "TruncatedStreamError",
    "UnknownEventTypeError",
    "WireFormatError",
]


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 80, 80


def short_repr(value: object) -> str:
    """A repr of hostile input bounded in length and depth: safe to put in any message."""
    return _SHORT.repr(value)


class AguiError(Exception):
    """
    Base class of every error aguikit raises on bad input.

    ``event_index`` is the position of the offending event in the stream when the error
    was raised while consuming one (set by :class:`aguikit.Session`, the verifier and the
    CLI), else ``None``.  ``location`` is a short human-readable "where".
    """

    event_index: int | None = None
    rule: str | None = None
    """The id of the :mod:`catalogue <aguikit.catalogue>` row this error reports, if any."""

    @property
    def location(self) -> str:
        """Where the error happened, as far as the raiser knows; empty if nowhere better."""
        return "" if self.event_index is None else f"event {self.event_index}"


@attrs.frozen
class SchemaIssue:
    """
    One schema violation: where in the instance, which keyword failed, and why.

    ``pointer`` is an RFC 6901 JSON pointer into the validated document (``""`` is the
    document itself); ``schema_path`` is the path of the failing keyword in the schema.
    """

    pointer: str
    keyword: str
    message: str
    schema_path: str = ""

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.message} ({self.keyword})"


class SchemaValidationError(AguiError, ValueError):
    """
    A document does not match its schema definition.

    Carries *every* violation found (``issues``), not only the first, so a report can list
    them all; ``str()`` shows the most relevant one first.
    """

    rule = "AGUI-S001"

    def __init__(
        self,
        definition: str,
        issues: Sequence[SchemaIssue],
        *,
        event_index: int | None = None,
    ) -> None:
        self.definition = definition
        self.issues = tuple(issues)
        self.event_index = event_index
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.issues:
            return f"invalid {self.definition}"
        first = self.issues[0]
        more = f" (and {len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
        return f"invalid {self.definition} at {first.pointer or '/'}: {first.message}{more}"

    @property
    def location(self) -> str:
        base = super().location
        pointer = self.issues[0].pointer if self.issues else ""
        return ", ".join(p for p in (base, pointer or "/") if p)


class UnknownEventTypeError(SchemaValidationError):
    """
    A document's ``type`` names no event this version of the protocol defines.

    A schema violation like any other (so ``validate_event`` callers catch one class), with
    the offending ``value`` (``None`` when ``type`` was missing or not a string) and the
    closest known type as ``suggestion`` when there is a plausible one.
    """

    rule = "AGUI-S002"

    def __init__(
        self,
        value: object,
        suggestion: str | None = None,
        *,
        event_index: int | None = None,
    ) -> None:
        self.value = value
        self.suggestion = suggestion
        if value is None:
            text, keyword = "event has no 'type'", "required"
        else:
            text, keyword = f"unknown event type {short_repr(value)}", "enum"
        if suggestion is not None:
            text += f"; did you mean {suggestion!r}?"
        pointer = "" if keyword == "required" else "/type"
        super().__init__(
            "Event",
            [SchemaIssue(pointer, keyword, text, "/$defs/EventType")],
            event_index=event_index,
        )
        self.args = (text,)

    def __str__(self) -> str:
        return str(self.args[0])


class WireFormatError(AguiError, ValueError):
    """
    A document could not be turned into (or out of) its typed model.

    Raised by the wire converter for a wrong or missing field when the input was not
    schema-validated first.  ``definition`` is the model (``TextMessageStartEvent``),
    ``pointer`` the JSON pointer of the offending member.
    """

    def __init__(
        self,
        definition: str,
        pointer: str,
        message: str,
        *,
        event_index: int | None = None,
    ) -> None:
        self.definition = definition
        self.pointer = pointer
        self.message = message
        self.event_index = event_index
        super().__init__(f"{definition} at {pointer or '/'}: {message}")

    @property
    def location(self) -> str:
        return ", ".join(p for p in (super().location, self.pointer or "/") if p)


class ProtocolError(AguiError):
    """
    A stream broke one of AG-UI's ordering or attribution rules.

    ``rule`` is the stable rule id (``AGUI-V005``), ``symbol`` its readable name; the rule
    table in :mod:`aguikit.rules` documents each.  ``entity_id`` is the message, tool call,
    step or subagent the rule is about, when there is one.
    """

    def __init__(
        self,
        rule: str,
        symbol: str,
        message: str,
        *,
        event_index: int | None = None,
        event_type: str | None = None,
        entity_id: str | None = None,
    ) -> None:
        self.rule = rule
        self.symbol = symbol
        self.message = message
        self.event_index = event_index
        self.event_type = event_type
        self.entity_id = entity_id
        super().__init__(f"[{rule} {symbol}] {message}")


class StageOrderError(ProtocolError):
    """
    An event reached a stage before the stage that must handle it first: a chunk the
    normalizer never expanded, a deprecated ``THINKING_*`` event the receiver never
    translated.  A bug in how the caller chained the stages, not in the stream:
    ``stage`` names the one to run first (:class:`aguikit.Session` runs them all in order).
    """

    def __init__(
        self,
        rule: str,
        symbol: str,
        message: str,
        *,
        stage: str,
        event_index: int | None = None,
        event_type: str | None = None,
    ) -> None:
        super().__init__(rule, symbol, message, event_index=event_index, event_type=event_type)
        self.stage = stage


class PatchError(AguiError):
    """
    An RFC 6902 patch did not apply; the target was left exactly as it was.

    ``target`` says what was being patched (``"state"`` or ``"activity 'a1'"``);
    ``op_index`` and ``op`` name the failing operation, ``pointer`` its path.
    """

    rule = "AGUI-P001"

    def __init__(
        self,
        target: str,
        reason: str,
        *,
        op_index: int | None = None,
        op: Any = None,
        pointer: str | None = None,
        event_index: int | None = None,
    ) -> None:
        self.target = target
        self.reason = reason
        self.op_index = op_index
        self.op = op
        self.pointer = pointer
        self.event_index = event_index
        where = f" operation {op_index}" if op_index is not None else ""
        path = f" at {short_repr(pointer)}" if pointer is not None else ""
        super().__init__(f"patch on {target} failed:{where}{path}: {reason}")

    @property
    def location(self) -> str:
        parts = [super().location]
        if self.op_index is not None:
            parts.append(f"/delta/{self.op_index}")
        return ", ".join(p for p in parts if p)


class DecodeError(AguiError, ValueError):
    """
    Bytes or text that are not a valid stream: bad UTF-8, a line that is not JSON, a frame
    that is not an event.

    ``source`` names the input (a path, ``<stdin>``, a URL); ``line`` (JSONL) or ``frame``
    (SSE) is 1-based; ``byte_offset`` is where in the input the offending unit starts.
    ``rule`` is the catalogue id of what went wrong (``AGUI-D002`` for text that is not
    JSON).
    """

    def __init__(
        self,
        message: str,
        *,
        rule: str | None = None,
        source: str | None = None,
        line: int | None = None,
        frame: int | None = None,
        byte_offset: int | None = None,
    ) -> None:
        self.message = message
        self.rule = rule
        self.source = source
        self.line = line
        self.frame = frame
        self.byte_offset = byte_offset
        super().__init__(f"{self.location}: {message}" if self.location else message)

    @property
    def location(self) -> str:
        parts = []
        if self.source:
            parts.append(self.source)
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.frame is not None:
            parts.append(f"frame {self.frame}")
        if self.byte_offset is not None:
            parts.append(f"byte {self.byte_offset}")
        return ", ".join(parts)


class EncodeError(AguiError, ValueError):
    """
    An event the chosen encoding cannot carry: a ``THINKING_*`` event for the protobuf
    transport (``AGUI-D006``), which has no slot for it, or a value its message cannot hold.

    Raised while *writing*, so it is the producer's to fix; ``event_type`` names the event.
    """

    def __init__(
        self, message: str, *, rule: str | None = None, event_type: str | None = None
    ) -> None:
        self.message = message
        self.rule = rule
        self.event_type = event_type
        super().__init__(message)


class LimitExceededError(DecodeError):
    """
    Input exceeded a configured safety limit (frame size, nesting depth, open entities).

    ``limit`` names the setting and ``maximum`` its value, so the message tells the caller
    which knob to turn if the input is legitimate.
    """

    def __init__(self, limit: str, maximum: int, message: str, **where: Any) -> None:
        self.limit = limit
        self.maximum = maximum
        where.setdefault("rule", LIMIT_RULES.get(limit))
        super().__init__(f"{message} (limit {limit}={maximum})", **where)


class TransportError(AguiError):
    """The connection to an agent failed or did not speak AG-UI over SSE."""

    rule = "AGUI-T001"

    def __init__(self, message: str, *, url: str | None = None) -> None:
        self.message = message
        self.url = url
        super().__init__(f"{url}: {message}" if url else message)

    @property
    def location(self) -> str:
        return self.url or ""


class HTTPStatusError(TransportError):
    """The agent answered with a non-2xx status; ``body`` holds the start of its body."""

    rule = "AGUI-T002"

    def __init__(self, status_code: int, body: str, *, url: str | None = None) -> None:
        self.status_code = status_code
        self.body = body
        snippet = body[:200] + ("…" if len(body) > 200 else "")
        super().__init__(f"HTTP {status_code}: {snippet!r}", url=url)


class ContentTypeError(TransportError):
    """The agent answered 2xx with something other than an event stream."""

    rule = "AGUI-T003"

    def __init__(self, content_type: str | None, *, url: str | None = None) -> None:
        self.content_type = content_type
        super().__init__(
            f"expected text/event-stream, got {content_type or 'no content type'}", url=url
        )


class TruncatedStreamError(ProtocolError):
    """
    The stream ended while a run was still open (or before any run started): the run has
    no outcome and must not be reported as having succeeded.  Everything delivered before
    the break stays delivered.  Raised by ``finish()`` of the verifier and the session.
    """
