"""
Check that a stream of typed events obeys AG-UI's ordering and attribution rules.

The events arrive from somebody else's process, and a stream that breaks the rules should
produce one clear error naming the rule, not a confused UI three components later.  This
module is a small interpreter over the rule table in :mod:`aguikit.rules`: it compiles
every row once, at import, into a function specialised for that row's shape (opens,
continues, closes or follows an entity; keyed by which field; attribution checked how),
and dispatches on the event's class.  It knows no event by name except through the table.

The verifier is synchronous, does no I/O, and keeps per-event cost constant: every check
is a dictionary lookup keyed by id, never a scan of the conversation.  Open entities are
kept in insertion-ordered dicts, so a complaint about what is still open names the
earliest one, which is the one a human is looking for.

What it deliberately leaves alone: the schema (run :mod:`aguikit.validate` or the wire
parser first; this module trusts field *types* only as far as it must not crash on them),
chunk expansion (:mod:`aguikit.chunks` runs first; a chunk event reaching the verifier is
reported as ``AGUI-V091``), and tolerance (a caller that wants to carry on after a
violation catches the error and keeps feeding events; see :meth:`Verifier.verify`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any, Final, Protocol

import attrs
from mypy_extensions import mypyc_attr

from ._generated.registry import EVENT_CLASSES
from .errors import ProtocolError, TruncatedStreamError, short_repr
from .limits import MAX_OPEN_ENTITIES
from .rules import (
    FAMILIES,
    LIFECYCLE_GATE,
    LIFECYCLE_NEXT,
    LIFECYCLE_RULES,
    LIMIT_RULES,
    RULES_BY_ID,
    TABLE,
    Attribution,
    Bucket,
    Effect,
    Family,
    Lifecycle,
    Phase,
    Row,
    TableError,
)

__all__ = ["HOOK_CHECKS", "HOOK_EFFECTS", "Verifier", "verify_all"]

_MISSING: Final[Any] = object()
_SINGLETON: Final = "thinking"
"""The key of the thinking block and thinking message, which carry no id."""

_FAMILY_INDEX: Final[Mapping[Family, int]] = {spec.family: i for i, spec in enumerate(FAMILIES)}
_BUCKET_INDEX: Final[Mapping[Bucket, int]] = {bucket: i for i, bucket in enumerate(Bucket)}
_SUBAGENT: Final = _FAMILY_INDEX[Family.SUBAGENT]
_STEP: Final = _FAMILY_INDEX[Family.STEP]

Finding = tuple[str, Any, dict[str, Any]]
"""What a failed check returns: the check's name, the entity it is about, template fields."""


def _describe(owner: Any) -> str:
    return "the parent agent" if owner is None else f"subagent '{owner}'"


class _State:
    """One stream's progress.  Per-run parts are cleared when a new run starts."""

    __slots__ = (
        "attributed",
        "closed",
        "max_open",
        "open",
        "owners",
        "phase",
        "run_id",
        "run_ids",
        "stream_thread",
        "thread_id",
    )

    def __init__(self, thread_id: str | None, max_open: int = MAX_OPEN_ENTITIES) -> None:
        self.max_open = max_open
        self.phase: Phase = Phase.NEW
        self.run_id: Any = None
        self.thread_id: Any = None
        self.stream_thread: Any = thread_id
        self.open: list[dict[Any, None]] = [{} for _ in FAMILIES]
        self.closed: list[set[Any]] = [set() for _ in FAMILIES]
        self.owners: list[dict[Any, Any]] = [{} for _ in Bucket]
        self.run_ids: set[Any] = set()
        """Every ``runId`` a run of this stream started with (the stream's, not the run's)."""
        self.attributed: dict[Any, int] = {}
        """How many events of this run each ``subagentRunId`` was attributed to."""

    def reset_run(self) -> None:
        for opened in self.open:
            opened.clear()
        for closed in self.closed:
            closed.clear()
        for owners in self.owners:
            owners.clear()
        self.attributed.clear()


# ---------------------------------------------------------------------------------------
# Hooks: the checks and effects that do not fit the open/continue/close shape
# ---------------------------------------------------------------------------------------


class HookCheck(Protocol):
    """A named check a row refers to; returns the entity and template fields, or ``None``."""

    def __call__(self, state: _State, event: Any, /) -> tuple[Any, dict[str, Any]] | None: ...


class HookEffect(Protocol):
    """A named effect run after every check of the event passed; must not raise."""

    def __call__(self, state: _State, event: Any, /) -> None: ...


def _thread_agrees_with_stream(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    authority = state.stream_thread
    if authority is not None and event.thread_id != authority:
        detail = "every run in a stream carries the input's threadId"
        return authority, {"got": event.thread_id, "detail": detail}
    return None


def _thread_id_agrees(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    if event.thread_id != state.thread_id:
        detail = "RUN_STARTED and RUN_FINISHED both carry the input's threadId"
        return state.thread_id, {"got": event.thread_id, "detail": detail}
    return None


def _run_id_agrees(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    if event.run_id != state.run_id:
        return state.run_id, {"got": event.run_id}
    return None


def _run_id_fresh(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    if event.run_id in state.run_ids:
        return event.run_id, {}
    return None


def _subagent_announced_first(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    count = state.attributed.get(event.subagent_run_id, 0)
    if count:
        return event.subagent_run_id, {"attributed": "1 event" if count == 1 else f"{count} events"}
    return None


def _interrupts(event: Any) -> list[Any] | None:
    outcome = event.outcome
    if outcome is None or getattr(outcome, "type", None) != "interrupt":
        return None
    interrupts = getattr(outcome, "interrupts", None)
    return list(interrupts) if interrupts is not None else []


def _interrupts_present(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    interrupts = _interrupts(event)
    if interrupts is not None and not interrupts:
        return state.run_id, {}
    return None


def _interrupts_unique(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    seen: set[Any] = set()
    for interrupt in _interrupts(event) or ():
        interrupt_id = getattr(interrupt, "id", None)
        if interrupt_id in seen:
            return interrupt_id, {}
        seen.add(interrupt_id)
    return None


def _chunk_normalized(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    entity = getattr(event, "message_id", None) or getattr(event, "tool_call_id", None)
    return entity, {"stage": "verifier"}


_ENCRYPTED_BUCKETS: Final[Mapping[str, tuple[tuple[Bucket, ...], str]]] = {
    "tool-call": ((Bucket.TOOL_CALL,), "tool call"),
    # "message" spans both message kinds; ids are unique per kind, so at most one answers.
    "message": ((Bucket.MESSAGE, Bucket.REASONING), "message"),
}


def _encrypted_value_owner(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    tag = event.subagent_run_id
    if tag is None:
        return None
    entity = event.entity_id
    buckets, noun = _ENCRYPTED_BUCKETS.get(
        str(event.subtype), ((Bucket.REASONING,), "reasoning message")
    )
    for bucket in buckets:
        owner = state.owners[_BUCKET_INDEX[bucket]].get(entity, _MISSING)
        if owner is not _MISSING:
            if owner != tag:
                return entity, {"tag": f"'{tag}'", "noun": noun, "owner": _describe(owner)}
            return None
    return None


def _subagent_parent_started(state: _State, event: Any) -> tuple[Any, dict[str, Any]] | None:
    parent = event.parent_subagent_run_id
    if (
        parent is not None
        and parent not in state.open[_SUBAGENT]
        and parent not in state.closed[_SUBAGENT]
    ):
        return event.subagent_run_id, {"parent": parent}
    return None


def _seed_plan(messages: Any) -> list[tuple[int, Any, Any]]:
    """Who owns each replayed message and the tool calls it carries, as (bucket, id, owner)."""
    plan: list[tuple[int, Any, Any]] = []
    if not isinstance(messages, list | tuple):
        return plan
    for message in messages:
        message_id = getattr(message, "id", None)
        if not isinstance(message_id, str):
            continue
        owner = getattr(message, "subagent_run_id", None)
        if owner is not None and not isinstance(owner, str):
            continue
        role = getattr(message, "role", None)
        bucket = (
            Bucket.REASONING
            if role == "reasoning"
            else Bucket.ACTIVITY
            if role == "activity"
            else Bucket.MESSAGE
        )
        plan.append((_BUCKET_INDEX[bucket], message_id, owner))
        calls = getattr(message, "tool_calls", None)
        if isinstance(calls, list | tuple):
            for call in calls:
                call_id = getattr(call, "id", None)
                if isinstance(call_id, str):
                    plan.append((_BUCKET_INDEX[Bucket.TOOL_CALL], call_id, owner))
    return plan


def _seed_owners_from_snapshot(state: _State, event: Any) -> None:
    # Authoritative: a snapshot restates the conversation, so its owners replace the record.
    for bucket, entity, owner in _seed_plan(getattr(event, "messages", None)):
        state.owners[bucket][entity] = owner


def _seed_owners_from_input(state: _State, event: Any) -> None:
    # History, not a rewrite: only ids nothing has claimed yet.
    run_input = getattr(event, "input", None)
    for bucket, entity, owner in _seed_plan(getattr(run_input, "messages", None)):
        state.owners[bucket].setdefault(entity, owner)


HOOK_CHECKS: Final[Mapping[str, HookCheck]] = {
    "thread_agrees_with_stream": _thread_agrees_with_stream,
    "thread_id_agrees": _thread_id_agrees,
    "run_id_agrees": _run_id_agrees,
    "run_id_fresh": _run_id_fresh,
    "subagent_announced_first": _subagent_announced_first,
    "interrupts_present": _interrupts_present,
    "interrupts_unique": _interrupts_unique,
    "chunk_normalized": _chunk_normalized,
    "encrypted_value_owner": _encrypted_value_owner,
    "subagent_parent_started": _subagent_parent_started,
}
"""Named checks rows may reference in ``checks``."""

HOOK_EFFECTS: Final[Mapping[str, HookEffect]] = {
    "seed_owners_from_snapshot": _seed_owners_from_snapshot,
    "seed_owners_from_input": _seed_owners_from_input,
}
"""Named effects rows may reference in ``effects``."""


# ---------------------------------------------------------------------------------------
# Compiling rows
# ---------------------------------------------------------------------------------------

_Run = Callable[[_State, Any], Finding | None]


def _run_hooks(names: tuple[str, ...]) -> Callable[[_State, Any], Finding | None] | None:
    if not names:
        return None
    hooks = tuple((name, HOOK_CHECKS[name]) for name in names)

    def run(state: _State, event: Any) -> Finding | None:
        for name, hook in hooks:
            found = hook(state, event)
            if found is not None:
                return name, found[0], found[1]
        return None

    return run


def _listing(spec_index: int, keys: list[Any]) -> str:
    shown: list[str] = []
    for key in keys[:5]:
        if spec_index == _STEP:
            owner, name = key
            shown.append(name if owner is None else f"{name} (subagent '{owner}')")
        else:
            shown.append(str(key))
    more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
    return ", ".join(shown) + more


def _compile_lifecycle(row: Row) -> _Run:
    hooks = _run_hooks(row.checks)
    check_unclosed = row.lifecycle is Lifecycle.FINISH
    plurals = tuple(spec.plural for spec in FAMILIES)

    def run(state: _State, event: Any) -> Finding | None:
        if check_unclosed:
            for index, opened in enumerate(state.open):
                if opened:
                    keys = list(opened)
                    first = keys[0]
                    entity = first[1] if index == _STEP else first
                    fields = {"plural": plurals[index], "listing": _listing(index, keys)}
                    return "unclosed", entity, fields
        return hooks(state, event) if hooks is not None else None

    return run


def _compile_entity(row: Row) -> _Run:
    """The open/continue/close/follow interpreter for one row, specialised at import."""
    assert row.family is not None
    family = _FAMILY_INDEX[row.family]
    spec = FAMILIES[family]
    effect = row.effect
    get_key = attrgetter(row.key) if row.key is not None else None
    get_tag = attrgetter("subagent_run_id")
    scoped = spec.owner_scoped
    reusable = spec.reusable
    claim = row.owner is Attribution.CLAIM
    agree = row.owner is Attribution.AGREE
    mint = row.owner is Attribution.MINT
    bucket = _BUCKET_INDEX[row.bucket] if row.bucket is not None else -1
    get_owner_key = attrgetter(row.owner_key) if row.owner_key is not None else get_key
    get_parent = attrgetter(row.parent_key) if row.parent_key is not None else None
    parent_bucket = _BUCKET_INDEX[row.parent_bucket] if row.parent_bucket is not None else -1
    requires_open = _FAMILY_INDEX[row.requires_open] if row.requires_open is not None else -1
    requires_closed = _FAMILY_INDEX[row.requires_closed] if row.requires_closed is not None else -1
    noun = row.family.value
    hooks = _run_hooks(row.checks)
    closes = effect is Effect.CLOSES

    def opens(state: _State, event: Any) -> Finding | None:
        entity = get_key(event) if get_key is not None else _SINGLETON
        tag = get_tag(event) if (scoped or claim) else None
        key = (tag, entity) if scoped else entity
        opened = state.open[family]
        if key in opened:
            return "already_open", entity, {"owner": _describe(tag)}
        if not reusable and key in state.closed[family]:
            return "reopened", entity, {}
        if requires_open >= 0 and not state.open[requires_open]:
            return "requires_open", None, {}
        asserted = tag
        known = _MISSING
        if claim:
            if get_parent is not None:
                parent = get_parent(event)
                if parent is not None:
                    inherited = state.owners[parent_bucket].get(parent, _MISSING)
                    if inherited is not _MISSING:
                        if tag is not None and tag != inherited:
                            fields = {
                                "tag": f"'{tag}'",
                                "parent": parent,
                                "owner": _describe(inherited),
                            }
                            return "parent_owner", entity, fields
                        asserted = inherited
            known = state.owners[bucket].get(entity, _MISSING)
            if known is not _MISSING and asserted is not None and asserted != known:
                if tag is None:
                    # Untagged, but inheriting an owner from a parent message that differs.
                    fields = {"tag": "(inherited)", "noun": noun, "owner": _describe(known)}
                else:
                    fields = {"tag": f"'{tag}'", "noun": noun, "owner": _describe(known)}
                return "owner", entity, fields
        if hooks is not None:
            found = hooks(state, event)
            if found is not None:
                return found
        if sum(map(len, state.open)) >= state.max_open:
            fields = {"noun": noun, "count": state.max_open, "limit": state.max_open}
            return "open_entities", entity, fields
        opened[key] = None
        if claim and known is _MISSING:
            state.owners[bucket][entity] = asserted
        return None

    def continues(state: _State, event: Any) -> Finding | None:
        entity = get_key(event) if get_key is not None else _SINGLETON
        tag = get_tag(event) if (scoped or agree) else None
        key = (tag, entity) if scoped else entity
        opened = state.open[family]
        if key not in opened:
            if scoped:
                for other, name in opened:
                    if name == entity:
                        fields = {"owner": _describe(tag), "other": _describe(other)}
                        return "open_elsewhere", entity, fields
            return "not_open", entity, {"owner": _describe(tag)}
        if agree and tag is not None:
            known = state.owners[bucket].get(entity, _MISSING)
            if known is not _MISSING and known != tag:
                return "owner", entity, {"tag": f"'{tag}'", "noun": noun, "owner": _describe(known)}
        if requires_closed >= 0 and state.open[requires_closed]:
            return "requires_closed", None, {}
        if hooks is not None:
            found = hooks(state, event)
            if found is not None:
                return found
        if closes:
            del opened[key]
            if not reusable:
                state.closed[family].add(key)
        return None

    def follows(state: _State, event: Any) -> Finding | None:
        entity = get_key(event) if get_key is not None else _SINGLETON
        if entity in state.open[family]:
            return "still_open", entity, {}
        if hooks is not None:
            found = hooks(state, event)
            if found is not None:
                return found
        if mint and get_owner_key is not None:
            state.owners[bucket][get_owner_key(event)] = get_tag(event)
        return None

    if effect is Effect.OPENS:
        return opens
    if effect is Effect.FOLLOWS:
        return follows
    return continues


def _compile_unordered(row: Row) -> _Run:
    hooks = _run_hooks(row.checks)
    bucket = _BUCKET_INDEX[row.bucket] if row.bucket is not None else -1
    get_owner_key = attrgetter(row.owner_key) if row.owner_key is not None else None
    get_keep = attrgetter(row.keep_field) if row.keep_field is not None else None
    get_tag = attrgetter("subagent_run_id")
    policy = row.owner
    noun = row.bucket.value if row.bucket is not None else ""

    def run(state: _State, event: Any) -> Finding | None:
        if hooks is not None:
            found = hooks(state, event)
            if found is not None:
                return found
        if get_owner_key is None:
            return None
        entity = get_owner_key(event)
        owners = state.owners[bucket]
        tag = get_tag(event)
        if policy is Attribution.AGREE:
            known = owners.get(entity, _MISSING)
            if tag is not None and known is not _MISSING and known != tag:
                return "owner", entity, {"tag": f"'{tag}'", "noun": noun, "owner": _describe(known)}
        elif policy is Attribution.REMINT:
            keep = get_keep is not None and get_keep(event) is False
            if not (keep and entity in owners):
                owners[entity] = tag
        elif policy is Attribution.MINT:
            owners[entity] = tag
        return None

    return run


class _Compiled:
    """A row ready to run: its lifecycle gate per phase, its checks and its effects."""

    __slots__ = (
        "attributes",
        "effects",
        "event_type",
        "gate",
        "lifecycle",
        "next_phase",
        "row",
        "rules",
        "run",
    )

    def __init__(self, row: Row) -> None:
        self.row = row
        # Whether the event's subagentRunId attributes it to an invocation: on the subagent
        # lifecycle events it names the invocation itself instead.
        self.attributes = row.family is not Family.SUBAGENT and "subagent_run_id" in {
            field.name for field in attrs.fields(EVENT_CLASSES[str(row.event)])
        }
        self.event_type = str(row.event)
        self.lifecycle = row.lifecycle
        self.gate: tuple[str | None, ...] = tuple(LIFECYCLE_GATE[row.lifecycle][p] for p in Phase)
        self.next_phase = LIFECYCLE_NEXT[row.lifecycle]
        self.rules: Mapping[str, str] = row.rules
        self.effects: tuple[HookEffect, ...] = tuple(HOOK_EFFECTS[name] for name in row.effects)
        if row.lifecycle is not Lifecycle.IN_RUN:
            self.run: _Run = _compile_lifecycle(row)
        elif row.family is not None:
            self.run = _compile_entity(row)
        else:
            self.run = _compile_unordered(row)


def _compile_table() -> dict[type, _Compiled]:
    unknown = [
        f"{row.event}: unknown hook {name!r}"
        for row in TABLE
        for name in row.checks
        if name not in HOOK_CHECKS
    ] + [
        f"{row.event}: unknown effect {name!r}"
        for row in TABLE
        for name in row.effects
        if name not in HOOK_EFFECTS
    ]
    if unknown:
        raise TableError("malformed rule table: " + "; ".join(unknown))
    return {EVENT_CLASSES[str(row.event)]: _Compiled(row) for row in TABLE}


_DISPATCH: Final[dict[type, _Compiled]] = _compile_table()


# ---------------------------------------------------------------------------------------
# The verifier
# ---------------------------------------------------------------------------------------


def _error(
    rule_id: str,
    entity: Any,
    fields: Mapping[str, Any],
    *,
    event_type: str | None,
    event_index: int | None,
    cls: type[ProtocolError] = ProtocolError,
) -> ProtocolError:
    rule = RULES_BY_ID[rule_id]
    entity = _shown(entity)
    shown = {name: _shown(value) for name, value in fields.items()}
    message = rule.template.format(event_type=event_type, entity_id=entity, **shown)
    return cls(
        rule.id,
        rule.symbol,
        message,
        event_index=event_index,
        event_type=event_type,
        entity_id=None if entity is None else str(entity),
    )


def _shown(value: Any) -> Any:
    """A finding's value as it may appear in a message: a hostile id (a list nested
    thousands deep, a huge object) is shown bounded instead of recursing in ``str``."""
    return value if value is None or isinstance(value, str | int) else short_repr(value)


# Subclassable from Python in the compiled build too (docs/DESIGN.md, "The hot core is compiled").
@mypyc_attr(allow_interpreted_subclasses=True)
class Verifier:
    """
    An ordering and attribution state machine over one stream, which may carry several
    sequential runs.

    Feed it every event with :meth:`verify`, then call :meth:`finish` when the transport
    ends.  Each violation raises :class:`~aguikit.errors.ProtocolError` naming the rule.

    After an error the verifier's state is exactly what it was before the offending event:
    the event is treated as never received.  A strict caller stops there; a tolerant one
    may keep feeding events, and the verifier judges them against the stream as accepted
    so far (so a dropped ``TEXT_MESSAGE_START`` makes its content fail too).  The event
    counter behind ``event_index`` counts every event offered, accepted or not, so indices
    match stream positions.

    Args:
        thread_id: The ``threadId`` of the ``RunAgentInput`` that requested the stream, when
            the caller knows it.  Every ``RUN_STARTED`` must then carry it; without it the
            first ``RUN_STARTED`` sets the stream's thread.
        max_open_entities: Most entities open at once (``AGUI-V093`` past it), so a
            producer that opens and never closes cannot grow the verifier without bound;
            see :mod:`aguikit.limits`.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_index", "_state")

    def __init__(
        self, *, thread_id: str | None = None, max_open_entities: int = MAX_OPEN_ENTITIES
    ) -> None:
        self._state = _State(thread_id, max_open_entities)
        self._index = 0

    @property
    def is_finished(self) -> bool:
        """
        Whether the stream may end here: a run has ended and no run is active.

        ``False`` before any event and while a run is open; exactly when :meth:`finish`
        would not raise.
        """
        return self._state.phase >= Phase.FINISHED

    @property
    def events_seen(self) -> int:
        """How many events were offered to :meth:`verify`, accepted or not."""
        return self._index

    def open_entities(self) -> list[tuple[Family, Any, Any]]:
        """
        What the current run still has open, as ``(family, id, owner)``, in the order
        ``RUN_FINISHED`` reports them (families in :data:`aguikit.rules.FAMILIES` order,
        earliest first within a family).

        ``owner`` is the ``subagentRunId`` the entity is attributed to (``None`` for the
        parent agent).  A producer that must close what is open (aguikit's ``RunWriter``
        in repair mode) reads it here instead of keeping a second record of the stream.
        """
        state = self._state
        found: list[tuple[Family, Any, Any]] = []
        for index, opened in enumerate(state.open):
            spec = FAMILIES[index]
            owners = state.owners[_BUCKET_INDEX[spec.bucket]] if spec.bucket is not None else {}
            for key in opened:
                if spec.owner_scoped:
                    owner, entity = key
                elif spec.family is Family.SUBAGENT:
                    owner, entity = None, key
                else:
                    entity, owner = key, owners.get(key)
                found.append((spec.family, entity, owner))
        return found

    def verify(self, event: Any) -> None:
        """
        Check one event against the rules, and record it if it passes.

        Args:
            event: A typed event (one of the generated classes).

        Raises:
            ProtocolError: The event breaks a rule; ``rule`` and ``symbol`` name it.  Any
                other input (not an event, an id of an unhashable type) is reported as
                ``AGUI-V092`` rather than crashing.
        """
        index = self._index
        self._index = index + 1
        compiled = _DISPATCH.get(type(event))
        if compiled is None:
            raise _error(
                LIFECYCLE_RULES["malformed"],
                None,
                {"detail": "it is not an AG-UI event object"},
                event_type=type(event).__name__,
                event_index=index,
            )
        state = self._state
        gate = compiled.gate[state.phase]
        if gate is not None:
            entity = state.run_id if state.phase is Phase.ACTIVE else None
            raise _error(gate, entity, {}, event_type=compiled.event_type, event_index=index)
        try:
            found = compiled.run(state, event)
        except Exception as exc:  # hostile field types must surface as a ProtocolError
            raise _error(
                LIFECYCLE_RULES["malformed"],
                None,
                {"detail": f"{type(exc).__name__}: {exc}"},
                event_type=compiled.event_type,
                event_index=index,
            ) from exc
        if found is not None:
            check, entity, fields = found
            raise _error(
                compiled.rules.get(check) or LIMIT_RULES[check],
                entity,
                fields,
                event_type=compiled.event_type,
                event_index=index,
            )
        next_phase = compiled.next_phase
        if next_phase is not None:
            if next_phase is Phase.ACTIVE:
                if state.phase is not Phase.NEW:
                    state.reset_run()
                state.run_id = event.run_id
                state.run_ids.add(event.run_id)
                state.thread_id = event.thread_id
                if state.stream_thread is None:
                    state.stream_thread = event.thread_id
            state.phase = next_phase
        if compiled.attributes:
            tag = event.subagent_run_id
            if tag is not None:
                attributed = state.attributed
                attributed[tag] = attributed.get(tag, 0) + 1
        for effect in compiled.effects:
            effect(state, event)

    def finish(self) -> None:
        """
        Check that the stream ended where it was allowed to.

        Raises:
            TruncatedStreamError: The stream ended inside a run (a truncated response,
                which otherwise looks exactly like a short answer), or before any run.
                Its ``event_index`` is where the stream ended: the number of events
                offered, one past the last.
        """
        state = self._state
        if state.phase is Phase.NEW:
            raise _error(
                LIFECYCLE_RULES["never_started"],
                None,
                {},
                event_type=None,
                event_index=self._index,
                cls=TruncatedStreamError,
            )
        if state.phase is Phase.ACTIVE:
            raise _error(
                LIFECYCLE_RULES["truncated"],
                state.run_id,
                {},
                event_type=None,
                event_index=self._index,
                cls=TruncatedStreamError,
            )


def verify_all(
    events: Iterable[Any],
    *,
    thread_id: str | None = None,
    max_open_entities: int = MAX_OPEN_ENTITIES,
) -> None:
    """
    Verify a whole recorded stream: every event, then its end.

    Args:
        events: Typed events in stream order.
        thread_id: As for :class:`Verifier`.
        max_open_entities: As for :class:`Verifier`.

    Raises:
        ProtocolError: The first violation; :class:`~aguikit.errors.TruncatedStreamError`
            when the stream ended inside a run or never started one.
    """
    verifier = Verifier(thread_id=thread_id, max_open_entities=max_open_entities)
    for event in events:
        verifier.verify(event)
    verifier.finish()
