"""
One consumer's view of one stream: every stage of the pipeline, in order, behind one call.

A UI does not want to know that a chunk must be expanded before it can be verified, that a
``futureProp`` must be stripped before it is delivered, or that a patch that does not apply
must leave the state alone.  :class:`Session` chains the stages so each event goes through
all of them exactly once::

    raw dict ─► receiver boundary ─► chunk normalizer ─► verifier ─► applier
                (validate, strip,    (expand *_CHUNK)    (ordering)  (messages, state)
                 translate, warn)

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

*Truncation is an error.*  :meth:`Session.finish` raises
:class:`~aguikit.errors.TruncatedStreamError` when the stream ended inside a run: a run
with no outcome must not be reported as having succeeded (the corpus's
``truncated-stream-fails-the-run``; its older "admitted gap" fixture pins the opposite and
is recorded as a divergence in the conformance tests).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import attrs

from ._generated.models import Event, Interrupt, Message, ReasoningMessage
from ._generated.registry import PROTOCOL_VERSION
from .apply import NOTHING, Applier, Changed, Subagent
from .chunks import ChunkNormalizer, malformed_event
from .errors import AguiError, PatchError
from .limits import MAX_OPEN_ENTITIES, MAX_WARNINGS
from .receiver import Receiver

__all__ = ["Session", "SessionWarning"]

LOGGER: Final = logging.getLogger("aguikit")

_UNSET: Final[Any] = object()


@attrs.frozen
class SessionWarning:
    """
    Something the session tolerated instead of failing on.

    ``code`` is stable and machine-readable (``unknown-event``, ``unknown-member``,
    ``legacy-null``, ``deprecated-event``, ``lossy-translation``, ``minted-id``,
    ``protocol-version-newer``, ``protocol-version-uninterpretable``, ``patch-failed``,
    ``activity-missing``, ``id-collision``, ``unknown-tool-call``, ``tool-call-renamed``);
    ``event_index`` is the position of the input that caused it (``None`` from
    :meth:`Session.finish`).
    """

    code: str
    message: str
    event_index: int | None


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
    """

    def __init__(
        self,
        *,
        verify: bool = True,
        validate: bool = True,
        messages: Iterable[Message] = (),
        state: Any = _UNSET,
        protocol_version: str = PROTOCOL_VERSION,
        thread_id: str | None = None,
        patch_errors: Literal["warn", "raise"] = "warn",
        keep_delivered: bool = True,
        max_open_entities: int = MAX_OPEN_ENTITIES,
        max_warnings: int = MAX_WARNINGS,
    ) -> None:
        self._warnings: list[SessionWarning] = []
        self._warning_count = 0
        self._max_warnings = max_warnings
        self._fresh: list[SessionWarning] = []
        self._index = 0
        self._current: int | None = None
        self._receiver = Receiver(
            validate=validate, protocol_version=protocol_version, on_warning=self._warn
        )
        self._normalizer = ChunkNormalizer(max_open_entities=max_open_entities)
        if verify:
            from .verify import Verifier

            self._verifier: Any = Verifier(thread_id=thread_id, max_open_entities=max_open_entities)
        else:
            self._verifier = None
        if state is _UNSET:
            self._applier = Applier(messages, on_warning=self._warn)
        else:
            self._applier = Applier(messages, state, on_warning=self._warn)
        self._raise_patch_errors = patch_errors == "raise"
        self._keep = keep_delivered
        self._delivered: list[Event] = []
        self._last: list[Event] = []
        self._error: AguiError | None = None
        self._finished = False

    # ---- reading --------------------------------------------------------------------------

    @property
    def applier(self) -> Applier:
        """The applier behind the session, for the views it offers beyond these."""
        return self._applier

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

    def feed(self, event: Event | Mapping[str, Any]) -> list[Changed]:
        """
        Take one event through every stage.

        Args:
            event: A typed event, or a decoded wire dict (validated when ``validate``).

        Returns:
            What each delivered event changed, in order (empty when the input was dropped).

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
        self._last = []
        self._fresh = []
        try:
            received = self._receiver.receive(event)
            if received is None:
                return []
            expanded = self._normalizer.normalize(received)
            verifier = self._verifier
            if verifier is not None:
                for item in expanded:
                    verifier.verify(item)
        except AguiError as error:
            error.event_index = index
            self._error = error
            raise
        except (TypeError, AttributeError, ValueError, RecursionError) as exc:
            # A typed event holding a value no wire document could (a float protocol
            # version, a list id) is trusted by the boundary; report it, do not crash.
            malformed = malformed_event(event, exc)
            malformed.event_index = index
            self._error = malformed
            raise malformed from None
        return self._apply(expanded, index)

    def feed_all(self, events: Iterable[Event | Mapping[str, Any]]) -> list[Changed]:
        """Feed every event of ``events`` in order; the changes of all of them."""
        changes: list[Changed] = []
        for event in events:
            changes.extend(self.feed(event))
        return changes

    def finish(self) -> list[Changed]:
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
            self._error = error
            raise
        changes = self._apply(expanded, None)
        self._finished = True
        if self._verifier is not None:
            try:
                self._verifier.finish()
            except AguiError as error:
                error.event_index = self._index  # where the stream ended: one past the last
                self._error = error
                raise
        return changes

    @property
    def last_delivered(self) -> list[Event]:
        """
        The events the latest :meth:`feed` or :meth:`finish` delivered, aligned one to one
        with the :class:`Changed` records it returned.  Unlike :attr:`delivered` it costs
        nothing per call and works with ``keep_delivered=False``, which is what a consumer
        pairing events with changes over a long stream wants.
        """
        return self._last

    def _apply(self, events: list[Event], index: int | None) -> list[Changed]:
        self._last = events
        applier = self._applier
        keep = self._keep
        changes: list[Changed] = []
        for item in events:
            try:
                changes.append(applier.apply(item))
            except PatchError as error:
                error.event_index = index
                if self._raise_patch_errors:
                    raise
                what = "state" if error.target == "state" else error.target
                self._warn(
                    "patch-failed",
                    f"Failed to apply {what} patch; it was left as it was: {error}",
                )
                changes.append(NOTHING)
            except AguiError as error:
                # Only a shape the boundary trusted (validate=False) gets here: fatal.
                error.event_index = index
                self._error = error
                raise
            if keep:
                self._delivered.append(item)
        return changes
