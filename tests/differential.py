"""
The differential against the official TypeScript client: a seeded generator of streams and
the judges that give each stream a verdict.

*The generator* (:func:`generate`) writes streams a real producer could send and the
specification's chunk rules make interesting: one to three runs a stream, a parent lane and
zero to two subagent lanes (announced or only attributed), each lane running chunk items of
every family (text, tool call, reasoning), explicit items and the standalone events
(``STATE_*``, ``MESSAGES_SNAPSHOT``, ``ACTIVITY_*``, ``CUSTOM``, ``RAW``,
``REASONING_ENCRYPTED_VALUE``, ``STEP_*``, ``SUBAGENT_*``, ``TOOL_CALL_RESULT``), with
the lanes interleaved event by event.  A standalone event is often placed while its lane
(or another) has a chunk item open, and a chunk continuing an item omits its id and its
tag only where :class:`Lanes` (the specification's "Closing a chunk stream", modelled here
from its text alone) says the item is still open and the shorthand resolves to it; after a
closing event the next chunk names its id again, which re-opens the item.  Continuations
carry a delta, only metadata, or only a ``rawEvent``; runs end in ``RUN_FINISHED``,
``RUN_ERROR`` at any point, or ``RUN_FINISHED`` followed by a late ``RUN_ERROR``.  Seven
streams in ten then get one near-valid mutation (:data:`MUTATIONS`): the id a
continuation needs after a closing event left out, explicit and chunk spellings mixed in
one item, a conflicting repeat, a wrong or missing tag, an event dropped, duplicated,
swapped or moved after the run's end, a truncated stream, a malformed value.

Every stream is a function of ``(seed, index)`` alone, so a failure names a stream that
:func:`stream` rebuilds.

*The judges* give a :class:`Verdict` each: :func:`client_verdicts` (the official client,
``tests/node/differential.mjs``, every stream in one Node process), :func:`session_verdict`
(a default :class:`aguikit.Session`, then ``finish``), :func:`writer_verdict`
(``RunWriter(mode="strict")``, one writer per run, every event emitted by hand, as an
official SDK generator is served) and :func:`check_verdict` (``aguikit check --strict``
through :func:`aguikit.checker.check_events`, the command's own pass; the test runs the
command itself on a sample to show it says the same).
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import attrs
from tests.node_client import NODE_DIR, require_node

from aguikit import Session
from aguikit.catalogue import Severity
from aguikit.checker import CheckConfig, check_events
from aguikit.errors import AguiError
from aguikit.server import RunWriter

Wire = dict[str, Any]

FAMILIES: Final = ("text", "tool", "reasoning")
CHUNK_TYPE: Final = {
    "text": "TEXT_MESSAGE_CHUNK",
    "tool": "TOOL_CALL_CHUNK",
    "reasoning": "REASONING_MESSAGE_CHUNK",
}
ID_MEMBER: Final = {"text": "messageId", "tool": "toolCallId", "reasoning": "messageId"}

STANDALONE: Final = (
    "STATE_SNAPSHOT",
    "STATE_DELTA",
    "MESSAGES_SNAPSHOT",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "CUSTOM",
    "RAW",
    "REASONING_ENCRYPTED_VALUE",
    "STEP_STARTED",
    "STEP_FINISHED",
    "SUBAGENT_STARTED",
    "SUBAGENT_FINISHED",
    "SUBAGENT_ERROR",
    "TOOL_CALL_RESULT",
)
"""The events the generator places inside open chunk streams (``Stats.inside``)."""

STAND_ASIDE: Final = frozenset(
    {"RAW", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA", "REASONING_ENCRYPTED_VALUE", "SUBAGENT_STARTED"}
)
"""basic/patterns/streaming.mdx, "Closing a chunk stream": "with four exceptions that stand
aside from assembly and close nothing: RAW, ACTIVITY_SNAPSHOT, ACTIVITY_DELTA,
REASONING_ENCRYPTED_VALUE (and SUBAGENT_STARTED, which opens a new lane ...)"."""

RUN_LEVEL: Final = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"})
"""The same section: "a run-level event ... which closes every lane"."""

THREAD: Final = "t1"


# ---------------------------------------------------------------------------- the model


class Lanes:
    """
    Which chunk item each lane holds open, by the specification's text alone: a chunk of
    another item in the lane closes the open one; a message, tool-call, step, state,
    custom or reasoning event in the lane closes it, except the ones that stand aside; a
    run-level event closes every lane; a subagent's terminal event closes its lane.
    """

    def __init__(self) -> None:
        self.open: dict[str | None, tuple[str, str]] = {}

    def see(self, event: Wire) -> None:
        """Update the open items for ``event``, as a consumer's expansion would."""
        kind = event.get("type")
        lane = event.get("subagentRunId")
        if kind in RUN_LEVEL:
            self.open.clear()
        elif kind in STAND_ASIDE:
            return
        elif kind in CHUNK_TYPE.values():
            family = next(f for f, t in CHUNK_TYPE.items() if t == kind)
            entity = event.get(ID_MEMBER[family])
            owner = self.resolve(family, entity, lane)
            held = self.open.get(owner)
            if entity is None and held is not None and held[0] == family:
                return
            if entity is not None:
                self.open[owner] = (family, entity)
            else:
                self.open.pop(owner, None)
        else:
            self.open.pop(lane, None)

    def resolve(self, family: str, entity: str | None, tag: str | None) -> str | None:
        """The lane a chunk belongs to ("Which lane a shorthand continuation belongs
        to"); a chunk with neither id nor tag that has no unique referent resolves to
        the parent lane here (the stream is then invalid, which the mutations want)."""
        if entity is not None:
            for owner, (held_family, held) in self.open.items():
                if held_family == family and held == entity:
                    return owner
            return tag
        if tag is not None:
            return tag
        parent = self.open.get(None)
        if parent is not None and parent[0] == family:
            return None
        holders = [owner for owner, (f, _) in self.open.items() if f == family]
        return holders[0] if len(holders) == 1 else None

    def holds(self, lane: str | None, family: str, entity: str) -> bool:
        """Whether ``lane``'s open item is ``entity`` of ``family``."""
        return self.open.get(lane) == (family, entity)


# ------------------------------------------------------------------------- the generator


@attrs.define
class Case:
    """One generated stream: its events, and the mutation made to it (``""``: none)."""

    index: int
    events: list[Wire]
    mutation: str = ""
    inside: list[tuple[str, str, str]] = attrs.Factory(list)
    """Each (standalone event type, open chunk family, lane kind) this stream places."""


class _Run:
    """The events of one run, built lane by lane and interleaved."""

    def __init__(self, rng: random.Random, ids: _Ids, run_id: str, lanes: Lanes) -> None:
        self.rng = rng
        self.ids = ids
        self.run_id = run_id
        self.lanes = lanes
        self.events: list[Wire] = []
        self.inside: list[tuple[str, str, str]] = []

    def emit(self, event: Wire) -> None:
        lane = event.get("subagentRunId")
        kind = event["type"]
        if kind in STANDALONE or kind in RUN_LEVEL:
            for owner, (family, _) in self.lanes.open.items():
                where = "parent" if owner is None else "subagent"
                same = "same-lane" if owner == lane else "other-lane"
                self.inside.append((kind, family, f"{where}/{same}"))
        self.lanes.see(event)
        self.events.append(event)


class _Ids:
    """Fresh ids for one stream, and the ones already used (for re-opening)."""

    def __init__(self, rng: random.Random, lanes: Lanes) -> None:
        self.rng = rng
        self.lanes = lanes
        self.count = 0
        self.used: dict[tuple[str, str | None], list[str]] = {}
        self.argued: set[str] = set()

    def args(self, call: str) -> str:
        """A call's arguments stay one JSON document however often it is continued or
        re-opened: ``{}`` first, whitespace after."""
        if call in self.argued:
            return " "
        self.argued.add(call)
        return "{}"

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def item(self, family: str, lane: str | None) -> str:
        """A new id, or (sometimes) one ``lane`` used before and has closed since (a lane
        writes one item at a time): a re-opened item."""
        used = self.used.setdefault((family, lane), [])
        held = self.lanes.open.get(lane)
        closed = [entity for entity in used if held != (family, entity)]
        if closed and self.rng.random() < 0.15:
            return self.rng.choice(closed)
        entity = self.fresh({"text": "m", "tool": "c", "reasoning": "rm"}[family])
        used.append(entity)
        return entity


def _tagged(event: Wire, lane: str | None) -> Wire:
    if lane is not None:
        event["subagentRunId"] = lane
    return event


class _Lane:
    """One producer (the parent agent or a subagent): a script of items, run lazily so
    each chunk decides at its turn whether the shorthand may leave its id out."""

    def __init__(self, run: _Run, name: str | None, announced: bool) -> None:
        self.run = run
        self.rng = run.rng
        self.name = name
        self.announced = announced
        self.calls: list[str] = []
        self.reasoning: list[str] = []
        self.steps: list[str] = []
        self.activities: list[str] = []
        self.nested = False
        self.streaming: str | None = None

    def script(self) -> Iterator[Wire]:
        rng = self.rng
        if self.name is not None and self.announced:
            yield {"type": "SUBAGENT_STARTED", "subagentRunId": self.name, "name": "helper"}
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            if roll < 0.55:
                yield from self.chunk_item(rng.choice(FAMILIES))
            elif roll < 0.75:
                yield from self.explicit_item(rng.choice(FAMILIES))
            else:
                yield from self.standalone()
        while self.steps:
            yield _tagged({"type": "STEP_FINISHED", "stepName": self.steps.pop()}, self.name)
        if self.name is not None and self.announced:
            if rng.random() < 0.8:
                yield {"type": "SUBAGENT_FINISHED", "subagentRunId": self.name}
            else:
                yield {"type": "SUBAGENT_ERROR", "subagentRunId": self.name, "message": "no"}

    # -- chunk items ----------------------------------------------------------------------

    def chunk_item(self, family: str) -> Iterator[Wire]:
        rng = self.rng
        entity = self.run.ids.item(family, self.name)
        first: Wire = {"type": CHUNK_TYPE[family], ID_MEMBER[family]: entity}
        if family == "tool":
            first["toolCallName"] = "lookup"
            self.calls.append(entity)
        elif family == "reasoning":
            self.reasoning.append(entity)
        elif rng.random() < 0.3:
            first["role"] = "assistant"
        if rng.random() < 0.8:
            first["delta"] = self.run.ids.args(entity) if family == "tool" else "a"
        yield _tagged(first, self.name)
        for _ in range(rng.randint(0, 4)):
            if rng.random() < 0.45:
                yield from self.standalone()
            yield self.continuation(family, entity)

    def continuation(self, family: str, entity: str) -> Wire:
        rng = self.rng
        lanes = self.run.lanes
        chunk: Wire = {"type": CHUNK_TYPE[family]}
        open_here = lanes.holds(self.name, family, entity)
        if not open_here or rng.random() < 0.4:
            chunk[ID_MEMBER[family]] = entity  # names it again: after a closer, re-opens it
            if not open_here and family == "tool":
                chunk["toolCallName"] = "lookup"
        tag = self.name
        untagged = ID_MEMBER[family] not in chunk and rng.random() < 0.3
        if tag is not None and untagged and lanes.resolve(family, None, None) == tag:
            tag = None  # an untagged continuation its lane still resolves to
        roll = rng.random()
        if roll < 0.7:
            chunk["delta"] = self.run.ids.args(entity) if family == "tool" else "b"
        elif roll < 0.85:
            chunk["metadata"] = {"finishReason": "stop"}
        else:
            chunk["rawEvent"] = {"provider": "x"}
        return _tagged(chunk, tag)

    # -- explicit items -------------------------------------------------------------------

    def between(self, family: str) -> Iterator[Wire]:
        """What an open explicit item may have between its events: a standalone event, or
        a whole chunk item of another family in the same lane ("a tool call MAY open while
        a message is still streaming"), whose stream the item's next event then closes."""
        roll = self.rng.random()
        if roll < 0.3:
            yield from self.standalone()
        elif roll < 0.45 and not self.nested:
            self.nested = True
            yield from self.chunk_item(self.rng.choice([f for f in FAMILIES if f != family]))
            self.nested = False

    def explicit_item(self, family: str) -> Iterator[Wire]:
        rng = self.rng
        name = self.name
        entity = self.run.ids.item(family, self.name)
        if family == "text":
            yield _tagged({"type": "TEXT_MESSAGE_START", "messageId": entity}, name)
            for _ in range(rng.randint(0, 2)):
                yield from self.between(family)
                yield _tagged(
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": entity, "delta": "x"}, name
                )
            yield _tagged({"type": "TEXT_MESSAGE_END", "messageId": entity}, name)
        elif family == "tool":
            start = {"type": "TOOL_CALL_START", "toolCallId": entity, "toolCallName": "lookup"}
            yield _tagged(start, name)
            self.streaming = entity  # re-opened: no result answers it until it ends again
            for _ in range(rng.randint(0, 2)):
                yield from self.between(family)
                args = {"type": "TOOL_CALL_ARGS", "toolCallId": entity}
                yield _tagged({**args, "delta": self.run.ids.args(entity)}, name)
            yield _tagged({"type": "TOOL_CALL_END", "toolCallId": entity}, name)
            self.streaming = None
            self.calls.append(entity)  # answerable (and encryptable) once it has ended
        else:
            span = rng.random() < 0.5
            if span:
                yield _tagged({"type": "REASONING_START", "messageId": entity}, name)
            start = {"type": "REASONING_MESSAGE_START", "messageId": entity, "role": "reasoning"}
            yield _tagged(start, name)
            self.reasoning.append(entity)
            for _ in range(rng.randint(0, 2)):
                yield from self.between(family)
                content = {"type": "REASONING_MESSAGE_CONTENT", "messageId": entity, "delta": "h"}
                yield _tagged(content, name)
            yield _tagged({"type": "REASONING_MESSAGE_END", "messageId": entity}, name)
            if span:
                yield _tagged({"type": "REASONING_END", "messageId": entity}, name)

    # -- standalone events ----------------------------------------------------------------

    def standalone(self) -> Iterator[Wire]:
        rng = self.rng
        name = self.name
        kind = rng.choice(
            (
                "STATE_SNAPSHOT",
                "STATE_DELTA",
                "MESSAGES_SNAPSHOT",
                "ACTIVITY",
                "CUSTOM",
                "RAW",
                "REASONING_ENCRYPTED_VALUE",
                "STEP",
                "TOOL_CALL_RESULT",
                "SUBAGENT",
            )
        )
        ids = self.run.ids
        if kind == "STATE_SNAPSHOT":
            yield _tagged({"type": kind, "snapshot": {"k": ids.fresh("")}}, name)
        elif kind == "STATE_DELTA":
            patch = [{"op": "add", "path": f"/k{ids.fresh('')}", "value": 1}]
            yield _tagged({"type": kind, "delta": patch}, name)
        elif kind == "MESSAGES_SNAPSHOT":
            user = {"id": ids.fresh("u"), "role": "user", "content": "hi"}
            yield {"type": kind, "messages": [user]}
        elif kind == "ACTIVITY":
            if self.activities and rng.random() < 0.6:
                activity = rng.choice(self.activities)
                patch = [{"op": "add", "path": f"/p{ids.fresh('')}", "value": 1}]
                delta = {"type": "ACTIVITY_DELTA", "messageId": activity, "patch": patch}
                yield _tagged({**delta, "activityType": "progress"}, name)
            else:
                activity = ids.fresh("a")
                self.activities.append(activity)
                snapshot = {"type": "ACTIVITY_SNAPSHOT", "messageId": activity, "content": {}}
                yield _tagged({**snapshot, "activityType": "progress"}, name)
        elif kind == "CUSTOM":
            yield _tagged({"type": kind, "name": "note", "value": 1}, name)
        elif kind == "RAW":
            yield _tagged({"type": kind, "event": {"provider": "x"}}, name)
        elif kind == "REASONING_ENCRYPTED_VALUE":
            if self.calls and (not self.reasoning or rng.random() < 0.5):
                subtype, entity = "tool-call", rng.choice(self.calls)
            elif self.reasoning:
                subtype, entity = "message", rng.choice(self.reasoning)
            else:
                return
            value = {"type": kind, "subtype": subtype, "entityId": entity, "encryptedValue": "e"}
            yield _tagged(value, name)
        elif kind == "STEP":
            if self.steps and rng.random() < 0.5:
                yield _tagged({"type": "STEP_FINISHED", "stepName": self.steps.pop()}, name)
            else:
                step = ids.fresh("step")
                self.steps.append(step)
                yield _tagged({"type": "STEP_STARTED", "stepName": step}, name)
        elif kind == "TOOL_CALL_RESULT":
            answerable = [call for call in self.calls if call != self.streaming]
            if not answerable:
                return
            call = rng.choice(answerable)
            result = {"messageId": ids.fresh("tm"), "toolCallId": call, "content": "ok"}
            yield _tagged({"type": kind, **result}, name)
        elif kind == "SUBAGENT" and self.name is None:
            # A short subagent of its own: started, one event, finished (or failed).
            sub = ids.fresh("q")
            yield {"type": "SUBAGENT_STARTED", "subagentRunId": sub, "name": "quick"}
            yield {"type": "CUSTOM", "name": "tick", "value": 0, "subagentRunId": sub}
            if rng.random() < 0.7:
                yield {"type": "SUBAGENT_FINISHED", "subagentRunId": sub}
            else:
                yield {"type": "SUBAGENT_ERROR", "subagentRunId": sub, "message": "failed"}


def _run(rng: random.Random, ids: _Ids, run_id: str, lanes: Lanes) -> _Run:
    run = _Run(rng, ids, run_id, lanes)
    run.emit({"type": "RUN_STARTED", "threadId": THREAD, "runId": run_id})
    producers = [_Lane(run, None, announced=False)]
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        producers.append(_Lane(run, ids.fresh("s"), announced=rng.random() < 0.7))
    scripts = [p.script() for p in producers]
    ending = rng.random()
    failing_at = rng.randint(1, 30) if ending < 0.12 else None
    # Interleave: each step one lane (the parent more often) writes its next event.
    while scripts:
        if failing_at is not None and len(run.events) >= failing_at:
            break
        script = scripts[0] if rng.random() < 0.4 else rng.choice(scripts)
        try:
            run.emit(next(script))
        except StopIteration:
            scripts.remove(script)
    if failing_at is not None or ending < 0.2:
        run.emit({"type": "RUN_ERROR", "message": "failed", "code": "E1"})
        return run
    run.emit({"type": "RUN_FINISHED", "threadId": THREAD, "runId": run_id})
    if ending > 0.92:
        run.emit({"type": "RUN_ERROR", "message": "late failure"})
    return run


def valid_stream(rng: random.Random) -> tuple[list[Wire], list[tuple[str, str, str]]]:
    """A stream the specification admits (as :class:`Lanes` reads it): one to three runs."""
    lanes = Lanes()
    ids = _Ids(rng, lanes)
    events: list[Wire] = []
    inside: list[tuple[str, str, str]] = []
    for number in range(rng.choice((1, 1, 2, 3))):
        run = _run(rng, ids, f"r{number + 1}", lanes)
        events.extend(run.events)
        inside.extend(run.inside)
    return events, inside


# ------------------------------------------------------------------------- the mutations


def _where(events: list[Wire], test: Callable[[int, Wire], bool]) -> list[int]:
    return [i for i, e in enumerate(events) if test(i, e)]


def _chunk_reopening(events: list[Wire]) -> list[int]:
    """Chunks that name an id their lane no longer holds open (after a closing event)."""
    lanes = Lanes()
    found = []
    for i, event in enumerate(events):
        kind = event["type"]
        if kind in CHUNK_TYPE.values():
            family = next(f for f, t in CHUNK_TYPE.items() if t == kind)
            entity = event.get(ID_MEMBER[family])
            lane = event.get("subagentRunId")
            named = [e["type"] for e in events[:i] if e.get(ID_MEMBER[family]) == entity]
            if entity is not None and not lanes.holds(lane, family, entity) and kind in named:
                found.append(i)
        lanes.see(event)
    return found


def _drop_reopening_id(rng: random.Random, events: list[Wire]) -> bool:
    """The issue's case: a chunk after a closing event continues without its id."""
    sites = _chunk_reopening(events)
    if not sites:
        return False
    event = events[rng.choice(sites)]
    for member in ("messageId", "toolCallId", "toolCallName"):
        event.pop(member, None)
    return True


def _drop_first_id(rng: random.Random, events: list[Wire]) -> bool:
    sites = _where(events, lambda i, e: e["type"] in CHUNK_TYPE.values() and len(e) > 2)
    if not sites:
        return False
    event = events[rng.choice(sites)]
    member = "toolCallName" if "toolCallName" in event and rng.random() < 0.5 else None
    for key in (member,) if member else ("messageId", "toolCallId"):
        event.pop(key, None)
    return True


def _mix_spellings(rng: random.Random, events: list[Wire]) -> bool:
    """An explicit event for an item a chunk opened, or a chunk for an explicit item."""
    chunks = _where(events, lambda i, e: e["type"] in CHUNK_TYPE.values() and len(e) > 2)
    openers = ("TEXT_MESSAGE_START", "TOOL_CALL_START", "REASONING_MESSAGE_START")
    starts = _where(events, lambda i, e: e["type"] in openers)
    if chunks and (not starts or rng.random() < 0.5):
        at = rng.choice(chunks)
        chunk = events[at]
        family = next(f for f, t in CHUNK_TYPE.items() if t == chunk["type"])
        entity = chunk.get(ID_MEMBER[family])
        if entity is None:
            return False
        closer, content = {
            "text": ("TEXT_MESSAGE_END", "TEXT_MESSAGE_CONTENT"),
            "tool": ("TOOL_CALL_END", "TOOL_CALL_ARGS"),
            "reasoning": ("REASONING_MESSAGE_END", "REASONING_MESSAGE_CONTENT"),
        }[family]
        explicit: Wire = {"type": rng.choice((closer, content)), ID_MEMBER[family]: entity}
        if explicit["type"] == content:
            explicit["delta"] = "z"
        # Mostly in the chunk's own lane; sometimes in another (the shorthand ends anyway).
        lanes = sorted({e["subagentRunId"] for e in events if e.get("subagentRunId")})
        tag = chunk.get("subagentRunId")
        if rng.random() < 0.3:
            tag = rng.choice([None, *lanes])
        if tag is not None:
            explicit["subagentRunId"] = tag
        events.insert(at + 1, explicit)
        return True
    if not starts:
        return False
    at = rng.choice(starts)
    start = events[at]
    family = {"TEXT_MESSAGE_START": "text", "TOOL_CALL_START": "tool"}.get(
        start["type"], "reasoning"
    )
    chunk = {"type": CHUNK_TYPE[family], "delta": "z"}
    if rng.random() < 0.5:
        chunk[ID_MEMBER[family]] = start[ID_MEMBER[family]]
    if "subagentRunId" in start:
        chunk["subagentRunId"] = start["subagentRunId"]
    events.insert(at + 1, chunk)
    return True


def _conflicting_repeat(rng: random.Random, events: list[Wire]) -> bool:
    sites = _where(
        events,
        lambda i, e: e["type"] in ("TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK") and len(e) > 1,
    )
    if not sites:
        return False
    event = events[rng.choice(sites)]
    if event["type"] == "TEXT_MESSAGE_CHUNK":
        event[rng.choice(("role", "name"))] = rng.choice(("user", "other"))
        if event.get("role") == "other":
            event["role"] = "system"
    else:
        event[rng.choice(("toolCallName", "parentMessageId"))] = "elsewhere"
    return True


def _retag(rng: random.Random, events: list[Wire]) -> bool:
    """A continuation (chunk or explicit) attributed to another lane, or to none."""
    sites = _where(events, lambda i, e: e["type"] not in RUN_LEVEL and "SUBAGENT" not in e["type"])
    if not sites:
        return False
    event = events[rng.choice(sites)]
    if "subagentRunId" in event and rng.random() < 0.5:
        del event["subagentRunId"]
    else:
        event["subagentRunId"] = rng.choice(("s1", "s2", "zz"))
    return True


def _drop(rng: random.Random, events: list[Wire]) -> bool:
    if len(events) < 3:
        return False
    del events[rng.randrange(1, len(events))]
    return True


def _duplicate(rng: random.Random, events: list[Wire]) -> bool:
    at = rng.randrange(len(events))
    events.insert(at, dict(events[at]))
    return True


def _swap(rng: random.Random, events: list[Wire]) -> bool:
    if len(events) < 3:
        return False
    at = rng.randrange(1, len(events) - 1)
    events[at], events[at + 1] = events[at + 1], events[at]
    return True


def _after_end(rng: random.Random, events: list[Wire]) -> bool:
    """An event of the run written after its terminal event."""
    ends = _where(events, lambda i, e: e["type"] in ("RUN_FINISHED", "RUN_ERROR"))
    content = _where(events, lambda i, e: e["type"] not in RUN_LEVEL)
    if not ends or not content:
        return False
    events.insert(rng.choice(ends) + 1, dict(events[rng.choice(content)]))
    return True


def _finish_early(rng: random.Random, events: list[Wire]) -> bool:
    """RUN_FINISHED moved before the end of its run's content."""
    ends = _where(events, lambda i, e: e["type"] == "RUN_FINISHED")
    if not ends:
        return False
    at = rng.choice(ends)
    starts = [i for i in _where(events, lambda i, e: e["type"] == "RUN_STARTED") if i < at]
    if not starts or at - starts[-1] < 3:
        return False
    events.insert(rng.randrange(starts[-1] + 1, at), events.pop(at))
    return True


def _truncate(rng: random.Random, events: list[Wire]) -> bool:
    if len(events) < 3:
        return False
    del events[rng.randrange(2, len(events)) :]
    return True


def _malformed(rng: random.Random, events: list[Wire]) -> bool:
    """A known member with a wrong value, a null tag, or an undeclared member."""
    event = events[rng.randrange(len(events))]
    roll = rng.random()
    if roll < 0.35:
        member = rng.choice([k for k in event if k != "type"] or ["type"])
        event[member] = 42 if member != "type" else "NOT_AN_EVENT"
    elif roll < 0.6 and event["type"] not in RUN_LEVEL:
        event["subagentRunId"] = None
    else:
        event["futureMember"] = True
    return True


MUTATIONS: Final[dict[str, Callable[[random.Random, list[Wire]], bool]]] = {
    "drop-reopening-id": _drop_reopening_id,
    "drop-first-id": _drop_first_id,
    "mix-spellings": _mix_spellings,
    "conflicting-repeat": _conflicting_repeat,
    "retag": _retag,
    "drop": _drop,
    "duplicate": _duplicate,
    "swap": _swap,
    "after-end": _after_end,
    "finish-early": _finish_early,
    "truncate": _truncate,
    "malformed": _malformed,
}
"""Near-valid mutations, each returning whether it applied to the stream it was given."""

_WEIGHTS: Final = {
    "drop-reopening-id": 4,
    "drop-first-id": 1,
    "mix-spellings": 3,
    "conflicting-repeat": 1,
    "retag": 2,
    "drop": 2,
    "duplicate": 1,
    "swap": 2,
    "after-end": 1,
    "finish-early": 1,
    "truncate": 1,
    "malformed": 1,
}


def stream(seed: int, index: int) -> Case:
    """The ``index``-th stream of ``seed``: the same events on every machine and run."""
    rng = random.Random(f"{seed}:{index}")
    events, inside = valid_stream(rng)
    case = Case(index, events, inside=inside)
    if rng.random() < 0.7:
        names = list(MUTATIONS)
        weights = [_WEIGHTS[name] for name in names]
        for _ in range(8):
            name = rng.choices(names, weights)[0]
            if MUTATIONS[name](rng, case.events):
                case.mutation = name
                break
    return case


def generate(seed: int, count: int) -> list[Case]:
    """``count`` streams of ``seed``."""
    return [stream(seed, index) for index in range(count)]


# ---------------------------------------------------------------------------- the judges


@attrs.frozen
class Verdict:
    """A judge's verdict on one stream: accepted, or rejected with why and where."""

    accepted: bool
    rule: str | None = None
    """The catalogue id of the (first) rejection; for the client, ``None``."""
    event: int | None = None
    """1-based number of the event rejected (one past the last: the stream's end)."""
    message: str = ""


ACCEPTED: Final = Verdict(True)


def client_verdicts(cases: list[Case]) -> list[Verdict]:
    """Every stream judged by the official client, in one Node process."""
    node = require_node()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "streams.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for case in cases:
                out.write(json.dumps(case.events, separators=(",", ":")) + "\n")
        done = subprocess.run(
            [node, str(NODE_DIR / "differential.mjs"), str(path)],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=1200,
            check=True,
        )
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(verdicts) == len(cases), done.stderr[-2000:]
    return [
        ACCEPTED if v["verdict"] == "accepted" else Verdict(False, message=v["error"])
        for v in verdicts
    ]


def _refusal(error: AguiError, fallback: int) -> Verdict:
    index = error.event_index
    return Verdict(
        False, error.rule, (index if index is not None else fallback) + 1, str(error)[:300]
    )


def session_verdict(events: list[Wire]) -> Verdict:
    """A default :class:`~aguikit.Session` fed every event, then finished."""
    session = Session()
    for index, event in enumerate(events):
        try:
            session.feed(event)
        except AguiError as error:
            return _refusal(error, index)
    try:
        session.finish()
    except AguiError as error:
        return _refusal(error, len(events))
    return ACCEPTED


async def writer_verdict(events: list[Wire]) -> Verdict:
    """
    ``RunWriter(mode="strict")`` emitting the stream event by event: a writer per run
    (one run is what a writer answers), started by the stream's own ``RUN_STARTED``;
    an event after a run ended goes to that run's writer (which refuses it unless it
    starts the next run), and a run the stream leaves unfinished is finished as the
    endpoint would (``finish``).  The verdict names the emit that raised.
    """
    writer: RunWriter | None = None
    state: Any = {}
    for index, event in enumerate(events):
        if writer is None or (writer.ended and event.get("type") == "RUN_STARTED"):
            if writer is not None:
                state = writer.state
            run_id = event.get("runId") if event.get("type") == "RUN_STARTED" else None
            run_input = {
                "threadId": THREAD,
                "runId": run_id if isinstance(run_id, str) else "r-unstarted",
                "messages": [],
                "tools": [],
                "context": [],
                "state": state,
                "forwardedProps": {},
                "protocolVersion": "1.1.0",
            }
            writer = RunWriter(run_input, mode="strict")
        try:
            await writer.emit(event)
        except (AguiError, TypeError) as error:
            if isinstance(error, TypeError):
                return Verdict(False, "TypeError", index + 1, str(error)[:300])
            return _refusal(error, index)
    if writer is not None and not writer.ended:
        try:
            await writer.finish()
        except AguiError as error:
            return _refusal(error, len(events))
    return ACCEPTED


STRICT: Final = CheckConfig(fail_on=Severity.WARNING)
"""``aguikit check --strict``: a warning fails the check too."""


def check_verdict(events: list[Wire]) -> Verdict:
    """``aguikit check --strict`` on the stream (the command's own pass, in process)."""
    report = check_events(events, "stream", STRICT)
    if report.exit_code(STRICT) == 0:
        return ACCEPTED
    failing = [f for f in report.findings if f.severity in (Severity.WARNING, Severity.ERROR)]
    first = min(failing, key=lambda f: f.event or 0) if failing else None
    if first is None:
        return Verdict(False, "exit", None, f"exit {report.exit_code(STRICT)}")
    return Verdict(False, first.rule, first.event, first.message[:300])


def check_rules(events: list[Wire]) -> list[str]:
    """Every rule ``aguikit check --strict`` fails the stream with, in order of events."""
    report = check_events(events, "stream", STRICT)
    return [
        f.rule
        for f in sorted(report.findings, key=lambda f: f.event or 0)
        if f.severity in (Severity.WARNING, Severity.ERROR)
    ]


def writer_verdicts(cases: list[Case]) -> list[Verdict]:
    """:func:`writer_verdict` for every case, in one event loop."""

    async def judge_all() -> list[Verdict]:
        return [await writer_verdict(case.events) for case in cases]

    return asyncio.run(judge_all())
