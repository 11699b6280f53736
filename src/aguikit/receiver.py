"""
The receiver's compatibility boundary: what a consumer does with material it does not know.

The schema is exact (every object is closed) because it defines one version of the
protocol.  A receiver cannot be exact: a newer producer adds fields, union members and
whole event types, and an unknown field from a newer minor version looks exactly like a
typo to a validator.  So, before anything downstream sees an event, this boundary applies
the processing rules of the specification:

* an event whose ``type`` the protocol does not describe is **dropped** with a warning
  naming the type, and the run survives;
* an undeclared property on a described object is **stripped** with a warning naming its
  JSON pointer (``/futureProp``), and the event is delivered without it;
* an unrecognised member of a discriminated union (an outcome ``{"type": "paused"}``, a
  content part ``{"type": "hologram"}``, a patch ``{"op": "increment"}``) is removed from
  its optional slot or its list, with a warning naming the pointer;
* a **malformed value on a described field stays fatal** (``delta: 42``, an array where the
  outcome object goes, a role outside the closed set): inventing a reading for it would be
  data corruption, so :class:`~aguikit.errors.SchemaValidationError` is raised;
* objects the schema deliberately leaves open (RFC 6902 operations, metadata, activity
  content, any-JSON values) are data, not unrecognised material, and pass untouched;
* retired shapes that are still understood are translated, with a warning: the five
  ``THINKING_*`` events become their ``REASONING_*`` equivalents (ids are minted, because
  the old events carry none), and the four pre-1.0 optional nulls (``rawEvent``,
  ``result``, ``parentMessageId``, ``outcome``) become absent;
* ``RUN_STARTED.protocolVersion`` is compared with the version this consumer speaks: a newer
  or uninterpretable declaration is served, with a warning; the same or an older one is
  quiet (older is the ordinary downgrade signal).

A clean stream produces no warning at all: the stripping walk runs only for a document the
strict schema has already rejected, so the common path costs one validator call.

The boundary has two steps, in the order the processing model fixes (``docs/DESIGN.md``,
"The processing order is the specification's"): :meth:`Receiver.translate`, the
compatibility boundary, turns retired shapes into their replacements and touches nothing
else, so middleware sees a newer producer's material whole; enforcement (the rest of
:meth:`Receiver.receive`) then drops, strips and judges against the current protocol.
A consumer without middleware (``Session``) runs both in one call; ``Agent`` runs
middleware between them.

Deliberately left alone: ordering (the verifier's), chunk expansion (the normalizer's), and
outgoing requests (the HTTP client's era shims).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any, Final, Literal, get_args, get_origin

import attrs
from mypy_extensions import mypyc_attr

from ._deprecation import evolve_quietly
from ._generated import models
from ._generated.models import (
    Event,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunStartedEvent,
)
from ._generated.registry import EVENT_CLASSES, PROTOCOL_VERSION, SINCE, TAGS
from .catalogue import RULES_BY_ID, WarningSink, discard_warning, render_message
from .errors import AguiError, SchemaIssue
from .interop import is_sdk_model, sdk_wire
from .jsonio import escape_pointer
from .validate import iter_schema_errors
from .wire import event_parsers, parse_event, to_wire

__all__ = [
    "Receiver",
    "WarningSink",
    "compare_protocol_versions",
    "omit_newer_members",
    "strip_unknown",
]


# ---- the stripping plan, derived from the generated classes --------------------------------


@attrs.define(eq=False)
class _Object:
    closed: bool
    name: str
    """The schema definition (generated class) this plan describes."""
    fields: dict[str, tuple[_Node, bool]]
    """Wire name -> (plan of the value, whether the member may be absent)."""


@attrs.define(eq=False)
class _List:
    element: _Node


@attrs.define(eq=False)
class _Tagged:
    prop: str
    members: dict[str, _Object]


@attrs.define(eq=False)
class _Choice:
    options: tuple[_Node, ...]


_Node = _Object | _List | _Tagged | _Choice | None
"""``None`` is a leaf: scalars, closed string sets and any-JSON values pass through whole."""

_PLANS: dict[type, _Object] = {}


def _discriminator(cls: type) -> tuple[str, str] | None:
    return TAGS.get(cls.__name__)


def _plan_type(annotation: Any) -> _Node:
    if isinstance(annotation, type) and attrs.has(annotation):
        return _plan_class(annotation)
    origin = get_origin(annotation)
    if origin is list:
        (element,) = get_args(annotation)
        return _List(_plan_type(element))
    if origin in (typing.Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _plan_type(members[0])
        if all(isinstance(m, type) and attrs.has(m) for m in members):
            tags = [_discriminator(m) for m in members]
            if all(t is not None for t in tags) and len({t[0] for t in tags if t}) == 1:
                prop = tags[0][0] if tags[0] else ""
                return _Tagged(
                    prop,
                    {t[1]: _plan_class(m) for t, m in zip(tags, members, strict=True) if t},
                )
        return _Choice(tuple(_plan_type(m) for m in members))
    if origin is Literal or annotation is Any or origin is dict:
        return None
    if isinstance(annotation, type) and issubclass(annotation, (str, int, float, bool, Enum)):
        return None
    return None


def _plan_class(cls: type) -> _Object:
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    plan = _PLANS[cls] = _Object(
        closed=bool(getattr(cls, "__wire_closed__", True)), name=cls.__name__, fields={}
    )
    hints = typing.get_type_hints(cls, vars(models))
    for field in attrs.fields(cls):
        if field.metadata.get("extras"):
            continue
        wire = field.metadata.get("wire", field.name)
        optional = field.default is not attrs.NOTHING
        plan.fields[wire] = (_plan_type(hints[field.name]), optional)
    return plan


class _Drop:
    """Marks a value that is unrecognisable where it stands, while unwinding."""


_DROP: Final = _Drop()


def _strip(value: Any, node: _Node, path: str, removed: list[str]) -> Any:
    if node is None:
        return value
    if isinstance(node, _Object):
        if not isinstance(value, dict):
            return value  # a malformed value: the validator's to reject, fatally
        result: dict[str, Any] = {}
        for key, member in value.items():
            where = f"{path}/{escape_pointer(str(key))}"
            spec = node.fields.get(key)
            if spec is None:
                if node.closed:
                    removed.append(where)
                else:
                    result[key] = member
                continue
            mark = len(removed)
            child = _strip(member, spec[0], where, removed)
            if child is _DROP:
                # Whatever the descent reported sits inside the value going whole.
                del removed[mark:]
                if not spec[1]:
                    return _DROP  # a required slot: the containing object goes instead
                removed.append(where)
                continue
            result[key] = child
        return result
    if isinstance(node, _List):
        if not isinstance(value, list):
            return value
        items: list[Any] = []
        for index, entry in enumerate(value):
            mark = len(removed)
            child = _strip(entry, node.element, f"{path}/{index}", removed)
            if child is _DROP:
                del removed[mark:]
                removed.append(f"{path}/{index}")
                continue
            items.append(child)
        return items
    if isinstance(node, _Tagged):
        if not isinstance(value, dict):
            return value  # an array or scalar in a union slot is malformed, not unknown
        tag = value.get(node.prop)
        member_plan = node.members.get(tag) if isinstance(tag, str) else None
        if member_plan is None:
            return _DROP
        return _strip(value, member_plan, path, removed)
    for option in node.options:
        if isinstance(value, list) and isinstance(option, _List):
            return _strip(value, option, path, removed)
        if isinstance(value, dict) and isinstance(option, _Object | _Tagged):
            return _strip(value, option, path, removed)
    return value


def strip_unknown(
    data: Mapping[str, Any], *, definition: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """
    Remove what the event's definition does not describe, without judging what it does.

    Both directions use it: the receiver on each event before delivering it, and the client
    on the run input before sending it (the processing model's "Outgoing material").

    Args:
        data: A raw event whose ``type`` is a known event type, or an instance of
            ``definition``.
        definition: The schema definition ``data`` is an instance of, when not an event
            (``"RunAgentInput"``).

    Returns:
        The stripped copy and the JSON pointers of everything removed, in document order.
        A value that is malformed rather than unknown is left in place for the validator.

    .. versionchanged:: 0.4.0  ``definition``.
    """
    cls = EVENT_CLASSES[data["type"]] if definition is None else getattr(models, definition)
    removed: list[str] = []
    result = _strip(dict(data), _plan_class(cls), "", removed)
    if isinstance(result, _Drop):  # nothing generated reaches this; let the validator speak
        return dict(data), []
    return result, removed


# ---- versions --------------------------------------------------------------------------------


def compare_protocol_versions(declared: str, spoken: str) -> Literal["newer", "not-newer", "?"]:
    """
    Judge a producer's declared version against the one this consumer speaks.

    The grammar is exactly ``MAJOR.MINOR`` (ASCII digits, read by :func:`version_key`);
    anything else (``"draft"``, ``"1"``, ``"1.0.0"``, ``"1.1\\n"``) cannot be compared and
    is handled like a newer version (``"?"``).
    """
    theirs, ours = version_key(declared), version_key(spoken)
    if theirs is None or ours is None or len(theirs) != 2 or len(ours) != 2:
        return "?"
    return "newer" if theirs > ours else "not-newer"


def version_key(version: str) -> tuple[int, ...] | None:
    """
    A dotted version (``"1.1"``, a pre-1.0 package version such as ``"0.0.39"``) as the
    tuple it orders by, or ``None`` when it is not one.

    The one reading of a peer's version for ordering (the client's pins, the server's
    answer to an older peer, the members a peer predates).  Only ASCII digits count, and
    at most nine per part: ``str.isdigit`` also accepts ``"²"``, which ``int`` refuses, a
    regular expression's ``\\d`` accepts every script's digits, and a part of thousands
    of digits costs quadratic time to convert; a peer's version is untrusted text.
    """
    parts = version.split(".")
    if not all(p.isascii() and p.isdigit() and len(p) <= 9 for p in parts):
        return None
    return tuple(int(p) for p in parts)


# ---- talking down to an older peer ----------------------------------------------------------


def _unknown_to(since: str, peer_version: str | None) -> bool:
    if peer_version is None:
        return True  # a peer that declares no version predates every marked member
    # Dotted numbers of any length: pre-1.0 peers are named by package version (0.0.39).
    added, peer = version_key(since), version_key(peer_version)
    return added is not None and peer is not None and added > peer


def _omit(value: Any, node: _Node, peer: str | None, path: str, removed: list[str]) -> Any:
    if node is None:
        return value
    if isinstance(node, _Object):
        if not isinstance(value, dict):
            return value
        newer = SINCE.get(node.name, {})
        result: dict[str, Any] = {}
        for key, member in value.items():
            where = f"{path}/{escape_pointer(str(key))}"
            if key in newer and _unknown_to(newer[key], peer):
                removed.append(where)
                continue
            spec = node.fields.get(key)
            result[key] = member if spec is None else _omit(member, spec[0], peer, where, removed)
        return result
    if isinstance(node, _List):
        if not isinstance(value, list):
            return value
        return [_omit(v, node.element, peer, f"{path}/{i}", removed) for i, v in enumerate(value)]
    if isinstance(node, _Tagged):
        tag = value.get(node.prop) if isinstance(value, dict) else None
        member_plan = node.members.get(tag) if isinstance(tag, str) else None
        return value if member_plan is None else _omit(value, member_plan, peer, path, removed)
    for option in node.options:
        if (isinstance(value, list) and isinstance(option, _List)) or (
            isinstance(value, dict) and isinstance(option, _Object | _Tagged)
        ):
            return _omit(value, option, peer, path, removed)
    return value


def omit_newer_members(
    data: Mapping[str, Any], peer_version: str | None, *, definition: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """
    A wire document without the members its peer's protocol version does not have yet.

    A sender speaking a newer minor version than its peer should not make the peer strip
    (and warn about) members it cannot know; AG-UI lets a party downgrade for an older peer.
    Which members are newer is read from the schema (``x-since``, generated into
    ``registry.SINCE``), never from a list in code, so a field a later version adds is
    omitted for older peers the moment the schema marks it.  The walk follows the
    generated classes, nested messages, tool calls and union members included.

    Both directions use it: the client for the request body it sends an agent pinned with
    ``max_protocol_version``, and a server for each event it sends to a client whose
    ``RunAgentInput.protocolVersion`` is older (``omit_newer_members(to_wire(event),
    declared)``).

    Args:
        data: A wire document: an event (selected by its ``type``) unless ``definition``
            names another schema definition (``"RunAgentInput"``, ``"ToolCall"``...).
        peer_version: The version the peer declares; ``None`` (it declares none) omits
            every marked member, an uninterpretable version (``"draft"``) omits nothing.
        definition: The schema definition ``data`` is an instance of, when not an event.

    Returns:
        The reduced copy (``data`` is not modified) and the JSON pointers of every member
        omitted, in document order.

    .. versionadded:: 0.2.0
    """
    cls = EVENT_CLASSES[data["type"]] if definition is None else getattr(models, definition)
    removed: list[str] = []
    result = _omit(dict(data), _plan_class(cls), peer_version, "", removed)
    return result, removed


# ---- the boundary ----------------------------------------------------------------------------

_LEGACY_NULLS: Final[Mapping[str, tuple[str, ...]]] = {
    "RUN_FINISHED": ("rawEvent", "result", "outcome"),
    "SUBAGENT_FINISHED": ("rawEvent", "result"),
    "TOOL_CALL_START": ("rawEvent", "parentMessageId"),
    "TOOL_CALL_CHUNK": ("rawEvent", "parentMessageId"),
}
"""The optional members pre-1.0 producers sent as ``null``; read as absent, with a warning."""

_THINKING: Final[Mapping[type, str]] = {
    models.ThinkingStartEvent: "REASONING_START",
    models.ThinkingTextMessageStartEvent: "REASONING_MESSAGE_START",
    models.ThinkingTextMessageContentEvent: "REASONING_MESSAGE_CONTENT",
    models.ThinkingTextMessageEndEvent: "REASONING_MESSAGE_END",
    models.ThinkingEndEvent: "REASONING_END",
}
"""The deprecated events this boundary translates, and what each becomes."""


_THINKING_TYPES: Final = frozenset(t for t, cls in EVENT_CLASSES.items() if cls in _THINKING)
"""The wire ``type`` of each event :data:`_THINKING` translates."""

_EVENT_CLASSES: Final = tuple(EVENT_CLASSES.values())


class _NoParsers(dict[str, None]):
    def __missing__(self, event_type: str) -> None:
        return None


_NO_PARSERS: Final = _NoParsers()


# Subclassable from Python in the compiled build too (docs/DESIGN.md, "The hot core is compiled").
@mypyc_attr(allow_interpreted_subclasses=True)
class Receiver:
    """
    Applies the receiver's processing rules to one stream, an event at a time.

    Args:
        validate: Check raw dicts against the strict schema (and strip what it does not
            describe).  ``False`` trusts the input's shape: dicts are parsed without a
            schema check, and only undeclared top-level members are stripped.
        protocol_version: The version this consumer speaks, compared with
            ``RUN_STARTED.protocolVersion``.
        on_warning: Receives ``(symbol, message)`` for every warning.
        collect_issues: Record, in :attr:`last_issues`, every way a raw dict breaks the
            *strict* schema (an undeclared member included) before the boundary repairs
            it.  For a checker (``aguikit check``): it reports them without validating the
            event a second time.  Costs nothing on a valid event.
    """

    __slots__ = (
        "_collect",
        "_message_id",
        "_minted",
        "_parsers",
        "_span_id",
        "_validate",
        "last_issues",
        "on_warning",
        "protocol_version",
    )

    def __init__(
        self,
        *,
        validate: bool = True,
        protocol_version: str = PROTOCOL_VERSION,
        on_warning: WarningSink | None = None,
        collect_issues: bool = False,
    ) -> None:
        self._validate = validate
        # Without validation there is no fast path: every dict takes the trusting parse.
        self._parsers = event_parsers(strict=True) if validate else _NO_PARSERS
        self._collect = collect_issues
        self.protocol_version = protocol_version
        self.on_warning: WarningSink = on_warning or discard_warning
        self.last_issues: list[SchemaIssue] = []
        """Strict-schema issues of the latest raw dict (with ``collect_issues``)."""
        self._span_id: str | None = None
        self._message_id: str | None = None
        self._minted = 0

    def receive(self, item: Event | Mapping[str, Any]) -> Event | None:
        """
        Take one event (typed, or a raw wire dict) across the boundary.

        Returns:
            The event to deliver, or ``None`` when it was dropped (an unknown type).

        Raises:
            SchemaValidationError: a described field is malformed.
            UnknownEventTypeError: the document has no ``type`` string at all.
            WireFormatError: the document could not be turned into its typed event.
        """
        if self.last_issues:
            self.last_issues = []
        if type(item) is dict:
            # The common case, a decoded valid event: one lookup, one validator call.
            kind = item.get("type")
            parser = self._parsers[kind] if type(kind) is str else None
            parsed = parser(item) if parser is not None else None
            event = (
                parsed if parsed is not None else self._from_wire(item, tried=parser is not None)
            )
            if event is None:
                return None
        elif isinstance(item, Mapping):
            event = self._from_wire(item)
            if event is None:
                return None
        elif not isinstance(item, _EVENT_CLASSES):
            if is_sdk_model(item):  # an ag_ui.core event: across the boundary as its JSON
                return self.receive(sdk_wire(item))
            unknown: Any = item
            return parse_event(unknown)  # a list, a string, None: "expected an object"
        else:
            # Translated first, then stripped: the boundary comes before enforcement.
            event = self._translate_thinking(item) if type(item) in _THINKING else item
            if event.extra_members:
                for key in event.extra_members:
                    self._warn_stripped(f"/{escape_pointer(key)}", event.type)
                event = evolve_quietly(event, extra_members=None)
        if type(event) in _THINKING:
            # A valid retired shape on the fast path: nothing unknown on it to keep.
            return self._translate_thinking(event)
        if isinstance(event, RunStartedEvent) and event.protocol_version is not None:
            self._judge_version(event.protocol_version)
        return event

    def translate(self, item: Event | Mapping[str, Any]) -> Event | Mapping[str, Any]:
        """
        The compatibility boundary alone: a retired shape becomes its replacement, and
        nothing else changes.

        The processing model puts this first, before middleware and before enforcement: a
        shim must see material before enforcement strips it, and enforcement judges against
        the current protocol, in which a retired shape is simply unrecognised.  So a
        ``THINKING_*`` event becomes its ``REASONING_*`` replacement (minting the ids the
        old events lack, as :meth:`receive` does, sharing its state) and a pre-1.0
        ``null`` on an optional member becomes an absence, each with its warning, while an
        unknown member, an unknown event type or a malformed value passes on untouched, for
        enforcement to strip, drop or reject.  A retired shape that is itself malformed is
        passed on untranslated: translating it would repair it.

        :meth:`receive` runs this step itself; call it separately only with middleware
        between the two (:class:`aguikit.Agent` does).

        Args:
            item: A decoded wire mapping or a typed event (anything else passes unchanged,
                for :meth:`receive` to reject).

        Returns:
            ``item`` itself when nothing is retired in it, else its translation: a wire
            dict for a mapping (unknown members kept), a typed event for a typed one.

        .. versionadded:: 0.3.0
        """
        if isinstance(item, Mapping):
            kind = item.get("type")
            if type(kind) is not str:
                return item
            data = self._legacy_nulls(item, kind)
            if kind not in _THINKING_TYPES:
                return data
            try:
                retired = parse_event(data)  # tolerant: unknown members ride along
            except AguiError:
                return data  # malformed: enforcement rejects it, fatally
            return to_wire(self._translate_thinking(retired))
        if type(item) in _THINKING:
            return self._translate_thinking(item)
        return item

    def _legacy_nulls(self, data: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
        """``data`` without the optional ``null`` members pre-1.0 producers sent, warned."""
        legacy = [m for m in _LEGACY_NULLS.get(kind, ("rawEvent",)) if data.get(m, 0) is None]
        if not legacy:
            return data
        cleaned = dict(data)
        for member in legacy:
            del cleaned[member]
            self._warn("AGUI-W003", event_type=kind, member=member)
        return cleaned

    def _warn(self, rule_id: str, **fields: Any) -> None:
        self.on_warning(RULES_BY_ID[rule_id].symbol, render_message(rule_id, **fields))

    def _strict_issues(self, data: Mapping[str, Any]) -> None:
        if self._collect:
            self.last_issues = list(iter_schema_errors(data, "Event", strict=True))

    def _from_wire(self, data: Mapping[str, Any], *, tried: bool = False) -> Event | None:
        """The general path for a wire mapping; ``tried``: the fast parser already said no."""
        kind = data.get("type")
        if isinstance(kind, str) and kind not in EVENT_CLASSES:
            self._strict_issues(data)
            self._warn("AGUI-W001", event_type=kind)
            return None
        if not isinstance(kind, str):
            self._strict_issues(data)
            return parse_event(data)  # raises UnknownEventTypeError
        if not self._validate:
            event = parse_event(data, check=False)
            if type(event) in _THINKING:
                event = self._translate_thinking(event)
            if event.extra_members:
                for key in event.extra_members:
                    self._warn_stripped(f"/{escape_pointer(key)}", event.type)
                event = evolve_quietly(event, extra_members=None)
            return event
        parser = None if tried else self._parsers[kind]
        valid = parser(data) if parser is not None else None
        if valid is not None:
            return valid
        self._strict_issues(data)
        # The boundary first (retired shapes), then enforcement on what it hands on.
        translated = self.translate(data)
        assert isinstance(translated, Mapping)
        kind = translated["type"]
        cleaned, removed = strip_unknown(translated)
        for pointer in removed:
            self._warn_stripped(pointer, kind)
        return parse_event(cleaned, strict=True)

    def _warn_stripped(self, pointer: str, kind: str) -> None:
        self._warn("AGUI-W002", pointer=pointer, event_type=kind)

    def _judge_version(self, declared: str) -> None:
        if declared == self.protocol_version:
            return
        verdict = compare_protocol_versions(declared, self.protocol_version)
        if verdict == "?":
            self._warn("AGUI-W008", declared=declared, spoken=self.protocol_version)
        elif verdict == "newer":
            self._warn("AGUI-W007", declared=declared, spoken=self.protocol_version)

    def _mint(self, what: str) -> str:
        self._minted += 1
        return f"thinking-{what}-{self._minted}"

    def _continuation(self, established: str | None, kind: str) -> str:
        if established is not None:
            return established
        minted = self._mint("message")
        self._warn("AGUI-W006", entity_id=minted, event_type=kind)
        return minted

    def _translate_thinking(self, event: Event) -> Event:
        kind = event.type
        self._warn("AGUI-W004", event_type=kind, replacement=_THINKING[type(event)])
        base: dict[str, Any] = {
            "timestamp": event.timestamp,
            "raw_event": event.raw_event,
            "metadata": event.metadata,
            # What the boundary does not recognise is enforcement's to strip, on the
            # replacement, with its own warning: translation never drops it.
            "extra_members": event.extra_members,
        }
        if isinstance(event, models.ThinkingStartEvent):
            if event.title is not None:
                self._warn("AGUI-W005", title=repr(event.title))
            self._span_id = self._mint("span")
            return ReasoningStartEvent(message_id=self._span_id, **base)
        if isinstance(event, models.ThinkingTextMessageStartEvent):
            self._message_id = self._mint("message")
            return ReasoningMessageStartEvent(message_id=self._message_id, **base)
        if isinstance(event, models.ThinkingTextMessageContentEvent):
            message_id = self._continuation(self._message_id, kind)
            self._message_id = message_id
            return ReasoningMessageContentEvent(message_id=message_id, delta=event.delta, **base)
        if isinstance(event, models.ThinkingTextMessageEndEvent):
            message_id = self._continuation(self._message_id, kind)
            self._message_id = None
            return ReasoningMessageEndEvent(message_id=message_id, **base)
        span_id = self._span_id if self._span_id is not None else self._mint("span")
        self._span_id = None
        return ReasoningEndEvent(message_id=span_id, **base)
