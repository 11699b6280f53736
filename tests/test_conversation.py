"""
Conversations: HAR files and aguikit recordings read into exchanges, and the thread rules
(``AGUI-R…``) judged across them.

Each thread rule gets a conversation built from its specification sentence, on which it
must fire, and the conforming conversation beside it, on which nothing at all may be
reported.  The readers get a browser's HAR export (``tests/conversations/browser.har``,
written by hand in the shape Chromium's devtools save), a recording written here by hand
to the recording contract (``docs/conversations.md``: per-event timing, a protobuf body in
base64, a response still streaming), a recording cut by a crash, and bad input of every
kind the issue names: a file that is not HAR, a request that is not JSON, a response cut
mid-frame.  ``aguikit check`` is run on a conversation in its four report formats.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tests.support import jsonl_bytes, sse_bytes

from aguikit.catalogue import RULES_BY_ID, Severity
from aguikit.checker import CheckConfig, Finding, StreamCheck, open_events
from aguikit.cli import main
from aguikit.conversation import (
    Exchange,
    Judged,
    check_exchanges,
    check_recording,
    exchanges_of_example,
    is_recording,
    judge_ended,
    live_session,
    read_har,
)
from aguikit.errors import DecodeError
from aguikit.proto import encode_message
from aguikit.testing import AgentTestClient, ScriptedAgent
from aguikit.transport.proto import encode_frame

pytest_plugins = ("pytester",)

HERE = Path(__file__).resolve().parent
BROWSER_HAR = HERE / "conversations" / "browser.har"
REPORT_SCHEMA = json.loads((HERE.parent / "docs" / "check-report.schema.json").read_text())

Wire = dict[str, Any]
USER: Wire = {"id": "u1", "role": "user", "content": "hi"}
ANSWER: Wire = {"id": "m1", "role": "assistant", "content": "ok"}
NEXT: Wire = {"id": "u2", "role": "user", "content": "and then?"}


def _request(run: str, *messages: Wire, **extra: Any) -> Wire:
    return {
        "threadId": "t1",
        "runId": run,
        "messages": list(messages),
        "state": {},
        "protocolVersion": "1.1",
        **extra,
    }


def _started(run: str) -> Wire:
    return {"type": "RUN_STARTED", "threadId": "t1", "runId": run, "protocolVersion": "1.1"}


def _finished(run: str, **extra: Any) -> Wire:
    return {"type": "RUN_FINISHED", "threadId": "t1", "runId": run, **extra}


def _said(message_id: str = "m1", text: str = "ok") -> list[Wire]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def _ex(request: Any, *events: Wire, **extra: Any) -> Wire:
    return {"request": request, "response": list(events), **extra}


def _findings(conversation: Sequence[Mapping[str, Any]]) -> list[Finding]:
    return check_exchanges(exchanges_of_example(conversation), "conversation.har").findings


ASKED = {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]}
EXPIRING = {
    "type": "interrupt",
    "interrupts": [{"id": "i1", "reason": "approval", "expiresAt": "2001-01-01T00:00:00Z"}],
}
CALL: Wire = {
    **ANSWER,
    "toolCalls": [
        {"id": "c1", "type": "function", "function": {"name": "confirm", "arguments": "{}"}}
    ],
}
CALLED = [
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "confirm",
        "parentMessageId": "m1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
]
SEALED = {
    "type": "REASONING_ENCRYPTED_VALUE",
    "subtype": "message",
    "entityId": "m1",
    "encryptedValue": "c2ln",
    "encryptedValueType": "acme.sig",
}
SEALED_ANSWER = {**ANSWER, "encryptedValue": "c2ln", "encryptedValueType": "acme.sig"}

FIRST = _ex(_request("r1", USER), _started("r1"), *_said(), _finished("r1"))
"""A first turn every case below can build on: the user asks, the agent answers m1."""
INTERRUPTED = _ex(_request("r1", USER), _started("r1"), _finished("r1", outcome=ASKED))
"""A first turn that ends waiting on interrupt i1."""
SHOPPED = _ex(
    _request("r1", USER),
    _started("r1"),
    {"type": "STATE_SNAPSHOT", "snapshot": {"cart": ["tea"]}},
    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/cart/-", "value": "jam"}]},
    _finished("r1"),
)
"""A first turn that leaves the state ``{"cart": ["tea", "jam"]}``."""

CASES: dict[str, tuple[list[Wire], list[Wire]]] = {
    # basic/run-input: threadId, runId, messages are REQUIRED
    "AGUI-R002": (
        [
            _ex(
                {"threadId": "t1", "runId": "r1", "protocolVersion": "1.1"},
                _started("r1"),
                _finished("r1"),
            )
        ],
        [FIRST],
    ),
    # interrupt-resume: "The resume list MUST cover every interrupt of the run being continued"
    "AGUI-R003": (
        [
            INTERRUPTED,
            _ex(_request("r2", USER, NEXT), _started("r2"), _finished("r2")),
        ],
        [
            INTERRUPTED,
            _ex(
                _request(
                    "r2", USER, resume=[{"interruptId": "i1", "status": "resolved", "payload": 1}]
                ),
                _started("r2"),
                _finished("r2"),
            ),
        ],
    ),
    # "Each entry's interruptId MUST name an interrupt from the run being continued"
    "AGUI-R004": (
        [
            INTERRUPTED,
            _ex(
                _request(
                    "r2",
                    USER,
                    resume=[
                        {"interruptId": "i1", "status": "cancelled"},
                        {"interruptId": "i2", "status": "cancelled"},
                    ],
                ),
                _started("r2"),
                _finished("r2"),
            ),
        ],
        [
            INTERRUPTED,
            _ex(
                _request("r2", USER, resume=[{"interruptId": "i1", "status": "cancelled"}]),
                _started("r2"),
                _finished("r2"),
            ),
        ],
    ),
    # "an interrupt the consumer judges expired can no longer be answered"; it can be abandoned
    "AGUI-R005": (
        [
            _ex(_request("r1", USER), _started("r1"), _finished("r1", outcome=EXPIRING)),
            _ex(
                _request(
                    "r2", USER, resume=[{"interruptId": "i1", "status": "resolved", "payload": 1}]
                ),
                _started("r2"),
                _finished("r2"),
            ),
        ],
        [
            _ex(_request("r1", USER), _started("r1"), _finished("r1", outcome=EXPIRING)),
            _ex(
                _request("r2", USER, resume=[{"interruptId": "i1", "status": "cancelled"}]),
                _started("r2"),
                _finished("r2"),
            ),
        ],
    ),
    # reasoning: "return it unmodified in later run input"; the type "returned unmodified"
    "AGUI-R006": (
        [
            _ex(_request("r1", USER), _started("r1"), *_said(), SEALED, _finished("r1")),
            _ex(
                _request("r2", USER, {**SEALED_ANSWER, "encryptedValueType": "acme.other"}, NEXT),
                _started("r2"),
                _finished("r2"),
            ),
        ],
        [
            _ex(_request("r1", USER), _started("r1"), *_said(), SEALED, _finished("r1")),
            _ex(_request("r2", USER, SEALED_ANSWER, NEXT), _started("r2"), _finished("r2")),
        ],
    ),
    # tool calls: "A thread that continues MUST answer every one of them first"
    "AGUI-R007": (
        [
            _ex(
                _request("r1", USER),
                _started("r1"),
                *_said(),
                *CALLED,
                _finished("r1", outcome={"type": "success", "pendingToolCallIds": ["c1"]}),
            ),
            _ex(_request("r2", USER, CALL, NEXT), _started("r2"), _finished("r2")),
        ],
        [
            _ex(
                _request("r1", USER),
                _started("r1"),
                *_said(),
                *CALLED,
                _finished("r1", outcome={"type": "success", "pendingToolCallIds": ["c1"]}),
            ),
            _ex(
                _request(
                    "r2",
                    USER,
                    CALL,
                    {"id": "t9", "role": "tool", "toolCallId": "c1", "content": "yes"},
                ),
                _started("r2"),
                _finished("r2"),
            ),
        ],
    ),
    # snapshots: the snapshot restates what was streamed; a re-minted id is another message
    "AGUI-R008": (
        [
            _ex(
                _request("r1", USER),
                _started("r1"),
                *_said(),
                {"type": "MESSAGES_SNAPSHOT", "messages": [USER, {**ANSWER, "role": "user"}]},
                _finished("r1"),
            ),
        ],
        [
            _ex(
                _request("r1", USER),
                _started("r1"),
                *_said(),
                {"type": "MESSAGES_SNAPSHOT", "messages": [USER, ANSWER]},
                _finished("r1"),
            ),
        ],
    ),
    # run-input: "The conversation so far, in order"
    "AGUI-R009": (
        [FIRST, _ex(_request("r2", ANSWER, USER, ANSWER, NEXT), _started("r2"), _finished("r2"))],
        [FIRST, _ex(_request("r2", USER, ANSWER, NEXT), _started("r2"), _finished("r2"))],
    ),
    # run-input protocolVersion: "a consumer implementing this version MUST declare"
    "AGUI-R010": (
        [
            _ex(
                {k: v for k, v in _request("r1", USER).items() if k != "protocolVersion"},
                {k: v for k, v in _started("r1").items() if k != "protocolVersion"},
                _finished("r1"),
            )
        ],
        [FIRST],
    ),
    # versioning: "a newer minor of its own line ... MUST NOT be rejected for its version"
    "AGUI-R011": (
        [FIRST, _ex(_request("r2", USER, ANSWER, NEXT, protocolVersion="1.4"), status=400)],
        [
            FIRST,
            _ex(
                _request("r2", USER, ANSWER, NEXT, protocolVersion="1.4"),
                _started("r2"),
                _finished("r2"),
            ),
        ],
    ),
    # versioning: "A consumer meeting a newer producer declaration ... SHOULD warn"
    "AGUI-R012": (
        [_ex(_request("r1", USER, protocolVersion="1.0"), _started("r1"), _finished("r1"))],
        [
            _ex(
                _request("r1", USER, protocolVersion="1.0"),
                {**_started("r1"), "protocolVersion": "1.0"},
                _finished("r1"),
            )
        ],
    ),
    # run-input state: "the consumer's last agreed value, typically what the previous run's
    # state events left behind"
    "AGUI-R013": (
        [
            SHOPPED,
            _ex(_request("r2", USER, state={"cart": ["tea"]}), _started("r2"), _finished("r2")),
        ],
        [
            SHOPPED,
            _ex(
                _request("r2", USER, state={"cart": ["tea", "jam"]}),
                _started("r2"),
                _finished("r2"),
            ),
        ],
    ),
}


@pytest.mark.parametrize("rule", sorted(CASES), ids=sorted(CASES))
def test_a_thread_rule_fires_on_its_sentence_and_nothing_fires_on_the_conforming_thread(
    rule: str,
) -> None:
    """The violating conversation reports the rule; the conforming one reports nothing."""
    violating, conforming = CASES[rule]

    assert rule in {f.rule for f in _findings(violating)}
    assert [] == [(f.rule, f.message) for f in _findings(conforming)]


def test_every_thread_rule_has_a_case() -> None:
    """Each ``R`` row but the reader's own (``R001``, ``R014``: tested below) is exercised
    above."""
    rows = {r for r in RULES_BY_ID if r.startswith("AGUI-R")} - {"AGUI-R001", "AGUI-R014"}

    assert rows == set(CASES)


def test_a_newer_consumers_additions_are_not_invalid_input() -> None:
    """AGUI-R002 judges an undeclared member of a 1.1 request, not of a newer one's."""

    def judged(version: str) -> list[str]:
        request = _request("r1", USER, protocolVersion=version, newThing={"a": 1})
        exchange = _ex(request, _started("r1"), _finished("r1"))
        return [f.rule for f in _findings([exchange])]

    assert ["AGUI-R002"] == judged("1.1")
    assert [] == judged("1.2")


def test_the_findings_locate_the_exchange_the_request_member_and_the_event() -> None:
    """A request's finding points into its body; a response's names its event and frame."""
    violating, _ = CASES["AGUI-R004"]
    (unknown,) = [f for f in _findings(violating) if f.rule == "AGUI-R004"]
    snapshot, _ = CASES["AGUI-R008"]
    (disagreeing,) = [f for f in _findings(snapshot) if f.rule == "AGUI-R008"]

    assert (2, None, "/resume/1/interruptId") == (unknown.exchange, unknown.event, unknown.pointer)
    assert "'i2'" in unknown.message
    assert (1, 5, "MESSAGES_SNAPSHOT", "/messages/1/role") == (
        disagreeing.exchange,
        disagreeing.event,
        disagreeing.event_type,
        disagreeing.pointer,
    )


def test_history_divergence_names_dropped_duplicated_reordered_and_re_minted_messages() -> None:
    """AGUI-R009: each way a request departs from what the client was sent, by name."""
    second = {"id": "m2", "role": "assistant", "content": "more"}
    first = _ex(
        _request("r1", USER), _started("r1"), *_said(), *_said("m2", "more"), _finished("r1")
    )

    def said(*messages: Wire) -> list[str]:
        after = _ex(_request("r2", *messages), _started("r2"), _finished("r2"))
        return [f.message for f in _findings([first, after]) if f.rule == "AGUI-R009"]

    assert ["messages: message 'm1' the client was sent is missing"] == said(USER, second)
    assert ["messages: message 'u1' appears twice"] == said(USER, USER, ANSWER, second)
    assert ["messages: message 'm2' comes back re-minted as 'x2'"] == said(
        USER, ANSWER, {**second, "id": "x2"}
    )
    assert [
        "messages: the messages are reordered: 'm1' comes out of the order it was sent in"
    ] == said(USER, second, ANSWER)


def test_an_encrypted_value_moved_to_another_message_is_not_returned() -> None:
    """AGUI-R006: "on the entity it was attached to": the same value elsewhere is a drop."""
    first = _ex(_request("r1", USER), _started("r1"), *_said(), SEALED, _finished("r1"))
    moved = _ex(
        _request("r2", {**USER, "encryptedValue": "c2ln"}, ANSWER), _started("r2"), _finished("r2")
    )

    assert [
        ("AGUI-R006", "/messages/1/encryptedValue"),
        ("AGUI-R006", "/messages/1/encryptedValueType"),
    ] == [(f.rule, f.pointer) for f in _findings([first, moved]) if f.rule.startswith("AGUI-R")]


def test_a_tool_calls_encrypted_value_comes_back_on_that_tool_call() -> None:
    """AGUI-R006 on a tool call: the pointer names the call inside its message."""
    sealed = {**SEALED, "subtype": "tool-call", "entityId": "c1"}
    first = _ex(_request("r1", USER), _started("r1"), *_said(), *CALLED, sealed, _finished("r1"))
    tool = {"id": "t9", "role": "tool", "toolCallId": "c1", "content": "yes"}
    kept = [{**CALL["toolCalls"][0], "encryptedValue": "c2ln", "encryptedValueType": "acme.sig"}]
    returned = _ex(
        _request("r2", USER, {**CALL, "toolCalls": kept}, tool), _started("r2"), _finished("r2")
    )
    dropped = _ex(_request("r2", USER, CALL, tool), _started("r2"), _finished("r2"))

    assert [] == [f.rule for f in _findings([first, returned])]
    assert [
        "/messages/1/toolCalls/0/encryptedValue",
        "/messages/1/toolCalls/0/encryptedValueType",
    ] == [f.pointer for f in _findings([first, dropped]) if f.rule == "AGUI-R006"]


def test_token_usage_is_judged_per_exchange_by_the_stream_rule() -> None:
    """lifecycle "Token usage": the per-stream AGUI-K009 holds inside a conversation too."""
    usage = [{"inputTokens": 10, "cachedInputTokens": 900, "outputTokens": 5}]
    counted = _ex(_request("r1", USER), _started("r1"), _finished("r1", usage=usage))

    (finding,) = _findings([counted])

    assert ("AGUI-K009", 1, 2, "/usage/0") == (
        finding.rule,
        finding.exchange,
        finding.event,
        finding.pointer,
    )


def test_after_a_failed_run_the_client_may_drop_what_it_streamed() -> None:
    """A run that ended in RUN_ERROR: its partial message left out of the next request and
    its state change undone are the client's decision, not AGUI-R009 or AGUI-R013."""
    failed = _ex(
        _request("r1", USER),
        _started("r1"),
        *_said(),
        {"type": "STATE_SNAPSHOT", "snapshot": {"half": True}},
        {"type": "RUN_ERROR", "message": "model overloaded"},
    )
    retried = _ex(_request("r2", USER), _started("r2"), _finished("r2"))

    assert ["AGUI-K007"] == [f.rule for f in _findings([failed, retried])]


def test_threads_are_judged_apart_when_their_exchanges_interleave() -> None:
    """Two tabs on two threads: each request answers the run before it on its own thread."""
    other = {"threadId": "t2"}
    asked = _ex(
        {**_request("r1", USER), **other},
        {**_started("r1"), **other},
        {**_finished("r1", outcome=ASKED), **other},
    )
    resumed = _ex(
        {**_request("r3", USER, resume=[{"interruptId": "i1", "status": "cancelled"}]), **other},
        {**_started("r3"), **other},
        {**_finished("r3"), **other},
    )
    plain = _ex(_request("r2", USER, ANSWER), _started("r2"), _finished("r2"))

    assert [] == [f.rule for f in _findings([FIRST, asked, plain, resumed])]


# --- reading HAR files -------------------------------------------------------------------------


def test_a_browser_har_export_yields_its_ag_ui_exchanges_by_request_shape() -> None:
    """devtools' export: the script and the telemetry POST are skipped, the runs are read."""
    recording = read_har(BROWSER_HAR)

    assert 2 == len(recording.exchanges)
    assert 2 == recording.skipped
    assert ["run-1", "run-2"] == [e.run_id for e in recording.exchanges]
    assert {"sse"} == {e.framing for e in recording.exchanges}
    assert recording.cut is None
    assert "2026-11-30T10:00:09+00:00" == recording.exchanges[1].started.isoformat()  # type: ignore[union-attr]
    assert recording.exchanges[0].arrival(1) is None  # a browser keeps no per-event time


def test_the_browser_har_shows_the_unanswered_interrupt() -> None:
    """The fixture's second request continues past run-1's interrupt (AGUI-R003)."""
    report = check_recording(str(BROWSER_HAR))

    assert [("AGUI-R003", 2, "/resume")] == [
        (f.rule, f.exchange, f.pointer) for f in report.findings
    ]
    assert 10 == report.events
    assert ["interrupted", "finished"] == [run.status for run in report.runs]


def _recording(entries: list[Wire]) -> Wire:
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "aguikit", "version": "0.1.0"},
            "entries": entries,
        }
    }


def _entry(
    request: Wire,
    body: bytes,
    *,
    media: str = "text/event-stream",
    events: list[Wire] | None = None,
    complete: bool = True,
) -> Wire:
    """One entry as the recording contract writes it (docs/conversations.md)."""
    try:
        content: Wire = {"size": len(body), "mimeType": media, "text": body.decode("utf-8")}
    except UnicodeDecodeError:
        content = {
            "size": len(body),
            "mimeType": media,
            "text": base64.b64encode(body).decode("ascii"),
            "encoding": "base64",
        }
    text = json.dumps(request)
    return {
        "startedDateTime": "2026-12-01T08:00:00.000Z",
        "time": 12.5,
        "request": {
            "method": "POST",
            "url": "http://127.0.0.1:8000/agent",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(text),
            "postData": {"mimeType": "application/json", "text": text},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": media}],
            "cookies": [],
            "content": content,
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(body),
        },
        "cache": {},
        "timings": {"send": 0.1, "wait": 2.0, "receive": 10.4},
        "_aguikit": {
            "version": 1,
            "threadId": request.get("threadId"),
            "runId": request.get("runId"),
            "events": events or [],
            "complete": complete,
        },
    }


def _timed(frames: list[bytes]) -> tuple[bytes, list[Wire]]:
    """The body and the contract's per-event entries: each frame's end, times 5 ms apart."""
    body, events = b"", []
    for index, frame in enumerate(frames, 1):
        body += frame
        events.append(
            {"end": len(body), "upstreamMs": 5.0 * index, "downstreamMs": 5.0 * index + 0.25}
        )
    return body, events


def test_a_response_body_the_browser_did_not_keep_is_noted_not_judged() -> None:
    """AGUI-R014: devtools may leave a streamed body out; that is not an empty stream, and
    the next request answers the run before it."""
    document = json.loads(BROWSER_HAR.read_text())
    del document["log"]["entries"][3]["response"]["content"]["text"]
    recording = read_har("x.har", data=json.dumps(document).encode())

    report = check_exchanges(recording.exchanges, "x.har")

    assert [False] == [e.captured for e in recording.exchanges][1:]
    assert [("AGUI-R014", 2), ("AGUI-R003", 2)] == [(f.rule, f.exchange) for f in report.findings]
    assert Severity.INFO is report.findings[0].severity


def test_an_aguikit_recording_keeps_per_event_timing_and_protobuf_bodies(tmp_path: Path) -> None:
    """The contract's custom fields: event ends and times; a binary body in base64."""
    first_events = [_started("r1"), *_said(), _finished("r1")]
    sse, timing = _timed([sse_bytes([e]) for e in first_events])
    proto_events = [_started("r2"), _finished("r2")]
    proto, proto_timing = _timed([encode_frame(encode_message(e)) for e in proto_events])
    path = tmp_path / "t1.har"
    path.write_text(
        json.dumps(
            _recording(
                [
                    _entry(_request("r1", USER), sse, events=timing),
                    _entry(
                        _request("r2", USER, ANSWER, NEXT),
                        proto,
                        media="application/vnd.ag-ui.event+proto",
                        events=proto_timing,
                    ),
                ]
            )
        )
    )

    recording = read_har(path)
    report = check_recording(str(path))

    assert ["sse", "proto"] == [e.framing for e in recording.exchanges]
    assert proto == recording.exchanges[1].body
    assert 15.0 == recording.exchanges[0].arrival(3)
    assert 5.25 == recording.exchanges[1].times[0].downstream_ms
    assert [] == report.findings
    assert 7 == report.events


def test_a_recording_cut_by_a_crash_keeps_every_complete_exchange(tmp_path: Path) -> None:
    """The writer rewrites the last entry from its start: a crash leaves it half written."""
    whole = json.dumps(
        _recording(
            [
                _entry(
                    _request("r1", USER), sse_bytes([_started("r1"), *_said(), _finished("r1")])
                ),
                _entry(_request("r2", USER, ANSWER), sse_bytes([_started("r2")]), complete=False),
            ]
        ),
        indent=1,
    )
    cut_at = whole.index('"startedDateTime"', whole.index('"startedDateTime"') + 1) + 40
    path = tmp_path / "t1.har"
    path.write_text(whole[:cut_at])

    recording = read_har(path)
    report = check_recording(str(path))

    assert 1 == len(recording.exchanges)
    assert recording.cut is not None and "AGUI-R001" == recording.cut.rule
    assert "ends inside entry 2" in recording.cut.message
    assert [("AGUI-R001", 2)] == [(f.rule, f.exchange) for f in report.findings]
    assert report.findings[0].byte_offset is not None
    assert 0 < report.findings[0].byte_offset <= cut_at


def test_a_response_recorded_while_still_streaming_is_judged_as_cut(tmp_path: Path) -> None:
    """``complete: false`` and a frame cut in two: the decoder's located AGUI-D004."""
    body = sse_bytes([_started("r1"), *_said()])[:-7]
    path = tmp_path / "t1.har"
    path.write_text(json.dumps(_recording([_entry(_request("r1", USER), body, complete=False)])))

    recording = read_har(path)
    rules = [(f.rule, f.exchange) for f in check_recording(str(path)).findings]

    assert recording.exchanges[0].complete is False
    assert ("AGUI-D004", 1) in rules


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"<html>not a recording</html>", "not a HAR file"),
        (b'{"log": {"version": "1.2"}}', "no log.entries"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
    ids=["html", "no-entries", "not-utf8"],
)
def test_a_file_that_is_not_har_is_a_located_typed_error(data: bytes, words: str) -> None:
    """AGUI-R001, as a DecodeError naming the file and the byte: never a JSON traceback."""
    with pytest.raises(DecodeError) as caught:
        read_har("capture.har", data=data)

    assert "AGUI-R001" == caught.value.rule
    assert words in caught.value.message
    assert "capture.har" == caught.value.source


def test_a_request_body_that_is_not_json_is_a_located_finding() -> None:
    """A POST sent as JSON that does not parse is still an exchange, reported AGUI-R002."""
    entry = _entry(_request("r1", USER), sse_bytes([_started("r1"), _finished("r1")]))
    entry["request"]["postData"]["text"] = '{"threadId": "t1", "runId": "r1", "messages": ['
    recording = read_har("x.har", data=json.dumps(_recording([entry])).encode())

    (finding,) = check_exchanges(recording.exchanges, "x.har").findings

    assert ("AGUI-R002", 1, None, "") == (
        finding.rule,
        finding.exchange,
        finding.event,
        finding.pointer,
    )
    assert "not JSON" in finding.message


def test_every_post_an_aguikit_recording_holds_is_an_exchange() -> None:
    """A request the proxy forwarded is a run whatever its body: not picked by shape."""
    entry = _entry({"threadId": "t1", "runId": "r1"}, sse_bytes([_started("r1")]))
    browser = {**entry}
    del browser["_aguikit"]

    recorded = read_har("r.har", data=json.dumps(_recording([entry])).encode())
    exported = read_har("b.har", data=json.dumps(_recording([browser])).encode())

    assert (1, 0) == (len(recorded.exchanges), recorded.skipped)
    assert (0, 1) == (len(exported.exchanges), exported.skipped)
    assert "AGUI-R002" in {f.rule for f in check_exchanges(recorded.exchanges, "r").findings}


def test_the_framing_follows_the_content_type() -> None:
    """JSONL by its media type, and a 2xx that is no stream type is AGUI-T003."""
    events = [_started("r1"), _finished("r1")]
    jsonl = Exchange.of(
        1, _request("r1", USER), jsonl_bytes(events), media_type="application/x-ndjson"
    )
    html = Exchange.of(2, _request("r2", USER), b"<html></html>", media_type="text/html")

    assert [] == check_exchanges([jsonl], "x").findings
    assert "AGUI-T003" in {f.rule for f in check_exchanges([html], "x").findings}


def test_is_recording_reads_the_suffix_or_the_first_member() -> None:
    """A HAR saved as .json is still a conversation; a stream is not."""
    assert is_recording("capture.har")
    assert is_recording("capture.json", b'  {"log": {"entries": []}}')
    assert not is_recording("events.json", b'{"type": "RUN_STARTED"}')
    assert not is_recording("http://agent.example/run")


# --- aguikit check on a conversation -------------------------------------------------------------


def _check(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", *args])
    return code, out.getvalue()


def test_aguikit_check_reads_a_har_file_in_every_report_format(tmp_path: Path) -> None:
    """Text, JSON (against docs/check-report.schema.json), SARIF and JUnit each name the
    exchange, the request member and the rule."""
    code, text = _check(str(BROWSER_HAR), "--no-color")
    _, report = _check(str(BROWSER_HAR), "--format", "json")
    _, sarif = _check(str(BROWSER_HAR), "--format", "sarif")
    _, junit = _check(str(BROWSER_HAR), "--format", "junit")

    document = json.loads(report)
    jsonschema.validate(document, REPORT_SCHEMA)
    (problem,) = document["sources"][0]["problems"]
    (result,) = json.loads(sarif)["runs"][0]["results"]
    case = ET.fromstring(junit).find(".//testcase[@name='thread']")

    assert 1 == code
    assert "exchange 2 request RunAgentInput: error AGUI-R003 at /resume:" in text
    assert ("AGUI-R003", 2, "/resume", "conversation") == (
        problem["rule"],
        problem["exchange"],
        problem["pointer"],
        document["sources"][0]["format"],
    )
    assert (
        "exchange/2/request/resume"
        == (result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"])
    )
    assert case is not None and case.find("failure") is not None


def test_the_sarif_fingerprint_of_a_conversation_survives_a_re_recording(tmp_path: Path) -> None:
    """New run and message ids, the same bug: the same fingerprints."""
    path = tmp_path / "thread.har"

    def prints(text: str) -> list[str]:
        path.write_text(text)
        _, sarif = _check(str(path), "--format", "sarif")
        return [r["partialFingerprints"] for r in json.loads(sarif)["runs"][0]["results"]]

    original = BROWSER_HAR.read_text()
    again = original.replace("run-1", "run-91").replace("run-2", "run-92").replace("a1", "b1")

    assert prints(again) == prints(original)


def test_aguikit_check_reports_an_unreadable_har_and_exits_2(tmp_path: Path) -> None:
    """A malformed HAR is a clear error with its rule, not a traceback."""
    path = tmp_path / "broken.har"
    path.write_text('{"log": [')

    code, text = _check(str(path), "--no-color")

    assert 2 == code
    assert "AGUI-R001" in text


def test_aguikit_check_takes_a_directory_of_recordings(tmp_path: Path) -> None:
    """``aguikit proxy --record DIR`` writes one HAR per thread: the directory is checked."""
    (tmp_path / "t1.har").write_text(BROWSER_HAR.read_text())

    code, text = _check(str(tmp_path), "--no-color")

    assert 1 == code
    assert "AGUI-R003" in text


def test_the_severity_and_selection_settings_apply_to_thread_rules() -> None:
    """``--ignore`` and per-rule severities work on R rows as on any other."""
    violating, _ = CASES["AGUI-R003"]
    exchanges = exchanges_of_example(violating)

    ignored = check_exchanges(exchanges, "x", CheckConfig(ignore=("R003",))).findings
    softened = check_exchanges(
        exchanges, "x", CheckConfig(severity={"interrupt-not-covered": Severity.WARNING})
    ).findings

    assert [] == ignored
    assert [(Severity.WARNING, "warning")] == [(f.severity, f.kind) for f in softened]


def test_the_conforming_cases_do_not_share_state() -> None:
    """The table's dicts are built fresh per case (a judge must not mutate its input)."""
    before = copy.deepcopy(CASES)
    for violating, conforming in CASES.values():
        _findings(violating)
        _findings(conforming)

    assert before == CASES


# --- hostile input -----------------------------------------------------------------------------

_ODD_VALUES: list[Any] = [None, 7, "x", [], {}, [[]], {"id": []}, [{"id": {}}]]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copied = copy.deepcopy(value)
    holder = copied
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = new
    return copied


@pytest.mark.parametrize("rule", sorted(CASES), ids=sorted(CASES))
def test_a_request_of_any_shape_is_a_finding_never_an_exception(rule: str) -> None:
    """Every member of every request of a rule's two conversations replaced by values of
    other types (unhashable ids included): the judge reports, it never raises."""
    judged = 0
    for conversation in CASES[rule]:
        for index, exchange in enumerate(conversation):
            for path in _paths(exchange["request"]):
                for value in _ODD_VALUES:
                    mutated = list(conversation)
                    request = _replaced(exchange["request"], path, value)
                    mutated[index] = {**exchange, "request": request}
                    check_exchanges(exchanges_of_example(mutated), "hostile.har")
                    judged += 1

    assert judged > len(_ODD_VALUES)


def test_a_har_of_any_shape_is_read_or_refused_with_its_rule() -> None:
    """Every member of a recording replaced by values of other types: an exchange fewer,
    or AGUI-R001, never another exception."""
    document = json.loads(BROWSER_HAR.read_text())
    outcomes = set()
    for path in _paths(document):
        if len(path) > 5:  # the request and response members, not every header's letter
            continue
        for value in (None, 7, "x", [], {}):
            data = json.dumps(_replaced(document, path, value)).encode()
            try:
                recording = read_har("odd.har", data=data)
            except DecodeError as refused:
                assert "AGUI-R001" == refused.rule
                outcomes.add("refused")
                continue
            check_exchanges(recording.exchanges, "odd.har")
            outcomes.add(len(recording.exchanges))

    assert {"refused", 0, 1, 2} <= outcomes


# --- the test kit ------------------------------------------------------------------------------


def _asking_agent() -> Any:
    return ScriptedAgent(
        [
            _started("r1"),
            {**_finished("r1"), "outcome": ASKED},
        ]
    )


def test_the_test_kits_conversation_fails_a_turn_that_breaks_a_thread_rule() -> None:
    """AgentTestClient.conversation(): continuing past an interrupt fails with AGUI-R003;
    answering it passes; the refused turn is an exchange too."""
    conversation = AgentTestClient(_asking_agent()).conversation(thread_id="t1")
    conversation.run("book it")

    with pytest.raises(AssertionError, match=r"exchange 2 request: AGUI-R003 at /resume"):
        conversation.run("well?")
    conversation.run(resume=[{"interruptId": "i1", "status": "cancelled"}])

    assert 3 == len(conversation.exchanges)
    assert 2 == len(conversation.results)


def test_an_unverified_conversation_keeps_the_thread_problems_in_the_result() -> None:
    """With verify=False the turn returns, its problems naming the thread rule."""
    conversation = AgentTestClient(_asking_agent(), verify=False).conversation(thread_id="t1")
    conversation.run("book it")
    second = conversation.run(resume=[{"interruptId": "nope", "status": "cancelled"}])

    assert [
        "AGUI-R004",
        "AGUI-R003",
    ] == [line.split(": ", 1)[1].split()[0] for line in second.problems]


def test_a_pytest_plugin_user_gets_the_thread_rules(pytester: pytest.Pytester) -> None:
    """The ``agui_client`` fixture's conversations judge each turn by the thread rules."""
    from tests.test_pytest_plugin import PLUGIN_ARGS

    pytester.makepyfile(
        test_thread="""
from aguikit.testing import ScriptedAgent

ASKS = ScriptedAgent([
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "protocolVersion": "1.1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1",
     "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]}},
])


def test_forgets_the_interrupt(agui_client):
    conversation = agui_client(ASKS).conversation(thread_id="t1")
    conversation.run("book it")
    conversation.run("well?")
"""
    )

    result = pytester.runpytest(*PLUGIN_ARGS)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*exchange 2 request: AGUI-R003 at /resume*"])


def test_a_real_servers_frontend_tool_call_must_be_answered_in_the_next_turn() -> None:
    """examples/weather_todo_server.py calls the frontend's confirm_todo and names no
    pendingToolCallIds: the call is pending all the same (AGUI-R007 derives it), and the
    turn that answers it passes."""
    from tests.test_agent import WEATHER

    app = WEATHER.app
    confirm = {"name": "confirm_todo", "description": "Ask the user", "parameters": {}}
    forgetful = AgentTestClient(app, path="/agent").conversation()
    forgetful.run("What's the weather in Oslo?", tools=[confirm])
    with pytest.raises(AssertionError, match=r"exchange 2 request: AGUI-R007 at /messages"):
        forgetful.run("and?", tools=[confirm])

    careful = AgentTestClient(app, path="/agent").conversation()
    first = careful.run("What's the weather in Oslo?", tools=[confirm])
    (call,) = [c for c in first.tool_calls if c.name == "confirm_todo"]
    careful.add_tool_result(call.id, "confirmed")
    second = careful.run(tools=[confirm])

    assert "Thanks, noted: confirmed." in second.text()


def _live(conversation: Sequence[Mapping[str, Any]]) -> list[tuple[int | None, str, str]]:
    """What ``aguikit proxy`` finds as the exchanges pass: each response folded once by the
    live check (:func:`live_session`, :class:`StreamCheck` fed event by event), then the
    thread rules on that fold (:func:`judge_ended`) against the last run served."""
    found: list[tuple[int | None, str, str]] = []
    before: Judged | None = None
    for exchange in exchanges_of_example(conversation):
        session = live_session(exchange.request)
        check = StreamCheck("live", session=session)
        for event in open_events("live.sse", data=exchange.body):
            check.feed(event)
        check.close()
        current = Judged.live(exchange, session)
        found += [(exchange.number, f.rule, f.message) for f in judge_ended(current, before)]
        if current.served:
            before = current
    return found


@pytest.mark.parametrize("kind", [["RUN_STARTED"], {"t": 1}, 7, None], ids=repr)
def test_a_live_check_judges_an_event_whose_type_is_no_string_as_the_checker_does(
    kind: Any,
) -> None:
    """The live session's watch for snapshots, starts and finishes reads each event's
    ``type`` before the session does: a hostile one (a list, an object) is the checker's
    schema finding there too, never a ``TypeError`` out of the watch."""
    event = {"type": kind, "threadId": "t", "runId": "r"}
    live = StreamCheck("live", session=live_session({}))
    plain = StreamCheck("plain")

    found = live.feed(event)

    assert [(f.rule, f.pointer) for f in found] == [(f.rule, f.pointer) for f in plain.feed(event)]
    assert found and not live.stopped


@pytest.mark.parametrize("rule", sorted(CASES), ids=sorted(CASES))
def test_the_live_thread_rules_find_what_the_whole_conversation_finds(rule: str) -> None:
    """On both conversations of each rule, the thread rules applied as each live answer
    ends, on the live check's own fold, find exactly the thread findings
    :func:`check_exchanges` finds reading the whole conversation (less the request's own
    and the stream's, which the live path reports as they pass), in the same order."""
    for conversation in CASES[rule]:
        whole = [
            (f.exchange, f.rule, f.message)
            for f in _findings(conversation)
            if f.rule.startswith("AGUI-R")
            and f.rule != "AGUI-R002"
            and not (f.rule == "AGUI-R010" and f.event_type == "RunAgentInput")
        ]

        assert whole == _live(conversation)
