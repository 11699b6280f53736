"""
The HTTP client: POST a ``RunAgentInput``, read the agent's answer, fold it as it comes.

An application talking to an agent wants three things from a client, and gets them here:
the request made the way the official clients make it (a validated JSON body, the protocol
version declared, ``Accept: text/event-stream``, or with the binary transport
``application/vnd.ag-ui.event+proto`` preferred when ``binary=True``), the answer decoded
incrementally (each event verified and applied by a :class:`aguikit.Session` the moment
its frame is complete, so a UI can render token by token), and every way it can go wrong
reported as a typed error rather than a hung iterator or an ``httpx`` exception:
:class:`~aguikit.errors.HTTPStatusError`, :class:`~aguikit.errors.ContentTypeError`,
:class:`~aguikit.errors.TransportError`, :class:`~aguikit.errors.DecodeError`,
:class:`~aguikit.errors.ProtocolError` and, for an answer that stops before the run ends,
:class:`~aguikit.errors.TruncatedStreamError`.

It is the top of the consuming house: the request goes out through the one HTTP fetch
(:mod:`aguikit.transport.http`), the bytes come back through the decoder of the media
type the agent chose (SSE, or length-prefixed protobuf via :mod:`aguikit.proto`), and every
event goes through one :class:`~aguikit.session.Session`, whose :class:`Update` values
are yielded as they are.  Stopping early is part of the contract: breaking out of the
loop, closing the generator or cancelling the task closes the HTTP response, and with it
the connection, so the agent sees the client go and can stop spending tokens; a resumable
answer's run outlives its connection, so the client also sends the server's cancel
request (``X-AGUI-Cancel``, ``docs/resume.md``) before it lets go.

A dropped connection to a resumable endpoint (one that numbers its SSE frames, see
:mod:`aguikit.server.eventlog`) is resumed with ``Last-Event-ID`` by both runs, and the
caller sees one continuous stream; ``docs/resume.md`` is the protocol.  Resuming is an SSE
feature: a binary (protobuf) answer has no frame ids, so it is never reconnected, and a
reconnect or a join asks for SSE only, even with ``binary=True``.

What it deliberately does not do: retry a request that failed before any answer, or
reconnect a stream whose frames carry no ids (nothing says where to resume).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing, closing
from typing import Any, Final

import httpx

from . import _observe
from ._generated.models import RunAgentInput
from ._generated.registry import PROTOCOL_VERSION
from .catalogue import RULES_BY_ID, Severity, render_message
from .errors import AguiError, HTTPStatusError, TransportError, TruncatedStreamError, short_repr
from .limits import MAX_FRAME_BYTES, MAX_JSON_DEPTH
from .patch import UNSET
from .proto import MEDIA_TYPE as PROTO_MEDIA_TYPE
from .proto import aiter_proto, iter_proto_wire
from .receiver import omit_newer_members, strip_unknown, version_key
from .session import Session, Update
from .transport.http import BOTH, DEFAULT_TIMEOUT, SSE_ONLY, apost_stream, post_stream
from .transport.sse import Frame, aiter_frames, frame_object, iter_frames
from .wire import parse_run_agent_input, to_wire

__all__ = ["AgentClient", "Update", "prepare_input"]

LOGGER: Final = logging.getLogger("aguikit")

_TERMINAL: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})
"""The events after which a run's stream has nothing more to say: no reconnect after one."""

_RESUMABLE: Final = "last-event-id"
"""The ``X-AGUI-Resume`` value of a server that keeps its runs in an event log."""

_CANCEL_TIMEOUT: Final = 5.0
"""Seconds a cancel request may take before the client gives up on it (the run then ends
one resume grace window later, as if the client had only hung up)."""

_LEGACY_KINDS: Final = (("image/", "image"), ("audio/", "audio"), ("video/", "video"))


_RETRYABLE: Final = frozenset({502, 503, 504})
"""Statuses of a reconnect that say "not now" (a gateway, the server's event log), not
"never": the reconnect is tried again, counted against ``max_reconnects``."""
_NO_RUN: Final = frozenset({404, 410})
"""Statuses of a resume that say the run is not there."""


def _declares_resume(answers: Sequence[httpx.Headers]) -> bool:
    """Whether a server answer said its runs survive a dropped connection."""
    return any(_RESUMABLE in h.get("x-agui-resume", "").lower() for h in answers)


def _older_than(version: str | None, reference: str) -> bool:
    if version is None:
        return False
    mine, theirs = version_key(version), version_key(reference)
    return mine is not None and theirs is not None and mine < theirs


def _upgrade_part(part: Any, siblings: Sequence[Any]) -> list[Any]:
    """A retired ``binary`` content part as the modern media part it stands for."""
    if not (isinstance(part, Mapping) and part.get("type") == "binary"):
        return [part]
    mime = part.get("mimeType")
    if not isinstance(mime, str):
        return [part]
    kind = next((name for prefix, name in _LEGACY_KINDS if mime.startswith(prefix)), "document")
    if isinstance(part.get("data"), str) and part["data"]:
        source = {"type": "data", "value": part["data"], "mimeType": mime}
    elif isinstance(part.get("url"), str) and part["url"]:
        source = {"type": "url", "value": part["url"], "mimeType": mime}
    else:
        return [part]  # only an id: nothing to upgrade to; validation will name it
    modern: dict[str, Any] = {"type": kind, "source": source}
    if isinstance(part.get("filename"), str):
        modern["metadata"] = {"filename": part["filename"]}
    for other in siblings:  # the sender already included the modern twin: keep one
        if (
            isinstance(other, Mapping)
            and other.get("type") == kind
            and other.get("source") == source
            and ("metadata" not in modern or other.get("metadata") == modern["metadata"])
        ):
            return []
    return [modern]


def _upgrade_messages(messages: Any) -> Any:
    if not isinstance(messages, list):
        return messages
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(p, Mapping) and p.get("type") == "binary" for p in content
        ):
            parts = [new for part in content for new in _upgrade_part(part, content)]
            message = {**message, "content": parts}
        out.append(message)
    return out


def _flatten_for_0_0_39(messages: list[Any], warnings: list[str]) -> list[Any]:
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            dropped = sorted({str(p.get("type")) for p in content if p.get("type") != "text"})
            if dropped:
                warnings.append(
                    f"message {message.get('id')!r}: a peer of protocol 0.0.39 or older "
                    f"takes text only, so the client DROPS non-text parts: {', '.join(dropped)} "
                    "(a peer of 0.0.40 or newer keeps them)"
                )
            message = {**message, "content": "\n".join(t for t in texts if t)}
        out.append(message)
    return out


def _note(warnings: list[str] | None, rule_id: str, **fields: Any) -> None:
    """Report what the outgoing boundary left out: on the log, and in ``warnings``."""
    rule = RULES_BY_ID[rule_id]
    message = render_message(rule_id, **fields)
    level = logging.INFO if rule.severity is Severity.INFO else logging.WARNING
    LOGGER.log(level, "%s (run input): %s", rule.symbol, message)
    if warnings is not None:
        warnings.append(f"{rule_id} {rule.symbol}: {message}")


def prepare_input(
    run_input: RunAgentInput | Mapping[str, Any],
    *,
    protocol_version: str | None = PROTOCOL_VERSION,
    max_protocol_version: str | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """
    The JSON body the client POSTs for ``run_input``.

    The processing model's outgoing boundary, in its order: retired ``binary`` content
    parts are upgraded to the modern media parts they stand for (an old front end's history
    stays sendable); then whatever the protocol does not describe is removed, an undeclared
    member or a message of an unknown role, each named in ``warnings`` and logged as
    ``AGUI-W002`` (the specification: "a consumer MUST remove unrecognised material from the
    run input, SHOULD warn about what it removed"); activity messages are left out too
    (``AGUI-W023``: they "never travel back to the producer"); then the result is validated and
    re-serialised through the typed model, so a malformed known field fails here, before
    anything is sent, whether the input was a mapping or a typed ``RunAgentInput``.
    ``protocolVersion`` is set to ``protocol_version`` unless the input already declares
    one.

    ``max_protocol_version`` pins an older peer: the members its version does not have yet
    (``encryptedValueType`` for a ``1.0`` peer, read from the schema's ``x-since`` by
    :func:`aguikit.receiver.omit_newer_members`) are left out, each with a warning, and
    the request declares that version rather than this one; below ``1.0`` the version
    declaration is left out (such a peer may reject an unknown member), and at ``0.0.39``
    or older user content is flattened to its text, with a warning naming the parts
    dropped.  Every warning is also logged on the ``aguikit`` logger.

    .. versionchanged:: 0.2.0  Declares AG-UI 1.1, and omits 1.1-only members for a peer
       pinned to an older version.
    .. versionchanged:: 0.4.0  Strips unrecognised material and activity messages with a
       warning instead of sending them, validates a typed input too, and warns for every
       member a downgrade leaves out.

    Raises:
        SchemaValidationError: The input is not a valid ``RunAgentInput`` (a known member is
            missing or malformed).
        ValueError: ``max_protocol_version`` is not a dotted version of ASCII digits (a pin
            that orders nothing would silently send what the peer cannot read).
    """
    if max_protocol_version is not None and version_key(max_protocol_version) is None:
        raise ValueError(
            f"max_protocol_version must be a dotted version such as '1.0' or '0.0.39', "
            f"not {short_repr(max_protocol_version)}"
        )
    notes: list[str] = []
    data = dict(run_input) if isinstance(run_input, Mapping) else to_wire(run_input)
    data["messages"] = _upgrade_messages(data.get("messages"))
    data, removed = strip_unknown(data, definition="RunAgentInput")
    for pointer in removed:
        _note(warnings, "AGUI-W002", pointer=pointer, event_type="RunAgentInput")
    if isinstance(data["messages"], list):
        kept = []
        for message in data["messages"]:
            if isinstance(message, Mapping) and message.get("role") == "activity":
                _note(warnings, "AGUI-W023", entity_id=message.get("id"))
            else:
                kept.append(message)
        data["messages"] = kept
    wire = to_wire(parse_run_agent_input(data))
    old_peer = _older_than(max_protocol_version, "1.0")
    if old_peer:
        wire.pop("protocolVersion", None)
    elif protocol_version is not None and "protocolVersion" not in wire:
        # Downgrading for an older peer: declare the version this request is written in.
        pinned = max_protocol_version is not None and _older_than(
            max_protocol_version, protocol_version
        )
        wire["protocolVersion"] = max_protocol_version if pinned else protocol_version
    if max_protocol_version is not None:
        wire, omitted = omit_newer_members(wire, max_protocol_version, definition="RunAgentInput")
        notes.extend(
            f"{pointer} left out: a peer of protocol {max_protocol_version} does not know it "
            f"(a peer of {PROTOCOL_VERSION} keeps it)"
            for pointer in omitted
        )
    if max_protocol_version is not None and not _older_than("0.0.39", max_protocol_version):
        wire["messages"] = _flatten_for_0_0_39(wire["messages"], notes)
    for note in notes:
        LOGGER.warning("request: %s", note)
    if warnings is not None:
        warnings.extend(notes)
    return wire


class AgentClient:
    """
    Runs an AG-UI agent over HTTP and keeps the conversation it produces.

    Each :meth:`run` (or :meth:`run_sync`) starts a fresh :class:`aguikit.Session`,
    available as :attr:`session` during and after the run; :attr:`messages` and
    :attr:`state` read through to it.

    Args:
        url: The agent endpoint.
        headers: Extra request headers (authentication, tracing).
        timeout: Seconds, or an ``httpx.Timeout``; the read timeout applies between
            chunks, so a slow agent is fine as long as it keeps talking.
        verify: Verify event ordering (raise :class:`~aguikit.errors.ProtocolError`).
        validate: Schema-validate every event before parsing it.
        protocol_version: Declared in the request's ``protocolVersion`` unless the input
            sets one.
        max_protocol_version: Pin an older peer (see :func:`prepare_input`).
        max_frame_bytes: Largest SSE frame accepted.
        max_depth: Deepest JSON nesting accepted in one event.
        transport: An ``httpx`` transport to use instead of the network (sync runs).
        async_transport: Likewise for async runs; for an ASGI app in process use
            :class:`~aguikit.transport.asgi.ASGIStreamTransport`, which streams
            (``httpx.ASGITransport`` hands the answer over only once the app has ended).
        max_reconnects: Reconnects tried on a dropped resumable stream without it making
            progress (a new numbered event); every reconnect counts, a join's prelude
            and an answer refused ``502``/``503``/``504`` included (see :meth:`aevents`).
        backoff: Seconds before the first reconnect; doubled for each further one.
        max_backoff: The cap on that delay.  Each delay is drawn in ``[d/2, d]`` (jitter),
            so clients cut off together do not come back together.
        binary: Ask for the binary transport too (``Accept:
            application/vnd.ag-ui.event+proto, text/event-stream``) and decode whichever
            the agent answers in.  Off by default: every agent speaks SSE, and an agent
            that predates the binding may refuse the request (aguikit's did, with 406,
            before 1.1 said to answer SSE).  A binary
            answer carries no frame ids, so it is not resumed after a drop; reconnects
            and joins ask for SSE only.
        telemetry: An :class:`aguikit.otel.Telemetry` tracing each run (a ``CLIENT``
            span whose context the request carries as ``traceparent``, with the run's
            steps, tools and subagents under it; ``docs/otel.md``); ``None`` uses the
            one ``AguikitInstrumentor().instrument()`` installed, if any.

    .. versionchanged:: 0.2
       ``binary``: the protobuf transport.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        verify: bool = True,
        validate: bool = True,
        protocol_version: str | None = PROTOCOL_VERSION,
        max_protocol_version: str | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_depth: int = MAX_JSON_DEPTH,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
        max_reconnects: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        binary: bool = False,
        telemetry: _observe.Observe | None = None,
    ) -> None:
        self.url = url
        self.telemetry = telemetry
        self.max_reconnects = max_reconnects
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.verify = verify
        self.validate = validate
        self.protocol_version = protocol_version
        self.max_protocol_version = max_protocol_version
        self.max_frame_bytes = max_frame_bytes
        self.max_depth = max_depth
        self._transport = transport
        self._async_transport = async_transport
        self.binary = binary
        self.server_resumes = False
        """Whether an answer of this agent declared ``X-AGUI-Resume``: a later request cut
        before its answer's headers is then resumed (``Last-Event-ID: 0``), since the
        run may already be going on; else it is final, as resending could start it twice."""
        self._session: Session | None = None
        self.request_warnings: list[str] = []
        """What preparing the last request had to drop for an old peer."""

    # --- the conversation ---------------------------------------------------------------

    @property
    def session(self) -> Session:
        """
        The session of the current or most recent run.

        Raises:
            RuntimeError: No run has started yet.
        """
        if self._session is None:
            raise RuntimeError("no run has started yet: call run() or run_sync() first")
        return self._session

    @property
    def messages(self) -> list[Any]:
        """The conversation so far (see :attr:`aguikit.Session.messages`)."""
        return list(self.session.messages)

    @property
    def state(self) -> Any:
        """The agent state so far (see :attr:`aguikit.Session.state`)."""
        return self.session.state

    # --- running --------------------------------------------------------------------------

    def _request(self, run_input: RunAgentInput | Mapping[str, Any]) -> dict[str, Any]:
        self.request_warnings = []
        return prepare_input(
            run_input,
            protocol_version=self.protocol_version,
            max_protocol_version=self.max_protocol_version,
            warnings=self.request_warnings,
        )

    def _new_session(self, body: Mapping[str, Any]) -> Session:
        # Every event is handed to the caller as an Update; a second copy kept in the session
        # would grow with the stream, not with the conversation.  The run starts from the
        # state its input carried: its first STATE_DELTA applies to that (the snapshots
        # page: "the value a run starts from is the input's state").
        self._session = Session(
            verify=self.verify,
            validate=self.validate,
            keep_delivered=False,
            state=body.get("state", UNSET),
        )
        return self._session

    def run_sync(self, run_input: RunAgentInput | Mapping[str, Any]) -> Iterator[Update]:
        """
        Run the agent and yield an :class:`Update` per delivered event, synchronously.

        Closing the iterator early (``.close()``, or leaving a ``with closing(...)``)
        closes the connection, and on a resumable answer sends the cancel request first.

        Raises:
            HTTPStatusError: The agent answered non-2xx (the error holds the body's start).
            ContentTypeError: The agent answered 2xx with something other than SSE.
            TransportError: The connection failed or broke mid-stream.
            DecodeError: The answer is not a well-formed event stream.
            SchemaValidationError, UnknownEventTypeError: An event is malformed.
            ProtocolError: An event broke an ordering rule (when ``verify``).
            TruncatedStreamError: The stream ended before the run finished or failed.
        """
        body = self._request(run_input)
        session = self._new_session(body)
        observer = self.observe(body)
        if observer is None:
            for data in self.events(body):
                yield from session.feed(data)
            yield from session.finish()
            return
        with _observe.observing(observer):
            for data in self.events(body, headers=observer.headers()):
                yield from observed(observer, session, session.feed(data))
            yield from observed(observer, session, session.finish())

    async def run(self, run_input: RunAgentInput | Mapping[str, Any]) -> AsyncIterator[Update]:
        """
        Run the agent and yield an :class:`Update` per delivered event.

        Use as ``async for update in client.run(run_input)``.  Leaving the loop early,
        ``aclose()`` or cancelling the task closes the connection, and on a resumable
        answer sends the cancel request first (so leave under
        :func:`contextlib.aclosing`: a generator merely dropped is closed only when the
        event loop finalizes it).

        Raises:
            The same errors as :meth:`run_sync`.
        """
        body = self._request(run_input)
        session = self._new_session(body)
        observer = self.observe(body)
        if observer is None:
            events = self.aevents(body)
            async with aclosing(events):
                async for data in events:
                    for update in session.feed(data):
                        yield update
            for update in session.finish():
                yield update
            return
        with _observe.observing(observer):
            events = self.aevents(body, headers=observer.headers())
            async with aclosing(events):
                async for data in events:
                    for update in observed(observer, session, session.feed(data)):
                        yield update
            for update in observed(observer, session, session.finish()):
                yield update

    def observe(self, body: Mapping[str, Any]) -> _observe.RunObserver | None:
        """The telemetry observer of the run ``body`` asks for (``None``: none configured)."""
        return _observe.observe(self.telemetry, body, side="client")

    def events(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """
        The synchronous twin of :meth:`aevents` (what :meth:`run_sync` folds), resuming a
        dropped resumable stream the same way.
        """
        resume = _Resume(self, body, headers=headers)
        try:
            while True:
                chunks = post_stream(self.url, body, **resume.request(self._transport))
                failure: TransportError | None = None
                try:
                    with closing(chunks):  # leaving early closes the connection now
                        for frame in resume.decode(chunks):
                            yield from resume.take_all(frame)
                            if resume.finished:
                                return
                except TransportError as error:
                    failure = error
                yield from resume.flush(failure)
                if resume.finished or not resume.waited(failure):
                    return
        except GeneratorExit:
            if resume.cancels:
                request = resume.cancel_request(self._transport)
                resume.report_cancel(lambda: collections.deque(post_stream(**request), 0))
            raise

    async def aevents(
        self,
        body: Mapping[str, Any],
        *,
        join: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """
        POST ``body`` (an already prepared request) and yield the answer's decoded wire
        dicts, unfolded: the fetch and decode that :meth:`run` and :class:`aguikit.Agent`
        (whose middleware sits between this and its session) share.  They are the reader's
        output, before the processing model's first stage: nothing is translated, stripped
        or judged yet, so application code should take events from a session
        (:meth:`run`, :class:`aguikit.Agent`), never from here.

        When the server numbers its frames (``id:``) or declares ``X-AGUI-Resume``, and
        the connection drops, or the answer ends before ``RUN_FINISHED``/``RUN_ERROR``, the
        same body is POSTed again with ``Last-Event-ID`` (``0`` when no event had arrived)
        after a capped exponential backoff with jitter, events already delivered are
        dropped, and the caller sees one continuous stream.  A reconnect answered
        ``502``, ``503`` or ``504`` (a proxy or the server's log briefly down) is tried
        again the same way; each reconnect counts against ``max_reconnects`` until the
        stream makes progress (a new numbered event).  A request cut before its answer's
        headers is resumed too when this agent declared resumption before
        (:attr:`server_resumes`): the run may be going on, and a resume that finds no
        run (``404``/``410``, nothing delivered) starts it (the server's claim makes a
        double start impossible).  A stream that is not resumable fails as it always
        did (resending would start the run twice).  With
        ``binary=True`` the first request prefers protobuf; a protobuf answer has no frame
        ids, so it is not resumable, and a reconnect or join asks for SSE only.

        ``headers`` are added to the client's own for this run's requests (the trace
        context :meth:`observe`'s observer carries).

        ``join`` follows a run already in progress (``body["runId"]``) rather than
        starting one: the first request asks for the server's prelude (``Last-Event-ID:
        0`` and ``X-AGUI-Join: prelude``).  The prelude is delivered whole or not at all:
        its frames are held until its last (numbered) one, so a join cut inside it joins
        again without delivering any of it twice.

        Stopped by its caller (closed, or its task cancelled) before the run ended, on an
        answer that declared ``X-AGUI-Resume``, it sends the cancel request (the same body
        with ``X-AGUI-Cancel: 1``, at most 5 s, a failure logged, never raised), since such
        a run outlives its connection; a join stops nothing but its own reading.

        Raises:
            HTTPStatusError, ContentTypeError, TransportError, DecodeError: As :meth:`run`.
            TruncatedStreamError: The stream dropped and could not be resumed (the server
                refused, or ``max_reconnects`` attempts failed); names the last event.
        """
        resume = _Resume(self, body, join=join, headers=headers)
        try:
            while True:
                chunks = apost_stream(self.url, body, **resume.request(self._async_transport))
                failure: TransportError | None = None
                try:
                    # An async generator is not closed when dropped: close the request
                    # explicitly, so leaving this loop early closes the connection now.
                    async with aclosing(chunks), aclosing(resume.adecode(chunks)) as frames:
                        async for frame in frames:
                            for data in resume.take_all(frame):
                                yield data
                            if resume.finished:
                                return
                except TransportError as error:
                    failure = error
                for data in resume.flush(failure):
                    yield data
                if resume.finished:
                    return
                delay = resume.after(failure)
                if delay is None:
                    return
                await asyncio.sleep(delay)
        except (GeneratorExit, asyncio.CancelledError):
            # The caller stopped the run (left the loop, closed the iterator, cancelled
            # the task, Agent.abort): a resumable run outlives its connection, so say so.
            if resume.cancels:
                await resume.acancel()
            raise


def observed(
    observer: _observe.RunObserver, session: Session, updates: list[Update]
) -> list[Update]:
    """Tell ``observer`` the events ``updates`` deliver and the warnings their feed raised."""
    for update in updates:
        observer.event(update.event)
    for warning in session.last_warnings:
        observer.warning(warning.code, warning.event_index)
    return updates


class _Resume:
    """
    One request's reconnect bookkeeping, shared by the sync and async loops: the ids
    delivered, the last event, whether the server can resume, and the backoff.
    """

    def __init__(
        self,
        client: AgentClient,
        body: Mapping[str, Any],
        *,
        join: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.join = join
        self.headers = {**client.headers, **(headers or {})}
        self.client = client
        self.body = body
        self.last_id: str | None = None
        self.last_type: str | None = None
        self.numbered = False
        self.delivered: set[str] = set()
        self.earlier: frozenset[str] = frozenset()
        self.attempt = 0
        self.declared: list[httpx.Headers] = []
        self.finished = False
        self.requests = 0
        self.chosen: list[str] = []
        """The media type the agent chose for the current answer (told by the fetch)."""
        self.answered = False
        """Whether the current request's answer headers arrived."""
        self.assumed = False
        """Resuming a request cut before its headers, on an agent known to resume."""
        self.restart = False
        """The next request starts the run (a resume after a cut before the headers found
        no run: it never started)."""
        self.held: list[dict[str, Any]] = []
        """A join's prelude frames, held until its last, numbered, one arrives."""

    @property
    def binary_answer(self) -> bool:
        """The current answer is length-prefixed protobuf: no frame ids, no resuming."""
        return bool(self.chosen) and self.chosen[-1] == PROTO_MEDIA_TYPE

    @property
    def resumable(self) -> bool:
        """The server numbered its SSE frames or declared ``X-AGUI-Resume`` on SSE."""
        if self.binary_answer:
            return False
        return self.numbered or _declares_resume(self.declared) or self.assumed

    def answer_headers(self, headers: httpx.Headers) -> None:
        """The current answer's headers arrived (an accepted 2xx answer)."""
        self.answered = True
        self.declared.append(headers)
        if _declares_resume([headers]):
            self.client.server_resumes = True

    def request(self, transport: Any) -> dict[str, Any]:
        """The fetch's options for the next request (``Last-Event-ID`` on a reconnect)."""
        self.earlier = frozenset(self.delivered)
        headers = dict(self.headers)
        restart, self.restart = self.restart, False
        if (self.resumable or self.join) and not restart:
            headers["Last-Event-ID"] = self.last_id or "0"
        if self.join and self.last_id is None:
            headers["X-AGUI-Join"] = "prelude"
        self.answered = False
        # Binary only on the first request of a new run: a join or a reconnect resumes by
        # SSE frame id, which the binary transport does not carry.
        binary = self.client.binary and not self.join and self.requests == 0
        self.requests += 1
        self.chosen.clear()
        return {
            "headers": headers,
            "timeout": self.client.timeout,
            "transport": transport,
            "accept": BOTH if binary else SSE_ONLY,
            "on_media_type": self.chosen.append,
            "on_headers": self.answer_headers,
        }

    def decode(self, chunks: Iterator[bytes]) -> Iterator[Frame | dict[str, Any]]:
        """The answer's SSE frames, or its protobuf events, by the media type chosen."""
        # The first chunk comes after the headers: by then the agent's choice is known.
        first = next(chunks, None)
        stream = itertools.chain(() if first is None else (first,), chunks)
        client = self.client
        if self.binary_answer:
            yield from iter_proto_wire(stream, source=client.url)
        else:
            yield from iter_frames(
                stream, source=client.url, max_frame_bytes=client.max_frame_bytes
            )

    async def adecode(
        self, chunks: AsyncIterator[bytes]
    ) -> AsyncGenerator[Frame | dict[str, Any], None]:
        """The asynchronous twin of :meth:`decode` (the caller closes ``chunks``)."""
        first = await anext(chunks, None)

        async def stream() -> AsyncIterator[bytes]:
            if first is not None:
                yield first
            async for chunk in chunks:
                yield chunk

        client = self.client
        if self.binary_answer:
            async for data in aiter_proto(stream(), source=client.url):
                yield data
        else:
            async for frame in aiter_frames(
                stream(), source=client.url, max_frame_bytes=client.max_frame_bytes
            ):
                yield frame

    def take_all(self, frame: Frame | dict[str, Any]) -> list[dict[str, Any]]:
        """
        The events the frame delivers: its own (a protobuf answer's events come
        decoded); none for one delivered before the reconnect, or for a prelude frame
        held until the prelude's numbered last; the whole prelude with that one.
        """
        client = self.client
        if isinstance(frame, dict):
            data = frame
        else:
            if frame.id is not None and frame.id in self.earlier:
                return []
            data = frame_object(frame, source=client.url, max_depth=client.max_depth)
            if frame.id is None and self.join and self.last_id is None:
                self.held.append(data)
                return []
            if frame.id is not None:
                self.numbered = True
                self.delivered.add(frame.id)
                self.last_id = frame.id
                self.attempt = 0  # progress: the reconnects so far are forgiven
        taken, self.held = [*self.held, data], []
        self.note(data)
        return taken

    def note(self, data: Mapping[str, Any]) -> None:
        """The last event delivered, and whether it ended the requested run: a
        ``RUN_FINISHED`` of another run (a thread's history replayed ahead of the
        requested run, which the SSE binding allows on one response) does not end the
        answer; a ``RUN_ERROR`` names no run and ends it."""
        kind = data.get("type")
        self.last_type = kind if isinstance(kind, str) else None
        self.finished = self.last_type in _TERMINAL and (
            kind == "RUN_ERROR" or data.get("runId") in (None, self.body.get("runId"))
        )

    def flush(self, failure: TransportError | None) -> list[dict[str, Any]]:
        """The answer is over: prelude frames held without their numbered last are
        delivered if it ended cleanly (an agent that numbers nothing), dropped if it
        broke (the join asks for a whole prelude again)."""
        held, self.held = self.held, []
        if failure is None and self.last_type in _TERMINAL:
            # An answer that ends cleanly after a terminal event is whole, whichever run
            # that event names (a producer that ran under an id of its own, say).
            self.finished = True
        if failure is not None or not held:
            return []
        self.note(held[-1])
        return held

    def after(self, failure: TransportError | None) -> float | None:
        """
        The answer ended (``failure`` is ``None``) or failed: the seconds to wait before
        reconnecting, or ``None`` when the stream is simply over.

        Raises:
            TransportError: ``failure``, when the stream cannot be resumed at all.
            TruncatedStreamError: The server refused the resume, or too many failed.
        """
        if isinstance(failure, HTTPStatusError):
            status = failure.status_code
            if self.assumed and self.last_id is None and status in _NO_RUN:
                self.restart = True  # the cut request never started the run: start it
            elif self.requests > 1 and status in _RETRYABLE:
                pass  # a proxy or the server's log, briefly down: try again, counted
            elif self.requests == 1:  # the first request: the answer, not a resume, failed
                raise failure
            else:
                raise self.unresumable(str(failure)) from failure
        elif failure is not None and not self.answered and self.client.server_resumes:
            self.assumed = True  # cut before the headers: the run may be going on
        if not self.resumable:
            if failure is not None:
                raise failure
            return None
        reason = "the answer ended before the run did" if failure is None else str(failure)
        self.attempt += 1
        client = self.client
        if self.attempt > client.max_reconnects:
            raise self.unresumable(f"{reason} ({client.max_reconnects} reconnects failed)")
        delay = min(client.max_backoff, client.backoff * 2 ** (self.attempt - 1))
        return float(delay) * random.uniform(0.5, 1.0)

    @property
    def cancels(self) -> bool:
        """Whether stopping now sends a cancel request: the run is not over, this client
        started it (a joiner leaving stops nothing), and the answer declared
        ``X-AGUI-Resume``.  Only that declaration says the server knows the request: to
        any other server (numbered frames alone, or no answer yet) the run's body sent
        again would start the run a second time."""
        return (
            not self.finished
            and not self.join
            and not self.binary_answer
            and _declares_resume(self.declared)
        )

    def cancel_request(self, transport: Any) -> dict[str, Any]:
        """The fetch's arguments for the cancel request: the run's own body, plus
        ``X-AGUI-Cancel: 1`` (``docs/resume.md``, "Stopping a run")."""
        client = self.client
        return {
            "url": client.url,
            "body": self.body,
            "headers": {**client.headers, "X-AGUI-Cancel": "1"},
            "timeout": _CANCEL_TIMEOUT,
            "transport": transport,
            "require_event_stream": False,
        }

    async def acancel(self) -> None:
        """Send the cancel request, waiting at most :data:`_CANCEL_TIMEOUT` seconds; a
        refusal or failure is logged, never raised (the caller is already stopping)."""

        request = self.cancel_request(self.client._async_transport)

        async def send() -> None:
            async with aclosing(apost_stream(**request)) as answer:
                async for _ in answer:
                    pass

        try:
            await asyncio.wait_for(send(), _CANCEL_TIMEOUT)
        except (AguiError, TimeoutError) as error:
            self.cancel_failed(error)

    def report_cancel(self, send: Callable[[], object]) -> None:
        """Send the cancel request synchronously (``send``), logging a failure."""
        try:
            send()
        except AguiError as error:
            self.cancel_failed(error)

    def cancel_failed(self, error: Exception) -> None:
        LOGGER.info(
            "the cancel request for run %r got no cancellation (%s): the server ends it once "
            "its resume grace window passes with no reader",
            self.body.get("runId"),
            error,
        )

    def waited(self, failure: TransportError | None) -> bool:
        """:meth:`after`, sleeping the delay here (the sync loop); ``False``: over."""
        delay = self.after(failure)
        if delay is not None:
            time.sleep(delay)
        return delay is not None

    def unresumable(self, reason: str) -> TruncatedStreamError:
        """The error of a stream that dropped for good, naming the last event received."""
        run_id = self.body.get("runId")
        where = (
            f"after event {self.last_id} ({self.last_type})"
            if self.last_id
            else "before its first event"
        )
        return TruncatedStreamError(
            "AGUI-V006",
            "truncated-stream",
            f"{render_message('AGUI-V006', entity_id=run_id)}: the connection dropped {where} "
            f"and the stream could not be resumed: {reason}",
            event_type=self.last_type,
            entity_id=run_id if isinstance(run_id, str) else None,
        )
