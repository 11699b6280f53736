"""
Golden behaviour record: what aguikit does with every stream we have, pinned by hash.

Why this exists: the package is about to be rebuilt (the "renovation"), and the promise that
goes with it is that behaviour on the official conformance corpus and on every recorded
stream is identical before and after.  The other tests assert what a fixture *requires*;
this one pins everything a consumer can *observe*, required or not: each delivered event,
each change, each warning with its wording, the exact error and where it was raised, the
final messages, state, interrupts and subagents, and what ``aguikit check`` and
``aguikit replay`` print.  A refactor that keeps all of that is invisible to users; one
that does not fails here, stream by stream.

The streams, each under a stable id:

* ``draft/…``, ``1.0/…``, ``1.1/…``: every stream of the official conformance corpus
  (:mod:`tests.corpus`; the corpus is not vendored, so those cases skip when it is absent);
* ``demo``: the bundled ``aguikit/examples/demo.sse``;
* ``hostile/NNN``: a mutation of a corpus stream or of the demo, seeded with ``NNN`` through
  :mod:`tests.hostile` (events dropped, duplicated, swapped, truncated, fields retyped or
  removed, unknown members and event types, patches that do not apply).  Every fifth one is
  built from the demo, so some hostile cases run even without the corpus.

Streams of the ``1.1`` corpus (and their hostile mutations) are also consumed by a session
speaking ``protocol_version="1.1"``.

``tests/golden/behaviour.json`` holds, per stream id, the SHA-256 of the canonical JSON of
its behaviour record, the SHA-256 of its input events (so a changed *input*, the corpus or
``tests/hostile.py``, is told apart from changed *behaviour*) and a small summary for
humans.  It never holds event payloads: the corpus must not be copied into the repository.

**A deliberate behaviour change** regenerates the file in the same commit, and the commit
message says why::

    AGUIKIT_UPDATE_GOLDEN=1 pytest tests/test_behaviour_golden.py

**Seeing what changed.**  On a mismatch the full current record is written to a file named in
the failure.  To get the recorded one, check out the commit that last wrote the golden file
(``git worktree add``) and run this test there with ``AGUIKIT_GOLDEN_DUMP=<dir>``, which
writes every record to ``<dir>``; then diff the two.

The records are independent of hash seeds, dict and set order, object ids, time and the
temporary directory (checked by running under two ``PYTHONHASHSEED`` values).  They do
depend on the wording of third-party messages (jsonschema's, for instance), so a dependency
upgrade that rewords one is a behaviour change as well, and is regenerated as one.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import io
import json
import logging
import os
import random
import re
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
from tests import corpus, hostile

from aguikit import AguiError, ProtocolError, Session, to_wire
from aguikit.changes import Record
from aguikit.cli import main as cli_main
from aguikit.transport.sse import iter_events

GOLDEN: Final = Path(__file__).resolve().parent / "golden" / "behaviour.json"
UPDATE: Final = os.environ.get("AGUIKIT_UPDATE_GOLDEN") == "1"
DUMP: Final = os.environ.get("AGUIKIT_GOLDEN_DUMP")

DEMO_ID: Final = "demo"
HOSTILE_COUNT: Final = 300
DEMO_EVERY: Final = 5
"""Every fifth hostile stream mutates the demo, the others a corpus stream."""

VARIANTS_1_0: Final[dict[str, dict[str, Any]]] = {"default": {}}
VARIANTS_1_1: Final[dict[str, dict[str, Any]]] = {
    "default": {},
    "protocol_version=1.1": {"protocol_version": "1.1"},
}
# No corpus stream is consumed with ``thread_id``: tests/test_session_conformance.py builds
# its sessions with ``protocol_version`` alone (and no fixture's ``input`` has a threadId).


@attrs.frozen
class Case:
    """One stream to replay, and the session configurations it is replayed under."""

    id: str
    events: list[Any]
    variants: dict[str, dict[str, Any]]
    base: str
    """The stream a hostile case was mutated from (its own id otherwise)."""


# ---- the recorders: the only code that touches aguikit's API -----------------------------


def _plain(obj: Any) -> dict[str, Any]:
    """
    The fields of a flat record (an attrs class, or a per-event ``Record``), enums as their
    string values.

    Shallow on purpose: a subagent's ``result`` is hostile JSON that may nest thousands of
    levels, and ``attrs.asdict`` would recurse into it; the canonical encoder does not.
    """
    fields = obj.as_dict() if isinstance(obj, Record) else attrs.asdict(obj, recurse=False)
    return {
        key: value.value if isinstance(value, enum.Enum) else value for key, value in fields.items()
    }


def _warnings(warnings: list[Any]) -> list[dict[str, Any]]:
    return [{"code": w.code, "message": w.message, "event_index": w.event_index} for w in warnings]


def _error(exc: AguiError) -> dict[str, Any]:
    return {
        "class": type(exc).__name__,
        # Since the renovation every error carries its catalogue id; the record keeps the
        # ids it pinned before (protocol rules), the rest are pinned by test_catalogue.py.
        "rule": exc.rule if isinstance(exc, ProtocolError) else None,
        "event_index": exc.event_index,
        "message": str(exc),
    }


def record_session(events: list[Any], **session_kwargs: Any) -> dict[str, Any]:
    """
    Everything a consumer of :class:`aguikit.Session` observes while ``events`` are fed.

    The record was first written before the renovation, when ``feed`` returned bare
    changes and the events came from ``last_delivered``; since then ``feed`` returns one
    :class:`~aguikit.Update` per delivered event, and the same ``{"event", "change"}``
    pairs are read straight from it.  Unchanged behaviour gives a byte-identical record.
    """
    session = Session(**session_kwargs)

    def step(call: Callable[[], list[Any]]) -> dict[str, Any]:
        try:
            updates = call()
        except AguiError as exc:
            return {"error": _error(exc), "warnings": _warnings(session.last_warnings)}
        return {
            "delivered": [
                {"event": to_wire(update.event), "change": _plain(update.change)}
                for update in updates
            ],
            "warnings": _warnings(session.last_warnings),
        }

    feeds: list[dict[str, Any]] = []
    finish: dict[str, Any] | None = None
    for event in events:
        feeds.append(step(functools.partial(session.feed, event)))
        if "error" in feeds[-1]:
            break  # the session would re-raise the same error on every later call
    else:
        finish = step(session.finish)
    return {
        "feeds": feeds,
        "finish": finish,
        "messages": [to_wire(message) for message in session.messages],
        "state": session.state,
        "interrupts": [to_wire(interrupt) for interrupt in session.interrupts],
        "subagents": [_plain(subagent) for subagent in session.subagents],
        "thread_id": session.thread_id,
        "run_id": session.run_id,
        "warning_count": session.warning_count,
    }


PROBLEM_KEYS: Final = (
    "rule",
    "severity",
    "kind",
    "code",
    "message",
    "event",
    "event_type",
    "pointer",
    "line",
    "consequence_of",
    "count",
)
"""The problem keys recorded; keys the report gains later are not a change (absent = null)."""

_PLACEHOLDER: Final = "<stream.jsonl>"


def _run_cli(argv: list[str], path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()  # not terminals: no colour, no progress line
    logger = logging.getLogger("aguikit")
    handlers = list(logger.handlers)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main(argv)
    finally:
        # main() adds a NullHandler to the "aguikit" logger on every call; hundreds of
        # in-process calls would pile them up for the rest of the test session.
        logger.handlers[:] = handlers
    # The temporary path is the only thing that differs between runs; messages quoting the
    # source (a decode error's location) get a fixed name instead.
    return code, out.getvalue().replace(str(path), _PLACEHOLDER)


def record_cli(events: list[Any]) -> dict[str, Any] | None:
    """
    What ``aguikit check --format json`` and ``aguikit replay`` make of ``events`` written
    as a JSONL file; ``None`` when an event has no JSON text (NaN, nesting too deep for the
    encoder), since no file can hold such a stream.

    ADAPT HERE AFTER THE RENOVATION (and only here, for the CLI side) if the command line
    or its JSON report changes shape.
    """
    try:
        # The standard library writes the file, not aguikit, so the input cannot change
        # with the code under test.  ASCII-only: a lone surrogate travels as its escape.
        lines = [json.dumps(event, ensure_ascii=True, allow_nan=False) + "\n" for event in events]
    except (TypeError, ValueError, RecursionError):
        return None
    with tempfile.TemporaryDirectory(prefix="aguikit-golden-") as tmp:
        path = Path(tmp) / "stream.jsonl"
        path.write_text("".join(lines), encoding="ascii")
        check_code, check_out = _run_cli(["check", str(path), "--format", "json"], path)
        replay_code, replay_out = _run_cli(["replay", str(path)], path)
    (report,) = json.loads(check_out)["sources"]  # report schema version 1
    return {
        "check": {
            "exit": check_code,
            "ok": report["ok"],
            "events": report["events"],
            # Zero counts are left out, so a new kind of problem with no instances here
            # is not a change.
            "counts": {kind: n for kind, n in report["counts"].items() if n},
            "stopped_at": report["stopped_at"],
            "runs": report["runs"],
            "problems": [{k: p.get(k) for k in PROBLEM_KEYS} for p in report["problems"]],
        },
        "replay": {"exit": replay_code, "stdout": replay_out},
    }


def record(case: Case) -> dict[str, Any]:
    """The behaviour record of one stream: each session variant, then the CLI."""
    return {
        "sessions": {
            name: record_session(hostile.clone(case.events), **kwargs)
            for name, kwargs in case.variants.items()
        },
        "cli": record_cli(case.events),
    }


# ---- canonical form, hashes, summaries --------------------------------------------------


class _Token(str):
    """Literal output on :func:`canonical_json`'s work stack, told apart from a string."""


def _scalar(value: Any) -> str:
    if isinstance(value, str) or value is None or isinstance(value, (bool, int)):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, float) and value == value and value not in (float("inf"), -float("inf")):
        return json.dumps(value)
    return json.dumps(repr(value), ensure_ascii=True)  # NaN, infinities, anything not JSON


def canonical_json(value: Any) -> str:
    """
    ``json.dumps(value, sort_keys=True, ensure_ascii=True, default=repr)``, computed without
    recursion (hostile states nest 3000 levels deep) and with ``NaN`` and the infinities
    written as the strings ``"nan"``, ``"inf"``, ``"-inf"`` so the text is always JSON.
    Tuples are lists; non-string keys are written as their ``repr``.
    """
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Token:
            out.append(item)
        elif isinstance(item, dict):
            pairs = sorted(
                ((k if isinstance(k, str) else repr(k), v) for k, v in item.items()),
                key=lambda pair: pair[0],
            )
            parts: list[Any] = [_Token("{")]
            for n, (key, child) in enumerate(pairs):
                parts += [_Token((", " if n else "") + json.dumps(key) + ": "), child]
            stack.extend(reversed([*parts, _Token("}")]))
        elif isinstance(item, (list, tuple)):
            parts = [_Token("[")]
            for n, child in enumerate(item):
                parts += [_Token(", "), child] if n else [child]
            stack.extend(reversed([*parts, _Token("]")]))
        else:
            out.append(_scalar(item))
    return "".join(out)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _error_summary(variant: dict[str, Any]) -> dict[str, Any] | None:
    steps = [*variant["feeds"], variant["finish"] or {}]
    for step in steps:
        if "error" in step:
            error = step["error"]
            return {k: error[k] for k in ("class", "rule", "event_index")}
    return None


def summarise(case: Case, rec: dict[str, Any]) -> dict[str, Any]:
    """A few numbers per stream for a human reading a failure: never event payloads."""
    summary: dict[str, Any] = {}
    if case.base != case.id:
        summary["base"] = case.base
    for name, variant in rec["sessions"].items():
        steps = [*variant["feeds"], variant["finish"] or {}]
        summary[name] = {
            "fed": len(variant["feeds"]),
            "error": _error_summary(variant),
            "messages": len(variant["messages"]),
            "warnings": sorted({w["code"] for step in steps for w in step.get("warnings", [])}),
        }
    cli = rec["cli"]
    summary["cli_exit"] = None if cli is None else [cli["check"]["exit"], cli["replay"]["exit"]]
    return summary


def entry(case: Case) -> tuple[dict[str, Any], dict[str, Any]]:
    """The golden entry for ``case``, and the full record it was computed from."""
    rec = record(case)
    return {
        "sha256": sha256(canonical_json(rec)),
        "input_sha256": sha256(canonical_json(case.events)),
        "summary": summarise(case, rec),
    }, rec


# ---- the streams ------------------------------------------------------------------------


def demo_events() -> list[Any]:
    data = resources.files("aguikit").joinpath("examples/demo.sse").read_bytes()
    return list(iter_events([data], source="demo.sse"))


def _mutate_events(events: list[Any], rng: random.Random) -> list[Any]:
    """One to three events each corrupted in place (a field removed, retyped, renamed...)."""
    out: list[Any] = hostile.clone(events)
    for _ in range(rng.randint(1, 3)):
        if out:
            i = rng.randrange(len(out))
            if isinstance(out[i], dict):
                out[i] = hostile.mutate_event(out[i], rng)
    return out


def _bad_patches(events: list[Any], rng: random.Random) -> list[Any]:
    """One to three ``STATE_DELTA``/``ACTIVITY_DELTA`` events that do not apply, mid-run."""
    out: list[Any] = hostile.clone(events)
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.6:
            patch: Any = {"type": "STATE_DELTA", "delta": hostile.hostile_patch(rng)}
        else:
            patch = hostile.clone(rng.choice(hostile.HOSTILE_PATCH_EVENTS))
        out.insert(rng.randrange(1, len(out)) if len(out) > 1 else len(out), patch)
    return out


UNKNOWN_TYPES: Final = ("FUTURE_EVENT", "TEXT_MESSAGE_STAR", "runStarted", "VENDOR_TRACE")
UNKNOWN_MEMBERS: Final = ("futureProp", "x-vendor", "", "__proto__", "rawEvent2")


def _unknowns(events: list[Any], rng: random.Random) -> list[Any]:
    """Undeclared members added to events, and events of types no version declares."""
    out: list[Any] = hostile.clone(events)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(out) + 1)
        if rng.random() < 0.5 and i < len(out) and isinstance(out[i], dict):
            value = hostile.hostile_value(rng) if rng.random() < 0.3 else {"v": 1}
            out[i][rng.choice(UNKNOWN_MEMBERS)] = value
        else:
            out.insert(i, {"type": rng.choice(UNKNOWN_TYPES), "payload": {"n": rng.randint(0, 9)}})
    return out


MUTATORS: Final[dict[str, Callable[[list[Any], random.Random], list[Any]]]] = {
    "stream": hostile.mutate_stream,  # dropped, duplicated, swapped, corrupted, truncated
    "events": _mutate_events,
    "patches": _bad_patches,
    "unknowns": _unknowns,
}
STYLES: Final = ("stream", "events", "patches", "unknowns", "stream")
"""The damage done by seed: ``(seed // 5) % 5``, so demo and corpus bases both get every style;
``stream`` twice because it is the broadest (it includes the others' kinds of damage)."""


def hostile_case(seed: int, bases: list[corpus.Stream], demo: list[Any]) -> Case | None:
    """``hostile/NNN``: the seed picks the base stream and the style of damage."""
    rng = random.Random(seed)
    if seed % DEMO_EVERY == 0:
        base_id, base, variants = DEMO_ID, demo, VARIANTS_1_0
    elif not bases:
        return None  # corpus absent: this case cannot be built
    else:
        stream = bases[rng.randrange(len(bases))]
        base_id, base = stream.id, stream.events
        variants = VARIANTS_1_1 if stream.corpus == "1.1" else VARIANTS_1_0
    style = STYLES[(seed // DEMO_EVERY) % len(STYLES)]
    return Case(f"hostile/{seed:03d}", MUTATORS[style](base, rng), variants, base_id)


@functools.cache
def cases() -> dict[str, Case]:
    """Every stream that can be built here, by id (without the corpus: the demo's)."""
    streams = corpus.streams()
    demo = demo_events()
    out = {
        s.id: Case(s.id, s.events, VARIANTS_1_1 if s.corpus == "1.1" else VARIANTS_1_0, s.id)
        for s in streams
    }
    out[DEMO_ID] = Case(DEMO_ID, demo, VARIANTS_1_0, DEMO_ID)
    for seed in range(HOSTILE_COUNT):
        case = hostile_case(seed, streams, demo)
        if case is not None:
            out[case.id] = case
    return out


# ---- the golden file ---------------------------------------------------------------------


def load_golden() -> dict[str, Any]:
    if not GOLDEN.exists():
        return {}
    data: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return data


def _file_name(stream_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", stream_id) + ".json"


def dump_record(directory: Path, stream_id: str, rec: dict[str, Any]) -> Path:
    """The record, pretty-printed for diffing (on one line if it nests too deep for that)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _file_name(stream_id)
    text = canonical_json(rec)
    with contextlib.suppress(RecursionError):
        text = json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=True)
    path.write_text(text + "\n", encoding="ascii")
    return path


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            line
            for key in sorted(set(old) | set(new))
            for line in _differences(old.get(key), new.get(key), f"{where}.{key}".lstrip("."))
        ]
    return [] if old == new else [f"  {where or '(summary)'}: {old!r} -> {new!r}"]


GOLDEN_DATA: Final = load_golden()


def _params() -> list[Any]:
    if not GOLDEN_DATA:
        return [pytest.param(None, id="golden-absent")]
    return [pytest.param(stream_id, id=stream_id) for stream_id in sorted(GOLDEN_DATA)]


@pytest.mark.parametrize("stream_id", _params())
def test_every_recorded_stream_behaves_exactly_as_recorded(stream_id: str | None) -> None:
    """
    Replaying a stream gives the very record the golden file pinned: same delivered events,
    changes, warnings, errors, final view and CLI output, down to the byte.
    """
    if UPDATE:
        pytest.skip("AGUIKIT_UPDATE_GOLDEN=1: the golden file is being rewritten instead")
    if stream_id is None:
        pytest.fail(f"{GOLDEN} is missing: generate it with AGUIKIT_UPDATE_GOLDEN=1")
    case = cases().get(stream_id)
    if case is None:
        if not corpus.available():
            pytest.skip(f"conformance corpus not found at {corpus.UPSTREAM_SPEC}")
        pytest.fail(f"{stream_id} is in the golden file but no longer generated")
    expected = GOLDEN_DATA[stream_id]
    actual, rec = entry(case)
    if DUMP:
        dump_record(Path(DUMP), stream_id, rec)
    if expected["input_sha256"] != actual["input_sha256"]:
        pytest.fail(
            f"the INPUT of {stream_id} changed (the corpus, the demo, its SSE decoding or "
            "tests/hostile.py), so its behaviour cannot be compared: restore the input, or "
            "regenerate the golden file at the commit before the change",
            pytrace=False,
        )
    if expected["sha256"] != actual["sha256"]:
        path = dump_record(Path(tempfile.gettempdir()) / "aguikit-golden", stream_id, rec)
        changed = _differences(expected["summary"], actual["summary"]) or [
            "  (the summary is unchanged: the difference is in the detail)"
        ]
        pytest.fail(
            f"behaviour of {stream_id} changed: sha256 {expected['sha256'][:16]} -> "
            f"{actual['sha256'][:16]}\nsummary differences:\n" + "\n".join(changed) + "\n"
            f"full current record: {path}\n"
            "to diff it, run this test with AGUIKIT_GOLDEN_DUMP=<dir> at the commit that last "
            "wrote tests/golden/behaviour.json.  If the change is deliberate, regenerate with "
            "AGUIKIT_UPDATE_GOLDEN=1 and say why in the commit.",
            pytrace=False,
        )


def test_the_golden_file_covers_exactly_the_streams_generated() -> None:
    """
    No stream escapes the comparison: the ids built from the corpus, the demo and the
    hostile seeds are exactly the golden file's (with ``AGUIKIT_UPDATE_GOLDEN=1``, this is
    where the file is rewritten).
    """
    if not corpus.available():
        pytest.skip(f"conformance corpus not found at {corpus.UPSTREAM_SPEC}")
    generated = cases()
    if UPDATE:
        golden = {stream_id: entry(generated[stream_id])[0] for stream_id in sorted(generated)}
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(
            json.dumps(golden, indent=1, sort_keys=True, ensure_ascii=True) + "\n",
            encoding="ascii",
        )
        return
    assert sorted(GOLDEN_DATA) == sorted(generated)
