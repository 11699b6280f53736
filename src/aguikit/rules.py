"""
The ordering and attribution rules of AG-UI, declared as data.

A consumer of somebody else's agent needs one clear error, naming the rule, when a stream
breaks the protocol.  The ordering rules live here as a table of :class:`Row` entries, one
per event type, saying what the event requires to be open, what it opens, continues or
closes, which field keys the entity, how its ``subagentRunId`` attribution is checked, and
which rule each check reports.  The rules themselves (id, symbol, title, source, message
template, a violating example) are rows of the one catalogue, :mod:`aguikit.catalogue`,
re-exported here as ``RULES``.  :mod:`aguikit.verify` is a small interpreter over this
table; ``docs/rules.md`` and ``aguikit rules`` are rendered from both.  Adding a protocol
event is adding a row.

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
from collections.abc import Mapping
from typing import Final

import attrs

from ._generated.models import EventType
from ._generated.registry import EVENT_CLASSES
from .catalogue import RULES, RULES_BY_ID, Rule

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
    "TableError",
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
        checks=("thread_agrees_with_stream", "run_id_fresh"),
        effects=("seed_owners_from_input",),
        rules={"thread_agrees_with_stream": "AGUI-V009", "run_id_fresh": "AGUI-V010"},
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
        checks=("subagent_parent_started", "subagent_announced_first"),
        rules={
            "already_open": "AGUI-V051",
            "reopened": "AGUI-V052",
            "subagent_parent_started": "AGUI-V053",
            "subagent_announced_first": "AGUI-V055",
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
        named = ", ".join(f"{t} ({EVENT_CLASSES[t].__name__})" for t in missing)
        problems.append(f"event types with no row: {named}")
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
