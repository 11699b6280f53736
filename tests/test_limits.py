"""
Every documented safety limit (``docs/limits.md``, :mod:`aguikit.limits`) produces its own
clear error, at its documented default and at a configured value, and input exactly at the
limit is still accepted.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from tests.hostile import deep
from tests.support import run_started, text_end, text_start

from aguikit import (
    ChunkNormalizer,
    LimitExceededError,
    ProtocolError,
    Session,
    Verifier,
    loads_event,
    parse_event,
    verify_all,
)
from aguikit import limits as limits_module
from aguikit.limits import MAX_JSON_DEPTH, MAX_OPEN_ENTITIES, MAX_WARNINGS
from aguikit.transport import DEFAULT_MAX_DEPTH, DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_LINE_BYTES
from aguikit.transport.jsonl import JSONLDecoder, iter_jsonl
from aguikit.transport.sse import SSEDecoder, iter_events, iter_frames

LOADS_EVENT_MAX_DEPTH = inspect.signature(loads_event).parameters["max_depth"].default

RS = run_started(thread_id="t", run_id="r")


def snapshot_at_depth(depth: int) -> str:
    """A STATE_SNAPSHOT whose JSON nests exactly ``depth`` levels (the event is level 1)."""
    return json.dumps({"type": "STATE_SNAPSHOT", "snapshot": deep(depth - 1)})


# ---- one default per limit --------------------------------------------------------------


def test_every_decoder_shares_one_json_depth_default() -> None:
    """SSE, JSONL and ``loads_event`` refuse at the same documented depth."""
    assert MAX_JSON_DEPTH == DEFAULT_MAX_DEPTH == LOADS_EVENT_MAX_DEPTH


def test_the_transport_defaults_are_the_documented_ones() -> None:
    """The frame and line defaults re-exported by the transports are those of ``limits``."""
    assert limits_module.MAX_FRAME_BYTES == DEFAULT_MAX_FRAME_BYTES
    assert limits_module.MAX_LINE_BYTES == DEFAULT_MAX_LINE_BYTES


def test_docs_limits_md_names_every_limit_and_its_default() -> None:
    """The limits page documents each constant of :mod:`aguikit.limits` by its value."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "limits.md").read_text("utf-8")
    for name in limits_module.__all__:
        assert name in text
    assert f"{MAX_OPEN_ENTITIES:,}" in text
    assert str(MAX_JSON_DEPTH) in text
    assert "AGUI-V093" in text


# ---- max_frame_bytes and max_line_bytes ---------------------------------------------------


def test_a_frame_past_max_frame_bytes_is_a_limit_error_naming_frame_and_offset() -> None:
    """The second frame grows past the limit; the error names the setting and where."""
    first = b"data: {}\n\n"
    data = first + b"data: " + b"x" * 200 + b"\n\n"

    with pytest.raises(LimitExceededError) as info:
        list(iter_frames([data], source="s", max_frame_bytes=100))

    assert "max_frame_bytes" == info.value.limit
    assert 100 == info.value.maximum
    assert 2 == info.value.frame
    assert len(first) == info.value.byte_offset
    assert "max_frame_bytes=100" in str(info.value)


def test_a_frame_that_never_ends_is_stopped_at_the_limit_without_buffering_more() -> None:
    """A peer sending data without a line end is refused once the limit is passed."""
    decoder = SSEDecoder(max_frame_bytes=1000)
    decoder.feed(b"data: ")

    with pytest.raises(LimitExceededError):
        for _ in range(100):
            decoder.feed(b"y" * 100)

    assert decoder.bytes_consumed <= 1200


def test_a_frame_exactly_at_max_frame_bytes_is_accepted() -> None:
    """The limit is inclusive: a frame of exactly that many bytes decodes."""
    frame = b"data: " + b"x" * 10 + b"\n"

    frames = SSEDecoder(max_frame_bytes=len(frame)).feed(frame + b"\n")

    assert ["x" * 10] == [f.data for f in frames]


def test_a_line_past_max_line_bytes_is_a_limit_error_naming_line_and_offset() -> None:
    """JSONL: the line number and its start offset, however the bytes were split."""
    first = b"{}\n"
    data = first + b'{"a":"' + b"x" * 100 + b'"}\n'
    for pieces in ([data], [data[:10], data[10:]], [bytes([b]) for b in data]):
        decoder = JSONLDecoder(max_line_bytes=50)
        with pytest.raises(LimitExceededError) as info:
            for piece in pieces:
                decoder.feed(piece)
            decoder.close()

        assert "max_line_bytes" == info.value.limit
        assert 2 == info.value.line
        assert len(first) == info.value.byte_offset


# ---- max_depth ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decode",
    [
        lambda text, **kw: list(iter_events([f"data: {text}\n\n".encode()], **kw)),
        lambda text, **kw: list(iter_jsonl([text.encode() + b"\n"], **kw)),
        lambda text, **kw: loads_event(text, **({"check": False} if not kw else {})),
    ],
    ids=["sse", "jsonl", "loads_event"],
)
def test_json_at_max_depth_is_accepted_and_one_deeper_is_a_limit_error(decode: Any) -> None:
    """Every decoder accepts exactly ``MAX_JSON_DEPTH`` levels and refuses one more."""
    decode(snapshot_at_depth(MAX_JSON_DEPTH))

    with pytest.raises(LimitExceededError) as info:
        decode(snapshot_at_depth(MAX_JSON_DEPTH + 1))

    assert "max_depth" == info.value.limit
    assert MAX_JSON_DEPTH == info.value.maximum


def test_a_snapshot_at_max_depth_goes_through_the_whole_session() -> None:
    """What the decoders accept, every later stage (schema, wire, applier) handles."""
    (event,) = iter_events([f"data: {snapshot_at_depth(MAX_JSON_DEPTH)}\n\n".encode()])
    session = Session()
    session.feed(RS)

    session.feed(event)

    assert isinstance(session.state, list)


def test_max_depth_is_configurable_per_decoder() -> None:
    """A caller that needs less (or more) sets ``max_depth``."""
    with pytest.raises(LimitExceededError):
        list(iter_events([b'data: {"a":[[1]]}\n\n'], max_depth=2))
    with pytest.raises(LimitExceededError):
        list(iter_jsonl([b'{"a":[[1]]}\n'], max_depth=2))


# ---- max_open_entities ---------------------------------------------------------------------


def test_the_verifier_refuses_the_entity_past_max_open_entities() -> None:
    """``AGUI-V093`` names the event, the entity and the limit; closing frees room."""
    verifier = Verifier(max_open_entities=2)
    for doc in (RS, text_start("m1"), text_start("m2")):
        verifier.verify(parse_event(doc))

    with pytest.raises(ProtocolError) as info:
        verifier.verify(parse_event(text_start("m3")))

    assert "AGUI-V093" == info.value.rule
    assert "too-many-open-entities" == info.value.symbol
    assert 3 == info.value.event_index
    assert "m3" == info.value.entity_id
    assert "max_open_entities=2" in info.value.message
    verifier.verify(parse_event(text_end("m1")))
    verifier.verify(parse_event(text_start("m3")))


def test_the_default_open_entity_limit_is_ten_thousand() -> None:
    """A producer opening messages forever is stopped at the documented default."""
    events = [parse_event(RS)] + [
        parse_event(text_start(f"m{i}")) for i in range(MAX_OPEN_ENTITIES)
    ]
    verifier = Verifier()
    for event in events:
        verifier.verify(event)

    with pytest.raises(ProtocolError) as info:
        verifier.verify(parse_event(text_start("one-too-many")))

    assert "AGUI-V093" == info.value.rule
    assert MAX_OPEN_ENTITIES + 1 == info.value.event_index


def test_verify_all_takes_the_limit_too() -> None:
    """The whole-stream helper passes ``max_open_entities`` on."""
    with pytest.raises(ProtocolError, match="AGUI-V093"):
        verify_all(
            [parse_event(d) for d in (RS, text_start("a"), text_start("b"))], max_open_entities=1
        )


def test_the_normalizer_refuses_a_stream_per_new_owner_past_the_limit() -> None:
    """Chunks under ever new ``subagentRunId`` values open a lane each; the limit stops it."""
    normalizer = ChunkNormalizer(max_open_entities=3)
    chunks = [
        parse_event({"type": "TEXT_MESSAGE_CHUNK", "messageId": f"m{i}", "subagentRunId": f"s{i}"})
        for i in range(4)
    ]
    for chunk in chunks[:3]:
        normalizer.normalize(chunk)

    with pytest.raises(ProtocolError) as info:
        normalizer.normalize(chunks[3])

    assert "AGUI-V093" == info.value.rule
    assert "m3" == info.value.entity_id
    assert "max_open_entities=3" in info.value.message


def test_a_session_past_the_limit_fails_with_the_event_index_and_keeps_its_messages() -> None:
    """The session passes the limit on; the error is located and fatal, nothing changes."""
    session = Session(max_open_entities=2)
    session.feed_all([RS, text_start("m1"), text_start("m2")])
    before = [m.id for m in session.messages]

    with pytest.raises(ProtocolError) as info:
        session.feed(text_start("m3"))

    assert "AGUI-V093" == info.value.rule
    assert 3 == info.value.event_index
    assert before == [m.id for m in session.messages]


# ---- max_warnings ---------------------------------------------------------------------------


def test_a_session_keeps_max_warnings_but_counts_and_reports_every_one() -> None:
    """One warning per event: the list stops growing, the count and each feed's own do not."""
    session = Session(max_warnings=3)
    session.feed(RS)
    for i in range(10):
        session.feed({"type": "FUTURE_EVENT", "n": i})
        assert 1 == len(session.last_warnings)
        assert "unknown-event" == session.last_warnings[0].code

    assert 3 == len(session.warnings)
    assert 10 == session.warning_count
    assert [1, 2, 3] == [w.event_index for w in session.warnings]


def test_the_default_warning_cap_is_the_documented_one() -> None:
    """``MAX_WARNINGS`` records are kept by default."""
    session = Session()
    session.feed(RS)
    for _ in range(MAX_WARNINGS + 5):
        session.feed({"type": "FUTURE_EVENT"})

    assert MAX_WARNINGS == len(session.warnings)
    assert MAX_WARNINGS + 5 == session.warning_count
