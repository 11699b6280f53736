"""
Hostile bytes against the protobuf transport, as tests/test_fuzz_transport.py does for SSE and
JSONL: mutated corpus streams encoded as length-prefixed ``ag_ui.Event`` frames, then
byte-mutated.  On every input the decoder yields wire dicts or raises a located
:class:`~aguikit.DecodeError` (or :class:`~aguikit.LimitExceededError`) naming the frame and
byte offset; nothing else escapes; and where the bytes were cut does not matter.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable
from typing import Any

import pytest
from tests import hostile
from tests.test_fuzz_transport import outcome

from aguikit.errors import AguiError
from aguikit.proto import encode_proto_frame, iter_proto_wire

pytestmark = pytest.mark.fuzz

STREAMS = hostile.corpus_streams()
LIMITS = [16, 256, 100_000, None]


def proto_input(rng: random.Random) -> tuple[bytes, int | None, int]:
    """Mutated events that still encode, as frames, then mutated bytes, a limit and a seed."""
    frames = []
    for event in hostile.mutate_stream(rng.choice(STREAMS), rng):
        try:
            frames.append(encode_proto_frame(event))
        except AguiError:
            continue  # not every mutation has a protobuf form; the decoder is what is tested
    data = b"".join(frames)
    if rng.random() < 0.8:
        data = hostile.mutate_bytes(data, rng)
    return data, rng.choice(LIMITS), rng.randrange(2**32)


def run(limit: int | None) -> Any:
    kwargs = {} if limit is None else {"max_message_bytes": limit}
    return lambda pieces: iter_proto_wire(pieces, source="fuzz", **kwargs)


def test_protobuf_streams_raise_only_located_decode_errors_wherever_cut() -> None:
    """Events and the error (class, frame, offset) are the same whole and in random splits."""

    def entry(value: tuple[bytes, int | None, int]) -> None:
        data, limit, seed = value
        whole = outcome(run(limit), [data])
        split = outcome(run(limit), hostile.random_splits(data, random.Random(seed)))
        assert hostile.canonical(whole[0]) == hostile.canonical(split[0])
        assert whole[1] == split[1]

    hostile.drive(entry, proto_input, hostile.no_escape)


def test_a_frame_of_random_bytes_is_a_located_error_or_an_event() -> None:
    """Any payload at all behind a correct prefix: an event dict or ``AGUI-D005``."""

    def frames(rng: random.Random) -> list[bytes]:
        return [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(3)]

    def entry(payloads: Iterable[bytes]) -> None:
        outcome(run(None), [b"".join(len(p).to_bytes(4, "big") + p for p in payloads)])

    hostile.drive(entry, frames, hostile.no_escape)


def test_the_encoder_raises_only_aguikit_errors_on_hostile_documents() -> None:
    """Mutated events (wrong types, deep nesting, junk): bytes or an ``EncodeError``."""

    def entry(events: list[Any]) -> None:
        for event in events:
            with contextlib.suppress(AguiError):
                encode_proto_frame(event)

    hostile.drive(
        entry, lambda rng: hostile.mutate_stream(rng.choice(STREAMS), rng), hostile.no_escape
    )
