"""
Interoperability with the official Python SDK (``ag-ui-protocol`` 1.0.0, a test-only
dependency): what it writes, aguikit reads back unchanged; what aguikit writes, it accepts.

The shapes both sides share are read from the SDK itself, never from a list kept here: the
event types are the SDK's ``EventType`` members (aguikit also models the deprecated
``THINKING_*`` events, and may model events a later protocol version adds), and a member
aguikit models that the SDK class of the same name has no field for (a 1.1 member such as
``encryptedValueType``) is left out of the generated documents, since the SDK keeps such
a member only as an untyped extra, written after its own fields.  Messages of every role
and the run request are covered too.  Documents come from the same strategies as the
property tests, with one concession: the SDK's ``exclude_none`` dump drops a required member
whose value is a legitimate ``null`` (``STATE_SNAPSHOT.snapshot``, a patch ``value``), so
those are generated non-null here and the loss is pinned by its own test below.
"""

from __future__ import annotations

from typing import Any, Final

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import strategies
from tests.support import ALL_MESSAGES, FAMILIES, FULL_RUN_INPUT

from aguikit._generated import models
from aguikit._generated.registry import DEPRECATED_EVENT_TYPES, EVENT_CLASSES, MESSAGE_CLASSES
from aguikit.wire import parse_event, parse_message, parse_run_agent_input, to_wire

ag_ui_core = pytest.importorskip("ag_ui.core", reason="the official SDK ag-ui-protocol is needed")
pydantic = pytest.importorskip("pydantic")

EVENT_ADAPTER = pydantic.TypeAdapter(ag_ui_core.Event)
MESSAGE_ADAPTER = pydantic.TypeAdapter(ag_ui_core.Message)
SDK_TYPES = frozenset(member.value for member in ag_ui_core.EventType)
SHARED_TYPES = sorted(t for t in EVENT_CLASSES if t in SDK_TYPES)


def _sdk_members(name: str) -> set[str] | None:
    """The wire names the SDK model called ``name`` declares (``None``: it has no such model)."""
    model = getattr(ag_ui_core, name, None)
    fields = getattr(model, "model_fields", None)
    if fields is None:
        return None
    return {field.alias or member for member, field in fields.items()}


def _unknown_to_the_sdk() -> strategies.Omitted:
    """Every ``(definition, member)`` aguikit models and the same-named SDK model lacks."""
    out = set()
    for name, cls in strategies.MODEL_CLASSES.items():
        theirs = _sdk_members(name)
        if theirs is not None:
            out |= {
                (name, wire)
                for f in strategies.model_fields(cls)
                if (wire := strategies.wire_name(f)) not in theirs
            }
    return frozenset(out)


SDK_UNKNOWN: Final = _unknown_to_the_sdk()
"""Derived from the SDK's models: what the documents of these tests leave out."""


def _shared(cls: type) -> st.SearchStrategy[Any]:
    return strategies.instances(cls, nullable_any=False, omit=SDK_UNKNOWN)


def _dump(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True)
    return dumped


def test_aguikit_reads_every_event_type_the_sdk_writes() -> None:
    """
    The SDK 1.0.0 has 31 types, all of them aguikit's; the deprecated ``THINKING_*`` are
    aguikit's and not the SDK's.  Other aguikit-only types are allowed (a newer protocol).
    """
    official = set(SDK_TYPES)

    assert 31 == len(official)
    assert official == set(SHARED_TYPES)
    assert set(DEPRECATED_EVENT_TYPES) <= set(EVENT_CLASSES) - official


def test_the_members_left_out_are_exactly_the_optional_ones_the_sdk_lacks() -> None:
    """
    The exclusions are the SDK's, not a list: with ag-ui-protocol 1.0.0 they are the 1.1
    members, and none is required (a required member the SDK lacked would not be shared).
    """
    from aguikit._generated.registry import SINCE

    for name, wire in SDK_UNKNOWN:
        (field,) = [
            f
            for f in strategies.model_fields(strategies.MODEL_CLASSES[name])
            if strategies.wire_name(f) == wire
        ]
        assert field.default is not attrs.NOTHING, (name, wire)
    newer = {(name, wire) for name, members in SINCE.items() for wire in members}
    assert newer <= SDK_UNKNOWN | {(n, w) for n, w in newer if _sdk_members(n) is None}


@pytest.mark.parametrize("event_type", SHARED_TYPES)
@given(data=st.data())
def test_an_sdk_event_dump_parses_and_writes_back_unchanged(
    event_type: str, data: st.DataObject
) -> None:
    """``model_dump(by_alias, exclude_none)`` → ``parse_event`` → ``to_wire`` is the identity."""
    ours = data.draw(_shared(EVENT_CLASSES[event_type]))
    official = EVENT_ADAPTER.validate_python(to_wire(ours))
    dumped = _dump(official)

    assert dumped == to_wire(parse_event(dumped))


@pytest.mark.parametrize("event_type", SHARED_TYPES)
@given(data=st.data())
def test_the_sdk_accepts_what_to_wire_writes_and_writes_the_same_json(
    event_type: str, data: st.DataObject
) -> None:
    """The SDK validates our output into the same event type and dumps the same JSON."""
    ours = data.draw(_shared(EVENT_CLASSES[event_type]))
    wire = to_wire(ours)

    official = EVENT_ADAPTER.validate_python(wire)

    assert event_type == official.type
    assert wire == official.model_dump(mode="json", by_alias=True, exclude_none=True)


def _holds_a_required_null(doc: dict[str, Any]) -> bool:
    """Whether a required member somewhere in the event is a legitimate ``null``."""
    return any(
        getattr(node, field.name) is None and field.default is attrs.NOTHING
        for _, node in strategies._objects(parse_event(doc))
        for field in strategies.model_fields(type(node))
    )


REPRESENTATIVE = [
    d
    for docs in FAMILIES.values()
    for d in docs
    if d["type"] not in DEPRECATED_EVENT_TYPES and not _holds_a_required_null(d)
] + [
    {"type": "CUSTOM", "name": "ping", "value": {"n": None}, "metadata": {"k": None}},
    {
        "type": "STATE_DELTA",
        "delta": [
            {"op": "add", "path": "/a/-", "value": [None]},
            {"op": "move", "from": "/a/0", "path": "/f"},
            {"op": "test", "path": "/f", "value": False},
        ],
    },
]


def test_the_representative_table_still_covers_every_shared_type() -> None:
    """Leaving out the documents with a required null loses no event type."""
    assert set(SHARED_TYPES) == {d["type"] for d in REPRESENTATIVE}


@pytest.mark.parametrize("doc", REPRESENTATIVE, ids=lambda d: d["type"])
def test_hand_built_representative_events_interoperate(doc: dict[str, Any]) -> None:
    """The support family table, optional members filled, passes both directions."""
    official = EVENT_ADAPTER.validate_python(doc)

    assert doc == official.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert _dump(official) == to_wire(parse_event(_dump(official)))


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=lambda m: m["role"])
def test_messages_of_every_role_interoperate(message: dict[str, Any]) -> None:
    """Every role, multimodal user content included, round-trips through both libraries."""
    official = MESSAGE_ADAPTER.validate_python(to_wire(parse_message(message)))
    dumped = _dump(official)

    assert message == official.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped == to_wire(parse_message(dumped))


@pytest.mark.parametrize("role", sorted(MESSAGE_CLASSES))
@given(data=st.data())
def test_generated_messages_interoperate(role: str, data: st.DataObject) -> None:
    """Generated messages of each role: accepted by the SDK, its dump read back unchanged."""
    ours = data.draw(_shared(MESSAGE_CLASSES[role]))
    official = MESSAGE_ADAPTER.validate_python(to_wire(ours))
    dumped = _dump(official)

    assert to_wire(ours) == official.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped == to_wire(parse_message(dumped))


@given(_shared(models.RunAgentInput))
def test_generated_run_agent_input_interoperates(ours: models.RunAgentInput) -> None:
    """The request body both ways: the SDK accepts ours and we read its dump unchanged."""
    official = ag_ui_core.RunAgentInput.model_validate(to_wire(ours))
    dumped = _dump(official)

    assert to_wire(ours) == official.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped == to_wire(parse_run_agent_input(dumped))


def test_a_full_run_agent_input_interoperates() -> None:
    """The hand-built request with every optional member."""
    official = ag_ui_core.RunAgentInput.model_validate(FULL_RUN_INPUT)

    assert FULL_RUN_INPUT == to_wire(parse_run_agent_input(_dump(official)))


@pytest.mark.parametrize(
    ("doc", "lost"),
    [
        ({"type": "STATE_SNAPSHOT", "snapshot": None}, ("snapshot",)),
        ({"type": "CUSTOM", "name": "n", "value": None}, ("value",)),
        ({"type": "RAW", "event": None}, ("event",)),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a", "value": None}]},
            ("delta", 0, "value"),
        ),
    ],
    ids=["snapshot", "custom-value", "raw-event", "patch-value"],
)
def test_the_sdk_exclude_none_dump_loses_a_required_null_that_aguikit_keeps(
    doc: dict[str, Any], lost: tuple[str | int, ...]
) -> None:
    """
    Pins the one known asymmetry: a required member whose value is ``null`` is valid,
    aguikit keeps it, and the SDK's ``exclude_none`` dump drops it.  If the SDK fixes this,
    the ``nullable_any=False`` concession in this module can go.
    """
    official = _dump(EVENT_ADAPTER.validate_python(doc))
    *path, member = lost
    holder: Any = official
    for step in path:
        holder = holder[step]

    assert doc == to_wire(parse_event(doc))
    assert member not in holder
