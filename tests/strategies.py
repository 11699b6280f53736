"""
Hypothesis strategies shared by the test suite.

The central piece is :func:`instances`: a strategy for *schema-valid* instances of any
generated model class, derived from the class's annotations plus the constraints the
bundled schema states for each property (numeric bounds, string lengths, patterns and
formats, item counts, JSON pointers, "any JSON value but null"; :data:`CONSTRAINTS` lists
them, and a test fails on a keyword the schema uses that is not there).  Deriving instead
of hand-writing means a schema change is exercised the moment the models are regenerated,
with no strategy to update.

On top of it: :func:`documents` (the wire dicts), :func:`events` (any event), JSON values
that survive a JSON round trip unchanged (no NaN, integers within +-(2**53 - 1)), and
:func:`mutation_sites` / :func:`mutate`, which break a valid document in one place so a
test can check that the validator names that place.  :func:`schema_documents` derives
valid documents from a schema's text alone (the official 1.1 file), and :func:`breakages`
breaks any JSON document in one place without knowing its schema.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any, Final, Literal, get_args, get_origin

import attrs
from hypothesis import strategies as st

from aguikit._deprecation import constructing_from_wire
from aguikit._generated import models
from aguikit._generated.registry import EVENT_CLASSES
from aguikit.validate import load_schema
from aguikit.wire import to_wire

MAX_SAFE_INT: Final = 2**53 - 1
"""The largest integer every JSON parser represents exactly; the schema bounds integers by it."""

MODEL_CLASSES: Final[dict[str, type]] = {
    name: obj for name, obj in vars(models).items() if isinstance(obj, type) and attrs.has(obj)
}
"""Every generated attrs class, by its schema definition name."""

EVENT_TYPES: Final = tuple(EVENT_CLASSES)

# --------------------------------------------------------------------------- JSON values

json_text: Final = st.text(st.characters(codec="utf-8"), max_size=12)
"""Any string JSON can carry (no lone surrogates)."""

json_scalars: Final = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INT, MAX_SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=3) | st.dictionaries(json_text, children, max_size=3)


json_values: Final = st.recursive(json_scalars, _containers, max_leaves=6)
"""Any JSON value, null included, that ``json.loads(json.dumps(v)) == v``."""

json_non_null: Final = json_values.filter(lambda v: v is not None)
json_objects: Final = st.dictionaries(json_text, json_values, max_size=3)
"""A JSON object with arbitrary keys: ``Metadata``, activity ``content``..."""

_pointer_segment = st.text(st.characters(codec="utf-8"), max_size=5).map(
    lambda s: s.replace("~", "~0").replace("/", "~1")
)
json_pointers: Final = st.lists(_pointer_segment, max_size=3).map(
    lambda parts: "".join("/" + p for p in parts)
)
"""RFC 6901 JSON pointers (``""`` included), correctly escaped."""

base64_text: Final = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode("ascii"))


# --------------------------------------------------------------------------- schema lookup


def _defs() -> dict[str, Any]:
    defs: dict[str, Any] = load_schema()["$defs"]
    return defs


def _ref_name(node: Any) -> str | None:
    ref = node.get("$ref") if isinstance(node, dict) else None
    return ref.removeprefix("#/$defs/") if isinstance(ref, str) else None


@functools.cache
def flat_properties(definition: str) -> dict[str, Any]:
    """The properties of ``definition`` including those its ``allOf`` parts declare."""
    node = _defs()[definition]
    out: dict[str, Any] = {}
    for part in node.get("allOf", []):
        base = _ref_name(part)
        if base is not None:
            out.update(flat_properties(base))
    for name, schema in node.get("properties", {}).items():
        out[name] = {**out.get(name, {}), **schema}
    return out


@functools.cache
def flat_required(definition: str) -> frozenset[str]:
    """The required members of ``definition`` including those of its ``allOf`` parts."""
    node = _defs()[definition]
    out = set(node.get("required", []))
    for part in node.get("allOf", []):
        base = _ref_name(part)
        if base is not None:
            out |= flat_required(base)
    return frozenset(out)


def _deref(schema: dict[str, Any]) -> dict[str, Any]:
    """A property schema with its ``$ref`` chain merged in, plus ``x-ref`` naming the target."""
    out = dict(schema)
    seen: list[str] = []
    while (name := _ref_name(out)) is not None and name not in seen:
        seen.append(name)
        out.pop("$ref")
        out = {**_defs()[name], **out}
    if seen:
        out["x-ref"] = seen
    return out


def property_schema(definition: str, wire: str) -> dict[str, Any]:
    """The dereferenced schema of one property (``{}`` when the schema names no constraint)."""
    return _deref(flat_properties(definition).get(wire, {}))


def rejects_null(schema: dict[str, Any]) -> bool:
    """Whether a property schema is "any JSON value but null"."""
    return schema.get("not") == {"type": "null"}


def is_unconstrained(schema: dict[str, Any]) -> bool:
    """Whether a property accepts any JSON value (a retyped value would still be valid)."""
    constraining = {"type", "const", "enum", "oneOf", "anyOf", "properties", "items", "pattern"}
    return not (constraining & set(schema))


def wire_name(field: attrs.Attribute[Any]) -> str:
    """The member name a field has on the wire, as codegen recorded it."""
    return str(field.metadata.get("wire", field.name))


def model_fields(cls: type) -> list[attrs.Attribute[Any]]:
    """The fields of a generated class that are wire members (``extra_members`` excluded)."""
    return [f for f in attrs.fields(cls) if not f.metadata.get("extras")]


# --------------------------------------------------------------------------- instances


def _single_literal(annotation: Any) -> bool:
    return get_origin(annotation) is Literal and len(get_args(annotation)) == 1


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (typing.Union, types.UnionType)


Omitted = frozenset[tuple[str, str]]
"""``(definition, wire name)`` pairs of optional members a strategy must leave unset."""


def _for_type(
    annotation: Any,
    schema: dict[str, Any],
    nullable_any: bool,
    omit: Omitted = frozenset(),
    full: bool = False,
) -> Any:
    if _is_union(annotation):
        members = [m for m in get_args(annotation) if m is not type(None)]
        if len(members) == 1:
            return _for_type(members[0], schema, nullable_any, omit, full)
        return st.one_of([_for_type(m, {}, nullable_any, omit, full) for m in members])
    origin = get_origin(annotation)
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin is list:
        (item,) = get_args(annotation)
        item_schema = (
            _deref(schema.get("items", {})) if isinstance(schema.get("items"), dict) else {}
        )
        low = schema.get("minItems", 0)
        return st.lists(
            _for_type(item, item_schema, nullable_any, omit, full),
            min_size=max(1 if full else 0, low),
            max_size=schema.get("maxItems", max(2, low)),
            unique_by=(
                lambda v: json.dumps(to_wire(v) if attrs.has(type(v)) else v, sort_keys=True)
            )
            if schema.get("uniqueItems")
            else None,
        )
    if origin is dict:
        return json_objects
    if annotation is Any:
        return json_values if nullable_any and not rejects_null(schema) else json_non_null
    if isinstance(annotation, type):
        if issubclass(annotation, Enum):
            return st.sampled_from(list(annotation))
        if attrs.has(annotation):
            return st.deferred(lambda: _instances(annotation, nullable_any, omit, full))
        if annotation is bool:
            return st.booleans()
        if annotation is int:
            return integers_for(schema)
        if annotation is float:
            return numbers_for(schema)
        if annotation is str:
            return strings_for(schema)
    raise TypeError(f"no strategy for {annotation!r}")


CONSTRAINTS: Final = frozenset(
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
        "minItems",
        "maxItems",
        "uniqueItems",
    }
)
"""Every value constraint the strategies honour; ``tests/test_strategies.py`` fails on a
keyword the schema uses that is not in this set, so a new constraint cannot be ignored."""


def integers_for(schema: dict[str, Any]) -> st.SearchStrategy[int]:
    """Integers within the schema's bounds (inclusive and exclusive) and ``multipleOf``."""
    low = schema.get("minimum", -MAX_SAFE_INT)
    high = schema.get("maximum", MAX_SAFE_INT)
    if "exclusiveMinimum" in schema:
        low = max(low, math.floor(schema["exclusiveMinimum"]) + 1)
    if "exclusiveMaximum" in schema:
        high = min(high, math.ceil(schema["exclusiveMaximum"]) - 1)
    low, high = math.ceil(low), math.floor(high)
    step = schema.get("multipleOf")
    if isinstance(step, int) and step > 0:
        return st.integers(-(-low // step), high // step).map(lambda n: n * step)
    return st.integers(low, high)


def numbers_for(schema: dict[str, Any]) -> st.SearchStrategy[float]:
    """Finite floats within the schema's bounds, inclusive or exclusive."""
    low = schema.get("exclusiveMinimum", schema.get("minimum"))
    high = schema.get("exclusiveMaximum", schema.get("maximum"))
    strategy = st.floats(
        min_value=None if low is None else float(low),
        max_value=None if high is None else float(high),
        exclude_min="exclusiveMinimum" in schema,
        exclude_max="exclusiveMaximum" in schema,
        allow_nan=False,
        allow_infinity=False,
    )
    step = schema.get("multipleOf")
    if step:
        strategy = strategy.map(lambda x: round(x / step) * step).filter(
            lambda x: (low is None or x >= low) and (high is None or x <= high)
        )
    return strategy


_FORMATS: Final[dict[str, st.SearchStrategy[str]]] = {
    "date-time": st.datetimes(timezones=st.just(datetime.UTC)).map(
        lambda d: d.isoformat().replace("+00:00", "Z")
    ),
    "date": st.dates().map(lambda d: d.isoformat()),
    "uuid": st.uuids().map(str),
    "uri": st.from_regex(r"\Ahttps://[a-z]{1,8}\.example/[a-z0-9]{0,8}\Z"),
    "email": st.from_regex(r"\A[a-z]{1,8}@[a-z]{1,8}\.example\Z"),
}


def strings_for(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    """Strings honouring ``pattern``, ``format``, ``contentEncoding`` and the length bounds."""
    if "JsonPointer" in schema.get("x-ref", ()):
        strategy: st.SearchStrategy[str] = json_pointers
    elif "pattern" in schema:
        strategy = st.from_regex(schema["pattern"], alphabet=st.characters(codec="utf-8"))
    elif "format" in schema:
        if schema["format"] not in _FORMATS:
            raise TypeError(f"no strategy for format {schema['format']!r}")
        strategy = _FORMATS[schema["format"]]
    elif schema.get("contentEncoding") == "base64":
        strategy = base64_text
    else:
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        return st.text(
            st.characters(codec="utf-8"),
            min_size=low,
            max_size=max(low, 12) if high is None else high,
        )
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if low or high is not None:
        strategy = strategy.filter(lambda s: len(s) >= low and (high is None or len(s) <= high))
    return strategy


def _constructor(cls: type) -> Any:
    if not hasattr(cls, "__deprecated__"):
        return cls

    def build(**kwargs: Any) -> Any:
        # Test data is not user code adopting a retired shape: keep the warning for users.
        with constructing_from_wire():
            return cls(**kwargs)

    return build


def instances(
    cls: type, *, nullable_any: bool = True, omit: Omitted = frozenset(), full: bool = False
) -> st.SearchStrategy[Any]:
    """
    Schema-valid instances of a generated class.  Optional fields are left unset about
    half the time; extra members are never set (strictly valid documents).

    Args:
        cls: A generated attrs class.
        nullable_any: Whether *required* "any JSON" fields (``snapshot``, ``value``,
            ``event``) may be ``null``.  The official SDK's ``exclude_none`` dump drops such
            legitimately null values, so interop tests turn this off.
        omit: Optional members never set, as ``(definition, wire name)`` pairs, at any
            depth: the interop tests leave out what the official SDK's models lack.
    """
    return _instances(cls, nullable_any, omit)


@functools.cache
def _instances(
    cls: Any, nullable_any: bool, omit: Omitted = frozenset(), full: bool = False
) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for field in model_fields(cls):
        annotation = hints[field.name]
        if _single_literal(annotation):
            continue  # a discriminator: its default is its only value
        if field.default is not attrs.NOTHING and (cls.__name__, wire_name(field)) in omit:
            continue
        schema = property_schema(cls.__name__, wire_name(field))
        strategy = _for_type(annotation, schema, nullable_any, omit, full)
        if field.default is not attrs.NOTHING and not full:
            strategy = st.none() | strategy
        kwargs[field.name] = strategy
    return st.builds(_constructor(cls), **kwargs)


def documents(cls: type, *, nullable_any: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Schema-valid wire dicts of a generated class."""
    return instances(cls, nullable_any=nullable_any).map(to_wire)


def events(
    types_: typing.Iterable[str] | None = None, *, nullable_any: bool = True
) -> st.SearchStrategy[Any]:
    """Schema-valid events of the given wire types (every event type by default)."""
    chosen = EVENT_TYPES if types_ is None else tuple(types_)
    return st.one_of([instances(EVENT_CLASSES[t], nullable_any=nullable_any) for t in chosen])


def has_content_part_list(obj: Any) -> bool:
    """Whether a model instance holds, anywhere, a ``content`` given as a list of parts."""
    return any(
        isinstance(value, list) and name == "content" for _, name, value in _walk_fields(obj)
    )


# --------------------------------------------------------------------------- mutations


@attrs.frozen
class Site:
    """One member of one model object inside a document, addressed by JSON pointer."""

    parent: str
    """Pointer of the object holding the member."""
    definition: str
    """Schema definition of that object."""
    member: str
    """Wire name of the member."""
    required: bool
    discriminator: bool
    schema: dict[str, Any] = attrs.field(eq=False)

    @property
    def pointer(self) -> str:
        return f"{self.parent}/{self.member}"


@attrs.frozen
class Mutation:
    """A document broken in one place, and where a precise validator must say it is broken."""

    kind: str
    """``delete``, ``retype``, ``discriminator`` or ``unknown-member``."""
    site: Site
    document: Any
    expected_pointer: str
    """The pointer of the issue the validator must report."""


def _walk_fields(obj: Any, pointer: str = "") -> Iterator[tuple[str, str, Any]]:
    for field in model_fields(type(obj)):
        value = getattr(obj, field.name)
        yield pointer, field.name, value
        child = f"{pointer}/{wire_name(field)}"
        if attrs.has(type(value)):
            yield from _walk_fields(value, child)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if attrs.has(type(item)):
                    yield from _walk_fields(item, f"{child}/{index}")


def _objects(obj: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    yield pointer, obj
    for field in model_fields(type(obj)):
        value = getattr(obj, field.name)
        child = f"{pointer}/{wire_name(field)}"
        if attrs.has(type(value)):
            yield from _objects(value, child)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if attrs.has(type(item)):
                    yield from _objects(item, f"{child}/{index}")


def mutation_sites(obj: Any) -> list[Site]:
    """Every set member of every model object inside ``obj`` (an instance, not a dict)."""
    sites = []
    for pointer, node in _objects(obj):
        cls = type(node)
        hints = typing.get_type_hints(cls)
        required = flat_required(cls.__name__)
        for field in model_fields(cls):
            if getattr(node, field.name) is None:
                continue
            member = wire_name(field)
            sites.append(
                Site(
                    parent=pointer,
                    definition=cls.__name__,
                    member=member,
                    required=member in required,
                    discriminator=_single_literal(hints[field.name]),
                    schema=property_schema(cls.__name__, member),
                )
            )
    return sites


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _container(document: Any, pointer: str) -> Any:
    node = document
    for token in _tokens(pointer):
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def mutations_of(obj: Any) -> list[Mutation]:
    """
    Every single-place breakage of ``to_wire(obj)`` that the schema must reject: a required
    member deleted, a constrained member given a value of the wrong type, a discriminator
    given an unknown value, an undeclared member added to a closed object.
    """
    out = []
    for site in mutation_sites(obj):
        if site.required:
            out.append(_apply(obj, site, "delete"))
        if site.discriminator:
            out.append(_apply(obj, site, "discriminator"))
        if not is_unconstrained(site.schema) or rejects_null(site.schema):
            out.append(_apply(obj, site, "retype"))
    for pointer, node in _objects(obj):
        if getattr(type(node), "__wire_closed__", False):
            site = Site(pointer, type(node).__name__, "zzUnknownMember", False, False, {})
            out.append(_apply(obj, site, "unknown-member"))
    return out


def _apply(obj: Any, site: Site, kind: str) -> Mutation:
    document = json.loads(json.dumps(to_wire(obj)))
    holder = _container(document, site.parent)
    if kind == "delete":
        del holder[site.member]
        expected = site.parent
    elif kind == "discriminator":
        holder[site.member] = "NOT_A_KNOWN_KIND"
        expected = site.pointer
    elif kind == "retype":
        value = holder[site.member]
        if is_unconstrained(site.schema):
            holder[site.member] = None
        else:
            holder[site.member] = "wrong" if isinstance(value, bool) else True
        expected = site.pointer
    else:
        holder[site.member] = 1
        expected = site.parent
    return Mutation(kind=kind, site=site, document=document, expected_pointer=expected)


def mutations(obj_strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Mutation]:
    """One mutation of one drawn instance."""
    return obj_strategy.flatmap(lambda obj: st.sampled_from(mutations_of(obj)))


# --------------------------------------------------------------------------- any schema's documents
#
# :func:`instances` derives documents from aguikit's generated classes, so it cannot test
# aguikit's schema against another one: a member the classes lack is never drawn.  This
# derives valid documents from a JSON Schema document itself (the official 1.1 schema), over
# the keyword vocabulary that schema uses, and breaks them in one place without knowing the
# schema at all.  A keyword outside the vocabulary stops generation, naming it, so a newer
# schema cannot be half-generated in silence.

SCHEMA_ANNOTATIONS: Final = frozenset(
    {"$anchor", "$comment", "$id", "$schema", "$defs", "title", "description", "default"}
    | {"examples", "deprecated", "x-open", "x-since"}
)
"""Keywords that never change a verdict: generation ignores them."""

SCHEMA_VOCABULARY: Final = frozenset(
    {"$ref", "allOf", "oneOf", "not", "const", "enum", "type", "properties", "required"}
    | {"additionalProperties", "unevaluatedProperties", "items", "minItems", "minimum"}
    | {"maximum", "pattern", "contentEncoding"}
)
"""The validating keywords :func:`schema_documents` generates for."""

_REGEX_TOKENS: Final = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]|\$|\((?!\?)")
"""An escape, a character class, ``$``, or an opening capturing group."""


def ecma_regex(pattern: str, *, capturing: bool = True) -> str:
    """
    A JSON Schema ``pattern`` (ECMA-262) as a Python regex: ``$`` outside a character class
    is ``\\Z``, because ECMA's ``$`` never matches before a final newline and Python's does.
    ``capturing=False`` also makes every group non-capturing, which matches the same strings
    and lets hypothesis's ``from_regex`` skip its group bookkeeping (a tenth of a second a
    draw for the JSON pointer pattern).
    """
    swap = {"$": r"\Z", "(": "(" if capturing else "(?:"}
    return _REGEX_TOKENS.sub(lambda m: swap.get(m.group(), m.group()), pattern)


class _SchemaDocuments:
    """Strategies for the definitions of one schema document, built once per node."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = root["$defs"]
        self.built: dict[str, st.SearchStrategy[Any]] = {}

    def definition(self, name: str) -> st.SearchStrategy[Any]:
        if name not in self.built:
            self.built[name] = st.deferred(lambda: self.node(self.defs[name]))
        return self.built[name]

    def target(self, ref: str) -> Any:
        if not ref.startswith("#/$defs/"):
            raise TypeError(f"no strategy for the reference {ref!r}")
        return self.defs[ref.removeprefix("#/$defs/")]

    def parts(self, node: Any) -> list[Any]:
        """``node`` as the conjunction it is: its own keywords, its ``$ref`` and ``allOf``."""
        own = {k: v for k, v in node.items() if k not in ("$ref", "allOf")}
        out = [own]
        for part in ([{"$ref": node["$ref"]}] if "$ref" in node else []) + node.get("allOf", []):
            out += self.parts(self.target(part["$ref"]) if set(part) == {"$ref"} else part)
        return out

    def node(self, node: Any) -> st.SearchStrategy[Any]:
        if node is True or node == {}:
            return json_values
        if node is False:
            return st.nothing()
        unknown = set(node) - SCHEMA_VOCABULARY - SCHEMA_ANNOTATIONS
        if unknown:
            raise TypeError(f"no strategy for the keywords {sorted(unknown)}")
        parts = [
            {k: v for k, v in p.items() if k not in SCHEMA_ANNOTATIONS} for p in self.parts(node)
        ]
        merged = self.merge([p for p in parts if p])
        if merged.get("type") == "object" or "properties" in merged:
            return self.mapping(merged)
        if "oneOf" in merged:
            if len(merged) > 1:
                raise TypeError(f"no strategy for oneOf beside {sorted(set(merged) - {'oneOf'})}")
            return st.one_of([self.node(branch) for branch in merged["oneOf"]])
        return self.value(merged)

    @staticmethod
    def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
        """The keywords of a conjunction; ``properties`` and ``required`` accumulate, a
        ``const`` narrows an ``enum`` or ``type``, any other repeated keyword must agree."""
        out: dict[str, Any] = {}
        for part in parts:
            for key, value in part.items():
                if key == "properties":
                    props = out.setdefault("properties", {})
                    for name, schema in value.items():
                        props[name] = [*props.get(name, []), schema]
                elif key == "required":
                    out["required"] = sorted(set(out.get("required", [])) | set(value))
                elif key in out and out[key] != value:
                    raise TypeError(f"no strategy for {key!r} given twice: {out[key]!r}, {value!r}")
                else:
                    out[key] = value
        return out

    def member(self, schemas: list[Any]) -> st.SearchStrategy[Any]:
        return self.node(schemas[0] if len(schemas) == 1 else {"allOf": schemas})

    def mapping(self, node: dict[str, Any]) -> st.SearchStrategy[Any]:
        props: dict[str, list[Any]] = node.get("properties", {})
        required = set(node.get("required", []))
        closed = node.get("unevaluatedProperties") is False
        closed |= node.get("additionalProperties") is False
        extra = (
            st.dictionaries(json_text.filter(lambda k: k not in props), json_values, max_size=2)
            if not closed
            else st.just({})
        )
        fixed = {name: self.member(props[name]) for name in props if name in required}
        optional = {name: self.member(props[name]) for name in props if name not in required}
        documents = st.fixed_dictionaries(fixed, optional=optional)
        return st.tuples(extra, documents).map(lambda pair: {**pair[0], **pair[1]})

    def value(self, node: dict[str, Any]) -> st.SearchStrategy[Any]:
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        if node.get("not") == {"type": "null"} and set(node) == {"not"}:
            return json_non_null
        if "not" in node:
            raise TypeError(f"no strategy for not: {node['not']!r}")
        kind = node.get("type")
        if kind == "string":
            if "pattern" in node:
                return st.from_regex(
                    ecma_regex(node["pattern"]), alphabet=st.characters(codec="utf-8")
                )
            return base64_text if node.get("contentEncoding") == "base64" else json_text
        if kind == "integer":
            return integers_for(node)
        if kind == "number":
            return numbers_for(node)
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        if kind == "array":
            items = self.node(node.get("items", True))
            low = node.get("minItems", 0)
            return st.lists(items, min_size=low, max_size=max(low, 3))
        if kind is None:
            return json_values
        raise TypeError(f"no strategy for type {kind!r}")


_SCHEMAS: dict[int, tuple[dict[str, Any], _SchemaDocuments]] = {}
"""Per schema document (kept alive here, so its ``id`` is not reused): its strategies."""


def schema_documents(root: dict[str, Any], definition: str) -> st.SearchStrategy[Any]:
    """
    Documents valid against ``root``'s definition ``definition``, derived from the schema
    text alone (no generated class involved): required members always, optional ones at
    random, undeclared members on objects the schema leaves open.

    Raises:
        TypeError: (on drawing) the definition uses a keyword outside
            :data:`SCHEMA_VOCABULARY`, or a composition this generator does not model.
    """
    if id(root) not in _SCHEMAS:
        _SCHEMAS[id(root)] = (root, _SchemaDocuments(root))
    return _SCHEMAS[id(root)][1].definition(definition)


_OTHER_KINDS: Final = (None, True, 0, 0.5, -1, MAX_SAFE_INT + 1, "", "\n", "zzNotAKnown", [], {})
"""What a value is replaced by: every JSON kind, plus values just outside the schema's usual
bounds (a negative count, an unsafe integer, a fraction, an empty or unknown name) and a lone
newline (where regex dialects disagree about ``$``)."""


def _rebuilt(node: Any, path: tuple[Any, ...], change: Callable[[Any], list[Any]]) -> Any:
    """``node`` with the value at ``path`` replaced by the values ``change(value)`` returns
    (none deletes it, two double an array item); everything off the path is shared."""
    if not path:
        (only,) = change(node)
        return only
    key = path[0]
    if len(path) > 1:
        change = functools.partial(lambda rest, f, v: [_rebuilt(v, rest, f)], path[1:], change)
    if isinstance(node, dict):
        out = dict(node)
        values = change(out.pop(key))
        return {k: (values[0] if k == key else v) for k, v in node.items() if k != key or values}
    items = list(node)
    items[key : key + 1] = change(items[key])
    return items


def _locations(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, node
    children = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, child in children:
        yield from _locations(child, (*path, key))


def _changes(path: tuple[Any, ...], value: Any) -> list[Callable[[Any], list[Any]]]:
    out: list[Callable[[Any], list[Any]]] = [
        functools.partial(lambda o, _: [o], other)
        for other in _OTHER_KINDS
        if not (type(other) is type(value) and other == value)
    ]
    if isinstance(value, dict):
        out.append(lambda v: [{**v, "zzUnknownMember": 1}])
    if path:
        out.append(lambda _: [])
    if path and isinstance(path[-1], int):
        out.append(lambda v: [v, v])
    return out


def breakages(document: Any) -> st.SearchStrategy[Any]:
    """
    ``document`` broken in one place, knowing no schema: at a drawn location, the value
    replaced by one of :data:`_OTHER_KINDS` it is not, a member or array item deleted, an
    array item doubled, or an undeclared member added to an object.  The original is
    not touched.
    """
    locations = list(_locations(document))
    return st.sampled_from(locations).flatmap(
        lambda spot: st.sampled_from(_changes(*spot)).map(
            lambda change: _rebuilt(document, spot[0], change)
        )
    )


# --------------------------------------------------------------------------- legal streams
#
# A grammar of streams the verifier must accept: several sequential runs, each an
# interleaving of independent "processes" (a text message, a tool call narrated inside its
# message, a reasoning span around a reasoning message, a step around nested work, a
# subagent around its own tagged work, a deprecated thinking block, unordered state,
# activity, raw and custom events).  Each process is internally ordered; the interleaving
# between processes is drawn at random, which is exactly the freedom the protocol grants.


class _Ids:
    """Fresh ids, unique across the whole stream, so no process collides with another."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"


def _thinking(cls: type, **kwargs: Any) -> Any:
    with constructing_from_wire():
        return cls(**kwargs)


def interleave(draw: Any, sequences: list[list[Any]]) -> list[Any]:
    """A random merge of ``sequences`` that keeps each one's internal order."""
    pending = [list(s) for s in sequences if s]
    positions = [0] * len(pending)
    live = list(range(len(pending)))
    out: list[Any] = []
    while live:
        pick = live[draw(st.integers(0, len(live) - 1))] if len(live) > 1 else live[0]
        out.append(pending[pick][positions[pick]])
        positions[pick] += 1
        if positions[pick] == len(pending[pick]):
            live.remove(pick)
    return out


def _maybe_tag(draw: Any, tag: str | None) -> str | None:
    # An untagged continuation agrees with any owner, so continuations drop the tag at will.
    return tag if tag is None or draw(st.booleans()) else None


_PROCESS_KINDS: Final = (
    "text",
    "narrated-tool",
    "tool",
    "reasoning",
    "activity",
    "unordered",
    "step",
    "subagent",
    "thinking",
)


def _text_body(draw: Any, mid: str, tag: str | None) -> list[Any]:
    body: list[Any] = [
        models.TextMessageContentEvent(
            message_id=mid, delta=draw(json_text), subagent_run_id=_maybe_tag(draw, tag)
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    body.append(models.TextMessageEndEvent(message_id=mid, subagent_run_id=_maybe_tag(draw, tag)))
    return body


def _tool(draw: Any, ids: _Ids, tag: str | None, parent: str | None) -> list[Any]:
    cid = ids("c")
    # Under a parent message, an untagged start inherits the message's owner.
    start_tag = _maybe_tag(draw, tag) if parent is not None else tag
    seq: list[Any] = [
        models.ToolCallStartEvent(
            tool_call_id=cid,
            tool_call_name="lookup",
            parent_message_id=parent,
            subagent_run_id=start_tag,
        )
    ]
    # The fragments join into JSON text, as a call's arguments are (aguikit check: K008).
    fragments = ([], ["{}"], ['{"q":', "1}"])[draw(st.integers(0, 2))]
    seq += [
        models.ToolCallArgsEvent(
            tool_call_id=cid, delta=fragment, subagent_run_id=_maybe_tag(draw, tag)
        )
        for fragment in fragments
    ]
    seq.append(models.ToolCallEndEvent(tool_call_id=cid, subagent_run_id=_maybe_tag(draw, tag)))
    if draw(st.booleans()):
        seq.append(
            models.ReasoningEncryptedValueEvent(
                subtype=models.ReasoningEncryptedValueSubtype.TOOL_CALL,
                entity_id=cid,
                encrypted_value="b3BhcXVl",
                subagent_run_id=_maybe_tag(draw, tag),
            )
        )
    if draw(st.booleans()):
        seq.append(
            models.ToolCallResultEvent(
                message_id=ids("tm"), tool_call_id=cid, content="ok", subagent_run_id=tag
            )
        )
    return seq


def _process(
    draw: Any, ids: _Ids, kind: str, tag: str | None, depth: int, run: dict[str, Any]
) -> list[Any]:
    if kind == "text":
        mid = ids("m")
        start = models.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=tag)
        return [start, *_text_body(draw, mid, tag)]
    if kind == "narrated-tool":
        mid = ids("m")
        start = models.TextMessageStartEvent(message_id=mid, role="assistant", subagent_run_id=tag)
        return [start, *interleave(draw, [_text_body(draw, mid, tag), _tool(draw, ids, tag, mid)])]
    if kind == "tool":
        return _tool(draw, ids, tag, None)
    if kind == "reasoning":
        mid = ids("rm")
        span = mid if draw(st.booleans()) else ids("span")
        seq: list[Any] = [
            models.ReasoningStartEvent(message_id=span, subagent_run_id=tag),
            models.ReasoningMessageStartEvent(message_id=mid, subagent_run_id=tag),
        ]
        seq += [
            models.ReasoningMessageContentEvent(
                message_id=mid, delta="hmm", subagent_run_id=_maybe_tag(draw, tag)
            )
            for _ in range(draw(st.integers(0, 2)))
        ]
        seq.append(
            models.ReasoningMessageEndEvent(message_id=mid, subagent_run_id=_maybe_tag(draw, tag))
        )
        seq.append(
            models.ReasoningEncryptedValueEvent(
                subtype=models.ReasoningEncryptedValueSubtype.MESSAGE,
                entity_id=mid,
                encrypted_value="b3BhcXVl",
                subagent_run_id=_maybe_tag(draw, tag),
            )
        )
        seq.append(models.ReasoningEndEvent(message_id=span, subagent_run_id=_maybe_tag(draw, tag)))
        return seq
    if kind == "activity":
        aid = ids("a")
        return [
            models.ActivitySnapshotEvent(
                message_id=aid, activity_type="plan", content={}, subagent_run_id=tag
            ),
            models.ActivityDeltaEvent(
                message_id=aid,
                activity_type="plan",
                patch=[],
                subagent_run_id=_maybe_tag(draw, tag),
            ),
        ]
    if kind == "unordered":
        return [
            draw(
                st.sampled_from(
                    [
                        models.StateSnapshotEvent(snapshot={"n": 1}, subagent_run_id=tag),
                        models.StateDeltaEvent(delta=[], subagent_run_id=tag),
                        models.CustomEvent(name="x", value=1, subagent_run_id=tag),
                        models.RawEvent(event={"k": 1}, subagent_run_id=tag),
                    ]
                )
            )
        ]
    if kind == "step":
        # Step names are counted per owner, so a parent and a subagent may well both have
        # "step-0" open at once: steps are scoped to the agent that opened them.
        counters = run.setdefault("steps", {})
        name = f"step-{counters.get(tag, 0)}"
        counters[tag] = counters.get(tag, 0) + 1
        inner = _processes(draw, ids, tag, depth + 1, run)
        return [
            models.StepStartedEvent(step_name=name, subagent_run_id=tag),
            *interleave(draw, inner),
            models.StepFinishedEvent(step_name=name, subagent_run_id=tag),
        ]
    if kind == "subagent":
        sid = ids("s")
        inner = _processes(draw, ids, sid, depth + 1, run)
        end: Any = (
            models.SubagentFinishedEvent(subagent_run_id=sid)
            if draw(st.booleans())
            else models.SubagentErrorEvent(subagent_run_id=sid, message="gave up")
        )
        return [
            models.SubagentStartedEvent(
                subagent_run_id=sid, name="helper", parent_subagent_run_id=tag
            ),
            *interleave(draw, inner),
            end,
        ]
    assert kind == "thinking"
    return [
        _thinking(models.ThinkingStartEvent),
        _thinking(models.ThinkingTextMessageStartEvent),
        _thinking(models.ThinkingTextMessageContentEvent, delta="hmm"),
        _thinking(models.ThinkingTextMessageEndEvent),
        _thinking(models.ThinkingEndEvent),
    ]


def _processes(
    draw: Any, ids: _Ids, tag: str | None, depth: int, run: dict[str, Any]
) -> list[list[Any]]:
    kinds = [
        k
        for k in run.get("kinds", _PROCESS_KINDS)
        if (depth < 2 or k not in ("step", "subagent"))
        # The thinking block has no id: one per run, at the parent's level.
        and (k != "thinking" or (tag is None and not run.get("thinking")))
    ]
    chosen = draw(
        st.lists(st.sampled_from(kinds), min_size=0 if depth else 1, max_size=3 if depth else 5)
    )
    if "thinking" in chosen:
        chosen = [k for k in chosen if k != "thinking"] + ["thinking"]
        run["thinking"] = True
    return [_process(draw, ids, kind, tag, depth, run) for kind in chosen]


def _outcome(draw: Any, ids: _Ids) -> Any:
    choice = draw(st.sampled_from(["none", "success", "interrupt"]))
    if choice == "none":
        return None
    if choice == "success":
        return models.RunFinishedSuccessOutcome()
    return models.RunFinishedInterruptOutcome(
        interrupts=[
            models.Interrupt(id=ids("i"), reason="approval") for _ in range(draw(st.integers(1, 2)))
        ]
    )


@st.composite
def legal_streams(
    draw: Any,
    *,
    max_runs: int = 3,
    allow_run_errors: bool = True,
    kinds: tuple[str, ...] = _PROCESS_KINDS,
) -> list[Any]:
    """
    Typed event streams every AG-UI consumer must accept, drawn from the grammar above.

    Args:
        max_runs: How many sequential runs a stream may carry.
        allow_run_errors: Whether a run may end with ``RUN_ERROR`` (abandoning whatever it
            had open), or a late ``RUN_ERROR`` may follow ``RUN_FINISHED``.  Turn it off
            when a test needs every opened entity to be closed in the stream.
        kinds: The processes a run is drawn from (any of ``_PROCESS_KINDS``), to weight a
            test towards some (subagents, reasoning); nested levels draw from them too.
    """
    ids = _Ids()
    events: list[Any] = []
    for _ in range(draw(st.integers(1, max_runs))):
        run_id = ids("r")
        run: dict[str, Any] = {"kinds": kinds}
        body = interleave(draw, _processes(draw, ids, None, 0, run))
        events.append(models.RunStartedEvent(thread_id="t", run_id=run_id))
        if allow_run_errors and draw(st.integers(0, 4)) == 0:
            cut = draw(st.integers(0, len(body)))
            events += body[:cut]
            events.append(models.RunErrorEvent(message="failed"))
            continue
        events += body
        events.append(
            models.RunFinishedEvent(thread_id="t", run_id=run_id, outcome=_outcome(draw, ids))
        )
        if allow_run_errors and draw(st.integers(0, 6)) == 0:
            events.append(models.RunErrorEvent(message="late failure"))
    return events


# --------------------------------------------------------------------------- chunk forms

GRAPHEME_HAZARDS: Final = ("e\u0301", "\U0001f468\u200d\U0001f469", "\u200d", "\u0301", "a", " ")
"""Pieces whose split points are where a careless assembler breaks text: a combining mark
after its base, a ZWJ emoji sequence, a lone joiner and a lone mark."""


@st.composite
def split_texts(draw: Any) -> tuple[str, list[str]]:
    """A text built from grapheme hazards and plain characters, and an arbitrary split of it
    into deltas at code-point boundaries (inside combining sequences and ZWJ emoji too)."""
    pieces = draw(st.lists(st.sampled_from(GRAPHEME_HAZARDS) | json_text, max_size=8))
    text = "".join(pieces)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *cuts, len(text)]
    return text, [text[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]


@attrs.frozen
class Utterance:
    """One streamed entity of a conversation, before it is written as events."""

    kind: str
    """``text``, ``tool`` or ``reasoning``."""
    ident: str
    deltas: tuple[str, ...]
    role: str | None = None
    tool_name: str | None = None
    parent: str | None = None
    asides: tuple[tuple[int, Any], ...] = ()
    """Events between two deltas, after delta ``i``: ``RAW`` stands aside from chunk
    assembly, a ``STATE_DELTA`` ends the chunk stream (so :func:`chunk_form` names the item
    again after one, as a producer must)."""


@st.composite
def conversations(draw: Any) -> list[list[Utterance]]:
    """Runs of sequential utterances: the same conversation, writable in either form."""
    ids = _Ids()
    runs: list[list[Utterance]] = []
    state_keys = 0
    for _ in range(draw(st.integers(1, 2))):
        run: list[Utterance] = []
        last_text: str | None = None
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["text", "tool", "reasoning"]))
            deltas = tuple(draw(st.lists(json_text, max_size=3)))
            asides: list[tuple[int, Any]] = []
            for position in draw(st.lists(st.integers(0, max(len(deltas) - 1, 0)), max_size=2)):
                state_keys += 1
                asides.append(
                    (
                        position,
                        draw(
                            st.sampled_from(
                                [
                                    models.StateDeltaEvent(
                                        delta=[
                                            models.AddOperation(
                                                path=f"/k{state_keys}", value=state_keys
                                            )
                                        ]
                                    ),
                                    models.RawEvent(event={"n": state_keys}),
                                ]
                            )
                        ),
                    )
                )
            if kind == "text":
                last_text = ids("m")
                run.append(
                    Utterance(
                        "text",
                        last_text,
                        deltas,
                        role=draw(st.sampled_from([None, "assistant", "user"])),
                        asides=tuple(asides),
                    )
                )
            elif kind == "tool":
                run.append(
                    Utterance(
                        "tool",
                        ids("c"),
                        deltas,
                        tool_name="lookup",
                        parent=last_text if draw(st.booleans()) else None,
                        asides=tuple(asides),
                    )
                )
            else:
                run.append(Utterance("reasoning", ids("r"), deltas, asides=tuple(asides)))
        runs.append(run)
    return runs


def _asides_after(utterance: Utterance, position: int) -> list[Any]:
    return [event for at, event in utterance.asides if at == position]


def explicit_form(runs: list[list[Utterance]]) -> list[Any]:
    """The conversation as explicit start/content/end events, one run after another."""
    out: list[Any] = []
    for number, run in enumerate(runs):
        out.append(models.RunStartedEvent(thread_id="t", run_id=f"run{number}"))
        if number == 0:
            out.append(models.StateSnapshotEvent(snapshot={}))
        for u in run:
            if u.kind == "text":
                out.append(models.TextMessageStartEvent(message_id=u.ident, role=u.role))
            elif u.kind == "tool":
                out.append(
                    models.ToolCallStartEvent(
                        tool_call_id=u.ident, tool_call_name="lookup", parent_message_id=u.parent
                    )
                )
            else:
                out.append(models.ReasoningMessageStartEvent(message_id=u.ident))
            for position, delta in enumerate(u.deltas):
                if u.kind == "text":
                    out.append(models.TextMessageContentEvent(message_id=u.ident, delta=delta))
                elif u.kind == "tool":
                    out.append(models.ToolCallArgsEvent(tool_call_id=u.ident, delta=delta))
                else:
                    out.append(models.ReasoningMessageContentEvent(message_id=u.ident, delta=delta))
                out += _asides_after(u, position)
            if not u.deltas:
                out += _asides_after(u, 0)
            if u.kind == "text":
                out.append(models.TextMessageEndEvent(message_id=u.ident))
            elif u.kind == "tool":
                out.append(models.ToolCallEndEvent(tool_call_id=u.ident))
            else:
                out.append(models.ReasoningMessageEndEvent(message_id=u.ident))
        out.append(models.RunFinishedEvent(thread_id="t", run_id=f"run{number}"))
    return out


def chunk_form(runs: list[list[Utterance]]) -> list[Any]:
    """
    The same conversation as chunks: ids and names on the first chunk only, no ends.

    An aside that closes a chunk stream (a state delta: the streaming page's "Closing a
    chunk stream") makes the next chunk a first one again, naming the item (and what
    opened it) once more; the item is re-opened and the content continues it.
    """
    out: list[Any] = []
    for number, run in enumerate(runs):
        out.append(models.RunStartedEvent(thread_id="t", run_id=f"run{number}"))
        if number == 0:
            out.append(models.StateSnapshotEvent(snapshot={}))
        for u in run:
            deltas: list[str | None] = list(u.deltas) or [None]
            first = True
            for position, delta in enumerate(deltas):
                if u.kind == "text":
                    out.append(
                        models.TextMessageChunkEvent(
                            message_id=u.ident if first else None,
                            role=u.role if first else None,
                            delta=delta,
                        )
                    )
                elif u.kind == "tool":
                    out.append(
                        models.ToolCallChunkEvent(
                            tool_call_id=u.ident if first else None,
                            tool_call_name="lookup" if first else None,
                            parent_message_id=u.parent if first else None,
                            delta=delta,
                        )
                    )
                else:
                    out.append(
                        models.ReasoningMessageChunkEvent(
                            message_id=u.ident if first else None, delta=delta
                        )
                    )
                asides = _asides_after(u, position)
                out += asides
                first = any(not isinstance(event, models.RawEvent) for event in asides)
        out.append(models.RunFinishedEvent(thread_id="t", run_id=f"run{number}"))
    return out
