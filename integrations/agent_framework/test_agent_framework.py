"""
Microsoft Agent Framework's AG-UI endpoint (``agent-framework-ag-ui``), a real producer,
driven offline by a scripted chat client, judged through ``AgentTestClient``.

It pins ``ag-ui-protocol`` 0.1.x, which aguikit's ``test`` extra cannot share (1.0.0),
so ``nox -s integrations_agent_framework`` runs this directory in a venv of its own.
Findings are in ``docs/producers.md``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from importlib.metadata import version
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    Message,
    ResponseStream,
)
from agent_framework._tools import FunctionInvocationLayer
from agent_framework_ag_ui import add_agent_framework_fastapi_endpoint
from fastapi import FastAPI

from aguikit.testing import AgentTestClient

PINNED = "1.7.0"
TOOLS = [
    {"name": name, "description": "a frontend tool", "parameters": {"type": "object"}}
    for name in ("get_weather", "get_time")
]


class ScriptedChatClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Streams the given updates, whatever it is asked."""

    def __init__(self, updates: list[ChatResponseUpdate]) -> None:
        super().__init__()
        self.updates = updates

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kw: Any
    ) -> Any:
        async def replay() -> AsyncIterator[ChatResponseUpdate]:
            for update in self.updates:
                yield update

        return ResponseStream(replay(), finalizer=ChatResponse.from_updates)


def _app(updates: list[ChatResponseUpdate]) -> FastAPI:
    app = FastAPI()
    agent = Agent(client=ScriptedChatClient(updates), name="scripted")
    add_agent_framework_fastapi_endpoint(app, agent, "/", single_user=True)
    return app


def _text(text: str) -> ChatResponseUpdate:
    return ChatResponseUpdate(role="assistant", contents=[Content.from_text(text)], message_id="m")


def _call(call_id: str, name: str, arguments: str) -> ChatResponseUpdate:
    content = Content.from_function_call(call_id=call_id, name=name, arguments=arguments)
    return ChatResponseUpdate(role="assistant", contents=[content], message_id="m")


def test_the_pinned_version_is_the_one_under_test() -> None:
    """docs/producers.md names this version: the findings are about it."""
    assert version("agent-framework-ag-ui") == PINNED


def test_streamed_text_is_valid() -> None:
    """Text deltas and the closing messages snapshot."""
    result = AgentTestClient(_app([_text("Hello"), _text(" world")])).run("hi")

    assert result.text() == "Hello world"
    assert result.outcome.kind == "finished"


def test_a_frontend_tool_call_streamed_in_pieces_is_valid() -> None:
    """One call, its arguments in two chunks: START, ARGS, ARGS, END."""
    updates = [_call("call-a", "get_weather", '{"city":'), _call("", "", '"Paris"}')]

    result = AgentTestClient(_app(updates)).run("hi", tools=TOOLS)

    assert [("get_weather", {"city": "Paris"})] == [
        (c.name, c.arguments) for c in result.tool_calls
    ]


def test_interleaved_parallel_tool_calls_start_each_call_twice() -> None:
    """Two calls whose chunks alternate, each chunk carrying its call id: after the
    arguments the endpoint sends TOOL_CALL_START again for both calls (AGUI-V013, the
    first at event 9), then TOOL_CALL_END twice for each: the second ends a call no longer
    open (AGUI-V014).  The check goes on after an error, so each is reported, the later
    ones marked as perhaps consequences of event 9."""
    updates = [
        _call("call-a", "get_weather", '{"city":'),
        _call("call-b", "get_time", '{"tz":'),
        _call("call-a", "", '"Paris"}'),
        _call("call-b", "", '"UTC"}'),
    ]

    result = AgentTestClient(_app(updates), verify=False).run("hi", tools=TOOLS)

    assert [re.findall(r"AGUI-[A-Z]\d+", p)[0] for p in result.problems] == [
        "AGUI-V013",
        "AGUI-V013",
        "AGUI-V014",
        "AGUI-V014",
    ]
    assert "event 9 TOOL_CALL_START (SSE frame 9" in result.problems[0]
    assert "'call-a'" in result.problems[0]
    assert all("consequence of event 9" in p for p in result.problems[1:])
