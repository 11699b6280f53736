"""
ag-ui-langgraph's ``LangGraphAgent``, a real producer, driven offline by a scripted chat
model inside a one-node LangGraph graph, judged through ``AgentTestClient``.

The model streams exactly the ``AIMessageChunk`` values a test gives it (text, tool-call
chunks with their ``index``), so the adapter sees what a provider's stream looks like.
Findings are in ``docs/producers.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import Field

from aguikit.testing import AgentTestClient, RunResult

PINNED = "0.0.47"
TOOLS = [
    {"name": name, "description": "a frontend tool", "parameters": {"type": "object"}}
    for name in ("get_weather", "get_time")
]


class ScriptedChatModel(BaseChatModel):
    """Streams the given chunks, whatever it is asked; ``fail`` raises instead."""

    chunks: list[AIMessageChunk] = Field(default_factory=list)
    fail: str | None = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("streamed only")

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        if self.fail:
            raise RuntimeError(self.fail)
        for message in self.chunks:
            chunk = ChatGenerationChunk(message=message)
            if run_manager is not None:
                run_manager.on_llm_new_token(str(message.content), chunk=chunk)
            yield chunk


def _app(model: ScriptedChatModel) -> FastAPI:
    async def chat(state: MessagesState) -> dict[str, Any]:
        whole: Any = None
        async for chunk in model.astream(state["messages"]):
            whole = chunk if whole is None else whole + chunk
        return {"messages": [whole]}

    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    graph.add_edge("chat", END)
    agent = LangGraphAgent(
        name="scripted", graph=graph.compile(checkpointer=MemorySaver()), emit_raw_events=False
    )
    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, agent, "/")
    return app


def _call(index: int, args: str, name: str | None = None, call_id: str | None = None) -> Any:
    piece = {"index": index, "name": name, "args": args, "id": call_id}
    return AIMessageChunk(content="", tool_call_chunks=[piece])  # type: ignore[list-item]


def _rules(result: RunResult) -> list[str]:
    return [re.findall(r"AGUI-[A-Z]\d+", problem)[0] for problem in result.problems]


def _streamed_arguments(result: RunResult) -> dict[str, str]:
    """Each tool call's arguments as the TOOL_CALL_ARGS deltas spelled them."""
    streamed: dict[str, str] = {}
    for event in result.events:
        if event.type == "TOOL_CALL_START":
            streamed[event.tool_call_id] = ""
        elif event.type == "TOOL_CALL_ARGS":
            streamed[event.tool_call_id] += event.delta
    return streamed


def test_the_pinned_version_is_the_one_under_test() -> None:
    """docs/producers.md names this version: the findings are about it."""
    assert version("ag-ui-langgraph") == PINNED


def test_streamed_text_snapshots_and_state_are_valid() -> None:
    """Text deltas, the graph's state snapshots and the closing messages snapshot."""
    words = [AIMessageChunk(content=w) for w in ("Hello", " from", " LangGraph")]

    result = AgentTestClient(_app(ScriptedChatModel(chunks=words))).run("hi")

    assert result.text() == "Hello from LangGraph"
    assert result.outcome.kind == "finished"
    assert ["hi", "Hello from LangGraph"] == [m.content for m in result.messages]
    assert "MESSAGES_SNAPSHOT" in [e.type for e in result.events]


def test_a_frontend_tool_call_loses_its_first_argument_chunk_from_the_stream() -> None:
    """The arguments sent with the call's first chunk never reach a TOOL_CALL_ARGS: a UI
    rendering them live sees '"Paris"}', which is not JSON (AGUI-K008); only the closing
    MESSAGES_SNAPSHOT carries the whole '{"city": "Paris"}'."""
    chunks = [_call(0, '{"city":', "get_weather", "call-a"), _call(0, '"Paris"}')]
    client = AgentTestClient(_app(ScriptedChatModel(chunks=chunks)), verify=False)

    result = client.run("hi", tools=TOOLS)

    assert ["AGUI-K008"] == _rules(result)
    assert "TOOL_CALL_END" in result.problems[0]
    assert "'call-a'" in result.problems[0]
    assert {"call-a": '"Paris"}'} == _streamed_arguments(result)
    assert [("get_weather", {"city": "Paris"})] == [
        (c.name, c.arguments) for c in result.tool_calls
    ]


def test_interleaved_parallel_tool_calls_are_streamed_under_the_wrong_call() -> None:
    """Arguments of call-a that arrive after call-b started are sent as call-b's: no
    ordering rule is broken, but the streamed arguments are wrong until MESSAGES_SNAPSHOT
    replaces them, and call-b's ('"Paris"}"UTC"}') are not JSON (AGUI-K008)."""
    chunks = [
        _call(0, '{"city":', "get_weather", "call-a"),
        _call(1, '{"tz":', "get_time", "call-b"),
        _call(0, '"Paris"}'),
        _call(1, '"UTC"}'),
    ]

    client = AgentTestClient(_app(ScriptedChatModel(chunks=chunks)), verify=False)

    result = client.run("hi", tools=TOOLS)

    assert ["AGUI-K008"] == _rules(result)
    assert "'call-b'" in result.problems[0]
    assert {"call-a": "", "call-b": '"Paris"}"UTC"}'} == _streamed_arguments(result)
    assert [{"city": "Paris"}, {"tz": "UTC"}] == [c.arguments for c in result.tool_calls]


def test_a_model_error_ends_the_run_with_run_error() -> None:
    """An exception in the graph becomes RUN_ERROR with its message: a valid end."""
    result = AgentTestClient(_app(ScriptedChatModel(fail="model unavailable"))).run("hi")

    assert result.outcome.kind == "error"
    assert "model unavailable" in (result.outcome.message or "")
