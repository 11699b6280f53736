"""
Fold a stream of events into what a UI draws: messages, state, activities, reasoning.

Consuming AG-UI is not "read a response".  A message opens, its text arrives a fragment at
a time, tool arguments accumulate as JSON that does not parse until the last fragment,
state moves by RFC 6902 patch, and a snapshot may rewrite the conversation under you.
:class:`Applier` is the state machine that turns all of that back into a list of generated
:data:`~aguikit.models.Message` objects and a JSON state document, and tells the caller
what each event changed (:class:`Changed`) so a view redraws one row, not the screen.

*Explicit, current events only.*  The applier folds the protocol's explicit events.  Chunk
expansion (:mod:`aguikit.chunks`) and the translation of deprecated ``THINKING_*`` events
(:mod:`aguikit.receiver`) happen once, before it, in the stages :class:`aguikit.Session`
runs first; a bare applier handed either refuses it with a
:class:`~aguikit.errors.StageOrderError` naming the stage to run, rather than keeping a
second copy of that logic that would disagree with the first.

*Tolerant by design.*  An orphan content event opens the message it names, a delta for an
activity nobody published is skipped (with a warning), an encrypted value for an unknown
entity is ignored: a half-drawn conversation beats a blank one, and catching the producer
is :mod:`aguikit.verify`'s job (:class:`aguikit.session.Session` runs both).  The one thing
it refuses to do quietly is corrupt state: a patch that does not apply raises
:class:`~aguikit.errors.PatchError` and leaves the target exactly as it was.

*Cost per event does not grow with the conversation.*  Messages are indexed by id; text
and tool arguments accumulate in per-entity lists of fragments, joined only when read and
cached until the next fragment (appending the 100,000th delta costs what the first did);
patches are applied in place with :mod:`jsonpatch`'s journal, so a delta costs what its
operations touch, not the size of the state, and is undone if any operation fails.
``MESSAGES_SNAPSHOT`` and ``STATE_SNAPSHOT`` cost their own size.

*Reasoning is part of the transcript.*  The conformance corpus puts reasoning messages in
the message list, in order (``reasoning-span-and-message``); a reasoning *span*
(``REASONING_START``/``REASONING_END``) is a bracket, not a message.  :attr:`reasoning`
lists the reasoning messages alone for a UI that shows them in a separate pane, and a
thought reports ``started``/``ended`` once per id however many brackets carry it.

*What the applier owns.*  Everything it stores is its own copy (snapshots, activity
content and adopted messages are copied on the way in), so patching state never reaches
back into a delivered event.  Message objects it hands out are live: a message being
streamed is updated in place when it is next read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar

import attrs
import cattrs
from mypy_extensions import mypyc_attr

from ._dispatch import complete
from ._generated.models import (
    ActivityDeltaEvent,
    ActivityMessage,
    ActivitySnapshotEvent,
    AssistantMessage,
    CustomEvent,
    DeveloperMessage,
    Event,
    FunctionCall,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    SystemMessage,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageRole,
    TextMessageStartEvent,
    TextPart,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
    ThinkingTextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ._guard import check_delta, malformed_event
from .catalogue import RULES_BY_ID, WarningSink, discard_warning, render_message
from .changes import NOTHING, Changed, ChangeKind, Subagent, SubagentStatus, What
from .errors import AguiError, PatchError, StageOrderError, WireFormatError
from .patch import UNSET, apply_patch, copy_json, operations

__all__ = [
    "Applier",
    "ChangeKind",
    "Changed",
    "Subagent",
    "SubagentStatus",
    "What",
    "apply_patch",
]

T = TypeVar("T")

_USER_CONVERTER: Final = cattrs.Converter()
"""For the caller's own classes: :data:`aguikit.wire.converter` is configured for the
generated protocol classes (wire names, ``extra_members``) and does not fit others."""


def _merge_metadata(
    current: dict[str, Any] | None, incoming: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Key by key, last write wins, not recursive: the corpus's metadata rule."""
    if not incoming:
        return current
    merged = dict(current) if current else {}
    merged.update(incoming)
    return merged


def _own(message: Message) -> Message:
    """A copy of ``message`` the applier may change without reaching into the event."""
    if isinstance(message, AssistantMessage):
        calls = message.tool_calls
        return attrs.evolve(
            message,
            tool_calls=None
            if calls is None
            else [attrs.evolve(c, function=attrs.evolve(c.function)) for c in calls],
        )
    if isinstance(message, ActivityMessage):
        return attrs.evolve(message, content=copy_json(message.content))
    if isinstance(message, UserMessage | ToolMessage) and isinstance(message.content, list):
        return attrs.evolve(message, content=list(message.content))
    return attrs.evolve(message)


def _text_message(message_id: str, role: str, name: str | None, owner: str | None) -> Message:
    if role == TextMessageRole.USER:
        return UserMessage(id=message_id, content="", name=name, subagent_run_id=owner)
    if role == TextMessageRole.SYSTEM:
        return SystemMessage(id=message_id, content="", name=name, subagent_run_id=owner)
    if role == TextMessageRole.DEVELOPER:
        return DeveloperMessage(id=message_id, content="", name=name, subagent_run_id=owner)
    return AssistantMessage(id=message_id, content="", name=name, subagent_run_id=owner)


# Subclassable from Python in the compiled build too (docs/DESIGN.md, "The hot core is compiled").
@mypyc_attr(allow_interpreted_subclasses=True)
class Applier:
    """
    The materialised view of a stream.

    Args:
        messages: A conversation to start from (copied; typically the client's history).
        state: A state document to start from (copied).  Defaults to ``{}``, so the first
            ``STATE_DELTA`` has something to patch.
        on_warning: Receives ``(code, message)`` when an event is skipped rather than
            applied (a delta for an activity that does not exist, text for an activity).
        keep_text: ``False`` forgets a message's text when it ends, a tool call's
            arguments when the call ends and a tool result's text as it arrives (their
            content and ``arguments`` read ``""`` from then on), so memory is bounded by
            what is open at once, not by the conversation: for a checker, which reports
            ids and counts and never the text.  Everything else - which messages and
            calls exist, their roles, order and attribution, the state - is kept, so
            every warning is the one a full applier gives.

    .. versionadded:: 0.3.0  ``keep_text``.
    """

    def __init__(
        self,
        messages: Iterable[Message] = (),
        state: Any = UNSET,
        *,
        on_warning: WarningSink | None = None,
        keep_text: bool = True,
    ) -> None:
        self.on_warning: WarningSink = on_warning or discard_warning
        self._keep_text = keep_text
        self._messages: list[Message] = []
        self._pos: dict[str, int] = {}
        self._text: dict[str, list[str]] = {}
        self._dirty_text: set[str] = set()
        self._calls: dict[str, ToolCall] = {}
        self._call_owner: dict[str, str] = {}
        self._args: dict[str, list[str]] = {}
        self._dirty_args: set[str] = set()
        self._open_reasoning: set[str] = set()
        self._state: Any = {} if state is UNSET else copy_json(state)
        self._thread_id: str | None = None
        self._run_id: str | None = None
        self._interrupts: list[Interrupt] = []
        self._subagents: list[Subagent] = []
        self._subagent_pos: dict[str, int] = {}
        self._view: list[Message] | None = None
        for message in messages:
            self._append(_own(message))

    # ---- reading --------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """
        The conversation, oldest first, text and arguments materialised.

        The list is shared until the next structural change (a message added, removed or
        moved); treat it as read-only.
        """
        self._flush()
        if self._view is None:
            self._view = list(self._messages)
        return self._view

    def message(self, message_id: str) -> Message | None:
        """The message with this id, materialised, or ``None``."""
        index = self._pos.get(message_id)
        if index is None:
            return None
        self._flush_message(message_id)
        message = self._messages[index]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                self._flush_args(call.id)
        return message

    def text_of(self, message_id: str) -> str | None:
        """
        The text of a message: its content for the text roles, the concatenated text parts
        of a multimodal user or tool message, ``None`` for an activity or an unknown id.
        """
        message = self.message(message_id)
        if message is None or isinstance(message, ActivityMessage):
            return None
        content = message.content
        if content is None or isinstance(content, str):
            return content
        return "".join(part.text for part in content if isinstance(part, TextPart))

    @property
    def state(self) -> Any:
        """The application state: any JSON value; snapshots replace it, deltas patch it."""
        return self._state

    def state_as(self, cls: type[T]) -> T:
        """
        Structure the state into a caller's attrs class (or any type cattrs handles).

        Raises:
            WireFormatError: the state does not fit ``cls``.
        """
        try:
            return _USER_CONVERTER.structure(self._state, cls)
        except Exception as exc:
            detail = (
                "; ".join(cattrs.transform_error(exc))
                if isinstance(exc, cattrs.BaseValidationError)
                else f"{type(exc).__name__}: {exc}"
            )
            raise WireFormatError(getattr(cls, "__name__", str(cls)), "", detail) from exc

    @property
    def reasoning(self) -> list[ReasoningMessage]:
        """The reasoning messages alone, in transcript order, for a separate pane."""
        return [m for m in self.messages if isinstance(m, ReasoningMessage)]

    @property
    def subagents(self) -> list[Subagent]:
        """Every subagent invocation announced (or closed), in announcement order."""
        return list(self._subagents)

    def subagent(self, run_id: str) -> Subagent | None:
        """One subagent invocation, by its ``subagentRunId``."""
        index = self._subagent_pos.get(run_id)
        return None if index is None else self._subagents[index]

    @property
    def interrupts(self) -> list[Interrupt]:
        """The interrupts the last ``RUN_FINISHED`` paused on; cleared by ``RUN_STARTED``."""
        return list(self._interrupts)

    @property
    def thread_id(self) -> str | None:
        """The thread of the last ``RUN_STARTED``."""
        return self._thread_id

    @property
    def run_id(self) -> str | None:
        """The run id of the last ``RUN_STARTED``."""
        return self._run_id

    # ---- applying -------------------------------------------------------------------------

    def apply(self, event: Event) -> Changed:
        """
        Apply one event and report what it changed.

        The event must be explicit and current: chunk events are expanded by
        :class:`~aguikit.chunks.ChunkNormalizer` and deprecated ``THINKING_*`` events are
        translated by :class:`~aguikit.receiver.Receiver` first (:class:`aguikit.Session`
        runs both).

        Raises:
            PatchError: a ``STATE_DELTA`` or ``ACTIVITY_DELTA`` did not apply; nothing
                changed.
            StageOrderError: a chunk (``AGUI-V091``) or a deprecated event
                (``AGUI-V094``) that an earlier stage should have handled; nothing changed.
            ProtocolError: ``AGUI-V092`` for something that is not an event or holds a
                field of a type no wire document could give it (an id that is a list).
        """
        try:
            handler = _APPLY.get(type(event))
            if handler is None:
                raise TypeError("it is not an AG-UI event object")
            metadata = event.metadata
            if metadata is not None and not isinstance(metadata, Mapping):
                # Merged after the content lands; a bad one must fail before anything does.
                raise TypeError(f"metadata must be an object, not {type(metadata).__name__}")
            return handler(self, event)
        except AguiError:
            raise
        except (TypeError, AttributeError, ValueError, RecursionError) as exc:
            # Every handler looks its ids up before it changes anything.
            raise malformed_event(event, exc) from None

    # ---- messages -------------------------------------------------------------------------

    def _append(self, message: Message) -> int:
        index = len(self._messages)
        self._messages.append(message)
        self._pos[message.id] = index
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                self._calls[call.id] = call
                self._call_owner[call.id] = message.id
        self._view = None
        return index

    def _flush(self) -> None:
        for message_id in self._dirty_text:
            self._materialise(message_id)
        self._dirty_text.clear()
        for call_id in self._dirty_args:
            self._materialise_args(call_id)
        self._dirty_args.clear()

    def _flush_message(self, message_id: str) -> None:
        if message_id in self._dirty_text:
            self._dirty_text.discard(message_id)
            self._materialise(message_id)

    def _settle(self, message_id: str) -> None:
        """
        A message ended: join its fragments into its content and drop the fragment list.
        Without this a long stream nobody reads until the end would hold every delta as an
        object of its own, several times the text's size; a re-opened message starts a new
        list from its content.  Without ``keep_text`` the fragments are dropped unjoined.
        """
        if not self._keep_text:
            self._forget_text(message_id)
            return
        self._flush_message(message_id)
        self._text.pop(message_id, None)

    def _forget_text(self, message_id: str) -> None:
        """``keep_text=False``: an ended message keeps its place, not its text."""
        self._dirty_text.discard(message_id)
        self._text.pop(message_id, None)
        index = self._pos.get(message_id)
        if index is not None:
            message = self._messages[index]
            if not isinstance(message, ActivityMessage) and isinstance(message.content, str):
                message.content = ""

    def _flush_args(self, call_id: str) -> None:
        if call_id in self._dirty_args:
            self._dirty_args.discard(call_id)
            self._materialise_args(call_id)

    def _materialise(self, message_id: str) -> None:
        pieces = self._text.get(message_id)
        index = self._pos.get(message_id)
        if pieces is None or index is None:
            return
        text = "".join(pieces)
        pieces.clear()
        pieces.append(text)
        message = self._messages[index]
        if isinstance(message, UserMessage | ToolMessage) and isinstance(message.content, list):
            return  # multimodal content is appended to directly, never buffered
        if not isinstance(message, ActivityMessage):
            message.content = text

    def _materialise_args(self, call_id: str) -> None:
        pieces = self._args.get(call_id)
        call = self._calls.get(call_id)
        if pieces is None or call is None:
            return
        text = "".join(pieces)
        pieces.clear()
        pieces.append(text)
        call.function.arguments = text

    def _change(self, what: What, kind: ChangeKind, message_id: str, **more: Any) -> Changed:
        return Changed(what, kind, message_id, self._pos.get(message_id), **more)

    def _what(self, message_id: str) -> What:
        index = self._pos.get(message_id)
        if index is not None and isinstance(self._messages[index], ReasoningMessage):
            return What.REASONING
        return What.MESSAGES

    def _merge_into_message(self, message_id: str, metadata: Mapping[str, Any] | None) -> None:
        if metadata:
            index = self._pos.get(message_id)
            if index is not None:
                message = self._messages[index]
                message.metadata = _merge_metadata(message.metadata, metadata)

    def _warn(self, rule_id: str, **fields: Any) -> None:
        self.on_warning(RULES_BY_ID[rule_id].symbol, render_message(rule_id, **fields))

    def _text_start(self, event: TextMessageStartEvent) -> Changed:
        message_id: str = event.message_id
        index = self._pos.get(message_id)
        if index is None:
            role = TextMessageRole.ASSISTANT if event.role is None else event.role
            self._append(_text_message(message_id, role, event.name, event.subagent_run_id))
            self._text[message_id] = [""]
        elif isinstance(self._messages[index], ActivityMessage):
            self._warn(
                "AGUI-W012",
                event_type="TEXT_MESSAGE_START",
                detail=f"message '{message_id}' is an activity; text for it is dropped "
                "(message ids are unique across a conversation).",
            )
            return NOTHING
        # Re-opening a known id keeps the message (and its attribution) and appends to it.
        self._merge_into_message(message_id, event.metadata)
        return self._change(What.MESSAGES, ChangeKind.STARTED, message_id)

    def _buffer(self, message_id: str) -> list[str] | None:
        """The fragment list text for ``message_id`` accumulates in, created on demand."""
        pieces = self._text.get(message_id)
        if pieces is not None:
            return pieces
        message = self._messages[self._pos[message_id]]
        if isinstance(message, ActivityMessage):
            return None
        content = message.content
        if isinstance(content, list):
            return None
        pieces = self._text[message_id] = ["" if content is None else content]
        return pieces

    def _append_text(self, message_id: str, delta: str) -> bool:
        pieces = self._buffer(message_id)
        if pieces is not None:
            pieces.append(delta)
            self._dirty_text.add(message_id)
            return True
        message = self._messages[self._pos[message_id]]
        if isinstance(message, UserMessage | ToolMessage) and isinstance(message.content, list):
            parts = message.content
            if parts and isinstance(parts[-1], TextPart):
                parts[-1] = attrs.evolve(parts[-1], text=parts[-1].text + delta)
            else:
                parts.append(TextPart(text=delta))
            return True
        return False

    def _text_content(
        self, event: TextMessageContentEvent | ReasoningMessageContentEvent
    ) -> Changed:
        delta = event.delta
        if type(delta) is not str:
            check_delta(delta)
        message_id: str = event.message_id
        pieces = self._text.get(message_id)
        if pieces is not None:
            # The hot path: a message streaming into its fragment list.
            pieces.append(delta)
            self._dirty_text.add(message_id)
            if event.metadata:
                self._merge_into_message(message_id, event.metadata)
            index = self._pos[message_id]
            what = (
                What.REASONING if type(self._messages[index]) is ReasoningMessage else What.MESSAGES
            )
            return Changed(what, ChangeKind.CONTENT, message_id, index, None, None, delta)
        if message_id not in self._pos:
            # Tolerant: an orphan content event opens the message it names.
            self._append(_text_message(message_id, "assistant", None, event.subagent_run_id))
            self._text[message_id] = [""]
        if not self._append_text(message_id, event.delta):
            self._warn(
                "AGUI-W012",
                event_type=event.type,
                detail=f"message '{message_id}' is an activity; its text is dropped.",
            )
            return NOTHING
        self._merge_into_message(message_id, event.metadata)
        return Changed(
            self._what(message_id),
            ChangeKind.CONTENT,
            message_id,
            self._pos[message_id],
            delta=event.delta,
        )

    def _text_end(self, event: TextMessageEndEvent) -> Changed:
        message_id: str = event.message_id
        if message_id not in self._pos:
            return NOTHING
        self._settle(message_id)
        self._merge_into_message(message_id, event.metadata)
        return self._change(What.MESSAGES, ChangeKind.ENDED, message_id)

    # ---- tool calls -----------------------------------------------------------------------

    def _tool_start(self, event: ToolCallStartEvent) -> Changed:
        call_id: str = event.tool_call_id
        existing = self._calls.get(call_id)
        if existing is not None:
            # Idempotent: a replayed start must not attach the call twice.
            if existing.function.name != event.tool_call_name:
                self._warn(
                    "AGUI-W014",
                    entity_id=call_id,
                    old=existing.function.name,
                    new=event.tool_call_name,
                )
                existing.function.name = event.tool_call_name
            existing.metadata = _merge_metadata(existing.metadata, event.metadata)
            owner = self._call_owner[call_id]
            return self._change(
                What.MESSAGES, ChangeKind.TOOL_CALL_STARTED, owner, tool_call_id=call_id
            )
        parent_id: str | None = event.parent_message_id
        index = self._pos.get(parent_id) if parent_id is not None else None
        if index is not None and isinstance(self._messages[index], AssistantMessage):
            parent = self._messages[index]
            assert isinstance(parent, AssistantMessage)
        else:
            if index is not None:
                self._warn(
                    "AGUI-W012",
                    event_type="TOOL_CALL_START",
                    detail=f"parentMessageId '{parent_id}' is not an assistant message; the "
                    f"call gets a message of its own, '{call_id}'.",
                )
            # A call with no (usable) parent belongs to a message of its own, named for the
            # call; the message takes the call's attribution.
            new_id = call_id if parent_id is None or index is not None else parent_id
            parent = AssistantMessage(id=new_id, subagent_run_id=event.subagent_run_id)
            self._append(parent)
        call = ToolCall(
            id=call_id,
            function=FunctionCall(name=event.tool_call_name, arguments=""),
            metadata=_merge_metadata(None, event.metadata),
        )
        if parent.tool_calls is None:
            parent.tool_calls = []
        parent.tool_calls.append(call)
        self._calls[call_id] = call
        self._call_owner[call_id] = parent.id
        self._args[call_id] = [""]
        return self._change(
            What.MESSAGES, ChangeKind.TOOL_CALL_STARTED, parent.id, tool_call_id=call_id
        )

    def _tool_args(self, event: ToolCallArgsEvent) -> Changed:
        check_delta(event.delta)
        call_id: str = event.tool_call_id
        call = self._calls.get(call_id)
        if call is None:
            self._warn("AGUI-W013", entity_id=call_id)
            return NOTHING
        pieces = self._args.get(call_id)
        if pieces is None:
            pieces = self._args[call_id] = [call.function.arguments]
        pieces.append(event.delta)
        self._dirty_args.add(call_id)
        if event.metadata:
            call.metadata = _merge_metadata(call.metadata, event.metadata)
        owner = self._call_owner[call_id]
        return Changed(
            What.MESSAGES,
            ChangeKind.TOOL_CALL_ARGS,
            owner,
            self._pos.get(owner),
            tool_call_id=call_id,
            delta=event.delta,
        )

    def _tool_end(self, event: ToolCallEndEvent) -> Changed:
        call_id: str = event.tool_call_id
        call = self._calls.get(call_id)
        if call is None:
            return NOTHING
        if self._keep_text:
            self._flush_args(call_id)
        else:
            self._dirty_args.discard(call_id)
            call.function.arguments = ""
        self._args.pop(call_id, None)  # the arguments are joined; a new fragment starts over
        call.metadata = _merge_metadata(call.metadata, event.metadata)
        return self._change(
            What.MESSAGES,
            ChangeKind.TOOL_CALL_ENDED,
            self._call_owner[call_id],
            tool_call_id=call_id,
        )

    def _tool_result(self, event: ToolCallResultEvent) -> Changed:
        message_id = event.message_id
        content = list(event.content) if isinstance(event.content, list) else event.content
        if not self._keep_text and isinstance(content, str):
            content = ""  # a result arrives whole: it has ended already
        index = self._pos.get(message_id)
        if index is not None and isinstance(self._messages[index], ToolMessage):
            tool = self._messages[index]
            assert isinstance(tool, ToolMessage)
            tool.content = content
            tool.subagent_run_id = event.subagent_run_id
            self._text.pop(message_id, None)
            self._dirty_text.discard(message_id)
        else:
            if index is not None:
                self._warn(
                    "AGUI-W012",
                    event_type="TOOL_CALL_RESULT",
                    detail=f"message '{message_id}' exists and is not a tool message; the "
                    "result is dropped.",
                )
                return NOTHING
            tool = ToolMessage(
                id=message_id,
                content=content,
                tool_call_id=event.tool_call_id,
                subagent_run_id=event.subagent_run_id,
            )
            self._insert_result(tool)
        tool.metadata = _merge_metadata(tool.metadata, event.metadata)
        return self._change(
            What.MESSAGES, ChangeKind.TOOL_RESULT, message_id, tool_call_id=event.tool_call_id
        )

    def _insert_result(self, tool: ToolMessage) -> None:
        """
        Place a result right after the assistant message that made the call (after any
        results already recorded for it), as providers require; append when the call is
        unknown.  Costs the number of messages after the insertion point, which is a few.
        """
        owner = self._call_owner.get(tool.tool_call_id)
        owner_index = self._pos.get(owner) if owner is not None else None
        if owner_index is None:
            self._append(tool)
            return
        at = owner_index + 1
        count = len(self._messages)
        while at < count and isinstance(self._messages[at], ToolMessage):
            at += 1
        if at == count:
            self._append(tool)
            return
        self._messages.insert(at, tool)
        for moved in range(at, count + 1):
            self._pos[self._messages[moved].id] = moved
        self._view = None

    # ---- reasoning ------------------------------------------------------------------------

    def _span_start(self, message_id: str) -> Changed:
        if message_id in self._open_reasoning:
            return NOTHING
        self._open_reasoning.add(message_id)
        return self._change(What.REASONING, ChangeKind.STARTED, message_id)

    def _span_end(self, message_id: str) -> Changed:
        if message_id not in self._open_reasoning:
            return NOTHING
        self._open_reasoning.discard(message_id)
        return self._change(What.REASONING, ChangeKind.ENDED, message_id)

    def _reasoning_block_start(self, event: ReasoningStartEvent) -> Changed:
        return self._span_start(event.message_id)

    def _reasoning_block_end(self, event: ReasoningEndEvent) -> Changed:
        return self._span_end(event.message_id)

    def _open_reasoning_message(
        self, message_id: str, owner: str | None, metadata: Mapping[str, Any] | None
    ) -> Changed:
        index = self._pos.get(message_id)
        created = index is None
        if index is None:
            self._append(ReasoningMessage(id=message_id, content="", subagent_run_id=owner))
            self._text[message_id] = [""]
        elif isinstance(self._messages[index], ActivityMessage):
            self._warn(
                "AGUI-W012",
                event_type="REASONING_MESSAGE_START",
                detail=f"message '{message_id}' is an activity; the reasoning is dropped.",
            )
            return NOTHING
        self._merge_into_message(message_id, metadata)
        started = self._span_start(message_id)
        if started is NOTHING and created:
            # The thought already started under a span of the same id; the row is new.
            return self._change(What.REASONING, ChangeKind.UPDATED, message_id)
        return started

    def _reasoning_start(self, event: ReasoningMessageStartEvent) -> Changed:
        return self._open_reasoning_message(event.message_id, event.subagent_run_id, event.metadata)

    def _reasoning_content(self, event: ReasoningMessageContentEvent) -> Changed:
        check_delta(event.delta)
        message_id: str = event.message_id
        if message_id not in self._pos:
            self._open_reasoning_message(message_id, event.subagent_run_id, None)
        return self._text_content(event)

    def _reasoning_end(self, event: ReasoningMessageEndEvent) -> Changed:
        message_id: str = event.message_id
        self._settle(message_id)
        self._merge_into_message(message_id, event.metadata)
        return self._span_end(message_id)

    def _encrypted_value(self, event: ReasoningEncryptedValueEvent) -> Changed:
        entity = event.entity_id
        if event.subtype == "tool-call":
            call = self._calls.get(entity)
            if call is None:
                return self._encrypted_nowhere(entity, "no tool call has that id")
            call.encrypted_value = event.encrypted_value
            # The format belongs to the value: a new value without one clears the old one.
            call.encrypted_value_type = event.encrypted_value_type
            return self._change(
                What.MESSAGES,
                ChangeKind.ENCRYPTED_VALUE,
                self._call_owner[entity],
                tool_call_id=entity,
            )
        index = self._pos.get(entity)
        if index is None:
            return self._encrypted_nowhere(entity, "no message has that id")
        message = self._messages[index]
        if isinstance(message, ActivityMessage):
            # Activity messages carry no encrypted value by schema: naming one is naming
            # nothing the consumer knows (the reasoning page).
            return self._encrypted_nowhere(
                entity, "it is an activity message, which holds no encrypted value"
            )
        message.encrypted_value = event.encrypted_value
        message.encrypted_value_type = event.encrypted_value_type
        return self._change(self._what(entity), ChangeKind.ENCRYPTED_VALUE, entity)

    def _encrypted_nowhere(self, entity: str, reason: str) -> Changed:
        """An encrypted value naming nothing that can hold it: dropped, with a warning, and
        never fatal (the reasoning page: "a consumer SHOULD warn and MAY drop it, and MUST
        NOT fail the run over it")."""
        self._warn("AGUI-W015", entity_id=entity, reason=reason)
        return NOTHING

    # ---- activities -----------------------------------------------------------------------

    def _activity_snapshot(self, event: ActivitySnapshotEvent) -> Changed:
        message_id = event.message_id
        index = self._pos.get(message_id)
        replace = event.replace is None or event.replace
        if index is None:
            target = ActivityMessage(
                id=message_id,
                activity_type=event.activity_type,
                content=copy_json(event.content),
                subagent_run_id=event.subagent_run_id,
            )
            self._append(target)
        else:
            existing = self._messages[index]
            if isinstance(existing, ActivityMessage):
                target = existing
                if replace:
                    # A replacing snapshot re-mints the activity, attribution included;
                    # the metadata accumulated so far is kept.
                    target.activity_type = event.activity_type
                    target.content = copy_json(event.content)
                    target.subagent_run_id = event.subagent_run_id
                # replace: false leaves an existing activity exactly as it stands.
            elif replace:
                target = ActivityMessage(
                    id=message_id,
                    activity_type=event.activity_type,
                    content=copy_json(event.content),
                    subagent_run_id=event.subagent_run_id,
                )
                self._messages[index] = target
                self._text.pop(message_id, None)
                self._dirty_text.discard(message_id)
                self._view = None
            else:
                return NOTHING
        target.metadata = _merge_metadata(target.metadata, event.metadata)
        return self._change(What.ACTIVITY, ChangeKind.UPDATED, message_id)

    def _activity_delta(self, event: ActivityDeltaEvent) -> Changed:
        message_id = event.message_id
        index = self._pos.get(message_id)
        if index is None:
            self._warn(
                "AGUI-W011",
                event_type="ACTIVITY_DELTA",
                entity_id=message_id,
                reason="an activity that was never created",
            )
            return NOTHING
        activity = self._messages[index]
        if not isinstance(activity, ActivityMessage):
            self._warn(
                "AGUI-W011",
                event_type="ACTIVITY_DELTA",
                entity_id=message_id,
                reason="which is not an activity message",
            )
            return NOTHING
        target = f"activity '{message_id}'"
        ops = operations(event.patch)
        if any(op.get("path") == "" for op in ops):
            # A whole-document operation could leave something that is not an object; try
            # it on a copy so the activity never holds anything else.
            content = apply_patch(copy_json(activity.content), ops, target)
        else:
            content = apply_patch(activity.content, ops, target)
        if not isinstance(content, dict):
            raise PatchError(
                target,
                f"the patch replaced the content with {type(content).__name__}, not an object",
            )
        activity.content = content
        activity.activity_type = event.activity_type
        activity.metadata = _merge_metadata(activity.metadata, event.metadata)
        return self._change(What.ACTIVITY, ChangeKind.PATCHED, message_id)

    # ---- state, snapshots -----------------------------------------------------------------

    def _state_snapshot(self, event: StateSnapshotEvent) -> Changed:
        # Any JSON value, falsy and null included, replaces the state wholesale.
        self._state = copy_json(event.snapshot)
        return Changed(What.STATE, ChangeKind.SNAPSHOT)

    def _state_delta(self, event: StateDeltaEvent) -> Changed:
        self._state = apply_patch(self._state, event.delta, "state")
        return Changed(What.STATE, ChangeKind.PATCHED)

    def _messages_snapshot(self, event: MessagesSnapshotEvent) -> Changed:
        """
        A snapshot is an edit, not a replacement: the order the client already has wins for
        every id the snapshot also carries, messages it omits are dropped, and it appends
        what it adds.  Activity and reasoning survive a snapshot that carries none of their
        kind, because a backend that never tracks them cannot list them; a snapshot that
        does carry some declares the whole set of that kind.
        """
        self._flush()
        incoming = {m.id: m for m in event.messages}
        has_activity = any(isinstance(m, ActivityMessage) for m in event.messages)
        has_reasoning = any(isinstance(m, ReasoningMessage) for m in event.messages)
        kept: list[Message] = []
        seen: set[str] = set()
        for message in self._messages:
            replacement = incoming.get(message.id)
            if replacement is not None:
                kept.append(_own(replacement))
                seen.add(message.id)
            elif (isinstance(message, ActivityMessage) and not has_activity) or (
                isinstance(message, ReasoningMessage) and not has_reasoning
            ):
                kept.append(message)
        for message in event.messages:
            if message.id not in seen:
                seen.add(message.id)
                kept.append(_own(message))
        survivors = {m.id for m in kept}
        local = {id(m) for m in self._messages}
        self._messages = []
        self._pos = {}
        self._calls = {}
        self._call_owner = {}
        for message in kept:
            if id(message) not in local:
                self._text.pop(message.id, None)
                if isinstance(message, AssistantMessage) and message.tool_calls:
                    for call in message.tool_calls:
                        self._args.pop(call.id, None)
            self._append(message)
        for gone in [key for key in self._text if key not in survivors]:
            del self._text[gone]
        for gone in [key for key in self._args if key not in self._calls]:
            del self._args[gone]
        return Changed(What.MESSAGES, ChangeKind.REPLACED)

    # ---- run, subagents -------------------------------------------------------------------

    def _run_started(self, event: RunStartedEvent) -> Changed:
        self._thread_id = event.thread_id
        self._run_id = event.run_id
        self._interrupts = []
        if event.input is not None:
            for message in event.input.messages:
                if message.id not in self._pos:
                    self._append(_own(message))
        return Changed(What.RUN, ChangeKind.RUN_STARTED)

    def _run_finished(self, event: RunFinishedEvent) -> Changed:
        outcome = event.outcome
        self._interrupts = (
            list(outcome.interrupts) if isinstance(outcome, RunFinishedInterruptOutcome) else []
        )
        return Changed(What.RUN, ChangeKind.RUN_FINISHED)

    def _run_error(self, event: RunErrorEvent) -> Changed:
        # The session records message and code as text (Session.runs): an event the boundary
        # trusted (validate=False) holding anything else is malformed here, before anything
        # changes, in both builds (the compiled one would refuse it only when recording).
        message, code = event.message, event.code
        if not isinstance(message, str):
            raise TypeError(f"message must be a string, not {type(message).__name__}")
        if code is not None and not isinstance(code, str):
            raise TypeError(f"code must be a string, not {type(code).__name__}")
        # RUN_ERROR ends everything: an invocation still running is abandoned, and no
        # closing event will come for it.
        subagents = self._subagents
        for index, subagent in enumerate(subagents):
            if subagent.status is SubagentStatus.RUNNING:
                subagents[index] = attrs.evolve(subagent, status=SubagentStatus.ABANDONED)
        return Changed(What.RUN, ChangeKind.RUN_ERROR)

    def _subagent_change(self, index: int, kind: ChangeKind) -> Changed:
        return Changed(
            What.SUBAGENTS, kind, index=index, subagent_run_id=self._subagents[index].run_id
        )

    def _subagent_index(self, run_id: str) -> int:
        index = self._subagent_pos.get(run_id)
        if index is None:
            # Closed without being announced: tolerated, and a view still wants a row.
            index = len(self._subagents)
            self._subagents.append(Subagent(run_id=run_id, name=run_id))
            self._subagent_pos[run_id] = index
        return index

    def _subagent_started(self, event: SubagentStartedEvent) -> Changed:
        run_id = event.subagent_run_id
        index = self._subagent_pos.get(run_id)
        if index is not None:
            previous = self._subagents[index]
            kind = (
                ChangeKind.RESUMED
                if previous.status is SubagentStatus.SUSPENDED
                else ChangeKind.STARTED
            )
            self._subagents[index] = attrs.evolve(
                previous,
                name=event.name,
                status=SubagentStatus.RUNNING,
                description=event.description or previous.description,
                parent_subagent_run_id=event.parent_subagent_run_id
                or previous.parent_subagent_run_id,
                parent_tool_call_id=event.parent_tool_call_id or previous.parent_tool_call_id,
                parent_message_id=event.parent_message_id or previous.parent_message_id,
            )
            return self._subagent_change(index, kind)
        index = len(self._subagents)
        self._subagents.append(
            Subagent(
                run_id=run_id,
                name=event.name,
                description=event.description,
                parent_subagent_run_id=event.parent_subagent_run_id,
                parent_tool_call_id=event.parent_tool_call_id,
                parent_message_id=event.parent_message_id,
            )
        )
        self._subagent_pos[run_id] = index
        return self._subagent_change(index, ChangeKind.STARTED)

    def _subagent_finished(self, event: SubagentFinishedEvent) -> Changed:
        index = self._subagent_index(event.subagent_run_id)
        previous = self._subagents[index]
        if isinstance(event.outcome, SubagentFinishedSuspendedOutcome):
            self._subagents[index] = attrs.evolve(
                previous,
                status=SubagentStatus.SUSPENDED,
                result=event.result,
                interrupt_ids=tuple(event.outcome.interrupt_ids or ()),
            )
            return self._subagent_change(index, ChangeKind.SUSPENDED)
        # Absent means success: the legacy reading.
        self._subagents[index] = attrs.evolve(
            previous, status=SubagentStatus.FINISHED, result=event.result
        )
        return self._subagent_change(index, ChangeKind.FINISHED)

    def _subagent_error(self, event: SubagentErrorEvent) -> Changed:
        index = self._subagent_index(event.subagent_run_id)
        self._subagents[index] = attrs.evolve(
            self._subagents[index],
            status=SubagentStatus.FAILED,
            error_message=event.message,
            error_code=event.code,
        )
        return self._subagent_change(index, ChangeKind.FAILED)

    def _nothing(
        self,
        event: RawEvent | CustomEvent | StepStartedEvent | StepFinishedEvent,
    ) -> Changed:
        return NOTHING

    def _unexpanded(
        self, event: TextMessageChunkEvent | ToolCallChunkEvent | ReasoningMessageChunkEvent
    ) -> Changed:
        raise _refusal(event.type, "AGUI-V091", "aguikit.chunks.ChunkNormalizer")

    def _untranslated(
        self,
        event: ThinkingStartEvent
        | ThinkingEndEvent
        | ThinkingTextMessageStartEvent
        | ThinkingTextMessageContentEvent
        | ThinkingTextMessageEndEvent,
    ) -> Changed:
        raise _refusal(event.type, "AGUI-V094", "aguikit.receiver.Receiver")


def _refusal(event_type: str, rule_id: str, stage: str) -> StageOrderError:
    """An event an earlier stage owns, refused by name: the applier keeps no second copy."""
    rule = RULES_BY_ID[rule_id]
    message = rule.template.format(event_type=event_type, stage="applier")
    return StageOrderError(rule.id, rule.symbol, message, stage=stage, event_type=event_type)


_APPLY: Final[dict[type, Callable[[Applier, Any], Changed]]] = complete(
    "the applier",
    {
        TextMessageStartEvent: Applier._text_start,
        TextMessageContentEvent: Applier._text_content,
        TextMessageEndEvent: Applier._text_end,
        TextMessageChunkEvent: Applier._unexpanded,
        ToolCallStartEvent: Applier._tool_start,
        ToolCallArgsEvent: Applier._tool_args,
        ToolCallEndEvent: Applier._tool_end,
        ToolCallChunkEvent: Applier._unexpanded,
        ToolCallResultEvent: Applier._tool_result,
        StateSnapshotEvent: Applier._state_snapshot,
        StateDeltaEvent: Applier._state_delta,
        MessagesSnapshotEvent: Applier._messages_snapshot,
        ActivitySnapshotEvent: Applier._activity_snapshot,
        ActivityDeltaEvent: Applier._activity_delta,
        RawEvent: Applier._nothing,
        CustomEvent: Applier._nothing,
        RunStartedEvent: Applier._run_started,
        RunFinishedEvent: Applier._run_finished,
        RunErrorEvent: Applier._run_error,
        StepStartedEvent: Applier._nothing,
        StepFinishedEvent: Applier._nothing,
        ReasoningStartEvent: Applier._reasoning_block_start,
        ReasoningMessageStartEvent: Applier._reasoning_start,
        ReasoningMessageContentEvent: Applier._reasoning_content,
        ReasoningMessageEndEvent: Applier._reasoning_end,
        ReasoningMessageChunkEvent: Applier._unexpanded,
        ReasoningEndEvent: Applier._reasoning_block_end,
        ReasoningEncryptedValueEvent: Applier._encrypted_value,
        SubagentStartedEvent: Applier._subagent_started,
        SubagentFinishedEvent: Applier._subagent_finished,
        SubagentErrorEvent: Applier._subagent_error,
        ThinkingStartEvent: Applier._untranslated,
        ThinkingTextMessageStartEvent: Applier._untranslated,
        ThinkingTextMessageContentEvent: Applier._untranslated,
        ThinkingTextMessageEndEvent: Applier._untranslated,
        ThinkingEndEvent: Applier._untranslated,
    },
    stage="applier",
    passes=Applier._nothing,
)
"""Every event class, and what applying it does: handled, ignored on purpose (state the
view does not keep), or refused because an earlier stage owns it."""
