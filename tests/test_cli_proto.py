"""``aguikit check``/``replay`` read protobuf recordings (by content), and ``aguikit convert``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_cli import GOOD

from aguikit.encode import encode_proto
from aguikit.proto import iter_proto_wire
from aguikit.transport.jsonl import iter_jsonl
from aguikit.transport.sse import encode, iter_events

STREAM = b"".join(encode_proto(e) for e in GOOD)


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "aguikit", *args], capture_output=True, timeout=120, check=False
    )


@pytest.mark.parametrize("name", ["run.pb", "run.bin", "run.sse", "recording"])
def test_check_reads_protobuf_by_content_whatever_the_name(tmp_path: Path, name: str) -> None:
    """A protobuf recording checks clean under any suffix: the first bytes decide."""
    (tmp_path / name).write_bytes(STREAM)

    result = run("check", str(tmp_path / name))

    assert 0 == result.returncode, result.stdout + result.stderr
    assert b"OK: 9 events" in result.stdout


def test_replay_reads_protobuf(tmp_path: Path) -> None:
    """``replay`` materialises a protobuf recording like an SSE one."""
    (tmp_path / "run.pb").write_bytes(STREAM)

    result = run("replay", str(tmp_path / "run.pb"))

    assert 0 == result.returncode, result.stderr
    assert b"lookup" in result.stdout


def test_a_cut_protobuf_recording_is_unreadable_with_its_location(tmp_path: Path) -> None:
    """A recording cut inside a frame reports the frame, as a decode error."""
    (tmp_path / "cut.pb").write_bytes(STREAM[:-2])

    result = run("check", str(tmp_path / "cut.pb"))

    assert 1 == result.returncode
    assert b"frame 9" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("to", "decode"),
    [("proto", iter_proto_wire), ("jsonl", iter_jsonl), ("sse", iter_events)],
)
@pytest.mark.parametrize("start", ["sse", "proto"])
def test_convert_turns_any_encoding_into_any_other(
    tmp_path: Path, to: str, decode: object, start: str
) -> None:
    """SSE → protobuf → JSONL → SSE … : the events are the same at every step."""
    source = tmp_path / f"in.{start}"
    source.write_bytes(STREAM if start == "proto" else "".join(map(encode, GOOD)).encode())

    result = run("convert", str(source), "--to", to, "-o", str(tmp_path / "out"))

    assert 0 == result.returncode, result.stderr
    assert GOOD == list(decode([(tmp_path / "out").read_bytes()]))  # type: ignore[operator]


def test_convert_to_protobuf_translates_thinking_events(tmp_path: Path) -> None:
    """THINKING_* have no protobuf slot: convert writes the REASONING_* they translate to."""
    events = [
        GOOD[0],
        {"type": "THINKING_START"},
        {"type": "THINKING_END"},
        GOOD[-1],
    ]
    (tmp_path / "old.sse").write_text("".join(map(encode, events)))

    result = run("convert", str(tmp_path / "old.sse"), "--to", "proto", "-o", str(tmp_path / "o"))

    assert 0 == result.returncode, result.stderr
    types = [e["type"] for e in iter_proto_wire([(tmp_path / "o").read_bytes()])]
    assert ["RUN_STARTED", "REASONING_START", "REASONING_END", "RUN_FINISHED"] == types


def test_check_json_report_names_the_protobuf_format(tmp_path: Path) -> None:
    """The JSON report says a recording was read as protobuf (its ``format``)."""
    (tmp_path / "run.pb").write_bytes(STREAM)

    result = run("check", str(tmp_path / "run.pb"), "--format", "json")

    assert 0 == result.returncode, result.stderr
    (source,) = json.loads(result.stdout)["sources"]
    assert ("proto", 9) == (source["format"], source["events"])
