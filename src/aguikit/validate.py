"""
Validate raw AG-UI documents against the bundled JSON Schema.

Two problems shape this module.

*Precision.*  The schema's ``Event`` is a ``oneOf`` with a branch per event type.
Validated as a union, a document with one wrong field fails every branch, and the report
says only that it matched none of them.  So a document is validated against the one
definition its discriminator selects (``type`` for events, ``role`` for messages, ``op``
for patch operations), and discriminated unions nested inside it (a message inside
``MESSAGES_SNAPSHOT``, a part inside a user message) are resolved the same way when
reporting.

*Speed.*  The ``jsonschema`` package costs tens of microseconds per event even against one
definition.  The verdict is therefore taken by ``jsonschema-rs`` when it is installed
(well under a microsecond for a typical event), and the ``jsonschema`` package is consulted
only for a document that failed, to describe *why* with its richer error model.  A test
holds the two to the same verdicts over the whole corpus.

*Bounded explanations.*  The explainer is slow (a millisecond and more per message of a
``RunAgentInput``: the ``oneOf`` of messages tries every kind), and the document it
explains may come from anyone: a request body of wrong-typed messages once held a
server's event loop for seconds.  So it never walks what the fast verdict can clear: an
array of definitions (a request's messages, a snapshot's messages, a message's content
parts, a patch) is taken out of the document, each element is judged by ``jsonschema-rs``
and only a failing one is explained, element by element; and it stops at 100 issues
without computing the rest.  What the slow validator sees is the shell of each failing
object, so the cost follows what is wrong, not how much was sent.

Two strictnesses exist because the protocol has two audiences.  *Strict* is the schema as
written: objects are exact, and an undeclared member is a violation, which is what a
producer's test suite and ``aguikit check`` want.  *Tolerant* is what a receiver applies
before parsing: a newer producer may add members, so undeclared members are allowed (and
kept by the wire converter), while every declared member must still be well-formed.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from importlib import resources
from itertools import islice
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # the explainer is imported when a document fails, not at start-up
    import jsonschema
    from jsonschema.exceptions import ValidationError

from ._generated.registry import EVENT_CLASSES, UNIONS
from .errors import SchemaIssue, SchemaValidationError, UnknownEventTypeError, short_repr
from .jsonio import escape_pointer

_rs: Any
try:
    import jsonschema_rs as _rs
except ImportError:  # pragma: no cover - the accelerator is optional at runtime
    _rs = None

__all__ = [
    "definitions",
    "fast_check",
    "is_valid",
    "iter_schema_errors",
    "load_schema",
    "raw_verdict",
    "suggest_event_type",
    "validate",
    "validate_event",
    "validating_parser",
]

_UNREADABLE: Final = (ValueError, TypeError, OverflowError, RecursionError)
"""What jsonschema-rs raises on a document it cannot convert at all (``NaN``, integers past
its range, deep nesting): no verdict, so the explaining path decides."""

_MAX_ISSUES: Final = 100
"""A hostile document can fail a keyword per element; a report stops counting here."""


@cache
def load_schema() -> dict[str, Any]:
    """The bundled schema (all definitions, local references), as shipped in the package."""
    text = resources.files("aguikit._generated").joinpath("schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def definitions() -> list[str]:
    """Every definition name the bundled schema has, sorted."""
    return sorted(load_schema()["$defs"])


def _tolerant(node: Any) -> Any:
    """A copy of a schema fragment with object exactness removed, everything else kept."""
    if isinstance(node, dict):
        return {
            key: _tolerant(value)
            for key, value in node.items()
            if not (key in ("unevaluatedProperties", "additionalProperties") and value is False)
        }
    if isinstance(node, list):
        return [_tolerant(item) for item in node]
    return node


@cache
def _root(strict: bool) -> dict[str, Any]:
    schema = load_schema()
    return schema if strict else _tolerant(schema)


def _definition_schema(definition: str, strict: bool) -> dict[str, Any]:
    root = _root(strict)
    if definition not in root["$defs"]:
        import difflib  # only for a name that is not there

        close = difflib.get_close_matches(definition, root["$defs"], n=3)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise KeyError(f"the schema has no definition {definition!r}{hint}")
    return {
        "$schema": root["$schema"],
        "$id": root["$id"],
        "$defs": root["$defs"],
        "$ref": f"#/$defs/{definition}",
    }


_ECMA_END: Final = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]|\$")
"""An escape, a character class, or a ``$`` outside both: the one anchor whose meaning differs
between ECMA-262 (the dialect JSON Schema names for ``pattern``) and Python's ``re``."""


@cache
def _ecma_regex(pattern: str) -> re.Pattern[str]:
    """
    ``pattern`` read as ECMA-262 reads it, compiled for Python: ``$`` becomes ``\\Z``.

    In ECMA-262 (and so in jsonschema-rs and in ajv, the validator of upstream's schema
    suite) ``$`` matches only at the end of the text; Python's ``$`` also matches before a
    final newline, so ``jsonschema`` alone accepts ``"\\n"`` as a JSON pointer.
    """
    return re.compile(_ECMA_END.sub(lambda m: r"\Z" if m.group() == "$" else m.group(), pattern))


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """The ``pattern`` keyword with ECMA-262's anchors, so the explanation and the verdict agree."""
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and _ecma_regex(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _explaining_class(base: Any) -> Any:
    import jsonschema.validators

    return jsonschema.validators.extend(base, {"pattern": _ecma_pattern})  # type: ignore[no-untyped-call]


@cache
def _python_validator(definition: str, strict: bool) -> jsonschema.protocols.Validator:
    # jsonschema explains a failure; a valid stream never needs it, so a command that reads
    # one does not pay for its import (a tenth of a second) at start-up.
    import jsonschema.validators

    schema = _definition_schema(definition, strict)
    cls = _explaining_class(jsonschema.validators.validator_for(schema))
    validator: jsonschema.protocols.Validator = cls(schema)
    return validator


@cache
def _rust_registry(strict: bool) -> Any:
    """The whole schema handed to jsonschema-rs once: converting it per definition cost a
    millisecond for each event type a stream uses, at every start of ``aguikit check``."""
    root = _root(strict)
    return _rs.Registry([(root["$id"], root)])


@cache
def _rust_validator(definition: str, strict: bool) -> Any:
    if _rs is None:
        return None
    schema = _definition_schema(definition, strict)
    reference = {"$schema": schema["$schema"], "$ref": f"{schema['$id']}{schema['$ref']}"}
    return _rs.validator_for(reference, registry=_rust_registry(strict))


def _discriminators() -> dict[str, tuple[str, dict[str, str]]]:
    """Every discriminated union: its property and a map from value to member definition
    (generated by ``codegen/`` as :data:`aguikit._generated.registry.UNIONS`)."""
    return UNIONS


def suggest_event_type(value: object) -> str | None:
    """The known event type closest to ``value`` (``runStarted`` → ``RUN_STARTED``)."""
    if not isinstance(value, str):
        return None
    normal = "".join(ch for ch in value if ch.isalnum()).upper()
    for known in EVENT_CLASSES:
        if known.replace("_", "") == normal:
            return known
    import difflib  # only for a type that is not there

    close = difflib.get_close_matches(value.upper(), EVENT_CLASSES, n=1, cutoff=0.6)
    return close[0] if close else None


def _pointer(parts: Any) -> str:
    return "".join("/" + escape_pointer(p) for p in parts)


def _select(definition: str, instance: Any) -> tuple[str, SchemaIssue | None]:
    """
    Resolve a discriminated union to the member ``instance`` names, or an issue saying why
    it names none.
    """
    union = _discriminators().get(definition)
    if union is None:
        return definition, None
    prop, table = union
    if not isinstance(instance, Mapping):
        kind = type(instance).__name__ if instance is not None else "null"
        return definition, SchemaIssue("", "type", f"expected an object, got {kind}", "")
    value = instance.get(prop)
    member = table.get(value) if isinstance(value, str) else None
    if member is not None:
        return member, None
    schema_path = f"/$defs/{definition}/oneOf"
    if prop not in instance:
        return definition, SchemaIssue(
            "", "required", f"{prop!r} is a required property", schema_path
        )
    allowed = ", ".join(repr(v) for v in table)
    message = f"{short_repr(value)} is not a known {prop}; expected one of {allowed}"
    if definition == "Event":
        suggestion = suggest_event_type(value)
        message = f"unknown event type {short_repr(value)}" + (
            f"; did you mean {suggestion!r}?" if suggestion else ""
        )
    return definition, SchemaIssue(f"/{prop}", "enum", message, schema_path)


_PLAIN_ARRAY: Final = frozenset({"type", "items", "description", "title", "$anchor"})
"""An array schema with nothing but these constrains its elements one by one, so its
elements can be judged apart and an empty array stands for the rest of the document."""


def _item_definition(schema: Any, defs: Mapping[str, Any]) -> str | None:
    """The definition each element of an array ``schema`` must match (following one
    ``$ref``), when the array says nothing else about its elements; else ``None``."""
    if not isinstance(schema, dict):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and "type" not in schema:
        schema = defs.get(ref[len("#/$defs/") :])
        if not isinstance(schema, dict):
            return None
    items = schema.get("items")
    if schema.get("type") != "array" or not set(schema) <= _PLAIN_ARRAY:
        return None
    if not isinstance(items, dict) or set(items) - {"$ref", "description"}:
        return None
    target = items.get("$ref")
    if not isinstance(target, str) or not target.startswith("#/$defs/"):
        return None
    return target[len("#/$defs/") :]


@cache
def _arrays(member: str, strict: bool) -> dict[str, str]:
    """
    The members of definition ``member`` holding an array of one definition, by name:
    each such member's elements are judged one by one rather than explained in bulk.  A
    member that is such an array in one branch of a ``oneOf`` and no array in the others
    (a message's ``content``: text or a list of parts) counts, for a list.
    """
    defs = _root(strict)["$defs"]
    found: dict[str, str] = {}
    for name, schema in defs[member].get("properties", {}).items():
        item = _item_definition(schema, defs)
        if item is None and isinstance(schema, dict) and isinstance(schema.get("oneOf"), list):
            arrays = [_item_definition(branch, defs) for branch in schema["oneOf"]]
            others = [b for b, a in zip(schema["oneOf"], arrays, strict=True) if a is None]
            if len(others) == len(arrays) - 1 and all(
                isinstance(b, dict) and b.get("type") not in (None, "array") for b in others
            ):
                item = next(a for a in arrays if a is not None)
        if item is not None:
            found[name] = item
    return found


@cache
def _rust_array_validator(item: str, strict: bool) -> Any:
    """jsonschema-rs for an array of ``item``: one call judges a whole run of elements."""
    if _rs is None:
        return None
    root = _root(strict)
    reference = f"{root['$id']}#/$defs/{item}"
    schema = {"$schema": root["$schema"], "type": "array", "items": {"$ref": reference}}
    return _rs.validator_for(schema, registry=_rust_registry(strict))


_FEW: Final = 8
"""Elements judged one by one rather than halved again."""


def _refused(elements: list[Any], item: str, strict: bool) -> Iterator[int]:
    r"""
    The indexes of the ``elements`` that are not valid ``item``\ s, in order, lazily.

    Found by halving: a run of elements the fast verdict accepts in one call is skipped
    whole, and a refused run is split until the refused elements are found, so the
    Python side makes a few dozen calls whatever the number of elements (judging 25,000
    parts one call each cost more than the verdict on the whole body).  Without the
    accelerator, each element is judged in turn.
    """
    check = _rust_array_validator(item, strict)

    def clear(low: int, high: int) -> bool:
        try:
            return bool(check.is_valid(elements[low:high]))
        except _UNREADABLE:  # no verdict: the elements are judged one by one below
            return False

    runs: list[tuple[int, int, bool]] = [(0, len(elements), False)]  # (low, high, refused)
    while runs:
        low, high, refused = runs.pop()
        if check is not None and not refused and clear(low, high):
            continue
        if check is None or high - low <= _FEW:
            yield from (
                i for i in range(low, high) if not is_valid(elements[i], item, strict=strict)
            )
            continue
        middle = (low + high) // 2
        left_clear = clear(low, middle)
        runs.append((middle, high, left_clear))  # a clear left half: the refusal is right
        if not left_clear:
            runs.append((low, middle, True))


def _order(error: ValidationError) -> tuple[bool, list[str], bool]:
    # A member that fails its own schema also counts as "unevaluated"; the failure of the
    # member itself is the useful report, so exactness complaints go last.
    return (
        error.validator == "unevaluatedProperties",
        list(map(str, error.absolute_path)),
        error.validator != "required",
    )


def _issues(
    definition: str, instance: Any, strict: bool, prefix: str, depth: int = 0
) -> Iterator[SchemaIssue]:
    member, problem = _select(definition, instance)
    if problem is not None:
        yield SchemaIssue(
            prefix + problem.pointer, problem.keyword, problem.message, problem.schema_path
        )
        return
    # The arrays of definitions come out of the document: the slow validator explains
    # the shell left (each emptied array still satisfies its schema), and each element
    # the fast verdict refuses is explained on its own, in document order.
    shell = instance
    taken: list[tuple[str, str, list[Any]]] = []
    if isinstance(instance, dict) and depth < 8:
        for name, item in _arrays(member, strict).items():
            value = instance.get(name)
            if isinstance(value, list) and value:
                if shell is instance:
                    shell = dict(instance)
                shell[name] = []
                taken.append((name, item, value))
    validator = _python_validator(member, strict)
    try:
        # At most one more than a report holds: the rest is never computed.
        errors = deque(sorted(islice(validator.iter_errors(shell), _MAX_ISSUES + 1), key=_order))
    except RecursionError:
        # The pure-Python validator recurses (and formats reprs) through deep values even
        # where the schema does not constrain them; the Rust one does not.  Trust its
        # verdict when there is one, and otherwise report the depth itself.
        rust = _rust_validator(member, strict)
        try:
            clear = rust is not None and bool(rust.is_valid(shell))
        except _UNREADABLE:
            clear = False
        if not clear:
            yield SchemaIssue(prefix, "depth", "document is nested too deeply to validate", "")
            return
        errors = deque()
    for name, item, elements in sorted(taken):
        while errors and _order(errors[0]) < (False, [name], False):
            yield from _describe(errors.popleft(), strict, prefix, depth)
        at = f"{prefix}/{escape_pointer(name)}/"
        for index in _refused(elements, item, strict):
            yield from _issues(item, elements[index], strict, f"{at}{index}", depth + 1)
    for error in errors:
        yield from _describe(error, strict, prefix, depth)


def _describe(
    error: ValidationError, strict: bool, prefix: str, depth: int
) -> Iterator[SchemaIssue]:
    pointer = prefix + _pointer(error.absolute_path)
    if error.validator == "oneOf" and depth < 8:
        union = _union_name(error.schema)
        if union is not None:
            # A nested discriminated union: report against the member the instance names.
            yield from _issues(union, error.instance, strict, pointer, depth + 1)
            return
        if error.context:
            # An undiscriminated choice (text or a list of parts): explain the branch whose
            # JSON type the instance has, else the closest one.
            from jsonschema.exceptions import best_match

            yield from _describe(best_match(_typed_branch(error)), strict, prefix, depth + 1)
            return
    message = error.message
    if len(message) > 300:
        message = message[:297] + "..."
    yield SchemaIssue(pointer, str(error.validator), message, _pointer(error.absolute_schema_path))


def _typed_branch(error: ValidationError) -> list[ValidationError]:
    """
    The errors of the one ``oneOf`` branch the instance's JSON type selects, when exactly
    one branch did not fail on type at its root; otherwise all of them.
    """
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context or ():
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    typed = [
        errors
        for errors in branches.values()
        if not any(e.validator == "type" and not e.relative_path for e in errors)
    ]
    return typed[0] if len(typed) == 1 else list(error.context or ())


@cache
def _union_refs() -> dict[str, str]:
    defs = load_schema()["$defs"]
    return {json.dumps(defs[name]["oneOf"], sort_keys=True): name for name in _discriminators()}


def _union_name(schema: Any) -> str | None:
    if not isinstance(schema, dict) or "oneOf" not in schema:
        return None
    return _union_refs().get(json.dumps(schema["oneOf"], sort_keys=True))


def iter_schema_errors(
    data: Any, definition: str = "Event", *, strict: bool = True
) -> Iterator[SchemaIssue]:
    """
    Yield every way ``data`` violates ``definition``, most specific first.

    For a discriminated union (``Event``, ``Message``, ``ContentPart``...) the document is
    checked against the member its discriminator selects, so the issues name the field
    that is wrong instead of every branch it did not match.

    Args:
        data: A decoded JSON document.
        definition: Any definition name of the bundled schema (see :func:`definitions`).
        strict: ``False`` allows members the schema does not declare (receiver mode).

    Raises:
        KeyError: ``definition`` is not a definition of the schema (a caller bug).
    """
    _definition_schema(definition, strict)  # raise early for an unknown definition
    for count, issue in enumerate(_issues(definition, data, strict, "")):
        if count >= _MAX_ISSUES:
            yield SchemaIssue("", "maxIssues", f"more than {_MAX_ISSUES} issues; stopped", "")
            return
        yield issue


def is_valid(data: Any, definition: str = "Event", *, strict: bool = True) -> bool:
    """Whether ``data`` is a valid ``definition``: the fast verdict, no explanation."""
    member, problem = _select(definition, data)
    if problem is not None:
        return False
    rust = _rust_validator(member, strict)
    if rust is not None:
        try:
            return bool(rust.is_valid(data))
        except _UNREADABLE:
            pass  # data jsonschema-rs cannot convert (NaN, huge ints, deep nesting)
    return next(iter_schema_errors(data, member, strict=strict), None) is None


def raw_verdict(definition: str, *, strict: bool = True) -> Callable[[Any], bool] | None:
    """
    ``jsonschema-rs``'s bound ``is_valid`` for one non-union definition, or ``None`` when
    the accelerator is not installed.  Unguarded: it raises ``ValueError``, ``TypeError``,
    ``OverflowError`` or ``RecursionError`` on a document it cannot read (``NaN``, huge
    integers, deep nesting), which a caller on the hot path catches itself, once, rather
    than paying a wrapper per call (:func:`fast_check` is the guarded form).
    """
    rust = _rust_validator(definition, strict)
    return None if rust is None else rust.is_valid


def validating_parser(
    verdict: Callable[[Any], bool], build: Callable[[Any, Any], Any], target: Any
) -> Callable[[Any], Any | None]:
    """
    ``build(data, target)`` when ``verdict(data)`` holds, else ``None``: the fast half of
    validate-then-parse as one call, for a hot loop.

    ``verdict`` may be unguarded (:func:`raw_verdict`): a document it cannot read at all
    (``NaN``, huge integers, deep nesting) is ``None`` too, for the explaining path to
    decide.  A document the validator accepts cannot make a trusting ``build`` fail, so
    ``build`` is not guarded.  Built here, a floor below the converter, because this module
    is compiled (``docs/DESIGN.md``, "The hot core is compiled") and the converter's is not.
    """

    def parse(data: Any) -> Any | None:
        try:
            valid = verdict(data)
        except _UNREADABLE:
            return None
        return build(data, target) if valid else None

    return parse


@cache
def fast_check(definition: str, *, strict: bool = True) -> Callable[[Any], bool]:
    """
    A verdict-only check for one non-union definition, for hot loops; built once per
    definition and strictness, so callers keep no cache of their own.

    It returns ``jsonschema-rs``'s bound ``is_valid`` when the accelerator is installed, so
    a call costs what the Rust validator costs; ``False`` means "call :func:`validate` for
    the explanation" (a document the accelerator cannot read at all also lands there).
    """
    rust = _rust_validator(definition, strict)
    if rust is None:
        return lambda data: is_valid(data, definition, strict=strict)
    check = rust.is_valid

    def guarded(data: Any) -> bool:
        try:
            return bool(check(data))
        except _UNREADABLE:
            return False

    return guarded


def validate(
    data: Any, definition: str = "Event", *, strict: bool = True, event_index: int | None = None
) -> None:
    """
    Raise :class:`SchemaValidationError` carrying every violation if ``data`` is invalid.

    Raises:
        UnknownEventTypeError: ``definition`` is ``Event`` and ``type`` names no event.
        SchemaValidationError: any other violation; ``issues`` lists them all.
    """
    if is_valid(data, definition, strict=strict):
        return
    if definition == "Event":
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            if isinstance(data, Mapping) and "type" not in data:
                raise UnknownEventTypeError(None, event_index=event_index)
        elif data["type"] not in EVENT_CLASSES:
            value = data["type"]
            raise UnknownEventTypeError(value, suggest_event_type(value), event_index=event_index)
        else:
            definition = EVENT_CLASSES[data["type"]].__name__
    issues = list(iter_schema_errors(data, definition, strict=strict))
    if not issues:  # the fast verdict and the explanation disagree: trust the explainer
        return
    raise SchemaValidationError(definition, issues, event_index=event_index)


def validate_event(data: Any, *, strict: bool = True, event_index: int | None = None) -> None:
    """
    Check a raw event dict against the definition its ``type`` selects.

    Raises:
        UnknownEventTypeError: ``type`` is missing or names no event.
        SchemaValidationError: the event is malformed; ``issues`` has every violation.
    """
    validate(data, "Event", strict=strict, event_index=event_index)
