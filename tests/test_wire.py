"""
Tests for :mod:`aguikit.wire`: wire dicts in, typed events out, and back, exactly.
"""

from __future__ import annotations

import json
import typing
import warnings
from typing import Any

import attrs
import pytest
from tests import corpus, strategies
from tests.support import ALL_MESSAGES, DERIVED, FAMILIES, FULL_RUN_INPUT, representatives

from aguikit._generated import models
from aguikit._generated.registry import DEPRECATED_EVENT_TYPES, EVENT_CLASSES, MESSAGE_CLASSES
from aguikit.encode import dumps_event, loads_event
from aguikit.errors import (
    DecodeError,
    LimitExceededError,
    SchemaValidationError,
    UnknownEventTypeError,
    WireFormatError,
)
from aguikit.validate import is_valid
from aguikit.wire import (
    parse_as,
    parse_event,
    parse_message,
    parse_run_agent_input,
    to_wire,
)

CLASSES: list[type] = [strategies.MODEL_CLASSES[name] for name in sorted(strategies.MODEL_CLASSES)]

FAMILY_CASES = [
    pytest.param(doc, id=f"{family}:{doc['type']}:{i}")
    for family, docs in representatives().items()
    for i, doc in enumerate(docs)
]


def test_the_representatives_cover_every_event_type() -> None:
    """Every event type the registry knows has a representative document, hand-written in
    ``FAMILIES`` or derived from the schema."""
    covered = {doc["type"] for docs in representatives().values() for doc in docs}

    assert set(EVENT_CLASSES) == covered


def test_an_event_type_the_table_lacks_gets_a_valid_document_from_the_schema() -> None:
    """A table written before an event existed (here: without its tool-call family) is
    completed from the schema, one valid document of each missing type, deterministically."""
    older = {family: docs for family, docs in FAMILIES.items() if family != "tools"}

    completed = representatives(older)

    derived = completed[DERIVED]
    covered = {doc["type"] for docs in older.values() for doc in docs}
    assert {doc["type"] for doc in FAMILIES["tools"]} <= {doc["type"] for doc in derived}
    assert set(EVENT_CLASSES) - covered == {doc["type"] for doc in derived}
    assert all(is_valid(doc) for doc in derived)
    assert derived == representatives(older)[DERIVED]


@pytest.mark.parametrize("doc", FAMILY_CASES)
def test_a_representative_event_parses_to_the_class_its_type_selects(doc: dict[str, Any]) -> None:
    """``parse_event`` dispatches on ``type`` and the document is valid to begin with."""
    assert is_valid(doc)

    event = parse_event(doc)

    assert EVENT_CLASSES[doc["type"]] is type(event)


@pytest.mark.parametrize("doc", FAMILY_CASES)
def test_a_representative_event_round_trips_exactly(doc: dict[str, Any]) -> None:
    """``to_wire(parse_event(d)) == d``, and the same through the JSON text functions."""
    assert doc == to_wire(parse_event(doc))
    assert doc == json.loads(dumps_event(loads_event(json.dumps(doc))))


def test_parsed_fields_are_typed_objects_not_dicts() -> None:
    """Nested shapes become their classes: messages, tool calls, parts, sources, outcomes."""
    snapshot = parse_event(FAMILIES["messages snapshot"][0])
    finished = parse_event(FAMILIES["lifecycle"][4])

    assert isinstance(snapshot, models.MessagesSnapshotEvent)
    assert [MESSAGE_CLASSES[m["role"]] for m in ALL_MESSAGES] == [
        type(m) for m in snapshot.messages
    ]
    assistant = snapshot.messages[2]
    assert isinstance(assistant, models.AssistantMessage)
    assert assistant.tool_calls is not None
    assert models.FunctionCall(name="f", arguments="{}") == assistant.tool_calls[0].function
    user = snapshot.messages[3]
    assert isinstance(user, models.UserMessage)
    assert isinstance(user.content, list)
    assert [models.TextPart, models.ImagePart, models.AudioPart, models.VideoPart] == [
        type(p) for p in user.content[:4]
    ]
    video = user.content[3]
    assert isinstance(video, models.VideoPart)
    assert models.FileSource(value="file-1", provider="openai") == video.source
    assert isinstance(finished, models.RunFinishedEvent)
    assert isinstance(finished.outcome, models.RunFinishedInterruptOutcome)
    assert "approval" == finished.outcome.interrupts[0].reason


def test_parse_event_builds_the_same_value_the_constructor_builds() -> None:
    """The typed event equals the one user code would write by hand."""
    expected = models.ToolCallStartEvent(
        tool_call_id="c1", tool_call_name="search", parent_message_id="m1"
    )

    assert expected == parse_event(FAMILIES["tools"][0])


# --------------------------------------------------------------------------- unknown type


@pytest.mark.parametrize(
    ("value", "suggestion"),
    [
        ("runStarted", "RUN_STARTED"),
        ("text_message_content", "TEXT_MESSAGE_CONTENT"),
        ("TOOL_CALL_STRAT", "TOOL_CALL_START"),
        ("FUTURE_EVENT_KIND_XYZ", None),
    ],
)
def test_an_unknown_type_is_named_and_the_close_match_suggested(
    value: str, suggestion: str | None
) -> None:
    """The error carries the offending value and, when one is plausible, the known type."""
    with pytest.raises(UnknownEventTypeError) as info:
        parse_event({"type": value, "threadId": "t", "runId": "r"})

    assert value == info.value.value
    assert suggestion == info.value.suggestion
    assert repr(value) in str(info.value)
    if suggestion is not None:
        assert repr(suggestion) in str(info.value)
    assert "/type" == info.value.issues[0].pointer


def test_a_missing_type_is_an_unknown_event_type_error_with_no_value() -> None:
    """A document without ``type`` cannot be dispatched; the error says ``type`` is missing."""
    with pytest.raises(UnknownEventTypeError) as info:
        parse_event({"messageId": "m1", "delta": "x"})

    assert info.value.value is None
    assert "type" in str(info.value)
    assert "required" == info.value.issues[0].keyword


def test_unknown_event_type_error_is_a_schema_validation_error() -> None:
    """Callers that catch ``SchemaValidationError`` also catch the unknown-type case."""
    with pytest.raises(SchemaValidationError):
        parse_event({"type": "NOPE"})


@pytest.mark.parametrize("data", [None, [], "RUN_STARTED", 5])
def test_a_document_that_is_not_an_object_is_a_schema_validation_error(data: Any) -> None:
    """Non-objects fail with aguikit's error, never ``AttributeError`` or ``TypeError``."""
    with pytest.raises(SchemaValidationError) as info:
        parse_event(data)

    assert "" == info.value.issues[0].pointer


# --------------------------------------------------------------------------- bad fields


@pytest.mark.parametrize(
    ("doc", "definition", "pointer", "keyword"),
    [
        (
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"},
            "TextMessageContentEvent",
            "",
            "required",
        ),
        (
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": 5, "delta": "x"},
            "TextMessageContentEvent",
            "/messageId",
            "type",
        ),
        (
            {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": None},
            "ToolCallStartEvent",
            "/toolCallName",
            "type",
        ),
        ({"type": "STATE_DELTA", "delta": {}}, "StateDeltaEvent", "/delta", "type"),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "no-slash", "value": 1}]},
            "StateDeltaEvent",
            "/delta/0/path",
            "pattern",
        ),
        (
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 2**60},
            "RunStartedEvent",
            "/timestamp",
            "maximum",
        ),
        (
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "tool"},
            "TextMessageStartEvent",
            "/role",
            "enum",
        ),
        (
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "rawEvent": None},
            "RunStartedEvent",
            "/rawEvent",
            "not",
        ),
        (
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "x"}},
            "RunFinishedEvent",
            "/outcome/type",
            "enum",
        ),
        (
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r",
                "outcome": {"type": "interrupt", "interrupts": []},
            },
            "RunFinishedEvent",
            "/outcome/interrupts",
            "minItems",
        ),
        (
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [{"id": "a", "role": "assistant", "toolCalls": [{"id": "c"}]}],
            },
            "MessagesSnapshotEvent",
            "/messages/0/toolCalls/0",
            "required",
        ),
        (
            {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "a", "role": "robot"}]},
            "MessagesSnapshotEvent",
            "/messages/0/role",
            "enum",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_wrong_or_missing_field_names_the_class_and_the_field(
    doc: dict[str, Any], definition: str, pointer: str, keyword: str
) -> None:
    """The error's ``definition`` is the event class and its first issue points at the field."""
    with pytest.raises(SchemaValidationError) as info:
        parse_event(doc)

    first = info.value.issues[0]
    assert (definition, pointer, keyword) == (info.value.definition, first.pointer, first.keyword)


def test_a_missing_field_is_named_in_the_issue_message() -> None:
    """For ``required`` the pointer is the object; the message names the missing member."""
    with pytest.raises(SchemaValidationError) as info:
        parse_event({"type": "TOOL_CALL_ARGS", "toolCallId": "c"})

    assert "'delta' is a required property" == info.value.issues[0].message


def test_a_wrong_value_is_never_coerced() -> None:
    """``messageId: 5`` is rejected, not turned into ``"5"`` as a bare cattrs would."""
    with pytest.raises(SchemaValidationError):
        parse_event({"type": "TEXT_MESSAGE_END", "messageId": 5})


def test_a_bad_part_inside_a_user_message_in_a_snapshot_is_pointed_at() -> None:
    """The issue names the broken source inside the second part, not the whole content."""
    doc = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {
                "id": "u",
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "image", "source": {}}],
            }
        ],
    }

    with pytest.raises(SchemaValidationError) as info:
        parse_event(doc)

    assert "/messages/0/content/1/source" == info.value.issues[0].pointer


# --------------------------------------------------------------------------- extras


def test_unknown_members_are_kept_in_extra_members_and_written_back() -> None:
    """A newer producer's member survives a parse and a ``to_wire`` untouched."""
    doc = {"type": "TEXT_MESSAGE_END", "messageId": "m", "futureField": {"a": [1]}, "x": None}

    event = parse_event(doc)

    assert {"futureField": {"a": [1]}, "x": None} == event.extra_members
    assert doc == to_wire(event)


def test_nested_unknown_members_are_kept_where_they_were() -> None:
    """Extras on a message, a tool call and a function call each stay on their own object."""
    doc = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {
                "id": "a",
                "role": "assistant",
                "x": 1,
                "toolCalls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "n", "arguments": "{}", "y": 2},
                        "z": 3,
                    }
                ],
            }
        ],
        "w": 4,
    }

    event = parse_event(doc)

    assert isinstance(event, models.MessagesSnapshotEvent)
    message = event.messages[0]
    assert isinstance(message, models.AssistantMessage)
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert ({"w": 4}, {"x": 1}, {"z": 3}, {"y": 2}) == (
        event.extra_members,
        message.extra_members,
        call.extra_members,
        call.function.extra_members,
    )
    assert doc == to_wire(event)


def test_a_known_member_in_extra_members_does_not_override_the_field() -> None:
    """``to_wire`` writes declared fields first; an extra cannot shadow one."""
    event = models.TextMessageEndEvent(message_id="m", extra_members={"messageId": "evil"})

    assert "m" == to_wire(event)["messageId"]


def test_a_document_without_extras_parses_with_extra_members_none() -> None:
    """No extras means ``None``, not an empty dict, so equality with constructed events holds."""
    assert parse_event({"type": "TEXT_MESSAGE_END", "messageId": "m"}).extra_members is None


# --------------------------------------------------------------------------- to_wire output


def _minimal(cls: type) -> Any:
    """An instance of ``cls`` with only its required fields set."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if field.default is not attrs.NOTHING:
            continue
        annotation = hints[field.name]
        if annotation is str or str in typing.get_args(annotation):
            kwargs[field.name] = "x"
        elif isinstance(annotation, type) and issubclass(annotation, str):
            kwargs[field.name] = next(iter(annotation))  # type: ignore[call-overload]
        elif typing.get_origin(annotation) is list:
            kwargs[field.name] = []
        elif typing.get_origin(annotation) is dict:
            kwargs[field.name] = {}
        elif annotation is models.FunctionCall:
            kwargs[field.name] = models.FunctionCall(name="f", arguments="")
        elif attrs.has(annotation) or strategies._is_union(annotation):
            kwargs[field.name] = models.DataSource(value="", mime_type="a/b")
        else:
            kwargs[field.name] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cls(**kwargs)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_to_wire_never_writes_null_for_an_unset_optional_and_keeps_discriminators(
    cls: type,
) -> None:
    """A minimal instance writes its required members and discriminators, and no ``null``."""
    hints = typing.get_type_hints(cls)
    discriminators = {
        strategies.wire_name(f)
        for f in strategies.model_fields(cls)
        if strategies._single_literal(hints[f.name])
    }
    required = {
        strategies.wire_name(f) for f in strategies.model_fields(cls) if f.default is attrs.NOTHING
    }

    wire = to_wire(_minimal(cls))

    assert required | discriminators == set(wire)
    assert None not in wire.values()


def test_a_state_snapshot_of_null_keeps_its_null() -> None:
    """``snapshot`` is required and may be null: a null there is data, not an unset field."""
    doc = {"type": "STATE_SNAPSHOT", "snapshot": None}

    assert doc == to_wire(parse_event(doc))
    assert doc == to_wire(models.StateSnapshotEvent(snapshot=None))


def test_null_values_inside_open_maps_and_json_values_are_kept() -> None:
    """Only unset *fields* are omitted; nulls inside metadata or a value are the producer's."""
    event = models.CustomEvent(name="n", value={"a": None}, metadata={"k": None})

    assert {"type": "CUSTOM", "name": "n", "value": {"a": None}, "metadata": {"k": None}} == (
        to_wire(event)
    )


def test_falsy_optional_values_are_written() -> None:
    """``False``, ``0``, ``""`` and ``[]`` are values, not "unset"."""
    event = models.ActivitySnapshotEvent(
        message_id="", activity_type="", content={}, replace=False, timestamp=0, metadata={}
    )

    assert {
        "type": "ACTIVITY_SNAPSHOT",
        "messageId": "",
        "activityType": "",
        "content": {},
        "replace": False,
        "timestamp": 0,
        "metadata": {},
    } == to_wire(event)


@pytest.mark.parametrize("value", [{"a": 1}, [1], "x", 1, {"type": "RUN_STARTED"}])
def test_to_wire_of_something_that_is_not_a_model_is_a_wire_format_error(value: Any) -> None:
    """Only generated models have a wire form; anything else is refused with a typed error."""
    with pytest.raises(WireFormatError):
        to_wire(value)


# --------------------------------------------------------------------------- wire names


def test_a_wire_name_that_is_not_the_camel_case_of_its_attribute_survives() -> None:
    """``from`` is a keyword, so the attribute is ``from_``; the wire name is ``from``."""
    doc = {"op": "move", "from": "/a", "path": "/b"}

    op = parse_as(models.MoveOperation, doc)

    assert "/a" == op.from_
    assert doc == to_wire(op)
    assert "from" == attrs.fields(models.MoveOperation).from_.metadata["wire"]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_wire_name_is_a_property_name_of_its_schema_definition(cls: type) -> None:
    """The recorded wire names are exactly the definition's properties, read from schema.json."""
    expected = set(strategies.flat_properties(cls.__name__))

    assert expected == {strategies.wire_name(f) for f in strategies.model_fields(cls)}


# --------------------------------------------------------------------------- deprecation


@pytest.mark.parametrize("event_type", sorted(DEPRECATED_EVENT_TYPES))
def test_constructing_a_deprecated_event_warns(event_type: str) -> None:
    """User code writing a retired ``THINKING_*`` event is told so."""
    cls: Any = EVENT_CLASSES[event_type]
    kwargs = {"delta": "x"} if "delta" in attrs.fields_dict(cls) else {}

    with pytest.warns(DeprecationWarning, match=cls.__name__):
        cls(**kwargs)


@pytest.mark.parametrize("event_type", sorted(DEPRECATED_EVENT_TYPES))
def test_parsing_a_deprecated_event_is_silent(event_type: str) -> None:
    """Receiving an old producer's event is not the receiver's fault: no warning."""
    doc = next(d for d in FAMILIES["deprecated thinking"] if d["type"] == event_type)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        event = parse_event(doc)
        loads_event(json.dumps(doc))

    assert doc == to_wire(event)


def test_parsing_a_deprecated_event_does_not_silence_later_user_constructions() -> None:
    """The wire's silence is scoped to its own construction."""
    parse_event({"type": "THINKING_END"})

    with pytest.warns(DeprecationWarning):
        models.ThinkingEndEvent()


def test_no_current_event_warns_when_constructed() -> None:
    """Only the deprecated events warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        models.ReasoningStartEvent(message_id="m")


# --------------------------------------------------------------------------- JSON text


def test_dumps_event_is_compact_and_keeps_non_ascii() -> None:
    """No spaces after separators, no ``\\u`` escapes for text that is not ASCII."""
    event = models.TextMessageContentEvent(message_id="m", delta="héllo ✓ 👋")

    assert '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"héllo ✓ 👋"}' == (
        dumps_event(event)
    )


def test_dumps_event_refuses_nan() -> None:
    """A value JSON cannot carry is a wire error, not invalid JSON on the wire."""
    with pytest.raises(WireFormatError):
        dumps_event(models.CustomEvent(name="n", value=float("nan")))


def test_loads_event_accepts_bytes_and_text() -> None:
    """Both forms decode to the same event."""
    text = '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"é"}'

    assert loads_event(text) == loads_event(text.encode("utf-8"))


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "RUN_STARTED",',
        "",
        "not json",
        b"\xff\xfe{}",
        b'{"type":"RAW","event":"\xc3"}',
        '{"type":"RAW","event":NaN}',
        '{"type":"RAW","event":Infinity}',
        '{"type":"RAW","event":-Infinity}',
    ],
)
def test_loads_event_on_bad_input_raises_decode_error(text: str | bytes) -> None:
    """Bad JSON, bad UTF-8 and non-standard constants are all ``DecodeError``."""
    with pytest.raises(DecodeError):
        loads_event(text)


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_loads_event_on_too_deep_nesting_raises_limit_exceeded(opener: str) -> None:
    """A document nested far deeper than any event is refused before anything recurses."""
    closer = "]" if opener == "[" else "}"
    text = '{"type":"RAW","event":' + opener * 100_000 + "1" + closer * 100_000 + "}"

    with pytest.raises(LimitExceededError):
        loads_event(text)


def test_loads_event_accepts_brackets_inside_strings() -> None:
    """A delta full of brackets is text, not nesting."""
    doc = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "[[[{" * 50}

    assert doc == to_wire(loads_event(json.dumps(doc)))


# --------------------------------------------------------------------------- other entry points


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=lambda m: m["role"])
def test_parse_message_dispatches_on_role_and_round_trips(message: dict[str, Any]) -> None:
    """Every role parses to its class and writes back exactly."""
    parsed = parse_message(message)

    assert MESSAGE_CLASSES[message["role"]] is type(parsed)
    assert message == to_wire(parsed)


@pytest.mark.parametrize(
    ("message", "pointer"),
    [
        ({"id": "x", "role": "robot", "content": "hi"}, "/role"),
        ({"id": "x", "content": "hi"}, ""),
        ({"id": "x", "role": "user", "content": 5}, "/content"),
        ({"id": "x", "role": "tool", "content": "hi"}, ""),
    ],
)
def test_parse_message_rejects_a_bad_message_with_a_pointer(
    message: dict[str, Any], pointer: str
) -> None:
    """An unknown or missing role, or a malformed field, is a ``SchemaValidationError``."""
    with pytest.raises(SchemaValidationError) as info:
        parse_message(message)

    assert pointer == info.value.issues[0].pointer


def test_parse_run_agent_input_round_trips_a_full_request() -> None:
    """Every optional member of the request survives, typed."""
    parsed = parse_run_agent_input(FULL_RUN_INPUT)

    assert isinstance(parsed.messages[0], models.UserMessage)
    assert parsed.resume is not None
    assert "resolved" == parsed.resume[0].status
    assert FULL_RUN_INPUT == to_wire(parsed)


def test_parse_run_agent_input_rejects_a_request_without_messages() -> None:
    """``messages`` is required; the error names ``RunAgentInput``."""
    with pytest.raises(SchemaValidationError) as info:
        parse_run_agent_input({"threadId": "t", "runId": "r"})

    assert "RunAgentInput" == info.value.definition


@pytest.mark.parametrize(
    ("cls", "doc"),
    [
        (
            models.ToolCall,
            {"id": "c", "type": "function", "function": {"name": "n", "arguments": ""}},
        ),
        (models.Interrupt, {"id": "i", "reason": "r", "expiresAt": "2030-01-01T00:00:00Z"}),
        (models.TokenUsage, {"inputTokens": 1, "cachedInputTokens": 0}),
        (models.AgentCapabilities, {"tools": {"supported": True, "items": []}, "custom": {}}),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_parse_as_builds_any_generated_class(cls: type, doc: dict[str, Any]) -> None:
    """``parse_as`` validates against the class's own definition and round-trips."""
    assert doc == to_wire(parse_as(cls, doc))


def test_parse_as_rejects_a_bad_document_against_that_class() -> None:
    """The definition in the error is the class asked for."""
    with pytest.raises(SchemaValidationError) as info:
        parse_as(models.ToolCall, {"id": "c", "type": "function", "function": {"name": "n"}})

    assert ("ToolCall", "/function") == (info.value.definition, info.value.issues[0].pointer)


def test_parse_as_refuses_a_class_that_is_not_generated() -> None:
    """Asking for a foreign class is a programming error, reported as such."""
    with pytest.raises(TypeError):
        parse_as(dict, {})


def test_parse_event_without_check_trusts_a_valid_document() -> None:
    """``check=False`` gives the same event for a document that is valid."""
    doc = FAMILIES["messages snapshot"][0]

    assert parse_event(doc) == parse_event(doc, check=False)


# --------------------------------------------------------------------------- corpus


@pytest.mark.parametrize(
    "doc", corpus.event_params(lambda event: isinstance(event, dict) and is_valid(event))
)
def test_every_schema_valid_corpus_event_round_trips(doc: dict[str, Any]) -> None:
    """``to_wire(parse_event(d)) == d`` on the official conformance streams."""
    assert doc == to_wire(parse_event(doc))
