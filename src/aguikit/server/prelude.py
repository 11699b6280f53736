"""
A late joiner's prelude: a run in progress restated in a few events, so a second tab or a
dashboard can follow the run live without downloading every token of its log.

The log of a run is the truth, and replaying it from event 1 is always correct; it is also
as long as the answer so far.  A client that joins late only needs what the log *adds up
to*: the conversation, the state, and what is still open, so that the live events that
follow (a ``TEXT_MESSAGE_CONTENT`` for a message opened long ago, a ``SUBAGENT_FINISHED``,
a ``STEP_FINISHED`` inside a subagent) are legal continuations for it too.  The prelude is
that, built from the same two pieces a consumer already has: a :class:`~aguikit.Session`
folds the log into messages and state, and a :class:`~aguikit.verify.Verifier` says what
is open and who owns it (:meth:`~aguikit.verify.Verifier.open_entities`).

In order (``docs/resume.md`` is the contract, for an implementer in another language):

1. the run's ``RUN_STARTED`` as logged;
2. one ``MESSAGES_SNAPSHOT`` of the conversation so far, open messages with their content
   so far, and one ``STATE_SNAPSHOT``;
3. every subagent the run announced, in announcement order (so a parent precedes its
   children): ``SUBAGENT_STARTED`` with its name, description and parents, followed at
   once by its ``SUBAGENT_FINISHED`` or ``SUBAGENT_ERROR`` when it has already closed (a
   closed parent must be known for a later child to start under it, and a closed id must
   not start again);
4. a start event per item still open that no chunk opened, containers first:
   ``STEP_STARTED``, ``REASONING_START``, ``REASONING_MESSAGE_START``,
   ``TEXT_MESSAGE_START``, ``TOOL_CALL_START`` (with its ``parentMessageId``), each
   carrying the ``subagentRunId`` of its owner.  A start for an id the snapshot already
   holds appends to that message or call (the applier's rule and the official client's),
   so what the log sends next continues the content;
5. the skeleton of the run's deprecated ``THINKING_*`` events (all but the content, no
   fields), because a thinking message has no id on the wire: a receiver mints one per
   start, and only the same sequence of starts makes a joiner mint the same ids;
6. last, each lane's chunk stream in flight (what an id-less chunk continues,
   :meth:`aguikit.chunks.ChunkNormalizer.streams`), by a chunk naming it with what its
   opening chunk established, so the end the normalizer synthesizes when the stream
   closes is still owed.  Last, because the snapshots and starts before it would close
   it (the streaming page's "Closing a chunk stream").

Then the caller follows the log after the last event the prelude stands for.  A run that
has ended is restated up to its end, and its logged end (interrupts included) is what the
joiner follows.

The prelude checks itself before it is sent: it is folded and verified as a joiner would,
and must reach the same messages, state, subagents, open items (with the same owners) and
chunk streams in flight as the log.  When it does not, or cannot be built, the answer is
``None`` and the caller sends the log from event 1, which a client cannot tell apart in
the result: nothing logged, a log that no longer starts at the run's start, a log no
verifier accepts, an open item a ``MESSAGES_SNAPSHOT`` dropped from the conversation, or an
attribution a snapshot cannot restate (a reasoning span claimed by a subagent whose
message was opened untagged).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._generated.models import (
    AssistantMessage,
    Event,
    Message,
    MessagesSnapshotEvent,
    ReasoningMessage,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StateSnapshotEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageRole,
    TextMessageStartEvent,
    ToolCallStartEvent,
)
from ..changes import Subagent, SubagentStatus
from ..chunks import StreamInFlight
from ..errors import AguiError
from ..rules import Family
from ..session import Session
from ..verify import Verifier
from ..wire import to_wire

if TYPE_CHECKING:
    from .eventlog import EventLog

__all__ = ["build_prelude", "gc_paused", "prelude"]

_ENDS: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_THINKING: Final = frozenset(
    {
        "THINKING_START",
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
        "THINKING_END",
    }
)
_SKELETON: Final = _THINKING - {"THINKING_TEXT_MESSAGE_CONTENT"}
"""The thinking events that mint or close an id; the content is in the snapshot."""
_TEXT_ROLES: Final = frozenset({"assistant", "user", "system", "developer"})
_REOPEN_ORDER: Final[Mapping[Family, int]] = {
    Family.STEP: 0,
    Family.REASONING_SPAN: 1,
    Family.REASONING_MESSAGE: 2,
    Family.TEXT_MESSAGE: 3,
    Family.TOOL_CALL: 4,
}
"""Containers before contents; subagents and thinking are restated before all of them."""
_LANE_FAMILY: Final = {
    "text": Family.TEXT_MESSAGE,
    "tool": Family.TOOL_CALL,
    "reasoning": Family.REASONING_MESSAGE,
}
_CHUNK: Final = {
    "text": "TEXT_MESSAGE_CHUNK",
    "tool": "TOOL_CALL_CHUNK",
    "reasoning": "REASONING_MESSAGE_CHUNK",
}
_CHUNK_ID: Final = {"text": "messageId", "tool": "toolCallId", "reasoning": "messageId"}


async def prelude(log: EventLog, run_id: str) -> tuple[list[dict[str, Any]], str] | None:
    """
    A late joiner's consistent start for ``run_id``, instead of its whole log.

    Returns the prelude's events (:func:`build_prelude` of the logged events before the
    run's end) and the id of the last logged event they stand for, after which the joiner
    follows the log; ``None`` when the log must be sent from its first event instead (see
    the module docstring).  A run that has ended is restated the same way and its end is
    what the joiner then follows: the logged ``RUN_FINISHED`` (with its interrupts) or
    ``RUN_ERROR``.
    """
    logged = await log.read(run_id)
    if not logged or logged[0][0] != "1" or logged[0][1].get("type") != "RUN_STARTED":
        return None
    if len(logged) <= _INLINE_EVENTS:
        return _restated(logged)
    # Folding a long run takes a while (about 0.7 s at 100,000 events): in the joins'
    # thread, so the streams this worker serves go on meanwhile.
    return await asyncio.get_running_loop().run_in_executor(_JOINS, gc_paused, _restated, logged)


_INLINE_EVENTS: Final = 1000
"""Runs up to this many logged events are restated on the event loop: a few ms at most."""
_JOINS: Final = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="aguikit-prelude")
"""One thread restates the long runs, in turn, however many joiners arrive at once."""


_A = TypeVar("_A")
_R = TypeVar("_R")


def gc_paused(call: Callable[[_A], _R], argument: _A) -> _R:
    """
    ``call(argument)`` with the cyclic garbage collector paused, for work done in a thread
    beside the event loop (a long run's prelude, a large request body's check).

    Such work allocates enough small objects to start a full collection, which holds the
    interpreter, and so every stream on the event loop, for as long as it walks every
    object of the process (200 ms measured); what it builds holds no cycles, so it is
    freed by reference counts all the same.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return call(argument)
    finally:
        if collecting:
            gc.enable()


def _restated(
    logged: list[tuple[str, dict[str, Any]]],
) -> tuple[list[dict[str, Any]], str] | None:
    cut = next(
        (index for index, (_, wire) in enumerate(logged) if wire.get("type") in _ENDS),
        len(logged),
    )
    events = build_prelude(wire for _, wire in logged[:cut])
    return None if events is None else (events, logged[cut - 1][0])


class _Fold:
    """One consumer of a stream: its session (messages, state) and its verifier; ``state``
    is what the run started from when its ``RUN_STARTED`` carried its ``input``."""

    def __init__(self, state: Any = None) -> None:
        self.session = Session(
            verify=False, keep_delivered=False, state={} if state is None else state
        )
        self.verifier = Verifier()

    def feed(self, wire: Mapping[str, Any]) -> list[Event]:
        delivered = [update.event for update in self.session.feed(wire)]
        for event in delivered:
            self.verifier.verify(event)
        return delivered

    def outcome(self) -> tuple[Any, ...]:
        """What a joiner must agree on: the fold, and what is open under whom."""
        session = self.session
        return (
            [to_wire(message) for message in session.messages],
            session.state,
            session.subagents,
            sorted(map(repr, self.verifier.open_entities())),
        )


def build_prelude(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """
    The prelude (wire dicts) restating ``events``, the logged events of one run in
    progress from its ``RUN_STARTED`` on, or ``None`` when no prelude can restate them
    exactly (see the module docstring for what it holds and when it gives up).

    A joiner that folds the prelude and then the events logged after ``events`` ends
    with the same messages, state and subagents as one that folded the whole log, and
    judges what follows as the log's reader does.
    """
    wires = list(events)
    if not wires or wires[0].get("type") != "RUN_STARTED":
        return None
    if any(wire.get("type") in _ENDS for wire in wires):
        return None
    given = wires[0].get("input")
    original = _Fold(given.get("state") if isinstance(given, Mapping) else None)
    minted: set[Any] = set()
    skeleton: list[dict[str, Any]] = []
    try:
        for wire in wires:
            delivered = original.feed(wire)
            kind = wire.get("type")
            if kind in _THINKING:
                minted.update(getattr(event, "message_id", None) for event in delivered)
                if kind in _SKELETON:
                    skeleton.append({"type": kind})
    except AguiError:
        return None  # a log no verifier accepts is not restated; it is sent as it is
    session = original.session
    lanes = {(_LANE_FAMILY[lane.kind], lane.id): lane for lane in session.normalizer.streams()}
    items = [
        (family, entity, owner)
        for family, entity, owner in original.verifier.open_entities()
        if family is not Family.SUBAGENT
        and not (entity in minted and family in (Family.REASONING_SPAN, Family.REASONING_MESSAGE))
    ]
    # Containers first; each owner's stream in flight last, so that it is the stream an
    # id-less chunk continues for the joiner too (re-opening an item makes it its owner's).
    items.sort(key=lambda item: _REOPEN_ORDER.get(item[0], len(_REOPEN_ORDER)))
    reopened: list[dict[str, Any]] = []
    in_flight: list[dict[str, Any]] = []
    for family, entity, owner in items:
        lane = lanes.get((family, entity))
        event = _reopen(family, entity, owner, session, lane)
        if event is None:
            return None
        (reopened if lane is None else in_flight).append(event)
    result = [
        dict(wires[0]),
        to_wire(MessagesSnapshotEvent(messages=list(session.messages))),
        to_wire(StateSnapshotEvent(snapshot=session.state)),
        *(to_wire(event) for subagent in session.subagents for event in _restate(subagent)),
        *reopened,
        *skeleton,
        *in_flight,
    ]
    joiner = _Fold()
    try:
        for wire in result:
            joiner.feed(wire)
    except AguiError:
        return None
    if joiner.outcome() != original.outcome():
        return None
    # Exactly the log's chunk streams are in flight for the joiner, each owing its end, with
    # what its opening chunk established.
    if _in_flight(joiner.session.normalizer.streams()) != _in_flight(lanes.values()):
        return None
    return result


def _in_flight(streams: Iterable[StreamInFlight]) -> dict[tuple[str, str, Any], Any]:
    """Chunk streams in flight by kind, id and lane, whatever order they were opened in."""
    return {(s.kind, s.id, s.owner): dict(s.fields) for s in streams}


def _restate(subagent: Subagent) -> list[Event]:
    """A subagent's announcement, and its close when it has closed."""
    run_id = subagent.run_id
    events: list[Event] = [
        SubagentStartedEvent(
            subagent_run_id=run_id,
            name=subagent.name,
            description=subagent.description,
            parent_subagent_run_id=subagent.parent_subagent_run_id,
            parent_tool_call_id=subagent.parent_tool_call_id,
            parent_message_id=subagent.parent_message_id,
        )
    ]
    status = subagent.status
    if status is SubagentStatus.FINISHED:
        events.append(SubagentFinishedEvent(subagent_run_id=run_id, result=subagent.result))
    elif status is SubagentStatus.SUSPENDED:
        outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=list(subagent.interrupt_ids))
        events.append(
            SubagentFinishedEvent(subagent_run_id=run_id, result=subagent.result, outcome=outcome)
        )
    elif status is SubagentStatus.FAILED:
        events.append(
            SubagentErrorEvent(
                subagent_run_id=run_id,
                message=subagent.error_message or "",
                code=subagent.error_code,
            )
        )
    return events


def _reopen(
    family: Family, entity: Any, owner: Any, session: Session, lane: StreamInFlight | None
) -> dict[str, Any] | None:
    """
    The event re-opening one open item (``None`` when none can): its start event, or, when
    a chunk opened it, a chunk naming it with what the opening chunk established.
    """
    if lane is not None:
        return _chunk(lane)
    event: Event
    if family is Family.STEP:
        event = StepStartedEvent(step_name=entity, subagent_run_id=owner)
    elif family is Family.REASONING_SPAN:
        event = ReasoningStartEvent(message_id=entity, subagent_run_id=owner)
    elif family is Family.TOOL_CALL:
        found = next(
            (
                (message.id, call.function.name)
                for message in session.messages
                for call in _calls(message)
                if call.id == entity
            ),
            None,
        )
        if found is None:
            return None
        event = ToolCallStartEvent(
            tool_call_id=entity,
            tool_call_name=found[1],
            parent_message_id=found[0],
            subagent_run_id=owner,
        )
    else:
        message = session.applier.message(entity)
        if family is Family.REASONING_MESSAGE and isinstance(message, ReasoningMessage):
            event = ReasoningMessageStartEvent(message_id=entity, subagent_run_id=owner)
        elif family is Family.TEXT_MESSAGE and message is not None and message.role in _TEXT_ROLES:
            event = TextMessageStartEvent(
                message_id=entity, role=TextMessageRole(message.role), subagent_run_id=owner
            )
        else:
            return None
    return to_wire(event)


def _chunk(lane: StreamInFlight) -> dict[str, Any]:
    """A chunk re-opening a chunk-opened stream, so the joiner's normalizer owes its end."""
    chunk: dict[str, Any] = {"type": _CHUNK[lane.kind], _CHUNK_ID[lane.kind]: lane.id}
    chunk.update((name, value) for name, value in lane.fields.items() if value is not None)
    if lane.owner is not None:
        chunk["subagentRunId"] = lane.owner
    return chunk


def _calls(message: Message) -> list[Any]:
    return (message.tool_calls or []) if isinstance(message, AssistantMessage) else []
