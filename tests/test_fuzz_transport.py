"""
Hostile bytes against the transport decoders: SSE (sync and async) and JSONL.

A network cuts bytes wherever it likes, and a peer may send anything.  The invariants, on
every input: the decoder yields frames or objects, or raises a
:class:`~aguikit.DecodeError` (or its :class:`~aguikit.LimitExceededError`) naming the frame
or line and the byte offset; nothing else escapes; and *where the bytes were cut does not
matter* - the frames delivered and the error raised (class, frame or line, offset) are the
same whether the input arrives in one piece or in random splits, inside characters and
inside ``\\r\\n`` pairs too.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import hostile

from aguikit import DecodeError, LimitExceededError
from aguikit.transport.jsonl import JSONLDecoder, iter_jsonl
from aguikit.transport.sse import SSEDecoder, aiter_events, iter_events

pytestmark = pytest.mark.fuzz

STREAMS = hostile.corpus_streams()
LIMITS = [64, 4096, 100_000, None]
"""``max_frame_bytes``/``max_line_bytes`` to try (``None``: the default)."""


def sse_input(rng: random.Random) -> tuple[bytes, int | None, int]:
    """Mutated SSE bytes, a frame limit, and a seed for the splits."""
    events = hostile.serialisable(hostile.mutate_stream(rng.choice(STREAMS), rng))
    data = hostile.sse_bytes(events)
    if rng.random() < 0.8:
        data = hostile.mutate_bytes(data, rng)
    if rng.random() < 0.1:
        data = data.replace(b"\n\n", b"\r\n\r\n")
    if rng.random() < 0.1 and data.endswith(b"\n\n"):
        data = data[:-1]  # no trailing blank line
    return data, rng.choice(LIMITS), rng.randrange(2**32)


def jsonl_input(rng: random.Random) -> tuple[bytes, int | None, int]:
    events = hostile.serialisable(hostile.mutate_stream(rng.choice(STREAMS), rng))
    data = b"".join(
        json.dumps(e, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass") + b"\n"
        for e in events
    )
    if rng.random() < 0.8:
        data = hostile.mutate_bytes(data, rng)
    return data, rng.choice(LIMITS), rng.randrange(2**32)


def assert_transport_error(error: BaseException) -> None:
    assert isinstance(error, DecodeError), f"{type(error).__name__} escaped: {error}"
    assert error.byte_offset is not None, f"no byte offset: {error!r}"
    assert error.frame is not None or error.line is not None, f"no frame or line: {error!r}"
    if isinstance(error, LimitExceededError):
        assert error.limit in str(error), str(error)


Outcome = tuple[list[Any], tuple[type, int | None, int | None, int | None] | None]


def outcome(run: Callable[[Iterable[bytes]], Iterable[Any]], pieces: Iterable[bytes]) -> Outcome:
    """Everything ``run`` yields from ``pieces``, and the error it ended with (if any)."""
    got: list[Any] = []
    try:
        for item in run(pieces):
            got.append(item)
    except Exception as error:
        assert_transport_error(error)
        assert isinstance(error, DecodeError)
        return got, (type(error), error.frame, error.line, error.byte_offset)
    return got, None


def sse_frames(limit: int | None) -> Callable[[Iterable[bytes]], Iterable[Any]]:
    kwargs = {} if limit is None else {"max_frame_bytes": limit}

    def run(pieces: Iterable[bytes]) -> Iterable[Any]:
        decoder = SSEDecoder(source="fuzz", **kwargs)
        for piece in pieces:
            yield from decoder.feed(piece)
        yield from decoder.close()

    return run


def split_invariant(
    run: Callable[[Iterable[bytes]], Iterable[Any]], data: bytes, seed: int
) -> None:
    whole = outcome(run, [data])
    split = outcome(run, hostile.random_splits(data, random.Random(seed)))
    assert whole == split, f"whole: {whole[1]} after {len(whole[0])}; split: {split[1]}"


def test_sse_frames_do_not_depend_on_where_the_bytes_were_cut() -> None:
    """Frames and the error are the same for one piece and for random splits."""

    def entry(value: tuple[bytes, int | None, int]) -> None:
        data, limit, seed = value
        split_invariant(sse_frames(limit), data, seed)

    hostile.drive(entry, sse_input, hostile.no_escape)


def test_sse_events_raise_only_located_decode_errors() -> None:
    """``iter_events`` parses every frame's JSON or names the frame and offset it failed at."""

    def entry(value: tuple[bytes, int | None, int]) -> None:
        data, limit, seed = value
        kwargs = {} if limit is None else {"max_frame_bytes": limit}
        outcome(
            lambda pieces: iter_events(pieces, source="fuzz", **kwargs),
            hostile.random_splits(data, random.Random(seed)),
        )

    hostile.drive(entry, sse_input, hostile.no_escape)


async def _aiter(pieces: Iterable[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def test_async_sse_events_agree_with_the_sync_decoder() -> None:
    """``aiter_events`` yields what ``iter_events`` yields and fails where it fails."""

    async def collect(data: bytes, seed: int, limit: int | None) -> Outcome:
        kwargs = {} if limit is None else {"max_frame_bytes": limit}
        got: list[Any] = []
        pieces = hostile.random_splits(data, random.Random(seed))
        try:
            async for item in aiter_events(_aiter(pieces), source="fuzz", **kwargs):
                got.append(item)
        except Exception as error:
            assert_transport_error(error)
            assert isinstance(error, DecodeError)
            return got, (type(error), error.frame, error.line, error.byte_offset)
        return got, None

    async def many(values: list[tuple[bytes, int | None, int]]) -> None:
        for data, limit, seed in values:
            kwargs = {} if limit is None else {"max_frame_bytes": limit}
            expected = outcome(lambda p, kw=kwargs: iter_events(p, source="fuzz", **kw), [data])
            actual = await collect(data, seed, limit)
            assert hostile.canonical(expected[0]) == hostile.canonical(actual[0])
            assert expected[1] == actual[1]

    # One event loop for a batch: asyncio.run per input would measure the loop, not us.
    def entry(values: list[tuple[bytes, int | None, int]]) -> None:
        asyncio.run(many(values))

    batch = 50
    hostile.drive(
        entry,
        lambda rng: [sse_input(rng) for _ in range(batch)],
        hostile.no_escape,
        count=max(1, hostile.INPUTS // batch),
    )


def jsonl_objects(limit: int | None) -> Callable[[Iterable[bytes]], Iterable[Any]]:
    kwargs = {} if limit is None else {"max_line_bytes": limit}

    def run(pieces: Iterable[bytes]) -> Iterable[Any]:
        decoder = JSONLDecoder(source="fuzz", **kwargs)
        for piece in pieces:
            yield from decoder.feed(piece)
        yield from decoder.close()

    return run


def test_jsonl_objects_do_not_depend_on_where_the_bytes_were_cut() -> None:
    """Lines, objects and the error (line, offset) are the same however the input is split."""

    def entry(value: tuple[bytes, int | None, int]) -> None:
        data, limit, seed = value
        whole = outcome(jsonl_objects(limit), [data])
        split = outcome(jsonl_objects(limit), hostile.random_splits(data, random.Random(seed)))
        assert hostile.canonical(whole[0]) == hostile.canonical(split[0])
        assert whole[1] == split[1], f"whole: {whole[1]}; split: {split[1]}"

    hostile.drive(entry, jsonl_input, hostile.no_escape)


def test_iter_jsonl_raises_only_located_decode_errors() -> None:
    """``iter_jsonl`` on hostile bytes yields objects or names the line and offset."""

    def entry(value: tuple[bytes, int | None, int]) -> None:
        data, limit, seed = value
        kwargs = {} if limit is None else {"max_line_bytes": limit}
        outcome(
            lambda pieces: iter_jsonl(pieces, source="fuzz", **kwargs),
            hostile.random_splits(data, random.Random(seed)),
        )

    hostile.drive(entry, jsonl_input, hostile.no_escape)


# ---- shrinking properties ---------------------------------------------------------------

_SSE_ATOMS = [b"data: ", b"data:", b"{}", b'{"type":"RUN_STARTED"}', b"\n", b"\r", b"\r\n", b":"]
_SSE_ATOMS += [b"\xff", b"\xc3", b"\xef\xbb\xbf", b"event: x", b"id: 1", b"retry: 5", b"x"]


@given(
    st.lists(st.sampled_from(_SSE_ATOMS), max_size=30).map(b"".join),
    st.lists(st.integers(0, 200), max_size=10),
    st.sampled_from([8, 32, None]),
)
def test_sse_split_invariance_shrinks_to_a_minimal_byte_sequence(
    data: bytes, cuts: list[int], limit: int | None
) -> None:
    """From SSE's own atoms: cutting anywhere never changes frames or the error."""
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert outcome(sse_frames(limit), [data]) == outcome(sse_frames(limit), pieces)


_JSONL_ATOMS = [b"{}", b'{"a":1}', b"\n", b"\r\n", b" ", b"[", b"\xff", b"\xef\xbb\xbf", b"x"]


@given(
    st.lists(st.sampled_from(_JSONL_ATOMS), max_size=30).map(b"".join),
    st.lists(st.integers(0, 200), max_size=10),
    st.sampled_from([4, 16, None]),
)
def test_jsonl_split_invariance_shrinks_to_a_minimal_byte_sequence(
    data: bytes, cuts: list[int], limit: int | None
) -> None:
    """From JSONL's own atoms: cutting anywhere never changes objects or the error."""
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert outcome(jsonl_objects(limit), [data]) == outcome(jsonl_objects(limit), pieces)


# ---- regressions ------------------------------------------------------------------------


def test_a_crlf_split_between_reads_counts_toward_the_frame_limit_like_an_unsplit_one() -> None:
    """The LF of a CRLF arriving in the next read used to go uncounted, so a frame one byte
    over ``max_frame_bytes`` passed when the network cut between CR and LF."""
    line = b"data: 0123456789\r\n"
    data = line + b"\r\n"
    whole = outcome(sse_frames(len(line) - 1), [data])
    cut = outcome(sse_frames(len(line) - 1), [data[: len(line) - 1], data[len(line) - 1 :]])

    assert whole[1] is not None
    assert LimitExceededError is whole[1][0]
    assert whole == cut
    at_limit = outcome(sse_frames(len(line)), [data[: len(line) - 1], data[len(line) - 1 :]])
    assert (1, None) == (len(at_limit[0]), at_limit[1])


def test_a_line_too_long_is_reported_on_its_own_line_number() -> None:
    """JSONL used to report an over-long complete line as the line after it."""
    data = b"{}\n" + b'{"a":"' + b"x" * 100 + b'"}\n'

    _, error = outcome(jsonl_objects(50), [data])

    assert (LimitExceededError, None, 2, 3) == error
