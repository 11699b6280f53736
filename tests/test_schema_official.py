"""
aguikit's schema against the official AG-UI 1.1 schema (``docs/spec/1.1/schema.json`` of the
reference checkout), which the normative specification makes authoritative for structure
("The schema is authoritative for structure", ``schema-files.mdx``).  For every definition
the two must give every document the same verdict, except where a difference is declared
below with its reason; ``docs/schema-official.md`` is the comparison in prose.

Each side is judged by its own validator: the official file by ``jsonschema`` (Draft
2020-12, ``pattern`` read as ECMA-262 reads it, as the spec of JSON Schema and upstream's
ajv-based suite do), aguikit's by its public API (``is_valid``, ``iter_schema_errors`` and,
for events, ``validate_event``, which must also agree with each other).

The documents: the official fixture documents (when a checkout provides them), every event
of the conformance streams, documents generated from aguikit's classes and from the
official schema's text, and single-place breakages of those.  The declared differences are
checked the other way round too: they must be the only definitions whose schema text
differs, and each must show up as a different verdict, so the table can neither hide a new
difference nor go stale.

This module used to compare against the older *draft* schema (``spec/draft/schema.json``).
The 1.1 file supersedes it: the stored draft has every one of its definitions in 1.1, and
the four differences declared against it were exactly 1.1's additions (``FileSource``, the
``cancelled`` outcome, ``pendingToolCallIds``, ``encryptedValueType``), which the 1.1 file
now states itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import corpus, strategies

import aguikit
from aguikit._generated.registry import EVENT_CLASSES
from aguikit.errors import SchemaValidationError, UnknownEventTypeError
from aguikit.validate import load_schema
from aguikit.wire import to_wire

if not corpus.OFFICIAL_SCHEMA.is_file():
    message = f"official 1.1 schema not found at {corpus.OFFICIAL_SCHEMA}"
    if corpus.required():
        raise RuntimeError(f"{message} ({corpus.REQUIRED_BY})")
    pytest.skip(message, allow_module_level=True)

OFFICIAL: dict[str, Any] = json.loads(corpus.OFFICIAL_SCHEMA.read_text(encoding="utf-8"))
OURS: dict[str, Any] = load_schema()

# --------------------------------------------------------------------------- the table


@attrs.frozen
class Difference:
    """A declared, intended difference between aguikit's schema and the official 1.1 file."""

    name: str
    reason: str
    definitions: frozenset[str]
    """Definitions whose schema text differs (or that only aguikit has) because of it."""
    uses: Callable[[Any], bool]
    """Whether a document uses the feature, so aguikit may accept what the official rejects."""


def _retired_type(doc: Any) -> bool:
    kind = doc.get("type") if isinstance(doc, dict) else doc
    return isinstance(kind, str) and kind.startswith("THINKING_")


KNOWN_DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        name="retired-thinking-events",
        reason="AG-UI 1.1 retired the five THINKING_* events (changelog.mdx: they are "
        "translated to REASONING_* at the compatibility boundary, basic/versioning.mdx); "
        "aguikit's schema keeps them, marked deprecated, so that boundary can recognise and "
        "translate a stream from an older producer instead of calling it an unknown type.",
        definitions=frozenset(
            {"Event", "EventType"}
            | {name for name, node in OURS["$defs"].items() if node.get("deprecated")}
        ),
        uses=_retired_type,
    ),
)

_NOT_VALIDATION = frozenset(
    {"description", "title", "$anchor", "$comment", "examples", "x-open", "x-since", "deprecated"}
)
"""Prose, anchors, and aguikit's annotations for its lint and registry: never a verdict."""


def _prose_free(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _prose_free(v) for k, v in node.items() if k not in _NOT_VALIDATION}
    if isinstance(node, list):
        return [_prose_free(item) for item in node]
    return node


def _differing() -> tuple[set[str], set[str], set[str]]:
    """Definitions only aguikit has, only the official file has, and shared but different."""
    ours, official = OURS["$defs"], OFFICIAL["$defs"]
    shared = set(ours) & set(official)
    differing = {n for n in shared if _prose_free(ours[n]) != _prose_free(official[n])}
    return set(ours) - set(official), set(official) - set(ours), differing


def test_the_declared_differences_are_the_only_textual_differences() -> None:
    """Definitions differing in anything but prose are exactly those the table names."""
    ours_only, official_only, differing = _differing()
    declared = set().union(*(d.definitions for d in KNOWN_DIFFERENCES))

    assert set() == official_only
    assert declared == ours_only | differing


def test_both_files_are_rooted_at_the_event_union_in_the_same_dialect() -> None:
    """Outside ``$defs`` only the address (``$id``) and the prose differ."""
    ours, official = (
        {k: v for k, v in _prose_free(root).items() if k not in ("$defs", "$id")}
        for root in (OURS, OFFICIAL)
    )

    assert official == ours


@pytest.mark.parametrize(
    ("name", "definition", "doc"),
    [
        ("retired-thinking-events", "Event", {"type": "THINKING_START"}),
        (
            "retired-thinking-events",
            "Event",
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": ""},
        ),
        ("retired-thinking-events", "EventType", "THINKING_END"),
    ],
)
def test_every_declared_difference_shows_up_as_a_different_verdict(
    name: str, definition: str, doc: Any
) -> None:
    """Each row is live: aguikit accepts a document using the feature, the official rejects."""
    difference = next(d for d in KNOWN_DIFFERENCES if d.name == name)

    assert difference.uses(doc)
    assert (True, False) == (_ours(definition, doc), _official(definition, doc))


def test_every_declared_difference_has_a_reason() -> None:
    """A difference without a reason is a bug waiting to be rediscovered."""
    assert all(d.reason.strip() for d in KNOWN_DIFFERENCES)


# --------------------------------------------------------------------------- the verdicts


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    import re

    if validator.is_type(instance, "string") and not re.search(
        strategies.ecma_regex(pattern), instance
    ):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Reference = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _ecma_pattern}
)
"""jsonschema's 2020-12 validator with ECMA-262's ``$`` (Python's also matches before a final
newline, so it alone would take ``"\\n"`` for a JSON pointer; ajv and jsonschema-rs do not)."""


@cache
def _reference(definition: str) -> Any:
    if definition == "":  # the whole file, checked against the 2020-12 meta-schema once
        _Reference.check_schema(OFFICIAL)
    return _Reference(
        {
            "$schema": OFFICIAL["$schema"],
            "$id": OFFICIAL["$id"],
            "$defs": OFFICIAL["$defs"],
            "$ref": f"#/$defs/{definition}",
        }
    )


@cache
def _union_members(definition: str) -> list[str] | None:
    """The members of a definition that is nothing but a ``oneOf`` of references."""
    node = _prose_free(OFFICIAL["$defs"][definition])
    if set(node) != {"oneOf"} or any(set(b) != {"$ref"} for b in node["oneOf"]):
        return None
    return [branch["$ref"].removeprefix("#/$defs/") for branch in node["oneOf"]]


def _official(definition: str, doc: Any) -> bool:
    """
    The official verdict.  A top-level union is evaluated as ``oneOf`` is defined (exactly
    one member valid), member by member: jsonschema collects every error of every failing
    branch, which made the 31-way ``Event`` cost a fifth of a second per document.
    """
    _reference("")
    members = _union_members(definition)
    if members is not None:
        return sum(_official(member, doc) for member in members) == 1
    return bool(_reference(definition).is_valid(doc))


def _ours(definition: str, doc: Any) -> bool:
    """aguikit's verdict, taken every public way, which must agree with each other."""
    fast = aguikit.is_valid(doc, definition)
    explained = next(aguikit.iter_schema_errors(doc, definition), None) is None
    verdicts = {"is_valid": fast, "iter_schema_errors": explained}
    if definition == "Event":
        try:
            aguikit.validate_event(doc)
            verdicts["validate_event"] = True
        except (UnknownEventTypeError, SchemaValidationError):
            verdicts["validate_event"] = False
    assert len(set(verdicts.values())) == 1, f"aguikit disagrees with itself: {verdicts} {doc!r}"
    return fast


def _assert_same_verdict(definition: str, doc: Any, official: str | None = None) -> None:
    """``official`` names the official definition when aguikit's has no counterpart."""
    ours, theirs = _ours(definition, doc), _official(official or definition, doc)
    if ours == theirs:
        return
    explaining = [d.name for d in KNOWN_DIFFERENCES if d.uses(doc)]

    assert explaining, (
        f"undeclared difference on {definition}: ours={ours} official={theirs} {doc!r}"
    )
    assert (True, False) == (ours, theirs), f"{explaining}: aguikit must be the superset"


# --------------------------------------------------------------------------- official fixtures

FIXTURES_ENV = "AGUIKIT_OFFICIAL_FIXTURES"
"""A directory laid out as upstream's ``spec/1.1/fixtures`` (``<Definition>/valid|invalid/``),
searched before the reference folder, which stores only the MANIFEST."""


def _fixture_roots() -> list[Path]:
    extra = os.environ.get(FIXTURES_ENV)
    return ([Path(extra)] if extra else []) + [corpus.OFFICIAL_FIXTURES]


def _listed() -> list[str]:
    """The fixture documents upstream's MANIFEST lists (expectation files aside)."""
    manifest = corpus.OFFICIAL_FIXTURES / "MANIFEST.txt"
    if not manifest.is_file():
        return []
    lines = manifest.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.endswith(".json") and not line.startswith("#")]


def _found(path: str) -> Path | None:
    return next((r / path for r in _fixture_roots() if (r / path).is_file()), None)


def _fixture_params() -> list[Any]:
    documents = [p for p in _listed() if not p.endswith(".expect.json")]
    present = [pytest.param(p, id=p) for p in documents if _found(p) is not None]
    reason = (
        f"none of the {len(documents)} fixture documents listed by "
        f"{corpus.OFFICIAL_FIXTURES / 'MANIFEST.txt'} is under {_fixture_roots()} "
        f"(set {FIXTURES_ENV} to a checkout's spec/1.1/fixtures)"
    )
    return present or [pytest.param(None, id="fixtures-absent", marks=pytest.mark.skip(reason))]


def test_every_fixture_document_the_manifest_lists_is_present() -> None:
    """The fixture comparison below covers the whole list, or this says what it missed."""
    listed = _listed()
    if not listed:
        pytest.skip(f"no MANIFEST.txt at {corpus.OFFICIAL_FIXTURES}")
    absent = [path for path in listed if _found(path) is None]
    if absent:
        pytest.skip(
            f"{len(absent)} of {len(listed)} files the MANIFEST lists are not under "
            f"{_fixture_roots()} (set {FIXTURES_ENV}), e.g. {absent[:3]}"
        )


@pytest.mark.parametrize("path", _fixture_params())
def test_both_schemas_agree_on_every_official_fixture(path: str) -> None:
    """
    The official file gives the fixture the verdict its folder names (a check of the
    reference validator), aguikit gives the same one, and for a rejected document aguikit
    reports an issue at the place the ``.expect.json`` names, or inside it (aguikit
    resolves a discriminated union to the member, where the official reports the ``oneOf``).
    """
    definition, verdict = path.split("/")[:2]
    found = _found(path)
    assert found is not None
    doc = json.loads(found.read_text(encoding="utf-8"))

    assert _official(definition, doc) is (verdict == "valid")
    _assert_same_verdict(definition, doc)
    expect = _found(path.removesuffix(".json") + ".expect.json")
    if verdict == "invalid" and expect is not None:
        where = json.loads(expect.read_text(encoding="utf-8"))["instanceLocation"]
        pointers = [issue.pointer for issue in aguikit.iter_schema_errors(doc, definition)]
        assert any(p == where or p.startswith(where + "/") for p in pointers), pointers


# --------------------------------------------------------------------------- conformance streams


@pytest.mark.parametrize("event", corpus.event_params())
def test_both_schemas_agree_on_every_conformance_event(event: Any) -> None:
    """Against the definition its ``type`` selects, or the ``Event`` union for none."""
    cls = EVENT_CLASSES.get(str(event.get("type"))) if isinstance(event, dict) else None
    definition = cls.__name__ if cls is not None and cls.__name__ in OFFICIAL["$defs"] else "Event"

    _assert_same_verdict(definition, event)


# --------------------------------------------------------------------------- generated


def _broken(data: st.DataObject, doc: Any, more: Sequence[Any] = ()) -> list[Any]:
    """Two single-place breakages of ``doc`` and one of ``more``: a sample per example keeps
    the 31-way unions affordable, and over the examples every kind of breakage is drawn."""
    out = [data.draw(strategies.breakages(doc)) for _ in range(2)]
    return out + ([data.draw(st.sampled_from(more))] if more else [])


_FEWER = settings(max_examples=max(5, settings().max_examples // 2))
"""Two generators per definition at half the profile's examples each: the documents the
draft comparison drew, now from both schemas (``HYPOTHESIS_PROFILE=thorough`` for more)."""

_DRAWN_FROM_CLASSES = sorted(
    name
    for name in OURS["$defs"]
    if name in strategies.MODEL_CLASSES or name not in OFFICIAL["$defs"]
)
"""Definitions with a generated class, plus those only aguikit has.  The rest are schema
text equal to the official one (the table's first test), which the next test draws."""


@pytest.mark.parametrize("definition", _DRAWN_FROM_CLASSES)
@_FEWER
@given(data=st.data())
def test_both_schemas_agree_on_documents_of_aguikits_classes_and_their_breakages(
    definition: str, data: st.DataObject
) -> None:
    """
    Drawn from aguikit's generated class (and also broken where its fields say); a
    definition the official file lacks is judged there by the ``Event`` union.
    """
    cls = strategies.MODEL_CLASSES.get(definition)
    if cls is not None:
        obj = data.draw(strategies.instances(cls))
        doc = to_wire(obj)
        broken = [m.document for m in strategies.mutations_of(obj)]
    else:
        doc = data.draw(strategies.schema_documents(OURS, definition))
        broken = []
    official = definition if definition in OFFICIAL["$defs"] else "Event"

    assert _ours(definition, doc)
    for document in [doc, *_broken(data, doc, broken)]:
        _assert_same_verdict(definition, document, official)


@pytest.mark.parametrize("definition", sorted(OFFICIAL["$defs"]))
@_FEWER
@given(data=st.data())
def test_both_schemas_agree_on_documents_of_the_official_definitions_and_their_breakages(
    definition: str, data: st.DataObject
) -> None:
    """Drawn from the official schema's text alone, so a member aguikit's classes lack is drawn."""
    doc = data.draw(strategies.schema_documents(OFFICIAL, definition))

    assert _official(definition, doc)
    for document in [doc, *_broken(data, doc)]:
        _assert_same_verdict(definition, document)
