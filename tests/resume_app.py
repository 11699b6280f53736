"""
The agent the resume tests cut connections to: deterministic (ids derived from the run
id, no clock), long enough to be cut many times, slow enough that a cut lands mid-run.

Served by ``uvicorn tests.resume_app:app`` in the two-worker test, with the Redis event
log named by ``AGUIKIT_TEST_REDIS``; the in-process tests build it with any log.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from starlette.applications import Starlette

from aguikit.server import RunAgentInput, RunWriter, create_app
from aguikit.server.eventlog import EventLog

TURNS = 8


async def scripted(run_input: RunAgentInput, run: RunWriter) -> None:
    """Text streamed word by word, a tool call with streamed arguments, state deltas."""
    rid = run_input.run_id
    pause = float(os.environ.get("AGUIKIT_TEST_PAUSE", "0.002"))
    for turn in range(TURNS):
        mid = f"{rid}-m{turn}"
        await run.emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        for word in range(6):
            await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"w{word} "})
            await asyncio.sleep(pause)
        await run.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
        call = f"{rid}-c{turn}"
        await run.emit(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call,
                "toolCallName": "lookup",
                "parentMessageId": mid,
            }
        )
        for piece in ('{"turn": ', str(turn), ', "q": "x', 'yz"}'):
            await run.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": piece})
            await asyncio.sleep(pause)
        await run.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        await run.set_state({"turn": turn, "seen": list(range(turn + 1))})


def make_app(event_log: EventLog | None) -> Starlette:
    return create_app(scripted, path="/agent", event_log=event_log)


def _from_env() -> Any:
    url = os.environ.get("AGUIKIT_TEST_REDIS")
    if not url:
        return None
    from aguikit.server.redis_log import RedisEventLog

    return make_app(RedisEventLog.from_url(url))


app = _from_env()
