"""
AG-UI 1.1: the member it adds, and talking to peers that speak 1.0.

What 1.1 is, and the evidence for each delta, is written down in ``docs/protocol-1.1.md``;
these tests pin the deltas (the official 1.1 fixture, the applier keeping the new member)
and the negotiation in both directions (a 1.0 producer is consumed quietly; a client
pinned to a 1.0 peer declares 1.0 and sends nothing 1.0 lacks).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests import corpus

from aguikit._generated.registry import MESSAGE_CLASSES, PROTOCOL_VERSION, SINCE
from aguikit.client import prepare_input
from aguikit.receiver import omit_newer_members
from aguikit.session import Session
from aguikit.validate import load_schema, validate_event
from aguikit.wire import parse_event, to_wire

WITH_TYPE = (
    corpus.UPSTREAM_SPEC
    / "draft"
    / "fixtures"
    / "ReasoningEncryptedValueEvent/valid/with-type.json"
)
RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def _encrypted(subtype: str, entity: str, value: str, kind: str | None) -> dict[str, Any]:
    event = {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": subtype,
        "entityId": entity,
        "encryptedValue": value,
    }
    return event if kind is None else {**event, "encryptedValueType": kind}


def test_the_official_1_1_fixture_with_an_encryption_type_validates_and_round_trips() -> None:
    """``ReasoningEncryptedValueEvent/valid/with-type.json`` (the 1.1 MANIFEST lists it)."""
    if not WITH_TYPE.is_file():
        pytest.skip(f"official fixture not found at {WITH_TYPE}")
    doc = json.loads(WITH_TYPE.read_text(encoding="utf-8"))

    validate_event(doc)
    event = parse_event(doc)

    assert "anthropic.redacted_thinking" == event.encrypted_value_type
    assert doc == to_wire(event)


def test_aguikit_speaks_1_1() -> None:
    """The version is the ``$id``'s segment, and the schema's identity says 1.1."""
    assert "1.1" == PROTOCOL_VERSION
    assert "/schema/1.1/" in load_schema()["$id"]


def test_every_message_kind_that_carries_an_encrypted_value_carries_its_type() -> None:
    """The decision in docs/protocol-1.1.md: the type goes wherever ``encryptedValue`` is."""
    holders = {
        cls.__name__
        for cls in MESSAGE_CLASSES.values()
        if "encryptedValue" in load_schema()["$defs"].get(cls.__name__, {}).get("properties", {})
        or cls.__name__ in SINCE
    }
    for name in holders:
        assert {"encryptedValueType": "1.1"} == SINCE[name], name
    assert "ActivityMessage" not in SINCE
    assert {"encryptedValueType": "1.1"} == SINCE["ToolCall"]
    assert {"encryptedValueType": "1.1"} == SINCE["ReasoningEncryptedValueEvent"]


def test_the_applier_keeps_the_encryption_type_with_the_value() -> None:
    """On a message and on a tool call; a later value without a type clears the old type."""
    session = Session()
    session.feed_all(
        [
            RUN,
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c",
                "toolCallName": "f",
                "parentMessageId": "m",
            },
            {"type": "TOOL_CALL_END", "toolCallId": "c"},
            _encrypted("message", "m", "v1", "anthropic.redacted_thinking"),
            _encrypted("tool-call", "c", "v2", "openai.encrypted_content"),
        ]
    )
    (message,) = session.messages

    assert ("v1", "anthropic.redacted_thinking") == (
        message.encrypted_value,
        message.encrypted_value_type,
    )
    assert "openai.encrypted_content" == message.tool_calls[0].encrypted_value_type

    session.feed(_encrypted("message", "m", "v3", None))

    assert ("v3", None) == (
        session.messages[0].encrypted_value,
        session.messages[0].encrypted_value_type,
    )
    assert [] == session.warnings


# --------------------------------------------------------------------------- consuming


@pytest.mark.parametrize("declared", ["1.0", "1.1", "0.9"])
def test_a_producer_declaring_this_or_an_older_version_is_consumed_quietly(declared: str) -> None:
    """Older is the ordinary downgrade signal: a 1.0 producer's stream draws no warning."""
    session = Session()
    session.feed_all([{**RUN, "protocolVersion": declared}, FINISHED])
    session.finish()

    assert [] == session.warnings


def test_a_producer_declaring_a_newer_version_still_warns() -> None:
    """The other side of the comparison is unchanged: 1.2 is newer than what aguikit speaks."""
    session = Session()
    session.feed_all([{**RUN, "protocolVersion": "1.2"}, FINISHED])

    assert ["protocol-version-newer"] == [w.code for w in session.warnings]


# --------------------------------------------------------------------------- sending

REQUEST = {
    "threadId": "t",
    "runId": "r",
    "messages": [
        {
            "id": "a",
            "role": "assistant",
            "encryptedValue": "e",
            "encryptedValueType": "anthropic.redacted_thinking",
            "toolCalls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                    "encryptedValue": "e2",
                    "encryptedValueType": "openai.encrypted_content",
                }
            ],
        },
        {"id": "r1", "role": "reasoning", "content": "", "encryptedValueType": "x"},
    ],
}


def test_the_client_declares_1_1_and_sends_1_1_members_to_a_current_peer() -> None:
    """Unpinned, the request is written in 1.1, ``encryptedValueType`` included."""
    body = prepare_input(REQUEST)

    assert "1.1" == body["protocolVersion"]
    assert REQUEST["messages"] == body["messages"]


def test_a_client_pinned_to_a_1_0_peer_declares_1_0_and_omits_1_1_members() -> None:
    """``max_protocol_version="1.0"``: every 1.1-only member goes, nothing else does."""
    body = prepare_input(REQUEST, max_protocol_version="1.0")

    assert "1.0" == body["protocolVersion"]
    assert "encryptedValueType" not in json.dumps(body)
    assert "e" == body["messages"][0]["encryptedValue"]
    assert "e2" == body["messages"][0]["toolCalls"][0]["encryptedValue"]


def test_a_client_pinned_to_a_pre_1_0_peer_omits_1_1_members_too() -> None:
    """Pre-1.0 peers are named by package version (``0.0.57``); they predate 1.1 as well."""
    body = prepare_input(REQUEST, max_protocol_version="0.0.57")

    assert "protocolVersion" not in body
    assert "encryptedValueType" not in json.dumps(body)


@pytest.mark.parametrize("pin", ["1.\u00b2", "\u0661.\u0661", "1." + "9" * 5000, "1.1\n"])
def test_a_pin_that_is_no_version_is_refused_naming_the_parameter(pin: str) -> None:
    """Digits of other scripts, superscripts and parts too long to convert order nothing:
    the pin is refused saying what it must be (it raised ``int``'s own ``ValueError``, or
    was read as a version)."""
    with pytest.raises(ValueError, match="max_protocol_version must be a dotted version"):
        prepare_input(REQUEST, max_protocol_version=pin)


def test_omit_newer_members_names_what_it_omitted_in_events() -> None:
    """The server-side use: an event for a peer that declared 1.0 loses its 1.1 members."""
    event = _encrypted("message", "m", "v", "anthropic.redacted_thinking")
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": REQUEST["messages"]}

    assert (
        {k: v for k, v in event.items() if k != "encryptedValueType"},
        ["/encryptedValueType"],
    ) == omit_newer_members(event, "1.0")
    assert [
        "/messages/0/encryptedValueType",
        "/messages/0/toolCalls/0/encryptedValueType",
        "/messages/1/encryptedValueType",
    ] == omit_newer_members(snapshot, "1.0")[1]
    assert (event, []) == omit_newer_members(event, "1.1")
    assert (event, []) == omit_newer_members(event, "draft")  # cannot compare: send as is
    assert "encryptedValueType" in event  # the input is not modified


def _served(declared: str | None) -> list[dict[str, Any]]:
    """The events a RunWriter sends a client whose request declared ``declared``."""
    import asyncio

    from aguikit.server import RunWriter

    request: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": []}
    if declared is not None:
        request["protocolVersion"] = declared

    async def main() -> list[dict[str, Any]]:
        run = RunWriter(request)
        async with run:
            await run.say("thinking done", message_id="m0")
            await run.emit(
                {
                    "type": "REASONING_ENCRYPTED_VALUE",
                    "subtype": "message",
                    "entityId": "m0",
                    "encryptedValue": "opaque",
                    "encryptedValueType": "anthropic.redacted_thinking",
                }
            )
        return [dict(event) for event in run.events]

    return asyncio.run(main())


def test_the_server_sends_1_1_members_to_a_client_declaring_1_1() -> None:
    """A current peer gets everything the event carries."""
    (value,) = [e for e in _served("1.1") if e["type"] == "REASONING_ENCRYPTED_VALUE"]

    assert "anthropic.redacted_thinking" == value["encryptedValueType"]


@pytest.mark.parametrize("declared", ["1.9", "2.0", "draft", "1.\u00b2", "1." + "9" * 5000])
def test_the_server_serves_a_client_declaring_a_newer_or_unreadable_version(
    declared: str,
) -> None:
    """A newer minor of the line is served by construction (the versioning page: it "MUST
    NOT be rejected for its version"), and aguikit's endpoint refuses no declaration at all:
    the run is served whole, nothing downgraded."""
    events = _served(declared)

    assert ["RUN_STARTED", "RUN_FINISHED"] == [events[0]["type"], events[-1]["type"]]
    (value,) = [e for e in events if e["type"] == "REASONING_ENCRYPTED_VALUE"]
    assert "anthropic.redacted_thinking" == value["encryptedValueType"]


@pytest.mark.parametrize("declared", ["1.0", "0.0.57", None])
def test_the_server_omits_1_1_members_for_a_client_declaring_an_older_version(
    declared: str | None,
) -> None:
    """Downgrade for the older peer: the member it cannot know is not sent, the rest is."""
    events = _served(declared)
    (value,) = [e for e in events if e["type"] == "REASONING_ENCRYPTED_VALUE"]

    assert "encryptedValueType" not in value
    assert "opaque" == value["encryptedValue"]
    session = Session(protocol_version="1.0")
    session.feed_all(events)
    session.finish()
    assert [] == session.warnings  # a 1.0 receiver has nothing to strip
