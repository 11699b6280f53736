"""
:class:`aguikit.Agent`: a conversation kept across runs, subscribers, middleware,
interrupts, capabilities and compaction, against the bundled example agent in process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tests.servers import serve_asgi
from tests.strategies import chunk_form, conversations, explicit_form

from aguikit import Agent, Session, compact_events
from aguikit.agent import build_resume, filter_tool_calls, log_events, parse_partial_json
from aguikit.errors import ProtocolError, SchemaValidationError, WireFormatError
from aguikit.models import AgentCapabilities, ExecutionCapabilities, Interrupt
from aguikit.server import MemoryEventLog, RunWriter, capabilities_endpoint, create_app
from aguikit.wire import to_wire

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "weather_todo_server.py"
URL = "http://agent.test/agent"


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"agent_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WEATHER = _load(EXAMPLE)
APP = WEATHER.app


def _user(text: str, mid: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


def test_two_turns_carry_messages_state_and_thread() -> None:
    """The second run sends what the first left, and the thread stays the same."""
    agent = Agent(URL, app=APP)
    agent.add_message(_user("Weather in Oslo?", "u1"))
    first = agent.run_sync()
    assert first.state["city"] == "Oslo"
    assert first.messages[0].id == "u1"
    assert first.new_messages and all(m.id != "u1" for m in first.new_messages)
    thread = agent.thread_id
    agent.add_message(_user("And in Lyon?", "u2"))
    second = agent.run_sync()
    assert thread == agent.thread_id
    assert second.run_id != first.run_id
    assert second.state["city"] == "Lyon"
    assert [m.id for m in first.messages] == [m.id for m in second.messages][: len(first.messages)]


def test_subscribers_see_text_so_far_and_partial_tool_arguments() -> None:
    """Text deltas arrive with the text so far; tool arguments parsed while they stream."""
    seen: dict[str, list[Any]] = {"text": [], "args": [], "end": [], "hooks": []}

    class Recorder:
        def on_run_started(self, event: Any) -> None:
            seen["hooks"].append("started")

        async def on_text_delta(self, message_id: str, delta: str, text: str) -> None:
            seen["text"].append((message_id, delta, text))

        def on_tool_call_args(self, call_id: str, delta: str, arguments: Any) -> None:
            seen["args"].append(arguments)

        def on_tool_call_end(self, call_id: str, name: str, arguments: Any) -> None:
            seen["end"].append((name, arguments))

        def on_state_changed(self, state: Any) -> None:
            seen["hooks"].append("state")

        def on_run_finished(self, event: Any) -> None:
            seen["hooks"].append("finished")

    agent = Agent(URL, app=APP, messages=[_user("Weather in Paris?", "u1")])
    agent.subscribe(Recorder())
    agent.run_sync()
    for _, delta, text in seen["text"]:
        assert text.endswith(delta)
    assert ("get_weather", {"city": "Paris"}) in seen["end"]
    assert seen["args"][-1] == {"city": "Paris"}
    assert {"city": "Pa"} in seen["args"]  # the example streams them: parsed half-written
    assert seen["hooks"][0] == "started" and seen["hooks"][-1] == "finished"
    assert "state" in seen["hooks"]


def test_partial_json_reads_as_far_as_it_goes() -> None:
    """A half-written argument is shown, with its trailing string kept."""
    assert parse_partial_json('{"city": "Par') == {"city": "Par"}
    assert parse_partial_json('{"a": [1, 2') == {"a": [1, 2]}
    assert parse_partial_json("") is None


def test_a_subscriber_exception_is_reported_after_the_run_settles() -> None:
    """The run completes, the agent keeps the stream's state, the error is raised."""
    agent = Agent(URL, app=APP, messages=[_user("Weather in Paris?", "u1")])

    def boom(*args: Any) -> None:
        raise KeyError("ui bug")

    agent.subscribe(on_text_delta=boom)
    with pytest.raises(ExceptionGroup) as caught:
        agent.run_sync()
    assert all(isinstance(e, KeyError) for e in caught.value.exceptions)
    assert agent.state["city"] == "Paris"
    assert not agent.running
    agent.add_message(_user("Again", "u2"))
    agent.subscribe(on_text_delta=boom)()  # subscribed and removed: no effect
    with pytest.raises(ExceptionGroup):
        agent.run_sync()  # boom is still subscribed once


def test_unknown_hook_names_are_refused() -> None:
    """A typo in a hook name would otherwise be a callback that never fires."""
    with pytest.raises(TypeError, match="on_text"):
        Agent(URL, app=APP).subscribe(on_text=print)


async def _broken(run_input: Any, run: RunWriter) -> None:
    await run.set_state({"step": 1})
    await run.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"})


def test_a_failed_run_leaves_what_the_session_held_before_the_failing_event() -> None:
    """State reached before the bad event is kept; the failure reaches on_run_failed."""
    app = create_app(_broken, path="/agent", mode="audit")
    failures: list[Any] = []
    agent = Agent(URL, app=app, state={"step": 0})
    agent.subscribe(on_run_failed=failures.append)
    with pytest.raises(ProtocolError):
        agent.run_sync()
    assert agent.state == {"step": 1}
    assert failures and isinstance(failures[0], ProtocolError)
    assert not agent.running


async def _slow(run_input: Any, run: RunWriter) -> None:
    await run.set_state({"started": True})
    await asyncio.sleep(30)


def test_running_twice_at_once_raises_and_abort_cancels() -> None:
    """A second run on a busy agent is refused; abort() ends the first, marked aborted.

    A real server: httpx's ASGI transport buffers the whole answer, so nothing streams.
    """
    with serve_asgi(create_app(_slow, path="/agent")) as base:
        agent = Agent(base + "/agent")

        async def scenario() -> Any:
            task = asyncio.ensure_future(agent.run())
            while agent.session is None or agent.session.state != {"started": True}:
                await asyncio.sleep(0.01)
            with pytest.raises(RuntimeError, match="already in progress"):
                await agent.run()
            agent.abort()
            return await asyncio.wait_for(task, 5)

        result = asyncio.run(scenario())
    assert result.aborted
    assert agent.state == {"started": True}
    assert not agent.running


def test_middleware_filters_tool_calls_by_name_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The filtered call never reaches the conversation; the logger sees every event."""
    agent = Agent(URL, app=APP, messages=[_user("Weather in Paris?", "u1")])
    agent.use(filter_tool_calls(block=["get_weather"]), log_events())
    with caplog.at_level(logging.INFO, logger="aguikit.events"):
        result = agent.run_sync()
    calls = [
        c.function.name for m in result.messages for c in (getattr(m, "tool_calls", None) or [])
    ]
    assert "get_weather" not in calls
    assert all(m.role != "tool" for m in result.messages)
    records = [r.agui for r in caplog.records if hasattr(r, "agui")]
    assert records[0]["type"] == "RUN_STARTED"
    assert all(r["type"] != "TOOL_CALL_START" for r in records)


async def _pausing(run_input: Any, run: RunWriter) -> None:
    if run_input.resume:
        answers = {entry.interrupt_id: entry.payload for entry in run_input.resume}
        await run.set_state({"answers": answers})
        return
    run.interrupt("approval", interrupt_id="i1", message="Delete it?")


def test_interrupts_are_pending_after_a_run_and_answered_by_the_resume_builder() -> None:
    """The paused run's interrupts are kept; the next run carries one answer for each."""
    app = create_app(_pausing, path="/agent")
    seen: list[Any] = []
    agent = Agent(URL, app=app)
    agent.subscribe(on_interrupt=seen.append)
    first = agent.run_sync()
    assert [i.id for i in first.interrupts] == ["i1"]
    assert [i.id for i in seen[0]] == ["i1"]
    second = asyncio.run(agent.resume_with({"i1": True}))
    assert second.state == {"answers": {"i1": True}}
    assert agent.interrupts == []


def test_a_run_after_an_interrupt_without_answering_it_is_refused_before_sending() -> None:
    """The consumer holds the interrupts, so it enforces coverage: running on past a pending
    interrupt (the interrupts page: "MUST NOT silently continue past an interrupt it has no
    entry for") raises before the request is made, naming it."""
    requests: list[Any] = []

    async def pausing(run_input: Any, run: RunWriter) -> None:
        requests.append(run_input)
        run.interrupt("approval", interrupt_id="i1", message="Delete it?")

    agent = Agent(URL, app=create_app(pausing, path="/agent"))
    agent.run_sync()

    with pytest.raises(ValueError, match=r"unanswered interrupts \['i1'\]"):
        agent.run_sync()
    assert 1 == len(requests)


def test_a_resume_must_answer_exactly_the_interrupts_the_agent_holds() -> None:
    """A hand-written resume list is checked like build_resume's: every entry names a
    pending interrupt (the interrupts page: each ``interruptId`` "MUST name an interrupt
    from the run being continued") and every pending interrupt has one; nothing is sent."""
    requests: list[Any] = []

    async def pausing(run_input: Any, run: RunWriter) -> None:
        requests.append(run_input)
        if not run_input.resume:
            run.interrupt("approval", interrupt_id="i1")
            run.interrupt("approval", interrupt_id="i2")

    agent = Agent(URL, app=create_app(pausing, path="/agent"))
    agent.run_sync()
    for resume, words in [
        ([{"interruptId": "i1", "status": "resolved", "payload": True}], "unanswered"),
        (
            [
                {"interruptId": "i1", "status": "resolved", "payload": True},
                {"interruptId": "i2", "status": "cancelled"},
                {"interruptId": "i9", "status": "cancelled"},
            ],
            "no pending interrupt has id",
        ),
    ]:
        with pytest.raises(ValueError, match=words):
            agent.run_sync(resume=resume)
    assert 1 == len(requests)
    agent.run_sync(
        resume=[
            {"interruptId": "i1", "status": "resolved", "payload": True},
            {"interruptId": "i2", "status": "cancelled"},
        ]
    )
    assert 2 == len(requests)
    assert [] == agent.interrupts


def test_a_run_with_a_tool_call_left_unanswered_is_refused_before_sending() -> None:
    """A frontend call left pending must be answered before the thread continues (the tool
    calls page: "A thread that continues MUST answer every one of them first"); with its
    tool message added, the run goes."""
    requests: list[Any] = []

    async def asking(run_input: Any, run: RunWriter) -> None:
        requests.append(run_input)
        if len(requests) == 1:
            await run.call_tool("confirm_order", {"id": 7})

    agent = Agent(URL, app=create_app(asking, path="/agent"))
    first = agent.run_sync()
    (call,) = first.pending_tool_calls

    with pytest.raises(ValueError, match=f"tool calls \\['{call.id}'\\] have no tool message"):
        agent.run_sync()
    assert 1 == len(requests)
    agent.add_message({"id": "t1", "role": "tool", "toolCallId": call.id, "content": "yes"})
    agent.run_sync()
    assert 2 == len(requests)


def test_a_run_result_says_how_the_run_ended() -> None:
    """A failed run is surfaced as failed and a cancelled one as neither success nor failure
    (the lifecycle page), in ``RunResult.outcome``; pending tool calls are derived from the
    conversation, whatever the outcome lists (the tool calls page: absence is not "nothing
    pending")."""

    async def ending(run_input: Any, run: RunWriter) -> None:
        how = run_input.forwarded_props["how"]
        if how == "error":
            raise RuntimeError("model unavailable")
        if how == "pending":
            await run.call_tool("chart", {})
        if how == "cancelled":
            await run.emit(
                {
                    "type": "RUN_FINISHED",
                    "threadId": run_input.thread_id,
                    "runId": run_input.run_id,
                    "outcome": {"type": "cancelled"},
                }
            )

    app = create_app(ending, path="/agent", mode="audit")
    outcomes = {}
    for how in ("finished", "error", "pending", "cancelled"):
        agent = Agent(URL, app=app, forwarded_props={"how": how})
        result = agent.run_sync()
        assert result.outcome is not None
        outcomes[how] = (
            result.outcome.status,
            [c.function.name for c in result.pending_tool_calls],
        )

    assert {
        "finished": ("finished", []),
        "error": ("error", []),
        "pending": ("finished", ["chart"]),
        "cancelled": ("cancelled", []),
    } == outcomes


def test_middleware_filters_tool_calls_in_either_form() -> None:
    """A middleware must be prepared for chunks as well as the explicit triad (the
    processing page): a blocked call's id-less continuation chunks go with it."""

    async def chunked(run_input: Any, run: RunWriter) -> None:
        for document in (
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "secret", "delta": "{"},
            {"type": "TOOL_CALL_CHUNK", "delta": "}"},
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c2", "toolCallName": "ok", "delta": "{"},
            {"type": "TOOL_CALL_CHUNK", "delta": "}"},
        ):
            await run.emit(document)

    agent = Agent(URL, app=create_app(chunked, path="/agent"))
    agent.use(filter_tool_calls(block=["secret"]))
    result = agent.run_sync()

    calls = [c for m in result.messages for c in (getattr(m, "tool_calls", None) or [])]
    assert [("c2", "ok", "{}")] == [(c.id, c.function.name, c.function.arguments) for c in calls]


def test_an_encrypted_value_goes_back_unmodified_in_the_next_run_input() -> None:
    """The consumer stores an encrypted value with the message it names and returns it
    unmodified, its type with it, in later run input (the reasoning page), so the producer
    can restore what it stands for."""
    requests: list[Any] = []

    async def thinking(run_input: Any, run: RunWriter) -> None:
        requests.append(to_wire(run_input))
        if len(requests) == 1:
            await run.say("answer", message_id="m1")
            await run.emit(
                {
                    "type": "REASONING_ENCRYPTED_VALUE",
                    "subtype": "message",
                    "entityId": "m1",
                    "encryptedValue": "b3BhcXVl\u0000",
                    "encryptedValueType": "anthropic.signature",
                }
            )

    agent = Agent(URL, app=create_app(thinking, path="/agent"))
    agent.run_sync()
    agent.run_sync()

    (sent,) = [m for m in requests[1]["messages"] if m["id"] == "m1"]
    assert ("b3BhcXVl\u0000", "anthropic.signature") == (
        sent["encryptedValue"],
        sent["encryptedValueType"],
    )


def test_the_resume_builder_makes_the_protocols_checks() -> None:
    """Every interrupt answered once, only ids that exist, no null payload; an interrupt the
    consumer judges expired "can no longer be answered" (the interrupts page), only
    abandoned."""
    pending = [Interrupt(id="a", reason="r"), Interrupt(id="b", reason="r")]
    entries = build_resume(pending, {"a": 1}, cancel=["b"])
    assert [to_wire(e) for e in entries] == [
        {"interruptId": "a", "status": "resolved", "payload": 1},
        {"interruptId": "b", "status": "cancelled"},
    ]
    expiring = [Interrupt(id="a", reason="r", expires_at="2001-01-01T00:00:00Z")]
    with pytest.raises(ValueError, match=r"interrupts \['a'\] have expired"):
        build_resume(expiring, {"a": 1})
    assert [{"interruptId": "a", "status": "cancelled"}] == [
        to_wire(e) for e in build_resume(expiring, {}, cancel=["a"])
    ]
    for answers, cancel, words in [
        ({"a": 1}, [], "unanswered"),
        ({"a": 1, "b": 2, "c": 3}, [], "no pending interrupt"),
        ({"a": 1, "b": 2}, ["b"], "answered and cancelled"),
        ({"a": None, "b": 1}, [], "null"),
    ]:
        with pytest.raises(ValueError, match=words):
            build_resume(pending, answers, cancel=cancel)


def test_capabilities_are_typed_and_a_missing_endpoint_is_none() -> None:
    """A declared document parses into ``AgentCapabilities``; no endpoint is ``None``."""

    async def caps(request: Request) -> JSONResponse:
        return JSONResponse({"identity": {"name": "weather"}, "state": {"snapshots": True}})

    app = Starlette(routes=[Route("/agent/capabilities", caps)])
    found = asyncio.run(Agent(URL, app=app).capabilities())
    assert found is not None and found.identity is not None
    assert found.identity.name == "weather"
    assert asyncio.run(Agent(URL, app=create_app(_pausing, path="/agent")).capabilities()) is None


def test_the_example_servers_declare_their_capabilities_over_uvicorn() -> None:
    """Both examples, served for real, answer ``Agent.capabilities()`` with what they
    declare, typed; a server declaring nothing answers ``None``."""
    fastapi = _load(EXAMPLE.parent / "fastapi_server.py")
    bare = create_app(_pausing, path="/agent")
    # create_app declares what its endpoint does: no event log, so not resumable.
    weather = {**WEATHER.CAPABILITIES, "transport": {**WEATHER.CAPABILITIES["transport"]}}
    weather["transport"]["resumable"] = False
    for app, declared in [(APP, weather), (fastapi.app, fastapi.CAPABILITIES)]:
        with serve_asgi(app) as base:
            found = asyncio.run(Agent(base + "/agent").capabilities())
        assert isinstance(found, AgentCapabilities)
        assert to_wire(found) == (declared if isinstance(declared, dict) else to_wire(declared))
    assert found == fastapi.CAPABILITIES
    with serve_asgi(bare) as base:
        assert asyncio.run(Agent(base + "/agent").capabilities()) is None


def test_a_bad_capabilities_declaration_fails_when_the_app_is_built() -> None:
    """Strictly checked at construction, naming the pointer, typed or wire alike."""
    with pytest.raises(SchemaValidationError) as wire_error:
        create_app(_pausing, capabilities={"identity": {"nmae": "weather"}})
    assert [issue.pointer for issue in wire_error.value.issues] == ["/identity"]
    assert "nmae" in str(wire_error.value)
    typed = AgentCapabilities(execution=ExecutionCapabilities(max_iterations=-1))
    with pytest.raises(SchemaValidationError) as typed_error:
        capabilities_endpoint(typed)
    assert [i.pointer for i in typed_error.value.issues] == ["/execution/maxIterations"]
    with pytest.raises(WireFormatError):
        capabilities_endpoint("everything")  # type: ignore[arg-type]


def test_create_app_serves_capabilities_next_to_the_run_route() -> None:
    """``GET {path}/capabilities`` (the root path too); POST stays the run route; and
    ``transport.resumable`` says whether the endpoint logs its runs."""
    declared = {"identity": {"name": "root"}, "transport": {"streaming": True}}
    root = create_app(_pausing, capabilities=declared)
    found = asyncio.run(Agent("http://agent.test/", app=root).capabilities())
    bound = {**declared, "transport": {"streaming": True, "resumable": False}}
    assert found is not None and to_wire(found) == bound
    assert Agent("http://agent.test/", app=root).run_sync().interrupts
    logged = create_app(_pausing, capabilities={}, event_log=MemoryEventLog())
    found = asyncio.run(Agent("http://agent.test/", app=logged).capabilities())
    assert found is not None and {"transport": {"resumable": True}} == to_wire(found)


@pytest.mark.parametrize("log", [None, MemoryEventLog()])
def test_a_resumable_declaration_that_does_not_hold_fails_when_the_app_is_built(
    log: MemoryEventLog | None,
) -> None:
    """``transport.resumable`` contradicting the endpoint's ``event_log`` is refused."""
    wrong = {"transport": {"resumable": log is None}}
    with pytest.raises(ValueError, match=r"transport\.resumable"):
        create_app(_pausing, capabilities=wrong, event_log=log)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.booleans())
def test_a_compacted_stream_folds_to_the_same_messages_and_state(
    runs: list[Any], chunked: bool
) -> None:
    """Compaction keeps exactly what a session folds a stream to (either form)."""
    stream = (chunk_form if chunked else explicit_form)(runs)
    full = Session(verify=False)
    full.feed_all(stream)
    compact = Session()
    compact.feed_all(compact_events(stream))
    compact.finish()
    assert [to_wire(m) for m in compact.messages] == [to_wire(m) for m in full.messages]
    assert compact.state == full.state
