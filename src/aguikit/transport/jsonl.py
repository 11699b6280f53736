"""
JSON Lines: one event per line, the format recordings, fixtures and log pipelines use.

SSE is what travels over HTTP; JSONL is what people keep.  ``grep``, ``jq -c`` and a
text editor all work on it, and a recorded run can be replayed into :command:`aguikit
check` without a server.  The reader is incremental like the SSE decoder (memory bounded
by the longest line, ``max_line_bytes`` bounding that), ignores blank lines, accepts a
final line without its newline and a ``\\r`` before the newline, and reports a bad line
with its 1-based number and the byte offset where it starts.

Deliberately not handled: JSON values spanning several lines (that is not JSONL) and
anything other than an object per line (an event is an object).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import IO, Any, Final

from ..errors import DecodeError, LimitExceededError
from ..jsonio import dumps_wire, loads_object, quick_object
from ..limits import MAX_JSON_DEPTH, MAX_LINE_BYTES

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "MEDIA_TYPE",
    "JSONLDecoder",
    "aiter_jsonl",
    "encode_line",
    "iter_jsonl",
    "write_jsonl",
]

MEDIA_TYPE: Final = "application/jsonl"
DEFAULT_MAX_LINE_BYTES: Final = MAX_LINE_BYTES
"""Longest line accepted, in bytes (setting ``max_line_bytes``)."""

_BOM: Final = b"\xef\xbb\xbf"


class JSONLDecoder:
    """
    Incremental JSONL reader: :meth:`feed` bytes, :meth:`close` at the end.

    Like :class:`~aguikit.transport.sse.SSEDecoder`, a chunk holding good lines followed by
    a bad one returns the good ones and raises on the next call.

    Args:
        source: Names the input in error messages.
        max_line_bytes: Longest line accepted (:class:`~aguikit.errors.LimitExceededError`).
        max_depth: Deepest JSON nesting accepted.
    """

    __slots__ = (
        "_failed",
        "_line",
        "_max",
        "_max_depth",
        "_offset",
        "_pending",
        "_pending_len",
        "_positions",
        "_started",
        "source",
    )

    def __init__(
        self,
        *,
        source: str | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_depth: int = MAX_JSON_DEPTH,
    ) -> None:
        self.source = source
        self._max = max_line_bytes
        self._max_depth = max_depth
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._offset = 0  # offset of the first byte of the pending line
        self._line = 0  # lines fully consumed
        self._started = False
        self._failed: DecodeError | None = None
        self._positions: list[tuple[int, int]] = []

    @property
    def last_positions(self) -> list[tuple[int, int]]:
        """
        ``(line, byte_offset)`` of each object the latest :meth:`feed` or :meth:`close`
        returned, in order: where a checker says an event was (1-based line, the line's
        first byte).

        .. versionadded:: 0.3.0
        """
        return self._positions

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """
        Consume the next piece of input; return the objects of the lines it completed.

        Raises:
            DecodeError: A line is not UTF-8 or not a JSON object (``line``, ``byte_offset``).
            LimitExceededError: A line is longer than ``max_line_bytes``.
        """
        if self._failed is not None:
            raise self._failed
        self._positions = []
        if not chunk:
            return []
        last = chunk.rfind(b"\n")
        if last < 0:
            self._pending.append(chunk)
            self._pending_len += len(chunk)
            if self._pending_len > self._max:
                self._fail_long(self._pending_len)
            return []
        head = chunk[: last + 1]
        if self._pending:
            self._pending.append(head)
            head = b"".join(self._pending)
            self._pending = []
        rest = chunk[last + 1 :]
        self._pending_len = 0
        out: list[dict[str, Any]] = []
        try:
            offset = self._offset
            line, longest, depth = self._line, self._max, self._max_depth
            positions = self._positions
            for raw in head.split(b"\n")[:-1]:
                # An ordinary line is read here; the first (a BOM), a blank, a long or a
                # bad one takes the full path, which locates its error.
                obj = quick_object(raw, depth) if line and len(raw) <= longest else None
                if obj is None:
                    self._line = line
                    self._one(raw, offset, out)
                    line = self._line
                else:
                    line += 1
                    positions.append((line, offset))
                    out.append(obj)
                offset += len(raw) + 1
            self._line = line
            self._offset = offset
            if rest:
                self._pending.append(rest)
                self._pending_len = len(rest)
                if self._pending_len > self._max:
                    self._fail_long(self._pending_len)
        except DecodeError as exc:
            self._failed = exc
            if out:
                return out
            raise
        return out

    def close(self) -> list[dict[str, Any]]:
        """
        End of input: the last line may lack its newline.

        Raises:
            DecodeError: The last line is not a JSON object, or an earlier error is pending.
        """
        if self._failed is not None:
            raise self._failed
        self._positions = []
        out: list[dict[str, Any]] = []
        if self._pending:
            raw = b"".join(self._pending)
            self._pending = []
            self._pending_len = 0
            try:
                self._one(raw, self._offset, out)
            except DecodeError as exc:
                self._failed = exc
                raise
        return out

    def _fail_long(self, size: int, line: int | None = None, offset: int | None = None) -> None:
        """A line too long: by default the pending one, after every line consumed so far."""
        line = self._line + 1 if line is None else line
        raise LimitExceededError(
            "max_line_bytes",
            self._max,
            f"line {line} is at least {size} bytes",
            source=self.source,
            line=line,
            byte_offset=self._offset if offset is None else offset,
        )

    def _one(self, raw: bytes, offset: int, out: list[dict[str, Any]]) -> None:
        self._line += 1
        if len(raw) > self._max:
            self._fail_long(len(raw), self._line, offset)
        if not self._started:
            self._started = True
            if raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
                offset += len(_BOM)
        if not raw or raw.isspace():
            return
        obj = loads_object(
            raw, max_depth=self._max_depth, source=self.source, line=self._line, byte_offset=offset
        )
        self._positions.append((self._line, offset))
        out.append(obj)


def iter_jsonl(
    chunks: Iterable[bytes],
    *,
    source: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Iterator[dict[str, Any]]:
    """
    Decode JSONL from a synchronous iterable of byte chunks, one object per non-blank line.

    Raises:
        DecodeError: A bad line, after every good line before it has been yielded.
    """
    decoder = JSONLDecoder(source=source, max_line_bytes=max_line_bytes, max_depth=max_depth)
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()


async def aiter_jsonl(
    chunks: AsyncIterable[bytes],
    *,
    source: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> AsyncIterator[dict[str, Any]]:
    """The asynchronous twin of :func:`iter_jsonl`."""
    decoder = JSONLDecoder(source=source, max_line_bytes=max_line_bytes, max_depth=max_depth)
    async for chunk in chunks:
        for obj in decoder.feed(chunk):
            yield obj
    for obj in decoder.close():
        yield obj


def encode_line(wire: Mapping[str, Any]) -> str:
    """
    One JSONL line for a wire dict (the SDK's compact JSON and ``\\n``); typed events are
    written by :func:`aguikit.encode.encode_jsonl`.

    Raises:
        WireFormatError: A value JSON cannot carry.
    """
    return dumps_wire(wire) + "\n"


def write_jsonl(events: Iterable[Mapping[str, Any]], fp: IO[str]) -> int:
    """
    Write wire dicts to a text stream, one per line (typed events:
    :func:`aguikit.encode.write_jsonl`).

    Returns:
        How many events were written.
    """
    count = 0
    for event in events:
        fp.write(encode_line(event))
        count += 1
    return count
