"""
aguikit's schema against the official draft schema (``spec/draft/schema.json`` of the
reference checkout): for every definition both have, the two must accept and reject the
same documents, except where a difference is declared below with its reason.

The documents: every event of the conformance streams (checked against the definition its
``type`` selects), hypothesis-generated documents of every shared definition, and
single-place mutations of those (a member deleted, retyped, re-discriminated, or an
undeclared member added).  The declared differences are also checked the other way round:
they must be the only definitions whose schema text differs, and each must actually show up
as a different verdict, so the table can neither hide a new difference nor go stale.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import corpus, strategies

from aguikit._generated import models
from aguikit._generated.registry import EVENT_CLASSES, MESSAGE_CLASSES
from aguikit.validate import load_schema
from aguikit.wire import to_wire

if not corpus.DRAFT_SCHEMA.is_file():
    pytest.skip(
        f"official draft schema not found at {corpus.DRAFT_SCHEMA}", allow_module_level=True
    )

DRAFT: dict[str, Any] = json.loads(corpus.DRAFT_SCHEMA.read_text(encoding="utf-8"))
OURS: dict[str, Any] = load_schema()
SHARED = sorted(set(DRAFT["$defs"]) & set(OURS["$defs"]))


def _dicts(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _dicts(value)
    elif isinstance(node, list):
        for item in node:
            yield from _dicts(item)


@attrs.frozen
class Difference:
    """A declared, intended difference between aguikit's schema and the official draft."""

    name: str
    reason: str
    definitions: frozenset[str]
    """Definitions whose schema text differs (or that only aguikit has) because of it."""
    uses: Callable[[Any], bool]
    """Whether a document uses the feature, so aguikit may accept what the draft rejects."""
    narrows_open: frozenset[str] = frozenset()
    """Open mixins on which aguikit declares the feature's member and the draft does not: there
    the draft takes any value for it, so aguikit may reject a mistyped one the draft accepts."""


KNOWN_DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        name="file-source",
        reason="AG-UI 1.0 added FileSource (a provider file handle) as a third PartSource; "
        "the draft predates it.",
        definitions=frozenset({"FileSource", "PartSource"}),
        uses=lambda doc: any(d.get("type") == "file" and "value" in d for d in _dicts(doc)),
    ),
    Difference(
        name="cancelled-outcome",
        reason="AG-UI 1.0 added the 'cancelled' run outcome; the draft predates it.",
        definitions=frozenset({"RunFinishedCancelledOutcome", "RunFinishedOutcome"}),
        uses=lambda doc: any(d.get("type") == "cancelled" for d in _dicts(doc)),
    ),
    Difference(
        name="pending-tool-call-ids",
        reason="AG-UI 1.0 added pendingToolCallIds to the success outcome; the draft predates it.",
        definitions=frozenset({"RunFinishedSuccessOutcome"}),
        uses=lambda doc: any("pendingToolCallIds" in d for d in _dicts(doc)),
    ),
    Difference(
        name="encrypted-value-type",
        reason="AG-UI 1.1 added encryptedValueType next to every encryptedValue (the 1.1 "
        "proto freeze numbers it on ReasoningEncryptedValueEvent, ToolCall and Message); the "
        "draft predates it.  See docs/protocol-1.1.md.",
        definitions=frozenset(
            {"BaseMessage", "ToolMessage", "ReasoningMessage", "ToolCall"}
            | {"ReasoningEncryptedValueEvent"}
        ),
        uses=lambda doc: any("encryptedValueType" in d for d in _dicts(doc)),
        narrows_open=frozenset({"BaseMessage"}),
    ),
    Difference(
        name="deprecated-thinking-events",
        reason="aguikit keeps the five deprecated THINKING_* events so streams from old "
        "producers can still be recognised and translated; the draft removed them.",
        definitions=frozenset(
            {"Event", "EventType"} | {c for c in strategies.MODEL_CLASSES if "Thinking" in c}
        ),
        uses=lambda doc: (
            (isinstance(doc, str) and doc.startswith("THINKING_"))
            or any(str(d.get("type", "")).startswith("THINKING_") for d in _dicts(doc))
        ),
    ),
)


def _prose_free(node: Any) -> Any:
    # x-open and x-since are aguikit's annotations for its lint and registry: not validation.
    ignored = {
        "description",
        "title",
        "$anchor",
        "$comment",
        "examples",
        "default",
        "x-open",
        "x-since",
    }
    if isinstance(node, dict):
        return {k: _prose_free(v) for k, v in node.items() if k not in ignored}
    if isinstance(node, list):
        return [_prose_free(item) for item in node]
    return node


@cache
def _validator(which: str, definition: str) -> Any:
    root = DRAFT if which == "draft" else OURS
    schema = {
        "$schema": root["$schema"],
        "$id": root["$id"],
        "$defs": root["$defs"],
        "$ref": f"#/$defs/{definition}",
    }
    return jsonschema.validators.validator_for(schema)(schema)


def _accepts(which: str, definition: str, doc: Any) -> bool:
    return bool(_validator(which, definition).is_valid(doc))


def _assert_same_verdict(definition: str, doc: Any) -> None:
    ours, draft = _accepts("ours", definition, doc), _accepts("draft", definition, doc)
    if ours == draft:
        return
    explaining = [d for d in KNOWN_DIFFERENCES if d.uses(doc)]
    names = [d.name for d in explaining]

    assert explaining, f"undeclared difference on {definition}: ours={ours} draft={draft} {doc!r}"
    if any(definition in d.narrows_open for d in explaining):
        return  # either verdict: the draft leaves the member open, aguikit types it
    assert (True, False) == (ours, draft), f"{names}: aguikit must be the superset"


# --------------------------------------------------------------------------- the table itself


def test_the_declared_differences_are_the_only_textual_differences() -> None:
    """Definitions differing in anything but prose are exactly those the table names."""
    ours_only = set(OURS["$defs"]) - set(DRAFT["$defs"])
    draft_only = set(DRAFT["$defs"]) - set(OURS["$defs"])
    differing = {
        name
        for name in SHARED
        if _prose_free(OURS["$defs"][name]) != _prose_free(DRAFT["$defs"][name])
    }
    declared = set().union(*(d.definitions for d in KNOWN_DIFFERENCES))

    assert set() == draft_only
    assert declared == ours_only | differing


@pytest.mark.parametrize(
    ("name", "definition", "doc"),
    [
        (
            "file-source",
            "ImagePart",
            {"type": "image", "source": {"type": "file", "value": "file-1"}},
        ),
        (
            "cancelled-outcome",
            "RunFinishedEvent",
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r",
                "outcome": {"type": "cancelled"},
            },
        ),
        (
            "pending-tool-call-ids",
            "RunFinishedOutcome",
            {"type": "success", "pendingToolCallIds": ["c1"]},
        ),
        (
            "encrypted-value-type",
            "ReasoningEncryptedValueEvent",
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "m",
                "encryptedValue": "b64",
                "encryptedValueType": "anthropic.redacted_thinking",
            },
        ),
        (
            "encrypted-value-type",
            "ToolCall",
            {
                "id": "c",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
                "encryptedValueType": "t",
            },
        ),
        ("deprecated-thinking-events", "Event", {"type": "THINKING_START"}),
        ("deprecated-thinking-events", "EventType", "THINKING_END"),
    ],
)
def test_every_declared_difference_shows_up_as_a_different_verdict(
    name: str, definition: str, doc: Any
) -> None:
    """Each row is live: aguikit accepts a document using the feature, the draft rejects it."""
    difference = next(d for d in KNOWN_DIFFERENCES if d.name == name)

    assert difference.uses(doc)
    assert (True, False) == (_accepts("ours", definition, doc), _accepts("draft", definition, doc))


def test_every_declared_difference_has_a_reason() -> None:
    """A difference without a reason is a bug waiting to be rediscovered."""
    assert all(d.reason.strip() for d in KNOWN_DIFFERENCES)


# --------------------------------------------------------------------------- corpus


@pytest.mark.parametrize("event", corpus.event_params())
def test_both_schemas_agree_on_every_conformance_event(event: Any) -> None:
    """
    Against the definition its ``type`` selects; an event whose type selects none is checked
    against the ``Event`` union (the generated test covers the union for the others).
    """
    cls = EVENT_CLASSES.get(str(event.get("type"))) if isinstance(event, dict) else None
    definition = cls.__name__ if cls is not None and cls.__name__ in SHARED else "Event"

    _assert_same_verdict(definition, event)


# --------------------------------------------------------------------------- generated


def _union(alias: Any) -> st.SearchStrategy[Any]:
    return st.one_of([strategies.instances(m) for m in typing.get_args(alias)])


_INSTANCE_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "Event": strategies.events(),
    "BaseEvent": strategies.events(),
    "Message": _union(models.Message),
    "BaseMessage": _union(models.Message),
    "ContentPart": _union(models.ContentPart),
    "PartSource": _union(models.PartSource),
    "JsonPatchOperation": _union(models.JsonPatchOperation),
    "RunFinishedOutcome": _union(models.RunFinishedOutcome),
    "SubagentFinishedOutcome": _union(models.SubagentFinishedOutcome),
}
"""Definitions that are unions or mixins of generated classes: drawn as instances."""

_VALUE_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "Attributable": st.fixed_dictionaries({}, optional={"subagentRunId": strategies.json_text}),
    "EventType": st.sampled_from(sorted(EVENT_CLASSES)) | strategies.json_text,
    "Role": st.sampled_from(sorted(MESSAGE_CLASSES)) | strategies.json_text,
    "TextMessageRole": st.sampled_from([r.value for r in models.TextMessageRole])
    | strategies.json_text,
    "ReasoningEncryptedValueSubtype": st.sampled_from(
        [s.value for s in models.ReasoningEncryptedValueSubtype]
    )
    | strategies.json_text,
    "JsonPatch": st.lists(_union(models.JsonPatchOperation).map(to_wire), max_size=3),
    "JsonPointer": strategies.json_pointers | strategies.json_text,
    "Metadata": strategies.json_objects,
    "State": strategies.json_values,
    "SubagentRunId": strategies.json_text,
}
"""Definitions with no class of their own: drawn as plain JSON values."""


def _generic_mutations(doc: Any) -> list[Any]:
    """Delete, retype or add a top-level member; for a non-object, other JSON kinds."""
    if not isinstance(doc, dict):
        return [None, True, 1, "x", [], {}, [doc]]
    out: list[Any] = [{**doc, "zzUnknownMember": 1}, [doc]]
    for key in doc:
        out.append({k: v for k, v in doc.items() if k != key})
        out.append({**doc, key: True})
        out.append({**doc, key: None})
    return out


def test_every_shared_definition_has_a_document_strategy() -> None:
    """No shared definition escapes the generated comparison."""
    covered = set(strategies.MODEL_CLASSES) | set(_INSTANCE_STRATEGIES) | set(_VALUE_STRATEGIES)

    assert set() == set(SHARED) - covered


@pytest.mark.parametrize("definition", SHARED)
@given(data=st.data())
def test_both_schemas_agree_on_generated_documents_and_their_mutations(
    definition: str, data: st.DataObject
) -> None:
    """Valid documents and every single-place breakage of them get the same verdict."""
    if definition in _VALUE_STRATEGIES:
        doc = data.draw(_VALUE_STRATEGIES[definition])
        broken = _generic_mutations(doc)
    else:
        strategy = _INSTANCE_STRATEGIES.get(definition)
        if strategy is None:
            strategy = strategies.instances(strategies.MODEL_CLASSES[definition])
        obj = data.draw(strategy)
        doc = to_wire(obj)
        broken = [m.document for m in strategies.mutations_of(obj)] + _generic_mutations(doc)
    # A sample of the breakages per example keeps the 36-way unions affordable; over the
    # examples every kind of breakage is drawn.
    sample = data.draw(st.lists(st.sampled_from(broken), min_size=1, max_size=4))

    for document in [doc, *sample]:
        _assert_same_verdict(definition, document)
