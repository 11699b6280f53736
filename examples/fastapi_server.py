"""
A minimal AG-UI agent served over SSE with Starlette (FastAPI works the same way).

Run it and point aguikit at it::

    pip install starlette uvicorn
    python examples/fastapi_server.py            # serves http://127.0.0.1:8000/agent
    aguikit check http://127.0.0.1:8000/agent    # in another terminal
    aguikit replay http://127.0.0.1:8000/agent
    curl http://127.0.0.1:8000/agent/capabilities  # what it declares it can do

The agent parses the request with :func:`aguikit.wire.parse_run_agent_input`, builds typed
events and writes each with :func:`aguikit.encode.encode_sse`, which produces the same
bytes as the official SDK's ``EventEncoder``.  With FastAPI, return the same
``StreamingResponse`` from a ``@app.post`` handler, and register the capabilities with
``app.get("/agent/capabilities")(capabilities_endpoint(CAPABILITIES))``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from aguikit import models as m
from aguikit.encode import encode_sse as encode
from aguikit.errors import AguiError
from aguikit.server import capabilities_endpoint
from aguikit.transport.sse import MEDIA_TYPE
from aguikit.wire import parse_run_agent_input

CAPABILITIES = m.AgentCapabilities(
    identity=m.IdentityCapabilities(
        name="echo", type="starlette", description="Answers by repeating the question."
    ),
    transport=m.TransportCapabilities(streaming=True, http_binary=False, resumable=False),
    tools=m.ToolsCapabilities(supported=False),
    state=m.StateCapabilities(snapshots=True, deltas=False),
)
"""Checked against the schema by ``capabilities_endpoint`` when the app is built."""


async def _answer(thread_id: str, run_id: str, question: str) -> AsyncIterator[str]:
    yield encode(m.RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version="1.0"))
    yield encode(
        m.TextMessageStartEvent(message_id=f"{run_id}-m1", role=m.TextMessageRole("assistant"))
    )
    for word in f"You asked: {question or 'nothing yet'}. Here is my answer.".split(" "):
        await asyncio.sleep(0.02)  # a model producing tokens
        yield encode(m.TextMessageContentEvent(message_id=f"{run_id}-m1", delta=word + " "))
    yield encode(m.TextMessageEndEvent(message_id=f"{run_id}-m1"))
    yield encode(m.StateSnapshotEvent(snapshot={"answered": True}))
    yield encode(m.RunFinishedEvent(thread_id=thread_id, run_id=run_id))


async def agent(request: Request) -> Response:
    try:
        run_input = parse_run_agent_input(await request.json())
    except (AguiError, ValueError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=422)
    question = ""
    for message in reversed(run_input.messages):
        if message.role == "user" and isinstance(message.content, str):
            question = message.content
            break
    return StreamingResponse(
        _answer(run_input.thread_id, run_input.run_id, question),
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache"},
    )


app = Starlette(
    routes=[
        Route("/agent", agent, methods=["POST"]),
        Route("/agent/capabilities", capabilities_endpoint(CAPABILITIES), methods=["GET"]),
    ]
)

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
