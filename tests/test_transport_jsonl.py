"""Tests for aguikit.transport.jsonl: one event per line, read incrementally and written back."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support import split_every

from aguikit._generated import models as m
from aguikit.errors import DecodeError, LimitExceededError
from aguikit.transport.jsonl import (
    JSONLDecoder,
    aiter_jsonl,
    encode_line,
    iter_jsonl,
    write_jsonl,
)
from aguikit.wire import to_wire


def read(data: bytes, **kwargs: Any) -> list[dict[str, Any]]:
    return list(iter_jsonl([data], **kwargs))


def test_one_object_per_line_blank_lines_ignored() -> None:
    """Blank and whitespace-only lines are skipped; CRLF line ends are accepted."""
    data = b'{"n":1}\n\n   \n{"n":2}\r\n\n'

    assert [{"n": 1}, {"n": 2}] == read(data)


def test_last_line_without_newline_is_read() -> None:
    """A file that does not end in a newline still yields its last line."""
    assert [{"n": 1}, {"n": 2}] == read(b'{"n":1}\n{"n":2}')


def test_leading_bom_is_skipped() -> None:
    """A BOM at the start of the file is not part of the first line's JSON."""
    assert [{"n": 1}] == read(b'\xef\xbb\xbf{"n":1}\n')


def test_bad_line_reports_line_number_and_offset_after_good_lines() -> None:
    """A line that is not JSON raises with its number and start offset; earlier lines survive."""
    seen: list[dict[str, Any]] = []
    with pytest.raises(DecodeError) as info:
        for obj in iter_jsonl([b'{"n":1}\n\n{"n":\n{"n":3}\n']):
            seen.append(obj)

    assert [{"n": 1}] == seen
    assert (3, 9) == (info.value.line, info.value.byte_offset)
    assert "line 3" in str(info.value)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (b"[1]", "got an array"),
        (b"42", "got a number"),
        (b"\xff{}", "invalid UTF-8"),
        (b'{"a": Infinity}', "Infinity"),
    ],
)
def test_lines_that_are_not_objects_are_decode_errors(line: bytes, fragment: str) -> None:
    """Anything but a JSON object on a line is a located DecodeError."""
    with pytest.raises(DecodeError) as info:
        read(b"{}\n" + line + b"\n")

    assert fragment in str(info.value)
    assert 2 == info.value.line


def test_long_line_raises_limit_exceeded_while_streaming() -> None:
    """An endless line stops at ``max_line_bytes`` instead of filling memory."""
    decoder = JSONLDecoder(max_line_bytes=100)
    with pytest.raises(LimitExceededError) as info:
        for _ in range(10):
            decoder.feed(b"x" * 30)

    assert "max_line_bytes" == info.value.limit


def test_deep_nesting_is_refused() -> None:
    """The JSON depth guard applies to lines too."""
    with pytest.raises(LimitExceededError):
        read(b"[" * 50_000 + b"]" * 50_000 + b"\n")


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=6))),
    cut=st.integers(1, 7),
)
def test_writer_and_reader_round_trip_over_any_split(
    values: list[dict[str, Any]], cut: int
) -> None:
    """What write_jsonl writes, iter_jsonl reads back, whatever the chunking."""
    buffer = io.StringIO()
    count = write_jsonl(values, buffer)
    data = buffer.getvalue().encode()
    pieces = split_every(data, [cut])

    assert len(values) == count
    assert values == list(iter_jsonl(pieces))


def test_encode_line_matches_the_sse_payload() -> None:
    """A JSONL line is the same compact JSON an SSE frame carries."""
    from aguikit.encode import encode_jsonl, encode_sse

    event = m.TextMessageContentEvent(message_id="m", delta="hé")

    assert encode_sse(event)[len("data: ") : -2] + "\n" == encode_jsonl(event)
    assert encode_jsonl(event) == encode_line(to_wire(event))


def test_async_reader_matches_sync_reader() -> None:
    """aiter_jsonl yields what iter_jsonl yields."""
    data = b'{"n":1}\n{"n":2}\n'

    async def chunks() -> AsyncIterator[bytes]:
        for byte in data:
            yield bytes([byte])

    async def collect() -> list[dict[str, Any]]:
        return [obj async for obj in aiter_jsonl(chunks())]

    assert read(data) == asyncio.run(collect())


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=200)
    | st.lists(
        st.sampled_from([b"{", b"}", b"[", b"]", b'"', b"\n", b"\r", b"1", b",", b":", b"\xc3"]),
        max_size=60,
    ).map(b"".join),
    cut=st.integers(1, 17),
)
def test_arbitrary_bytes_raise_only_decode_errors(data: bytes, cut: int) -> None:
    """Whatever the bytes, the reader yields objects or raises DecodeError, nothing else."""
    pieces = split_every(data, [cut])
    try:
        for obj in iter_jsonl(pieces, max_depth=8):
            assert isinstance(obj, dict)
    except DecodeError:
        pass
