"""
Server-Sent Events, the transport every AG-UI agent speaks: bytes in, frames out, and back.

A network hands a reader whatever bytes it has, cut wherever the kernel cut them: a frame
can arrive in forty pieces, a ``\\r\\n`` can be split between two reads, a UTF-8 character
can straddle them, and a proxy may rewrite line ends or insert keep-alive comments.  The
WHATWG event-stream rules say exactly what those bytes mean, and :class:`SSEDecoder`
follows them (LF, CR and CRLF line ends, a leading BOM, comments, multi-line ``data``,
``event``/``id``/``retry`` fields, one optional space after the colon) incrementally, so a
reader can start acting on the first event while the agent is still producing the second.

Two choices depart from a browser's ``EventSource`` on purpose, because a browser is a
forgiving display and aguikit is a checker:

* Bytes that are not UTF-8 are an error with their byte offset, not a silent U+FFFD: a
  corrupted argument delta must not reach a tool call looking plausible.
* A stream that ends inside a frame (data but no blank line) is reported as truncated
  instead of dropped.  Every complete frame before it is still delivered first, because
  what the agent did say before the connection broke is the most useful part of a
  post-mortem.

Memory is bounded by the largest frame, and ``max_frame_bytes`` bounds that: a peer that
never sends a blank line cannot grow the buffer without limit.  Lines are found with
``bytes.rfind``/``splitlines`` over whole buffers, never byte by byte.

Turning a frame's data into an event object is one small step above (:func:`iter_events`),
through the one JSON reader (:mod:`aguikit.jsonio`); turning that object into a typed
event is :mod:`aguikit.wire`'s job, floors above.  The frame writer at the bottom takes a
wire dict and writes exactly the bytes the official Python SDK's ``EventEncoder`` writes
for the same event; typed events are encoded by :mod:`aguikit.encode`, which converts them
first.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Final

import attrs

from ..catalogue import DECODE_RULES
from ..errors import DecodeError, LimitExceededError
from ..jsonio import dumps_wire, loads_object, quick_object, utf8
from ..limits import MAX_FRAME_BYTES, MAX_JSON_DEPTH

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "MAX_RETRY",
    "MEDIA_TYPE",
    "Frame",
    "SSEDecoder",
    "aiter_events",
    "aiter_frames",
    "encode",
    "encode_bytes",
    "iter_events",
    "iter_frames",
]

MEDIA_TYPE: Final = "text/event-stream"
"""The media type an AG-UI agent answers with, and a client asks for in ``Accept``."""

DEFAULT_MAX_FRAME_BYTES: Final = MAX_FRAME_BYTES
"""Largest frame accepted, in bytes including line ends (setting ``max_frame_bytes``)."""

MAX_RETRY: Final = 2**63 - 1
"""The ``retry`` a frame reports when its field held a larger number (any size is valid)."""

_RETRY_DIGITS: Final = 18
_JSON_LINES_KEPT: Final = 3
_BOM: Final = b"\xef\xbb\xbf"
_CR: Final = 13
_CR_BYTE: Final = b"\r"
_COLON: Final = 58


@attrs.frozen
class Frame:
    """
    One dispatched event-stream frame.

    ``id`` is the stream's *last event id* when the frame was dispatched (an ``id:`` field
    persists until another replaces it, as in ``EventSource``); ``retry`` is set only when
    this frame carried a valid ``retry:`` field.  ``number`` counts dispatched frames from 1
    (comment-only keep-alives are not frames); ``byte_offset`` is where the frame's first
    line starts in the stream, counting a leading BOM; ``line`` is the 1-based number of
    that line (LF, CR and CRLF each end one), what an editor shows.

    .. versionchanged:: 0.3.0  ``line``.
    """

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    number: int = 0
    byte_offset: int = 0
    line: int = 0


class SSEDecoder:
    """
    Incremental event-stream decoder: :meth:`feed` bytes as they arrive, :meth:`close` at
    the end of the stream.

    When a chunk holds complete frames followed by an error (bad UTF-8, an oversized
    frame), :meth:`feed` returns the complete frames and raises the error on the next
    call, so nothing the peer sent correctly is lost to a later mistake.  After an error
    the decoder stays failed.

    Args:
        source: Names the input in error messages (a path, a URL, ``<stdin>``).
        max_frame_bytes: Largest frame accepted; a longer one raises
            :class:`~aguikit.errors.LimitExceededError` naming ``max_frame_bytes``.
    """

    __slots__ = (
        "_bom",
        "_data",
        "_event",
        "_failed",
        "_fields_seen",
        "_frame_bytes",
        "_frame_line",
        "_frame_start",
        "_frames",
        "_json_lines",
        "_last_id",
        "_line",
        "_max",
        "_offset",
        "_pending",
        "_pending_len",
        "_retry",
        "_skip_lf",
        "source",
    )

    def __init__(
        self, *, source: str | None = None, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ) -> None:
        self.source = source
        self._max = max_frame_bytes
        self._bom: bytes | None = b""  # bytes held while deciding on a BOM; None once decided
        self._pending: list[bytes] = []  # pieces of the line not yet terminated
        self._pending_len = 0
        self._offset = 0  # stream offset of the first byte not yet consumed as a line
        self._skip_lf = False  # the last chunk ended in CR: a leading LF belongs to it
        self._data: list[str] = []
        self._event: str | None = None
        self._retry: int | None = None
        self._last_id: str | None = None
        self._fields_seen = False
        self._frame_start = -1
        self._frame_bytes = 0
        self._frames = 0
        self._failed: DecodeError | None = None
        self._line = 0  # lines consumed
        self._frame_line = 0
        self._json_lines: list[tuple[int, int]] = []

    @property
    def frames_decoded(self) -> int:
        """How many frames have been dispatched so far."""
        return self._frames

    @property
    def json_lines(self) -> list[tuple[int, int]]:
        """
        ``(line, byte_offset)`` of the first few lines that look like a bare JSON document
        (``{...}``) rather than a field: the standard ignores them as unknown fields, so a
        file of JSONL named ``.sse`` decodes to nothing, and a checker says why instead.

        .. versionadded:: 0.3.0
        """
        return list(self._json_lines)

    @property
    def bytes_consumed(self) -> int:
        """How many bytes have been fed, including a pending partial line."""
        return self._offset + self._pending_len + (len(self._bom) if self._bom else 0)

    def feed(self, chunk: bytes) -> list[Frame]:
        """
        Consume the next piece of the stream.

        Returns:
            The frames this chunk completed, in order (often none, sometimes many).

        Raises:
            DecodeError: A field value is not UTF-8 (or an earlier call recorded an error).
            LimitExceededError: A frame grew past ``max_frame_bytes``.
        """
        if self._failed is not None:
            raise self._failed
        if not chunk:
            return []
        if self._bom is not None:
            held = self._bom + chunk
            if len(held) < len(_BOM) and _BOM.startswith(held):
                self._bom = held
                return []
            self._bom = None
            if held.startswith(_BOM):
                held = held[len(_BOM) :]
                self._offset += len(_BOM)
            chunk = held
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                self._offset += 1
                if self._frame_start >= 0:
                    # The LF of a CRLF split across reads counts toward its line's frame, as
                    # it does when the pair arrives together: the limit must not depend on
                    # where the network cut the bytes.
                    self._frame_bytes += 1
                    if self._frame_bytes > self._max:
                        self._failed = self._limit_error(self._frame_bytes)
                        raise self._failed
        last = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if last < 0:
            if chunk:
                self._pending.append(chunk)
                self._pending_len += len(chunk)
                self._check_pending()
            return []
        rest = chunk[last + 1 :]
        head = chunk[: last + 1] if rest else chunk
        if self._pending:
            self._pending.append(head)
            head = b"".join(self._pending)
            self._pending = []
            self._pending_len = 0
        self._skip_lf = not rest and chunk[last] == _CR
        out: list[Frame] = []
        try:
            self._lines(head, out)
            if rest:
                self._pending.append(rest)
                self._pending_len = len(rest)
                self._check_pending()
        except DecodeError as exc:
            self._failed = exc
            if out:
                return out
            raise
        except (ValueError, TypeError, OverflowError, MemoryError) as fault:
            # No field value may escape as a bare Python error: the decoder only ever
            # raises located aguikit errors, and stays failed after one.  (Not ``exc``
            # again: compiled, one name is one type in a function.)
            self._failed = DecodeError(
                f"could not decode frame {self._frames + 1}: {fault}",
                rule=DECODE_RULES["json"],
                source=self.source,
                frame=self._frames + 1,
                byte_offset=self._frame_start if self._frame_start >= 0 else self._offset,
            )
            if out:
                return out
            raise self._failed from None
        return out

    def close(self) -> list[Frame]:
        """
        Signal the end of the stream.

        Returns:
            Nothing in practice (a frame is dispatched by its blank line, never by EOF);
            a list for symmetry with :meth:`feed`.

        Raises:
            DecodeError: The stream ended inside a frame: it has fields but no blank line
                after them (``frame`` and ``byte_offset`` say which), or an error recorded
                by :meth:`feed` is still pending.
        """
        if self._failed is not None:
            raise self._failed
        if self._bom:  # fewer bytes than a BOM, all of them a BOM prefix: a partial line
            self._pending = [self._bom]
            self._pending_len = len(self._bom)
        self._bom = None
        partial = b"".join(self._pending)
        unterminated = bool(partial) and partial[0] != _COLON
        if self._fields_seen or unterminated:
            start = self._frame_start if self._frame_start >= 0 else self._offset
            what = "inside a line" if unterminated else "without the blank line that ends it"
            self._failed = DecodeError(
                f"stream truncated: frame {self._frames + 1} ended {what}",
                rule=DECODE_RULES["truncated"],
                source=self.source,
                frame=self._frames + 1,
                byte_offset=start,
            )
            raise self._failed
        return []

    def _check_pending(self) -> None:
        if self._frame_bytes + self._pending_len > self._max:
            self._too_big(self._frame_bytes + self._pending_len)

    def _too_big(self, size: int) -> None:
        raise self._limit_error(size)

    def _limit_error(self, size: int) -> LimitExceededError:
        start = self._frame_start if self._frame_start >= 0 else self._offset
        return LimitExceededError(
            "max_frame_bytes",
            self._max,
            f"frame {self._frames + 1} is at least {size} bytes",
            source=self.source,
            frame=self._frames + 1,
            byte_offset=start,
        )

    def _decode(self, raw: bytes, at: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(
                f"invalid UTF-8 ({exc.reason})",
                rule=DECODE_RULES["utf8"],
                source=self.source,
                frame=self._frames + 1,
                byte_offset=at + exc.start,
            ) from None

    def _lines(self, block: bytes, out: list[Frame]) -> None:
        """
        Interpret ``block``, which ends exactly at a line end, line by line.

        A frame of one ``data`` line between frames (``data: {...}``, then the blank line),
        which is what nearly every agent writes, is taken whole: the frame the steps below
        give it, for its two lines' bookkeeping once instead of a field's and a dispatch's
        (the proxy judges every event it forwards).  Blocks without a CR (the usual case)
        are split on LF alone, each line's end one byte.
        """
        if _CR_BYTE in block:
            raws = block.splitlines(keepends=True)
            lines = [raw.rstrip(b"\r\n") for raw in raws]
            ends: list[int] | None = [len(r) - len(n) for r, n in zip(raws, lines, strict=True)]
        else:
            lines = block.split(b"\n")
            lines.pop()  # the block ends at a line end: nothing after it
            ends = None
        last = len(lines) - 1
        offset = self._offset
        i = 0
        try:
            while i <= last:
                line = lines[i]
                size = len(line) + (1 if ends is None else ends[i])
                if (
                    line[:5] == b"data:"
                    and i < last
                    and not lines[i + 1]
                    and self._frame_start < 0
                    and not self._fields_seen
                    and size <= self._max
                ):
                    try:
                        data = line[6 if line[5:6] == b" " else 5 :].decode("utf-8")
                    except UnicodeDecodeError:
                        pass  # the steps below locate the error
                    else:
                        self._frames += 1
                        self._line += 2
                        frame = Frame(
                            data, None, self._last_id, None, self._frames, offset, self._line - 1
                        )
                        out.append(frame)
                        offset += size + (1 if ends is None else ends[i + 1])
                        i += 2
                        continue
                self._line += 1
                i += 1
                if not line:
                    if self._fields_seen or self._frame_start >= 0:
                        self._dispatch(out)
                    offset += size
                    continue
                if self._frame_start < 0:
                    self._frame_start = offset
                    self._frame_line = self._line
                self._frame_bytes += size
                if self._frame_bytes > self._max:
                    self._too_big(self._frame_bytes)
                if line[0] != _COLON:
                    self._field(line, offset)
                offset += size
        finally:
            self._offset = offset

    def _field(self, line: bytes, offset: int) -> None:
        self._fields_seen = True
        colon = line.find(b":")
        if colon < 0:
            name, value, at = line, b"", offset + len(line)
        else:
            name = line[:colon]
            at = offset + colon + 1
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
                at += 1
        if name == b"data":
            self._data.append(self._decode(value, at))
        elif name == b"event":
            self._event = self._decode(value, at)
        elif name == b"id":
            text = self._decode(value, at)
            if "\x00" not in text:
                self._last_id = text
        elif name == b"retry" and value.isdigit():
            # Any number of ASCII digits is a valid reconnection time; Python refuses to
            # parse more than 4300 of them, so a longer one is clamped, never an error.
            digits = value.lstrip(b"0") or b"0"
            self._retry = int(digits) if len(digits) <= _RETRY_DIGITS else MAX_RETRY
        elif name[:1] in (b"{", b"[") and len(self._json_lines) < _JSON_LINES_KEPT:
            self._json_lines.append((self._line, offset))
        # Any other field name is ignored, as the standard requires.

    def _dispatch(self, out: list[Frame]) -> None:
        if self._data:
            self._frames += 1
            data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
            out.append(
                Frame(
                    data=data,
                    event=self._event,
                    id=self._last_id,
                    retry=self._retry,
                    number=self._frames,
                    byte_offset=self._frame_start,
                    line=self._frame_line,
                )
            )
            self._data = []
        self._event = None
        self._retry = None
        self._fields_seen = False
        self._frame_start = -1
        self._frame_bytes = 0


def iter_frames(
    chunks: Iterable[bytes],
    *,
    source: str | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> Iterator[Frame]:
    """
    Decode frames from a synchronous iterable of byte chunks (a file read in blocks, an
    ``httpx`` response's ``iter_bytes()``), yielding each as soon as it is complete.

    Raises:
        DecodeError: As :meth:`SSEDecoder.feed` and :meth:`SSEDecoder.close`, after every
            complete frame before the fault has been yielded.
    """
    decoder = SSEDecoder(source=source, max_frame_bytes=max_frame_bytes)
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()


def aiter_frames(
    chunks: AsyncIterable[bytes],
    *,
    source: str | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> AsyncIterator[Frame]:
    """
    The asynchronous twin of :func:`iter_frames` (for ``aiter_bytes()``).

    The iterator's ``aclose()`` closes ``chunks`` when it has one, as an async generator
    looping over them would on being closed.
    """
    return _AsyncFrames(chunks, SSEDecoder(source=source, max_frame_bytes=max_frame_bytes))


class _AsyncFrames:
    """
    :func:`aiter_frames`'s iterator: a class rather than an async generator, so that the
    module compiles (mypyc has no async generators) and every SSE consumer's frames come
    out of the compiled decoder without a Python frame per event.
    """

    __slots__ = ("_chunks", "_decoder", "_ended", "_next", "_ready", "_source")

    def __init__(self, chunks: AsyncIterable[bytes], decoder: SSEDecoder) -> None:
        self._chunks = chunks
        self._source: AsyncIterator[bytes] | None = None
        self._decoder = decoder
        self._ready: list[Frame] = []
        self._next = 0
        self._ended = False

    def __aiter__(self) -> _AsyncFrames:
        return self

    async def __anext__(self) -> Frame:
        while True:
            ready = self._ready
            index = self._next
            if index < len(ready):
                self._next = index + 1
                return ready[index]
            if self._ended:
                raise StopAsyncIteration
            # Emptied first: a chunk whose decoding raises leaves nothing to re-deliver.
            self._ready = []
            self._next = 0
            source = self._source
            if source is None:
                source = self._source = aiter(self._chunks)
            try:
                self._ready = self._decoder.feed(await anext(source))
            except StopAsyncIteration:
                self._ended = True
                self._ready = self._decoder.close()
            except BaseException:
                self.end()  # as an async generator: ended by what it raised
                raise

    def end(self) -> None:
        """Deliver nothing more (what is decoded and not yet taken is dropped)."""
        self._ended = True
        self._ready = []
        self._next = 0

    async def aclose(self) -> None:
        """Stop early: no more frames, and the byte source is closed if it can be."""
        self.end()
        close = getattr(self._source or self._chunks, "aclose", None)
        if close is not None:
            await close()


def frame_object(
    frame: Frame, *, source: str | None = None, max_depth: int = MAX_JSON_DEPTH
) -> dict[str, Any]:
    """
    Parse one frame's data as the JSON object of an event.

    Raises:
        DecodeError: The data is not a JSON object; the error names the frame and its
            byte offset.
        LimitExceededError: The JSON nests deeper than ``max_depth``.
    """
    # The ordinary object at once; its location is made only for a frame jiter refuses
    # (every SSE reader parses every frame here, the proxy among them).
    obj = quick_object(frame.data, max_depth)
    if obj is not None:
        return obj
    return loads_object(
        frame.data,
        max_depth=max_depth,
        source=source,
        frame=frame.number,
        byte_offset=frame.byte_offset,
    )


def iter_events(
    chunks: Iterable[bytes],
    *,
    source: str | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Iterator[dict[str, Any]]:
    """
    Decode an event stream into event objects (wire dicts), one per frame.

    Every frame carrying data is parsed, whatever its ``event:`` name, as the official
    clients do; comment-only frames (keep-alives) are skipped.

    Raises:
        DecodeError: Framing, UTF-8 or JSON failure, located by frame and byte offset.
        LimitExceededError: ``max_frame_bytes`` or ``max_depth`` exceeded.
    """
    for frame in iter_frames(chunks, source=source, max_frame_bytes=max_frame_bytes):
        yield frame_object(frame, source=source, max_depth=max_depth)


def aiter_events(
    chunks: AsyncIterable[bytes],
    *,
    source: str | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> AsyncIterator[dict[str, Any]]:
    """The asynchronous twin of :func:`iter_events` (its ``aclose()`` as :func:`aiter_frames`)."""
    decoder = SSEDecoder(source=source, max_frame_bytes=max_frame_bytes)
    return _AsyncEvents(_AsyncFrames(chunks, decoder), source, max_depth)


class _AsyncEvents:
    """:func:`aiter_events`'s iterator: each frame of an :class:`_AsyncFrames` parsed."""

    __slots__ = ("_frames", "_max_depth", "_source")

    def __init__(self, frames: _AsyncFrames, source: str | None, max_depth: int) -> None:
        self._frames = frames
        self._source = source
        self._max_depth = max_depth

    def __aiter__(self) -> _AsyncEvents:
        return self

    async def __anext__(self) -> dict[str, Any]:
        frames = self._frames
        frame = await frames.__anext__()
        try:
            return frame_object(frame, source=self._source, max_depth=self._max_depth)
        except BaseException:
            frames.end()  # as an async generator: ended by what it raised
            raise

    async def aclose(self) -> None:
        """Stop early, closing the byte source as :meth:`_AsyncFrames.aclose` does."""
        await self._frames.aclose()


# --- encoding -------------------------------------------------------------------------


def dumps(wire: Mapping[str, Any]) -> str:
    """
    The compact JSON text of a wire dict, as the official Python SDK writes it.

    Raises:
        WireFormatError: The event holds a value JSON cannot represent (``NaN``, a set).
        TypeError: Not a mapping; typed events go through :mod:`aguikit.encode`.
    """
    return dumps_wire(wire)


def encode(wire: Mapping[str, Any]) -> str:
    """
    One SSE frame for a wire dict: ``data: <json>`` and a blank line.

    The result is byte-for-byte what ``ag_ui.encoder.EventEncoder().encode()`` produces for
    the same event (compact separators, UTF-8 rather than ``\\u`` escapes, the SDK's member
    order for the envelope, pydantic's float layout) when nested objects are already in the
    SDK's member order; this floor knows no models, so :func:`aguikit.encode.encode_sse`
    puts them in that order (and validates) first.  Compact JSON never contains a line
    end, so one ``data:`` line always suffices.

    Raises:
        WireFormatError, TypeError: As :func:`dumps`.
    """
    return f"data: {dumps_wire(wire)}\n\n"


def encode_bytes(wire: Mapping[str, Any]) -> bytes:
    """
    :func:`encode`, as the UTF-8 bytes a streaming response writes.

    Raises:
        WireFormatError: As :func:`encode`, and for a lone surrogate, which has no UTF-8.
    """
    return utf8(encode(wire), wire.get("type"))
