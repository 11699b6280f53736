"""
The pytest plugin, run the way a user's suite runs it: in a ``pytester`` sandbox.

Installed, aguikit registers the plugin through its ``pytest11`` entry point; a checkout
run from ``src/`` without the entry point in its installed metadata loads it with ``-p``
instead, so the same tests run in both.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parent.parent

LOADED_BY_ENTRY_POINT = any(
    ep.value == "aguikit.pytest_plugin" for ep in entry_points(group="pytest11")
)
PLUGIN_ARGS: list[str] = [] if LOADED_BY_ENTRY_POINT else ["-p", "aguikit.pytest_plugin"]

AGENT = """
from aguikit.server import create_app

WORDS = {words!r}


async def agent(run_input, run):
    async with run.text_message() as message:
        for word in WORDS:
            await message.write(word)
    call = await run.call_tool("lookup", {{"q": "x"}})
    await run.tool_result(call, "found")
    await run.set_state({{"done": True}})


app = create_app(agent)


def test_golden(agui_client, agui_trace):
    result = agui_client(app).run("hello")
    agui_trace.check(result, "greeting", rechunk={rechunk})
"""


def _agent(pytester: pytest.Pytester, words: list[str], rechunk: bool = False) -> None:
    pytester.makepyfile(test_scripted_agui_agent=AGENT.format(words=words, rechunk=rechunk))


def test_snapshot_ids_are_placeholders_too() -> None:
    """Message and tool-call ids that first appear in a MESSAGES_SNAPSHOT (a user message
    the test client made up) are mapped like streamed ones, so the trace is stable."""
    from aguikit.pytest_plugin import normalise_trace
    from aguikit.testing import assert_valid_stream

    def run(user_id: str, call_id: str) -> list[dict[str, Any]]:
        call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages = [
            {"id": user_id, "role": "user", "content": "hi"},
            {"id": "a-" + user_id, "role": "assistant", "toolCalls": [call]},
        ]
        return [
            {"type": "RUN_STARTED", "threadId": "t-" + user_id, "runId": "r"},
            {"type": "MESSAGES_SNAPSHOT", "messages": messages},
            {"type": "RUN_FINISHED", "threadId": "t-" + user_id, "runId": "r"},
        ]

    first = normalise_trace(assert_valid_stream(run("u1", "c1")))

    assert first == normalise_trace(assert_valid_stream(run("u2", "c2")))
    snapshot = first[1]["messages"]
    assert ["<message-1>", "<message-2>"] == [m["id"] for m in snapshot]
    assert "<tool-call-1>" == snapshot[1]["toolCalls"][0]["id"]


def test_loading_the_plugin_loads_no_stage_of_aguikit() -> None:
    """Every pytest run of an environment with aguikit loads the plugin: it must cost the
    package facade's eager errors only, not the testing helpers or the pipeline."""
    code = (
        "import sys, aguikit.pytest_plugin\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('aguikit'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )

    loaded = set(done.stdout.split())
    assert {"aguikit", "aguikit.pytest_plugin"} <= loaded
    assert set() == loaded - {
        "aguikit",
        "aguikit.pytest_plugin",
        "aguikit.errors",
        "aguikit.catalogue",
    }


def test_the_entry_point_is_declared() -> None:
    """Installing aguikit is enough: pyproject registers the plugin with pytest."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

    assert {"aguikit": "aguikit.pytest_plugin"} == project["project"]["entry-points"]["pytest11"]


def test_a_golden_trace_is_recorded_then_checked_then_diffed(pytester: pytest.Pytester) -> None:
    """Missing: a failure naming the option; recorded with --agui-update-traces; the same
    behaviour passes again; changed text fails with a unified diff."""
    _agent(pytester, ["Hi", " there"])

    missing = pytester.runpytest(*PLUGIN_ARGS)
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(["*no AG-UI trace*--agui-update-traces*"])

    pytester.runpytest(*PLUGIN_ARGS, "--agui-update-traces").assert_outcomes(passed=1)
    trace = (pytester.path / "agui_traces" / "greeting.jsonl").read_text()
    assert '"threadId": "<thread-1>"' in trace
    assert '"toolCallId": "<tool-call-1>"' in trace
    assert "timestamp" not in trace

    pytester.runpytest(*PLUGIN_ARGS).assert_outcomes(passed=1)

    _agent(pytester, ["Bye"])
    changed = pytester.runpytest(*PLUGIN_ARGS)
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        ["*AG-UI trace 'greeting' differs*", '-*"delta": "Hi"*', '+*"delta": "Bye"*']
    )


def test_rechunk_ignores_how_the_text_was_split(pytester: pytest.Pytester) -> None:
    """With rechunk=True a trace pins the text, not the producer's chunking."""
    _agent(pytester, ["Hi", " there"], rechunk=True)
    pytester.runpytest(*PLUGIN_ARGS, "--agui-update-traces").assert_outcomes(passed=1)

    _agent(pytester, ["H", "i t", "here"], rechunk=True)

    pytester.runpytest(*PLUGIN_ARGS).assert_outcomes(passed=1)


def test_comparing_two_results_shows_what_differs(pytester: pytest.Pytester) -> None:
    """assert a == b on RunResults names the state and outcome that differ."""
    pytester.makepyfile(
        test_compare="""
from aguikit.testing import assert_valid_stream

def run(state, end):
    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": state},
        end,
    ]

def test_compare():
    finished = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
    left = assert_valid_stream(run({"n": 1}, finished))
    right = assert_valid_stream(run({"n": 2}, {"type": "RUN_ERROR", "message": "boom"}))
    assert left == right
"""
    )

    result = pytester.runpytest(*PLUGIN_ARGS)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*RunResult differs:*", "*outcome:*", "*kind='finished'*", "*state:*", "*{'n': 1}*"]
    )


def test_the_client_fixture_is_a_factory(pytester: pytest.Pytester) -> None:
    """agui_client(app, **options) passes its options to AgentTestClient."""
    pytester.makepyfile(
        test_factory="""
from aguikit.server import create_app

async def agent(run_input, run):
    await run.set_state({"ok": True})

def test_it(agui_client):
    client = agui_client(create_app(agent, path="/agent"), path="/agent", strict=True)
    assert {"ok": True} == client.run().state
"""
    )

    pytester.runpytest(*PLUGIN_ARGS).assert_outcomes(passed=1)


FAILING = """
import asyncio

import pytest

from aguikit.testing import ScriptedAgent, assert_valid_stream

BROKEN = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]


def test_run(agui_client):
    agui_client(ScriptedAgent(BROKEN)).run("hi")


def test_conversation(agui_client):
    agui_client(ScriptedAgent(BROKEN)).conversation().run("hi")


def test_run_inside_a_running_loop(agui_client):
    async def main():
        agui_client(ScriptedAgent(BROKEN)).run("hi")

    asyncio.run(main())


@pytest.mark.anyio
async def test_arun(agui_client):
    await agui_client(ScriptedAgent(BROKEN)).arun("hi")


def test_assert_valid_stream():
    assert_valid_stream(BROKEN)
"""


ANYIO_ON_ASYNCIO = """
import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


def test_a_failing_stream_is_reported_by_its_assertion_alone(pytester: pytest.Pytester) -> None:
    """
    A failing ``agui_client`` test (sync, in a conversation, inside a running loop, async)
    or ``assert_valid_stream`` shows the test's line and the verdict: no ``RuntimeError: no
    running event loop`` chained ahead of it, and none of the kit's own frames.
    """
    pytester.makepyfile(test_failing_agui=FAILING)
    pytester.makeconftest(ANYIO_ON_ASYNCIO)

    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-p", "anyio")
    # The failures as shown, without the closing summary (whose width, and so whether it
    # repeats each message, depends on the terminal the suite runs in).
    out = result.stdout.str().split(" short test summary info ")[0]

    result.assert_outcomes(failed=5)
    assert 5 == out.count("E       AssertionError: AG-UI stream ")
    assert 5 == out.count("E         - event 4 TOOL_CALL_ARGS")
    assert 5 == out.count("AGUI-V014 at /toolCallId: TOOL_CALL_ARGS: No active tool call")
    assert "no running event loop" not in out
    assert "During handling of the above exception" not in out
    assert [] == [line for line in out.splitlines() if "aguikit" in line and ".py:" in line]
    # The event loop the kit runs is not shown either (the test that runs its own is).
    sections = re.split(r"_{3,} (test_\w+) _{3,}", out)
    shown = dict(zip(sections[1::2], sections[2::2], strict=True))
    assert 5 == len(shown)
    assert ["test_run_inside_a_running_loop"] == [
        t for t, text in shown.items() if "asyncio" in text
    ]
