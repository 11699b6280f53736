"""
The schema lint (``codegen/generate.py``'s :func:`lint`): the conventions of ``schema/``
that no validator checks, enforced on the real schema and shown to catch each breach.

Codegen runs the same lint before rendering, so a definition that breaks a convention
stops ``nox -s codegen`` (and ``codegen_check``) with the definition named, instead of
passing every test as it used to.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.generator import load_generator

REPO = Path(__file__).resolve().parent.parent
GENERATE = REPO / "codegen" / "generate.py"


GEN = load_generator("aguikit_codegen_lint")
BUNDLED: dict[str, Any] = GEN.bundle(GEN.load_family_files(REPO / "schema"))


def test_the_schema_follows_every_convention() -> None:
    """No problem on the checked-in schema."""
    assert [] == GEN.lint(BUNDLED)


def _drop(name: str, key: str) -> Callable[[dict[str, Any]], None]:
    def change(defs: dict[str, Any]) -> None:
        del defs[name][key]

    return change


def _set(name: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(defs: dict[str, Any]) -> None:
        defs[name][key] = value

    return change


def _new_event(defs: dict[str, Any]) -> None:
    """A new event the way a maintainer might add it: no anchor, not closed.  Not the one
    ``tests/test_drill.py`` adds, so this runs on the drill's copy too."""
    defs["ToolCallHeartbeatEvent"] = {
        "description": "A sign of life from an open tool call.",
        "type": "object",
        "allOf": [{"$ref": "#/$defs/BaseEvent"}],
        "properties": {"type": {"const": "TOOL_CALL_HEARTBEAT"}},
        "required": ["type"],
    }
    defs["Event"]["oneOf"].append({"$ref": "#/$defs/ToolCallHeartbeatEvent"})
    defs["EventType"]["enum"].append("TOOL_CALL_HEARTBEAT")


def _union_only(defs: dict[str, Any]) -> None:
    _new_event(defs)
    defs["EventType"]["enum"].remove("TOOL_CALL_HEARTBEAT")


def _inline_open(defs: dict[str, Any]) -> None:
    defs["RunStartedEvent"]["properties"]["progress"] = {
        "type": "object",
        "description": "An inline object with members, left open.",
        "properties": {"done": {"type": "integer"}},
    }


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_drop("ToolCall", "$anchor"), "ToolCall: \"$anchor\" must be 'ToolCall'"),
        (_set("ToolCall", "$anchor", "Call"), "ToolCall: \"$anchor\" must be 'ToolCall'"),
        (_drop("ToolCall", "description"), "ToolCall: no description"),
        (_drop("ToolCall", "unevaluatedProperties"), "ToolCall: an object must be closed"),
        (_drop("Metadata", "x-open"), "Metadata: an object must be closed"),
        (_set("Metadata", "x-open", " "), "Metadata: an object must be closed"),
        (_set("ToolCall", "x-open", "why"), "ToolCall: closed and marked x-open at once"),
        (_inline_open, "RunStartedEvent.progress: an object must be closed"),
        (
            _set("ThinkingStartEvent", "description", "Deprecated. Opened a span."),
            "ThinkingStartEvent: deprecated, so its description must name the replacement",
        ),
        (
            _set("ThinkingStartEvent", "description", "Deprecated: use THINKING_END."),
            "ThinkingStartEvent: deprecated, so its description must name the replacement",
        ),
        (_new_event, "ToolCallHeartbeatEvent: \"$anchor\" must be 'ToolCallHeartbeatEvent'"),
        (_new_event, "ToolCallHeartbeatEvent: an object must be closed"),
        (
            _union_only,
            "pinned by an Event member but not in EventType: "
            "TOOL_CALL_HEARTBEAT (ToolCallHeartbeatEvent)",
        ),
        (
            lambda defs: defs["EventType"]["enum"].append("TOOL_CALL_HEARTBEAT"),
            "in EventType but pinned by no Event member: TOOL_CALL_HEARTBEAT",
        ),
    ],
)
def test_each_breach_is_reported_naming_the_definition(
    change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    """One breach of one convention, and the lint names where."""
    broken = copy.deepcopy(BUNDLED)
    change(broken["$defs"])

    assert any(expected in problem for problem in GEN.lint(broken)), GEN.lint(broken)


@pytest.mark.parametrize("since", ["9.9", "1", "next"])
def test_x_since_must_be_a_version_no_newer_than_the_schema(since: str) -> None:
    """A member cannot be added by a version the schema does not speak yet."""
    broken = copy.deepcopy(BUNDLED)
    broken["$defs"]["ToolCall"]["properties"]["encryptedValueType"]["x-since"] = since

    assert [f"ToolCall: x-since {since!r} must be MAJOR.MINOR, at most 1.1 (the $id's)"] == (
        GEN.lint(broken)
    )


def test_codegen_stops_on_a_lint_problem_before_writing(tmp_path: Path) -> None:
    """``python codegen/generate.py`` runs the lint first: nothing is written, the exit names it."""
    schema = tmp_path / "schema"
    schema.mkdir()
    for path in (REPO / "schema").glob("*.json"):
        text = path.read_text(encoding="utf-8")
        if path.name == "messages.json":
            text = text.replace('"$anchor": "ToolCall",', "", 1)
        (schema / path.name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"

    result = subprocess.run(
        [sys.executable, str(GENERATE), "--schema", str(schema), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert 1 == result.returncode
    assert "schema lint failed" in result.stderr
    assert "ToolCall: \"$anchor\" must be 'ToolCall'" in result.stderr
    assert not out.exists()
