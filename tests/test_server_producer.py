"""
What a handler hands the endpoint, judged by the official TypeScript client
(``@ag-ui/client`` 1.0.0 ``HttpAgent`` in Node) against a real uvicorn: a terminal event
sent by hand ends the run in every mode, an exception reaches the client as a private
``RUN_ERROR``, and the README's endpoint written for the official Python SDK, ported to
aguikit, gives the client the same conversation as the original.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.node_client import run_http_agent
from tests.servers import serve_asgi

from aguikit.errors import ProtocolError
from aguikit.models import RunAgentInput
from aguikit.server import RunWriter, create_app

README = Path(__file__).resolve().parent.parent / "README.md"
HELLO = {
    "threadId": "t1",
    "messages": [{"id": "u1", "role": "user", "content": "hello"}],
}


def _ends_by_hand(terminal: str) -> Any:
    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        await run.say("done early")
        if terminal == "RUN_FINISHED":
            ending = {"type": terminal, "threadId": run_input.thread_id, "runId": run_input.run_id}
        else:
            ending = {"type": terminal, "message": "The quota is used up.", "code": "QUOTA"}
        await run.emit(ending)
        with contextlib.suppress(ProtocolError):  # raises: the run already ended
            await run.say("too late")

    return handler


@pytest.mark.parametrize("mode", ["strict", "repair", "audit"])
def test_the_official_client_sees_a_hand_sent_run_finished_end_the_run(mode: str) -> None:
    """The handler's own RUN_FINISHED is the last event (before, strict added RUN_ERROR
    AGUI-V003 and audit a second RUN_FINISHED, both rejected by the client)."""
    with serve_asgi(create_app(_ends_by_hand("RUN_FINISHED"), mode=mode, event_log=None)) as url:
        out = run_http_agent(url + "/", HELLO)

    assert [{"result": None}] == out["runs"]
    assert "done early" == out["messages"][-1]["content"]


@pytest.mark.parametrize("mode", ["strict", "repair", "audit"])
def test_the_official_client_sees_a_hand_sent_run_error_end_the_run(mode: str) -> None:
    """The handler's own RUN_ERROR, with its message and code, and nothing after it."""
    with serve_asgi(create_app(_ends_by_hand("RUN_ERROR"), mode=mode, event_log=None)) as url:
        out = run_http_agent(url + "/", HELLO)

    (run,) = out["runs"]
    assert "error" not in run
    assert ("The quota is used up.", "QUOTA") == (
        run["runError"]["message"],
        run["runError"]["code"],
    )


async def _raises(run_input: RunAgentInput, run: RunWriter) -> None:
    await run.say("thinking")
    raise RuntimeError("postgres://admin:hunter2@db.internal/agents is down")


def test_the_official_client_gets_a_generic_run_error_for_an_exception() -> None:
    """A stable code, a generic message; the exception's text stays on the server."""
    with serve_asgi(create_app(_raises, event_log=None)) as url:
        out = run_http_agent(url + "/", HELLO)

    (run,) = out["runs"]
    assert "AGUI-E020" == run["runError"]["code"]
    assert "The agent failed; the server logged the details." == run["runError"]["message"]
    assert "hunter2" not in str(out)


# -- the README's port from the official SDK -----------------------------------------------


def _readme_port() -> tuple[str, str]:
    """The two sides of the README's ``diff`` block: the SDK endpoint and its port."""
    text = README.read_text(encoding="utf-8")
    (diff,) = re.findall(r"```diff\n(.*?)```", text, re.DOTALL)
    lines = diff.splitlines()
    before = "\n".join(line[1:] for line in lines if line[:1] in (" ", "-", ""))
    after = "\n".join(line[1:] for line in lines if line[:1] in (" ", "+", ""))
    return before, after


def _module(code: str, name: str) -> ModuleType:
    module = ModuleType(name)
    exec(compile(code, f"{README} ({name})", "exec"), module.__dict__)
    return module


def test_the_readme_port_changes_the_import_and_the_route_and_nothing_else() -> None:
    """The generator is the same text on both sides of the diff."""
    before, after = _readme_port()

    def generator(code: str) -> str:
        return code[code.index("async def agent(") : code.index("app = FastAPI()")]

    assert generator(before) == generator(after)
    assert "EventEncoder" in before and "StreamingResponse" in before
    assert "EventEncoder" not in after and "agui_endpoint(agent)" in after


def test_the_sdk_endpoint_and_its_port_give_the_official_client_the_same_conversation() -> None:
    """Both sides of the README's diff, served by uvicorn and run by HttpAgent."""
    pytest.importorskip("ag_ui.encoder")
    before, after = _readme_port()
    outcomes = []
    for code, name in ((before, "sdk_endpoint"), (after, "aguikit_port")):
        with serve_asgi(_module(code, name).app) as url:
            outcomes.append(run_http_agent(url + "/agent", HELLO))

    def conversation(out: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(m["role"], m.get("content")) for m in out["messages"]]

    sdk, port = outcomes
    assert [{"result": None}] == sdk["runs"] == port["runs"]
    assert [("user", "hello"), ("assistant", "You said: hello")] == conversation(port)
    assert conversation(sdk) == conversation(port)


def _ported_with_a_bug() -> Any:
    """The README's generator, but with content for a message it never started."""
    core = pytest.importorskip("ag_ui.core")

    async def agent(input_data: core.RunAgentInput) -> Any:
        yield core.RunStartedEvent(thread_id=input_data.thread_id, run_id=input_data.run_id)
        yield core.TextMessageContentEvent(message_id="never-started", delta="hi")
        yield core.RunFinishedEvent(thread_id=input_data.thread_id, run_id=input_data.run_id)

    return agent


@pytest.mark.parametrize(
    ("mode", "seen"),
    [
        ("strict", {"runError": "AGUI-V012"}),
        ("audit", {"error": "No active text message found with ID 'never-started'"}),
    ],
)
def test_a_ported_generator_is_checked_in_the_endpoints_mode(
    mode: str, seen: dict[str, str]
) -> None:
    """strict: the refusal ends the run with RUN_ERROR naming the rule; audit: the event
    goes out as yielded, and the official client rejects the stream itself."""
    with serve_asgi(create_app(_ported_with_a_bug(), mode=mode, event_log=None)) as url:
        (run,) = run_http_agent(url + "/", HELLO)["runs"]

    if "runError" in seen:
        assert seen["runError"] == run["runError"]["code"]
    else:
        assert seen["error"] in run["error"]
