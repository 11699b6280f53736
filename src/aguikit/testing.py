"""
Testing AG-UI servers (and clients) from pytest, with the library's own judgement.

A server that passes ``curl`` can still fail in the browser, because the official
TypeScript client checks ordering rules a human reading the stream does not.  Projects
kept hand-rolling a partial copy of those rules in their test suites; this module packages
aguikit's complete engine the way a test wants it:

* :func:`assert_valid_stream` takes events (typed, wire dicts, ``ag_ui.core`` models),
  SSE or JSONL bytes or text, or a path, and either raises one :class:`AssertionError`
  naming *every* problem (rule id, 1-based event number, event type, field, and for bytes
  the SSE frame or JSONL line) or returns a :class:`RunResult` to assert on.
* :class:`AgentTestClient` runs an ASGI app in process (no server, no port) or a URL,
  builds a valid ``RunAgentInput`` from as little as nothing, and verifies the answer;
  :meth:`AgentTestClient.conversation` carries messages and state across turns.
* :class:`ScriptedAgent` is the other direction: an ASGI app replaying a recorded stream
  with faults injected (:class:`Cut`, :class:`CutMidFrame`, :class:`Delay`,
  :class:`Stall`, :class:`Garbage`, :class:`Status`, :class:`ContentType`), to test a
  client or UI against the ways a real agent's connection goes wrong.

There is no second verifier here: every verdict is :mod:`aguikit.checker`'s pass, the one
behind ``aguikit check`` (its recovering :class:`~aguikit.session.Session` validating,
verifying and applying each event, its own ``AGUI-K`` rows, its source reader locating
each event by SSE frame or JSONL line), so a test and ``aguikit check`` can never
disagree.  What this module adds is the reading of events and paths as sources, the
folded conversation, and the wording of the assertion.

Deliberately absent: retries, timing assertions, and a dependency on pytest (the plugin,
:mod:`aguikit.pytest_plugin`, sits on top of this module).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, MutableMapping
from os import PathLike
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar

import attrs
import httpx

from ._generated.models import AssistantMessage, Event, Interrupt, Message, ToolMessage
from .catalogue import Severity
from .checker import (
    CheckConfig,
    Finding,
    SourceReport,
    check_bytes,
    check_events,
    check_source,
    open_events,
)
from .client import prepare_input
from .conversation import Exchange, check_exchanges
from .errors import AguiError
from .interop import is_sdk_model, sdk_wire
from .session import Session, SessionWarning
from .transport.asgi import ASGIApp, ASGIStreamTransport
from .transport.http import apost_stream
from .transport.sse import encode_bytes
from .wire import parse_message, to_wire

__all__ = [
    "AgentTestClient",
    "ContentType",
    "Conversation",
    "Cut",
    "CutMidFrame",
    "Delay",
    "Fault",
    "Garbage",
    "Outcome",
    "RunResult",
    "ScriptedAgent",
    "Stall",
    "Status",
    "ToolCallRecord",
    "assert_valid_stream",
    "events_of",
    "judge_stream",
]

Source: TypeAlias = bytes | str | PathLike[str] | Iterable[Any]
"""What a stream can be given as: bytes or text (SSE or JSONL), a path, or events."""

_TEST_BASE: Final = "http://agui.test"
_T = TypeVar("_T")


# --- results -----------------------------------------------------------------------------


@attrs.frozen
class Outcome:
    """
    How the run ended, flattened for an assertion: ``result.outcome.kind == "finished"``.

    ``kind`` is ``finished`` (``RUN_FINISHED`` with no outcome or a success one),
    ``error`` (``RUN_ERROR``: ``message`` and ``code``), ``interrupted`` (paused on
    ``interrupts``), ``cancelled``, or ``incomplete`` when the stream never ended its run
    (only seen on a result that was not verified, since verification refuses truncation).
    """

    kind: Literal["finished", "error", "interrupted", "cancelled", "incomplete"]
    message: str | None = None
    code: str | None = None
    interrupts: tuple[Interrupt, ...] = ()
    result: Any = None


@attrs.frozen
class ToolCallRecord:
    """
    One tool call the run made: ``arguments`` parsed from the streamed JSON text (the raw
    text when it is not JSON, in ``raw_arguments`` either way), and the ``result`` content
    of its tool message when the stream carried one.
    """

    id: str
    name: str
    arguments: Any
    raw_arguments: str
    result: str | None = None


@attrs.frozen(eq=True)
class RunResult:
    """
    One stream, judged and folded: what a test asserts on.

    ``events`` are the typed events as delivered to an application (after chunk expansion
    and the receiver boundary), ``messages`` and ``state`` what a UI would show afterwards,
    ``warnings`` what a tolerant receiver put up with, ``raw`` the bytes when there were
    some, and ``problems`` the lines of the verdict (empty when the stream is clean; only
    a result built with ``verify=False`` can hold errors).
    """

    events: tuple[Event, ...]
    messages: tuple[Message, ...]
    state: Any
    outcome: Outcome
    warnings: tuple[SessionWarning, ...] = attrs.field(eq=False)
    raw: bytes | None = attrs.field(default=None, eq=False, repr=False)
    problems: tuple[str, ...] = attrs.field(default=(), eq=False)
    new_message_ids: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)

    def text(self) -> str:
        """
        The text of this run's assistant messages, in order, joined by a blank line.

        A run that speaks, calls a tool and speaks again sends two messages; joined by
        ``"\\n\\n"`` they read as the two paragraphs a UI shows them as.  Messages
        with no text (a tool call alone) add nothing; the conversation before the run (a
        :class:`Conversation`'s earlier turns) is not included.
        """
        parts: list[str] = []
        for message in self._new_messages():
            is_text = isinstance(message, AssistantMessage) and isinstance(message.content, str)
            if is_text and message.content:
                parts.append(str(message.content))
        return "\n\n".join(parts)

    def _new_messages(self) -> list[Message]:
        if not self.new_message_ids:
            return list(self.messages)
        fresh = set(self.new_message_ids)
        return [m for m in self.messages if m.id in fresh]

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every tool call this run's assistant messages made, in order, arguments parsed."""
        results = {m.tool_call_id: m.content for m in self.messages if isinstance(m, ToolMessage)}
        calls: list[ToolCallRecord] = []
        for message in self._new_messages():
            if not isinstance(message, AssistantMessage):
                continue
            for call in message.tool_calls or ():
                raw = call.function.arguments
                try:
                    parsed: Any = json.loads(raw) if raw else {}
                except ValueError:
                    parsed = raw
                result = results.get(call.id)
                calls.append(
                    ToolCallRecord(
                        call.id,
                        call.function.name,
                        parsed,
                        raw,
                        result if isinstance(result, str) else None,
                    )
                )
        return calls

    @property
    def ok(self) -> bool:
        """No problem was found."""
        return not self.problems


# --- reading sources ---------------------------------------------------------------------


def _is_path(source: object) -> bool:
    if isinstance(source, PathLike):
        return True
    if isinstance(source, str) and source and "\n" not in source and len(source) < 4096:
        stripped = source.strip()
        if stripped[:1] in ("{", "[") or stripped.startswith(("data:", ":")):
            return False
        return Path(source).is_file()
    return False


def _wire_of(event: Any) -> Any:
    if isinstance(event, Mapping):
        return dict(event)
    if is_sdk_model(event):
        return sdk_wire(event)
    try:
        return to_wire(event)
    except (AguiError, TypeError, ValueError):
        return event  # the session names what is wrong with it


def _source(source: Source) -> tuple[str | None, bytes | None, list[Any] | None]:
    """``source`` as exactly one of: a path, bytes, or wire events."""
    if isinstance(source, PathLike) or (isinstance(source, str) and _is_path(source)):
        return str(Path(source)), None, None
    if isinstance(source, bytes | bytearray | memoryview):
        return None, bytes(source), None
    if isinstance(source, str):
        return None, source.encode("utf-8"), None
    return None, None, [_wire_of(e) for e in source]


# --- judging ------------------------------------------------------------------------------


def _outcome(events: Iterable[Event], session: Session) -> Outcome:
    runs = session.runs
    if not runs or runs[-1].status == "running":
        return Outcome("incomplete")
    run = runs[-1]
    if run.status == "error":
        return Outcome("error", message=run.message, code=run.code)
    result = None
    for event in events:
        if event.type == "RUN_FINISHED":
            result = to_wire(event).get("result")
    if run.status == "interrupted":
        return Outcome("interrupted", interrupts=run.interrupts, result=result)
    if run.status == "cancelled":
        return Outcome("cancelled", result=result)
    return Outcome("finished", result=result)


def _counts(finding: Finding, strict: bool) -> bool:
    """Whether ``finding`` fails the assertion: an error, or a warning when ``strict``."""
    return finding.severity is Severity.ERROR or (strict and finding.severity is Severity.WARNING)


def _describe(finding: Finding, report: SourceReport) -> str:
    at = finding.event
    located = finding.line is not None or finding.frame is not None
    if at is None or (at > report.events and not located):
        where = f"stream end (after event {report.events})"  # found when the stream ended
    else:
        where = f"event {at}"
    if finding.event_type:
        where += f" {finding.event_type}"
    if finding.frame is not None:
        where += f" (SSE frame {finding.frame}, line {finding.line})"
    elif finding.line is not None:
        where += f" ({'JSONL ' if report.kind == 'jsonl' else ''}line {finding.line})"
    label = "" if finding.severity is Severity.ERROR else f"{finding.severity.value} "
    detail = (
        f" [{finding.code}]" if finding.kind == "schema" and finding.code != finding.rule else ""
    )
    field = f" at {finding.pointer}" if finding.pointer else ""
    text = f"{where}: {label}{finding.rule}{detail}{field}: {finding.message}"
    if finding.count > 1:
        text += f" ({finding.count} times, the last at event {finding.last_event})"
    if finding.consequence_of is not None:
        text += f" (perhaps a consequence of event {finding.consequence_of})"
    return text


def judge_stream(
    source: Source,
    *,
    strict: bool = False,
    messages: Iterable[Message] = (),
    state: Any = None,
    name: str | None = None,
) -> RunResult:
    """
    Judge and fold ``source`` without raising: the :class:`RunResult` with its
    ``problems`` (each a located, rule-named line; empty when the stream is clean).

    :func:`assert_valid_stream` is this plus the assertion; use this one to assert on the
    problems themselves (a test proving a server's bug is caught, say).  ``messages`` and
    ``state`` are what the conversation held before the run (a UI's view before it sent
    the request), so the result's messages are the whole conversation afterwards.
    With ``strict``, receiver warnings count as problems too.
    """
    path, raw, events = _source(source)
    prior = list(messages)
    session = Session(
        verify=True,
        validate=True,
        keep_delivered=True,
        collect_issues=True,
        recover=True,
        messages=prior,
        **({} if state is None else {"state": state}),
    )
    config = CheckConfig()
    if path is not None:
        report = check_source(path, config, session=session)
        if report.unreadable is not None and not report.findings:
            raise OSError(report.unreadable)
        raw = Path(path).read_bytes()
    elif raw is not None:
        report = check_bytes(raw, name or "<stream>", config, session=session)
    else:
        report = check_events(events or (), name or "<events>", config, session=session)
    lines = [_describe(f, report) for f in report.findings if _counts(f, strict)]
    delivered = tuple(session.delivered)
    known = {m.id for m in prior}
    return RunResult(
        events=delivered,
        messages=tuple(session.messages),
        state=session.state,
        outcome=_outcome(delivered, session),
        warnings=tuple(session.warnings),
        raw=raw,
        problems=tuple(lines),
        new_message_ids=tuple(m.id for m in session.messages if m.id not in known),
    )


def _describe_thread(finding: Finding) -> str:
    """A thread rule's finding (its exchange, the request or an event), for an assertion."""
    place = "request" if finding.event is None else f"event {finding.event}"
    if finding.event is not None and finding.event_type:
        place += f" {finding.event_type}"
    label = "" if finding.severity is Severity.ERROR else f"{finding.severity.value} "
    field = f" at {finding.pointer}" if finding.pointer else ""
    return f"exchange {finding.exchange} {place}: {label}{finding.rule}{field}: {finding.message}"


def _failure(label: str, problems: Iterable[str]) -> str:
    problems = list(problems)
    noun = "problem" if len(problems) == 1 else "problems"
    body = "\n".join(f"  - {line}" for line in problems)
    return f"AG-UI stream {label} is not valid: {len(problems)} {noun}\n{body}"


def assert_valid_stream(source: Source, *, strict: bool = False) -> RunResult:
    """
    Assert that ``source`` is a legal AG-UI stream, and return what it produced.

    Args:
        source: A list of events (aguikit typed events, wire dicts or ``ag_ui.core``
            models), the bytes or text of an SSE or JSONL stream (sniffed), or a path
            (``.sse``/``.jsonl`` by suffix, else sniffed).
        strict: Fail on receiver warnings too (an undeclared member stripped, an unknown
            event dropped): what a stricter consumer would reject.

    Returns:
        The :class:`RunResult`: events, messages, state, outcome, warnings, raw bytes.

    Raises:
        AssertionError: Naming every problem found, one line each: the 1-based event
            number and type, the SSE frame or JSONL line for bytes, the rule id
            (``aguikit rules ID`` explains it), the offending field, the message.  After
            an error the check goes on, as ``aguikit check`` does, judging each later
            event as if the failing one never came; a finding that may only follow from
            an earlier error says so.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, then the problems
    result = judge_stream(source, strict=strict)
    if result.problems:
        if isinstance(source, PathLike) or (isinstance(source, str) and _is_path(source)):
            label = str(source)
        else:
            label = "<events>" if result.raw is None else "<stream>"
        raise AssertionError(_failure(label, result.problems))
    return result


# --- the in-process client ---------------------------------------------------------------

_FIELDS: Final = {
    "thread_id": "threadId",
    "run_id": "runId",
    "parent_run_id": "parentRunId",
    "messages": "messages",
    "tools": "tools",
    "context": "context",
    "state": "state",
    "forwarded_props": "forwardedProps",
    "resume": "resume",
}


def _wire_list(items: Iterable[Any]) -> list[Any]:
    return [item if isinstance(item, Mapping) else _wire_of(item) for item in items]


def _user(text: str) -> dict[str, Any]:
    return {"id": f"user-{uuid.uuid4().hex[:12]}", "role": "user", "content": text}


class AgentTestClient:
    """
    Run an AG-UI agent from a test and get a judged :class:`RunResult` back.

    ``target`` is an ASGI app (Starlette, FastAPI, :func:`aguikit.server.create_app`, a
    framework's adapter), driven in process through
    :class:`~aguikit.transport.asgi.ASGIStreamTransport` so a test needs no server and
    no port (and a stalled stream times out as it would over a socket), or the URL of a
    running agent.  Every run is verified by default, because a stream a test did not
    verify is the one that fails in the browser.

    Args:
        target: An ASGI application or an ``http(s)://`` URL.
        path: The agent's route on an ASGI app.
        headers: Extra request headers.
        verify: Raise :class:`AssertionError` naming every problem (else the result's
            ``problems`` hold them).
        strict: Count receiver warnings as problems.
        timeout: Seconds for the whole request.
    """

    def __init__(
        self,
        target: ASGIApp | str | Any,
        *,
        path: str = "/",
        headers: Mapping[str, str] | None = None,
        verify: bool = True,
        strict: bool = False,
        timeout: float = 30.0,
    ) -> None:
        self.target = target
        if isinstance(target, str):
            self.url = target
        else:
            self.url = _TEST_BASE + (path if path.startswith("/") else "/" + path)
        self.headers = dict(headers or {})
        self.verify = verify
        self.strict = strict
        self.timeout = timeout
        self.requests: list[dict[str, Any]] = []
        """Every body this client POSTed, in order (what the agent was asked)."""

    def build_input(self, input: Any = None, **fields: Any) -> dict[str, Any]:
        """
        The ``RunAgentInput`` wire body for :meth:`run`'s arguments, validated.

        ``input`` may be ``None`` (an empty conversation), a string (one user message),
        a mapping or ``RunAgentInput``; ``fields`` (snake_case: ``messages``, ``state``,
        ``tools``, ``thread_id``...) override its members.  Fresh thread and run ids and
        empty ``tools``/``context``/``state`` fill the gaps, as a UI would send them.
        """
        if input is None:
            body: dict[str, Any] = {}
        elif isinstance(input, str):
            body = {"messages": [_user(input)]}
        elif isinstance(input, Mapping):
            body = dict(input)
        else:
            body = to_wire(input)
        for key, value in fields.items():
            if key not in _FIELDS:
                raise TypeError(f"unknown RunAgentInput field {key!r}; one of {sorted(_FIELDS)}")
            if key in ("messages", "tools", "context", "resume") and value is not None:
                value = _wire_list(value)
            body[_FIELDS[key]] = value
        body.setdefault("threadId", f"thread-{uuid.uuid4().hex[:12]}")
        body.setdefault("runId", f"run-{uuid.uuid4().hex[:12]}")
        for key, empty in (("messages", []), ("tools", []), ("context", []), ("state", {})):
            body.setdefault(key, empty)
        body.setdefault("forwardedProps", {})
        return prepare_input(body)

    def _transport(self) -> httpx.AsyncBaseTransport | None:
        if isinstance(self.target, str):
            return None
        return ASGIStreamTransport(self.target)

    async def _fetch(self, body: dict[str, Any]) -> bytes:
        data = bytearray()
        async for chunk in apost_stream(
            self.url,
            body,
            headers=self.headers,
            timeout=self.timeout,
            transport=self._transport(),
        ):
            data += chunk
        return bytes(data)

    def _judge(self, body: dict[str, Any], data: bytes) -> RunResult:
        __tracebackhide__ = True  # a failing test shows its own line and the verdict
        prior = [parse_message(m) for m in body.get("messages", [])]
        result = judge_stream(
            data, strict=self.strict, messages=prior, state=body.get("state"), name=self.url
        )
        if self.verify and result.problems:
            raise AssertionError(_failure(self.url, result.problems))
        return result

    async def arun(self, input: Any = None, **fields: Any) -> RunResult:
        """:meth:`run` for a test that is already inside an event loop."""
        __tracebackhide__ = True
        body = self.build_input(input, **fields)
        self.requests.append(body)
        return self._judge(body, await self._fetch(body))

    def run(self, input: Any = None, **fields: Any) -> RunResult:
        """
        POST a run and return the judged result.

        Args:
            input: ``None``, a user message's text, a mapping or ``RunAgentInput``.
            fields: ``RunAgentInput`` members in snake_case, overriding ``input``'s.

        Raises:
            AssertionError: The stream broke the protocol (when ``verify``).
            HTTPStatusError, ContentTypeError, TransportError: The request failed.
        """
        __tracebackhide__ = True
        body = self.build_input(input, **fields)
        self.requests.append(body)
        # Only the fetch runs in an event loop: the verdict is raised here, in the test's
        # own thread and frame, so a failure reads as the assertion and nothing else.
        return self._judge(body, _run_sync(self._fetch(body)))

    def conversation(self, *, thread_id: str | None = None, state: Any = None) -> Conversation:
        """A multi-turn conversation on one thread, carrying messages and state."""
        return Conversation(self, thread_id or f"thread-{uuid.uuid4().hex[:12]}", state)


def _run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """
    Run ``coroutine`` to completion, in a worker thread when a loop is already running.

    The loop is looked for before anything runs, outside any ``except`` block, so an
    error the coroutine raises is not chained to the ``RuntimeError`` that says no loop
    is running (a test failure that opened with it would read as a loop problem).
    """
    __tracebackhide__ = True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return _in_a_thread(coroutine)
    return asyncio.run(coroutine)


def _in_a_thread(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` in a loop of its own, in a worker thread (one is running here)."""
    __tracebackhide__ = True
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = asyncio.run(coroutine)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: _T = box["result"]
    return result


class Conversation:
    """
    Several runs on one thread, as a UI drives them: each turn sends the whole
    conversation so far and the last state, and keeps what the agent answered.

    Each turn is also judged as the next exchange of the thread
    (:func:`aguikit.conversation.check_exchanges`, the pass ``aguikit check`` runs on a
    HAR file): the request against the run before it (an interrupt left unanswered, a
    pending tool call without its result, an ``encryptedValue`` not sent back, a history
    that drops or re-mints a message, a state that is not the one the run left) as well
    as the response.  A thread rule's errors fail the turn as a stream's do (warnings
    too with ``strict``); :attr:`exchanges` keeps what was sent and received.

    .. versionchanged:: 0.5.0  Applies the thread rules (``AGUI-R…``) to every turn.
    """

    def __init__(self, client: AgentTestClient, thread_id: str, state: Any = None) -> None:
        self.client = client
        self.thread_id = thread_id
        self.messages: list[Message] = []
        self.state: Any = {} if state is None else state
        self.results: list[RunResult] = []
        self.exchanges: list[Exchange] = []
        """Every turn's request body and response bytes, as a conversation's exchanges."""

    def add_tool_result(self, tool_call_id: str, content: Any) -> None:
        """Answer a frontend tool call: the tool message the next turn carries."""
        text = content if isinstance(content, str) else json.dumps(content)
        self.messages.append(
            parse_message(
                {
                    "id": f"tool-{uuid.uuid4().hex[:12]}",
                    "role": "tool",
                    "toolCallId": tool_call_id,
                    "content": text,
                }
            )
        )

    def _fields(self, text: str | None, fields: dict[str, Any]) -> dict[str, Any]:
        if text is not None:
            self.messages.append(parse_message(_user(text)))
        fields.setdefault("messages", list(self.messages))
        fields.setdefault("state", self.state)
        fields.setdefault("thread_id", self.thread_id)
        return fields

    def _keep(self, result: RunResult) -> RunResult:
        __tracebackhide__ = True
        body = self.client.requests[-1]
        self.exchanges.append(Exchange.of(len(self.exchanges) + 1, body, result.raw or b""))
        report = check_exchanges(self.exchanges, self.client.url)
        number = len(self.exchanges)
        lines = tuple(
            _describe_thread(f)
            for f in report.findings
            if f.exchange == number
            and f.rule.startswith("AGUI-R")  # the stream's own: judged by the run already
            and _counts(f, self.client.strict)
        )
        if lines:
            if self.client.verify:
                raise AssertionError(_failure(f"{self.client.url} (thread)", lines))
            result = attrs.evolve(result, problems=result.problems + lines)
        self.messages = list(result.messages)
        self.state = result.state
        self.results.append(result)
        return result

    def run(self, text: str | None = None, **fields: Any) -> RunResult:
        """
        One turn: ``text`` as a new user message (or none), then the agent's answer.

        Raises:
            AssertionError: The response broke the protocol, or the request broke a
                thread rule against the run before it (when the client verifies).
        """
        __tracebackhide__ = True
        return self._keep(self.client.run(None, **self._fields(text, fields)))

    async def arun(self, text: str | None = None, **fields: Any) -> RunResult:
        """:meth:`run` inside an event loop."""
        __tracebackhide__ = True
        return self._keep(await self.client.arun(None, **self._fields(text, fields)))


# --- the scripted agent -------------------------------------------------------------------


@attrs.frozen
class Cut:
    """Close the response cleanly after ``after`` events (the run never ends)."""

    after: int


@attrs.frozen
class CutMidFrame:
    """Send the first half of event ``at`` (0-based) then close: a frame cut in two."""

    at: int


@attrs.frozen
class Delay:
    """Wait ``seconds`` before each event: a slow agent, for loading states."""

    seconds: float


@attrs.frozen
class Stall:
    """
    After ``after`` events send only keep-alive comments, every ``interval`` seconds, for
    ``duration`` seconds (forever when ``None``), then close: an agent that went quiet
    while its connection stayed open.
    """

    after: int
    interval: float = 0.05
    duration: float | None = None


@attrs.frozen
class Garbage:
    """Write ``data`` before event ``at`` (0-based): corruption on the wire."""

    at: int
    data: bytes = b"data: {not json\n\n"


@attrs.frozen
class Status:
    """Answer with HTTP ``code`` and ``body`` instead of a stream."""

    code: int
    body: str = '{"detail":"scripted failure"}'


@attrs.frozen
class ContentType:
    """Stream the events under the wrong ``Content-Type``."""

    value: str = "application/json"


Fault: TypeAlias = Cut | CutMidFrame | Delay | Stall | Garbage | Status | ContentType


class ScriptedAgent:
    """
    An ASGI AG-UI agent that replays a recorded stream, with faults injected.

    A client or UI must survive the ways a real agent's connection goes wrong, and a real
    agent will not go wrong on cue.  This one does: give it the stream (any
    :func:`assert_valid_stream` source, replayed as SSE frames of its events, or the exact
    bytes with ``verbatim=True``) and the faults, mount it or hand it to
    :class:`~aguikit.transport.asgi.ASGIStreamTransport` (its faults are timed, so they
    need a transport that streams).  It does not judge the stream, so an invalid one replays as
    it is (a test of how a client reports it).  :attr:`requests` records each body it
    was sent.
    """

    def __init__(
        self, stream: Source, *, faults: Iterable[Fault] = (), verbatim: bool = False
    ) -> None:
        path, raw, _ = _source(stream)
        if verbatim and path is not None:
            raw = Path(path).read_bytes()
        if verbatim and raw is not None:
            self.frames = [raw]
        else:
            self.frames = [encode_bytes(e) for e in events_of(stream)]
        self.faults = tuple(faults)
        self.requests: list[Any] = []

    def _fault(self, kind: type[Any]) -> Any:
        return next((f for f in self.faults if isinstance(f, kind)), None)

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            self.requests.append(json.loads(bytes(body)) if body else None)
        except ValueError:
            self.requests.append(bytes(body))
        status = self._fault(Status)
        if status is not None:
            await send(
                {
                    "type": "http.response.start",
                    "status": status.code,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": status.body.encode()})
            return
        ctype = self._fault(ContentType)
        media = ctype.value if ctype is not None else "text/event-stream"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", media.encode()), (b"cache-control", b"no-cache")],
            }
        )
        await self._stream(send)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream(self, send: Callable[[Any], Awaitable[None]]) -> None:
        async def chunk(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        cut, mid, delay = self._fault(Cut), self._fault(CutMidFrame), self._fault(Delay)
        stall = self._fault(Stall)
        garbage = [f for f in self.faults if isinstance(f, Garbage)]
        for index, frame in enumerate(self.frames):
            if cut is not None and index >= cut.after:
                return
            if stall is not None and index >= stall.after:
                await self._stall(stall, chunk)
                return
            for fault in garbage:
                if fault.at == index:
                    await chunk(fault.data)
            if delay is not None:
                await asyncio.sleep(delay.seconds)
            if mid is not None and index == mid.at:
                await chunk(frame[: max(1, len(frame) // 2)])
                return
            await chunk(frame)

    @staticmethod
    async def _stall(stall: Stall, chunk: Callable[[bytes], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        end = None if stall.duration is None else loop.time() + stall.duration
        while end is None or loop.time() < end:
            await chunk(b": keep-alive\n\n")
            await asyncio.sleep(stall.interval)


def events_of(source: Source) -> list[Any]:
    """The wire dicts of ``source``, unjudged: for building a script from a recording."""
    path, raw, events = _source(source)
    if events is not None:
        return events
    if path is not None:
        return list(open_events(path))
    return list(open_events("<stream>", data=raw or b""))
