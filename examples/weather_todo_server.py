"""
A scripted "weather + todo list" agent served with aguikit.server, no LLM needed.

It streams text, calls a backend tool (the weather), updates shared state (the todo list),
runs a subagent (a packing assistant) and asks the frontend to run a tool
(``confirm_todo``); when the frontend answers, the next run acknowledges it::

    pip install 'aguikit[server]' uvicorn
    python examples/weather_todo_server.py         # http://127.0.0.1:8000/agent
    aguikit replay http://127.0.0.1:8000/agent     # in another terminal
    curl http://127.0.0.1:8000/agent/capabilities  # what it declares it can do
"""

from __future__ import annotations

import asyncio
import json
import re

from aguikit.server import EventWriter, RunAgentInput, RunWriter, create_app

CAPABILITIES = {
    # What this agent declares, served at GET /agent/capabilities and checked against the
    # AgentCapabilities schema when the app is built.  Only what it really does: a member
    # left out means "not declared".
    "identity": {
        "name": "weather-todo",
        "type": "aguikit",
        "description": "Checks the weather and keeps a todo list of what to bring.",
        "version": "1.0.0",
    },
    # create_app adds "resumable": false (each run ends with its connection, the standard
    # binding); with event_log=MemoryEventLog() it would say true (docs/resume.md).
    "transport": {"streaming": True, "httpBinary": True},
    "tools": {
        "supported": True,
        "items": [
            {
                "name": "get_weather",
                "description": "The forecast for a city: sky and temperature.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            }
        ],
        "parallelCalls": False,
        "clientProvided": True,  # it calls the frontend's confirm_todo when offered
    },
    "state": {"snapshots": True, "deltas": True, "persistentState": False},
    "multiAgent": {
        "supported": True,
        "delegation": True,
        "subagents": [{"name": "packing-assistant", "description": "Suggests what to pack"}],
    },
    "reasoning": {"supported": True, "streaming": True},
    "humanInTheLoop": {"supported": True, "approvals": True, "interrupts": False},
}

FORECASTS = {"paris": ("light rain", 14), "lyon": ("sunny", 22), "oslo": ("snow", -3)}


def last_user_text(run_input: RunAgentInput) -> str:
    for message in reversed(run_input.messages):
        if message.role == "user" and isinstance(message.content, str):
            return message.content
    return ""


async def get_weather(city: str) -> dict[str, object]:
    """The backend tool: a real agent would call a weather API here."""
    await asyncio.sleep(0.01)
    sky, celsius = FORECASTS.get(city.lower(), ("cloudy", 15))
    return {"city": city, "sky": sky, "celsius": celsius}


async def stream_words(run: EventWriter, text: str) -> str:
    """Stream ``text`` word by word, as a model would; returns the message id."""
    async with run.text_message() as message:
        for word in re.findall(r"\S+\s*", text):
            await message.write(word)
    return message.id


async def call_streaming(
    run: EventWriter, name: str, arguments: dict[str, object], *, parent_message_id: str
) -> str:
    """
    A tool call whose JSON arguments arrive four characters at a time, as a model streams
    them (``TOOL_CALL_ARGS`` per piece: a client parses them while they stream), tied to
    the assistant message that announced it; returns the call's id.
    """
    text = json.dumps(arguments)
    async with run.tool_call(name, parent_message_id=parent_message_id) as call:
        for start in range(0, len(text), 4):
            await call.args(text[start : start + 4])
    return call.id


async def agent(run_input: RunAgentInput, run: RunWriter) -> None:
    state = dict(run_input.state) if isinstance(run_input.state, dict) else {}
    todos = list(state.get("todos", []))
    last = run_input.messages[-1] if run_input.messages else None
    if last is not None and last.role == "tool":  # the frontend answered confirm_todo
        await stream_words(run, f"Thanks, noted: {last.content}. Your list is up to date.")
        return

    question = last_user_text(run_input)
    match = re.search(r"in ([A-Z][a-z]+)", question)
    city = match.group(1) if match else "Paris"

    async with run.step("plan"), run.reasoning() as thinking:
        await thinking.think(f"The user asks about {city}; check the weather, then the list.")

    said = await stream_words(run, f"Let me check the weather in {city}. ")
    call = await call_streaming(run, "get_weather", {"city": city}, parent_message_id=said)
    forecast = await get_weather(city)
    await run.tool_result(call, forecast)

    await run.set_state({**state, "todos": todos, "city": city})
    if forecast["sky"] in ("light rain", "snow"):
        todos.append({"title": "Pack an umbrella", "done": False})
        await run.set_state({**state, "todos": todos, "city": city})

    async with run.subagent("packing-assistant", description="Suggests what to pack") as helper:
        await stream_words(helper, f"For {forecast['sky']} at {forecast['celsius']}°C: layers.")
        helper.result = {"items": ["layers", "umbrella"]}

    await stream_words(
        run, f"It's {forecast['sky']} and {forecast['celsius']}°C in {city}. I added a todo."
    )
    if any(tool.name == "confirm_todo" for tool in run_input.tools or []):
        await run.call_tool("confirm_todo", {"title": todos[-1]["title"] if todos else "none"})


app = create_app(agent, path="/agent", capabilities=CAPABILITIES)

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
