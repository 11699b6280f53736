"""
The stream builders every test file needs, in one place.

AG-UI tests are mostly short streams of wire dicts.  Each builder here writes one event (or
one whole text message) with the members a legal stream needs and defaults that read well
in a test: thread ``t1``, run ``r1``, message ``m1``, tool call ``c1``.  Keyword arguments
beyond the named ones are wire members (``subagentRunId="s1"``) added to the event or
replacing a default.  When the protocol changes an event's shape, its builder here changes
and every test follows, so no test file writes its own.

Beside the builders: :func:`typed` (a wire dict as a typed event, with or without the
schema), the byte and file forms of a stream, and the representative documents (one of
every event type, message role and input member) that several files check: written by hand
for the event types this file knows, derived from the schema for any it does not
(:func:`representatives`), so adding an event to the protocol needs no edit here.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from aguikit.models import EVENT_CLASSES, Event
from aguikit.transport.jsonl import encode_line
from aguikit.transport.sse import encode_bytes
from aguikit.wire import parse_event

Wire = dict[str, Any]

# ---- lifecycle ---------------------------------------------------------------------------


def run_started(run_id: str = "r1", thread_id: str = "t1", **extra: Any) -> Wire:
    return {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, **extra}


def run_finished(run_id: str = "r1", thread_id: str = "t1", **extra: Any) -> Wire:
    return {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, **extra}


def run_error(message: str = "boom", **extra: Any) -> Wire:
    return {"type": "RUN_ERROR", "message": message, **extra}


def step_started(step_name: str = "plan", **extra: Any) -> Wire:
    return {"type": "STEP_STARTED", "stepName": step_name, **extra}


def step_finished(step_name: str = "plan", **extra: Any) -> Wire:
    return {"type": "STEP_FINISHED", "stepName": step_name, **extra}


def run_input(run_id: str = "r1", thread_id: str = "t1", **extra: Any) -> Wire:
    """A minimal ``RunAgentInput``: no messages unless ``messages=`` says otherwise."""
    return {"threadId": thread_id, "runId": run_id, "messages": [], **extra}


# ---- text messages -----------------------------------------------------------------------


def text_start(message_id: str = "m1", **extra: Any) -> Wire:
    return {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant", **extra}


def text_content(message_id: str = "m1", delta: str = "hi", **extra: Any) -> Wire:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta, **extra}


def text_end(message_id: str = "m1", **extra: Any) -> Wire:
    return {"type": "TEXT_MESSAGE_END", "messageId": message_id, **extra}


def text_message(message_id: str = "m1", *deltas: str) -> list[Wire]:
    """A whole assistant message: its start, one content event per delta, its end."""
    return [
        text_start(message_id),
        *(text_content(message_id, delta) for delta in deltas),
        text_end(message_id),
    ]


# ---- tool calls --------------------------------------------------------------------------


def tool_call_start(tool_call_id: str = "c1", tool_call_name: str = "f", **extra: Any) -> Wire:
    return {
        "type": "TOOL_CALL_START",
        "toolCallId": tool_call_id,
        "toolCallName": tool_call_name,
        **extra,
    }


def tool_call_args(tool_call_id: str = "c1", delta: str = "{}", **extra: Any) -> Wire:
    return {"type": "TOOL_CALL_ARGS", "toolCallId": tool_call_id, "delta": delta, **extra}


def tool_call_end(tool_call_id: str = "c1", **extra: Any) -> Wire:
    return {"type": "TOOL_CALL_END", "toolCallId": tool_call_id, **extra}


def tool_call_result(
    tool_call_id: str = "c1", message_id: str = "tm1", content: str = "ok", **extra: Any
) -> Wire:
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": message_id,
        "toolCallId": tool_call_id,
        "content": content,
        **extra,
    }


# ---- state -------------------------------------------------------------------------------


def state_snapshot(snapshot: Any, **extra: Any) -> Wire:
    return {"type": "STATE_SNAPSHOT", "snapshot": snapshot, **extra}


def state_delta(delta: list[Any], **extra: Any) -> Wire:
    return {"type": "STATE_DELTA", "delta": delta, **extra}


# ---- reasoning ---------------------------------------------------------------------------


def reasoning_start(message_id: str, **extra: Any) -> Wire:
    return {"type": "REASONING_START", "messageId": message_id, **extra}


def reasoning_end(message_id: str, **extra: Any) -> Wire:
    return {"type": "REASONING_END", "messageId": message_id, **extra}


def reasoning_message_start(message_id: str, **extra: Any) -> Wire:
    return {
        "type": "REASONING_MESSAGE_START",
        "messageId": message_id,
        "role": "reasoning",
        **extra,
    }


def reasoning_message_content(message_id: str, delta: str = "hmm", **extra: Any) -> Wire:
    return {"type": "REASONING_MESSAGE_CONTENT", "messageId": message_id, "delta": delta, **extra}


def reasoning_message_end(message_id: str, **extra: Any) -> Wire:
    return {"type": "REASONING_MESSAGE_END", "messageId": message_id, **extra}


def reasoning_encrypted_value(subtype: str, entity_id: str, **extra: Any) -> Wire:
    return {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": subtype,
        "entityId": entity_id,
        "encryptedValue": "b3BhcXVl",
        **extra,
    }


def thinking(kind: str, **extra: Any) -> Wire:
    """A deprecated ``THINKING_<kind>`` event (``START``, ``TEXT_MESSAGE_CONTENT``, ...)."""
    return {"type": f"THINKING_{kind}", **extra}


# ---- subagents ---------------------------------------------------------------------------


def subagent_started(subagent_run_id: str, name: str = "helper", **extra: Any) -> Wire:
    return {"type": "SUBAGENT_STARTED", "subagentRunId": subagent_run_id, "name": name, **extra}


def subagent_finished(subagent_run_id: str, **extra: Any) -> Wire:
    return {"type": "SUBAGENT_FINISHED", "subagentRunId": subagent_run_id, **extra}


# ---- typed events ------------------------------------------------------------------------


def typed(document: Mapping[str, Any], *, in_process: bool = False) -> Event:
    """
    ``document`` as its typed event: parsed without the schema check, or, ``in_process``,
    constructed directly from its members (as application code would, bypassing every
    check parsing does), with the deprecated classes' DeprecationWarning silenced.
    """
    if not in_process:
        return parse_event(document, check=False)
    cls = EVENT_CLASSES[document["type"]]
    names = {str(f.metadata.get("wire", f.name)): f.name for f in attrs.fields(cls)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cls(**{names[key]: value for key, value in document.items()})


# ---- streams as bytes and files ----------------------------------------------------------


def sse_bytes(events: Iterable[Mapping[str, Any]]) -> bytes:
    """The events as an SSE body, each frame exactly as the official SDK encodes it."""
    return b"".join(encode_bytes(event) for event in events)


def jsonl_bytes(events: Iterable[Mapping[str, Any]]) -> bytes:
    """The events as JSON Lines, one compact object a line."""
    return "".join(encode_line(event) for event in events).encode("utf-8")


def write_sse(path: Path, events: Iterable[Mapping[str, Any]]) -> Path:
    path.write_bytes(sse_bytes(events))
    return path


def write_jsonl(path: Path, events: Iterable[Mapping[str, Any]]) -> Path:
    path.write_bytes(jsonl_bytes(events))
    return path


def split_every(data: bytes, sizes: Sequence[int]) -> list[bytes]:
    """Cut ``data`` into pieces of the given sizes, cycling through them (odd boundaries)."""
    pieces, at, i = [], 0, 0
    while at < len(data):
        step = max(1, sizes[i % len(sizes)])
        pieces.append(data[at : at + step])
        at += step
        i += 1
    return pieces


# ---- representative documents: every event type, message role and input member -----------

META: Wire = {"trace": "t-1", "nullable": None, "nested": {"k": [1, None]}}

USER_PARTS: list[Wire] = [
    {"type": "text", "text": "look at this", "id": "p1"},
    {
        "type": "image",
        "source": {"type": "url", "value": "https://x/y.png", "mimeType": "image/png"},
    },
    {"type": "audio", "source": {"type": "data", "value": "AAEC", "mimeType": "audio/wav"}},
    {"type": "video", "source": {"type": "file", "value": "file-1", "provider": "openai"}},
    {"type": "document", "source": {"type": "url", "value": "https://x/d.pdf"}, "metadata": 1},
]

FULL_RUN_INPUT: Wire = {
    "threadId": "t1",
    "runId": "r1",
    "protocolVersion": "1.0",
    "messages": [
        {"id": "u1", "role": "user", "content": USER_PARTS},
        {"id": "s1", "role": "system", "content": "be brief"},
    ],
    "state": {"count": 1},
    "tools": [{"name": "search", "description": "web", "parameters": {"type": "object"}}],
    "context": [{"description": "locale", "value": "fr"}],
    "forwardedProps": {"x": [1, 2]},
    "resume": [{"interruptId": "i1", "status": "resolved", "payload": {"ok": True}}],
}
"""A ``RunAgentInput`` with every member set."""

ALL_MESSAGES: list[Wire] = [
    {"id": "d1", "role": "developer", "content": "rules", "name": "ops"},
    {"id": "s1", "role": "system", "content": "be brief", "metadata": META},
    {
        "id": "a1",
        "role": "assistant",
        "content": "calling",
        "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
        "encryptedValue": "enc",
    },
    {"id": "u1", "role": "user", "content": USER_PARTS, "subagentRunId": "sub-1"},
    {"id": "tm1", "role": "tool", "content": "42", "toolCallId": "c1", "error": "partial"},
    {"id": "ac1", "role": "activity", "activityType": "plan", "content": {"steps": []}},
    {"id": "r1", "role": "reasoning", "content": "thinking", "encryptedValue": "e"},
]
"""One message of every role, optional members set."""

FAMILIES: dict[str, list[Wire]] = {
    "text": [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", "name": "bot"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello", "timestamp": 1},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1", "subagentRunId": "sub-1"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "role": "user", "delta": "hi"},
    ],
    "tools": [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c1",
            "toolCallName": "search",
            "parentMessageId": "m1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q":'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1", "rawEvent": {"provider": "x"}},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c2", "toolCallName": "f", "delta": "{}"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "tm1",
            "toolCallId": "c1",
            "content": USER_PARTS[:2],
            "role": "tool",
        },
    ],
    "state": [
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": [1, 2.5, "x", None, True]}},
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "add", "path": "/a/-", "value": None},
                {"op": "remove", "path": "/b"},
                {"op": "replace", "path": "/c~1d", "value": {"e": 1}},
                {"op": "move", "from": "/a/0", "path": "/f"},
                {"op": "copy", "from": "/f", "path": "/g"},
                {"op": "test", "path": "/g", "value": 1},
            ],
        },
    ],
    "messages snapshot": [{"type": "MESSAGES_SNAPSHOT", "messages": ALL_MESSAGES}],
    "activity": [
        {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": "ac1",
            "activityType": "plan",
            "content": {"steps": ["a"]},
            "replace": False,
        },
        {
            "type": "ACTIVITY_DELTA",
            "messageId": "ac1",
            "activityType": "plan",
            "patch": [{"op": "add", "path": "/steps/-", "value": "b"}],
        },
    ],
    "special": [
        {"type": "RAW", "event": {"anything": [1]}, "source": "openai"},
        {"type": "CUSTOM", "name": "ping", "value": None, "metadata": META},
    ],
    "lifecycle": [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "input": FULL_RUN_INPUT},
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "STEP_FINISHED", "stepName": "plan"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t1",
            "runId": "r1",
            "result": {"answer": 42},
            "outcome": {"type": "success", "pendingToolCallIds": ["c9"]},
            "usage": [{"provider": "openai", "inputTokens": 10, "outputTokens": 0}],
        },
        {
            "type": "RUN_FINISHED",
            "threadId": "t1",
            "runId": "r2",
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i1", "reason": "approval", "responseSchema": {}}],
            },
        },
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r3", "outcome": {"type": "cancelled"}},
        {"type": "RUN_ERROR", "message": "boom", "code": "E1"},
    ],
    "reasoning": [
        {"type": "REASONING_START", "messageId": "rs1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm1", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm1", "delta": "hmm"},
        {"type": "REASONING_MESSAGE_END", "messageId": "rm1"},
        {"type": "REASONING_MESSAGE_CHUNK", "messageId": "rm2", "delta": "x"},
        {"type": "REASONING_END", "messageId": "rs1"},
        {
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": "tool-call",
            "entityId": "c1",
            "encryptedValue": "opaque",
        },
    ],
    "subagents": [
        {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": "sub-1",
            "name": "researcher",
            "parentToolCallId": "c1",
        },
        {
            "type": "SUBAGENT_FINISHED",
            "subagentRunId": "sub-1",
            "result": "done",
            "outcome": {"type": "suspended", "interruptIds": ["i1"]},
        },
        {"type": "SUBAGENT_ERROR", "subagentRunId": "sub-2", "message": "failed", "code": "x"},
    ],
    "deprecated thinking": [
        {"type": "THINKING_START", "title": "pondering"},
        {"type": "THINKING_TEXT_MESSAGE_START"},
        {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "..."},
        {"type": "THINKING_TEXT_MESSAGE_END"},
        {"type": "THINKING_END"},
    ],
}
"""One document of every event type, by family, with most optional members set."""


DERIVED: str = "derived from the schema"
"""The family :func:`representatives` files derived documents under."""


def representatives(table: Mapping[str, list[Wire]] = FAMILIES) -> dict[str, list[Wire]]:
    """
    ``table`` with a document for every event type it lacks, under :data:`DERIVED`.

    A type the hand-written table lacks is one the schema gained after the table was
    written: its document is the simplest one the schema's strategies generate (hypothesis'
    ``find``, deterministic), so every test that walks the representatives covers it the
    moment codegen has run, and the hand-written documents stay the richer ones.
    """
    from hypothesis import HealthCheck, find, settings
    from tests.strategies import documents

    covered = {doc["type"] for docs in table.values() for doc in docs}
    derived = []
    for event_type, cls in EVENT_CLASSES.items():
        if event_type not in covered:
            quiet = settings(database=None, suppress_health_check=list(HealthCheck))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                derived.append(find(documents(cls), lambda _: True, settings=quiet))
    return {**table, DERIVED: derived} if derived else dict(table)


def exhaustive_match(classes: Iterable[type]) -> str:
    """
    The source of a module a downstream consumer writes: a ``match`` over ``aguikit.Event``
    with one case per class of ``classes``, ending in ``assert_never``.

    Rendered from the registry rather than kept as a file, so a protocol change needs no
    edit to it; mypy must accept it for every class (``tests/test_models.py``) and must
    reject it, naming the class, when the union has one more (``tests/test_drill.py``
    renders it before the drill's event exists and checks it against the drilled package).
    """
    names = sorted(cls.__name__ for cls in classes)
    imports = "".join(f"    {name},\n" for name in names)
    cases = "".join(f"        case {name}():\n            return {name!r}\n" for name in names)
    return (
        '"""An exhaustive match over aguikit.Event, as a consumer writes it."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import assert_never\n\n"
        f"from aguikit.models import (\n    Event,\n{imports})\n\n\n"
        "def describe(event: Event) -> str:\n"
        "    match event:\n"
        f"{cases}"
        "        case _:\n"
        "            assert_never(event)\n"
    )
