"""
Hostile documents against the schema and wire entry points.

The invariant on every input: the call either succeeds or raises an :class:`AguiError` that
says where the problem is; nothing else escapes (no ``KeyError`` from cattrs, no
``RecursionError`` from a document nested thousands of levels down, no jsonschema internals).
Where a call succeeds, its result must also be right: what validates strictly round-trips
exactly, and the fast verdict agrees with the full explanation.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from tests import hostile

from aguikit import (
    AguiError,
    SchemaValidationError,
    is_valid,
    iter_schema_errors,
    loads_event,
    parse_event,
    parse_message,
    to_wire,
    validate_event,
)

pytestmark = pytest.mark.fuzz

EVENTS = hostile.corpus_events()
MESSAGES: list[dict[str, Any]] = [
    m
    for e in EVENTS
    if e.get("type") == "MESSAGES_SNAPSHOT" and isinstance(e.get("messages"), list)
    for m in e["messages"]
] or [{"id": "u", "role": "user", "content": "hi"}]


def mutated_event(rng: random.Random) -> Any:
    return hostile.mutate_event(rng.choice(EVENTS), rng)


def only_located_agui_errors(_: Any, error: BaseException | None) -> None:
    if error is None:
        return
    assert isinstance(error, AguiError), f"{type(error).__name__} escaped: {error}"
    assert error.location or isinstance(error, SchemaValidationError), f"no location: {error!r}"
    if isinstance(error, SchemaValidationError):
        assert error.issues, "a schema error must carry at least one issue"
        assert all(i.pointer == "" or i.pointer.startswith("/") for i in error.issues)


def test_validate_event_raises_only_located_schema_errors() -> None:
    """Every hostile document is judged valid or rejected with located issues."""
    hostile.drive(validate_event, mutated_event, only_located_agui_errors)


def test_parse_event_raises_only_aguikit_errors_and_round_trips_what_it_accepts() -> None:
    """A hostile document is parsed or rejected; one that is strictly valid round-trips."""

    def entry(doc: Any) -> tuple[Any, Any]:
        return doc, parse_event(doc)

    def check(result: Any, error: BaseException | None) -> None:
        only_located_agui_errors(result, error)
        if error is None:
            doc, event = result
            if is_valid(doc):
                assert doc == to_wire(event)

    hostile.drive(entry, mutated_event, check)


def test_the_fast_verdict_agrees_with_the_explanation() -> None:
    """``is_valid`` (jsonschema-rs) and ``iter_schema_errors`` (jsonschema) never disagree."""

    def entry(doc: Any) -> tuple[bool, bool]:
        return is_valid(doc), next(iter_schema_errors(doc), None) is None

    def check(result: Any, error: BaseException | None) -> None:
        assert error is None, f"{type(error).__name__}: {error}"
        fast, explained = result
        assert fast == explained

    hostile.drive(entry, mutated_event, check)


def test_parse_message_raises_only_aguikit_errors() -> None:
    """Hostile messages are parsed or rejected with a located error."""
    hostile.drive(
        parse_message,
        lambda rng: hostile.mutate_event(rng.choice(MESSAGES), rng),
        only_located_agui_errors,
    )


def test_loads_event_raises_only_aguikit_errors_on_hostile_text() -> None:
    """Text that is damaged JSON, bad UTF-8 or absurdly nested is rejected with a typed error."""

    def text(rng: random.Random) -> bytes:
        doc = mutated_event(rng)
        try:
            raw = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):
            raw = b"[" * 10_000
        return hostile.mutate_bytes(raw, rng) if rng.random() < 0.5 else raw

    hostile.drive(loads_event, text, only_located_agui_errors)
