"""
Strict is never looser than the official client (issue 23, item 4).

Thousands of generated streams (``tests/differential.py``: standalone events inside open
chunk streams of every family and lane, interleaved lanes, several runs, late
``RUN_ERROR``s, re-opened ids, metadata-only chunks, near-valid mutations) are judged by the
official ``@ag-ui/client`` 1.0.0 exactly as an application receives them (one Node
process, ``tests/node/differential.mjs``) and by aguikit three ways: a default
:class:`aguikit.Session`, ``RunWriter(mode="strict")`` emitting each event by hand, and
``aguikit check --strict`` (its in-process pass; the command itself on a sample).

The property: every stream the client rejects, each of the three rejects, except where the
specification says the client is wrong (``docs/divergences-client.md`` lists those, none
today).  Where aguikit rejects what the client accepts, the rule must be one that page's
table justifies with a sentence of the specification, so a new strictness cannot slip in
unexplained either.

``AGUIKIT_DIFF_STREAMS`` (10,000 by default; ``nox -s fuzz`` runs 100,000) and
``AGUIKIT_DIFF_SEED`` choose the streams; ``AGUIKIT_DIFF_REPORT`` names a JSON file the
counts are written to.  A failure names each stream by its index, which
``tests.differential.stream(seed, index)`` rebuilds.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
from tests import differential as diff
from tests.support import write_jsonl

pytestmark = pytest.mark.fuzz

STREAMS: Final = int(os.environ.get("AGUIKIT_DIFF_STREAMS", "10000"))
SEED: Final = int(os.environ.get("AGUIKIT_DIFF_SEED", "23"))
SAMPLE: Final = 300
"""Streams the real ``aguikit check --strict`` command judges, in one process."""
DOC: Final = Path(__file__).resolve().parent.parent / "docs" / "divergences-client.md"
JUDGES: Final = ("session", "writer", "check")


BATCH: Final = 10_000
"""Streams judged at a time: a long run keeps only its counts and a few examples."""
EXAMPLES: Final = 5


@attrs.define
class Side:
    """One aguikit judge against the client, over every stream."""

    rejects: int = 0
    both_reject: int = 0
    both_accept: int = 0
    client_wrong: int = 0
    looser: list[tuple[diff.Case, str]] = attrs.Factory(list)
    looser_count: int = 0
    looser_by_message: collections.Counter[str] = attrs.Factory(collections.Counter)
    stricter: collections.Counter[str] = attrs.Factory(collections.Counter)
    stricter_example: dict[str, str] = attrs.Factory(dict)

    def add(self, case: diff.Case, theirs: diff.Verdict, ours: diff.Verdict) -> None:
        self.rejects += not ours.accepted
        if theirs.accepted == ours.accepted:
            self.both_accept += theirs.accepted
            self.both_reject += not theirs.accepted
        elif ours.accepted and client_wrong(case):
            self.client_wrong += 1
        elif ours.accepted:
            self.looser_count += 1
            self.looser_by_message[re.sub(r"'[^']*'", "'…'", theirs.message)[:80]] += 1
            if len(self.looser) < EXAMPLES:
                self.looser.append((case, theirs.message))
        else:
            rule = str(ours.rule)
            self.stricter[rule] += 1
            self.stricter_example.setdefault(rule, f"stream {case.index}: {ours.message}")


@attrs.define
class Tally:
    """What the differential found: counts, coverage and a few examples of each kind."""

    streams: int = 0
    mutated: int = 0
    client_rejects: int = 0
    sides: dict[str, Side] = attrs.Factory(lambda: {judge: Side() for judge in JUDGES})
    inside: set[tuple[str, str, str]] = attrs.Factory(set)
    mutations: set[str] = attrs.Factory(set)
    sample: list[tuple[diff.Case, diff.Verdict]] = attrs.Factory(list)
    """Streams for the command's own run (from the first batch), with the in-process verdict."""

    def add(self, cases: list[diff.Case]) -> None:
        client = diff.client_verdicts(cases)
        verdicts = {
            "session": [diff.session_verdict(c.events) for c in cases],
            "writer": diff.writer_verdicts(cases),
            "check": [diff.check_verdict(c.events) for c in cases],
        }
        for i, case in enumerate(cases):
            self.streams += 1
            self.mutated += bool(case.mutation)
            self.client_rejects += not client[i].accepted
            self.inside.update(case.inside)
            self.mutations.add(case.mutation)
            for judge in JUDGES:
                self.sides[judge].add(case, client[i], verdicts[judge][i])
        if not self.sample:
            rejected = [i for i, v in enumerate(verdicts["check"]) if not v.accepted]
            accepted = [i for i, v in enumerate(verdicts["check"]) if v.accepted]
            chosen = rejected[: SAMPLE // 2] + accepted[: SAMPLE - min(len(rejected), SAMPLE // 2)]
            self.sample = [(cases[i], verdicts["check"][i]) for i in chosen]

    def counts(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seed": SEED,
            "streams": self.streams,
            "mutated": self.mutated,
            "rejected by client": self.client_rejects,
        }
        for judge, side in self.sides.items():
            out[f"rejected by {judge}"] = side.rejects
            out[f"{judge}: both reject"] = side.both_reject
            out[f"{judge}: both accept"] = side.both_accept
            out[f"{judge}: client wrong"] = side.client_wrong
            out[f"{judge}: looser"] = side.looser_count
            out[f"{judge}: stricter by rule"] = dict(sorted(side.stricter.items()))
        return out


CLIENT_WRONG: Final[dict[str, Callable[[diff.Case], bool]]] = {}
"""The streams the specification says the client is wrong to reject, by the quoted sentence
that says so (each also a section of ``docs/divergences-client.md``, and a catalogue warning
``aguikit check`` gives on them): none is known."""


def client_wrong(case: diff.Case) -> bool:
    """Whether the specification says the client is wrong to reject ``case``."""
    return any(applies(case) for applies in CLIENT_WRONG.values())


@pytest.fixture(scope="module")
def tally() -> Tally:
    result = Tally()
    for start in range(0, STREAMS, BATCH):
        result.add([diff.stream(SEED, i) for i in range(start, min(start + BATCH, STREAMS))])
    counts = result.counts()
    print("\ndifferential against @ag-ui/client 1.0.0:", json.dumps(counts, indent=1))
    report = os.environ.get("AGUIKIT_DIFF_REPORT")
    if report:
        Path(report).write_text(json.dumps(counts, indent=1) + "\n", encoding="utf-8")
    return result


@pytest.mark.parametrize("judge", JUDGES)
def test_strict_is_never_looser_than_the_official_client(tally: Tally, judge: str) -> None:
    side = tally.sides[judge]
    shown = []
    for case, message in side.looser:
        shown.append(
            f"stream {case.index} (seed {SEED}, mutation {case.mutation or 'none'}): the client "
            f"says {message!r}; the {judge} accepts it"
        )
        shown.extend(f"    {json.dumps(e)}" for e in case.events)
    assert not side.looser_count, (
        f"{side.looser_count} of {tally.streams} streams the official client rejects are "
        f"accepted by the {judge}: {dict(side.looser_by_message)}\n" + "\n".join(shown)
    )


def _justified_rules() -> dict[str, str]:
    """The rules ``docs/divergences-client.md`` justifies, each with its table row."""
    text = DOC.read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `(AGUI-[A-Z]\d{3})` \|(.*)$", text, flags=re.M))


@pytest.mark.parametrize("judge", JUDGES)
def test_every_stricter_verdict_is_a_rule_the_specification_justifies(
    tally: Tally, judge: str
) -> None:
    side = tally.sides[judge]
    justified = _justified_rules()
    unexplained = {rule: n for rule, n in side.stricter.items() if rule not in justified}
    assert not unexplained, (
        f"the {judge} rejects streams the official client accepts under rules "
        f"docs/divergences-client.md does not justify: {unexplained}; e.g. "
        + "; ".join(f"{rule}: {side.stricter_example[rule]}" for rule in unexplained)
    )


def test_the_table_names_each_rule_with_a_quoted_sentence() -> None:
    justified = _justified_rules()
    assert justified, "docs/divergences-client.md has no table of rules"
    for rule, row in justified.items():
        assert re.search(r"\"[^\"]+\"", row), f"{rule}: the row quotes no sentence"


def test_the_generator_puts_every_standalone_event_in_every_open_chunk_family_and_lane(
    tally: Tally,
) -> None:
    seen = tally.inside
    missing = []
    for kind in diff.STANDALONE:
        for family in diff.FAMILIES:
            for lane in ("parent", "subagent"):
                wanted = {f"{lane}/same-lane"}
                if kind in ("MESSAGES_SNAPSHOT",) or kind.startswith("SUBAGENT_"):
                    wanted.add(f"{lane}/other-lane")  # every lane / a subagent's own lane
                if not any((kind, family, where) in seen for where in wanted):
                    missing.append(f"{kind} in a {family} chunk stream of the {lane} lane")
    assert not missing, missing


def test_the_streams_mix_valid_and_invalid_roughly_evenly(tally: Tally) -> None:
    share = tally.client_rejects / tally.streams
    assert 0.3 <= share <= 0.7, f"the official client rejects {share:.0%} of the streams"
    assert tally.mutations >= set(diff.MUTATIONS)


def test_the_check_command_says_what_its_in_process_pass_says(tally: Tally, tmp_path: Path) -> None:
    """``aguikit check --strict`` itself, on a sample: the same exit and rules per stream."""
    paths = [
        str(write_jsonl(tmp_path / f"stream-{case.index}.jsonl", case.events))
        for case, _ in tally.sample
    ]
    done = subprocess.run(
        [sys.executable, "-m", "aguikit", "check", "--strict", "--format", "json", *paths],
        cwd=tmp_path,  # no [tool.aguikit.check] of the repository's
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    rejected = sum(not verdict.accepted for _, verdict in tally.sample)
    assert SAMPLE == len(tally.sample) and 0 < rejected < SAMPLE
    assert 1 == done.returncode, done.stderr
    by_source = {Path(source["source"]).name: source for source in report["sources"]}
    for case, verdict in tally.sample:
        source = by_source[f"stream-{case.index}.jsonl"]
        in_process = set(diff.check_rules(case.events))
        command = {p["rule"] for p in source["problems"] if p["severity"] in ("warning", "error")}
        assert (source["exit"] != 0, sorted(command)) == (
            not verdict.accepted,
            sorted(in_process),
        ), f"stream {case.index}"


def _verdicts(events: list[dict[str, Any]]) -> dict[str, diff.Verdict]:
    """Each aguikit judge's verdict on one stream."""
    return {
        "session": diff.session_verdict(events),
        "writer": diff.writer_verdicts([diff.Case(0, events)])[0],
        "check": diff.check_verdict(events),
    }


ISSUE_STREAM: Final = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "Hello"},
    {"type": "STATE_SNAPSHOT", "snapshot": {}},
    {"type": "TEXT_MESSAGE_CHUNK", "delta": ", world"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]
"""Issue 23's stream: a state event closes the chunk stream, so the id-less chunk after it
is a first chunk without its messageId (basic/patterns/streaming.mdx)."""


def test_the_issues_stream_is_rejected_by_the_client_and_by_every_judge() -> None:
    case = diff.Case(0, [dict(e) for e in ISSUE_STREAM])
    (client,) = diff.client_verdicts([case])
    verdicts = _verdicts(case.events)

    assert "First TEXT_MESSAGE_CHUNK must have a messageId" == client.message
    assert dict.fromkeys(JUDGES, (False, 4)) == {
        judge: (v.accepted, v.event) for judge, v in verdicts.items()
    }, verdicts


_RS: Final = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
_RF: Final = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}


def _start_across_lanes(chunk: dict[str, Any], start: dict[str, Any]) -> list[dict[str, Any]]:
    """A chunk stream in subagent ``s1``'s lane, then an untagged explicit start and end
    carrying its id."""
    member = "toolCallId" if "toolCallId" in start else "messageId"
    end = {"type": start["type"].replace("_START", "_END"), member: start[member]}
    return [_RS, {**chunk, "subagentRunId": "s1"}, start, end, _RF]


CROSS_LANE: Final = {
    "tool-start": _start_across_lanes(
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
    ),
    "text-start": _start_across_lanes(
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
    ),
    "reasoning-start": _start_across_lanes(
        {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "a"},
        {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"},
    ),
    "tool-result": [
        _RS,
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "subagentRunId": "s1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "tm1", "toolCallId": "c1", "content": "ok"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{}"},
        {"type": "CUSTOM", "name": "note", "value": 1, "subagentRunId": "s1"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "delta": " "},
        _RF,
    ],
}
"""The looser streams the 100,000-stream run found, minimal: a chunk stream of a subagent's
lane met by an untagged explicit event carrying its id (docs/divergences-client.md, "Open")."""


def test_the_client_rejects_each_cross_lane_stream() -> None:
    cases = [diff.Case(i, list(events)) for i, events in enumerate(CROSS_LANE.values())]
    messages = [verdict.message for verdict in diff.client_verdicts(cases)]

    assert [
        "Cannot send 'TOOL_CALL_START' event: A tool call with ID 'c1' is already in progress.",
        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID 'm1' is already in "
        "progress.",
        "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID 'r1' is already "
        "in progress.",
        "First TOOL_CALL_CHUNK must have a toolCallName",
    ] == [message.split(" Complete")[0] for message in messages]


@pytest.mark.parametrize("name", list(CROSS_LANE))
def test_a_cross_lane_explicit_event_is_rejected_as_the_client_rejects_it(name: str) -> None:
    verdicts = _verdicts(CROSS_LANE[name])

    assert dict.fromkeys(JUDGES, False) == {j: v.accepted for j, v in verdicts.items()}
