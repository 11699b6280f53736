"""
The wire format: camelCase JSON dicts in, typed attrs events out, and back.

AG-UI travels as JSON objects whose member names are camelCase and whose kind is named by a
discriminator (``type`` for events, content parts and outcomes, ``role`` for messages,
``op`` for patch operations).  The generated classes are snake_case and record each wire
name in field metadata; this module builds one cattrs converter that renames from that
metadata (never by computing camelCase: ``threadID`` would not survive a round trip) and
dispatches every union on its discriminator with a dict lookup instead of trying members
in turn.

cattrs is not a validator: it would turn ``"messageId": 5`` into ``"5"`` and an unknown
``type`` into a bare ``KeyError``.  So :func:`parse_event` validates first, against the
one definition ``type`` selects and in tolerant mode (undeclared members are allowed), and
structures second with hooks that trust the validated shape and copy nothing they need
not.  Members the schema does not declare are kept on the object in ``extra_members`` and
written back by :func:`to_wire`, because a newer producer may send them and a library in
the middle must not drop them silently; a receiver that wants them gone (the session)
strips them with a warning.

Two deliberate sharing choices keep the hot path cheap: open maps (``metadata``, activity
``content``) and "any JSON" values (``rawEvent``, ``snapshot``, ``value``) are not copied
on the way in or out, so a parsed event shares them with the dict it came from.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._generated import models
from ._generated.models import Event, Message, RunAgentInput
from ._generated.registry import EVENT_CLASSES, MESSAGE_CLASSES, TAGS
from .errors import (
    AguiError,
    SchemaIssue,
    SchemaValidationError,
    UnknownEventTypeError,
    WireFormatError,
    short_repr,
)
from .validate import fast_check, raw_verdict, suggest_event_type, validating_parser
from .validate import validate as _validate_definition

__all__ = [
    "converter",
    "event_parsers",
    "parse_as",
    "parse_event",
    "parse_message",
    "parse_run_agent_input",
    "parse_valid_event",
    "to_wire",
]

T = TypeVar("T")

_SCALARS: Final = (str, int, float, bool)


# cattrs types its per-field overrides as ``**kwargs`` next to its own bool options, which
# mypy cannot match against a dict of overrides; the calls below are checked by the tests.
_make_structure_fn: Any = make_dict_structure_fn
_make_unstructure_fn: Any = make_dict_unstructure_fn


def _identity(value: Any, _: Any = None) -> Any:
    return value


def _wire_name(field: attrs.Attribute[Any]) -> str:
    return str(field.metadata.get("wire", field.name))


def _is_extras(field: attrs.Attribute[Any]) -> bool:
    return bool(field.metadata.get("extras"))


def _single_literal(annotation: Any) -> str | None:
    if get_origin(annotation) is Literal:
        values = get_args(annotation)
        if len(values) == 1 and isinstance(values[0], str):
            return values[0]
    return None


def _discriminator_of(cls: type) -> tuple[str, str] | None:
    """(wire property, value) that tags ``cls`` in its union: the generated table's row."""
    return TAGS.get(cls.__name__)


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (typing.Union, types.UnionType)


def _is_plain(annotation: Any) -> bool:
    """Whether a validated value of this type is already its Python value (no hook needed)."""
    if annotation is Any or annotation in _SCALARS or annotation == dict[str, Any]:
        return True
    if get_origin(annotation) is Literal:
        return True
    if _is_union(annotation):
        return all(_is_plain(arg) or arg is type(None) for arg in get_args(annotation))
    return False


def _compile_structure(cls: type, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """
    Build the structure hook of one generated class as straight-line code.

    The input has been validated, so the hook only reads members, hands the few complex
    ones (nested models, lists, enums) to the converter, and assigns slots directly.  It
    bypasses ``__init__`` on purpose: there is nothing to check that validation did not,
    the attrs initializer costs as much again as the rest of the parse, and a deprecated
    event arriving from the wire must not warn the way a user constructing one does.
    """
    hints = typing.get_type_hints(cls)
    namespace: dict[str, Any] = {"__cl": cls, "__new": object.__new__}
    known: list[str] = []
    required_lines: list[str] = []
    optional_lines: list[str] = []
    absent_lines: list[str] = []
    tag = _discriminator_of(cls)
    for field in attrs.fields(cls):
        if _is_extras(field):
            continue
        wire = _wire_name(field)
        known.append(wire)
        annotation = hints[field.name]
        required = field.default is attrs.NOTHING
        default = None if required else field.default
        plain = _is_plain(annotation)
        if not required:
            value = repr(default) if plain else "None"
            if tag is not None and wire == tag[0]:
                value = f"o.get({wire!r}, {default!r})"
            absent_lines.append(f"        obj.{field.name} = {value}")
        if plain:
            read = f"o[{wire!r}]" if required else f"o.get({wire!r}, {default!r})"
            (required_lines if required else optional_lines).append(
                f"    obj.{field.name} = {read}"
            )
            continue
        namespace[f"__h_{field.name}"] = conv.get_structure_hook(annotation)
        namespace[f"__t_{field.name}"] = annotation
        call = f"__h_{field.name}(v, __t_{field.name})"
        if required:
            required_lines.append(f"    v = o[{wire!r}]")
            required_lines.append(f"    obj.{field.name} = {call}")
        else:
            optional_lines.append(f"    v = o.get({wire!r})")
            optional_lines.append(f"    obj.{field.name} = None if v is None else {call}")
    namespace["__known"] = frozenset(known)
    # Most documents carry only what they must (plus their discriminator): then every
    # optional member is absent and nothing is undeclared, which the key count proves
    # once the required members have been read, so the optional reads are skipped.
    count = sum(1 for f in attrs.fields(cls) if f.default is attrs.NOTHING)
    bare = f"n == {count}"
    if tag is not None:
        bare += f" or (n == {count + 1} and {tag[0]!r} in o)"
    lines = [
        "def structure(o, _=None):",
        "    obj = __new(__cl)",
        *required_lines,
        "    n = len(o)",
        f"    if {bare}:",
        *absent_lines,
        "        obj.extra_members = None",
        "        return obj",
        *optional_lines,
        "    obj.extra_members = None if __known.issuperset(o) "
        "else {k: v for k, v in o.items() if k not in __known}",
    ]
    lines.append("    return obj")
    exec("\n".join(lines), namespace)  # the cattrs technique: specialised code per class
    hook: Callable[[Any, Any], Any] = namespace["structure"]
    hook.__qualname__ = f"structure_{cls.__name__}"
    return hook


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(detailed_validation=False)

    # Scalars were validated before structuring: pass them through untouched.
    for scalar in _SCALARS:
        conv.register_structure_hook(scalar, _identity)
    conv.register_structure_hook(Any, _identity)
    open_map = dict[str, Any]
    conv.register_structure_hook_func(lambda t: t == open_map, _identity)
    conv.register_unstructure_hook_func(lambda t: t == open_map, _identity)
    conv.register_unstructure_hook_func(lambda t: t is Any, _identity)

    def structure_union(annotation: Any) -> Callable[[Any, Any], Any]:
        members = get_args(annotation)
        allows_none = type(None) in members
        classes = [m for m in members if isinstance(m, type) and attrs.has(m)]
        lists = [m for m in members if get_origin(m) is list]
        if not classes and not lists:
            return _identity  # scalars, Any, None: already validated
        table: dict[str, type] = {}
        key = ""
        only = classes[0] if len(classes) == 1 else None
        for cls in classes if only is None else ():
            found = _discriminator_of(cls)
            if found is None:
                raise TypeError(f"union member {cls.__name__} has no discriminator")
            key = found[0]
            table[found[1]] = cls
        list_type = lists[0] if lists else None
        name = " | ".join(getattr(m, "__name__", str(m)) for m in members)

        def hook(value: Any, _: Any) -> Any:
            if value is None and allows_none:
                return None
            if only is not None and isinstance(value, Mapping):
                return conv.structure(value, only)
            if isinstance(value, Mapping) and table:
                member = table.get(value.get(key))  # type: ignore[arg-type]
                if member is not None:
                    return conv.structure(value, member)
                raise WireFormatError(
                    name, f"/{key}", f"unknown {key} {short_repr(value.get(key))}"
                )
            if list_type is not None and isinstance(value, list):
                return conv.structure(value, list_type)
            if isinstance(value, str) and str in members:
                return value
            raise WireFormatError(name, "", f"unexpected {type(value).__name__}")

        return hook

    conv.register_structure_hook_factory(_is_union, structure_union)

    def structure_class(cls: type) -> Callable[[Any, Any], Any]:
        return _compile_structure(cls, conv)

    def unstructure_class(cls: type) -> Callable[[Any], dict[str, Any]]:
        hints = typing.get_type_hints(cls)
        overrides = {}
        for f in attrs.fields(cls):
            if _is_extras(f):
                overrides[f.name] = override(omit=True)
            elif _single_literal(hints[f.name]) is not None:
                # A discriminator always equals its default; omitting it would lose the kind.
                overrides[f.name] = override(rename=_wire_name(f), omit_if_default=False)
            else:
                overrides[f.name] = override(rename=_wire_name(f))
        base = _make_unstructure_fn(cls, conv, _cattrs_omit_if_default=True, **overrides)

        def hook(obj: Any) -> dict[str, Any]:
            out: dict[str, Any] = base(obj)
            extras = obj.extra_members
            if extras:
                for key, value in extras.items():
                    out.setdefault(key, value)
            return out

        return hook

    conv.register_structure_hook_factory(attrs.has, structure_class)
    conv.register_unstructure_hook_factory(attrs.has, unstructure_class)
    return conv


converter: Final[cattrs.Converter] = _make_converter()
"""
The configured converter for every generated model.  Use it to structure a generated
class from a *validated* dict, or to build your own converter on top (``copy()``); never
mutate it, other modules share it.
"""

_MODEL_CLASSES: Final = frozenset(
    obj for obj in vars(models).values() if isinstance(obj, type) and attrs.has(obj)
)
_structure_hooks: dict[type, Callable[[Any, Any], Any]] = {}


def _structure(data: Mapping[str, Any], cls: type[T]) -> T:
    hook = _structure_hooks.get(cls)
    if hook is None:
        hook = _structure_hooks[cls] = converter.get_structure_hook(cls)
    try:
        return typing.cast(T, hook(data, cls))
    except AguiError:
        raise
    except Exception as exc:  # unvalidated input reached the trusting hooks
        raise WireFormatError(cls.__name__, "", f"{type(exc).__name__}: {exc}") from exc


def _not_an_object(definition: str, data: object) -> SchemaValidationError:
    kind = "null" if data is None else type(data).__name__
    return SchemaValidationError(
        definition, [SchemaIssue("", "type", f"expected an object, got {kind}")]
    )


def _event_class(data: Mapping[str, Any]) -> type:
    if type(data) is not dict and not isinstance(data, Mapping):
        raise _not_an_object("Event", data)
    event_type = data.get("type")
    cls = EVENT_CLASSES.get(event_type) if isinstance(event_type, str) else None
    if cls is None:
        raise UnknownEventTypeError(
            event_type if "type" in data else None, suggest_event_type(event_type)
        )
    return cls


def _hook(cls: type) -> Callable[[Any, Any], Any]:
    hook = _hooks.get(cls)
    if hook is None:
        hook = _hooks[cls] = converter.get_structure_hook(cls)
    return hook


def _verdict(cls: type, strict: bool) -> Callable[[Any], bool]:
    # Built on first use, per strictness (validate caches it): a validator costs
    # milliseconds to compile, and a trusting parse (check=False) never needs one.
    return fast_check(cls.__name__, strict=strict)


def _build(cls: type, hook: Callable[[Any, Any], Any], data: Mapping[str, Any]) -> Event:
    try:
        return typing.cast(Event, hook(data, cls))
    except AguiError:
        raise
    except Exception as exc:  # unvalidated input reached the trusting hooks
        raise WireFormatError(cls.__name__, "", f"{type(exc).__name__}: {exc}") from exc


def parse_event(data: Mapping[str, Any], *, check: bool = True, strict: bool = False) -> Event:
    """
    Turn a wire dict into its typed event, choosing the class by ``type``.

    This is aguikit's one validate-then-parse path: the session's receiver, the command
    line and the HTTP client all reach events through it.

    Args:
        data: A decoded JSON object.
        check: Validate against the event's definition first.  Pass ``False`` only for data
            already validated, e.g. by :func:`aguikit.validate_event`.
        strict: Validate exactly (an undeclared member is a violation).  By default
            validation is tolerant of undeclared members, which are kept in
            ``extra_members``, as a library in the middle of a pipeline must be.

    Raises:
        UnknownEventTypeError: ``type`` is missing or names no event; suggests the close
            match (``runStarted`` → ``RUN_STARTED``).
        SchemaValidationError: a declared field is missing or malformed; ``definition`` is
            the event class name and each issue has the JSON pointer of the field.
    """
    cls = _event_class(data)
    if check and not _verdict(cls, strict)(data):
        _validate_definition(data, cls.__name__, strict=strict)
    return _build(cls, _hook(cls), data)


def _compile_parser(cls: type, strict: bool) -> Callable[[Mapping[str, Any]], Event | None]:
    verdict = raw_verdict(cls.__name__, strict=strict) or _verdict(cls, strict)
    return validating_parser(verdict, _hook(cls), cls)


_Parser = Callable[[Mapping[str, Any]], "Event | None"]


class _Parsers(dict[str, "_Parser | None"]):
    """
    Compiled on first use: a validator costs milliseconds to build and a stream uses a
    handful of the event types.  A type the protocol does not define is answered ``None``
    and not kept, so hostile types cannot grow the table.
    """

    def __init__(self, strict: bool) -> None:
        super().__init__()
        self.strict = strict

    def __missing__(self, event_type: str) -> _Parser | None:
        cls = EVENT_CLASSES.get(event_type) if type(event_type) is str else None
        if cls is None:
            return None
        parser = self[event_type] = _compile_parser(cls, self.strict)
        return parser


_parsers: dict[bool, _Parsers] = {}


def event_parsers(*, strict: bool = True) -> Mapping[str, _Parser | None]:
    """
    Per event type, the fast half of :func:`parse_event` as one call: the typed event when
    the document is valid, else ``None``.

    For a consumer's hot loop (the session's receiver): a type lookup, one validator call
    and the compiled structure hook, with nothing between them.  The document must be a
    mapping whose ``type`` names the parser; anything else goes through
    :func:`parse_event`, which explains.  Index it (``parsers[event_type]``): a type the
    protocol does not define gives ``None``.
    """
    table = _parsers.get(strict)
    if table is None:
        table = _parsers[strict] = _Parsers(strict)
    return table


def parse_valid_event(data: Mapping[str, Any], *, strict: bool = True) -> Event | None:
    """
    The fast half of :func:`parse_event`: the typed event when ``data`` is valid, else
    ``None`` without paying for an explanation.

    For a receiver that repairs what it can before asking why (strip undeclared members,
    read legacy nulls as absent), so the common valid event costs one validator call.

    Raises:
        UnknownEventTypeError: ``type`` is missing or names no event.
    """
    _event_class(data)  # raises for a missing or unknown type
    parser = event_parsers(strict=strict)[data["type"]]
    assert parser is not None  # the type is known: _event_class checked it
    return parser(data)


_hooks: dict[type, Callable[[Any, Any], Any]] = {}


def parse_message(data: Mapping[str, Any], *, check: bool = True) -> Message:
    """
    Turn a wire dict into its typed message, choosing the class by ``role``.

    Raises:
        SchemaValidationError: ``role`` is missing or unknown, or a field is malformed.
    """
    if not isinstance(data, Mapping):
        raise _not_an_object("Message", data)
    role = data.get("role")
    cls = MESSAGE_CLASSES.get(role) if isinstance(role, str) else None
    if cls is None or check:
        _validate_definition(data, "Message" if cls is None else cls.__name__, strict=False)
    if cls is None:  # pragma: no cover - validation above always rejects this
        raise _not_an_object("Message", data)
    return _structure(data, cls)


def parse_run_agent_input(data: Mapping[str, Any], *, check: bool = True) -> RunAgentInput:
    """
    Turn a request body into a typed :class:`RunAgentInput`.

    Raises:
        SchemaValidationError: a field is missing or malformed.
    """
    return parse_as(RunAgentInput, data, check=check)


def parse_as(cls: type[T], data: Any, *, check: bool = True) -> T:
    """
    Turn a wire value into any generated model class (``ToolCall``, ``Interrupt``...).

    Raises:
        SchemaValidationError: the value does not match the class's definition.
    """
    if cls not in _MODEL_CLASSES:
        raise TypeError(f"{cls!r} is not a generated aguikit model")
    if check:
        _validate_definition(data, cls.__name__, strict=False)
    elif not isinstance(data, Mapping):
        raise _not_an_object(cls.__name__, data)
    return _structure(data, cls)


def to_wire(obj: Any) -> dict[str, Any]:
    """
    The exact wire dict for a generated model: camelCase keys, unset optionals omitted
    (never ``null``), discriminators always present, undeclared members written back.

    ``to_wire(parse_event(d)) == d`` for every valid document ``d``.

    Raises:
        WireFormatError: ``obj`` is not an instance of a generated model.
    """
    if type(obj) not in _MODEL_CLASSES:
        raise WireFormatError(
            type(obj).__name__, "", "to_wire takes an instance of a generated aguikit model"
        )
    out: dict[str, Any] = converter.unstructure(obj)
    return out
