"""
Google ADK's AG-UI middleware (``ag-ui-adk``), a real producer, driven offline by a
scripted ``BaseLlm`` inside an ``LlmAgent``, judged through ``AgentTestClient``.

google-adk brings a large dependency tree of its own, so ``nox -s integrations_adk``
runs this directory in a venv of its own.  Findings are in ``docs/producers.md``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from importlib.metadata import version
from typing import Any

from ag_ui_adk import ADKAgent, AGUIToolset, create_adk_app
from fastapi import FastAPI
from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.genai import types
from pydantic import Field

from aguikit.testing import AgentTestClient

PINNED = "0.11.0"
TOOLS = [{"name": "confirm", "description": "a frontend tool", "parameters": {"type": "object"}}]


class ScriptedLlm(BaseLlm):
    """Yields the scripted responses; once a tool has answered, says "Done."."""

    script: list[LlmResponse] = Field(default_factory=list)
    fail: str | None = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.fail:
            raise RuntimeError(self.fail)
        parts = [p for c in llm_request.contents for p in (c.parts or [])]
        if any(p.function_response for p in parts):
            yield _text("Done.")
            return
        for response in self.script:
            yield response


def _text(text: str, partial: bool | None = None) -> LlmResponse:
    content = types.Content(role="model", parts=[types.Part(text=text)])
    return LlmResponse(content=content, partial=partial)


def _calls(*calls: tuple[str, str, dict[str, Any]]) -> LlmResponse:
    parts = [
        types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))
        for call_id, name, args in calls
    ]
    return LlmResponse(content=types.Content(role="model", parts=parts))


def get_weather(city: str) -> str:
    """The weather in a city (a backend tool)."""
    return f"sunny in {city}"


def _app(llm: ScriptedLlm, tools: list[Any] | None = None) -> FastAPI:
    agent = LlmAgent(name="scripted", model=llm, instruction="test", tools=tools or [])
    adk = ADKAgent(adk_agent=agent, app_name="t", user_id="u", use_in_memory_services=True)
    return create_adk_app(adk, "/")


def test_the_pinned_version_is_the_one_under_test() -> None:
    """docs/producers.md names this version: the findings are about it."""
    assert version("ag-ui-adk") == PINNED


def test_streamed_text_is_valid() -> None:
    """Partial responses stream as deltas of one message."""
    script = [_text("Hello", True), _text(" world", True), _text("Hello world", False)]

    result = AgentTestClient(_app(ScriptedLlm(model="scripted", script=script))).run("hi")

    assert result.text() == "Hello world"
    assert result.outcome.kind == "finished"


def test_backend_tools_called_in_parallel_are_valid() -> None:
    """Two calls in one response, executed by ADK: both results, then the answer."""
    script = [_calls(("call-a", "get_weather", {"city": "Paris"}), ("call-b", "get_weather", {}))]
    llm = ScriptedLlm(model="scripted", script=script)

    result = AgentTestClient(_app(llm, [get_weather])).run("weather?")

    assert [("get_weather", {"city": "Paris"}), ("get_weather", {})] == [
        (c.name, c.arguments) for c in result.tool_calls
    ]
    assert result.tool_calls[0].result == '{"result": "sunny in Paris"}'
    assert result.text() == "Done."


def test_a_frontend_tool_call_is_left_for_the_ui() -> None:
    """A tool from RunAgentInput.tools (through AGUIToolset) ends the run unanswered."""
    script = [_calls(("call-ui", "confirm", {"title": "milk"}))]
    llm = ScriptedLlm(model="scripted", script=script)

    result = AgentTestClient(_app(llm, [AGUIToolset()])).run("add milk", tools=TOOLS)

    assert [("confirm", {"title": "milk"}, None)] == [
        (c.name, c.arguments, c.result) for c in result.tool_calls
    ]


def test_the_ui_state_comes_back_with_the_middlewares_own_keys() -> None:
    """Valid, but the STATE_SNAPSHOT sent to the UI carries ADK's bookkeeping keys
    (``_ag_ui_thread_id``, ``_ag_ui_app_name``, ``_ag_ui_user_id``) next to its state."""
    llm = ScriptedLlm(model="scripted", script=[_text("ok")])

    result = AgentTestClient(_app(llm)).run("hi", state={"items": ["eggs"]})

    assert result.state["items"] == ["eggs"]
    assert {"_ag_ui_thread_id", "_ag_ui_app_name", "_ag_ui_user_id"} <= set(result.state)


def test_a_model_error_ends_the_run_with_run_error() -> None:
    """An exception in the model becomes RUN_ERROR: a valid end."""
    llm = ScriptedLlm(model="scripted", fail="model unavailable")

    result = AgentTestClient(_app(llm)).run("hi")

    assert result.outcome.kind == "error"
    assert "model unavailable" in (result.outcome.message or "")
