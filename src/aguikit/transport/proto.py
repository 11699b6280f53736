"""
Length-prefixed frames: the byte layer of ``application/vnd.ag-ui.event+proto``.

AG-UI's binary transport sends each event as one protobuf message behind a 4-byte
big-endian length prefix.  This module knows only that framing: it cuts a byte stream
into message payloads, wherever the chunks happen to split (inside the prefix too), and
writes frames.  What a payload *means* (an ``ag_ui.Event`` message, then a wire dict or a
typed event) is :mod:`aguikit.proto`'s job, a floor above: the transport stays usable
without the models and without the ``protobuf`` runtime.

The reader bounds memory by ``max_message_bytes`` (checked against the prefix, before a
byte of the payload is buffered) and reports a stream cut inside a frame with the
frame's 1-based number and byte offset.  Deliberately not handled: any other framing
(varint-delimited streams, gRPC's 5-byte prefix); a stream in one of them fails on its
first prefix, loudly, rather than being half-understood.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Final

from ..catalogue import DECODE_RULES
from ..errors import DecodeError, LimitExceededError
from ..limits import MAX_MESSAGE_BYTES

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MEDIA_TYPE",
    "FrameDecoder",
    "aiter_frames",
    "encode_frame",
    "iter_frames",
    "looks_like_frames",
]

MEDIA_TYPE: Final = "application/vnd.ag-ui.event+proto"
DEFAULT_MAX_MESSAGE_BYTES: Final = MAX_MESSAGE_BYTES
"""Largest message payload accepted, in bytes (setting ``max_message_bytes``)."""

_PREFIX: Final = 4


class FrameDecoder:
    """
    Incremental frame reader: :meth:`feed` bytes, :meth:`close` at the end.

    Each returned item is ``(payload, frame, byte_offset)``: the message bytes, the
    frame's 1-based number and the offset of its prefix, so the layer that parses the
    payload can locate its own error the same way.

    Args:
        source: Names the input in error messages.
        max_message_bytes: Largest payload accepted (:class:`~aguikit.errors.LimitExceededError`).
    """

    __slots__ = ("_buffer", "_failed", "_frame", "_max", "_offset", "source")

    def __init__(
        self, *, source: str | None = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    ) -> None:
        self.source = source
        self._max = max_message_bytes
        self._buffer = bytearray()
        self._offset = 0  # stream offset of the first byte in the buffer
        self._frame = 0  # frames completed
        self._failed: DecodeError | None = None

    def feed(self, chunk: bytes) -> list[tuple[bytes, int, int]]:
        """
        Consume the next piece of input; return the frames it completed.

        Like the SSE and JSONL decoders, a chunk holding whole frames followed by an
        oversized one returns the whole frames and raises on the next call, so where the
        bytes were cut never changes what is delivered.

        Raises:
            LimitExceededError: A prefix announces more than ``max_message_bytes``.
        """
        if self._failed is not None:
            raise self._failed
        self._buffer += chunk
        out: list[tuple[bytes, int, int]] = []
        buffer = self._buffer
        at = 0
        while len(buffer) - at >= _PREFIX:
            size = int.from_bytes(buffer[at : at + _PREFIX], "big")
            if size > self._max:
                del buffer[:at]
                self._offset += at
                self._failed = LimitExceededError(
                    "max_message_bytes",
                    self._max,
                    f"frame {self._frame + 1} announces {size} bytes",
                    source=self.source,
                    frame=self._frame + 1,
                    byte_offset=self._offset,
                )
                if out:
                    return out
                raise self._failed
            end = at + _PREFIX + size
            if len(buffer) < end:
                break
            self._frame += 1
            out.append((bytes(buffer[at + _PREFIX : end]), self._frame, self._offset + at))
            at = end
        del buffer[:at]
        self._offset += at
        return out

    def close(self) -> None:
        """
        End of input: nothing may be left over.

        Raises:
            DecodeError: The stream ended inside a frame (``AGUI-D004``), or an earlier
                error is pending.
        """
        if self._failed is not None:
            raise self._failed
        if not self._buffer:
            return
        have = len(self._buffer)
        if have < _PREFIX:
            where = f"inside its {_PREFIX}-byte length prefix ({have} bytes)"
        else:
            size = int.from_bytes(self._buffer[:_PREFIX], "big")
            where = f"after {have - _PREFIX} of its {size} bytes"
        raise DecodeError(
            f"stream truncated: frame {self._frame + 1} ended {where}",
            rule=DECODE_RULES["truncated"],
            source=self.source,
            frame=self._frame + 1,
            byte_offset=self._offset,
        )


def iter_frames(
    chunks: Iterable[bytes],
    *,
    source: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Iterator[tuple[bytes, int, int]]:
    """
    Cut a synchronous iterable of byte chunks into ``(payload, frame, byte_offset)``.

    Raises:
        DecodeError: A cut frame, after every whole frame before it has been yielded.
        LimitExceededError: A frame larger than ``max_message_bytes``.
    """
    decoder = FrameDecoder(source=source, max_message_bytes=max_message_bytes)
    for chunk in chunks:
        yield from decoder.feed(chunk)
    decoder.close()


async def aiter_frames(
    chunks: AsyncIterable[bytes],
    *,
    source: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[tuple[bytes, int, int]]:
    """The asynchronous twin of :func:`iter_frames`."""
    decoder = FrameDecoder(source=source, max_message_bytes=max_message_bytes)
    async for chunk in chunks:
        for frame in decoder.feed(chunk):
            yield frame
    decoder.close()


def encode_frame(payload: bytes) -> bytes:
    """
    One frame: the 4-byte big-endian length, then the payload (typed events:
    :func:`aguikit.encode.encode_proto`).

    Raises:
        ValueError: A payload longer than a 4-byte length can announce.
    """
    if len(payload) > 0xFFFFFFFF:
        raise ValueError(f"a frame carries at most 4 GiB, not {len(payload)} bytes")
    return len(payload).to_bytes(_PREFIX, "big") + payload


def looks_like_frames(head: bytes) -> bool:
    """
    Whether a stream's first bytes are a length prefix rather than text.

    SSE and JSONL start with printable text (``data:``, ``{``, a comment, a BOM); an
    event frame starts with a length whose first byte is 0 for any message under 16 MiB,
    followed after the prefix by the ``Event`` envelope's tag (a length-delimited field,
    wire type 2).  Content decides, so a ``.pb`` recording renamed ``.txt`` still reads.
    """
    if len(head) < _PREFIX + 1:
        return bool(head) and head[0] == 0
    return head[0] == 0 and head[_PREFIX] & 0x07 == 2
