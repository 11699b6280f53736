"""
The ordering and attribution rules of AG-UI, declared as data.

A consumer of somebody else's agent needs one clear error, naming the rule, when a stream
breaks the protocol.  The rules that say what "breaks" means live here and nowhere else: a
catalog of :class:`Rule` entries (stable id, readable symbol, title, source, an example
stream that violates it) and a table of :class:`Row` entries, one per event type, saying
what the event requires to be open, what it opens, continues or closes, which field keys
the entity, how its ``subagentRunId`` attribution is checked, and which rule each check
reports.  :mod:`aguikit.verify` is a small interpreter over this table;
``docs/rules.md`` and ``aguikit rules`` are rendered from it.  Adding a protocol event is
adding a row.

What is deliberately *not* here: that one entity must close before the next opens.
Everything is keyed by id, so two messages, two tool calls, or a tool call inside the
message that narrates it may all stream at once.  Nor must an attributing
``subagentRunId`` name an announced subagent: attribution without lifecycle events is a
supported mode.  State, activity, raw and custom events are unordered and close nothing.
A reasoning message need not sit inside a reasoning span, and re-opening an id that has
*closed* continues it rather than contradicting it.

The table is checked once, at import.  Hostile stream input never raises anything but a
:class:`~aguikit.errors.ProtocolError`; a malformed table (a duplicate id, an event type
with no row, a row naming an unknown rule) is a bug in this package and fails loudly.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ._generated.models import EventType
from ._generated.registry import DEPRECATED_EVENT_TYPES, EVENT_CLASSES

__all__ = [
    "FAMILIES",
    "LIFECYCLE_GATE",
    "LIFECYCLE_RULES",
    "LIMIT_RULES",
    "RULES",
    "RULES_BY_ID",
    "TABLE",
    "Attribution",
    "Bucket",
    "Effect",
    "Family",
    "FamilySpec",
    "Lifecycle",
    "Phase",
    "Row",
    "Rule",
    "render_markdown",
    "render_text",
]


# ---------------------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------------------


class Family(enum.Enum):
    """The kinds of bracketed entity a stream opens and closes."""

    TEXT_MESSAGE = "text message"
    TOOL_CALL = "tool call"
    REASONING_SPAN = "reasoning span"
    REASONING_MESSAGE = "reasoning message"
    THINKING_BLOCK = "thinking block"
    THINKING_MESSAGE = "thinking message"
    STEP = "step"
    SUBAGENT = "subagent"


class Bucket(enum.Enum):
    """
    Where an entity's owner is recorded for the rest of the run.

    Ids are unique only within a kind, so each kind has its own map; a reasoning span and
    the reasoning messages inside it share one, so the two cannot be claimed by different
    producers.
    """

    MESSAGE = "message"
    TOOL_CALL = "tool call"
    REASONING = "reasoning message"
    ACTIVITY = "activity"


class Lifecycle(enum.Enum):
    """What an event does to the run it belongs to."""

    START = "starts a run"
    FINISH = "finishes the run"
    ERROR = "aborts the run"
    IN_RUN = "belongs inside a run"


class Phase(enum.IntEnum):
    """Where a stream is between runs; the verifier's lifecycle state."""

    NEW = 0
    """Nothing has arrived yet."""
    ACTIVE = 1
    """A run has started and not ended."""
    FINISHED = 2
    """The last run ended with ``RUN_FINISHED``."""
    ERRORED = 3
    """The last run ended with ``RUN_ERROR``."""


class Effect(enum.Enum):
    """What an event does to the entity its key names."""

    NONE = "none"
    OPENS = "opens"
    CONTINUES = "continues"
    CLOSES = "closes"
    FOLLOWS = "follows"
    """Refers to an entity that must not be open any more (a tool result answers an ended call)."""


class Attribution(enum.Enum):
    """How an event's ``subagentRunId`` is checked against recorded ownership."""

    NONE = "not checked"
    CLAIM = "first writer owns; a tagged re-open must name the owner"
    AGREE = "a tag, when present, must name the recorded owner"
    MINT = "records its own tag as the owner, replacing any recorded one"
    REMINT = "records its tag unless the entity is known and the event keeps it"


# ---------------------------------------------------------------------------------------
# The rule catalog
# ---------------------------------------------------------------------------------------

_SPEC: Final = "/spec/1.1/events"


@attrs.frozen
class Rule:
    """
    One rule a stream can break.

    ``template`` derives the error message from the finding's fields (``event_type``,
    ``entity_id`` and whatever the check adds); where the conformance corpus pins a
    substring of the official client's message, the template contains it.
    ``example`` is a minimal stream of wire dicts that breaks this rule and no earlier one;
    it is checked by the test suite.  ``at_finish`` marks rules only ``finish()`` reports;
    ``in_process`` marks an example that only an in-process producer can send, because the
    wire converter would reject it first.  ``setting`` names the keyword argument of a
    configured safety limit the rule enforces (:mod:`aguikit.limits`); its example breaks
    the rule with that setting at 1, since a realistic default needs thousands of events.
    """

    id: str
    symbol: str
    title: str
    source: str
    template: str
    example: tuple[Mapping[str, Any], ...]
    at_finish: bool = False
    in_process: bool = False
    setting: str | None = None


def _rs(run: str = "r1", thread: str = "t1") -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": thread, "runId": run}


def _rf(run: str = "r1", thread: str = "t1", **extra: Any) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": thread, "runId": run, **extra}


def _ts(mid: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **extra}


def _tc(mid: str = "m1", delta: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta, **extra}


def _te(mid: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_END", "messageId": mid, **extra}


def _cs(cid: str = "c1", **extra: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "lookup", **extra}


def _ca(cid: str = "c1", **extra: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": "{}", **extra}


def _ce(cid: str = "c1", **extra: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_END", "toolCallId": cid, **extra}


def _sub(sid: str, **extra: Any) -> dict[str, Any]:
    return {"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "helper", **extra}


_PARENT: Final = "the parent agent"

RULES: Final[tuple[Rule, ...]] = (
    # -- lifecycle ---------------------------------------------------------------------
    Rule(
        "AGUI-V001",
        "first-event-not-run-started",
        "The first event opens a run: RUN_STARTED, or a RUN_ERROR for a run that failed "
        "before it began",
        "seed rule 1; corpus first-event-not-run-started-fatal, run-error-first-run-continues",
        "First event must be 'RUN_STARTED' (or a RUN_ERROR), but the stream opened with "
        "{event_type}",
        ({"type": "CUSTOM", "name": "hello", "value": 1}, _rs(), _rf()),
    ),
    Rule(
        "AGUI-V002",
        "run-started-while-active",
        "RUN_STARTED may not arrive while a run is still active; runs are sequential",
        "seed rule 1; corpus nested-run-started-fatal",
        "Cannot send 'RUN_STARTED' while a run is still active: run '{entity_id}' has not "
        "sent RUN_FINISHED or RUN_ERROR",
        (_rs(), _rs("r2")),
    ),
    Rule(
        "AGUI-V003",
        "event-after-run-finished",
        "After RUN_FINISHED only a new RUN_STARTED or a late RUN_ERROR may follow",
        "seed rule 2; corpus event-after-run-finished-fatal, "
        "late-run-error-after-finished-run-continues",
        "{event_type} arrived after the run ended: The run has already finished with "
        "'RUN_FINISHED'; only RUN_STARTED (a new run) or a late RUN_ERROR may follow",
        (_rs(), _rf(), _ts()),
    ),
    Rule(
        "AGUI-V004",
        "event-after-run-error",
        "After RUN_ERROR only a new RUN_STARTED may follow",
        "seed rule 2; corpus run-error-then-new-run-continues",
        "{event_type} arrived after the run ended: The run has already errored with "
        "'RUN_ERROR'; only RUN_STARTED (a new run) may follow",
        (_rs(), {"type": "RUN_ERROR", "message": "boom"}, _ts()),
    ),
    Rule(
        "AGUI-V005",
        "unclosed-at-run-finished",
        "Everything a run opened (messages, tool calls, reasoning, thinking, steps, "
        "subagents) is closed before RUN_FINISHED; RUN_ERROR may abandon it",
        "seed rules 7 and 13; corpus open-message-at-run-finished-fatal, "
        "run-finished-with-active-subagent-fatal",
        "Cannot send 'RUN_FINISHED' while {plural} are still active: {listing}",
        (_rs(), _ts(), _tc(), _rf()),
    ),
    Rule(
        "AGUI-V006",
        "truncated-stream",
        "The stream may not end inside a run: a run without RUN_FINISHED or RUN_ERROR has "
        "no outcome and must not be reported as a success",
        "corpus (draft) truncated-stream-fails-the-run; spec basic/transports#truncation",
        "the stream ended without a terminal event: run '{entity_id}' never sent "
        "RUN_FINISHED or RUN_ERROR",
        (_rs(), _ts(), _tc(), _te()),
        at_finish=True,
    ),
    Rule(
        "AGUI-V007",
        "stream-without-run",
        "A stream that ends must have carried a run",
        "seed Verifier::finish",
        "the stream ended without a terminal event: no run was ever started",
        (),
        at_finish=True,
    ),
    Rule(
        "AGUI-V008",
        "run-id-mismatch",
        "RUN_FINISHED names the run that RUN_STARTED opened",
        "corpus (draft) run-finished-wrong-run-id-fatal",
        "RUN_FINISHED names run '{got}' but the open run is '{entity_id}': RUN_STARTED and "
        "RUN_FINISHED must agree on their runId",
        (_rs(), _rf(run="r2")),
    ),
    Rule(
        "AGUI-V009",
        "thread-id-mismatch",
        "Every run of a stream, and both of its boundary events, name one thread",
        "corpus (draft) run-finished-wrong-thread-id-fatal, second-run-on-another-thread-fatal",
        "{event_type} names thread '{got}' but the stream's thread is '{entity_id}': {detail}",
        (_rs(), _rf(thread="t2")),
    ),
    # -- text messages and tool calls ---------------------------------------------------
    Rule(
        "AGUI-V011",
        "text-message-already-open",
        "TEXT_MESSAGE_START may not re-open a message id that is still open",
        "seed rule 3",
        "{event_type} for text message '{entity_id}', which is already open; end it with "
        "TEXT_MESSAGE_END before starting it again",
        (_rs(), _ts(), _ts(), _te(), _rf()),
    ),
    Rule(
        "AGUI-V012",
        "text-message-not-open",
        "TEXT_MESSAGE_CONTENT and TEXT_MESSAGE_END need an open message with that id",
        "seed rule 3; corpus content-without-start-fatal",
        "{event_type}: No active text message found with ID '{entity_id}'; it was never "
        "opened, or it has already ended",
        (_rs(), _tc("orphan"), _rf()),
    ),
    Rule(
        "AGUI-V013",
        "tool-call-already-open",
        "TOOL_CALL_START may not re-open a tool call id that is still open",
        "seed rule 4",
        "{event_type} for tool call '{entity_id}', which is already open; end it with "
        "TOOL_CALL_END before starting it again",
        (_rs(), _cs(), _cs(), _ce(), _rf()),
    ),
    Rule(
        "AGUI-V014",
        "tool-call-not-open",
        "TOOL_CALL_ARGS and TOOL_CALL_END need an open tool call with that id",
        "seed rule 4",
        "{event_type}: No active tool call found with ID '{entity_id}'; it was never "
        "opened, or it has already ended",
        (_rs(), _ca("orphan"), _rf()),
    ),
    Rule(
        "AGUI-V015",
        "tool-result-for-open-call",
        "TOOL_CALL_RESULT may not answer a tool call that is still streaming its arguments",
        "seed rule 5",
        "{event_type} answers tool call '{entity_id}', which has not ended yet",
        (
            _rs(),
            _cs(),
            {"type": "TOOL_CALL_RESULT", "messageId": "tm1", "toolCallId": "c1", "content": "ok"},
            _ce(),
            _rf(),
        ),
    ),
    # -- reasoning ----------------------------------------------------------------------
    Rule(
        "AGUI-V021",
        "reasoning-span-already-open",
        "REASONING_START may not re-open a span id that is still open",
        f"seed rule 4; spec {_SPEC}/reasoning",
        "{event_type} for reasoning span '{entity_id}', which is already open; end it with "
        "REASONING_END first",
        (
            _rs(),
            {"type": "REASONING_START", "messageId": "s1"},
            {"type": "REASONING_START", "messageId": "s1"},
        ),
    ),
    Rule(
        "AGUI-V022",
        "reasoning-span-not-open",
        "REASONING_END needs an open span with that id",
        "corpus reasoning-discipline-verified (spans and messages are bracketed alike)",
        "{event_type}: No active reasoning span found with ID '{entity_id}'; send "
        "REASONING_START first",
        (_rs(), {"type": "REASONING_END", "messageId": "s1"}, _rf()),
    ),
    Rule(
        "AGUI-V023",
        "reasoning-message-already-open",
        "REASONING_MESSAGE_START may not re-open a reasoning message id that is still open",
        "seed rule 4",
        "{event_type} for reasoning message '{entity_id}', which is already open; end it "
        "with REASONING_MESSAGE_END first",
        (
            _rs(),
            {"type": "REASONING_MESSAGE_START", "messageId": "rm1", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_START", "messageId": "rm1", "role": "reasoning"},
        ),
    ),
    Rule(
        "AGUI-V024",
        "reasoning-message-not-open",
        "REASONING_MESSAGE_CONTENT and REASONING_MESSAGE_END need an open reasoning message",
        "seed rule 4; corpus reasoning-discipline-verified",
        "{event_type}: No active reasoning message found with ID '{entity_id}'; send "
        "REASONING_MESSAGE_START first",
        (
            _rs(),
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm1", "delta": "hmm"},
            _rf(),
        ),
    ),
    # -- deprecated thinking ------------------------------------------------------------
    Rule(
        "AGUI-V031",
        "thinking-block-already-open",
        "THINKING_START may not open a second thinking block before THINKING_END",
        "deprecated THINKING_* events (ruby 0.1.4 to 0.2.0 diff; corpus "
        "era-0-0-45-thinking-translated)",
        "{event_type} while a thinking block is already open; thinking blocks do not nest",
        (_rs(), {"type": "THINKING_START"}, {"type": "THINKING_START"}),
    ),
    Rule(
        "AGUI-V032",
        "thinking-block-not-open",
        "THINKING_END needs an open thinking block",
        "deprecated THINKING_* events",
        "{event_type} without an open thinking block; send THINKING_START first",
        (_rs(), {"type": "THINKING_END"}, _rf()),
    ),
    Rule(
        "AGUI-V033",
        "thinking-message-already-open",
        "THINKING_TEXT_MESSAGE_START may not open a second thinking message before it ends",
        "deprecated THINKING_* events",
        "{event_type} while a thinking message is already open; end it with "
        "THINKING_TEXT_MESSAGE_END first",
        (
            _rs(),
            {"type": "THINKING_START"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
        ),
    ),
    Rule(
        "AGUI-V034",
        "thinking-message-not-open",
        "THINKING_TEXT_MESSAGE_CONTENT and _END need an open thinking message",
        "deprecated THINKING_* events",
        "{event_type} without an open thinking message; send THINKING_TEXT_MESSAGE_START first",
        (
            _rs(),
            {"type": "THINKING_START"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hmm"},
        ),
    ),
    Rule(
        "AGUI-V035",
        "thinking-message-outside-block",
        "A thinking message opens inside a thinking block",
        "deprecated THINKING_* events",
        "{event_type} outside a thinking block; send THINKING_START first",
        (_rs(), {"type": "THINKING_TEXT_MESSAGE_START"}),
    ),
    Rule(
        "AGUI-V036",
        "thinking-block-ended-with-open-message",
        "THINKING_END may not close a block whose thinking message is still open",
        "deprecated THINKING_* events",
        "{event_type} while the thinking message inside the block is still open; send "
        "THINKING_TEXT_MESSAGE_END first",
        (
            _rs(),
            {"type": "THINKING_START"},
            {"type": "THINKING_TEXT_MESSAGE_START"},
            {"type": "THINKING_END"},
        ),
    ),
    # -- steps --------------------------------------------------------------------------
    Rule(
        "AGUI-V041",
        "step-already-running",
        "A step name does not nest with itself under one owner",
        "seed rules 6 and 11",
        "{event_type} for step '{entity_id}', which is already running under {owner}",
        (
            _rs(),
            {"type": "STEP_STARTED", "stepName": "plan"},
            {"type": "STEP_STARTED", "stepName": "plan"},
        ),
    ),
    Rule(
        "AGUI-V042",
        "step-not-started",
        "STEP_FINISHED needs a matching STEP_STARTED",
        "seed rule 6; corpus step-finished-without-start-fatal",
        "{event_type} for step '{entity_id}' under {owner} that was not started",
        (_rs(), {"type": "STEP_FINISHED", "stepName": "plan"}, _rf()),
    ),
    Rule(
        "AGUI-V043",
        "step-finished-by-other-owner",
        "A step is finished by the agent that started it",
        "seed rule 11",
        "{event_type} for step '{entity_id}' attributed to {owner}, but that step is open "
        "under {other}; a step is finished by whoever started it",
        (
            _rs(),
            {"type": "STEP_STARTED", "stepName": "plan"},
            {"type": "STEP_FINISHED", "stepName": "plan", "subagentRunId": "s1"},
        ),
    ),
    # -- subagents ----------------------------------------------------------------------
    Rule(
        "AGUI-V051",
        "subagent-already-active",
        "SUBAGENT_STARTED may not name an invocation that is active",
        "seed rule 12",
        "{event_type} for subagent '{entity_id}', which is already active",
        (_rs(), _sub("s1"), _sub("s1")),
    ),
    Rule(
        "AGUI-V052",
        "subagent-id-reused",
        "A subagentRunId names one invocation: it may not start again after it ended",
        "seed rule 12",
        "{event_type} for subagent '{entity_id}', which already ended in this run; a "
        "subagentRunId names one invocation",
        (
            _rs(),
            _sub("s1"),
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
            _sub("s1"),
        ),
    ),
    Rule(
        "AGUI-V053",
        "subagent-parent-not-started",
        "SUBAGENT_STARTED names a parentSubagentRunId that was started in this run",
        "seed rule 12",
        "{event_type} for subagent '{entity_id}' names parent '{parent}', which was never "
        "started in this run",
        (_rs(), _sub("s2", parentSubagentRunId="s1")),
    ),
    Rule(
        "AGUI-V054",
        "subagent-not-active",
        "SUBAGENT_FINISHED and SUBAGENT_ERROR name an active invocation",
        "seed rule 12; corpus subagent-finished-unstarted-fatal",
        "{event_type}: no active subagent found with ID '{entity_id}'; send SUBAGENT_STARTED first",
        (_rs(), {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"}, _rf()),
    ),
    # -- attribution --------------------------------------------------------------------
    Rule(
        "AGUI-V061",
        "owner-mismatch",
        "An event that names a subagent names the one that owns the entity it continues, "
        "closes or re-opens; an untagged one agrees with any owner",
        "seed rule 9; corpus subagent-attribution-mismatch-fatal, "
        "subagent-unannounced-attribution-accepted",
        "{event_type}: subagentRunId {tag} does not match the {noun} '{entity_id}', which "
        "belongs to {owner}",
        (_rs(), _cs(subagentRunId="s1"), _ca(), _ce(subagentRunId="s2")),
    ),
    Rule(
        "AGUI-V062",
        "tool-call-parent-owner-mismatch",
        "A tool call belongs to the owner of the message its parentMessageId names",
        "seed rule 10",
        "{event_type}: subagentRunId {tag} does not match the owner of parent message "
        "'{parent}' ({owner}); a tool call belongs to the message that carries it",
        (
            _rs(),
            _ts(subagentRunId="s1"),
            _cs(parentMessageId="m1", subagentRunId="s2"),
        ),
    ),
    # -- outcomes -----------------------------------------------------------------------
    Rule(
        "AGUI-V071",
        "interrupt-outcome-empty",
        "An interrupt outcome carries at least one interrupt",
        "seed rule 8",
        "{event_type} has an interrupt outcome with no interrupts; a run that pauses "
        "must say for what",
        (_rs(), _rf(outcome={"type": "interrupt", "interrupts": []})),
    ),
    Rule(
        "AGUI-V072",
        "duplicate-interrupt-id",
        "The interrupts of one outcome have distinct ids",
        "corpus (draft) duplicate-interrupt-id-fatal",
        "{event_type} outcome has two interrupts carrying the id '{entity_id}'; a resume "
        "entry answers an interrupt by its id",
        (
            _rs(),
            _rf(
                outcome={
                    "type": "interrupt",
                    "interrupts": [
                        {"id": "i1", "reason": "approval"},
                        {"id": "i1", "reason": "approval"},
                    ],
                }
            ),
        ),
    ),
    # -- engine -------------------------------------------------------------------------
    Rule(
        "AGUI-V091",
        "unnormalized-chunk",
        "Chunk events are expanded by aguikit.chunks before verification",
        "seed client/chunks (normalization runs before the verifier)",
        "{event_type} reached the verifier un-normalized; expand chunk events with "
        "aguikit.chunks before verifying",
        (_rs(), {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "hi"}),
    ),
    Rule(
        "AGUI-V092",
        "malformed-event",
        "The verifier only accepts AG-UI event objects whose ids are plain values",
        "aguikit: bad input raises a typed error, never a bare TypeError",
        "{event_type} cannot be verified: {detail}",
        (_rs(), {"type": "TEXT_MESSAGE_START", "messageId": ["not", "an", "id"]}),
        in_process=True,
    ),
    Rule(
        "AGUI-V093",
        "too-many-open-entities",
        "At most max_open_entities entities are open at once in a run (a configured safety "
        "limit, 10,000 by default; see docs/limits.md)",
        "aguikit: memory stays bounded when a producer opens entities and never closes them",
        "{event_type} would open {noun} '{entity_id}' while {count} entities are already "
        "open (limit max_open_entities={limit}); close some first, or raise the limit if "
        "the stream is legitimate",
        (_rs(), _ts("m1"), _ts("m2")),
        setting="max_open_entities",
    ),
)
"""Every rule, in catalog order."""

RULES_BY_ID: Final[Mapping[str, Rule]] = {rule.id: rule for rule in RULES}


# ---------------------------------------------------------------------------------------
# Entity families
# ---------------------------------------------------------------------------------------


@attrs.frozen
class FamilySpec:
    """
    How one family of bracketed entity behaves.

    ``bucket`` is where its owners are recorded (``None`` when it has no owner of its
    own).  ``owner_scoped`` keys open entities by owner as well as id, so the same step
    name may be open under two agents.  ``reusable`` says whether an id that closed may
    open again: a text message may (``reopen-closed-message-appends``), a subagent
    invocation may not.  ``plural`` names the family in the unclosed-at-finish message.
    """

    family: Family
    plural: str
    bucket: Bucket | None
    owner_scoped: bool = False
    reusable: bool = True


FAMILIES: Final[tuple[FamilySpec, ...]] = (
    FamilySpec(Family.TEXT_MESSAGE, "text messages", Bucket.MESSAGE),
    FamilySpec(Family.TOOL_CALL, "tool calls", Bucket.TOOL_CALL),
    FamilySpec(Family.REASONING_MESSAGE, "reasoning messages", Bucket.REASONING),
    FamilySpec(Family.REASONING_SPAN, "reasoning spans", Bucket.REASONING),
    FamilySpec(Family.THINKING_MESSAGE, "thinking messages", None),
    FamilySpec(Family.THINKING_BLOCK, "thinking blocks", None),
    FamilySpec(Family.STEP, "steps", None, owner_scoped=True),
    FamilySpec(Family.SUBAGENT, "subagents", None, reusable=False),
)
"""Every family, in the order ``RUN_FINISHED`` reports what is still open."""


# ---------------------------------------------------------------------------------------
# Lifecycle
# ---------------------------------------------------------------------------------------

LIFECYCLE_GATE: Final[Mapping[Lifecycle, Mapping[Phase, str | None]]] = {
    Lifecycle.START: {
        Phase.NEW: None,
        Phase.ACTIVE: "AGUI-V002",
        Phase.FINISHED: None,
        Phase.ERRORED: None,
    },
    Lifecycle.FINISH: {
        Phase.NEW: "AGUI-V001",
        Phase.ACTIVE: None,
        Phase.FINISHED: "AGUI-V003",
        Phase.ERRORED: "AGUI-V004",
    },
    Lifecycle.ERROR: {
        Phase.NEW: None,
        Phase.ACTIVE: None,
        Phase.FINISHED: None,
        Phase.ERRORED: "AGUI-V004",
    },
    Lifecycle.IN_RUN: {
        Phase.NEW: "AGUI-V001",
        Phase.ACTIVE: None,
        Phase.FINISHED: "AGUI-V003",
        Phase.ERRORED: "AGUI-V004",
    },
}
"""Which rule an event of each lifecycle kind breaks in each phase (``None``: allowed)."""

LIFECYCLE_NEXT: Final[Mapping[Lifecycle, Phase | None]] = {
    Lifecycle.START: Phase.ACTIVE,
    Lifecycle.FINISH: Phase.FINISHED,
    Lifecycle.ERROR: Phase.ERRORED,
    Lifecycle.IN_RUN: None,
}
"""The phase an accepted event moves the stream to (``None``: unchanged)."""

LIFECYCLE_RULES: Final[Mapping[str, str]] = {
    "unclosed": "AGUI-V005",
    "truncated": "AGUI-V006",
    "never_started": "AGUI-V007",
    "malformed": "AGUI-V092",
}
"""Rules the engine itself reports, outside any row."""

LIMIT_RULES: Final[Mapping[str, str]] = {
    "open_entities": "AGUI-V093",
}
"""Rules that enforce a configured safety limit (:mod:`aguikit.limits`), by limit."""


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------


@attrs.frozen
class Row:
    """
    What one event type does, as data.

    ``effect`` on ``family`` is keyed by the event field ``key`` (``None`` for the
    deprecated thinking events, whose block and message are singletons).  ``owner`` and
    ``bucket`` say how the ``subagentRunId`` tag is checked and recorded; ``owner_key``
    is the field keying the owner map when it differs from ``key`` (a tool result mints the
    *message* it names).  ``parent_key`` names a field whose entity's owner the event
    inherits (``parentMessageId`` of a tool call).  ``requires_open`` and
    ``requires_closed`` name a singleton family that must be open or closed.  ``checks``
    are named hook checks and ``effects`` named hook effects, resolved by the engine's hook
    registry.  ``rules`` maps every check the row performs (generic ones by name, hooks by
    their name) to the rule id it reports.
    """

    event: EventType
    lifecycle: Lifecycle = Lifecycle.IN_RUN
    effect: Effect = Effect.NONE
    family: Family | None = None
    key: str | None = None
    owner: Attribution = Attribution.NONE
    bucket: Bucket | None = None
    owner_key: str | None = None
    keep_field: str | None = None
    parent_key: str | None = None
    parent_bucket: Bucket | None = None
    requires_open: Family | None = None
    requires_closed: Family | None = None
    checks: tuple[str, ...] = ()
    effects: tuple[str, ...] = ()
    rules: Mapping[str, str] = attrs.field(factory=dict)


E: Final = EventType
_OWN: Final = "AGUI-V061"

TABLE: Final[tuple[Row, ...]] = (
    # -- lifecycle ----------------------------------------------------------------------
    Row(
        E.RUN_STARTED,
        lifecycle=Lifecycle.START,
        checks=("thread_agrees_with_stream",),
        effects=("seed_owners_from_input",),
        rules={"thread_agrees_with_stream": "AGUI-V009"},
    ),
    Row(
        E.RUN_FINISHED,
        lifecycle=Lifecycle.FINISH,
        checks=("run_id_agrees", "thread_id_agrees", "interrupts_present", "interrupts_unique"),
        rules={
            "unclosed": "AGUI-V005",
            "run_id_agrees": "AGUI-V008",
            "thread_id_agrees": "AGUI-V009",
            "interrupts_present": "AGUI-V071",
            "interrupts_unique": "AGUI-V072",
        },
    ),
    Row(E.RUN_ERROR, lifecycle=Lifecycle.ERROR),
    # -- text messages ------------------------------------------------------------------
    Row(
        E.TEXT_MESSAGE_START,
        effect=Effect.OPENS,
        family=Family.TEXT_MESSAGE,
        key="message_id",
        owner=Attribution.CLAIM,
        bucket=Bucket.MESSAGE,
        rules={"already_open": "AGUI-V011", "owner": _OWN},
    ),
    Row(
        E.TEXT_MESSAGE_CONTENT,
        effect=Effect.CONTINUES,
        family=Family.TEXT_MESSAGE,
        key="message_id",
        owner=Attribution.AGREE,
        bucket=Bucket.MESSAGE,
        rules={"not_open": "AGUI-V012", "owner": _OWN},
    ),
    Row(
        E.TEXT_MESSAGE_END,
        effect=Effect.CLOSES,
        family=Family.TEXT_MESSAGE,
        key="message_id",
        owner=Attribution.AGREE,
        bucket=Bucket.MESSAGE,
        rules={"not_open": "AGUI-V012", "owner": _OWN},
    ),
    Row(
        E.TEXT_MESSAGE_CHUNK, checks=("chunk_normalized",), rules={"chunk_normalized": "AGUI-V091"}
    ),
    # -- tool calls ---------------------------------------------------------------------
    Row(
        E.TOOL_CALL_START,
        effect=Effect.OPENS,
        family=Family.TOOL_CALL,
        key="tool_call_id",
        owner=Attribution.CLAIM,
        bucket=Bucket.TOOL_CALL,
        parent_key="parent_message_id",
        parent_bucket=Bucket.MESSAGE,
        rules={"already_open": "AGUI-V013", "owner": _OWN, "parent_owner": "AGUI-V062"},
    ),
    Row(
        E.TOOL_CALL_ARGS,
        effect=Effect.CONTINUES,
        family=Family.TOOL_CALL,
        key="tool_call_id",
        owner=Attribution.AGREE,
        bucket=Bucket.TOOL_CALL,
        rules={"not_open": "AGUI-V014", "owner": _OWN},
    ),
    Row(
        E.TOOL_CALL_END,
        effect=Effect.CLOSES,
        family=Family.TOOL_CALL,
        key="tool_call_id",
        owner=Attribution.AGREE,
        bucket=Bucket.TOOL_CALL,
        rules={"not_open": "AGUI-V014", "owner": _OWN},
    ),
    Row(E.TOOL_CALL_CHUNK, checks=("chunk_normalized",), rules={"chunk_normalized": "AGUI-V091"}),
    Row(
        E.TOOL_CALL_RESULT,
        effect=Effect.FOLLOWS,
        family=Family.TOOL_CALL,
        key="tool_call_id",
        owner=Attribution.MINT,
        bucket=Bucket.MESSAGE,
        owner_key="message_id",
        rules={"still_open": "AGUI-V015"},
    ),
    # -- state, activity, raw, custom: unordered ----------------------------------------
    Row(E.STATE_SNAPSHOT),
    Row(E.STATE_DELTA),
    Row(E.MESSAGES_SNAPSHOT, effects=("seed_owners_from_snapshot",)),
    Row(
        E.ACTIVITY_SNAPSHOT,
        owner=Attribution.REMINT,
        bucket=Bucket.ACTIVITY,
        owner_key="message_id",
        keep_field="replace",
    ),
    Row(
        E.ACTIVITY_DELTA,
        owner=Attribution.AGREE,
        bucket=Bucket.ACTIVITY,
        owner_key="message_id",
        rules={"owner": _OWN},
    ),
    Row(E.RAW),
    Row(E.CUSTOM),
    # -- steps --------------------------------------------------------------------------
    Row(
        E.STEP_STARTED,
        effect=Effect.OPENS,
        family=Family.STEP,
        key="step_name",
        rules={"already_open": "AGUI-V041"},
    ),
    Row(
        E.STEP_FINISHED,
        effect=Effect.CLOSES,
        family=Family.STEP,
        key="step_name",
        rules={"not_open": "AGUI-V042", "open_elsewhere": "AGUI-V043"},
    ),
    # -- reasoning ----------------------------------------------------------------------
    Row(
        E.REASONING_START,
        effect=Effect.OPENS,
        family=Family.REASONING_SPAN,
        key="message_id",
        owner=Attribution.CLAIM,
        bucket=Bucket.REASONING,
        rules={"already_open": "AGUI-V021", "owner": _OWN},
    ),
    Row(
        E.REASONING_MESSAGE_START,
        effect=Effect.OPENS,
        family=Family.REASONING_MESSAGE,
        key="message_id",
        owner=Attribution.CLAIM,
        bucket=Bucket.REASONING,
        rules={"already_open": "AGUI-V023", "owner": _OWN},
    ),
    Row(
        E.REASONING_MESSAGE_CONTENT,
        effect=Effect.CONTINUES,
        family=Family.REASONING_MESSAGE,
        key="message_id",
        owner=Attribution.AGREE,
        bucket=Bucket.REASONING,
        rules={"not_open": "AGUI-V024", "owner": _OWN},
    ),
    Row(
        E.REASONING_MESSAGE_END,
        effect=Effect.CLOSES,
        family=Family.REASONING_MESSAGE,
        key="message_id",
        owner=Attribution.AGREE,
        bucket=Bucket.REASONING,
        rules={"not_open": "AGUI-V024", "owner": _OWN},
    ),
    Row(
        E.REASONING_MESSAGE_CHUNK,
        checks=("chunk_normalized",),
        rules={"chunk_normalized": "AGUI-V091"},
    ),
    Row(
        E.REASONING_END,
        effect=Effect.CLOSES,
        family=Family.REASONING_SPAN,
        key="message_id",
        owner=Attribution.AGREE,
        bucket=Bucket.REASONING,
        rules={"not_open": "AGUI-V022", "owner": _OWN},
    ),
    Row(
        E.REASONING_ENCRYPTED_VALUE,
        checks=("encrypted_value_owner",),
        rules={"encrypted_value_owner": _OWN},
    ),
    # -- subagents ----------------------------------------------------------------------
    Row(
        E.SUBAGENT_STARTED,
        effect=Effect.OPENS,
        family=Family.SUBAGENT,
        key="subagent_run_id",
        checks=("subagent_parent_started",),
        rules={
            "already_open": "AGUI-V051",
            "reopened": "AGUI-V052",
            "subagent_parent_started": "AGUI-V053",
        },
    ),
    Row(
        E.SUBAGENT_FINISHED,
        effect=Effect.CLOSES,
        family=Family.SUBAGENT,
        key="subagent_run_id",
        rules={"not_open": "AGUI-V054"},
    ),
    Row(
        E.SUBAGENT_ERROR,
        effect=Effect.CLOSES,
        family=Family.SUBAGENT,
        key="subagent_run_id",
        rules={"not_open": "AGUI-V054"},
    ),
    # -- deprecated thinking ------------------------------------------------------------
    Row(
        E.THINKING_START,
        effect=Effect.OPENS,
        family=Family.THINKING_BLOCK,
        rules={"already_open": "AGUI-V031"},
    ),
    Row(
        E.THINKING_END,
        effect=Effect.CLOSES,
        family=Family.THINKING_BLOCK,
        requires_closed=Family.THINKING_MESSAGE,
        rules={"not_open": "AGUI-V032", "requires_closed": "AGUI-V036"},
    ),
    Row(
        E.THINKING_TEXT_MESSAGE_START,
        effect=Effect.OPENS,
        family=Family.THINKING_MESSAGE,
        requires_open=Family.THINKING_BLOCK,
        rules={"already_open": "AGUI-V033", "requires_open": "AGUI-V035"},
    ),
    Row(
        E.THINKING_TEXT_MESSAGE_CONTENT,
        effect=Effect.CONTINUES,
        family=Family.THINKING_MESSAGE,
        rules={"not_open": "AGUI-V034"},
    ),
    Row(
        E.THINKING_TEXT_MESSAGE_END,
        effect=Effect.CLOSES,
        family=Family.THINKING_MESSAGE,
        rules={"not_open": "AGUI-V034"},
    ),
)
"""One row per event type the schema defines."""


# ---------------------------------------------------------------------------------------
# Import-time checks
# ---------------------------------------------------------------------------------------


class TableError(Exception):
    """The rule table is malformed: a bug in aguikit, never caused by input."""


def _required_checks(row: Row, spec: FamilySpec | None) -> set[str]:
    """The generic checks a row's shape implies, each of which needs a rule id."""
    needed: set[str] = set()
    if row.effect is Effect.OPENS:
        needed.add("already_open")
        if spec is not None and not spec.reusable:
            needed.add("reopened")
    if row.effect in (Effect.CONTINUES, Effect.CLOSES):
        needed.add("not_open")
        if spec is not None and spec.owner_scoped:
            needed.add("open_elsewhere")
    if row.effect is Effect.FOLLOWS:
        needed.add("still_open")
    if row.owner in (Attribution.CLAIM, Attribution.AGREE):
        needed.add("owner")
    if row.parent_key is not None:
        needed.add("parent_owner")
    if row.requires_open is not None:
        needed.add("requires_open")
    if row.requires_closed is not None:
        needed.add("requires_closed")
    if row.lifecycle is Lifecycle.FINISH:
        needed.add("unclosed")
    needed.update(row.checks)
    return needed


def _check_table() -> None:
    problems: list[str] = []
    ids = [rule.id for rule in RULES]
    symbols = [rule.symbol for rule in RULES]
    for label, values in (("rule id", ids), ("rule symbol", symbols)):
        for value in {v for v in values if values.count(v) > 1}:
            problems.append(f"duplicate {label} {value!r}")
    specs = {spec.family: spec for spec in FAMILIES}
    if set(specs) != set(Family) or len(FAMILIES) != len(Family):
        problems.append("FAMILIES must declare every Family exactly once")
    seen: set[str] = set()
    for row in TABLE:
        name = str(row.event)
        if name in seen:
            problems.append(f"duplicate row for {name}")
        seen.add(name)
        if name not in EVENT_CLASSES:
            problems.append(f"row for unknown event type {name}")
            continue
        fields = {f.name for f in attrs.fields(EVENT_CLASSES[name])}
        for label, field in (
            ("key", row.key),
            ("owner_key", row.owner_key),
            ("keep_field", row.keep_field),
            ("parent_key", row.parent_key),
        ):
            if field is not None and field not in fields:
                problems.append(f"{name}: {label} {field!r} is not a field of the event")
        if row.owner is not Attribution.NONE:
            if row.bucket is None:
                problems.append(f"{name}: attribution without a bucket")
            if "subagent_run_id" not in fields:
                problems.append(f"{name}: attribution on an event without subagentRunId")
        if row.owner is not Attribution.NONE and (row.key or row.owner_key) is None:
            problems.append(f"{name}: attribution needs key or owner_key")
        if (row.effect is Effect.NONE) != (row.family is None):
            problems.append(f"{name}: an effect needs a family and a family needs an effect")
        spec = specs.get(row.family) if row.family is not None else None
        if row.effect in (Effect.OPENS, Effect.CONTINUES, Effect.CLOSES) and spec is not None:
            singleton = spec.family in (Family.THINKING_BLOCK, Family.THINKING_MESSAGE)
            if singleton != (row.key is None):
                problems.append(f"{name}: only thinking families are keyless")
        for family in (row.requires_open, row.requires_closed):
            if family is not None and family not in (
                Family.THINKING_BLOCK,
                Family.THINKING_MESSAGE,
            ):
                problems.append(f"{name}: requires_open/closed only names singleton families")
        needed = _required_checks(row, spec)
        for check in sorted(needed - set(row.rules)):
            problems.append(f"{name}: check {check!r} has no rule id")
        for check in sorted(set(row.rules) - needed):
            problems.append(f"{name}: rule given for check {check!r} the row never performs")
        for check, rule_id in row.rules.items():
            if rule_id not in RULES_BY_ID:
                problems.append(f"{name}: check {check!r} reports unknown rule {rule_id!r}")
    missing = sorted(set(EVENT_CLASSES) - seen)
    if missing:
        problems.append(f"event types with no row: {', '.join(missing)}")
    for gate in LIFECYCLE_GATE.values():
        if set(gate) != set(Phase):
            problems.append("LIFECYCLE_GATE must cover every phase")
        problems.extend(
            f"LIFECYCLE_GATE names unknown rule {rule_id!r}"
            for rule_id in gate.values()
            if rule_id is not None and rule_id not in RULES_BY_ID
        )
    problems.extend(
        f"LIFECYCLE_RULES names unknown rule {rule_id!r}"
        for rule_id in (*LIFECYCLE_RULES.values(), *LIMIT_RULES.values())
        if rule_id not in RULES_BY_ID
    )
    if problems:
        raise TableError("malformed rule table: " + "; ".join(problems))


_check_table()

ROWS_BY_TYPE: Final[Mapping[str, Row]] = {str(row.event): row for row in TABLE}
"""The table, keyed by wire type."""


# ---------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------


def _rows_reporting(rule_id: str) -> list[str]:
    events = [str(row.event) for row in TABLE if rule_id in row.rules.values()]
    for lifecycle, gate in LIFECYCLE_GATE.items():
        if rule_id in gate.values():
            events.extend(
                str(row.event)
                for row in TABLE
                if row.lifecycle is lifecycle and str(row.event) not in events
            )
    return events


def _describe_row(row: Row) -> str:
    parts: list[str] = []
    if row.lifecycle is not Lifecycle.IN_RUN:
        parts.append(row.lifecycle.value)
    if row.family is not None:
        keyed = f" keyed by `{row.key}`" if row.key else ""
        parts.append(f"{row.effect.value} a {row.family.value}{keyed}")
    if row.requires_open is not None:
        parts.append(f"requires an open {row.requires_open.value}")
    if row.requires_closed is not None:
        parts.append(f"requires the {row.requires_closed.value} closed")
    if row.owner is not Attribution.NONE and row.bucket is not None:
        parts.append(f"owner ({row.bucket.value}): {row.owner.value}")
    if row.parent_key is not None:
        parts.append(f"inherits the owner of `{row.parent_key}`")
    parts.extend(f"hook `{name}`" for name in (*row.checks, *row.effects))
    if not parts:
        parts.append("unordered; closes nothing")
    return "; ".join(parts)


def render_markdown() -> str:
    """
    The rule catalog and the table as Markdown, the content of ``docs/rules.md``.

    Returns:
        The whole document, ending with a newline.
    """
    out: list[str] = [
        "# Verifier rules",
        "",
        "<!-- Generated by `python -m aguikit.rules > docs/rules.md` from "
        "src/aguikit/rules.py. Do not edit. -->",
        "",
        "Each rule has a stable id and a readable symbol.",
        "A violation raises `aguikit.errors.ProtocolError` carrying both, with the event index,",
        "the event type and the entity the rule is about.",
        "",
        "| id | symbol | title |",
        "| --- | --- | --- |",
    ]
    out.extend(f"| {rule.id} | `{rule.symbol}` | {rule.title} |" for rule in RULES)
    out.append("")
    for rule in RULES:
        out += [f"## {rule.id} `{rule.symbol}`", "", rule.title + ".", ""]
        out.append(f"- Source: {rule.source}")
        reporters = _rows_reporting(rule.id)
        if rule.at_finish:
            out.append("- Reported by: `finish()`, when the stream ends")
        elif reporters:
            out.append("- Reported on: " + ", ".join(f"`{e}`" for e in reporters))
        if rule.in_process:
            out.append("- Only an in-process producer can send this; the wire parser rejects it")
        if rule.setting is not None:
            out.append(
                f"- Reported on: any event that opens an entity; the limit is the "
                f"`{rule.setting}` argument of `Verifier`, `ChunkNormalizer` and `Session` "
                f"(the example assumes `{rule.setting}=1`)"
            )
        out += ["", "Example:", "", "```json"]
        out.extend(json.dumps(event) for event in rule.example)
        if rule.at_finish:
            out.append("// (end of stream)")
        out += ["```", ""]
    out += [
        "## The table",
        "",
        "One row per event type; the verifier interprets these rows.",
        "",
        "| event | what it does | rules |",
        "| --- | --- | --- |",
    ]
    for row in TABLE:
        deprecated = " (deprecated)" if str(row.event) in DEPRECATED_EVENT_TYPES else ""
        rules = ", ".join(sorted(set(row.rules.values())))
        out.append(f"| `{row.event}`{deprecated} | {_describe_row(row)} | {rules} |")
    out.append("")
    return "\n".join(out)


def render_text() -> str:
    """
    The rule catalog as plain text, one rule a line, for ``aguikit rules``.

    Returns:
        Lines of ``id  symbol  title``, ending with a newline.
    """
    width = max(len(rule.symbol) for rule in RULES)
    return "".join(f"{rule.id}  {rule.symbol:<{width}}  {rule.title}\n" for rule in RULES)


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
