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

from aguikit.errors import AguiError, DecodeError, LimitExceededError
from aguikit.proto import aiter_proto, encode_proto_frame, iter_proto, iter_proto_wire
from aguikit.transport.proto import FrameDecoder, encode_frame, iter_frames, looks_like_frames

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
