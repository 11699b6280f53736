"""
Proof against the official implementation: aguikit's protobuf encoding is ``@ag-ui/proto`` 1.0.0's.

For every event type, one event with every optional member set (at every depth) and a batch
of hypothesis-generated ones are encoded by aguikit and decoded by ``@ag-ui/proto``, and
encoded by ``@ag-ui/proto`` and decoded by aguikit.  Decoded events must equal the
originals (as far as both encodings carry them: ``@ag-ui/proto`` 1.0.0 predates AG-UI 1.1's
``encryptedValueType``, and protobuf cannot tell an absent list of a run's input from an
empty one), and aguikit's bytes must equal ``@ag-ui/proto``'s for the same event.  Which
event types and members the package has is read from the package itself (its compiled
field numbers), so an event or member aguikit adds is left out by computation, not by a
list kept here.

Node runs ``tests/node/agui_proto.mjs`` over the package installed in ``tests/node``
(``nox -s tests`` installs it).  Without Node the test skips, unless
``AGUIKIT_REQUIRE_NODE`` is set, as CI sets it: there a missing oracle is a failure.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.strategies import instances

from aguikit import proto
from aguikit._generated.registry import EVENT_CLASSES, SINCE
from aguikit.wire import to_wire

NODE_DIR = Path(__file__).resolve().parent / "node"
LEDGER = NODE_DIR.parent.parent / "schema" / "proto-ledger.txt"


BYTE_OUTCOMES = ("same_bytes", "empty_key", "js_key_order", "js_proto_key")
"""What became of each event's byte comparison: equal, or one of the three JavaScript object
quirks that change @ag-ui/proto's bytes (never the decoded value), each counted."""


def _oracle_available() -> bool:
    return shutil.which("node") is not None and (NODE_DIR / "node_modules" / "@ag-ui").is_dir()


if not _oracle_available():
    if os.environ.get("AGUIKIT_REQUIRE_NODE"):
        pytest.fail(
            "AGUIKIT_REQUIRE_NODE is set but node or tests/node/node_modules is missing "
            "(npm install --prefix tests/node)",
            pytrace=False,
        )
    pytest.skip("node and @ag-ui/proto are not installed", allow_module_level=True)


def _numbers() -> dict[str, str]:
    """Every slot number @ag-ui/proto compiled in, ``Message.field`` → number, as the ledger
    writes them (``tests/node/numbers.mjs`` reads them from the package's encoders)."""
    done = subprocess.run(
        ["node", str(NODE_DIR / "numbers.mjs"), str(NODE_DIR / "package.json")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return dict(line.split(" = ") for line in done.stdout.split("\n") if line)


def _ledger() -> dict[str, str]:
    text = LEDGER.read_text(encoding="utf-8")
    return dict(line.split(" = ")[:2] for line in text.splitlines() if line and line[0] != "#")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


THEIRS: Final = _numbers()
OURS: Final = _ledger()
TYPES: Final = sorted(t for t in EVENT_CLASSES if f"EventType.{t}" in THEIRS)
"""The event types @ag-ui/proto can encode, read from it: not the deprecated ``THINKING_*``
(no envelope arm) nor any event the package predates."""
KNOWN_MESSAGES: Final = frozenset(key.rpartition(".")[0] for key in THEIRS)
NOT_IN_OFFICIAL: Final = frozenset(
    _camel(field)
    for key in OURS
    if key not in THEIRS
    for message, _, field in [key.rpartition(".")]
    if message in KNOWN_MESSAGES and message not in ("EventType", "Event.event")
)
"""Members of messages @ag-ui/proto has that it has no slot for (AG-UI 1.1's
``encryptedValueType``): computed from the ledger and the package, left out of comparisons."""


def official(requests: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    """Run a batch through @ag-ui/proto (one Node process per batch)."""
    path = tmp / "requests.json"
    path.write_text(json.dumps(requests), encoding="utf-8")
    done = subprocess.run(
        ["node", str(NODE_DIR / "agui_proto.mjs"), str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "SUPPRESS_TRANSFORMATION_WARNINGS": "1"},
    )
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def carried(value: Any) -> Any:
    """What both encodings carry: 1.1-only members dropped, objects' keys sorted."""
    if isinstance(value, dict):
        return {k: carried(v) for k, v in sorted(value.items()) if k not in NOT_IN_OFFICIAL}
    if isinstance(value, list):
        return [carried(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        # A double either way; JSON out of Node prints it shortest, so compare doubles.
        return float(value)
    return value


def encoder_order(value: Any) -> Any:
    """The value with every object's keys in the order aguikit's encoder writes a ``Struct``'s
    members (``SerializeToString(deterministic=True)``), so @ag-ui/proto, which writes them in
    the object's order, can write the same bytes. Read back from protobuf itself, not assumed:
    upb orders a key after the longer keys it begins (``"ab"`` before ``"a"``)."""
    if isinstance(value, list):
        return [encoder_order(v) for v in value]
    if not isinstance(value, dict):
        return value
    struct = struct_pb2.Struct()
    for key in value:
        struct[key] = None
    written = struct.SerializeToString(deterministic=True)
    keys: list[str] = []
    at = 0
    while at < len(written):  # each member: tag 0x0a, a varint length, a FieldsEntry
        size, shift, at = 0, 0, at + 1
        while True:
            size |= (written[at] & 0x7F) << shift
            shift, at = shift + 7, at + 1
            if written[at - 1] < 0x80:
                break
        keys.append(struct_pb2.Struct.FieldsEntry.FromString(written[at : at + size]).key)
        at += size
    assert sorted(keys) == sorted(value)
    return {k: encoder_order(value[k]) for k in keys}


def projected(wire: dict[str, Any]) -> dict[str, Any]:
    """The event as protobuf can carry it at all (aguikit's own round trip), 1.1 members
    dropped; equal to the original but for the documented lossy points."""
    return carried(proto.decode_message(proto.encode_message(wire)))


def _agreement(events: list[dict[str, Any]], tmp: Path) -> dict[str, int]:
    events = [carried(e) for e in events]
    ours = [proto.encode_message(e) for e in events]
    requests = [{"decode": base64.b64encode(b).decode()} for b in ours]
    requests += [{"encode": encoder_order(e)} for e in events]
    answers = official(requests, tmp)
    decoded, encoded = answers[: len(events)], answers[len(events) :]
    counts = dict.fromkeys(
        (
            "they_decode_ours",
            "we_decode_theirs",
            "same_bytes",
            "empty_key",
            "js_key_order",
            "js_proto_key",
        ),
        0,
    )
    for event, mine, theirs_decoded, theirs_encoded in zip(
        events, ours, decoded, encoded, strict=True
    ):
        if _has_key(event, "__proto__"):
            # JavaScript assigns a "__proto__" member to the object's prototype instead:
            # @ag-ui/proto loses it both ways (its bug, not the wire's), so no comparison.
            counts["js_proto_key"] += 1
            continue
        assert "error" not in theirs_decoded, (event, theirs_decoded)
        assert projected(event) == carried(theirs_decoded["ok"]), event
        counts["they_decode_ours"] += 1
        assert "error" not in theirs_encoded, (event, theirs_encoded)
        their_bytes = base64.b64decode(theirs_encoded["ok"])
        assert projected(event) == carried(proto.decode_message(their_bytes)), event
        counts["we_decode_theirs"] += 1
        if _has_key(event, ""):
            # ts-proto leaves an empty map key off the wire (proto3 default), upb writes it:
            # both decode to the same Struct, so only the bytes differ.
            counts["empty_key"] += 1
            continue
        if _has_index_key(event):
            # JavaScript enumerates array-index keys ("0", "10") first, in numeric order, so
            # @ag-ui/proto cannot write them in sorted order; same Struct, other bytes.
            counts["js_key_order"] += 1
            continue
        assert their_bytes == mine, event
        counts["same_bytes"] += 1
    return counts


def _has_index_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(
            k.isascii() and k.isdigit() and (k == "0" or k[0] != "0") and int(k) < 2**32 - 1
            for k in value
        ) or any(_has_index_key(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_index_key(v) for v in value)
    return False


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_has_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(_has_key(v, key) for v in value)
    return False


def test_the_field_numbers_are_the_ones_compiled_into_the_official_package() -> None:
    """Every number @ag-ui/proto 1.0.0 encodes with is the ledger's, and every slot the ledger
    adds takes a number the package uses for nothing else in that message or enum, so an
    addition can never be read as something the package knows."""
    taken: dict[str, set[str]] = {}
    for key, number in THEIRS.items():
        taken.setdefault(key.rpartition(".")[0], set()).add(number)
    added = {k: v for k, v in OURS.items() if k not in THEIRS}

    assert {} == {k: (v, OURS.get(k)) for k, v in THEIRS.items() if OURS.get(k) != v}
    assert {} == {k: v for k, v in added.items() if v in taken.get(k.rpartition(".")[0], ())}


def test_the_members_left_out_are_the_schemas_newer_ones_where_the_package_has_the_message() -> (
    None
):
    """What the comparisons leave out is derived, not listed: with @ag-ui/proto 1.0.0 it is
    AG-UI 1.1's ``encryptedValueType`` (``x-since`` in the schema), and every member the
    schema marks newer than 1.0 on a message the package has is among it."""
    newer = {
        member
        for definition, members in SINCE.items()
        if definition in KNOWN_MESSAGES
        for member in members
    }

    assert newer <= NOT_IN_OFFICIAL


def test_every_event_type_with_every_member_set_agrees(tmp_path: Path) -> None:
    """One fully populated event per type: decoded both ways and byte-identical."""
    events: list[dict[str, Any]] = []
    for kind in TYPES:
        strategy = instances(EVENT_CLASSES[kind], nullable_any=False, full=True).map(to_wire)
        events += [_example(strategy, seed) for seed in range(3)]

    counts = _agreement(events, tmp_path)

    assert len(TYPES) * 3 == sum(
        counts[k] for k in ("same_bytes", "empty_key", "js_key_order", "js_proto_key")
    )
    assert len(TYPES) * 3 == counts["they_decode_ours"] + counts["js_proto_key"]
    assert counts["they_decode_ours"] == counts["we_decode_theirs"]


def test_keys_one_begins_another_agree(tmp_path: Path) -> None:
    """The drill's find: a key that begins a longer one ("Ñ" and "Ñ\x9f"), which upb writes
    after the longer one, is written in the same order by @ag-ui/proto when handed the
    object in the encoder's order, so the bytes agree."""
    value = {"a": 1, "ab": 2, "Ñ": 3, "Ñ\x9f": 4, "\U0007a550ab": 5, "b": {"x": 1, "xy": 2}}
    event = {"type": "CUSTOM", "name": "keys", "value": value}

    counts = _agreement([event], tmp_path)

    assert counts["same_bytes"] == 1, counts
    assert list(encoder_order(value)) == list(encoder_order(dict(reversed(value.items()))))


def _example(strategy: st.SearchStrategy[dict[str, Any]], seed: int) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    @settings(
        max_examples=1, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def grab(value: dict[str, Any]) -> None:
        found.append(value)

    for _ in range(seed + 1):
        grab()
    return found[-1]


GENERATED = st.lists(
    st.one_of([instances(EVENT_CLASSES[k], nullable_any=False).map(to_wire) for k in TYPES]),
    min_size=5,
    max_size=15,
)


@settings(max_examples=12, deadline=None, database=None, phases=[Phase.generate])
@given(events=GENERATED)
def test_generated_events_agree(
    tmp_path_factory: pytest.TempPathFactory, events: list[dict[str, Any]]
) -> None:
    """Hypothesis-generated events of every type: the same agreement, batched per example."""
    counts = _agreement(events, tmp_path_factory.mktemp("batch"))

    assert len(events) == sum(
        counts[k] for k in ("same_bytes", "empty_key", "js_key_order", "js_proto_key")
    )
    assert len(events) == counts["they_decode_ours"] + counts["js_proto_key"]
    assert counts["they_decode_ours"] == counts["we_decode_theirs"]
