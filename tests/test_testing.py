"""
``aguikit.testing``: the assertion, the result, the in-process test client and the
scripted agent with its faults, against aguikit's client and the official TypeScript one.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunFinishedEvent as SdkRunFinished
from ag_ui.core import RunStartedEvent as SdkRunStarted
from tests.node_client import run_http_agent
from tests.servers import serve_asgi
from tests.support import (
    jsonl_bytes,
    run_error,
    run_finished,
    run_input,
    run_started,
    sse_bytes,
    state_delta,
    state_snapshot,
    text_message,
    tool_call_args,
    tool_call_end,
    tool_call_result,
    tool_call_start,
    typed,
)

from aguikit.client import AgentClient
from aguikit.errors import (
    ContentTypeError,
    DecodeError,
    HTTPStatusError,
    TruncatedStreamError,
)
from aguikit.models import RunAgentInput
from aguikit.server import MemoryEventLog, RunWriter, create_app
from aguikit.testing import (
    AgentTestClient,
    ContentType,
    Cut,
    CutMidFrame,
    Delay,
    Garbage,
    ScriptedAgent,
    Stall,
    Status,
    assert_valid_stream,
    judge_stream,
)
from aguikit.transport.asgi import ASGIStreamTransport
from aguikit.wire import parse_message

GOOD: list[dict[str, Any]] = [
    run_started(),
    *text_message("m1", "Hel", "lo"),
    tool_call_start("c1", "lookup", parentMessageId="m1"),
    tool_call_args("c1", '{"city":'),
    tool_call_args("c1", '"Paris"}'),
    tool_call_end("c1"),
    tool_call_result("c1", "m2", "sunny"),
    state_snapshot({"step": 1}),
    state_delta([{"op": "replace", "path": "/step", "value": 2}]),
    run_finished(),
]

BAD: list[dict[str, Any]] = [
    run_started(),
    tool_call_start("c1", "lookup"),
    tool_call_end("c1"),
    tool_call_args("c1", "{}"),
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": 5, "delta": "x"},
    run_finished(),
]


def _message(error: pytest.ExceptionInfo[AssertionError]) -> str:
    return str(error.value)


# --- assert_valid_stream and RunResult ----------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["wire", "typed", "sse-bytes", "sse-text", "jsonl-bytes", "path-sse", "path-jsonl"]
)
def test_a_valid_stream_in_any_form_gives_the_same_result(kind: str, tmp_path: Path) -> None:
    """Every form of the same stream folds into the same messages, state and outcome."""
    sources: dict[str, Any] = {
        "wire": GOOD,
        "typed": [typed(e) for e in GOOD],
        "sse-bytes": sse_bytes(GOOD),
        "sse-text": sse_bytes(GOOD).decode(),
        "jsonl-bytes": jsonl_bytes(GOOD),
    }
    if kind.startswith("path"):
        suffix = ".sse" if kind == "path-sse" else ".jsonl"
        path = tmp_path / f"stream{suffix}"
        path.write_bytes(sse_bytes(GOOD) if suffix == ".sse" else jsonl_bytes(GOOD))
        sources[kind] = path

    result = assert_valid_stream(sources[kind])

    assert "Hello" == result.text()
    assert {"step": 2} == result.state
    assert "finished" == result.outcome.kind
    assert [("c1", "lookup", {"city": "Paris"}, "sunny")] == [
        (c.id, c.name, c.arguments, c.result) for c in result.tool_calls
    ]
    assert len(GOOD) == len(result.events)
    assert result == assert_valid_stream(GOOD)
    assert (kind not in ("wire", "typed")) == (result.raw is not None)


def test_official_sdk_events_are_accepted() -> None:
    """``ag_ui.core`` models are judged through their wire form."""
    result = assert_valid_stream(
        [SdkRunStarted(thread_id="t1", run_id="r1"), SdkRunFinished(thread_id="t1", run_id="r1")]
    )

    assert "finished" == result.outcome.kind


def test_the_assertion_names_every_problem_with_rule_event_type_and_field() -> None:
    """An ordering error and a schema error each get a line: rule, 1-based number, type,
    the field, and for SSE bytes the frame and line."""
    with pytest.raises(AssertionError) as error:
        assert_valid_stream(sse_bytes(BAD))

    text = _message(error)
    assert "2 problems" in text
    assert "event 4 TOOL_CALL_ARGS (SSE frame 4, line 7): AGUI-V014" in text
    assert "event 5 TEXT_MESSAGE_CONTENT (SSE frame 5, line 9): AGUI-S001" in text
    assert "at /messageId" in text


def test_jsonl_problems_name_the_line() -> None:
    """JSONL input locates each event by its line."""
    with pytest.raises(AssertionError) as error:
        assert_valid_stream(b"\n" + jsonl_bytes(BAD))

    assert "event 4 TOOL_CALL_ARGS (JSONL line 5): AGUI-V014" in _message(error)


def test_a_truncated_stream_fails_naming_the_run() -> None:
    """A run that never ends is a failure (AGUI-V006), located at the end of the stream."""
    with pytest.raises(AssertionError) as error:
        assert_valid_stream(GOOD[:-1])

    assert f"stream end (after event {len(GOOD) - 1}): AGUI-V006" in _message(error)


def test_bytes_that_do_not_decode_name_the_frame() -> None:
    """A frame that is not JSON is reported with its decode rule and frame."""
    with pytest.raises(AssertionError) as error:
        assert_valid_stream(sse_bytes(GOOD[:2]) + b"data: {nope\n\n")

    assert "AGUI-D002" in _message(error)
    assert "frame 3" in _message(error)


def test_warnings_fail_only_in_strict_mode() -> None:
    """A newer protocol version is tolerated with a warning; strict makes it a failure."""
    events = [run_started(protocolVersion="9.9"), run_finished()]

    result = assert_valid_stream(events)
    assert ["protocol-version-newer"] == [w.code for w in result.warnings]
    with pytest.raises(AssertionError) as error:
        assert_valid_stream(events, strict=True)
    assert "event 1 RUN_STARTED: warning AGUI-W007" in _message(error)


def test_an_undeclared_member_is_a_schema_problem() -> None:
    """As with ``aguikit check``, a member the schema does not declare is reported."""
    with pytest.raises(AssertionError) as error:
        assert_valid_stream([run_started(futureProp=1), run_finished()])

    assert "event 1 RUN_STARTED: AGUI-S001 [unevaluatedProperties] at /" in _message(error)


def test_judge_stream_reports_without_raising() -> None:
    """judge_stream returns the problems for a test that asserts on them."""
    result = judge_stream(BAD)

    assert not result.ok
    assert ["AGUI-V014", "AGUI-S001"] == [re.findall(r"AGUI-\w+", p)[0] for p in result.problems]


def test_the_check_goes_on_after_an_error_as_aguikit_check_does() -> None:
    """Each independent error is reported, not only the first; a later one that may follow
    from an earlier error says which event it may be a consequence of."""
    events = [
        run_started(),
        tool_call_end("c9"),
        *text_message("m1", "a"),
        tool_call_args("c8", "{}"),
        run_finished(),
    ]

    problems = judge_stream(events).problems

    assert 2 == len(problems), problems
    assert problems[0].startswith("event 2 TOOL_CALL_END: AGUI-V014")
    assert problems[1].startswith("event 6 TOOL_CALL_ARGS: AGUI-V014")
    assert "consequence of event 2" in problems[1]


def test_the_conversation_before_the_run_is_known_to_the_checker() -> None:
    """A result for a call made in an earlier turn is not a call never started (K001)."""
    earlier = parse_message(
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )
    events = [run_started(), tool_call_result("c0", "m2", "done"), run_finished()]

    assert judge_stream(events, messages=[earlier]).ok
    assert ["AGUI-K001"] == [re.findall(r"AGUI-\w+", p)[0] for p in judge_stream(events).problems]


def test_a_json_array_is_read_as_aguikit_check_reads_it() -> None:
    """The command's reader, so a JSON array of events is a stream too, located by line."""
    result = assert_valid_stream(json.dumps(GOOD, indent=1).encode())

    assert "finished" == result.outcome.kind
    with pytest.raises(AssertionError, match=r"event 4 TOOL_CALL_ARGS \(line \d+\): AGUI-V014"):
        assert_valid_stream(json.dumps(BAD, indent=1).encode())


def test_outcomes_error_interrupted_cancelled() -> None:
    """RUN_ERROR gives message and code; interrupt and cancelled outcomes are named."""
    failed = assert_valid_stream([run_started(), run_error("boom", code="E1")])
    interrupt = {"id": "i1", "reason": "approval"}
    paused = assert_valid_stream(
        [run_started(), run_finished(outcome={"type": "interrupt", "interrupts": [interrupt]})]
    )
    cancelled = assert_valid_stream([run_started(), run_finished(outcome={"type": "cancelled"})])

    assert ("error", "boom", "E1") == (
        failed.outcome.kind,
        failed.outcome.message,
        failed.outcome.code,
    )
    assert "interrupted" == paused.outcome.kind
    assert ["i1"] == [i.id for i in paused.outcome.interrupts]
    assert "cancelled" == cancelled.outcome.kind


# --- AgentTestClient ------------------------------------------------------------------------


async def _echo(run_input: RunAgentInput, run: RunWriter) -> None:
    async with run.text_message() as message:
        await message.write(f"{len(run_input.messages)} messages")
    call = await run.call_tool("lookup", {"n": len(run_input.messages)})
    await run.tool_result(call, "done")
    state = run_input.state if isinstance(run_input.state, dict) else {}
    await run.set_state({"turns": state.get("turns", 0) + 1})


async def _broken(run_input: RunAgentInput, run: RunWriter) -> None:
    await run.emit({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})


def test_the_client_runs_an_asgi_app_in_process() -> None:
    """No server, no port: the app answers through httpx's ASGI transport."""
    client = AgentTestClient(create_app(_echo))

    result = client.run("hello")

    assert "1 messages" == result.text()
    assert [("lookup", {"n": 1})] == [(c.name, c.arguments) for c in result.tool_calls]
    assert {"turns": 1} == result.state
    assert "hello" == result.messages[0].content
    body = client.requests[0]
    assert {"threadId", "runId", "messages", "tools", "context", "state"} <= set(body)


@pytest.mark.parametrize(
    ("options", "line"),
    [({}, 5), ({"event_log": MemoryEventLog()}, 7)],  # logged: an id line per frame
    ids=["connection-bound", "logged"],
)
def test_the_client_verifies_the_answer(options: dict[str, Any], line: int) -> None:
    """A server that leaves a message open fails the test with the rule it broke."""
    client = AgentTestClient(create_app(_broken, mode="audit", **options))

    with pytest.raises(AssertionError) as error:
        client.run()
    assert f"event 3 RUN_FINISHED (SSE frame 3, line {line}): AGUI-V005" in _message(error)
    assert not AgentTestClient(create_app(_broken, mode="audit"), verify=False).run().ok


def test_a_conversation_carries_messages_and_state() -> None:
    """Each turn sends the conversation so far and the last state."""
    conversation = AgentTestClient(create_app(_echo)).conversation()

    conversation.run("one")
    second = conversation.run("two")

    assert "5 messages" == second.text()  # user, assistant text, assistant call, tool, user
    assert {"turns": 2} == second.state
    assert ["user", "assistant", "assistant", "tool"] * 2 == [m.role for m in conversation.messages]


def test_the_client_runs_a_url_and_inside_an_event_loop() -> None:
    """A URL is fetched over the network; run() works even from async code."""
    with serve_asgi(create_app(_echo)) as url:
        client = AgentTestClient(url + "/")

        async def inside() -> str:
            return client.run().text() + "|" + (await client.arun()).text()

        assert "0 messages|0 messages" == asyncio.run(inside())


def test_unknown_fields_are_refused() -> None:
    """A misspelt RunAgentInput field is a TypeError, not a silently ignored keyword."""
    with pytest.raises(TypeError, match="threadid"):
        AgentTestClient(create_app(_echo)).build_input(threadid="t")


# --- ScriptedAgent and its faults -------------------------------------------------------------


def _aguikit_client(agent: ScriptedAgent) -> list[str]:
    client = AgentClient("http://agent.test/", async_transport=ASGIStreamTransport(agent))

    async def main() -> list[str]:
        return [u.event.type async for u in client.run(run_input())]

    return asyncio.run(main())


def test_a_scripted_agent_replays_its_stream() -> None:
    """Without faults the replay is the recording, and it records the request."""
    agent = ScriptedAgent(sse_bytes(GOOD))

    result = AgentTestClient(agent).run("hi")

    assert "Hello" == result.text()
    assert "hi" == agent.requests[0]["messages"][0]["content"]


def test_verbatim_replays_the_exact_bytes() -> None:
    """verbatim=True sends the recording's bytes unchanged."""
    data = sse_bytes(GOOD).replace(b"\n\n", b"\r\n\r\n")

    assert data == AgentTestClient(ScriptedAgent(data, verbatim=True)).run().raw


FAULTS: list[tuple[Any, type[Exception] | None, bool]] = [
    # (fault, aguikit's typed error, whether @ag-ui/client 1.0.0's run fails).  HttpAgent
    # accepts a run that never ends (cut or stalled; the partial message stays) and
    # ignores the content type; aguikit's client raises on both.
    (Cut(after=3), TruncatedStreamError, False),
    (CutMidFrame(at=3), DecodeError, True),
    (Garbage(at=2), DecodeError, True),
    (Status(503), HTTPStatusError, True),
    (ContentType("application/json"), ContentTypeError, False),
    (Delay(0.01), None, False),
    (Stall(after=3, interval=0.01, duration=0.1), TruncatedStreamError, False),
]


@pytest.mark.parametrize(
    ("fault", "expected"), [f[:2] for f in FAULTS], ids=lambda v: type(v).__name__
)
def test_agent_client_reports_each_fault_as_its_typed_error(
    fault: Any, expected: type[Exception] | None
) -> None:
    """Every fault ends aguikit's client with the typed error a UI can act on."""
    agent = ScriptedAgent(GOOD, faults=[fault])

    if expected is None:
        assert [e["type"] for e in GOOD if not e["type"].endswith("_CHUNK")] == _aguikit_client(
            agent
        )
    else:
        with pytest.raises(expected):
            _aguikit_client(agent)


def test_a_stall_sends_only_keep_alives_over_a_real_socket() -> None:
    """Over uvicorn, a stalled agent keeps the connection alive with comments only, and
    the client reports truncation when it finally closes."""
    agent = ScriptedAgent(GOOD, faults=[Stall(after=2, interval=0.02, duration=0.2)])
    with serve_asgi(agent) as url:
        raw = httpx.post(url + "/", json=run_input(), timeout=10).content
        with pytest.raises(TruncatedStreamError):
            list(AgentClient(url + "/").run_sync(run_input()))

    assert raw.startswith(sse_bytes(GOOD[:2]))
    assert raw.count(b": keep-alive\n\n") >= 3
    assert set(raw[len(sse_bytes(GOOD[:2])) :].split(b"\n\n")) == {b": keep-alive", b""}


@pytest.mark.parametrize(
    ("fault", "fails"), [(f[0], f[2]) for f in FAULTS], ids=lambda v: type(v).__name__
)
def test_the_official_typescript_client_against_each_fault(fault: Any, fails: bool) -> None:
    """The same faults, against @ag-ui/client's HttpAgent over a real socket."""
    with serve_asgi(ScriptedAgent(GOOD, faults=[fault])) as url:
        out = run_http_agent(url + "/", {"threadId": "t1", "messages": []})

    assert fails == ("error" in out["runs"][0]), out


def test_a_path_is_named_in_the_assertion(tmp_path: Path) -> None:
    """The first line names the file, so a parametrized test over recordings says which."""
    path = tmp_path / "broken.jsonl"
    path.write_bytes(jsonl_bytes(BAD))

    with pytest.raises(AssertionError) as error:
        assert_valid_stream(path)

    assert _message(error).startswith(f"AG-UI stream {path} is not valid: 2 problems")
