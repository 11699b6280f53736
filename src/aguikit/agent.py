"""
A stateful agent: one conversation carried across runs, with subscribers and middleware.

:class:`~aguikit.client.AgentClient` runs one request and folds one stream; an application
talking to an agent over several turns wants more: the messages and state the last run
ended with sent back with the next request, callbacks a UI can hang its redraws on (text
as it streams, tool arguments *parsed while they stream*, so a half-written argument can be
shown), a way to transform the event stream before it is folded, the interrupts a paused
run left and the resume payload that answers them, and a compact form of a run's log for
storage.  That is the official TypeScript client's ``AbstractAgent``; this is its Python
counterpart, built from the same pieces as the rest of the house: every request goes out
through :func:`aguikit.client.prepare_input` and the one HTTP fetch, every event through a
:class:`~aguikit.session.Session`.

The failure contract is the session's: when a run fails, :attr:`Agent.messages` and
:attr:`Agent.state` are what the session held *before* the failing event, never a
half-applied mix, so the next run starts from a state the agent actually reached.
A subscriber that raises is a bug in the application, not in the stream: it is logged,
the run goes on (the agent's state stays the stream's), and the exceptions are raised
together, as an :class:`ExceptionGroup`, once the agent's state is settled.

What it deliberately does not do: run tools.  A frontend tool call ends the run with the
call pending; the application answers it with :meth:`Agent.add_message` (a ``tool``
message) and runs again.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import inspect
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack, aclosing
from typing import Any, Final, Protocol, TypeAlias

import attrs
import httpx
import jiter

from ._generated.models import (
    AgentCapabilities,
    AssistantMessage,
    Interrupt,
    Message,
    ResumeEntry,
    ResumeEntryStatus,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ._generated.registry import EVENT_CLASSES, PROTOCOL_VERSION
from ._observe import Observe, observing
from .changes import What
from .client import AgentClient, observed, prepare_input
from .errors import AguiError
from .models import Event
from .session import RunOutcome, Session, Update
from .transport.asgi import ASGIStreamTransport
from .transport.http import DEFAULT_TIMEOUT, aget_json
from .wire import parse_as, parse_message, to_wire

__all__ = [
    "Agent",
    "EventLike",
    "Middleware",
    "RunResult",
    "Subscriber",
    "build_resume",
    "compact_events",
    "filter_tool_calls",
    "log_events",
]

LOGGER: Final = logging.getLogger("aguikit.agent")

EventLike: TypeAlias = Event | Mapping[str, Any]
"""What flows through middleware: decoded wire dicts from the network, or typed events a
middleware chose to yield instead (the session takes both)."""

Middleware: TypeAlias = Callable[[AsyncIterator[EventLike]], AsyncIterator[EventLike]]
"""
Transforms the event stream of a run: an async iterator in, an async iterator out.

It sits where the AG-UI processing model puts middleware: after the compatibility
boundary, before enforcement.  So it receives each event as the network decoded it with
retired shapes already translated (a ``THINKING_*`` event arrives as its ``REASONING_*``
replacement) and nothing removed (an undeclared member, an unknown event type and a chunk
before expansion all arrive as sent); what it yields is then validated, stripped,
expanded, verified and applied by the run's session, so a malformed value it passes on is
rejected there, never repaired.
"""

HOOKS: Final = (
    "on_event",
    "on_run_started",
    "on_text_delta",
    "on_tool_call_args",
    "on_tool_call_end",
    "on_state_changed",
    "on_messages_changed",
    "on_interrupt",
    "on_run_finished",
    "on_run_failed",
)
"""The callbacks a subscriber may define; any subset, each sync or async."""


class Subscriber(Protocol):
    """
    The shape of a subscriber, for documentation and type checkers: define any subset.

    ``on_event(event)``; ``on_run_started(event)``; ``on_text_delta(message_id, delta,
    text)`` with the message's text so far; ``on_tool_call_args(tool_call_id, delta,
    arguments)`` with the arguments so far parsed as a (partial) JSON value;
    ``on_tool_call_end(tool_call_id, name, arguments)``; ``on_state_changed(state)``;
    ``on_messages_changed(messages)``; ``on_interrupt(interrupts)``;
    ``on_run_finished(event)``; ``on_run_failed(error)`` (a ``RUN_ERROR`` event's message
    or the exception that ended the run).
    """


@attrs.frozen
class RunResult:
    """What one :meth:`Agent.run` left: the conversation and state, how the run ended, and
    what it waits on."""

    run_id: str
    messages: list[Message]
    new_messages: list[Message]
    """The messages this run added (by id, in order)."""
    state: Any
    interrupts: list[Interrupt]
    """The interrupts the run paused on; answer them with :meth:`Agent.resume_with`."""
    aborted: bool = False
    outcome: RunOutcome | None = None
    """How the run ended (``outcome.status``: ``finished``, ``error`` with the producer's
    message and code, ``interrupted``, ``cancelled``; ``running`` after :meth:`Agent.abort`),
    so a failed or cancelled run is never mistaken for a success.

    .. versionadded:: 0.4.0
    """

    @property
    def pending_tool_calls(self) -> list[ToolCall]:
        """
        The tool calls this run made that no tool message answers yet: the frontend's
        to run, answered with :meth:`Agent.add_message` before the next run.
        """
        answered = {getattr(m, "tool_call_id", None) for m in self.messages}
        return [
            call
            for message in self.new_messages
            for call in getattr(message, "tool_calls", None) or []
            if call.id not in answered
        ]


def parse_partial_json(text: str) -> Any:
    """
    ``text``, an incomplete JSON document, parsed as far as it goes (``None`` if nothing
    can be read yet).

    jiter's partial mode is pydantic's maintained parser for exactly this (streamed LLM
    output); a hand-written repairer would be one more JSON reader to keep correct.
    Trailing strings are kept, so ``{"city": "Par`` reads as ``{"city": "Par"}``.
    """
    if not text.strip():
        return None
    try:
        return jiter.from_json(text.encode("utf-8"), partial_mode="trailing-strings")
    except ValueError:
        return None


class _Callbacks:
    """Keyword callbacks as a subscriber object."""

    def __init__(self, callbacks: Mapping[str, Callable[..., Any]]) -> None:
        unknown = sorted(set(callbacks) - set(HOOKS))
        if unknown:
            raise TypeError(f"unknown subscriber hooks {unknown}; known: {list(HOOKS)}")
        for name, function in callbacks.items():
            setattr(self, name, function)


def interrupt_expired(interrupt: Interrupt, now: datetime.datetime) -> bool:
    """Whether this consumer judges ``interrupt`` expired: its ``expiresAt`` read as an ISO
    8601 date, now or earlier (the format is unconstrained; one that does not parse is not
    judged expired)."""
    if interrupt.expires_at is None:
        return False
    try:
        moment = datetime.datetime.fromisoformat(interrupt.expires_at)
    except ValueError:
        return False
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment <= now


def _coverage_problems(
    interrupts: Sequence[Interrupt], resolved: Sequence[str], cancelled: Sequence[str]
) -> list[str]:
    """
    What is wrong with answering the pending ``interrupts`` by these entries: the interrupts
    page's coverage rule ("The resume list MUST cover every interrupt of the run being
    continued", each entry naming one of them), which the consumer enforces because only it
    holds both the interrupts and the list; and an interrupt it judges expired "can no
    longer be answered", only abandoned.
    """
    pending = [interrupt.id for interrupt in interrupts]
    now = datetime.datetime.now(datetime.UTC)
    expired = sorted(i.id for i in interrupts if i.id in resolved and interrupt_expired(i, now))
    problems: list[str] = []
    if expired:
        problems.append(f"interrupts {expired} have expired: cancel them instead")
    unknown = [i for i in [*resolved, *cancelled] if i not in pending]
    if unknown:
        problems.append(f"no pending interrupt has id {sorted(set(unknown))}")
    both = sorted(set(resolved) & set(cancelled))
    if both:
        problems.append(f"answered and cancelled at once: {both}")
    if len(set(cancelled)) != len(cancelled):
        problems.append("an interrupt is cancelled twice")
    if len(set(resolved)) != len(resolved):
        problems.append("an interrupt is answered twice")
    missing = [i for i in pending if i not in resolved and i not in cancelled]
    if missing:
        problems.append(f"unanswered interrupts {missing}: answer or cancel each")
    return problems


def build_resume(
    interrupts: Sequence[Interrupt],
    answers: Mapping[str, Any],
    *,
    cancel: Iterable[str] = (),
) -> list[ResumeEntry]:
    """
    The ``resume`` entries answering ``interrupts``: ``answers`` maps an interrupt id to
    its payload, ``cancel`` names the interrupts dropped without an answer.

    The protocol's checks are made here, before anything is sent: every pending interrupt
    is answered exactly once (resolved or cancelled, not both), every id answered exists,
    one whose ``expiresAt`` has passed is cancelled, not resolved, and a resolved payload is
    not ``null`` (the schema's "any JSON value except null").

    .. versionchanged:: 0.4.0  An expired interrupt can no longer be resolved.

    Raises:
        ValueError: naming each id that breaks a check.
    """
    cancelled = list(cancel)
    problems = _coverage_problems(interrupts, list(answers), cancelled)
    null = sorted(i for i, payload in answers.items() if payload is None)
    if null:
        problems.append(f"a resolved payload may not be null: {null}")
    if problems:
        raise ValueError("cannot build the resume payload: " + "; ".join(problems))
    entries = []
    for interrupt_id in (interrupt.id for interrupt in interrupts):
        if interrupt_id in answers:
            entries.append(
                ResumeEntry(
                    interrupt_id=interrupt_id,
                    status=ResumeEntryStatus.RESOLVED,
                    payload=answers[interrupt_id],
                )
            )
        else:
            entries.append(
                ResumeEntry(interrupt_id=interrupt_id, status=ResumeEntryStatus.CANCELLED)
            )
    return entries


class Agent:
    """
    A conversation with one AG-UI agent, kept across runs.

    Args:
        url: The agent endpoint.
        app: An ASGI app to talk to in process instead of the network (tests, notebooks);
            ``url`` is then the path on it, e.g. ``"http://agent/agent"``.  It is driven
            through :class:`~aguikit.transport.asgi.ASGIStreamTransport`, so the run
            streams as it would from a server: subscribers fire while the app is still
            running, :meth:`abort` disconnects it, a failure mid-stream is a dropped
            connection (``httpx.ASGITransport`` would hand the answer over only once the
            run had ended).
        thread_id: The thread; a fresh one when not given.
        messages, state, tools, context, forwarded_props: What the next run sends; they
            persist across runs (messages and state as each run leaves them).
        headers, timeout, verify, validate, protocol_version: As for
            :class:`~aguikit.client.AgentClient`.
        max_reconnects, backoff, max_backoff: Reconnecting a dropped stream (see
            :class:`~aguikit.client.AgentClient`).
        transport: An ``httpx`` async transport to use instead of the network.
        telemetry: An :class:`aguikit.otel.Telemetry` tracing each run, as for
            :class:`~aguikit.client.AgentClient` (``docs/otel.md``): a frontend tool a
            run asked for is one span, ended when the run that sends its result starts.

    .. versionadded:: 0.2.0
    .. versionchanged:: 0.3.0  ``app`` streams (through ``ASGIStreamTransport``).
    """

    def __init__(
        self,
        url: str,
        *,
        app: Any = None,
        thread_id: str | None = None,
        messages: Iterable[Message | Mapping[str, Any]] = (),
        state: Any = None,
        tools: Iterable[Any] = (),
        context: Iterable[Any] = (),
        forwarded_props: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        verify: bool = True,
        validate: bool = True,
        protocol_version: str | None = PROTOCOL_VERSION,
        max_reconnects: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        telemetry: Observe | None = None,
    ) -> None:
        if app is not None:
            transport = ASGIStreamTransport(app)
        self.url = url
        self.thread_id = thread_id or str(uuid.uuid4())
        self.messages: list[Message] = [self._message(m) for m in messages]
        self.state: Any = {} if state is None else state
        self.tools: list[Any] = list(tools)
        self.context: list[Any] = list(context)
        self.forwarded_props = forwarded_props
        self._client = AgentClient(
            url,
            headers=headers,
            timeout=timeout,
            verify=verify,
            validate=validate,
            protocol_version=protocol_version,
            async_transport=transport,
            max_reconnects=max_reconnects,
            backoff=backoff,
            max_backoff=max_backoff,
            telemetry=telemetry,
        )
        self._transport = transport
        self._subscribers: list[Any] = []
        self._middleware: list[Middleware] = []
        self._inner: asyncio.Task[RunResult] | None = None
        self._aborted = False
        self.interrupts: list[Interrupt] = []
        """The interrupts the last run paused on (empty when it did not pause)."""
        self.session: Session | None = None
        """The session of the current or most recent run."""

    # --- configuring ------------------------------------------------------------------------

    @staticmethod
    def _message(message: Message | Mapping[str, Any]) -> Message:
        return parse_message(dict(message)) if isinstance(message, Mapping) else message

    def add_message(self, message: Message | Mapping[str, Any]) -> Message:
        """Append ``message`` (typed, or wire JSON, validated) to the conversation."""
        typed = self._message(message)
        self.messages.append(typed)
        return typed

    def subscribe(
        self, subscriber: Any = None, **callbacks: Callable[..., Any]
    ) -> Callable[[], None]:
        """
        Add a subscriber: an object defining any of the hooks (see :class:`Subscriber`),
        or the hooks as keyword callables.  Returns the function that removes it.
        """
        target = subscriber if subscriber is not None else _Callbacks(callbacks)
        self._subscribers.append(target)

        def unsubscribe() -> None:
            if target in self._subscribers:
                self._subscribers.remove(target)

        return unsubscribe

    def use(self, *middleware: Middleware) -> Agent:
        """
        Add middleware, applied in order: the first sees the events first, after the
        compatibility boundary and before enforcement (see :data:`Middleware`).
        """
        self._middleware.extend(middleware)
        return self

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._inner is not None

    # --- running ----------------------------------------------------------------------------

    def _body(
        self, run_id: str, resume: Sequence[ResumeEntry | Mapping[str, Any]] | None
    ) -> dict[str, Any]:
        def wire(item: Any) -> Any:
            return item if isinstance(item, Mapping) else to_wire(item)

        body: dict[str, Any] = {
            "threadId": self.thread_id,
            "runId": run_id,
            "messages": [to_wire(m) for m in self.messages],
            "state": self.state,
            "tools": [wire(t) for t in self.tools],
            "context": [wire(c) for c in self.context],
        }
        if self.forwarded_props is not None:
            body["forwardedProps"] = self.forwarded_props
        if resume:
            body["resume"] = [wire(r) for r in resume]
        return prepare_input(body, protocol_version=self._client.protocol_version)

    async def run(
        self, *, resume: Sequence[ResumeEntry | Mapping[str, Any]] | None = None
    ) -> RunResult:
        """
        Run the agent once with the conversation so far; returns what the run left.

        A run continues the thread, so before anything is sent it must answer what the last
        one left: every pending interrupt by an entry of ``resume`` (resolved or cancelled;
        :meth:`resume_with` builds them), and every tool call of the conversation by a tool
        message (:meth:`add_message`), except a call a pending interrupt names, which its
        resume entry answers.

        .. versionchanged:: 0.4.0  Refuses to continue past an unanswered interrupt or tool
           call, and checks ``resume`` against the pending interrupts.

        Raises:
            ValueError: An interrupt or a tool call is left unanswered, or a resume entry
                names no pending interrupt (nothing was sent).
            RuntimeError: A run is already in progress on this agent.
            AguiError: The request or the stream failed (messages and state are left as
                the session held them before the failing event).
            ExceptionGroup: One or more subscribers raised (after the run settled).
        """
        self._check_continuation(resume or ())
        run_id = str(uuid.uuid4())
        return await self._run(run_id, self._body(run_id, resume), join=False)

    def _check_continuation(self, resume: Sequence[ResumeEntry | Mapping[str, Any]]) -> None:
        """
        Refuse a run that would continue past what the last one left unanswered: an
        interrupt (the interrupts page: a consumer "MUST reject a resuming input that leaves
        an interrupt uncovered before the run starts") or a tool call (the tool calls page:
        "A thread that continues MUST answer every one of them first").
        """
        resolved: list[str] = []
        cancelled: list[str] = []
        for entry in resume:
            wire = entry if isinstance(entry, Mapping) else to_wire(entry)
            target = cancelled if wire.get("status") == "cancelled" else resolved
            target.append(str(wire.get("interruptId")))
        problems = _coverage_problems(self.interrupts, resolved, cancelled)
        answered = {m.tool_call_id for m in self.messages if isinstance(m, ToolMessage)}
        asked = {i.tool_call_id for i in self.interrupts if i.tool_call_id is not None}
        unanswered = [
            call.id
            for message in self.messages
            if isinstance(message, AssistantMessage)
            for call in message.tool_calls or ()
            if call.id not in answered and call.id not in asked
        ]
        if unanswered:
            problems.append(
                f"tool calls {unanswered} have no tool message: answer each with "
                "add_message({'role': 'tool', 'toolCallId': ..., 'content': ...})"
            )
        if problems:
            raise ValueError("cannot continue the thread: " + "; ".join(problems))

    async def join(self, run_id: str) -> RunResult:
        """
        Follow a run already in progress on a resumable server (another tab started it):
        the server's prelude (``X-AGUI-Join: prelude``, see ``docs/resume.md``) brings the
        conversation and state as they stand, then the run continues live.

        Raises:
            As :meth:`run`; ``TruncatedStreamError`` when the server cannot follow the run.
        """
        return await self._run(run_id, self._body(run_id, None), join=True)

    async def connect(self) -> RunResult:
        """
        Load this agent's thread from a server that keeps threads (a page reload): the
        server's ``connect`` endpoint (``<url>/connect``, see ``docs/threads.md``) answers
        with the thread's restating run, so :attr:`messages`, :attr:`state` and
        :attr:`interrupts` become the thread's as the server holds them.  What this agent
        held is replaced, as a ``MESSAGES_SNAPSHOT`` replaces it.

        .. versionadded:: 0.4.0

        Raises:
            As :meth:`run`; ``HTTPStatusError`` ``404`` for a thread the server does not
            hold for this caller (``AGUI-E030`` in the problem document).
        """
        run_id = str(uuid.uuid4())
        client = self._client
        connecting = copy.copy(client)
        connecting.url = client.url.rstrip("/") + "/connect"
        self._client = connecting
        try:
            return await self._run(run_id, self._body(run_id, None), join=False)
        finally:
            self._client = client

    async def _run(self, run_id: str, body: dict[str, Any], *, join: bool) -> RunResult:
        if self._inner is not None:
            raise RuntimeError("a run is already in progress on this agent")
        self._aborted = False
        errors: list[Exception] = []
        inner = asyncio.ensure_future(self._consume(run_id, body, errors, join))
        self._inner = inner
        try:
            result = await inner
        except asyncio.CancelledError:
            if not self._aborted or not inner.cancelled():
                raise
            session = self.session
            assert session is not None
            result = self._settle(run_id, session, aborted=True)
        finally:
            self._inner = None
        if errors:
            raise ExceptionGroup("subscriber callbacks raised during the run", errors)
        return result

    def run_sync(
        self, *, resume: Sequence[ResumeEntry | Mapping[str, Any]] | None = None
    ) -> RunResult:
        """:meth:`run` from synchronous code (starts and closes its own event loop)."""
        return asyncio.run(self.run(resume=resume))

    async def resume_with(
        self, answers: Mapping[str, Any], *, cancel: Iterable[str] = ()
    ) -> RunResult:
        """Run again, answering the pending :attr:`interrupts` (see :func:`build_resume`)."""
        return await self.run(resume=build_resume(self.interrupts, answers, cancel=cancel))

    def abort(self) -> None:
        """Cancel the current run: its request is closed (on a resumable server, after the
        cancel request that stops the run there at once); :meth:`run` returns ``aborted``."""
        if self._inner is not None and not self._inner.done():
            self._aborted = True
            self._inner.cancel()

    async def _consume(
        self, run_id: str, body: dict[str, Any], errors: list[Exception], join: bool
    ) -> RunResult:
        session = Session(
            verify=self._client.verify,
            validate=self._client.validate,
            messages=self.messages,
            state=self.state,
            thread_id=self.thread_id,
            keep_delivered=False,
        )
        self.session = session
        tracker = _Tracker(self, errors)
        # The specification's order: compatibility boundary, middleware, then the session's
        # enforcement, expansion, verification and application (docs/DESIGN.md).
        observer = self._client.observe(body)
        headers = None if observer is None else observer.headers()
        events = _translated(self._client.aevents(body, join=join, headers=headers), session)
        for middleware in self._middleware:
            events = middleware(events)
        try:
            try:
                with ExitStack() as observing_run:
                    if observer is not None:
                        observing_run.enter_context(observing(observer))
                    async for item in events:
                        updates = session.feed(_judged(item))
                        if observer is not None:
                            observed(observer, session, updates)
                        for update in updates:
                            await tracker.deliver(update, session)
                    updates = session.finish()
                    if observer is not None:
                        observed(observer, session, updates)
                    for update in updates:
                        await tracker.deliver(update, session)
            finally:
                closer = getattr(events, "aclose", None)
                if closer is not None:
                    await closer()
        except AguiError as error:
            self._settle(run_id, session)
            await tracker.fire("on_run_failed", error)
            raise
        return self._settle(run_id, session)

    def _settle(self, run_id: str, session: Session, *, aborted: bool = False) -> RunResult:
        before = {m.id for m in self.messages}
        self.messages = session.messages
        self.state = session.state
        self.interrupts = list(session.interrupts)
        new = [m for m in self.messages if m.id not in before]
        runs = session.runs
        return RunResult(
            run_id=run_id,
            messages=list(self.messages),
            new_messages=new,
            state=self.state,
            interrupts=list(self.interrupts),
            aborted=aborted,
            outcome=runs[-1] if runs else None,
        )

    # --- capabilities -----------------------------------------------------------------------

    async def capabilities(self, url: str | None = None) -> AgentCapabilities | None:
        """
        The agent's declared capabilities, read from ``url`` (``<endpoint>/capabilities``
        unless given); ``None`` when the endpoint does not offer them (404, 405).

        Raises:
            SchemaValidationError: The answer is not an ``AgentCapabilities`` document.
            HTTPStatusError, TransportError: Any other failure.
        """
        target = url or self.url.rstrip("/") + "/capabilities"
        data = await aget_json(
            target,
            headers=self._client.headers,
            timeout=self._client.timeout,
            transport=self._transport,
        )
        return None if data is None else parse_as(AgentCapabilities, data)


async def _translated(
    events: AsyncGenerator[EventLike, None], session: Session
) -> AsyncIterator[EventLike]:
    """
    The compatibility boundary ahead of middleware: each decoded event with its retired
    shapes translated and nothing removed (:meth:`Session.translate`).  Closing it closes
    the request under it, whatever middleware wraps it.
    """
    async with aclosing(events):
        async for item in events:
            yield session.translate(item)


_EVENT_CLASSES: Final = frozenset(EVENT_CLASSES.values())


def _judged(item: EventLike) -> EventLike:
    """
    What middleware yields, in the form enforcement judges in full: a typed aguikit event is
    written back to its wire form, because the session trusts a typed event's values (they
    are an application's own) while middleware output must be validated like the network's
    (a chunk whose role a middleware set to ``42`` is rejected, not expanded).
    """
    if type(item) not in _EVENT_CLASSES:
        return item
    try:
        return to_wire(item)
    except (TypeError, ValueError, AttributeError):
        return item  # unwritable: the session reports it as the malformed event it is


class _Tracker:
    """Turns each :class:`Update` into subscriber calls, keeping text and arguments so far."""

    def __init__(self, agent: Agent, errors: list[Exception]) -> None:
        self._agent = agent
        self._errors = errors
        self._text: dict[str, str] = {}
        self._args: dict[str, str] = {}
        self._names: dict[str, str] = {}

    async def fire(self, hook: str, *args: Any) -> None:
        for subscriber in list(self._agent._subscribers):
            function = getattr(subscriber, hook, None)
            if function is None:
                continue
            try:
                outcome = function(*args)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:  # reported after the run, never swallowed
                LOGGER.exception("subscriber %r raised in %s", subscriber, hook)
                exc.add_note(f"raised by subscriber {subscriber!r} in {hook}")
                self._errors.append(exc)

    async def deliver(self, update: Update, session: Session) -> None:
        if not self._agent._subscribers:
            return
        event, change = update.event, update.change
        await self.fire("on_event", event)
        if isinstance(event, RunStartedEvent):
            await self.fire("on_run_started", event)
        elif isinstance(event, TextMessageStartEvent):
            self._text[event.message_id] = ""
        elif isinstance(event, TextMessageContentEvent):
            text = self._text.get(event.message_id, "") + event.delta
            self._text[event.message_id] = text
            await self.fire("on_text_delta", event.message_id, event.delta, text)
        elif isinstance(event, ToolCallStartEvent):
            self._args[event.tool_call_id] = ""
            self._names[event.tool_call_id] = event.tool_call_name
        elif isinstance(event, ToolCallArgsEvent):
            text = self._args.get(event.tool_call_id, "") + event.delta
            self._args[event.tool_call_id] = text
            partial = parse_partial_json(text)
            await self.fire("on_tool_call_args", event.tool_call_id, event.delta, partial)
        elif isinstance(event, ToolCallEndEvent):
            text = self._args.pop(event.tool_call_id, "")
            name = self._names.pop(event.tool_call_id, None)
            await self.fire("on_tool_call_end", event.tool_call_id, name, parse_partial_json(text))
        elif isinstance(event, RunFinishedEvent):
            if session.interrupts:
                await self.fire("on_interrupt", list(session.interrupts))
            await self.fire("on_run_finished", event)
        elif isinstance(event, RunErrorEvent):
            await self.fire("on_run_failed", event.message)
        if change.what is What.STATE:
            await self.fire("on_state_changed", session.state)
        elif change.what is What.MESSAGES:
            await self.fire("on_messages_changed", session.messages)


# --- middleware ---------------------------------------------------------------------------


def _field(item: EventLike, wire: str, attr: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(wire)
    return getattr(item, attr, None)


_TOOL_EVENTS: Final = frozenset(
    {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_CHUNK", "TOOL_CALL_RESULT"}
)


def filter_tool_calls(
    *, allow: Iterable[str] | None = None, block: Iterable[str] = ()
) -> Middleware:
    """
    Middleware dropping every event of the tool calls whose name is not allowed (or is
    blocked): start, arguments, end, chunks and result, keyed by the call's id, so the
    folded conversation never shows them.

    It reads either form, as the processing page asks of any middleware: a chunk that names
    no call continues its lane's chunked call (its ``subagentRunId``'s; an untagged one the
    parent's, else the only lane's), and is dropped with it.

    .. versionchanged:: 0.4.0  Drops the id-less continuation chunks of a dropped call.
    """
    allowed = None if allow is None else frozenset(allow)
    blocked = frozenset(block)

    def keep(name: str) -> bool:
        return name not in blocked and (allowed is None or name in allowed)

    async def middleware(events: AsyncIterator[EventLike]) -> AsyncIterator[EventLike]:
        dropped: set[str] = set()
        lanes: dict[Any, Any] = {}  # owner -> the call its last id-bearing chunk named
        async for item in events:
            kind = _field(item, "type", "type")
            if kind in _TOOL_EVENTS:
                call_id = _field(item, "toolCallId", "tool_call_id")
                if kind == "TOOL_CALL_CHUNK":
                    owner = _field(item, "subagentRunId", "subagent_run_id")
                    if call_id is not None:
                        lanes[owner] = call_id
                    elif owner in lanes or len(lanes) == 1:
                        call_id = lanes.get(owner, next(iter(lanes.values())))
                name = _field(item, "toolCallName", "tool_call_name")
                if isinstance(name, str) and not keep(name):
                    dropped.add(call_id)
                if call_id in dropped:
                    continue
            yield item

    return middleware


def log_events(logger: logging.Logger | None = None, *, level: int = logging.INFO) -> Middleware:
    """
    Middleware logging one structured record per event (``extra={"agui": {...}}``: type,
    index, and the ids it carries), passing every event through unchanged.
    """
    log = logger or logging.getLogger("aguikit.events")

    async def middleware(events: AsyncIterator[EventLike]) -> AsyncIterator[EventLike]:
        index = 0
        async for item in events:
            wire = item if isinstance(item, Mapping) else to_wire(item)
            record = {"index": index, "type": wire.get("type")}
            for key in ("runId", "threadId", "messageId", "toolCallId", "toolCallName"):
                if key in wire:
                    record[key] = wire[key]
            log.log(level, "agui event %s %s", index, record["type"], extra={"agui": record})
            index += 1
            yield item

    return middleware


# --- compaction ---------------------------------------------------------------------------


def compact_events(
    events: Iterable[EventLike], *, thread_id: str = "thread", run_id: str = "run"
) -> list[dict[str, Any]]:
    """
    The shortest stream a :class:`~aguikit.session.Session` folds to the same messages and
    state as ``events``: ``RUN_STARTED``, one ``MESSAGES_SNAPSHOT``, one
    ``STATE_SNAPSHOT`` and ``RUN_FINISHED`` (every delta merged), as wire dicts.

    For storing a run's log: replaying the full stream would redo every token.
    ``thread_id``/``run_id`` are used when the stream has no ``RUN_STARTED`` of its own.
    What is not messages or state (steps, activity progress, raw events) is not kept.
    """
    session = Session(verify=False, keep_delivered=False)
    for item in events:
        session.feed(item)
    thread = session.thread_id or thread_id
    run = session.run_id or run_id
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "MESSAGES_SNAPSHOT", "messages": [to_wire(m) for m in session.messages]},
        {"type": "STATE_SNAPSHOT", "snapshot": session.state},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]
