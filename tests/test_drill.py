"""
The drill: add one event and one field the way ``schema/README.md`` says, and prove it.

A copy of ``schema/`` gains ``TOOL_CALL_PROGRESS`` (legal only inside an open tool call,
with a ``progress`` bounded to ``[0, 1]``) and an optional ``region`` on ``RUN_STARTED``.
Codegen regenerates a copy of the package from it; in a fresh interpreter on that copy:

* until their rows exist, the verifier's table, the chunk normalizer and the applier each
  refuse to import, naming the new event;
* codegen refuses to run until ``schema/proto-ledger.txt`` numbers every new protobuf slot
  (the binary transport's field numbers are append-only), naming each;
* with one verifier row and one ``STAND_ASIDE`` declaration, the new class is exported by
  ``aguikit.models``, validates, parses, round-trips, is checked in a stream, and the
  shared hypothesis strategies generate valid documents of it; the new field does the same
  on ``RUN_STARTED``.

The files edited by hand are counted: the README's claim ("a schema change, its ledger
numbers, one command, one row") is what this test holds, with at most 4 files for an event
and 2 for a field.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("datamodel_code_generator", reason="the drill regenerates the models")
pytest.importorskip("grpc_tools", reason="the drill regenerates the protobuf messages")

REPO = Path(__file__).resolve().parent.parent
GENERATE = REPO / "codegen" / "generate.py"

PROGRESS = {
    "$anchor": "ToolCallProgressEvent",
    "description": "How far an open tool call has got, for a progress bar.",
    "type": "object",
    "allOf": [
        {"$ref": "base.json#/$defs/BaseEvent"},
        {"$ref": "base.json#/$defs/Attributable"},
    ],
    "properties": {
        "type": {
            "const": "TOOL_CALL_PROGRESS",
            "description": "Fixed discriminator naming this event; always TOOL_CALL_PROGRESS.",
        },
        "toolCallId": {"type": "string", "description": "The open call this reports on."},
        "progress": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "The fraction done, from 0 to 1.",
        },
    },
    "required": ["type", "toolCallId", "progress"],
    "unevaluatedProperties": False,
}
EVENT_SLOTS = ("base_event", "subagent_run_id", "tool_call_id", "progress")
"""The protobuf fields of ``ToolCallProgressEvent``, as codegen names them."""
REGION = {"type": "string", "description": "Where the run executes, for data residency."}

ROW = """    Row(
        E.TOOL_CALL_PROGRESS,
        effect=Effect.CONTINUES,
        family=Family.TOOL_CALL,
        key="tool_call_id",
        owner=Attribution.AGREE,
        bucket=Bucket.TOOL_CALL,
        rules={"not_open": "AGUI-V014", "owner": _OWN},
    ),
"""
ASIDE = "STAND_ASIDE: Final[Mapping[str, frozenset[Stage]]] = {}"
ASIDE_NORMALIZER_ONLY = (
    "STAND_ASIDE: Final[Mapping[str, frozenset[Stage]]] = {\n"
    '    "TOOL_CALL_PROGRESS": frozenset({"normalizer"}),\n'
    "}"
)
ASIDE_WITH_ROW = (
    "STAND_ASIDE: Final[Mapping[str, frozenset[Stage]]] = {\n"
    '    "TOOL_CALL_PROGRESS": frozenset({"normalizer", "applier"}),\n'
    "}"
)


class Drill:
    """A schema copy and a package copy, and every file edited by hand in them."""

    def __init__(self, root: Path) -> None:
        self.schema = root / "schema"
        self.package = root / "pkg"
        shutil.copytree(REPO / "schema", self.schema)
        shutil.copytree(
            REPO / "src" / "aguikit",
            self.package / "aguikit",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        self.hand_edited: dict[str, set[str]] = {"event": set(), "field": set()}

    def edit_json(self, change: str, name: str, edit: Any) -> None:
        path = self.schema / name
        doc = json.loads(path.read_text(encoding="utf-8"))
        edit(doc)
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        self.hand_edited[change].add(f"schema/{name}")

    def edit_source(self, change: str, name: str, old: str, new: str) -> None:
        path = self.package / "aguikit" / name
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{name} no longer has {old!r}: update the drill"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        self.hand_edited[change].add(f"src/aguikit/{name}")

    def number(self, change: str, keys: list[str]) -> None:
        """Append each ledger key with the next free number of its message or enum."""
        path = self.schema / "proto-ledger.txt"
        text = path.read_text(encoding="utf-8")
        taken: dict[str, list[int]] = {}
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, rest = line.partition("=")
                taken.setdefault(key.strip().rpartition(".")[0], []).append(int(rest.split()[0]))
        for key in keys:
            scope = key.rpartition(".")[0]
            number = max(taken.get(scope, [0])) + 1
            taken.setdefault(scope, []).append(number)
            text += f"{key} = {number}\n"
        path.write_text(text, encoding="utf-8")
        self.hand_edited[change].add("schema/proto-ledger.txt")

    def codegen(self) -> subprocess.CompletedProcess[str]:
        """The one command: regenerate the package copy from the schema copy."""
        return subprocess.run(
            [
                sys.executable,
                str(GENERATE),
                "--schema",
                str(self.schema),
                "--out",
                str(self.package / "aguikit" / "_generated"),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in a fresh interpreter that imports the package copy."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(self.package), str(REPO)])}
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env=env,
            cwd=self.package,
        )


def _add_event(doc: dict[str, Any]) -> None:
    doc["$defs"]["ToolCallProgressEvent"] = PROGRESS


def _add_field(doc: dict[str, Any]) -> None:
    doc["$defs"]["RunStartedEvent"]["properties"]["region"] = REGION


CHECK_EVENT = """
    import aguikit
    from aguikit.errors import ProtocolError, SchemaValidationError
    from aguikit.models import ToolCallProgressEvent, EVENT_CLASSES, Event
    import typing

    doc = {"type": "TOOL_CALL_PROGRESS", "toolCallId": "c", "progress": 0.5}
    aguikit.validate_event(doc)
    event = aguikit.parse_event(doc)
    assert type(event) is ToolCallProgressEvent, type(event)
    assert aguikit.to_wire(event) == doc
    assert EVENT_CLASSES["TOOL_CALL_PROGRESS"] is ToolCallProgressEvent
    assert ToolCallProgressEvent in typing.get_args(Event)
    try:
        aguikit.validate_event({**doc, "progress": 2.0})
        raise AssertionError("progress 2.0 accepted")
    except SchemaValidationError as error:
        assert "/progress" in str(error), error

    run = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    call = [
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        doc,
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
    ]
    end = [{"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}]
    session = aguikit.Session()
    session.feed_all(run + call + end)
    session.finish()
    assert [] == session.warnings, session.warnings
    try:
        aguikit.Session().feed_all(run + [doc])
        raise AssertionError("progress outside an open tool call accepted")
    except ProtocolError as error:
        assert "AGUI-V014" == error.rule, error

    from hypothesis import given, settings
    from tests import strategies

    @settings(max_examples=60, database=None)
    @given(strategies.documents(ToolCallProgressEvent))
    def generated_documents_validate(generated):
        aguikit.validate_event(generated)
        assert 0 <= generated["progress"] <= 1

    generated_documents_validate()
    print("event ok")
"""

CHECK_FIELD = """
    import aguikit
    from aguikit.models import RunStartedEvent

    doc = {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "region": "eu"}
    aguikit.validate_event(doc)
    event = aguikit.parse_event(doc)
    assert isinstance(event, RunStartedEvent) and "eu" == event.region
    assert aguikit.to_wire(event) == doc
    session = aguikit.Session()
    session.feed(doc)
    assert [] == session.warnings, session.warnings
    print("field ok")
"""


@pytest.mark.slow
def test_one_event_and_one_field_take_a_schema_edit_one_command_and_one_row_each(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    drill.edit_json("event", "tools.json", _add_event)
    drill.edit_json("field", "lifecycle.json", _add_field)

    unnumbered = drill.codegen()

    # The binary transport's numbers are never derived: codegen names each missing one.
    assert 0 != unnumbered.returncode
    assert "EventType.TOOL_CALL_PROGRESS has no number" in unnumbered.stderr, unnumbered.stderr
    assert "RunStartedEvent.region has no number" in unnumbered.stderr, unnumbered.stderr
    drill.number("event", [f"ToolCallProgressEvent.{name}" for name in EVENT_SLOTS])
    drill.number("event", ["EventType.TOOL_CALL_PROGRESS", "Event.event.tool_call_progress"])
    drill.number("field", ["RunStartedEvent.region"])
    generated = drill.codegen()

    assert 0 == generated.returncode, generated.stdout + generated.stderr
    # Codegen itself lists the new event in the Event union and in EventType.
    assert "ToolCallProgressEvent" in (drill.schema / "agui.json").read_text("utf-8")
    assert "TOOL_CALL_PROGRESS" in (drill.schema / "base.json").read_text("utf-8")

    # Until their rows exist, every per-event table refuses to import, naming the event.
    for module, expected in [
        ("aguikit.rules", "event types with no row: TOOL_CALL_PROGRESS (ToolCallProgressEvent)"),
        ("aguikit.chunks", "the chunk normalizer has no entry for ToolCallProgressEvent"),
        ("aguikit._dispatch", None),
        ("aguikit.models", None),
    ]:
        result = drill.python(f"import {module}")
        if expected is None:
            assert 0 == result.returncode, result.stderr
        else:
            assert 0 != result.returncode
            assert expected in result.stderr, result.stderr
    # The rows: one verifier row, and one decision for the normalizer and the applier,
    # made here in two steps to see the applier's own refusal in between.
    drill.edit_source(
        "event",
        "rules.py",
        "    Row(\n        E.TOOL_CALL_END,",
        ROW + "    Row(\n        E.TOOL_CALL_END,",
    )
    drill.edit_source("event", "_dispatch.py", ASIDE, ASIDE_NORMALIZER_ONLY)
    applier = drill.python("import aguikit.apply")

    assert 0 != applier.returncode
    assert "the applier has no entry for ToolCallProgressEvent" in applier.stderr, applier.stderr

    drill.edit_source("event", "_dispatch.py", ASIDE_NORMALIZER_ONLY, ASIDE_WITH_ROW)
    event = drill.python(CHECK_EVENT)
    field = drill.python(CHECK_FIELD)

    assert "event ok" in event.stdout, event.stderr
    assert "field ok" in field.stdout, field.stderr
    assert {
        "schema/tools.json",
        "schema/proto-ledger.txt",
        "src/aguikit/rules.py",
        "src/aguikit/_dispatch.py",
    } == drill.hand_edited["event"]
    assert {"schema/lifecycle.json", "schema/proto-ledger.txt"} == drill.hand_edited["field"]
    assert len(drill.hand_edited["event"]) <= 4
    assert len(drill.hand_edited["field"]) <= 2


def test_codegen_check_names_an_event_the_lists_do_not_have_yet(tmp_path: Path) -> None:
    """``--check`` (CI) reports the union and enum a family file outgrew, without writing."""
    drill = Drill(tmp_path)
    drill.edit_json("event", "tools.json", _add_event)
    before = (drill.schema / "agui.json").read_text("utf-8")

    result = subprocess.run(
        [sys.executable, str(GENERATE), "--check", "--schema", str(drill.schema)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert 1 == result.returncode
    assert "drift: schema/agui.json: the Event union lacks ToolCallProgressEvent" in result.stdout
    assert "drift: schema/base.json: EventType lacks TOOL_CALL_PROGRESS" in result.stdout
    assert before == (drill.schema / "agui.json").read_text("utf-8")
