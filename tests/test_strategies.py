"""
The shared hypothesis strategies honour every constraint the schema states.

A strategy that ignores a bound makes a property test blame the validator for the
strategy's bug (``/progress: 2.0 > 1``).  So: every value constraint keyword the bundled
schema uses must be one :data:`tests.strategies.CONSTRAINTS` honours, each supported
keyword is exercised on a synthetic property and every drawn value validates against it,
and every generated document of every model validates (``test_wire_properties``) — which
with these tests covers constraints the schema does not use yet, too.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import strategies

from aguikit.validate import load_schema

KEYWORDS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "contentEncoding",
        "contentMediaType",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
        "propertyNames",
        "dependentRequired",
    }
)
"""The JSON Schema 2020-12 keywords that constrain a value beyond its type."""


def _used(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {key for key in node if key in KEYWORDS}
        for key, value in node.items():
            if key != "properties":
                found |= _used(value)
        for value in node.get("properties", {}).values():
            found |= _used(value)
        return found
    if isinstance(node, list):
        return set().union(*(_used(item) for item in node)) if node else set()
    return set()


def test_every_constraint_the_schema_uses_is_one_the_strategies_honour() -> None:
    """A keyword added to the schema that the strategies ignore fails here, by name."""
    assert set() == _used(load_schema()) - strategies.CONSTRAINTS


SYNTHETIC: list[tuple[Any, dict[str, Any]]] = [
    (float, {"type": "number", "minimum": 0, "maximum": 1}),
    (float, {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
    (float, {"type": "number", "minimum": -5, "multipleOf": 0.5, "maximum": 5}),
    (int, {"type": "integer", "minimum": 3, "maximum": 7}),
    (int, {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4}),
    (int, {"type": "integer", "minimum": 0, "maximum": 100, "multipleOf": 7}),
    (str, {"type": "string", "minLength": 2, "maxLength": 4}),
    (str, {"type": "string", "maxLength": 0}),
    (str, {"type": "string", "pattern": "^[a-z]+\\.[a-z_]+$"}),
    (str, {"type": "string", "pattern": "^[A-Z]{2}$", "maxLength": 2}),
    (str, {"type": "string", "format": "date-time"}),
    (str, {"type": "string", "format": "uuid"}),
    (str, {"type": "string", "format": "uri"}),
    (str, {"type": "string", "format": "email"}),
    (str, {"type": "string", "format": "date"}),
    (str, {"type": "string", "contentEncoding": "base64"}),
    (list[int], {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
    (
        list[int],
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 3},
            "uniqueItems": True,
            "maxItems": 4,
        },
    ),
]
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


@pytest.mark.parametrize(
    ("annotation", "schema"), SYNTHETIC, ids=lambda v: v if isinstance(v, str) else None
)
@given(data=st.data())
def test_every_drawn_value_satisfies_the_property_it_was_drawn_for(
    annotation: Any, schema: dict[str, Any], data: st.DataObject
) -> None:
    """Each supported keyword, alone or combined, on a synthetic property."""
    value = data.draw(strategies._for_type(annotation, schema, True))
    validator = jsonschema.Draft202012Validator(schema, format_checker=CHECKER)

    assert [] == [error.message for error in validator.iter_errors(value)]


def test_every_supported_keyword_is_exercised_here() -> None:
    """The synthetic table keeps up with :data:`tests.strategies.CONSTRAINTS`."""
    assert strategies.CONSTRAINTS <= set().union(*(set(s) | _used(s) for _, s in SYNTHETIC))
