"""
Properties of the wire format over generated documents of every schema class.

The strategies in :mod:`tests.strategies` build schema-valid instances from the generated
classes and the schema's constraints; these tests hold that every such document validates,
parses and round-trips in both directions, and that breaking one in a single place is
rejected with an issue that points at that place.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from tests import strategies

from aguikit._generated import models
from aguikit._generated.registry import EVENT_CLASSES
from aguikit.encode import dumps_event, loads_event
from aguikit.errors import SchemaValidationError
from aguikit.validate import is_valid, iter_schema_errors, validate_event
from aguikit.wire import parse_as, parse_event, to_wire

EVENT_TYPES = sorted(EVENT_CLASSES)
OTHER_CLASSES = sorted(
    name for name, cls in strategies.MODEL_CLASSES.items() if cls not in EVENT_CLASSES.values()
)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
@given(data=st.data())
def test_every_generated_event_validates_parses_and_round_trips(
    event_type: str, data: st.DataObject
) -> None:
    """``to_wire(parse_event(d)) == d`` and ``parse_event(to_wire(e)) == e``, strictly valid."""
    event = data.draw(strategies.instances(EVENT_CLASSES[event_type]))
    doc = to_wire(event)

    validate_event(doc)
    parsed = parse_event(doc)

    assert doc == to_wire(parsed)
    assert event == parsed
    assert doc == json.loads(dumps_event(event))
    assert event == loads_event(dumps_event(event))


@pytest.mark.parametrize("name", OTHER_CLASSES)
@given(data=st.data())
def test_every_generated_non_event_document_validates_and_round_trips(
    name: str, data: st.DataObject
) -> None:
    """Messages, parts, outcomes, patch operations, capabilities, requests: same property."""
    cls = strategies.MODEL_CLASSES[name]
    obj = data.draw(strategies.instances(cls))
    doc = to_wire(obj)

    assert [] == list(iter_schema_errors(doc, name))
    parsed: Any = parse_as(cls, doc)

    assert doc == to_wire(parsed)
    assert obj == parsed


@given(
    strategies.events(), st.dictionaries(strategies.json_text, strategies.json_values, min_size=1)
)
def test_undeclared_members_are_strictly_invalid_tolerantly_kept_and_written_back(
    event: Any, extras: dict[str, Any]
) -> None:
    """A newer producer's members fail strict validation, survive a tolerant parse intact."""
    doc = to_wire(event)
    declared = {str(f.metadata.get("wire", f.name)) for f in attrs.fields(type(event))}
    # Undeclared means not a member of the class at all, present or absent ("rawEvent"
    # is declared even when the event leaves it out).
    extras = {k: v for k, v in extras.items() if k not in doc and k not in declared}
    assume(extras)
    doc.update(extras)

    parsed = parse_event(doc)

    assert not is_valid(doc)
    assert extras == parsed.extra_members
    assert doc == to_wire(parsed)


def _issues_for(mutation: strategies.Mutation, definition: str) -> list[Any]:
    if definition == "Event":
        with pytest.raises(SchemaValidationError) as info:
            validate_event(mutation.document)
        return list(info.value.issues)
    return list(iter_schema_errors(mutation.document, definition))


def _check_pointer(mutation: strategies.Mutation, definition: str) -> None:
    issues = _issues_for(mutation, definition)

    assert issues, mutation
    assert mutation.expected_pointer == issues[0].pointer, (mutation.kind, issues)
    if mutation.kind == "delete":
        assert "required" == issues[0].keyword
        assert repr(mutation.site.member) in issues[0].message


def _no_content_part_list(obj: Any) -> bool:
    return not strategies.has_content_part_list(obj)


@given(strategies.mutations(strategies.events().filter(_no_content_part_list)))
def test_a_mutated_event_is_rejected_with_an_issue_at_the_mutated_place(
    mutation: strategies.Mutation,
) -> None:
    """Deleted, retyped, re-discriminated or undeclared: the first issue points right there."""
    _check_pointer(mutation, "Event")


@pytest.mark.parametrize("name", OTHER_CLASSES)
@given(data=st.data())
def test_a_mutated_non_event_document_is_rejected_at_the_mutated_place(
    name: str, data: st.DataObject
) -> None:
    """The same precision when validating any other definition."""
    cls = strategies.MODEL_CLASSES[name]
    instances = strategies.instances(cls).filter(_no_content_part_list)
    mutation = data.draw(strategies.mutations(instances))

    _check_pointer(mutation, name)


def test_a_mutated_event_is_rejected_by_parse_event_too() -> None:
    """``parse_event`` (tolerant) reports the same place for a retyped nested field."""
    doc = {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "r",
        "usage": [{"inputTokens": 1}, {"outputTokens": "many"}],
    }

    with pytest.raises(SchemaValidationError) as info:
        parse_event(doc)

    assert "/usage/1/outputTokens" == info.value.issues[0].pointer


@given(
    strategies.mutations(
        strategies.instances(models.UserMessage).filter(strategies.has_content_part_list)
    ).filter(lambda m: "/content/" in m.expected_pointer + "/")
)
def test_a_mutation_inside_a_list_of_content_parts_is_pointed_at(
    mutation: strategies.Mutation,
) -> None:
    """Inside multimodal content, the issue still names the broken part member."""
    _check_pointer(mutation, "UserMessage")
