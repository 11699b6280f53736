"""
The length-prefixed protobuf transport: frames split anywhere, a size limit, located errors
on a cut frame or a bad message, sync and async, and hostile bytes raise only aguikit errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aguikit._generated import agui_pb2 as pb
from aguikit.errors import AguiError, DecodeError, LimitExceededError
from aguikit.proto import (
    aiter_proto,
    encode_message,
    encode_proto_frame,
    iter_proto,
    iter_proto_wire,
)
from aguikit.session import Session
from aguikit.transport.proto import FrameDecoder, encode_frame, iter_frames, looks_like_frames
from aguikit.wire import to_wire

EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "héllo 🌍"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "STATE_SNAPSHOT", "snapshot": {"n": [1, 2.5, None, True, "x"]}},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]
STREAM = b"".join(encode_proto_frame(e) for e in EVENTS)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(st.lists(st.integers(0, 10_000), max_size=30))
def test_frames_split_anywhere_decode_to_the_same_events(cuts: list[int]) -> None:
    """Chunk boundaries (inside a prefix too) never change what is decoded."""
    assert EVENTS == list(iter_proto_wire(_cut(STREAM, cuts)))


def test_typed_events_come_out_validated() -> None:
    """``iter_proto`` yields the same typed events the SSE path would."""
    assert [e["type"] for e in EVENTS] == [str(e.type) for e in iter_proto([STREAM])]


def test_the_async_reader_matches_the_sync_one() -> None:
    """``aiter_proto`` over an async byte iterator yields what the sync reader yields."""

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(STREAM), 7):
            yield STREAM[i : i + 7]

    async def collect() -> list[dict[str, Any]]:
        return [e async for e in aiter_proto(chunks())]

    assert EVENTS == asyncio.run(collect())


def test_a_frame_over_the_limit_fails_before_it_is_buffered() -> None:
    """The prefix alone trips ``max_message_bytes`` (``AGUI-L004``), naming frame and offset."""
    big = encode_frame(b"\x0a" * 100)
    with pytest.raises(LimitExceededError) as caught:
        list(iter_frames([STREAM[:10], STREAM[10:], big[:4]], max_message_bytes=64, source="s.pb"))

    assert ("AGUI-L004", "max_message_bytes") == (caught.value.rule, caught.value.limit)
    assert len(EVENTS) + 1 == caught.value.frame
    assert len(STREAM) == caught.value.byte_offset


def test_a_cut_frame_is_located() -> None:
    """A stream ending inside a frame fails (``AGUI-D004``) after the whole frames before it."""
    seen: list[dict[str, Any]] = []
    with pytest.raises(DecodeError) as caught:
        seen.extend(iter_proto_wire([STREAM[:-3]], source="cut.pb"))

    assert "AGUI-D004" == caught.value.rule
    assert (len(EVENTS), "cut.pb") == (caught.value.frame, caught.value.source)
    assert EVENTS[:-1] == seen


def test_a_bad_message_is_located() -> None:
    """A frame whose payload is not an ``ag_ui.Event`` fails (``AGUI-D005``) with its frame."""
    bad = STREAM + encode_frame(b"\x0a\x05")
    with pytest.raises(DecodeError) as caught:
        list(iter_proto_wire([bad]))

    assert ("AGUI-D005", len(EVENTS) + 1, len(STREAM)) == (
        caught.value.rule,
        caught.value.frame,
        caught.value.byte_offset,
    )


def test_a_frame_naming_no_known_event_is_a_bad_message() -> None:
    """An empty envelope (no arm) is refused, as the official decoder refuses it."""
    with pytest.raises(DecodeError, match="names no event"):
        list(iter_proto_wire([encode_frame(b"")]))


def test_content_tells_frames_from_text() -> None:
    """A protobuf stream is recognised by its bytes; SSE and JSONL are not mistaken for it."""
    assert looks_like_frames(STREAM)
    assert not looks_like_frames(b'data: {"type":"RUN_STARTED"}\n\n')
    assert not looks_like_frames(b'{"type":"RUN_STARTED"}\n')


def test_the_decoder_keeps_memory_to_one_frame() -> None:
    """After each whole frame the buffer is empty again."""
    decoder = FrameDecoder()
    for byte in STREAM:
        decoder.feed(bytes([byte]))

    assert 0 == len(decoder._buffer)


@pytest.mark.fuzz
@settings(max_examples=300)
@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=6))
def test_hostile_bytes_raise_only_aguikit_errors(data: bytes, cuts: list[int]) -> None:
    """Random and mutated bytes: events or an aguikit error, never anything else."""
    for stream in (data, STREAM[: len(data)] + data, encode_frame(data)):
        with contextlib.suppress(AguiError):
            list(iter_proto(_cut(stream, cuts), max_message_bytes=1024))


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def test_an_envelope_arm_this_build_does_not_know_is_dropped_with_a_warning() -> None:
    """A frame whose envelope names an arm this build predates (here field 999, an event
    from a newer protocol) is handed on as an unknown type, so the session drops it with a
    warning and the run survives (the processing page: "Such a frame MUST be dropped, with a
    warning, rather than failing the run"), as SSE's unknown type is."""
    arm = _varint((999 << 3) | 2) + _varint(2) + b"\x08\x01"
    frames = [
        encode_proto_frame(EVENTS[0]),
        encode_frame(arm),
        encode_proto_frame(EVENTS[-1]),
    ]
    session = Session()

    session.feed_all(iter_proto_wire(frames))
    session.finish()

    assert ["RUN_STARTED", "RUN_FINISHED"] == [event.type for event in session.delivered]
    assert [("AGUI-W001", "ag_ui.Event#999")] == [
        (w.rule, w.message.split("'")[1]) for w in session.warnings
    ]


def test_an_unrecognised_outcome_survives_decoding_and_is_stripped_by_the_receiver() -> None:
    """An outcome rides the envelope as its type name; a name this build does not know is
    not refused at decode time but stripped by the receiver, with a warning, as on SSE (the
    protobuf binding: "the binding MUST NOT reject it at decode time")."""
    message = pb.Event()
    message.ParseFromString(encode_message(EVENTS[-1]))
    message.run_finished.outcome = "paused"
    frames = [encode_proto_frame(EVENTS[0]), encode_frame(message.SerializeToString())]
    session = Session()

    (decoded,) = list(iter_proto_wire(frames))[1:]
    session.feed_all(iter_proto_wire(frames))

    assert {"type": "paused"} == decoded["outcome"]
    assert "outcome" not in to_wire(session.delivered[-1])
    assert ["AGUI-W002"] == [w.rule for w in session.warnings]
