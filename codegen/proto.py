"""
Derive the protobuf description of AG-UI (``agui.proto``) from ``schema/`` and the ledger.

The binary transport (``application/vnd.ag-ui.event+proto``) carries each event as an
``Event`` message whose ``oneof`` names the event type.  Every message and field here is
derived from a schema definition; the only things the schema cannot say are the numbers
(which the wire is made of, and which can never change once shipped) and the few places
where the official encoding (``@ag-ui/proto``) folds a JSON shape into a flatter protobuf
one.  The numbers live in ``schema/proto-ledger.txt``; the folds are the ``FOLDS`` table
below, each with the reason the official encoding chose it.

The ledger is append-only.  ``check_ledger`` refuses a schema field without a number
(naming it), a ledger line whose field no longer exists and is not marked ``reserved``,
two numbers for one field, one number for two fields, and (given the ledger's committed
history) any line that changed or disappeared.

The deprecated ``THINKING_*`` events get no slot: the official encoding does not carry
them, a number chosen here could collide with a slot upstream assigns next, and a
receiver translates them to ``REASONING_*`` before they would ever be re-encoded
(``docs/protobuf.md`` has the full reasoning).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Json = dict[str, Any]

LEDGER_FILE = "proto-ledger.txt"

RENAMES: dict[str, str] = {
    "TokenUsage": "Usage",
    "ContentPart": "InputContent",
    "TextPart": "TextInputPart",
    "ImagePart": "ImageInputPart",
    "AudioPart": "AudioInputPart",
    "VideoPart": "VideoInputPart",
    "DocumentPart": "DocumentInputPart",
    "PartSource": "InputContentSource",
    "DataSource": "InputContentDataSource",
    "UrlSource": "InputContentUrlSource",
    "FileSource": "InputContentFileSource",
    "FunctionCall": "ToolCall.Function",
}
"""Schema definition → official protobuf message name (the names ``@ag-ui/proto`` ships)."""

VALUE = "google.protobuf.Value"
STRUCT = "google.protobuf.Struct"

TYPE_OVERRIDES: dict[str, str] = {
    # @ag-ui/proto carries these two open objects as any JSON value, not as a Struct.
    "Interrupt.metadata": VALUE,
    "Interrupt.response_schema": VALUE,
}
"""Fields whose protobuf type the official encoding chose differently from the rule."""


@dataclass
class Field:
    name: str
    type: str
    label: str  # "", "optional" or "repeated"
    oneof: str | None = None
    comment: str = ""


@dataclass
class MessageSpec:
    name: str
    fields: list[Field] = field(default_factory=list)
    nested: list[MessageSpec] = field(default_factory=list)
    comment: str = ""


def snake(name: str) -> str:
    """``toolCallId`` → ``tool_call_id``; the protobuf JSON name maps it back unchanged."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _ref(node: Json) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def properties(defs: Json, name: str) -> tuple[dict[str, Json], set[str]]:
    """A definition's members and required names, ``allOf`` mixins included, in order."""
    node = defs[name]
    out: dict[str, Json] = {}
    required: set[str] = set(node.get("required", []))
    for part in node.get("allOf", []):
        ref = _ref(part)
        if ref is not None:
            sub, req = properties(defs, ref)
            out.update(sub)
            required |= req
        else:
            out.update(part.get("properties", {}))
            required |= set(part.get("required", []))
    out.update(node.get("properties", {}))
    return out, required


def _members(defs: Json, union: str) -> list[str]:
    return [r for r in (_ref(o) for o in defs[union].get("oneOf", [])) if r is not None]


def _is_object_def(defs: Json, name: str) -> bool:
    node = defs[name]
    return bool(node.get("properties") or node.get("allOf")) and "oneOf" not in node


def proto_type(defs: Json, owner: str, prop: str, node: Json) -> tuple[str, bool]:
    """(protobuf type, repeated) of one schema member, by the derivation rule."""
    override = TYPE_OVERRIDES.get(f"{owner}.{snake(prop)}")
    if override is not None:
        return override, False
    ref = _ref(node)
    if ref == "Metadata" or ref == "State":
        return (STRUCT if ref == "Metadata" else VALUE), False
    if ref is not None:
        target = defs[ref]
        if target.get("type") == "string" or "enum" in target:
            return ("EventType" if ref == "EventType" else "string"), False
        if ref in RENAMES or _is_object_def(defs, ref) or "oneOf" in target:
            return RENAMES.get(ref, ref), False
        return proto_type(defs, owner, prop, target)
    kind = node.get("type")
    if kind == "array":
        item, _ = proto_type(defs, owner, prop, node.get("items", {}))
        return item, True
    if kind == "string" or ("const" in node and isinstance(node["const"], str)):
        return "string", False
    if kind == "integer":
        return "int64", False
    if kind == "boolean":
        return "bool", False
    if kind == "object":
        return STRUCT, False
    return VALUE, False


BASE_MEMBERS = ("type", "timestamp", "rawEvent", "metadata")


def _event_message(defs: Json, name: str) -> MessageSpec:
    props, required = properties(defs, name)
    spec = MessageSpec(name, [Field("base_event", "BaseEvent", "")])
    for prop, node in props.items():
        if prop in BASE_MEMBERS:
            continue
        fold = FOLDS.get(f"{name}.{prop}")
        if fold is not None:
            spec.fields += [Field(n, t, lab, comment=why) for n, t, lab, why in fold]
            continue
        kind, repeated = proto_type(defs, name, prop, node)
        label = "repeated" if repeated else ("" if prop in required else "optional")
        if kind in (STRUCT, VALUE) and label == "" and not repeated:
            label = ""  # message-typed: presence is explicit anyway
        spec.fields.append(Field(snake(prop), kind, label))
    return spec


_OUTCOME = "the official encoding flattens the outcome union to its type name plus its members"
_PARTS = "string content and a part list are two fields, as @ag-ui/proto carries them"

FOLDS: dict[str, list[tuple[str, str, str, str]]] = {
    "RunFinishedEvent.outcome": [
        ("outcome", "string", "", _OUTCOME),
        ("interrupts", "Interrupt", "repeated", _OUTCOME),
        ("pending_tool_call_ids", "string", "repeated", _OUTCOME),
    ],
    "SubagentFinishedEvent.outcome": [
        ("outcome", "string", "", _OUTCOME),
        ("interrupt_ids", "string", "repeated", _OUTCOME),
    ],
    "ToolCallResultEvent.content": [
        ("content", "string", "optional", _PARTS),
        ("content_parts", "InputContent", "repeated", _PARTS),
    ],
    "Message.content": [
        ("content", "string", "optional", _PARTS),
        ("content_parts", "InputContent", "repeated", _PARTS),
        ("activity_content", STRUCT, "optional", "an activity message's content is an object"),
    ],
}
"""Where the official encoding folds a JSON union into flatter protobuf fields, and why."""


def _plain_message(defs: Json, name: str, sources: list[str]) -> MessageSpec:
    """A message from one definition, or the union of several (every member optional
    unless every source requires it)."""
    spec = MessageSpec(name)
    merged: dict[str, Json] = {}
    required_all: set[str] | None = None
    for source in sources:
        props, required = properties(defs, source)
        for prop, node in props.items():
            merged.setdefault(prop, node)
        required_all = required if required_all is None else required_all & required
    for prop, node in merged.items():
        if prop == "type" and name not in ("ToolCall",):
            continue  # a discriminator is the oneof arm (or the message) itself
        fold = FOLDS.get(f"{name}.{prop}")
        if fold is not None:
            spec.fields += [Field(n, t, lab, comment=why) for n, t, lab, why in fold]
            continue
        kind, repeated = proto_type(defs, name, prop, node)
        if prop == "op":
            kind = "JsonPatchOperationType"
        label = "repeated" if repeated else ("" if prop in (required_all or set()) else "optional")
        spec.fields.append(Field(snake(prop), kind, label))
    return spec


def _oneof_message(defs: Json, name: str, union: str, group: str) -> MessageSpec:
    spec = MessageSpec(name)
    for member in _members(defs, union):
        tag = properties(defs, member)[0]["type"]["const"]
        spec.fields.append(Field(tag, RENAMES.get(member, member), "", oneof=group))
    return spec


def describe(defs: Json) -> tuple[list[MessageSpec], dict[str, list[str]]]:
    """Every protobuf message and enum the schema implies, before numbering."""
    events = [m for m in _members(defs, "Event") if not defs[m].get("deprecated")]
    types = [t for t in defs["EventType"]["enum"] if not t.startswith("THINKING_")]
    ops = [
        properties(defs, m)[0]["op"]["const"].upper() for m in _members(defs, "JsonPatchOperation")
    ]
    enums = {"EventType": types, "JsonPatchOperationType": ops}

    base = MessageSpec("BaseEvent")
    props, required = properties(defs, "BaseEvent")
    for prop, node in props.items():
        kind, _ = proto_type(defs, "BaseEvent", prop, node)
        base.fields.append(Field(snake(prop), kind, "" if prop in required else "optional"))

    messages = [base]
    messages += [_event_message(defs, name) for name in events]
    envelope = MessageSpec("Event")
    for name in events:
        tag = properties(defs, name)[0]["type"]["const"].lower()
        envelope.fields.append(Field(tag, name, "", oneof="event"))
    messages.append(envelope)

    tool_call = _plain_message(defs, "ToolCall", ["ToolCall"])
    function = _plain_message(defs, "Function", ["FunctionCall"])
    tool_call.nested.append(function)
    messages += [
        _plain_message(defs, "Message", _members(defs, "Message")),
        tool_call,
        _oneof_message(defs, "InputContent", "ContentPart", "part"),
    ]
    for part in _members(defs, "ContentPart"):
        messages.append(_plain_message(defs, RENAMES[part], [part]))
    messages.append(_oneof_message(defs, "InputContentSource", "PartSource", "source"))
    for source in _members(defs, "PartSource"):
        messages.append(_plain_message(defs, RENAMES[source], [source]))
    for name in ("RunAgentInput", "Tool", "Context", "ResumeEntry", "Interrupt"):
        messages.append(_plain_message(defs, name, [name]))
    messages.append(_plain_message(defs, "Usage", ["TokenUsage"]))
    messages.append(
        _plain_message(defs, "JsonPatchOperation", _members(defs, "JsonPatchOperation"))
    )
    return messages, enums


# --------------------------------------------------------------------------- the ledger


@dataclass
class Ledger:
    numbers: dict[str, int]
    reserved: set[str]
    lines: list[str]


_LINE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_.]*) = (?P<num>\d+)(?P<res> reserved)?$")


def read_ledger(text: str) -> Ledger:
    numbers: dict[str, int] = {}
    reserved: set[str] = set()
    lines: list[str] = []
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise LedgerError([f"{LEDGER_FILE}:{i}: cannot read {line!r}"])
        key, num = match["key"], int(match["num"])
        if key in numbers and numbers[key] != num:
            raise LedgerError([f"{LEDGER_FILE}:{i}: {key} is numbered twice"])
        numbers[key] = num
        if match["res"]:
            reserved.add(key)
        lines.append(line)
    return Ledger(numbers, reserved, lines)


class LedgerError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def slots(messages: list[MessageSpec], enums: dict[str, list[str]]) -> list[str]:
    """Every ledger key the description needs, ``Message.field`` / ``Enum.VALUE`` /
    ``Message.oneof.arm``."""
    keys = [f"{enum}.{value}" for enum, values in enums.items() for value in values]

    def walk(spec: MessageSpec, prefix: str) -> None:
        for f in spec.fields:
            keys.append(
                f"{prefix}{spec.name}.{f.oneof}.{f.name}"
                if f.oneof
                else f"{prefix}{spec.name}.{f.name}"
            )
        for nested in spec.nested:
            walk(nested, f"{prefix}{spec.name}.")

    for spec in messages:
        walk(spec, "")
    return keys


def check_ledger(ledger: Ledger, needed: list[str], history: list[Ledger]) -> None:
    """Refuse a ledger that does not number the description exactly and append-only."""
    problems = [
        f"{key} has no number in schema/{LEDGER_FILE}: append `{key} = <next free number>`"
        for key in needed
        if key not in ledger.numbers
    ]
    problems += [
        f"{key} is in schema/{LEDGER_FILE} but no longer in the schema: mark it `reserved`, "
        "never delete or reuse a number"
        for key in ledger.numbers
        if key not in needed and key not in ledger.reserved
    ]
    problems += [
        f"{key} is marked reserved but the schema still has it"
        for key in ledger.reserved
        if key in needed
    ]
    by_scope: dict[tuple[str, int], str] = {}
    for key, num in sorted(ledger.numbers.items()):
        scope = key.rsplit(".", 1)[0]
        if ".event." in key or ".part." in key or ".source." in key:
            scope = scope.rsplit(".", 1)[0]  # oneof arms share their message's numbers
        other = by_scope.setdefault((scope, num), key)
        if other != key:
            problems.append(f"{key} and {other} share the number {num}")
    for old in history:
        for key, num in old.numbers.items():
            if key not in ledger.numbers:
                problems.append(f"{key} = {num} disappeared from schema/{LEDGER_FILE}")
            elif ledger.numbers[key] != num:
                problems.append(
                    f"{key} changed from {num} to {ledger.numbers[key]}: numbers never change"
                )
    if problems:
        raise LedgerError(problems)


# --------------------------------------------------------------------------- rendering


def render_proto(
    messages: list[MessageSpec], enums: dict[str, list[str]], ledger: Ledger, header: str
) -> str:
    out = [
        "// " + header.replace("\n# ", "\n// ").removeprefix("# "),
        f"// Field numbers: schema/{LEDGER_FILE} (append-only; never renumber).",
        "// Wire-compatible with @ag-ui/proto; THINKING_* events have no slot (docs/protobuf.md).",
        "",
        'syntax = "proto3";',
        "",
        "package ag_ui;",
        "",
        'import "google/protobuf/struct.proto";',
        "",
    ]
    for enum, values in enums.items():
        out.append(f"enum {enum} {{")
        for value in sorted(values, key=lambda v: ledger.numbers[f"{enum}.{v}"]):
            out.append(f"  {value} = {ledger.numbers[f'{enum}.{value}']};")
        out += ["}", ""]

    def render(spec: MessageSpec, prefix: str, indent: str) -> None:
        key = f"{prefix}{spec.name}"
        out.append(f"{indent}message {spec.name} {{")
        for nested in spec.nested:
            render(nested, f"{key}.", indent + "  ")
        reserved = sorted(
            n
            for k, n in ledger.numbers.items()
            if k in ledger.reserved and k.rsplit(".", 1)[0] == key
        )
        if reserved:
            out.append(f"{indent}  reserved {', '.join(map(str, reserved))};")
        plain = [f for f in spec.fields if f.oneof is None]
        for f in sorted(plain, key=lambda f: ledger.numbers[f"{key}.{f.name}"]):
            label = f"{f.label} " if f.label else ""
            out.append(f"{indent}  {label}{f.type} {f.name} = {ledger.numbers[f'{key}.{f.name}']};")
        groups = sorted({f.oneof for f in spec.fields if f.oneof})
        for group in groups:
            out.append(f"{indent}  oneof {group} {{")
            arms = [f for f in spec.fields if f.oneof == group]
            for f in sorted(arms, key=lambda f: ledger.numbers[f"{key}.{group}.{f.name}"]):
                number = ledger.numbers[f"{key}.{group}.{f.name}"]
                out.append(f"{indent}    {f.type} {f.name} = {number};")
            out.append(f"{indent}  }}")
        out.append(f"{indent}}}")

    for spec in messages:
        render(spec, "", "")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def ledger_history(schema_dir: Path) -> list[Ledger]:
    """Every committed version of the ledger (empty outside a git checkout)."""
    import subprocess

    path = schema_dir / LEDGER_FILE
    try:
        revs = subprocess.run(
            ["git", "log", "--format=%H", "--", path.name],
            cwd=schema_dir,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []
    found = []
    for rev in revs:
        shown = subprocess.run(
            ["git", "show", f"{rev}:./{path.name}"],
            cwd=schema_dir,
            capture_output=True,
            text=True,
            check=False,
        )
        if shown.returncode == 0:
            found.append(read_ledger(shown.stdout))
    return found
