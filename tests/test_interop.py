"""
``aguikit.interop``: ``from_sdk`` / ``to_sdk`` between ``ag_ui.core`` (ag-ui-protocol 1.0.0)
and aguikit's typed values, lossless for every shape both know, and ``Session.feed``
taking SDK events directly.

Unlike the ``exclude_none`` dumps pinned in ``test_interop_sdk.py``, the conversion reads
the SDK's own serialisation (which keeps a required ``null``), so generated documents here
include ``null`` wherever the schema allows it.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import strategies

from aguikit._generated import models
from aguikit._generated.registry import DEPRECATED_EVENT_TYPES, EVENT_CLASSES, MESSAGE_CLASSES
from aguikit.interop import from_sdk, is_sdk_model, to_sdk
from aguikit.session import Session
from aguikit.wire import to_wire

ag_ui_core = pytest.importorskip("ag_ui.core", reason="the official SDK ag-ui-protocol is needed")

SDK_TYPES = frozenset(member.value for member in ag_ui_core.EventType)
SHARED_TYPES = sorted(t for t in EVENT_CLASSES if t in SDK_TYPES)
"""Read from the SDK: the event types both libraries define."""
SDK_LACKS = sorted(t for t in EVENT_CLASSES if t not in SDK_TYPES)
"""Computed, never listed: the deprecated ``THINKING_*`` and any event the SDK predates."""


@pytest.mark.parametrize("event_type", SHARED_TYPES)
@given(data=st.data())
def test_every_shared_event_survives_to_sdk_then_from_sdk(
    event_type: str, data: st.DataObject
) -> None:
    """aguikit → SDK → aguikit is the identity, required nulls included."""
    ours = data.draw(strategies.instances(EVENT_CLASSES[event_type]))

    official = to_sdk(ours)

    assert event_type == official.type
    assert to_wire(ours) == to_wire(from_sdk(official))
    assert to_wire(ours) == official.model_dump(mode="json", by_alias=True)


@pytest.mark.parametrize("role", sorted(MESSAGE_CLASSES))
@given(data=st.data())
def test_every_message_role_survives_both_ways(role: str, data: st.DataObject) -> None:
    """Messages of each role, multimodal parts included."""
    ours = data.draw(strategies.instances(MESSAGE_CLASSES[role]))

    official = to_sdk(ours)

    assert role == official.role
    assert to_wire(ours) == to_wire(from_sdk(official))


@given(strategies.instances(models.RunAgentInput))
def test_the_run_request_survives_both_ways(ours: models.RunAgentInput) -> None:
    """``RunAgentInput``, the request body, with generated messages, tools and context."""
    official = to_sdk(ours)

    assert isinstance(official, ag_ui_core.RunAgentInput)
    assert to_wire(ours) == to_wire(from_sdk(official))


def test_an_sdk_built_event_converts_with_its_extras_kept() -> None:
    """An SDK event built by a framework, with a member aguikit does not declare."""
    official = ag_ui_core.TextMessageContentEvent(message_id="m1", delta="hi", colour="red")

    ours = from_sdk(official)

    assert isinstance(ours, models.TextMessageContentEvent)
    assert {"colour": "red"} == ours.extra_members


def test_the_events_the_sdk_lacks_include_every_deprecated_one() -> None:
    """ag-ui-protocol 1.0 dropped ``THINKING_*``; anything else it lacks is newer than it."""
    assert set(DEPRECATED_EVENT_TYPES) <= set(SDK_LACKS)


@pytest.mark.parametrize("event_type", SDK_LACKS)
@given(data=st.data())
def test_an_event_the_sdk_lacks_converts_to_a_clear_type_error(
    event_type: str, data: st.DataObject
) -> None:
    """No SDK counterpart: a TypeError naming the type and why, not a pydantic error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ours = data.draw(strategies.instances(EVENT_CLASSES[event_type]))
    why = "deprecated" if event_type in DEPRECATED_EVENT_TYPES else "not in this SDK"

    with pytest.raises(TypeError, match=f"no event {event_type} \\({why}\\)"):
        to_sdk(ours)


def test_from_sdk_refuses_what_is_not_an_sdk_model() -> None:
    """A dict or an aguikit event is not an SDK model."""
    with pytest.raises(TypeError, match=r"ag_ui\.core model"):
        from_sdk({"type": "RUN_STARTED"})
    assert not is_sdk_model(models.RunStartedEvent(thread_id="t", run_id="r"))
    assert is_sdk_model(ag_ui_core.RunStartedEvent(thread_id="t", run_id="r"))


def test_session_feed_accepts_sdk_events_directly() -> None:
    """A consumer holding SDK objects feeds them as they are."""
    session = Session()
    session.feed_all(
        [
            ag_ui_core.RunStartedEvent(thread_id="t", run_id="r"),
            ag_ui_core.TextMessageStartEvent(message_id="m", role="assistant"),
            ag_ui_core.TextMessageContentEvent(message_id="m", delta="hello"),
            ag_ui_core.TextMessageEndEvent(message_id="m"),
            ag_ui_core.StateSnapshotEvent(snapshot=None),
            ag_ui_core.RunFinishedEvent(thread_id="t", run_id="r"),
        ]
    )
    session.finish()

    assert "hello" == session.messages[0].content
    assert session.state is None


def test_without_the_sdk_the_error_names_the_extra() -> None:
    """ag-ui-protocol is optional: calling the converters without it says what to install."""
    code = (
        "import sys; sys.modules['ag_ui'] = None; sys.modules['ag_ui.core'] = None\n"
        "from aguikit.interop import from_sdk, to_sdk\n"
        "for convert in (from_sdk, to_sdk):\n"
        "    try:\n        convert(object())\n    except ImportError as e:\n        print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout

    assert 2 == out.count("aguikit[sdk]")
