"""
The example agent server (``examples/weather_todo_server.py``) on a real uvicorn, consumed
by the official TypeScript client and by ``AgentClient``; and the writer's modes judged
by the TypeScript client: a repaired stream it accepts, the unrepaired one it rejects.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.node_client import run_http_agent
from tests.servers import serve_asgi
from tests.test_server_writer import faulty

from aguikit.client import AgentClient
from aguikit.models import RunAgentInput
from aguikit.server import RunWriter, create_app

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "weather_todo_server.py"

QUESTION: dict[str, Any] = {
    "threadId": "t1",
    "messages": [
        {"id": "u1", "role": "user", "content": "What is the weather in Paris? Add a todo."}
    ],
    "state": {"todos": []},
    "tools": [
        {
            "name": "confirm_todo",
            "description": "Ask the user to confirm a new todo",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
        }
    ],
}


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("weather_todo_server", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_typescript_client_runs_the_example_to_the_expected_conversation() -> None:
    """Text, a backend tool and its result, state, a subagent and a frontend tool, then a
    second run after the UI answered the frontend tool."""
    with serve_asgi(_example().app) as url:
        out = run_http_agent(url + "/agent", {**QUESTION, "answerFrontendTool": "confirmed"})

    messages = out["messages"]
    assert [{"result": None}, {"result": None}] == out["runs"]
    assert [
        "user",
        "reasoning",
        "assistant",
        "tool",
        "assistant",
        "assistant",
        "assistant",
        "tool",
        "assistant",
    ] == [m["role"] for m in messages]
    assert "Let me check the weather in Paris. " == messages[2]["content"]
    assert "get_weather" == messages[2]["toolCalls"][0]["function"]["name"]
    assert '{"city":"Paris","sky":"light rain","celsius":14}' == messages[3]["content"]
    assert "subagentRunId" in messages[4]
    assert "It's light rain and 14°C in Paris. I added a todo." == messages[5]["content"]
    assert "confirm_todo" == messages[6]["toolCalls"][0]["function"]["name"]
    assert "Thanks, noted: confirmed. Your list is up to date." == messages[8]["content"]
    assert {"todos": [{"title": "Pack an umbrella", "done": False}], "city": "Paris"} == (
        out["state"]
    )


def test_agent_client_runs_the_example_to_the_same_conversation() -> None:
    """aguikit's own client ends with the same messages and state."""
    body = {**QUESTION, "runId": "r1"}
    with serve_asgi(_example().app) as url:
        client = AgentClient(url + "/agent")
        list(client.run_sync(body))

    session = client.session
    assert ["reasoning", "assistant", "tool", "assistant", "assistant", "assistant"] == [
        m.role for m in session.messages
    ]
    assert "It's light rain and 14°C in Paris. I added a todo." == session.messages[4].content
    assert {"todos": [{"title": "Pack an umbrella", "done": False}], "city": "Paris"} == (
        session.state
    )
    assert [] == session.warnings


async def _faulty_handler(run_input: RunAgentInput, run: RunWriter) -> None:
    await faulty(run)


@pytest.mark.parametrize(
    ("mode", "accepted"), [("repair", True), ("audit", False), ("strict", True)]
)
def test_the_typescript_client_judges_each_mode_on_one_faulty_handler(
    mode: str, accepted: bool
) -> None:
    """repair: the TS client accepts the repaired stream; audit: the same handler's
    unrepaired stream is rejected; strict: the run ends with RUN_ERROR naming the rule."""
    with serve_asgi(create_app(_faulty_handler, mode=mode)) as url:
        out = run_http_agent(url + "/", {"threadId": "t1", "messages": []})

    run = out["runs"][0]
    if mode == "repair":
        assert {"result": None} == run
        assert "sunny" == out["messages"][-1]["content"]
    elif mode == "audit":
        assert "Cannot send 'RUN_FINISHED' while text messages are still active: m1" == run["error"]
    else:
        assert "AGUI-V015" == run["runError"]["code"]
    assert accepted == ("error" not in run)
