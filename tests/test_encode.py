"""
The encoders against the official SDK's, byte for byte, with every optional member set.

The SDK (``ag-ui-protocol`` 1.0.0, a test dependency) writes pydantic models: its member
order is each model's field order at every depth, and its floats are Rust's ``ryu``
layout.  A test that leaves nested members unset cannot see either, so
:func:`fully_populated` builds an instance of every class with *every* optional member
set, recursively, with one of each union member where a list can hold several kinds.
"""

from __future__ import annotations

import enum
import io
import json
import types
import typing
import warnings
from typing import Any, Literal

import attrs
import pytest

from aguikit._generated import models
from aguikit._generated.registry import EVENT_CLASSES
from aguikit.encode import (
    SDK_ORDER,
    dumps_event,
    encode_jsonl,
    encode_sse,
    encode_sse_bytes,
    write_jsonl,
)
from aguikit.errors import SchemaValidationError, WireFormatError
from aguikit.validate import is_valid
from aguikit.wire import to_wire

sdk = pytest.importorskip("ag_ui.core", reason="the official SDK ag-ui-protocol is needed")
sdk_types = pytest.importorskip("ag_ui.core.types")
EventEncoder = pytest.importorskip("ag_ui.encoder").EventEncoder

SHARED = sorted(t for t in EVENT_CLASSES if t in {member.value for member in sdk.EventType})
"""The event types the SDK defines too, read from it: the deprecated ``THINKING_*`` and any
event the SDK predates have no encoder there to compare with."""
TINY = 1.5e-7
"""A float Python writes ``1.5e-07`` and pydantic ``1.5e-7``."""


def _value(hint: Any, depth: int, choice: int = 0) -> Any:
    origin = typing.get_origin(hint)
    if hint is str:
        return "/s"  # a JSON pointer, for patch paths; any id or text accepts it too
    if hint is bool:
        return True
    if hint is int:
        return 7
    if hint is float:
        return TINY
    if hint is Any:
        return {"k": [TINY, 1e21, "v"]}
    if hint == dict[str, Any]:
        return {"a": 1, "b": TINY}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if origin is Literal:
        return typing.get_args(hint)[0]
    if isinstance(hint, type) and attrs.has(hint):
        return fully_populated(hint, depth + 1, choice)
    if origin is list:
        (item,) = typing.get_args(hint)
        if typing.get_origin(item) in (typing.Union, types.UnionType):
            return [_value(member, depth, choice) for member in typing.get_args(item)]
        return [_value(item, depth, choice)]
    if origin in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        lists = [m for m in members if typing.get_origin(m) is list]
        if lists:
            return _value(lists[0], depth, choice)
        return _value(members[choice % len(members)], depth, choice)
    raise AssertionError(f"no value for {hint!r}")


def _sdk_fields(cls: type) -> set[str] | None:
    """
    The wire names the SDK's model of ``cls`` declares: the shapes both sides share come
    from the SDK itself (a member a later protocol version added, which ag-ui-protocol
    1.0.0 does not know, has no SDK bytes to equal).
    """
    official = getattr(sdk, cls.__name__, None) or getattr(sdk_types, cls.__name__, None)
    if not hasattr(official, "model_fields"):
        return None
    return {field.alias or key for key, field in official.model_fields.items()}


def fully_populated(cls: type, depth: int = 0, choice: int = 0) -> Any:
    """
    An instance of ``cls`` with every member set, nested models fully populated too; where a
    member is one of several models (a run's outcome), ``choice`` picks which, so every
    variant of every union is built by some ``choice`` in ``VARIANTS``.
    """
    hints = typing.get_type_hints(cls)
    shared = _sdk_fields(cls)
    kwargs = {
        f.name: _value(hints[f.name], depth, choice)
        for f in attrs.fields(cls)
        if f.name != "extra_members"
        and (shared is None or str(f.metadata.get("wire", f.name)) in shared)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cls(**kwargs)


def _sdk_frame(wire: dict[str, Any]) -> str:
    official = getattr(sdk, EVENT_CLASSES[wire["type"]].__name__).model_validate(wire)
    frame: str = EventEncoder().encode(official)
    return frame


VARIANTS = range(3)
"""The most members a non-list union of models has (RUN_FINISHED's outcome)."""


@pytest.mark.parametrize("choice", VARIANTS)
@pytest.mark.parametrize("event_type", SHARED)
def test_a_fully_populated_typed_event_encodes_exactly_as_the_sdk_does(
    event_type: str, choice: int
) -> None:
    """Nested members in the SDK's field order, floats in its layout, at every depth."""
    event = fully_populated(EVENT_CLASSES[event_type], choice=choice)
    wire = to_wire(event)

    assert is_valid(wire, strict=False), wire
    assert _sdk_frame(wire) == encode_sse(event)


@pytest.mark.parametrize("choice", VARIANTS)
@pytest.mark.parametrize("event_type", SHARED)
def test_a_fully_populated_wire_dict_encodes_exactly_as_the_sdk_does(
    event_type: str, choice: int
) -> None:
    """A dict in aguikit's member order comes out in the SDK's, like the typed event."""
    wire = to_wire(fully_populated(EVENT_CLASSES[event_type], choice=choice))
    shuffled = json.loads(json.dumps(wire, sort_keys=True))  # any order in, SDK order out

    assert _sdk_frame(wire) == encode_sse(shuffled)
    assert _sdk_frame(wire)[len("data: ") : -2] == dumps_event(shuffled)


def test_the_variants_cover_every_model_class_an_event_can_hold() -> None:
    """Every generated class but the deprecated events' appears in some fully built event."""
    seen: set[str] = set()

    def walk(obj: Any) -> None:
        if attrs.has(type(obj)):
            seen.add(type(obj).__name__)
            for field in attrs.fields(type(obj)):
                walk(getattr(obj, field.name))
        elif isinstance(obj, list):
            for item in obj:
                walk(item)

    for event_type in SHARED:
        for choice in VARIANTS:
            walk(fully_populated(EVENT_CLASSES[event_type], choice=choice))
    reachable: set[str] = set()

    def reach(hint: Any) -> None:
        if isinstance(hint, type) and attrs.has(hint) and hint.__name__ not in reachable:
            reachable.add(hint.__name__)
            for member in typing.get_type_hints(hint).values():
                reach(member)
        for arg in typing.get_args(hint):
            reach(arg)

    for event_type in SHARED:
        reach(EVENT_CLASSES[event_type])

    assert set() == reachable - seen


def test_the_member_order_table_is_the_installed_sdks() -> None:
    """``SDK_ORDER`` lists exactly the classes whose order differs, in the SDK's order."""
    differs = {}
    for name, cls in vars(models).items():
        official = getattr(sdk, name, None) or getattr(sdk_types, name, None)
        if not (isinstance(cls, type) and attrs.has(cls)) or not hasattr(official, "model_fields"):
            continue
        theirs = tuple(field.alias or key for key, field in official.model_fields.items())
        ours = tuple(
            str(f.metadata.get("wire", f.name))
            for f in attrs.fields(cls)
            if f.name != "extra_members" and str(f.metadata.get("wire", f.name)) in theirs
        )
        if ours != theirs:
            differs[name] = theirs

    assert differs == dict(SDK_ORDER)


@pytest.mark.parametrize("exponent", range(-20, 21))
@pytest.mark.parametrize("mantissa", [1.0, 1.5, -2.25, 1.2345678901234567, 9.999999999999999])
def test_floats_are_written_as_pydantic_writes_them(mantissa: float, exponent: int) -> None:
    """``1e-7``, ``0.000015``, ``1e16``: Rust's layout, not Python's ``1e-07``/``1e+16``."""
    value = mantissa * 10.0**exponent
    wire = {"type": "CUSTOM", "name": "n", "value": [value, {"x": value}]}

    assert _sdk_frame(wire) == encode_sse(wire)


def test_a_float_like_text_inside_a_string_is_left_alone() -> None:
    """Only numbers are rewritten: ``"1e-07"`` in a string stays as the producer wrote it."""
    wire = {"type": "CUSTOM", "name": "1e-07", "value": ['a"1e-07', 1e-07]}

    assert '{"type":"CUSTOM","name":"1e-07","value":["a\\"1e-07",1e-7]}' == dumps_event(wire)


def test_a_lone_surrogate_is_a_wire_format_error_not_a_unicode_error() -> None:
    """UTF-8 cannot carry ``\\ud800``: the documented error, not ``UnicodeEncodeError``."""
    from aguikit.transport.sse import encode_bytes

    wire = {"type": "CUSTOM", "name": "n", "value": "\ud800"}

    with pytest.raises(WireFormatError, match="surrogate"):
        encode_sse_bytes(wire)
    with pytest.raises(WireFormatError, match="surrogate"):
        encode_bytes(wire)


@pytest.mark.parametrize(
    "event",
    [
        models.TextMessageContentEvent(message_id=5, delta="x"),  # type: ignore[arg-type]
        models.TextMessageStartEvent(message_id="m", role="bot"),  # type: ignore[arg-type]
        models.ToolCallArgsEvent(tool_call_id="c", delta=None),  # type: ignore[arg-type]
    ],
    ids=["int-id", "unknown-role", "null-delta"],
)
def test_encoders_refuse_a_typed_event_of_the_wrong_types_by_default(event: Any) -> None:
    """A constructor does not check types; the encoder does, before any consumer sees it."""
    for encode in (dumps_event, encode_sse, encode_sse_bytes, encode_jsonl):
        with pytest.raises(SchemaValidationError):
            encode(event)
    with pytest.raises(SchemaValidationError):
        write_jsonl([event], io.StringIO())


def test_validation_can_be_turned_off_for_a_trusted_hot_path() -> None:
    """``validate=False`` writes what it is given, as the transports' frame writers do."""
    event = models.TextMessageContentEvent(message_id=5, delta="x")  # type: ignore[arg-type]

    assert 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":5,"delta":"x"}\n\n' == encode_sse(
        event, validate=False
    )
