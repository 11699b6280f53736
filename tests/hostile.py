"""
A seeded mutator of hostile AG-UI input, shared by the fuzz tests.

Hypothesis is the right tool for shrinking a structured failure, but its per-example
overhead makes the hundred-thousand-input runs the hardening suite asks for take hours.
This module is the other half: a deterministic mutator (``random.Random(seed)``) over real
events and streams, fast enough to push 10⁵ inputs per entry point through in minutes.  A
failure reports its seed and input index, which reproduce it exactly.

Everything here produces *data*; the invariant checks live in the tests.
"""

from __future__ import annotations

import json
import os
import random
import reprlib
from collections.abc import Callable, Iterator
from typing import Any

from tests import corpus, support

from aguikit.models import EVENT_CLASSES

INPUTS: int = int(os.environ.get("AGUIKIT_FUZZ_INPUTS", "400"))
"""How many inputs each fuzz test drives through its entry point (``nox -s fuzz`` raises it)."""

SEED: int = int(os.environ.get("AGUIKIT_FUZZ_SEED", "20261130"))


def deep(depth: int, leaf: Any = 0, kind: str = "list") -> Any:
    """A value nested ``depth`` levels down, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


HOSTILE_SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**53,
    -(2**53),
    10**400,
    1.5,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    "\x00",
    "\ud800",
    "a\udfffb",
    "\u202e\u0301\u200d",
    "🧑‍🧑‍🧒",
    "x" * 100_000,
    "RUN_STARTED",
    "tool",
    "/",
    "~",
]


def hostile_value(rng: random.Random) -> Any:
    """One value a well-behaved producer would never send where a field is expected."""
    roll = rng.random()
    if roll < 0.55:
        return rng.choice(HOSTILE_SCALARS)
    if roll < 0.7:
        return [] if rng.random() < 0.5 else {}
    if roll < 0.8:
        return deep(rng.choice([50, 600, 3000]), kind=rng.choice(["list", "dict"]))
    if roll < 0.9:
        return [rng.choice(HOSTILE_SCALARS) for _ in range(rng.randint(1, 5))]
    return {rng.choice(["type", "role", "op", "id", "", "\x00"]): rng.choice(HOSTILE_SCALARS)}


def corpus_events() -> list[dict[str, Any]]:
    """Every event of every corpus stream, plus hand-made ones so the list is never empty."""
    events: list[dict[str, Any]] = [
        support.run_started(thread_id="t", run_id="r"),
        *support.text_message("m", "hi"),
        support.tool_call_start("c", parentMessageId="m"),
        support.tool_call_args("c", '{"a":'),
        support.tool_call_end("c"),
        support.tool_call_result("c", message_id="tm"),
        support.state_snapshot({"a": [1, 2, {"b": None}]}),
        support.state_delta([{"op": "add", "path": "/a/-", "value": 3}]),
        support.run_finished(thread_id="t", run_id="r"),
    ]
    for stream in corpus.streams():
        events.extend(e for e in stream.events if isinstance(e, dict))
    return events


def corpus_streams() -> list[list[dict[str, Any]]]:
    """Every corpus stream, plus one hand-made legal run."""
    streams = [corpus_events()[:11]]
    streams.extend(s.events for s in corpus.streams())
    return streams


def clone(value: Any) -> Any:
    """A deep copy that survives any nesting depth (``copy.deepcopy`` recurses)."""
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in items:
            if isinstance(child, (dict, list)):
                copied: Any = {} if isinstance(child, dict) else []
                stack.append((child, copied))
            else:
                copied = child
            if isinstance(target, dict):
                target[key] = copied
            else:
                target.append(copied)
    return root


def mutate_event(event: dict[str, Any], rng: random.Random) -> Any:
    """One mutation of one event: a field deleted, retyped, renamed, or the event replaced."""
    doc = clone(event)
    roll = rng.random()
    keys = list(doc)
    if roll < 0.05:
        return hostile_value(rng)
    if roll < 0.25 and keys:
        del doc[rng.choice(keys)]
    elif roll < 0.55 and keys:
        doc[rng.choice(keys)] = hostile_value(rng)
    elif roll < 0.65:
        doc["type"] = rng.choice(
            [
                "TEXT_MESSAGE_STAR",
                "runStarted",
                "",
                "FUTURE_EVENT",
                rng.choice(sorted(EVENT_CLASSES)),
                5,
                None,
            ]
        )
    elif roll < 0.75:
        doc[rng.choice(["futureProp", "", "\x00", "type\ud800", "__proto__"])] = hostile_value(rng)
    elif roll < 0.9:
        _mutate_nested(doc, rng)
    else:
        for _ in range(rng.randint(2, 4)):
            doc = mutate_event(doc, rng) if isinstance(doc, dict) else doc
    return doc


def _mutate_nested(doc: Any, rng: random.Random) -> None:
    """Replace a value somewhere below the top level (inside messages, patches, outcomes)."""
    node = doc
    for _ in range(6):
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            child = node[key]
            if not isinstance(child, (dict, list)) or not child or rng.random() < 0.3:
                node[key] = hostile_value(rng)
                return
            node = child
        elif isinstance(node, list) and node:
            index = rng.randrange(len(node))
            child = node[index]
            if not isinstance(child, (dict, list)) or not child or rng.random() < 0.3:
                node[index] = hostile_value(rng)
                return
            node = child
        else:
            return


def mutate_stream(stream: list[dict[str, Any]], rng: random.Random) -> list[Any]:
    """A stream with events dropped, duplicated, reordered, corrupted, or cut short."""
    out: list[Any] = clone(stream)
    for _ in range(rng.randint(1, 3)):
        if not out:
            break
        roll = rng.random()
        i = rng.randrange(len(out))
        if roll < 0.2:
            del out[i]
        elif roll < 0.4:
            out.insert(i, clone(out[i]))
        elif roll < 0.55:
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        elif roll < 0.75 and isinstance(out[i], dict):
            out[i] = mutate_event(out[i], rng)
        elif roll < 0.85:
            out = out[: rng.randrange(len(out) + 1)]
        else:
            out.insert(i, rng.choice(HOSTILE_PATCH_EVENTS))
    return out


HOSTILE_PATCH_EVENTS: list[dict[str, Any]] = [
    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/missing/parent/x", "value": 1}]},
    {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/~2bad", "value": 1}]},
    {"type": "STATE_DELTA", "delta": [{"op": "move", "from": "/a", "path": "/a/b"}]},
    {
        "type": "STATE_DELTA",
        "delta": [
            {"op": "add", "path": "/z", "value": 1},
            {"op": "test", "path": "/z", "value": 2},
            {"op": "add", "path": "/y", "value": 1},
        ],
    },
    {"type": "STATE_DELTA", "delta": [{"op": "increment", "path": "/a", "value": 1}]},
    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a/99999999999", "value": 1}]},
    {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": ""}]},
    {"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/nope", "path": "/x"}]},
    {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a/-", "value": deep(2000)}]},
    {
        "type": "ACTIVITY_DELTA",
        "messageId": "act",
        "activityType": "x",
        "patch": [{"op": "replace", "path": "", "value": [1]}],
    },
    {"type": "STATE_SNAPSHOT", "snapshot": None},
    {"type": "STATE_SNAPSHOT", "snapshot": deep(3000, kind="dict")},
]


def hostile_patch(rng: random.Random) -> list[Any]:
    """An RFC 6902 patch built to fail in one of the ways appliers get wrong."""
    ops: list[Any] = []
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["add", "remove", "replace", "move", "copy", "test", "increment", 7])
        path = rng.choice(
            ["", "/", "/a", "/a/b", "/a/0", "/a/-", "/~0", "/~1", "/~2", "/a/b/c/d", "a", "/a/01"]
        )
        item: dict[str, Any] = {"op": op, "path": path}
        if rng.random() < 0.8:
            item["value"] = rng.choice([1, None, {"b": 1}, [1, 2], "x", deep(100)])
        if op in ("move", "copy") and rng.random() < 0.8:
            item["from"] = rng.choice(["/a", "/a/b", "", "/missing"])
        ops.append(item if rng.random() < 0.95 else hostile_value(rng))
    return ops


def sse_bytes(events: list[Any]) -> bytes:
    """Events framed as SSE, the way a producer writes them."""
    return b"".join(
        b"data: " + json.dumps(e, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n\n"
        for e in events
    )


def serialisable(events: list[Any]) -> list[Any]:
    """The events ``json.dumps`` can write (NaN and infinities included), the rest dropped."""
    out = []
    for event in events:
        try:
            json.dumps(event, allow_nan=True)
        except (ValueError, RecursionError, TypeError):
            continue
        out.append(event)
    return out


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """Byte-level damage: flipped bytes, CR-only line ends, cut frames, invalid UTF-8, floods."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        pos = rng.randrange(len(buf) + 1)
        if roll < 0.2 and buf:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif roll < 0.3:
            buf = bytearray(bytes(buf).replace(b"\n", b"\r"))
        elif roll < 0.4:
            buf = buf[:pos]
        elif roll < 0.55:
            buf[pos:pos] = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf"])
        elif roll < 0.65:
            buf[pos:pos] = b"data: " + b"x" * rng.choice([10, 70_000]) + b"\n"
        elif roll < 0.75:
            noise = [b":\n", b"\n\n\n", b"retry: x\n", b"id: \x00\n", b"event:\n"]
            buf[pos:pos] = rng.choice(noise)
        elif roll < 0.85:
            buf[pos:pos] = b"data: " + b"[" * 5000 + b"\n\n"
        else:
            buf[pos:pos] = b"data: {}\n\ndata: null\n\ndata: 5\n\n"
    return bytes(buf)


def random_splits(data: bytes, rng: random.Random) -> Iterator[bytes]:
    """``data`` cut into chunks at random byte positions (inside characters too)."""
    i = 0
    while i < len(data):
        step = rng.choice([1, 2, 3, 7, 64, 4096])
        yield data[i : i + step]
        i += step


def drive(
    entry: Callable[[Any], Any],
    inputs: Callable[[random.Random], Any],
    check: Callable[[Any, BaseException | None], None],
    *,
    count: int = INPUTS,
    seed: int = SEED,
) -> int:
    """
    Feed ``count`` generated inputs to ``entry``; ``check`` judges each outcome.  Failures
    re-raise with the seed and index that reproduce them.
    """
    rng = random.Random(seed)
    for index in range(count):
        value = inputs(rng)
        try:
            result: Any = entry(value)
            error: BaseException | None = None
        except Exception as exc:
            result, error = None, exc
        try:
            check(result, error)
        except AssertionError as failure:
            raise AssertionError(
                f"input {index} (seed {seed}) broke the invariant: {failure}\n"
                f"input: {_preview(value)}"
            ) from error
    return count


def _preview(value: Any) -> str:
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 6, 200, 200
    return short.repr(value)


# ---- judging outcomes (added for the stream, transport and CLI fuzz suites) --------------


class _Close(str):
    """A closing token on :func:`canonical`'s work stack, told apart from a string value."""


def canonical(value: Any) -> str:
    """
    A deterministic text of a JSON-like value, computed without recursion.

    Two values give the same text exactly when they are equal as JSON documents with types
    kept apart (``1``, ``1.0`` and ``True`` differ; ``NaN`` equals itself), so a state nested
    3000 levels down can be compared before and after an event without ``==`` recursing.
    """
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Close):
            out.append(str(item))
        elif isinstance(item, dict):
            out.append("{")
            stack.append(_Close("}"))
            for key in sorted(item, key=repr, reverse=True):
                stack.append(item[key])
                stack.append(_Close(repr(key) + ":"))
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append(_Close("]"))
            stack.extend(reversed(item))
        else:
            out.append(f"{type(item).__name__}:{item!r},")
    return "".join(out)


def view(consumer: Any) -> str:
    """What a UI reads from a session or applier (every message on the wire, the state)."""
    from aguikit.wire import to_wire

    return canonical([[to_wire(m) for m in consumer.messages], consumer.state])


def assert_located(error: BaseException) -> None:
    """The invariant every failure obeys: an :class:`AguiError` that says where it happened."""
    from aguikit import AguiError, SchemaValidationError

    assert isinstance(error, AguiError), f"{type(error).__name__} escaped: {_preview(error)}"
    if isinstance(error, SchemaValidationError):
        assert error.issues, f"schema error without issues: {error!r}"
        assert all(i.pointer == "" or i.pointer.startswith("/") for i in error.issues)
    else:
        assert error.location, f"{type(error).__name__} without a location: {error!r}"


def no_escape(_: Any, error: BaseException | None) -> None:
    """A :func:`drive` check for entries that judge their own invariants and raise on breach."""
    if error is not None:
        raise AssertionError(f"{type(error).__name__}: {_preview(str(error))}")
