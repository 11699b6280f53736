"""
Every id a user of aguikit can see, in one catalogue: what it means, how bad it is, who
reports it, and a stream that triggers it.

A user who meets ``AGUI-C003`` in ``aguikit check`` output, ``patch-failed`` in a
session's warnings or ``AGUI-D002`` in a decode error must be able to look it up in one
place: ``aguikit rules ID`` and ``docs/rules.md`` are rendered from this table and from
nothing else.  So every rule the package reports lives here, whichever floor reports it:

====== ===================== ==========================================================
prefix stage                 what it covers
====== ===================== ==========================================================
D      decoder               bytes that are not a stream: bad UTF-8, not JSON, a cut frame
E      producer / server     a run the server ends at runtime (the handler raised...)
L      decoder / any stage   a configured safety limit (:mod:`aguikit.limits`) was passed
T      HTTP transport        the agent could not be reached or did not answer with a stream
S      schema                an event does not match its definition
W      receiver / applier    something a tolerant receiver accepted instead of failing,
       / producer            or a producer's writer repaired
C      chunk normalizer      a ``*_CHUNK`` event that cannot be expanded
V      verifier (and engine) an ordering or attribution rule of the protocol
P      applier               an RFC 6902 patch that does not apply
K      checker               what ``aguikit check`` looks at beyond the pipeline: input
                             shape, runs that failed, lint, a live endpoint's timing
R      conversation          a thread of exchanges (request and response): the request's
                             shape, and what each request owes the run before it
====== ===================== ==========================================================

Ids are stable: a rule may be reworded, never renumbered.  Each row also has a readable
``symbol`` (what session warnings carry as their ``code``, and what people search for),
a default severity, the template its message is derived from, the source that makes it a
rule, and an example that violates it and no earlier rule; ``tests/test_catalogue.py``
runs every example through the stage that reports the rule.

This module sits on the bottom floor, beside :mod:`aguikit.errors`: the decoders, the
receiver, the normalizer, the verifier and the applier all report from it, so it imports
nothing of aguikit but the errors.  A malformed catalogue (a duplicate id or symbol, a
template naming no field it gets) is a bug in this package and fails loudly at import.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

__all__ = [
    "DECODE_RULES",
    "LIMIT_RULES",
    "RULES",
    "RULES_BY_ID",
    "RULES_BY_SYMBOL",
    "CatalogueError",
    "Rule",
    "Severity",
    "Stage",
    "WarningSink",
    "discard_warning",
    "find_rule",
    "render_message",
    "suggest_rule",
]


class Severity(enum.StrEnum):
    """How bad a finding is by default: what ``aguikit check`` fails on."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Stage(enum.StrEnum):
    """The floor of the pipeline that reports a rule."""

    DECODER = "decoder"
    TRANSPORT = "transport"
    SCHEMA = "schema"
    RECEIVER = "receiver"
    NORMALIZER = "normalizer"
    VERIFIER = "verifier"
    APPLIER = "applier"
    ENCODER = "encoder"
    PRODUCER = "producer"
    EVENT_LOG = "event-log"
    THREAD_STORE = "thread-store"
    CLIENT = "client"
    CHECKER = "checker"
    CONVERSATION = "conversation"


_SPEC: Final = "/spec/1.1/events"


@attrs.frozen
class Rule:
    """
    One thing aguikit reports: a protocol rule, a tolerated oddity, a decode failure.

    ``template`` derives the message from the finding's fields (``event_type``,
    ``entity_id`` and whatever the reporter adds); where the conformance corpus pins a
    substring of the official client's message, the template contains it.
    ``example`` is a minimal stream of wire dicts that triggers this rule and no earlier
    one (for a conversation rule, ``R``, a thread: one ``{"request": RunAgentInput,
    "response": [events]}`` per exchange, ``"status"`` when not 200); ``example_bytes`` is
    raw input instead, for the decoder's rules (and a cut HAR file).  ``at_finish`` marks
    rules only ``finish()`` reports; ``in_process`` marks an example that only an
    in-process producer can send, because the wire converter would reject it first.
    ``setting`` names the keyword argument of a configured safety limit the rule enforces
    (:mod:`aguikit.limits`); its example triggers the rule with that setting at 1 (or at
    the value the example names), since a realistic default needs thousands of events.
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
    severity: Severity = Severity.ERROR
    stage: Stage = Stage.VERIFIER
    example_bytes: bytes | None = None

    @property
    def anchor(self) -> str:
        """The fragment of this rule's section in ``docs/rules.md``."""
        return f"{self.id}-{self.symbol}".lower()


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


def _ex(request: Mapping[str, Any], *events: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """One exchange of a conversation rule's example: the request and its response."""
    return {"request": dict(request), "response": list(events), **extra}


def _in(run: str = "r1", *messages: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` on thread ``t1`` declaring AG-UI 1.1."""
    return {
        "threadId": "t1",
        "runId": run,
        "messages": list(messages),
        "state": {},
        "protocolVersion": "1.1",
        **extra,
    }


def _rs11(run: str = "r1") -> dict[str, Any]:
    return {**_rs(run), "protocolVersion": "1.1"}


_USER: Final = {"id": "u1", "role": "user", "content": "hi"}
_ASK: Final = {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]}


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
    Rule(
        "AGUI-V010",
        "run-id-reused",
        "A runId names one run: a stream's runs (all on one thread) never reuse one",
        'spec 1.1 basic/index, Identifiers: runId "MUST NOT be reused for another run on the '
        'same thread"',
        "{event_type} names run '{entity_id}', which an earlier run of this stream already "
        "used; every run gets a runId of its own",
        (_rs(), _rf(), _rs(), _rf()),
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
    Rule(
        "AGUI-V055",
        "subagent-announced-late",
        "A SUBAGENT_STARTED comes before every event attributed to that invocation in the run "
        "(attributing without announcing at all is fine)",
        'spec 1.1 events/subagents, Lifecycle: "A producer that announces an invocation MUST '
        'do so before any event attributed to it"',
        "{event_type} announces subagent '{entity_id}' after {attributed} of its events: an "
        "invocation is announced before any event attributed to it, or not at all",
        (
            _rs(),
            {"type": "STEP_STARTED", "stepName": "search", "subagentRunId": "s1"},
            _sub("s1"),
        ),
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
        "Chunk events are expanded by aguikit.chunks before verification and application",
        "seed client/chunks (normalization runs before the verifier)",
        "{event_type} reached the {stage} un-normalized; expand chunk events with "
        "aguikit.chunks (ChunkNormalizer, which Session runs) first",
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
    Rule(
        "AGUI-V094",
        "untranslated-deprecated-event",
        "Deprecated THINKING_* events are translated to REASONING_* by the receiver before "
        "they are applied",
        "aguikit: one translation, in the receiver, so every consumer mints the same ids",
        "{event_type} reached the {stage} untranslated; the receiver (aguikit.receiver."
        "Receiver, which Session runs) turns THINKING_* events into REASONING_* first",
        (_rs(), {"type": "THINKING_START"}),
        in_process=True,
        stage=Stage.APPLIER,
    ),
    # -- schema -------------------------------------------------------------------------
    Rule(
        "AGUI-S001",
        "schema-violation",
        "Every event matches the schema definition its type selects",
        "schema/ (the protocol's JSON Schema); every issue names its JSON pointer and keyword",
        "invalid {definition} at {pointer}: {detail}",
        (_rs(), {"type": "TEXT_MESSAGE_START", "messageId": 7, "role": "assistant"}),
        stage=Stage.SCHEMA,
    ),
    Rule(
        "AGUI-S002",
        "unknown-event-type",
        "An event's type names an event of the protocol (a receiver drops an unknown one "
        "with AGUI-W001; a checker reports it)",
        "schema/ EventType; spec basic/compatibility (unknown events are dropped)",
        "unknown event type {value}{hint}",
        (_rs(), {"type": "RUN_STARTD", "threadId": "t1", "runId": "r2"}),
        stage=Stage.SCHEMA,
    ),
    # -- chunks ---------------------------------------------------------------------------
    Rule(
        "AGUI-C001",
        "chunk-without-id",
        "A chunk that names no id continues an open stream of its kind; a consumer must not "
        "invent an identifier",
        "seed client/chunks; corpus chunk-without-id-fatal",
        "First {event_type} must have a {id_field}: this chunk names none and {reason}",
        (_rs(), {"type": "TEXT_MESSAGE_CHUNK", "delta": "hi"}),
        stage=Stage.NORMALIZER,
    ),
    Rule(
        "AGUI-C002",
        "tool-chunk-without-name",
        "The TOOL_CALL_CHUNK that opens a call names the tool: a call with no name cannot be "
        "opened",
        "seed client/chunks",
        "First TOOL_CALL_CHUNK must have a toolCallName: tool call '{entity_id}' cannot be "
        "opened without naming the tool.",
        (_rs(), {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "delta": "{}"}),
        stage=Stage.NORMALIZER,
    ),
    Rule(
        "AGUI-C003",
        "ambiguous-chunk-continuation",
        "An id-less chunk without subagentRunId while several subagents have a stream of its "
        "kind open has no referent; attribute the chunk",
        "seed client/chunks (one open stream per owner)",
        "Ambiguous {event_type}: it carries neither a {id_field} nor a subagentRunId, but "
        "{count} subagents have a {noun} open. Attribute the chunk to the subagent it "
        "belongs to.",
        (
            _rs(),
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "delta": "1", "subagentRunId": "s1"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "b", "delta": "2", "subagentRunId": "s2"},
            {"type": "TEXT_MESSAGE_CHUNK", "delta": "3"},
        ),
        stage=Stage.NORMALIZER,
    ),
    Rule(
        "AGUI-C004",
        "chunk-attribution-conflict",
        "A chunk naming an open stream carries no subagentRunId other than the stream's owner",
        "seed client/chunks (one open stream per owner)",
        "Cannot continue {noun} '{entity_id}': chunk subagentRunId '{tag}' does not match "
        "the open stream's subagent '{holder}'.",
        (
            _rs(),
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "1", "subagentRunId": "s1"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "2", "subagentRunId": "s2"},
        ),
        stage=Stage.NORMALIZER,
    ),
    Rule(
        "AGUI-C005",
        "chunk-field-conflict",
        "A continuation chunk may repeat a field its opener established, but only with the "
        "same value",
        "seed client/chunks",
        "Cannot continue {noun} '{entity_id}': chunk {field} '{value}' does not match the "
        "open stream's {field} {shown}.",
        (
            _rs(),
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant", "delta": "1"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "user", "delta": "2"},
        ),
        stage=Stage.NORMALIZER,
    ),
    # -- what a tolerant receiver accepts -----------------------------------------------
    Rule(
        "AGUI-W001",
        "unknown-event",
        "An event type the protocol does not describe is dropped, and the run survives",
        "spec basic/compatibility; corpus unknown-event-type-dropped",
        "Dropping unrecognised event '{event_type}': the protocol this consumer speaks does "
        "not describe it.",
        (_rs(), {"type": "FUTURE_EVENT", "x": 1}, _rf()),
        severity=Severity.WARNING,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W002",
        "unknown-member",
        "A member the protocol does not describe is stripped and the event delivered without it",
        "spec basic/compatibility; corpus unknown-property-stripped",
        "Removed unrecognised material at '{pointer}' on {event_type}: the protocol this "
        "consumer speaks does not describe it.",
        (_rs(), _ts(colour="red"), _te(), _rf()),
        severity=Severity.WARNING,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W003",
        "legacy-null",
        "An optional member a pre-1.0 producer sent as null is read as absent",
        "corpus legacy-null-raw-event (pre-1.0 producers)",
        "Reading {event_type}.{member}: null, a pre-1.0 shape, as an absent member.",
        (_rs(), _rf(result=None)),
        severity=Severity.WARNING,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W004",
        "deprecated-event",
        "A deprecated THINKING_* event is translated to its REASONING_* equivalent",
        "spec events (THINKING_* deprecated in favour of REASONING_*)",
        "Converting deprecated {event_type} to {replacement}.",
        (_rs(), {"type": "THINKING_START"}, {"type": "THINKING_END"}, _rf()),
        severity=Severity.INFO,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W005",
        "lossy-translation",
        "A translated deprecated event had a member its replacement cannot carry",
        "spec events (REASONING_START has no title)",
        "Dropping THINKING_START.title {title}: REASONING_START has no title field.",
        (_rs(), {"type": "THINKING_START", "title": "plan"}, {"type": "THINKING_END"}, _rf()),
        severity=Severity.WARNING,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W006",
        "minted-id",
        "A THINKING_* continuation arrived with no opener, so its id had to be invented",
        "aguikit: translation mints ids because THINKING_* events carry none",
        "Minting messageId '{entity_id}' for {event_type}: no THINKING opener preceded it, so "
        "the id is this consumer's invention and verification will reject it.",
        (_rs(), {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hmm"}),
        severity=Severity.WARNING,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W007",
        "protocol-version-newer",
        "The producer declares a newer protocol version than this consumer speaks",
        "spec basic/compatibility (a newer producer is served, stripping what is unknown)",
        "The producer speaks protocol {declared}; this consumer speaks {spoken}. "
        "Unrecognised material will be stripped with warnings.",
        ({**_rs(), "protocolVersion": "9.0"}, _rf()),
        severity=Severity.WARNING,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W008",
        "protocol-version-uninterpretable",
        "The producer declares a protocol version that is not MAJOR.MINOR",
        "spec basic/compatibility",
        "The producer declared protocol version '{declared}', which this consumer cannot "
        "interpret; proceeding as for a newer version than {spoken}.",
        ({**_rs(), "protocolVersion": "draft"}, _rf()),
        severity=Severity.WARNING,
        stage=Stage.RECEIVER,
    ),
    Rule(
        "AGUI-W011",
        "activity-missing",
        "An ACTIVITY_DELTA names no activity message, and is skipped",
        "corpus activity-delta-without-snapshot",
        "{event_type} for '{entity_id}', {reason}; skipped.",
        (
            _rs(),
            {
                "type": "ACTIVITY_DELTA",
                "messageId": "a1",
                "activityType": "search",
                "patch": [{"op": "add", "path": "/q", "value": 1}],
            },
            _rf(),
        ),
        severity=Severity.WARNING,
        stage=Stage.APPLIER,
    ),
    Rule(
        "AGUI-W012",
        "id-collision",
        "An event names a message id that belongs to a message of another kind; the event is "
        "dropped or the call gets a message of its own",
        "aguikit: message ids are unique across a conversation",
        "{event_type}: {detail}",
        (
            _rs(),
            {
                "type": "ACTIVITY_SNAPSHOT",
                "messageId": "m1",
                "activityType": "search",
                "content": {},
            },
            _ts(),
            _te(),
            _rf(),
        ),
        severity=Severity.WARNING,
        stage=Stage.APPLIER,
    ),
    Rule(
        "AGUI-W013",
        "unknown-tool-call",
        "A tool call argument fragment names no known tool call, and is dropped",
        "aguikit: the applier is tolerant; the verifier reports the ordering (AGUI-V014)",
        "TOOL_CALL_ARGS: no tool call '{entity_id}' is known; the fragment is dropped.",
        (_rs(), _ca("orphan")),
        in_process=True,
        severity=Severity.WARNING,
        stage=Stage.APPLIER,
    ),
    Rule(
        "AGUI-W014",
        "tool-call-renamed",
        "A repeated TOOL_CALL_START for a known call names another tool; the call is renamed",
        "aguikit: a replayed start is idempotent",
        "TOOL_CALL_START: tool call '{entity_id}' already exists as '{old}'; renamed to '{new}'.",
        (_rs(), _cs(), _ce(), {**_cs(), "toolCallName": "search"}, _ce(), _rf()),
        severity=Severity.WARNING,
        stage=Stage.APPLIER,
    ),
    Rule(
        "AGUI-W015",
        "encrypted-value-unknown-entity",
        "A REASONING_ENCRYPTED_VALUE naming no message or tool call the consumer holds is "
        "dropped, and the run goes on",
        'spec 1.1 events/reasoning, Error Handling: "a consumer SHOULD warn and MAY drop it, '
        'and MUST NOT fail the run over it"; corpus encrypted-value-unknown-entity-tolerated',
        "REASONING_ENCRYPTED_VALUE for '{entity_id}': {reason}; the value is dropped.",
        (
            _rs(),
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "nowhere",
                "encryptedValue": "b3BhcXVl",
            },
            _rf(),
        ),
        severity=Severity.WARNING,
        stage=Stage.APPLIER,
    ),
    # -- what a producer's writer repaired ------------------------------------------------
    Rule(
        "AGUI-W021",
        "producer-repaired",
        "A RunWriter in repair mode closed an open entity before an event that requires it "
        "closed, instead of failing the run",
        "aguikit: repair mode of aguikit.server.RunWriter",
        "Repaired: sent {closing} for '{entity_id}' before {event_type}, which {violated} "
        "refuses while it is open.",
        (_rs(), _ts(), _rf()),
        severity=Severity.WARNING,
        stage=Stage.PRODUCER,
    ),
    Rule(
        "AGUI-E020",
        "handler-failed",
        "An exception escaped the run's handler: the run ends with RUN_ERROR carrying this "
        "code and a generic message, and the exception, its traceback and the run's ids "
        "go to the server's log, not to the client",
        "aguikit: aguikit.server.RunWriter; exceptions carry URLs with keys, SQL, paths and "
        "provider payloads, so their text is private unless on_error or expose_errors says "
        "otherwise",
        "The agent failed; the server logged the details.",
        (
            _rs(),
            {
                "type": "RUN_ERROR",
                "message": "The agent failed; the server logged the details.",
                "code": "AGUI-E020",
            },
        ),
        stage=Stage.PRODUCER,
    ),
    # -- what an event log writes when the producer cannot end its run -------------------
    Rule(
        "AGUI-E021",
        "producer-lost",
        "The run's producer stopped renewing its lease in the event log (its worker was "
        "killed, or lost Redis for longer than the lease): the log ends the run with "
        "RUN_ERROR carrying this code, so every follower and resume gets a terminal event "
        "within the lease plus one blocking read (docs/resume.md)",
        "aguikit: aguikit.server.redis_log.RedisEventLog (producer_ttl)",
        "The agent's worker stopped; the run was ended without its outcome.",
        (
            _rs(),
            {
                "type": "RUN_ERROR",
                "message": "The agent's worker stopped; the run was ended without its outcome.",
                "code": "AGUI-E021",
            },
        ),
        stage=Stage.EVENT_LOG,
    ),
    Rule(
        "AGUI-E022",
        "event-log-failed",
        "An event of the run could not be written to the event log (Redis unreachable, "
        "stalled past its socket timeout, restarted without the run): the handler's emit "
        "raises EventLogError, nothing more is logged, and the run ends with RUN_ERROR "
        "carrying this code rather than with a hole in its ids; a request the log could "
        "not answer gets 503",
        "aguikit: aguikit.server.eventlog.EventLogError",
        "The server could not record the run; it was ended without its outcome.",
        (
            _rs(),
            {
                "type": "RUN_ERROR",
                "message": "The server could not record the run; it was ended without its outcome.",
                "code": "AGUI-E022",
            },
        ),
        stage=Stage.EVENT_LOG,
    ),
    Rule(
        "AGUI-E024",
        "event-log-full",
        "The endpoint's event log holds its limit of events over runs still running: a "
        "new run is refused (503), and a run that would log more ends with RUN_ERROR "
        "carrying this code (its terminal event is always logged)",
        "aguikit: aguikit.server.eventlog.MemoryEventLog (max_total_events); a worker's "
        "memory is bounded whatever its runs produce",
        "The agent's run was stopped: the server's event log is full.",
        (
            _rs(),
            _ts(),
            {
                "type": "RUN_ERROR",
                "message": "The agent's run was stopped: the server's event log is full.",
                "code": "AGUI-E024",
            },
        ),
        setting="max_total_events",
        stage=Stage.PRODUCER,
    ),
    Rule(
        "AGUI-E025",
        "event-not-unicode",
        "A handler emitted an event holding a lone surrogate, which UTF-8 cannot carry: "
        "the emit raises (the handler is told where), the event is neither logged nor "
        "sent, and the run ends with RUN_ERROR carrying this code",
        "RFC 8259 (JSON text is Unicode); WHATWG event-stream (UTF-8): no reader could be "
        "sent the event, so a logged run would otherwise end for every reader there",
        "The agent emitted text that is not Unicode; the server logged the details.",
        (
            _rs(),
            {"type": "TEXT_MESSAGE_START", "messageId": "m" + chr(0xD800), "role": "assistant"},
            {
                "type": "RUN_ERROR",
                "message": "The agent emitted text that is not Unicode; the server logged "
                "the details.",
                "code": "AGUI-E025",
            },
        ),
        in_process=True,
        stage=Stage.PRODUCER,
    ),
    # -- what a thread store refuses to restate --------------------------------------------
    Rule(
        "AGUI-E030",
        "thread-unknown",
        "A request names a thread the store does not hold for its principal (never "
        "recorded, expired, deleted, or another principal's: the same answer, so thread "
        "ids cannot be probed); the endpoint answers 404",
        "aguikit: aguikit.server.threads; spec 1.1 basic/transports (authorization is the "
        "binding's and the application's)",
        "No such thread (unknown, expired or deleted).",
        (
            {"threadId": "t2", "runId": "r2", "messages": []},
            _rs(),
            _rf(),
        ),
        stage=Stage.THREAD_STORE,
    ),
    Rule(
        "AGUI-E031",
        "thread-too-large",
        "A thread's folded history is over the store's max_thread_bytes: it is kept with "
        "its runs' outcomes but never restated (the endpoint answers 413), because a "
        "truncated snapshot would be presented as the whole conversation",
        "aguikit: aguikit.server.threads (max_thread_bytes); spec 1.1 events/state "
        "(MESSAGES_SNAPSHOT replaces the conversation: a partial one would erase the rest)",
        "The thread's history is over the store's bound; it cannot be restated.",
        (
            {"threadId": "t1", "runId": "r2", "messages": []},
            _rs(),
            _ts(),
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            _rf(),
        ),
        setting="max_thread_bytes",
        stage=Stage.THREAD_STORE,
    ),
    Rule(
        "AGUI-E032",
        "thread-damaged",
        "A thread could not be folded (a recorded run the session refused, named by its "
        "event number and rule) or read back (a corrupt stored entry, named by its "
        "pointer): it is marked damaged and never restated (the endpoint answers 409), "
        "and no other thread is affected",
        "aguikit: aguikit.server.threads, aguikit.server.redis_threads",
        "The thread is damaged and cannot be restated.",
        (
            {"threadId": "t1", "runId": "r2", "messages": []},
            _rs(),
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nowhere", "delta": "x"},
            _rf(),
        ),
        stage=Stage.THREAD_STORE,
    ),
    Rule(
        "AGUI-E033",
        "thread-store-failed",
        "The thread store could not answer (Redis unreachable or failing, or an update "
        "that lost every compare-and-set round to concurrent ones): nothing was changed, "
        "and the endpoint answers 503, never an empty thread",
        "aguikit: aguikit.server.redis_threads.RedisThreadStore",
        "The server could not reach its thread store.",
        (
            {"threadId": "t1", "runId": "r2", "messages": []},
            _rs(),
            _rf(),
        ),
        stage=Stage.THREAD_STORE,
    ),
    # -- what a client leaves out of the run input it sends --------------------------------
    Rule(
        "AGUI-W023",
        "activity-not-sent",
        "An activity message is left out of the run input a client sends",
        "spec basic/run-input (activity messages never travel back to the producer)",
        "Leaving activity message '{entity_id}' out of the run input: activity messages are "
        "the consumer's rendering material, not conversation the agent resumes from.",
        (
            {
                "threadId": "t1",
                "runId": "r1",
                "messages": [
                    {"id": "a1", "role": "activity", "activityType": "plan", "content": {}}
                ],
            },
        ),
        severity=Severity.INFO,
        stage=Stage.CLIENT,
    ),
    # -- patches --------------------------------------------------------------------------
    Rule(
        "AGUI-P001",
        "patch-failed",
        "A STATE_DELTA or ACTIVITY_DELTA applies to the document the client holds; one that "
        "does not is skipped and the document left exactly as it was",
        "RFC 6902; corpus state-delta-failure-keeps-state",
        "Failed to apply {target} patch; it was left as it was: {detail}",
        (
            _rs(),
            {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/missing"}]},
            _rf(),
        ),
        stage=Stage.APPLIER,
    ),
    # -- decoding -------------------------------------------------------------------------
    Rule(
        "AGUI-D001",
        "invalid-utf8",
        "A stream is UTF-8; a byte sequence that is not is an error with its offset, never a "
        "silent U+FFFD",
        "WHATWG event-stream (UTF-8); RFC 8259",
        "invalid UTF-8 ({detail})",
        (),
        example_bytes=b"data: {}\n\ndata: \xff\n\n",
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-D002",
        "invalid-json",
        "Each SSE frame's data and each JSONL line is one JSON document (no NaN or Infinity)",
        "RFC 8259; AG-UI transports",
        "not valid JSON: {detail}",
        (),
        example_bytes=b'data: {"type": "RUN_STARTED",\n\n',
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-D003",
        "not-an-object",
        "Each frame or line holds one JSON object: an event",
        "AG-UI transports (one event per frame or line)",
        "expected a JSON object, got {kind}",
        (),
        example_bytes=b"data: [1, 2]\n\n",
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-D004",
        "truncated-frame",
        "An SSE stream ends with a blank line after its last frame; one cut inside a frame "
        "lost that frame",
        "WHATWG event-stream (a frame is dispatched by its blank line)",
        "stream truncated: frame {frame} ended {where}",
        (),
        example_bytes=b'data: {}\n\ndata: {"type":',
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-D005",
        "invalid-protobuf",
        "Each length-prefixed frame holds one ag_ui.Event protobuf message naming exactly one "
        "event this version knows",
        "AG-UI binary transport (application/vnd.ag-ui.event+proto); @ag-ui/proto",
        "not a valid AG-UI protobuf event: {detail}",
        (),
        example_bytes=b"\x00\x00\x00\x02\x0a\x05",
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-D006",
        "thinking-not-encodable",
        "The binary transport carries no THINKING_* event (the official encoding has no slot "
        "for them); send the REASONING_* event they translate to",
        "@ag-ui/proto 1.0.0; docs/protobuf.md",
        "{event_type} has no protobuf encoding; send {replacement} instead",
        ({"type": "THINKING_START"},),
        stage=Stage.ENCODER,
    ),
    # -- limits ---------------------------------------------------------------------------
    Rule(
        "AGUI-L001",
        "frame-too-large",
        "An SSE frame is at most max_frame_bytes long (a configured safety limit, 16 MiB by "
        "default; see docs/limits.md)",
        "aguikit: memory stays bounded when a peer never ends a frame",
        "frame {frame} is at least {size} bytes (limit max_frame_bytes={limit})",
        (),
        example_bytes=b"data: " + b"x" * 64 + b"\n\n",
        setting="max_frame_bytes",
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-L002",
        "line-too-long",
        "A JSONL line is at most max_line_bytes long (a configured safety limit, 16 MiB by "
        "default; see docs/limits.md)",
        "aguikit: memory stays bounded when a peer never ends a line",
        "line {line} is at least {size} bytes (limit max_line_bytes={limit})",
        (),
        example_bytes=b'{"type":"RAW","event":"' + b"x" * 64 + b'"}\n',
        setting="max_line_bytes",
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-L003",
        "json-too-deep",
        "One event's JSON nests at most max_depth levels (a configured safety limit, 256 by "
        "default; see docs/limits.md)",
        "aguikit: nothing recurses into a document deeper than the interpreter's stack",
        "JSON nesting depth {depth} is too deep (limit max_depth={limit})",
        (),
        example_bytes=b'data: {"type":"RAW","event":[[[[[[1]]]]]]}\n\n',
        setting="max_depth",
        stage=Stage.DECODER,
    ),
    Rule(
        "AGUI-L004",
        "message-too-large",
        "A protobuf event frame is at most max_message_bytes long (a configured safety limit, "
        "16 MiB by default; see docs/limits.md)",
        "aguikit: memory stays bounded whatever length a prefix announces",
        "frame {frame} announces {size} bytes (limit max_message_bytes={limit})",
        (),
        example_bytes=b"\x00\x00\x01\x00" + b"\x0a" * 8,
        setting="max_message_bytes",
        stage=Stage.DECODER,
    ),
    # -- HTTP -----------------------------------------------------------------------------
    Rule(
        "AGUI-T001",
        "transport-failed",
        "The agent endpoint is reachable and keeps the connection until the stream ends",
        "aguikit: a failed connection is a typed error, never a hung iterator",
        "{url}: {detail}",
        (),
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-T002",
        "http-status",
        "The agent answers a run request with a 2xx status",
        "AG-UI HTTP transport",
        "{url}: HTTP {status}: {body}",
        (),
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-T003",
        "content-type",
        "The agent answers a run request with an event stream (text/event-stream)",
        "AG-UI HTTP transport",
        "{url}: expected text/event-stream, got {content_type}",
        (),
        stage=Stage.TRANSPORT,
    ),
    # -- the checker (aguikit check only) -------------------------------------------------
    Rule(
        "AGUI-K001",
        "tool-result-unknown-call",
        "A TOOL_CALL_RESULT answers a tool call this conversation started: in the stream, "
        "the request's messages or a MESSAGES_SNAPSHOT",
        "spec concepts/tools (a result answers a call); ag-ui-validate AGUI207",
        "TOOL_CALL_RESULT for tool call '{entity_id}', which was never started",
        (
            _rs(),
            {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "ghost", "content": "x"},
            _rf(),
        ),
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K002",
        "unknown-parent-message",
        "A TOOL_CALL_START's parentMessageId names a message the stream or request has",
        "spec concepts/tools (parentMessageId); ag-ui-validate AGUI208",
        "TOOL_CALL_START '{entity_id}' names parentMessageId '{parent}', a message the "
        "stream never mentions; the call is shown on a message of its own",
        (_rs(), {**_cs(), "parentMessageId": "nowhere"}, _ce(), _rf()),
        severity=Severity.INFO,
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K003",
        "empty-delta",
        "A content or arguments event carries a non-empty delta; an empty one is noise",
        "spec concepts/events (deltas are fragments of content); ag-ui-validate AGUI105",
        "{event_type} for '{entity_id}' has an empty delta",
        (_rs(), _ts(), _tc(delta=""), _te(), _rf()),
        severity=Severity.WARNING,
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K004",
        "json-lines-in-sse",
        "An SSE source writes each event as a 'data:' line followed by a blank line",
        "WHATWG event-stream; ag-ui-validate AGUI501",
        "line {line} is a bare JSON document, which an event stream ignores as an unknown "
        "field; hint: write each event as 'data: {{...}}' and a blank line, or name the "
        "file .jsonl",
        (),
        example_bytes=b'{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}\n',
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K005",
        "json-document-input",
        "A recording is JSONL or SSE; a JSON array or one pretty-printed document is read as "
        "a list of events, with this note",
        "aguikit: recordings saved from a debugger or an HTTP client",
        "read as {what} holding {count} events, not as JSONL (one event per line)",
        (),
        example_bytes=b'[\n  {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},\n'
        b'  {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}\n]\n',
        severity=Severity.INFO,
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K006",
        "binary-input",
        "A recording is text (UTF-8): SSE or JSON; or protobuf frames, read by content",
        "WHATWG event-stream (UTF-8); RFC 8259",
        "not text: {detail}; is this a compressed or binary file?",
        (),
        example_bytes=b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03",
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K007",
        "run-failed",
        "A run that ends with RUN_ERROR is valid protocol but a failed run; reported per run "
        "(``--fail-on-run-error`` makes it fail the check)",
        "spec concepts/events (RUN_ERROR)",
        "run {run} ('{entity_id}') ended with RUN_ERROR: {message}{code}",
        (_rs(), {"type": "RUN_ERROR", "message": "boom", "code": "E1"}),
        severity=Severity.INFO,
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K008",
        "tool-args-not-json",
        "A tool call's TOOL_CALL_ARGS deltas, joined, are one JSON document: the call's arguments",
        "spec concepts/tools (ToolCall.function.arguments is JSON text); ag-ui-validate AGUI204",
        "the arguments of tool call '{entity_id}' are not JSON: {detail}",
        (_rs(), _cs(), _ca(delta='{"city":'), _ca(delta="oops}"), _ce(), _rf()),
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K009",
        "token-usage-inconsistent",
        "A usage entry keeps the protocol's one accounting: cached, cache-write and reasoning "
        "counts are parts of their totals, and totalTokens is inputTokens plus outputTokens",
        'spec 1.1 events/lifecycle, Token usage: "A producer whose provider reports one of '
        'these beside a smaller total MUST add it into the total"; "MUST NOT copy a '
        "provider's total that counts differently\"",
        "{event_type} usage entry {entity_id}: {detail}",
        (
            _rs(),
            _rf(usage=[{"inputTokens": 10, "cachedInputTokens": 900, "outputTokens": 5}]),
        ),
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K010",
        "pending-tool-calls-mismatch",
        "A success outcome's pendingToolCallIds lists exactly the tool calls the run started "
        "and did not answer with TOOL_CALL_RESULT",
        'spec 1.1 events/tool-calls, Frontend tools: "when it does, the list MUST contain '
        'exactly the tool calls the run started and did not answer with TOOL_CALL_RESULT"',
        "RUN_FINISHED of run '{entity_id}' lists pendingToolCallIds {listed}, but the run left "
        "{pending} unanswered",
        (
            _rs(),
            _cs(),
            _ce(),
            {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "ok"},
            _rf(outcome={"type": "success", "pendingToolCallIds": ["c1"]}),
        ),
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K011",
        "encrypted-value-type-without-value",
        "A message or tool call that names an encryptedValueType carries the encryptedValue "
        "it describes",
        'spec 1.1 events/reasoning, encryptedValueType: "A producer MUST NOT send '
        'encryptedValueType without encryptedValue"',
        "{event_type}: {entity_id} has an encryptedValueType but no encryptedValue",
        (
            _rs(),
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    {
                        "id": "m1",
                        "role": "assistant",
                        "content": "x",
                        "encryptedValueType": "acme.sig",
                    }
                ],
            },
            _rf(),
        ),
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K012",
        "cancelled-run-result",
        "A cancelled run has no return value: its RUN_FINISHED carries no result",
        'spec 1.1 events/lifecycle, Cancelled runs: "A cancelled run has no return value: '
        'result SHOULD be absent"',
        "RUN_FINISHED of run '{entity_id}' is cancelled but carries a result",
        (_rs(), _rf(outcome={"type": "cancelled"}, result={"partial": True})),
        severity=Severity.WARNING,
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-K013",
        "frontend-tool-answered",
        "A tool the run's input offers is the application's to run: the producer calls it and "
        "never answers it with TOOL_CALL_RESULT",
        'spec 1.1 events/tool-calls, Frontend tools: "A producer that calls a frontend tool '
        'MUST NOT answer it: no TOOL_CALL_RESULT, no fabricated tool message"',
        "TOOL_CALL_RESULT answers tool call '{entity_id}' of '{name}', a frontend tool the "
        "run's input offered: its result is the application's to produce",
        (
            {
                **_rs(),
                "input": {
                    "threadId": "t1",
                    "runId": "r1",
                    "messages": [],
                    "tools": [{"name": "lookup", "description": "ask the user", "parameters": {}}],
                },
            },
            _cs(),
            _ce(),
            {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "x"},
            _rf(),
        ),
        stage=Stage.CHECKER,
    ),
    Rule(
        "AGUI-T004",
        "slow-first-event",
        "A live agent sends its first event within 10 seconds of the request",
        "aguikit: a UI shows nothing until then; ag-ui-validate's transport rules",
        "the first event arrived {seconds:.1f} s after the request (threshold {limit:g} s)",
        (),
        severity=Severity.WARNING,
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-T005",
        "silent-gap",
        "A live stream is never silent for more than 15 seconds: an agent that is working "
        "sends a keep-alive comment, or a proxy may cut the connection",
        "WHATWG event-stream (comments as keep-alives); ag-ui-validate AGUI506",
        "no byte arrived for {seconds:.1f} s before event {event} (threshold {limit:g} s)",
        (),
        severity=Severity.WARNING,
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-T006",
        "buffered-delivery",
        "A live stream arrives as it is produced; 20 or more events in one read after 2 "
        "seconds of silence look buffered by a proxy (disable buffering: "
        "'X-Accel-Buffering: no', no compression of text/event-stream)",
        "aguikit: streaming is the point of SSE; ag-ui-validate AGUI507",
        "{count} events arrived in one read after {seconds:.1f} s of silence",
        (),
        severity=Severity.WARNING,
        stage=Stage.TRANSPORT,
    ),
    # -- the infrastructure between a UI and an agent (aguikit doctor) ----------------------
    Rule(
        "AGUI-N001",
        "stream-buffered",
        "Something between the agent and the UI releases the stream as it is produced: events "
        "the agent stamped apart do not arrive together (fix: 'X-Accel-Buffering: no' from the "
        "agent, 'proxy_buffering off;' in nginx, no response buffering in any proxy)",
        "aguikit: streaming is the point of SSE; nginx proxy_buffering",
        "{count} events arrived in one read {evidence}: the stream is buffered on the way",
        (),
        severity=Severity.WARNING,
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-N002",
        "idle-timeout",
        "A stream that is silent for a while is not cut before its run ends: a proxy's idle "
        "timeout closes a silent connection (fix: a keep-alive comment more often than the "
        "shortest idle timeout on the way, or a longer 'proxy_read_timeout')",
        "aguikit: nginx proxy_read_timeout, load balancers' idle timeouts; WHATWG event-stream",
        "the stream was cut after {seconds:.1f} s of silence, before its run ended",
        (),
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-N003",
        "stream-compressed",
        "An event stream is not compressed on the way: a compressor holds bytes back until "
        "its block fills (fix: 'gzip off;' or no text/event-stream in 'gzip_types' in nginx, "
        "exclude text/event-stream from any compression middleware)",
        "aguikit: nginx gzip, compression middleware; streaming needs every event flushed",
        "the event stream arrived with Content-Encoding: {encoding}",
        (),
        severity=Severity.WARNING,
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-N004",
        "http-1-0-downgrade",
        "A stream is answered over HTTP/1.1 or later: HTTP/1.0 has no chunked encoding, so "
        "the connection must close to end every answer (fix: 'proxy_http_version 1.1;' in "
        "nginx, and the same in any proxy on the way)",
        "RFC 9112 (chunked transfer coding is HTTP/1.1); nginx proxy_http_version",
        "the answer came over {version}",
        (),
        severity=Severity.WARNING,
        stage=Stage.TRANSPORT,
    ),
    Rule(
        "AGUI-R001",
        "recording-unreadable",
        "A conversation file is HAR 1.2 (a log whose entries each hold a request and a "
        "response); a recording cut by a crash keeps every complete exchange",
        "HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/); aguikit's recording "
        "contract (docs/conversations.md)",
        "{detail}",
        (),
        stage=Stage.CONVERSATION,
        example_bytes=b'{"log": {"version": "1.2", "entries": [{"request": {"method": "POST"',
    ),
    Rule(
        "AGUI-R002",
        "input-invalid",
        "Every request of a conversation is a valid RunAgentInput: a JSON object matching "
        "the schema, every member the schema describes and nothing else",
        'spec 1.1 basic/run-input, Identity: "`threadId` names the conversation and `runId` '
        'names the run this input requests; both are REQUIRED"; `messages`: "REQUIRED"',
        "the request is not a valid RunAgentInput: {detail}",
        (_ex({"threadId": "t1", "runId": "r1", "protocolVersion": "1.1"}, _rs11(), _rf()),),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R003",
        "interrupt-not-covered",
        "Every interrupt a run ended with is answered or cancelled by a resume entry of the "
        "thread's next request",
        'spec 1.1 basic/patterns/interrupt-resume, Resuming: "The resume list MUST cover every '
        'interrupt of the run being continued"; "MUST NOT silently continue past an interrupt '
        'it has no entry for"',
        "run '{entity_id}' ended waiting on interrupts {missing}; this request has no resume "
        "entry for them (answer or cancel each)",
        (
            _ex(_in("r1", _USER), _rs11("r1"), _rf("r1", outcome=_ASK)),
            _ex(_in("r2", _USER), _rs11("r2"), _rf("r2")),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R004",
        "resume-unknown-interrupt",
        "A resume entry names an interrupt of the run being continued, the most recent "
        "interrupted run on the thread",
        "spec 1.1 basic/patterns/interrupt-resume, Resuming: \"Each entry's `interruptId` MUST "
        'name an interrupt from the run being continued"',
        "resume entry {entity_id} answers interrupt '{interrupt}', which {why}",
        (
            _ex(_in("r1", _USER), _rs11("r1"), _rf("r1")),
            _ex(
                _in("r2", _USER, resume=[{"interruptId": "i9", "status": "cancelled"}]),
                _rs11("r2"),
                _rf("r2"),
            ),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R005",
        "expired-interrupt-answered",
        "An interrupt whose expiresAt has passed when the request is sent can only be "
        "cancelled, never resolved",
        'spec 1.1 basic/patterns/interrupt-resume, Resuming: "an interrupt the consumer judges '
        "expired can no longer be answered — the consumer rejects a resume entry resolving it "
        'before the run starts"',
        "resume entry {entity_id} resolves interrupt '{interrupt}', which expired at "
        "{expires_at}: it may only be cancelled",
        (
            _ex(
                _in("r1", _USER),
                _rs11("r1"),
                _rf(
                    "r1",
                    outcome={
                        "type": "interrupt",
                        "interrupts": [
                            {"id": "i1", "reason": "approval", "expiresAt": "2001-01-01T00:00Z"}
                        ],
                    },
                ),
            ),
            _ex(
                _in(
                    "r2",
                    _USER,
                    resume=[{"interruptId": "i1", "status": "resolved", "payload": True}],
                ),
                _rs11("r2"),
                _rf("r2"),
            ),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R006",
        "encrypted-value-not-returned",
        "Every encryptedValue a message or tool call was given (with its encryptedValueType) "
        "comes back unmodified on that entity in the thread's next request",
        'spec 1.1 events/reasoning, REASONING_ENCRYPTED_VALUE: "A consumer MUST store the '
        "value with the message or tool call it names and return it unmodified in later run "
        'input"; encryptedValueType: "opaque, stored with the value, and returned unmodified"',
        "{entity_id}: {detail}",
        (
            _ex(
                _in("r1", _USER),
                _rs11("r1"),
                _ts("m1"),
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ok"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                {
                    "type": "REASONING_ENCRYPTED_VALUE",
                    "subtype": "message",
                    "entityId": "m1",
                    "encryptedValue": "c2ln",
                },
                _rf("r1"),
            ),
            _ex(
                _in("r2", _USER, {"id": "m1", "role": "assistant", "content": "ok"}),
                _rs11("r2"),
                _rf("r2"),
            ),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R007",
        "pending-tool-call-unanswered",
        "The tool calls a successful run left pending (its pendingToolCallIds, or the calls "
        "it made that no result answered) are answered by tool messages in the thread's next "
        "request",
        'spec 1.1 events/tool-calls, Frontend tools: "A thread that continues MUST answer '
        'every one of them first"',
        "run '{entity_id}' left tool calls {missing} pending; this request carries no tool "
        "message answering them",
        (
            _ex(
                _in("r1", _USER),
                _rs11("r1"),
                {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "confirm"},
                {"type": "TOOL_CALL_END", "toolCallId": "c1"},
                _rf("r1", outcome={"type": "success", "pendingToolCallIds": ["c1"]}),
            ),
            _ex(
                _in(
                    "r2",
                    _USER,
                    {
                        "id": "c1",
                        "role": "assistant",
                        "toolCalls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "confirm", "arguments": ""},
                            }
                        ],
                    },
                ),
                _rs11("r2"),
                _rf("r2"),
            ),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R008",
        "snapshot-disagrees",
        "A MESSAGES_SNAPSHOT agrees with what the stream had built for the messages both "
        "hold: the same ids (none re-minted), in the same order, with the same roles and "
        "content",
        'spec 1.1 basic/patterns/snapshots: "A snapshot carries the whole value"; a message '
        "is known by its id (events/text-messages)",
        "MESSAGES_SNAPSHOT disagrees with the messages streamed before it: {detail}",
        (
            _ex(
                _in("r1", _USER),
                _rs11("r1"),
                _ts("m1"),
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ok"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                {
                    "type": "MESSAGES_SNAPSHOT",
                    "messages": [_USER, {"id": "m2", "role": "assistant", "content": "ok"}],
                },
                _rf("r1"),
            ),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R009",
        "history-diverged",
        "The next request's messages are the conversation the client was sent, in order: "
        "no message dropped, duplicated, reordered or given a new id",
        'spec 1.1 basic/run-input, `messages`: "REQUIRED. The conversation so far, in order"; '
        '"A producer MUST treat it as the complete history it is being shown"',
        "messages: {detail}",
        (
            _ex(
                _in("r1", _USER),
                _rs11("r1"),
                _ts("m1"),
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ok"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                _rf("r1"),
            ),
            _ex(
                _in("r2", _USER, {"id": "x7", "role": "assistant", "content": "ok"}),
                _rs11("r2"),
                _rf("r2"),
            ),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R010",
        "version-undeclared",
        "Both sides declare the protocol version they speak: the consumer on "
        "RunAgentInput.protocolVersion, the producer on RUN_STARTED.protocolVersion",
        'spec 1.1 basic/run-input, `protocolVersion`: "a consumer implementing this version '
        'MUST declare the version it speaks here"; basic/versioning: "An implementation of '
        'this version MUST send its declaration"',
        "{side} declares no protocolVersion (absence means a peer from before the protocol "
        "carried a version)",
        (_ex({"threadId": "t1", "runId": "r1", "messages": []}, _rs11(), _rf()),),
        severity=Severity.WARNING,
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R011",
        "newer-minor-refused",
        "A producer serves a request declaring a newer minor of a line it implements: only "
        "another major line may be refused",
        'spec 1.1 basic/versioning, Version negotiation: "a newer minor of its own line is '
        'serveable by construction and MUST NOT be rejected for its version"',
        "the request declares protocolVersion {declared}, a newer minor of the {own} the "
        "producer speaks on this thread, and was refused ({how})",
        (
            _ex(_in("r1", _USER), _rs11("r1"), _rf("r1")),
            _ex({**_in("r2", _USER), "protocolVersion": "1.7"}, status=400),
        ),
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R012",
        "producer-newer-than-consumer",
        "A producer that knows its consumer is older (the request declared it) answers in the "
        "consumer's version, or the consumer must warn for what it cannot read",
        'spec 1.1 basic/versioning, Version negotiation: "A consumer meeting a newer producer '
        'declaration proceeds under the processing model and SHOULD warn"; Downgrading: "A '
        'lossy downgrade MUST emit a warning that names what was lost and why"',
        "the request declares protocolVersion {declared} and the producer answers {answered}: "
        "the consumer SHOULD warn, and must warn for any newer material it drops",
        (_ex({**_in("r1", _USER), "protocolVersion": "1.0"}, _rs11("r1"), _rf("r1")),),
        severity=Severity.WARNING,
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R013",
        "state-discontinuous",
        "A request carries the state the thread's previous run left behind (a resuming run "
        "always does; otherwise the application changed it on purpose)",
        "spec 1.1 basic/run-input, `state`: \"The state the run starts from — the consumer's "
        "last agreed value, typically what the previous run's state events left behind\"; "
        'basic/patterns/interrupt-resume: "the resuming run carries ... the state the '
        'interrupted run left behind"',
        "the request's state differs from the state run '{entity_id}' left, at {pointer}",
        (
            _ex(
                _in("r1", _USER),
                _rs11("r1"),
                {"type": "STATE_SNAPSHOT", "snapshot": {"step": 2}},
                _rf("r1"),
            ),
            _ex(_in("r2", _USER, state={"step": 1}), _rs11("r2"), _rf("r2")),
        ),
        severity=Severity.WARNING,
        stage=Stage.CONVERSATION,
    ),
    Rule(
        "AGUI-R014",
        "response-not-recorded",
        "A conversation's response body is recorded: an entry without it (devtools may leave "
        "out a streamed body it did not keep) is not judged, and the next request is held to "
        "the run before it",
        "HAR 1.2, content.text: optional; aguikit: nothing can be said of a body not kept",
        "the response body was not recorded (the HAR entry's content has no text): its "
        "events are not judged",
        (_ex(_in("r1", _USER), status=200, response=None),),
        severity=Severity.INFO,
        stage=Stage.CONVERSATION,
    ),
)
"""Every rule, in catalogue order: the verifier's first, then the other stages'."""


class CatalogueError(Exception):
    """The catalogue is malformed: a bug in aguikit, never caused by input."""


RULES_BY_ID: Final[Mapping[str, Rule]] = MappingProxyType({rule.id: rule for rule in RULES})
RULES_BY_SYMBOL: Final[Mapping[str, Rule]] = MappingProxyType({rule.symbol: rule for rule in RULES})

_ID: Final = re.compile(r"^AGUI-[CDEKLNPRSTVW]\d{3}$")
_FIELD: Final = re.compile(r"\{([a-z_]+)\}")


def _check_catalogue(rules: tuple[Rule, ...] = RULES) -> None:
    # ``rules`` is a parameter so a test can hand it a broken catalogue: a compiled module
    # reads its Final globals natively, past a monkeypatched module attribute.
    problems: list[str] = []
    for label, values in (
        ("rule id", [rule.id for rule in rules]),
        ("rule symbol", [rule.symbol for rule in rules]),
    ):
        problems.extend(
            f"duplicate {label} {value!r}"
            for value in sorted({v for v in values if values.count(v) > 1})
        )
    for rule in rules:
        if not _ID.match(rule.id):
            problems.append(f"{rule.id}: not of the form AGUI-<letter><3 digits>")
        if rule.example and rule.example_bytes is not None:
            problems.append(f"{rule.id}: an example is a stream or bytes, not both")
    if problems:
        raise CatalogueError("malformed rule catalogue: " + "; ".join(problems))


_check_catalogue()


DECODE_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "utf8": "AGUI-D001",
        "json": "AGUI-D002",
        "object": "AGUI-D003",
        "truncated": "AGUI-D004",
        "protobuf": "AGUI-D005",
        "thinking": "AGUI-D006",
    }
)
"""The decoder's rules, by what went wrong."""

LIMIT_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "max_frame_bytes": "AGUI-L001",
        "max_line_bytes": "AGUI-L002",
        "max_depth": "AGUI-L003",
        "max_message_bytes": "AGUI-L004",
        "max_open_entities": "AGUI-V093",
    }
)
"""The rule each configured safety limit (:mod:`aguikit.limits`) reports, by setting."""


def find_rule(key: str) -> Rule | None:
    """The rule with this id or symbol (``AGUI-V014``, ``v014``, ``patch-failed``), or ``None``."""
    text = key.strip()
    rule = RULES_BY_ID.get(text.upper()) or RULES_BY_SYMBOL.get(text.lower())
    if rule is None and re.fullmatch(r"[A-Za-z]\d{3}", text):
        rule = RULES_BY_ID.get(f"AGUI-{text.upper()}")
    return rule


def suggest_rule(key: str) -> list[str]:
    """The ids and symbols closest to a mistyped ``key``, best first (at most three)."""
    import difflib  # only when a name is not found

    text = key.strip()
    upper = text.upper()
    if not upper.startswith("AGUI-") and re.fullmatch(r"[A-Z]\d{1,4}", upper):
        upper = f"AGUI-{upper}"
    ids = difflib.get_close_matches(upper, list(RULES_BY_ID), n=3, cutoff=0.6)
    symbols = difflib.get_close_matches(text.lower(), list(RULES_BY_SYMBOL), n=3, cutoff=0.6)
    return (ids + symbols)[:3]


def render_message(rule_id: str, **fields: Any) -> str:
    """The message of a finding of ``rule_id``: its template filled with ``fields``."""
    return RULES_BY_ID[rule_id].template.format(**fields)


WarningSink = Callable[[str, str], None]
"""Receives ``(symbol, message)`` for every warning a stage raises instead of failing."""


def discard_warning(symbol: str, message: str) -> None:
    """The default :data:`WarningSink` of a bare stage: nothing (a session collects them)."""
