"""
The protobuf field-number ledger (``schema/proto-ledger.txt``) numbers exactly what the schema
implies, and the codegen refuses a ledger that lost, changed or lacks a number, naming it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "codegen"))

import proto  # noqa: E402

DEFS = json.loads((REPO / "src" / "aguikit" / "_generated" / "schema.json").read_text())["$defs"]
LEDGER_TEXT = (REPO / "schema" / proto.LEDGER_FILE).read_text(encoding="utf-8")


def _needed() -> list[str]:
    messages, enums = proto.describe(DEFS)
    return proto.slots(messages, enums)


def test_the_checked_in_ledger_numbers_every_slot_and_nothing_else() -> None:
    """Every field, oneof arm and enum value the schema implies has exactly one number."""
    proto.check_ledger(proto.read_ledger(LEDGER_TEXT), _needed(), [])


def test_a_schema_field_without_a_number_is_named() -> None:
    """Adding a schema field without appending a number fails, naming the field."""
    text = LEDGER_TEXT.replace("ToolCallEndEvent.tool_call_id = 2\n", "")

    with pytest.raises(proto.LedgerError) as caught:
        proto.check_ledger(proto.read_ledger(text), _needed(), [])

    assert any("ToolCallEndEvent.tool_call_id has no number" in p for p in caught.value.problems)


def test_a_changed_number_is_refused_against_the_committed_history() -> None:
    """A number that differs from a committed version of the ledger is named, old and new."""
    old = proto.read_ledger(LEDGER_TEXT)
    text = LEDGER_TEXT.replace("RawEvent.source = 3\n", "RawEvent.source = 9\n")

    with pytest.raises(proto.LedgerError) as caught:
        proto.check_ledger(proto.read_ledger(text), _needed(), [old])

    assert any("RawEvent.source changed from 3 to 9" in p for p in caught.value.problems)


def test_a_number_that_disappeared_is_refused() -> None:
    """Deleting a line is refused: a field that leaves the schema is marked reserved instead."""
    old = proto.read_ledger(LEDGER_TEXT + "Usage.legacy = 99 reserved\n")

    with pytest.raises(proto.LedgerError) as caught:
        proto.check_ledger(proto.read_ledger(LEDGER_TEXT), _needed(), [old])

    assert any("Usage.legacy = 99 disappeared" in p for p in caught.value.problems)


def test_two_fields_may_not_share_a_number() -> None:
    """Reusing a number inside one message is refused."""
    text = LEDGER_TEXT.replace("RawEvent.source = 3\n", "RawEvent.source = 2\n")

    with pytest.raises(proto.LedgerError) as caught:
        proto.check_ledger(proto.read_ledger(text), _needed(), [])

    assert any("share the number 2" in p for p in caught.value.problems)


def test_the_deprecated_thinking_events_have_no_slot() -> None:
    """THINKING_* are refused by the binary encoding rather than given unofficial numbers."""
    assert [] == [key for key in _needed() if "thinking" in key.lower()]


def test_codegen_check_fails_naming_a_field_the_ledger_does_not_number(tmp_path: Path) -> None:
    """``generate.py --check`` (what ``nox -s codegen_check`` runs) stops on the ledger, by name."""
    import shutil
    import subprocess

    schema = tmp_path / "schema"
    shutil.copytree(REPO / "schema", schema)
    ledger = schema / proto.LEDGER_FILE
    ledger.write_text(LEDGER_TEXT.replace("SubagentErrorEvent.code = 4\n", ""), encoding="utf-8")

    done = subprocess.run(
        [sys.executable, str(REPO / "codegen" / "generate.py"), "--check", "--schema", str(schema)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert 0 != done.returncode
    assert "SubagentErrorEvent.code has no number" in done.stderr
