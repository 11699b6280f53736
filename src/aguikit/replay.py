"""
``aguikit proxy --replay FILE``: a recording served back as an AG-UI endpoint, as it was
or broken on purpose.

A UI's handling of a slow, cut or buffered stream is hard to test against a live agent:
the agent rarely misbehaves on cue.  A recording (``aguikit proxy --record``, or a HAR a
browser exported) holds the exact bytes and, per event, when they arrived; :class:`ReplayApp`
answers each request with the next recorded answer, at the recorded pace (or scaled, or
without pauses), with the faults :class:`Faults` names applied: cut the connection after
N events or bytes, stall, deliver the whole answer in one write (what a buffering proxy
does), send an event twice, leave one out, strip keep-alive comments.

It replays answers, it does not impersonate an agent: the request is read and ignored
(the i-th request gets the i-th answer, wrapping round), so a client that sends something
else than the recorded conversation still gets the recorded answer.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs

from .conversation import Exchange, read_har
from .proxy import HOP_BY_HOP, Receive, Scope, Send, lifespan

__all__ = ["Answer", "Faults", "ReplayApp"]

_DROPPED: Final = HOP_BY_HOP | {b"content-length", b"content-encoding"}
"""The body is replayed decoded, whatever length and encoding the agent sent it with."""

_EOL: Final = rb"(?:\r\n|\r|\n)"
_KEEPALIVE: Final = re.compile(
    rb"(?:\A|(?<=\n\n)|(?<=\r\r)|(?<=\r\n\r\n))(?::[^\r\n]*" + _EOL + rb")+" + _EOL
)
"""A block of SSE comment lines alone (a keep-alive), with the blank line that ends it."""
_COMMENT: Final = re.compile(rb"(?m)^:[^\r\n]*" + _EOL)
"""A comment line inside a frame's block."""


@attrs.frozen
class Faults:
    """
    How a replay departs from the recording.

    ``speed`` scales the recorded pauses (2 is twice as fast, 0 sends without any);
    events count from 1; a cut closes the connection without the body's end, as a crashed
    agent or a proxy's idle timeout does.

    .. versionadded:: 0.5.0
    """

    speed: float = 1.0
    cut_after_events: int | None = None
    cut_after_bytes: int | None = None
    stall: float | None = None
    stall_after: int = 1
    buffer: bool = False
    duplicate: int | None = None
    drop: int | None = None
    drop_keepalives: bool = False


@attrs.frozen
class Answer:
    """
    One recorded answer: status, headers, the decoded body, and per event where its frame
    ends in the body and when it arrived (milliseconds after the request).

    .. versionadded:: 0.5.0
    """

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    events: tuple[tuple[int, float], ...] = ()
    media: str | None = None

    @classmethod
    def of(cls, exchange: Exchange) -> Answer:
        """The answer of a recorded exchange (:mod:`aguikit.conversation`)."""
        headers = tuple(
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in exchange.response_headers
        )
        media = (exchange.media_type or "").split(";", 1)[0].strip().lower() or None
        events = tuple(
            (t.end, t.upstream_ms if t.upstream_ms is not None else 0.0) for t in exchange.times
        )
        return cls(exchange.status, headers, exchange.body, events, media)

    def pieces(self) -> list[tuple[bytes, float, bool]]:
        """``(bytes, arrival ms, is an event)`` in order: each event's frame with whatever
        preceded it since the last one, then what followed the last event."""
        out: list[tuple[bytes, float, bool]] = []
        start, last = 0, 0.0
        for end, at in self.events:
            out.append((self.body[start:end], at, True))
            start, last = end, at
        if start < len(self.body):
            out.append((self.body[start:], last, False))
        return out


class ReplayApp:
    """
    The ASGI app serving ``answers`` in order, with ``faults``.

    .. versionadded:: 0.5.0
    """

    def __init__(self, answers: Sequence[Answer], faults: Faults | None = None) -> None:
        if not answers:
            raise ValueError("a replay needs at least one recorded answer")
        self.answers = list(answers)
        self.faults = faults or Faults()
        self.served = 0

    @classmethod
    def open(cls, path: Path, faults: Faults | None = None) -> ReplayApp:
        """
        The AG-UI answers of the HAR file at ``path`` (an aguikit recording or a browser's
        export), read by :func:`aguikit.conversation.read_har`; an answer recorded without
        per-event timing (a browser's HAR) is one piece, sent at once.

        Raises:
            DecodeError: The file is not HAR, or was cut before its first exchange
                (``AGUI-R001``, naming the byte offset).
            ValueError: It holds no AG-UI exchange.
        """
        recording = read_har(path)
        if not recording.exchanges and recording.cut is not None:
            raise recording.cut  # cut before its first exchange: say where
        return cls([Answer.of(exchange) for exchange in recording.exchanges], faults)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, _nothing)
            return
        if scope["type"] != "http":
            return
        while True:  # the request is read and ignored
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                break
        answer = self.answers[self.served % len(self.answers)]
        self.served += 1
        await self.play(answer, send)

    async def play(self, answer: Answer, send: Send) -> None:
        """Send ``answer`` with the faults applied."""
        faults = self.faults
        headers = [(n, v) for n, v in answer.headers if n.lower() not in _DROPPED]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        sse = answer.media == "text/event-stream"
        loop = asyncio.get_running_loop()
        began = loop.time()
        held: list[bytes] = []
        events = sent = 0
        for data, at, is_event in answer.pieces():
            if is_event:
                events += 1
                if events == faults.drop:
                    continue
            if faults.drop_keepalives and sse:
                data = _COMMENT.sub(b"", _KEEPALIVE.sub(b"", data))
            if faults.speed > 0:
                delay = began + at / 1000 / faults.speed - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            copies = 2 if is_event and events == faults.duplicate else 1
            for _ in range(copies):
                if faults.cut_after_bytes is not None and sent + len(data) > faults.cut_after_bytes:
                    data = data[: faults.cut_after_bytes - sent]
                    await _write(send, held, data, faults.buffer, flush=True)
                    return  # cut: no end of body, uvicorn drops the connection
                sent += len(data)
                await _write(send, held, data, faults.buffer)
            if is_event and events == faults.cut_after_events:
                await _write(send, held, b"", faults.buffer, flush=True)
                return
            if is_event and faults.stall and events == faults.stall_after:
                await asyncio.sleep(faults.stall)
        await _write(send, held, b"", faults.buffer, flush=True)
        await send({"type": "http.response.body", "body": b""})


async def _write(
    send: Send, held: list[bytes], data: bytes, buffer: bool, *, flush: bool = False
) -> None:
    if buffer:
        held.append(data)
        if not flush:
            return
        data = b"".join(held)
        held.clear()
    if data:
        await send({"type": "http.response.body", "body": data, "more_body": True})


async def _nothing() -> None:
    return None
