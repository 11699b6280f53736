"""Tests for :mod:`aguikit.receiver`: the receiver's compatibility boundary."""

from __future__ import annotations

from typing import Any

import pytest

from aguikit.errors import SchemaValidationError, UnknownEventTypeError
from aguikit.models import (
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningStartEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
)
from aguikit.receiver import Receiver, compare_protocol_versions, strip_unknown


class Sink:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []

    def __call__(self, code: str, message: str) -> None:
        self.warnings.append((code, message))

    @property
    def codes(self) -> list[str]:
        return [code for code, _ in self.warnings]


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def receiver(sink: Sink) -> Receiver:
    return Receiver(protocol_version="1.1", on_warning=sink)


def test_a_clean_event_crosses_without_a_warning(receiver: Receiver, sink: Sink) -> None:
    """The common path: one strict validator call, then parse."""
    event = receiver.receive({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"})

    assert TextMessageContentEvent(message_id="m", delta="x") == event
    assert [] == sink.warnings


def test_an_unknown_event_type_is_dropped_with_a_warning_naming_it(
    receiver: Receiver, sink: Sink
) -> None:
    """The run survives; the application never sees it."""
    assert receiver.receive({"type": "FUTURE_EVENT", "somethingNew": True}) is None
    assert ["unknown-event"] == sink.codes
    assert "FUTURE_EVENT" in sink.warnings[0][1]


def test_an_event_without_a_type_is_fatal(receiver: Receiver) -> None:
    """Nothing names what it is, so there is nothing to tolerate."""
    with pytest.raises(UnknownEventTypeError):
        receiver.receive({"messageId": "m"})


def test_an_undeclared_property_is_stripped_with_its_pointer(
    receiver: Receiver, sink: Sink
) -> None:
    """The event is delivered without it."""
    event = receiver.receive(
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x", "futureProp": 1}
    )

    assert isinstance(event, TextMessageContentEvent)
    assert event.extra_members is None
    assert "'/futureProp'" in sink.warnings[0][1]


def test_an_unknown_outcome_is_stripped_from_its_optional_slot(
    receiver: Receiver, sink: Sink
) -> None:
    """The run ends exactly as an outcome-less RUN_FINISHED does."""
    event = receiver.receive(
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "paused"}}
    )

    assert isinstance(event, RunFinishedEvent)
    assert event.outcome is None
    assert "'/outcome'" in sink.warnings[0][1]


def test_an_array_in_the_outcome_slot_is_malformed_not_unknown(receiver: Receiver) -> None:
    """Stripping it would report success for a paused run."""
    with pytest.raises(SchemaValidationError) as caught:
        receiver.receive(
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": [{"type": "x"}]}
        )
    assert "/outcome" == caught.value.issues[0].pointer


def test_a_malformed_known_field_is_fatal(receiver: Receiver) -> None:
    """Never coerced or ignored."""
    with pytest.raises(SchemaValidationError, match="delta"):
        receiver.receive({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 42})


def test_unknown_union_members_inside_lists_are_dropped_and_the_list_survives() -> None:
    """A future content part goes; the text parts around it stay; pointers name it."""
    stripped, removed = strip_unknown(
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [
                {
                    "id": "u",
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "before"},
                        {"type": "hologram", "source": {"type": "data", "value": "A"}},
                        {"type": "text", "text": "after", "glow": True},
                    ],
                }
            ],
        }
    )

    assert ["/messages/0/content/1", "/messages/0/content/2/glow"] == removed
    assert [
        {"type": "text", "text": "before"},
        {"type": "text", "text": "after"},
    ] == stripped["messages"][0]["content"]


def test_an_unknown_patch_operation_is_dropped_and_open_operation_members_are_kept(
    receiver: Receiver, sink: Sink
) -> None:
    """RFC 6902 operations are open objects; an unknown ``op`` is an unknown member."""
    event: Any = receiver.receive(
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "increment", "path": "/count", "value": 1},
                {"op": "remove", "path": "/x", "value": "leftover"},
            ],
        }
    )

    assert ["remove"] == [op.op for op in event.delta]
    assert {"value": "leftover"} == event.delta[0].extra_members
    assert 1 == len(sink.warnings)
    assert "'/delta/0'" in sink.warnings[0][1]


def test_pre_1_0_nulls_are_read_as_absent_with_a_warning(receiver: Receiver, sink: Sink) -> None:
    """``outcome: null`` and friends were legal once."""
    event = receiver.receive(
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": None, "result": None}
    )

    assert isinstance(event, RunFinishedEvent)
    assert ["legacy-null", "legacy-null"] == sink.codes


def test_typed_events_with_extra_members_are_stripped_too(receiver: Receiver, sink: Sink) -> None:
    """Whatever the source, nothing undeclared reaches the application."""
    event = receiver.receive(
        TextMessageContentEvent(message_id="m", delta="x", extra_members={"later": 1})
    )

    assert event is not None
    assert event.extra_members is None
    assert ["unknown-member"] == sink.codes


def test_without_validation_only_top_level_extras_are_stripped(sink: Sink) -> None:
    """validate=False trusts the document's shape."""
    receiver = Receiver(validate=False, on_warning=sink)
    event = receiver.receive(
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x", "later": 1}
    )

    assert TextMessageContentEvent(message_id="m", delta="x") == event
    assert ["unknown-member"] == sink.codes


def test_thinking_events_are_translated_into_reasoning_with_minted_ids(
    receiver: Receiver, sink: Sink
) -> None:
    """Each translation is announced, the dropped title separately."""
    out = [
        receiver.receive(document)
        for document in (
            {"type": "THINKING_START", "title": "Working"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "Let me check."},
            {"type": "THINKING_TEXT_MESSAGE_END"},
            {"type": "THINKING_END"},
        )
    ]

    assert [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ] == [e.type for e in out if e is not None]
    assert isinstance(out[0], ReasoningStartEvent)
    assert isinstance(out[2], ReasoningMessageContentEvent)
    assert isinstance(out[4], ReasoningEndEvent)
    assert out[0].message_id == out[4].message_id
    assert out[1] is not None and out[1].message_id == out[2].message_id  # type: ignore[union-attr]
    assert "THINKING_START" in sink.warnings[0][1]
    assert "lossy-translation" in sink.codes


@pytest.mark.parametrize(
    ("declared", "code"),
    [
        ("1.1", None),
        ("1.0", None),
        ("1.2", "protocol-version-newer"),
        ("2.0", "protocol-version-newer"),
        ("draft", "protocol-version-uninterpretable"),
        ("1.1.0", "protocol-version-uninterpretable"),
    ],
)
def test_a_producers_protocol_version_is_judged_against_the_consumers(
    receiver: Receiver, sink: Sink, declared: str, code: str | None
) -> None:
    """Same or older is quiet; newer or uninterpretable is served with a warning."""
    receiver.receive(
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": declared}
    )

    assert ([] if code is None else [code]) == sink.codes


def test_version_comparison_is_numeric_not_textual() -> None:
    """1.10 is newer than 1.9."""
    assert "newer" == compare_protocol_versions("1.10", "1.9")
    assert "not-newer" == compare_protocol_versions("1.9", "1.10")
    assert "?" == compare_protocol_versions("v1", "1.0")


def test_stripping_a_deprecated_typed_event_does_not_warn_its_receiver() -> None:
    """
    A typed THINKING_* event carrying an unknown member is translated, then rebuilt without
    the member (the compatibility boundary comes before enforcement, so the warning names the
    replacement); the rebuild is the library's, not the user's, so it must not raise a
    DeprecationWarning.
    """
    import warnings

    from aguikit import Session, parse_event

    session = Session()
    session.feed({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    event = parse_event({"type": "THINKING_START", "futureProp": 1})

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        session.feed(event)

    assert ["deprecated-event", "unknown-member"] == [w.code for w in session.warnings]
    assert "on REASONING_START" in session.warnings[1].message
