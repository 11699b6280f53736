"""
One consumer's view of one stream: every stage of the pipeline, in order, behind one call.

A UI does not want to know that a chunk must be expanded before it can be verified, that a
``futureProp`` must be stripped before it is delivered, or that a patch that does not apply
must leave the state alone.  :class:`Session` chains the stages so each event goes through
all of them exactly once::

    raw dict ─► receiver boundary ─► chunk normalizer ─► verifier ─► applier
                (translate, then     (expand *_CHUNK)    (ordering)  (messages, state)
                 validate, strip,
                 warn)

That is the specification's processing order (``basic/processing.mdx``) with no middleware;
a consumer with middleware calls :meth:`Session.translate` before it and :meth:`Session.feed`
after it (``docs/DESIGN.md``, "The processing order is the specification's").

*Atomic per input.*  Everything one input expands into is verified before any of it is
applied, so after an error the messages and state are exactly what they were before the
failing input, and the session stays readable.  A protocol or schema error is fatal to the
stream: the session keeps it in :attr:`Session.error` and re-raises it on the next
:meth:`~Session.feed`, because the normalizer and verifier cannot be rewound to "before"
cheaply and a half-judged stream must not be judged further.

*Warnings, not prints.*  Everything the receiver tolerates (a dropped event type, a
stripped member, a deprecated shape translated, a newer protocol version, a patch that did
not apply) becomes a :class:`SessionWarning` in :attr:`Session.warnings` and a record on
the ``aguikit`` logger.  A clean stream produces none; a hostile one may earn a warning per
event, so the list keeps the first ``max_warnings`` and :attr:`Session.warning_count`
counts them all (:attr:`Session.last_warnings` has each feed's own, however many).

*Recovering, for a checker.*  ``recover=True`` keeps the session going after a protocol or
schema error: the failing input is treated as not delivered (the verifier already leaves
its state as it was) and the next :meth:`~Session.feed` is judged as if it had never
arrived.  That is what ``aguikit check`` needs to report every violation of a stream, not
only the first; a library consumer keeps the default, because what follows an impossible
event may only be a consequence of it (the chunk normalizer, unlike the verifier, may
already have taken part of the failing input into account).

*Outcomes.*  Every run the stream opens gets a :class:`RunOutcome` in :attr:`Session.runs`:
finished, errored (with the producer's message and code), interrupted (with the
interrupts it waits on), cancelled, or still running.  A consumer that only wants to know
"did my run succeed?" reads ``session.runs[-1].status``.

*Truncation is an error.*  :meth:`Session.finish` raises
:class:`~aguikit.errors.TruncatedStreamError` when the stream ended inside a run: a run
with no outcome must not be reported as having succeeded (the corpus's
``truncated-stream-fails-the-run``; its older "admitted gap" fixture pins the opposite and
is recorded as a divergence in the conformance tests).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import attrs
from attrs.exceptions import FrozenInstanceError
from mypy_extensions import mypyc_attr

from ._generated.models import (
    Event,
    Interrupt,
    Message,
    ReasoningMessage,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
)
from ._generated.registry import PROTOCOL_VERSION
from ._guard import malformed_event
from .apply import Applier
from .catalogue import RULES_BY_SYMBOL, render_message
from .changes import NOTHING, Changed, Record, Subagent, compiled
from .chunks import ChunkNormalizer
from .errors import AguiError, PatchError, SchemaIssue
from .limits import MAX_OPEN_ENTITIES, MAX_WARNINGS
from .patch import UNSET
from .receiver import Receiver
from .verify import Verifier

__all__ = ["RunOutcome", "RunStatus", "Session", "SessionWarning", "Update"]

RunStatus = Literal["running", "finished", "error", "interrupted", "cancelled"]
"""How a run ended, or ``running`` while it has not."""

LOGGER: Final = logging.getLogger("aguikit")
_LIFECYCLE: Final = frozenset({RunStartedEvent, RunFinishedEvent, RunErrorEvent})


class Update(Record):
    """
    One delivered event and what applying it changed: the unit a consumer acts on.

    ``event`` is the typed event as delivered to the application (after the receiver
    boundary and chunk expansion, so one received chunk may deliver several, and a dropped
    unknown event none); ``change`` says what applying it changed (a message appended,
    text grown, state replaced...), for a view that redraws only that.
    :meth:`Session.feed` returns one per delivered event and the HTTP client yields them as
    they are.  An immutable value (a :class:`~aguikit.changes.Record`, built once per
    event, so written by hand rather than with attrs).
    """

    __match_args__: tuple[str, ...] = ("event", "change")

    event: Final[Event]
    change: Final[Changed]

    def __init__(self, event: Event, change: Changed) -> None:
        if _COMPILED:
            self.event = event
            self.change = change
        else:
            self.__dict__.update(event=event, change=change)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError()

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError()

    @property
    def changes(self) -> tuple[Changed, ...]:
        """
        ``(change,)``: the shape of the 0.1 ``Update``, which always held exactly one.

        .. deprecated:: 0.2.0  Use :attr:`change`.
        """
        warnings.warn(
            "Update.changes is deprecated: an update carries exactly one change, Update.change",
            DeprecationWarning,
            stacklevel=2,
        )
        return (self.change,)


_COMPILED: Final = compiled(Update.__init__)


@attrs.frozen
class SessionWarning:
    """
    Something the session tolerated instead of failing on.

    ``code`` is stable and machine-readable: the symbol of a row of
    :mod:`aguikit.catalogue` (``unknown-member``, ``patch-failed``...), whose id is
    :attr:`rule`, so ``aguikit rules CODE`` explains it; ``event_index`` is the position of
    the input that caused it (``None`` from :meth:`Session.finish`).
    """

    code: str
    message: str
    event_index: int | None

    @property
    def rule(self) -> str:
        """The catalogue id of this warning (``AGUI-W002`` for ``unknown-member``)."""
        return RULES_BY_SYMBOL[self.code].id


@attrs.frozen
class RunOutcome:
    """
    How one run of the stream ended: what a consumer, or ``aguikit check``, reports per run.

    A ``RUN_ERROR`` is valid protocol, so a stream that ends in one is not a broken stream,
    but it is a run that failed; keeping the outcome lets a caller tell the two apart
    without re-reading the events.  ``started_at`` and ``ended_at`` are the 0-based indexes
    of the inputs that opened and closed the run (``started_at`` is ``None`` for a
    ``RUN_ERROR`` that arrived before any ``RUN_STARTED``).

    .. versionadded:: 0.3.0
    """

    run_id: str | None
    thread_id: str | None
    status: RunStatus
    started_at: int | None = None
    ended_at: int | None = None
    message: str | None = None
    """The producer's ``RUN_ERROR.message``."""
    code: str | None = None
    """The producer's ``RUN_ERROR.code``, when it sent one."""
    interrupts: tuple[Interrupt, ...] = ()
    """What an interrupted run waits on."""


# Subclassable from Python in the compiled build too (docs/DESIGN.md, "The hot core is compiled").
@mypyc_attr(allow_interpreted_subclasses=True)
class Session:
    """
    Consume one AG-UI stream: feed events (typed or raw dicts), read messages and state.

    Args:
        verify: Check ordering and attribution with :class:`aguikit.verify.Verifier`.
        validate: Schema-check raw dicts (strictly, stripping undeclared material with a
            warning).  ``False`` trusts the dicts' shape and only strips undeclared
            top-level members.
        messages: The conversation to start from (copied).
        state: The state to start from (copied); defaults to ``{}``.
        protocol_version: The protocol version this consumer speaks, compared with each
            ``RUN_STARTED.protocolVersion``.
        thread_id: The ``threadId`` of the request that opened the stream, when known.
        patch_errors: ``"warn"`` (the corpus's rule: a ``STATE_DELTA`` or ``ACTIVITY_DELTA``
            that does not apply is a warning and the target stays as it was) or ``"raise"``
            (a :class:`~aguikit.errors.PatchError`, still leaving the target unchanged).
        keep_delivered: Record every delivered event in :attr:`delivered`.
        max_open_entities: Most entities open at once in a run, for the verifier and the
            chunk normalizer (``AGUI-V093`` past it); see :mod:`aguikit.limits`.
        max_warnings: Most warnings kept in :attr:`warnings`; later ones are still counted
            in :attr:`warning_count`, logged and reported in :attr:`last_warnings`.
        collect_issues: Record in :attr:`last_issues` every way each raw dict breaks the
            strict schema, before the receiver repairs it (what a checker reports).
        recover: After a protocol or schema error, treat the failing input as not
            delivered and keep judging the inputs after it, instead of keeping the error
            and re-raising it (the default, for consumers).  For checkers that report
            every violation; later errors may be consequences of the first.
        keep_text: ``False`` forgets each message's text and each tool call's arguments
            once they end (:class:`~aguikit.apply.Applier`), so memory does not grow with
            the conversation's text: for a checker, which reports ids and counts.

    .. versionchanged:: 0.3.0  ``recover``, ``keep_text``; outcomes in :attr:`runs`.
    """

    def __init__(
        self,
        *,
        verify: bool = True,
        validate: bool = True,
        messages: Iterable[Message] = (),
        state: Any = UNSET,
        protocol_version: str = PROTOCOL_VERSION,
        thread_id: str | None = None,
        patch_errors: Literal["warn", "raise"] = "warn",
        keep_delivered: bool = True,
        max_open_entities: int = MAX_OPEN_ENTITIES,
        max_warnings: int = MAX_WARNINGS,
        collect_issues: bool = False,
        recover: bool = False,
        keep_text: bool = True,
    ) -> None:
        self._recover = recover
        self._runs: list[RunOutcome] = []
        self._warnings: list[SessionWarning] = []
        self._warning_count = 0
        self._max_warnings = max_warnings
        self._fresh: list[SessionWarning] = []
        self._index = 0
        self._current: int | None = None
        self._receiver = Receiver(
            validate=validate,
            protocol_version=protocol_version,
            on_warning=self._warn,
            collect_issues=collect_issues,
        )
        self._normalizer = ChunkNormalizer(max_open_entities=max_open_entities)
        self._verifier = (
            Verifier(thread_id=thread_id, max_open_entities=max_open_entities) if verify else None
        )
        self._applier = Applier(messages, state, on_warning=self._warn, keep_text=keep_text)
        self._raise_patch_errors = patch_errors == "raise"
        self._keep = keep_delivered
        self._delivered: list[Event] = []
        self._last: list[Update] = []
        self._error: AguiError | None = None

    # ---- reading --------------------------------------------------------------------------

    @property
    def applier(self) -> Applier:
        """The applier behind the session, for the views it offers beyond these."""
        return self._applier

    @property
    def normalizer(self) -> ChunkNormalizer:
        """The chunk normalizer behind the session, for the streams it holds in flight."""
        return self._normalizer

    @property
    def messages(self) -> list[Message]:
        """The conversation so far, materialised (see :attr:`Applier.messages`)."""
        return self._applier.messages

    @property
    def state(self) -> Any:
        """The application state: any JSON value."""
        return self._applier.state

    @property
    def reasoning(self) -> list[ReasoningMessage]:
        """The reasoning messages alone, in order."""
        return self._applier.reasoning

    @property
    def subagents(self) -> list[Subagent]:
        """The subagent invocations announced so far."""
        return self._applier.subagents

    @property
    def interrupts(self) -> list[Interrupt]:
        """The interrupts the last ``RUN_FINISHED`` paused on."""
        return self._applier.interrupts

    @property
    def thread_id(self) -> str | None:
        """The thread of the last ``RUN_STARTED``."""
        return self._applier.thread_id

    @property
    def run_id(self) -> str | None:
        """The run id of the last ``RUN_STARTED``."""
        return self._applier.run_id

    @property
    def delivered(self) -> list[Event]:
        """The events delivered to the application, in order, after the boundary and chunk
        expansion (what a subscriber would have seen)."""
        return list(self._delivered)

    @property
    def warnings(self) -> list[SessionWarning]:
        """The warnings so far, in order: every one, up to ``max_warnings`` of them."""
        return list(self._warnings)

    @property
    def warning_count(self) -> int:
        """How many warnings there have been, including those past ``max_warnings``."""
        return self._warning_count

    @property
    def last_warnings(self) -> list[SessionWarning]:
        """
        The warnings the latest :meth:`feed` or :meth:`finish` raised, all of them whatever
        ``max_warnings`` says; costs nothing per call, unlike :attr:`warnings`.
        """
        return self._fresh

    @property
    def last_issues(self) -> list[SchemaIssue]:
        """
        With ``collect_issues``: every way the latest raw dict broke the strict schema,
        found while it was validated for delivery (an undeclared member the receiver then
        stripped included), so a checker reports them without validating twice.
        """
        return self._receiver.last_issues

    @property
    def runs(self) -> list[RunOutcome]:
        """Every run the stream opened (or failed before opening), in order, with its outcome."""
        return list(self._runs)

    @property
    def error(self) -> AguiError | None:
        """The fatal error that ended the stream, if one did."""
        return self._error

    # ---- feeding --------------------------------------------------------------------------

    def _warn(self, code: str, message: str) -> None:
        warning = SessionWarning(code, message, self._current)
        self._warning_count += 1
        if len(self._warnings) < self._max_warnings:
            self._warnings.append(warning)
        self._fresh.append(warning)
        LOGGER.warning("%s (event %s): %s", code, self._current, message)

    def feed(self, event: Event | Mapping[str, Any]) -> list[Update]:
        """
        Take one event through every stage.

        Args:
            event: A typed event, or a decoded wire dict (validated when ``validate``).

        Returns:
            One :class:`Update` per delivered event, in order: the event and what applying
            it changed (empty when the input was dropped; several when a chunk expanded).

        .. versionchanged:: 0.2.0  Returns :class:`Update` values, not bare changes.

        Raises:
            SchemaValidationError: a raw dict has a malformed known field.
            UnknownEventTypeError: a raw dict has no ``type``.
            ProtocolError: the stream broke an ordering, attribution or chunk rule.
            PatchError: only with ``patch_errors="raise"``.

            Every error carries ``event_index``; messages and state are left as they were.
        """
        if self._error is not None:
            raise self._error
        index = self._index
        self._index = index + 1
        self._current = index
        if self._fresh:
            self._fresh = []
        try:
            received = self._receiver.receive(event)
            if received is None:
                self._last = []
                return []
            expanded = self._normalizer.normalize(received)
            verifier = self._verifier
            if verifier is not None:
                for item in expanded:
                    verifier.verify(item)
        except AguiError as error:
            self._last = []
            error.event_index = index
            self._fail(error)
            raise
        except (TypeError, AttributeError, ValueError, RecursionError) as exc:
            # A typed event holding a value no wire document could (a float protocol
            # version, a list id) is trusted by the boundary; report it, do not crash.
            self._last = []
            malformed = malformed_event(event, exc)
            malformed.event_index = index
            self._fail(malformed)
            raise malformed from None
        return self._apply(expanded, index)

    def translate(self, event: Event | Mapping[str, Any]) -> Event | Mapping[str, Any]:
        """
        Only the first stage of :meth:`feed`, the compatibility boundary, for a consumer that
        runs middleware between it and the rest.

        The processing model orders a consumer's stages: compatibility boundary, middleware,
        enforcement, chunk expansion, verification, application.  :meth:`feed` runs every
        stage but middleware, so a pipeline with middleware (:class:`aguikit.Agent`) calls
        this first, hands the result to its middleware, then feeds what the middleware
        yields: a retired ``THINKING_*`` event reaches the middleware already translated,
        and an unknown member or event type still there (see
        :meth:`aguikit.receiver.Receiver.translate`).  Feeding the result translates
        nothing twice.

        Warnings carry the index the next :meth:`feed` takes.

        .. versionadded:: 0.3.0
        """
        self._current = self._index
        return self._receiver.translate(event)

    def feed_all(self, events: Iterable[Event | Mapping[str, Any]]) -> list[Update]:
        """Feed every event of ``events`` in order; the updates of all of them."""
        updates: list[Update] = []
        for event in events:
            updates.extend(self.feed(event))
        return updates

    def finish(self) -> list[Update]:
        """
        The transport ended: close what the chunk normalizer still owes, then check that
        the stream ended where it may.

        Raises:
            TruncatedStreamError: the stream ended inside a run, or before any run; its
                ``event_index`` is the number of inputs fed, one past the last.
        """
        if self._error is not None:
            raise self._error
        self._current = None
        self._fresh = []
        try:
            expanded = self._normalizer.finish()
            verifier = self._verifier
            if verifier is not None:
                for item in expanded:
                    verifier.verify(item)
        except AguiError as error:
            error.event_index = self._index
            self._fail(error)
            raise
        updates = self._apply(expanded, None)
        if self._verifier is not None:
            try:
                self._verifier.finish()
            except AguiError as error:
                error.event_index = self._index  # where the stream ended: one past the last
                self._fail(error)
                raise
        return updates

    def _fail(self, error: AguiError) -> None:
        """Keep ``error`` as fatal, unless this session recovers (a checker's)."""
        if not self._recover:
            self._error = error

    def _record(self, event: Event, index: int | None) -> None:
        """Keep each run's outcome as its lifecycle events are delivered."""
        runs = self._runs
        current = runs[-1] if runs and runs[-1].status == "running" else None
        if isinstance(event, RunStartedEvent):
            runs.append(RunOutcome(event.run_id, event.thread_id, "running", started_at=index))
        elif isinstance(event, RunFinishedEvent):
            outcome = event.outcome
            status: RunStatus = "finished"
            interrupts: tuple[Interrupt, ...] = ()
            if isinstance(outcome, RunFinishedInterruptOutcome):
                status, interrupts = "interrupted", tuple(outcome.interrupts)
            elif isinstance(outcome, RunFinishedCancelledOutcome):
                status = "cancelled"
            ended = RunOutcome(
                event.run_id,
                event.thread_id,
                status,
                current.started_at if current is not None else None,
                index,
                interrupts=interrupts,
            )
            if current is not None:
                runs[-1] = ended
            else:
                runs.append(ended)
        elif isinstance(event, RunErrorEvent):
            # Closes the running run.  A late error after RUN_FINISHED fails the run that
            # finished: "A consumer MUST treat the run as failed in that case" (the
            # lifecycle page), so its outcome becomes the error, not a second entry beside
            # a success.  One that failed before any run started is a run of its own, no id.
            late = current is None and bool(runs) and runs[-1].status != "error"
            base = current or (runs[-1] if late else RunOutcome(None, None, "error"))
            failed = attrs.evolve(
                base, status="error", ended_at=index, message=event.message, code=event.code
            )
            if current is not None or late:
                runs[-1] = failed
            else:
                runs.append(failed)

    @property
    def last_delivered(self) -> list[Event]:
        """
        The events the latest :meth:`feed` or :meth:`finish` delivered.

        .. deprecated:: 0.2.0  :meth:`feed` returns each event with its change as an
           :class:`Update`; there is nothing left to pair.
        """
        warnings.warn(
            "Session.last_delivered is deprecated: feed() returns Update(event, change) values",
            DeprecationWarning,
            stacklevel=2,
        )
        return [update.event for update in self._last]

    def _apply(self, events: list[Event], index: int | None) -> list[Update]:
        applier = self._applier
        keep = self._keep
        updates: list[Update] = []
        self._last = updates
        for item in events:
            try:
                change = applier.apply(item)
            except PatchError as failed:
                failed.event_index = index
                if self._raise_patch_errors:
                    raise
                self._warn(
                    "patch-failed",
                    render_message("AGUI-P001", target=failed.target, detail=str(failed)),
                )
                change = NOTHING
            except AguiError as fatal:
                # Only a shape the boundary trusted (validate=False) gets here: fatal.
                fatal.event_index = index
                self._fail(fatal)
                raise
            if type(item) in _LIFECYCLE:
                self._record(item, index)
            updates.append(Update(item, change))
            if keep:
                self._delivered.append(item)
        return updates
