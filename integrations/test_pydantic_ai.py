"""
pydantic-ai's AG-UI adapter, a real producer, driven offline by ``FunctionModel`` and
judged through :class:`aguikit.testing.AgentTestClient`.

``nox -s integrations`` installs the pinned version (``PYDANTIC_AI`` in ``noxfile.py``);
these tests live outside ``tests/`` so the default session, which does not install it,
neither collects nor skips them.  Where the adapter breaks a rule, the test asserts that
aguikit catches it with the right rule id; ``docs/producers.md`` lists each finding.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

import pytest
from ag_ui.core import StateSnapshotEvent
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ToolReturn, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.ui import StateDeps
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tests.node_client import run_http_agent
from tests.servers import serve_asgi

from aguikit.testing import AgentTestClient, RunResult

PINNED = "2.68.0"


class Todos(BaseModel):
    items: list[str] = []


def _app(agent: Agent[Any, Any], deps: Any = None) -> Starlette:
    async def endpoint(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent, deps=deps)

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def _answered(messages: list[ModelMessage]) -> bool:
    return any(isinstance(part, ToolReturnPart) for part in messages[-1].parts)


def _rules(result: RunResult) -> list[str]:
    return [re.findall(r"AGUI-[A-Z]\d+", problem)[0] for problem in result.problems]


def _call_then_text(name: str, args: str, call_id: str, text: str) -> FunctionModel:
    """A model that calls one tool, then, once the tool has answered, says ``text``."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if _answered(messages):
            yield text
            return
        yield {0: DeltaToolCall(name=name, json_args=args, tool_call_id=call_id)}

    return FunctionModel(stream_function=model)


def test_the_pinned_version_is_the_one_under_test() -> None:
    """docs/producers.md names this version: the findings are about it."""
    assert PINNED == version("pydantic-ai-slim")


def test_text_from_test_model() -> None:
    """TestModel's canned text streams as one valid assistant message."""
    agent: Agent[None, str] = Agent(TestModel(custom_output_text="Hello from pydantic-ai"))

    result = AgentTestClient(_app(agent)).run("hi")

    assert "Hello from pydantic-ai" == result.text()
    assert "finished" == result.outcome.kind


def test_a_backend_tool_call_and_its_result(agui_trace: Any) -> None:
    """A server-side tool: call, arguments, result, then the final text; pinned as a
    golden trace (integrations/agui_traces/pydantic_ai_backend_tool.jsonl)."""

    model = _call_then_text("get_weather", '{"city": "Paris"}', "call-1", "It is sunny.")

    agent: Agent[None, str] = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    result = AgentTestClient(_app(agent)).run("weather?")

    assert [("get_weather", {"city": "Paris"}, "sunny in Paris")] == [
        (c.name, c.arguments, c.result) for c in result.tool_calls
    ]
    assert "It is sunny." == result.text()
    agui_trace.check(result, "pydantic_ai_backend_tool")


def test_a_frontend_tool_call_ends_the_run_for_the_ui_to_answer() -> None:
    """A tool from RunAgentInput.tools is the UI's: the run ends with the call pending,
    and the next turn carries the UI's answer."""

    model = _call_then_text("confirm", '{"title": "milk"}', "call-ui", "Confirmed.")

    agent: Agent[None, str] = Agent(model)
    conversation = AgentTestClient(_app(agent)).conversation()
    tool = {"name": "confirm", "description": "Ask the user", "parameters": {"type": "object"}}

    first = conversation.run("add milk", tools=[tool])
    conversation.add_tool_result("call-ui", "yes")
    second = conversation.run(tools=[tool])

    assert [("confirm", {"title": "milk"}, None)] == [
        (c.name, c.arguments, c.result) for c in first.tool_calls
    ]
    assert "finished" == first.outcome.kind
    assert "Confirmed." == second.text()


def _parallel(interleaved: bool) -> Agent[None, str]:
    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if _answered(messages):
            yield "Both done."
            return
        if interleaved:  # how providers stream parallel calls: argument pieces alternate
            yield {
                0: DeltaToolCall(name="get_weather", json_args='{"city":', tool_call_id="call-a")
            }
            yield {1: DeltaToolCall(name="get_time", json_args='{"tz":', tool_call_id="call-b")}
            yield {0: DeltaToolCall(json_args='"Paris"}')}
            yield {1: DeltaToolCall(json_args='"UTC"}')}
        else:
            yield {
                0: DeltaToolCall(
                    name="get_weather", json_args='{"city": "Paris"}', tool_call_id="call-a"
                )
            }
            yield {
                1: DeltaToolCall(name="get_time", json_args='{"tz": "UTC"}', tool_call_id="call-b")
            }

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=model))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    @agent.tool_plain
    def get_time(tz: str) -> str:
        return "12:00"

    return agent


def test_parallel_tool_calls_streamed_one_after_the_other_are_valid() -> None:
    """Two calls whose arguments arrive whole: START, ARGS, END each, then both results."""
    result = AgentTestClient(_app(_parallel(interleaved=False))).run("weather and time?")

    assert ["get_weather", "get_time"] == [c.name for c in result.tool_calls]
    assert ["sunny in Paris", "12:00"] == [c.result for c in result.tool_calls]


def test_interleaved_parallel_tool_calls_break_v014_and_aguikit_says_so() -> None:
    """The adapter ends call-a when call-b starts, then sends call-a's remaining arguments:
    TOOL_CALL_ARGS after that call's TOOL_CALL_END, which AGUI-V014 forbids (and the
    TypeScript client rejects); call-a ended with the arguments '{"city":', not JSON
    (AGUI-K008)."""
    client = AgentTestClient(_app(_parallel(interleaved=True)), verify=False)

    result = client.run("weather and time?")

    assert ["AGUI-K008", "AGUI-V014"] == _rules(result)
    assert "event 6 TOOL_CALL_END (SSE frame 6" in result.problems[0]
    assert "'call-a'" in result.problems[0]
    assert "event 9 TOOL_CALL_ARGS (SSE frame 9" in result.problems[1]
    assert "'call-a'" in result.problems[1]
    with pytest.raises(AssertionError, match="AGUI-V014"):
        AgentTestClient(_app(_parallel(interleaved=True))).run("weather and time?")


def test_the_official_typescript_client_rejects_it_too() -> None:
    """@ag-ui/client's HttpAgent fails the run on the same event: the finding is real."""
    with serve_asgi(_app(_parallel(interleaved=True))) as url:
        user = {"id": "u1", "role": "user", "content": "weather and time?"}
        out = run_http_agent(url + "/", {"threadId": "t1", "messages": [user]})

    assert "No active tool call found with ID 'call-a'" in out["runs"][0]["error"]


def _todo_app() -> Starlette:
    """An agent whose tool adds a todo to the UI's state and sends the state back."""
    model = _call_then_text("add_todo", '{"item": "milk"}', "call-1", "Added.")

    agent: Agent[StateDeps[Todos], str] = Agent(model, deps_type=StateDeps[Todos])

    @agent.tool
    def add_todo(ctx: RunContext[StateDeps[Todos]], item: str) -> ToolReturn:
        ctx.deps.state.items.append(item)
        snapshot = StateSnapshotEvent(snapshot=ctx.deps.state.model_dump())
        return ToolReturn(return_value="added", metadata=[snapshot])

    return _app(agent, deps=StateDeps(Todos()))


def test_state_from_the_ui_and_a_snapshot_from_a_tool() -> None:
    """StateDeps receives the UI's state; a tool's StateSnapshotEvent reaches the UI."""
    result = AgentTestClient(_todo_app()).run("add milk", state={"items": ["eggs"]})

    assert {"items": ["eggs", "milk"]} == result.state


def test_a_model_error_ends_the_run_with_run_error() -> None:
    """An exception inside the model becomes RUN_ERROR with its message: a valid end."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        raise RuntimeError("model unavailable")
        yield ""  # pragma: no cover - makes this an async generator

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=model))

    result = AgentTestClient(_app(agent)).run("hi")

    assert "error" == result.outcome.kind
    assert "model unavailable" in (result.outcome.message or "")


def test_the_official_client_through_aguikit_proxy_ends_as_it_does_directly() -> None:
    """``aguikit proxy`` between HttpAgent and the adapter (a tool call, its result, then
    text; state from the UI and a snapshot from the tool): the same messages and state as
    talking directly, ids aside (the adapter mints them per run), and the proxy judged
    every event as it passed."""
    import io

    from aguikit.proxy import ProxyApp

    user = {"id": "u1", "role": "user", "content": "add milk"}
    script = {"threadId": "t1", "messages": [user], "state": {"items": ["eggs"]}}
    with serve_asgi(_todo_app()) as url:
        direct = run_http_agent(url + "/", script)
    out = io.StringIO()
    with serve_asgi(_todo_app()) as url:
        proxy = ProxyApp(url + "/", out=out)
        with serve_asgi(proxy, lifespan="on", server_header=False, date_header=False) as front:
            proxied = run_http_agent(front + "/", script)

    def without_ids(outcome: dict[str, Any]) -> dict[str, Any]:
        messages = [
            {k: v for k, v in m.items() if k not in ("id", "toolCallId", "toolCalls")}
            for m in outcome["messages"]
        ]
        return {**outcome, "messages": messages}

    assert without_ids(direct) == without_ids(proxied)
    assert {"items": ["eggs", "milk"]} == proxied["state"]
    assert re.search(r"aguikit proxy: 1 exchanges, \d+ events", out.getvalue()), out.getvalue()
