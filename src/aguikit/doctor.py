"""
``aguikit doctor URL``: one run request through the user's infrastructure, and what it did
to the stream.

An agent that streams perfectly on ``localhost`` often reaches the browser in one lump, or
not at all, once nginx, a load balancer or a compression middleware sits in between.  The
symptoms are timing and headers, which no event checker sees.  :func:`diagnose` sends one
request (``aguikit check``'s: ``--input`` or a minimal one, through the one HTTP fetch) and
watches each read as it arrives:

* buffering (``AGUI-N001``): several events arriving in one read although the agent
  produced them apart (their ``timestamp`` fields span more than :data:`HELD_BACK_SECONDS`),
  or, for an agent that stamps nothing, ``aguikit check``'s burst rule (at least
  ``buffer_events`` in one read after ``buffer_silence_seconds`` of silence);
* a silence longer than ``silent_gap_seconds`` with no keep-alive (``AGUI-T005``), and a
  stream cut after a silence before its run ended (``AGUI-N002``, an idle timeout);
* compression on the stream (``AGUI-N003``), the wrong content type (``AGUI-T003``), an
  HTTP/1.0 answer (``AGUI-N004``).

Each finding carries its fix.  What it deliberately does not do: judge the events (that is
``aguikit check URL``), or guess which hop did it (it sees only the end of the chain).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Final

import attrs
import httpx

from .catalogue import RULES_BY_ID, Severity, render_message
from .checker import CheckConfig, Finding, Unreadable, request_body
from .errors import DecodeError, TransportError
from .transport.http import aforward, aread
from .transport.sse import MEDIA_TYPE, SSEDecoder, frame_object

__all__ = ["HELD_BACK_SECONDS", "Diagnosis", "diagnose"]

HELD_BACK_SECONDS: Final = 0.5
"""Events the agent stamped this far apart yet received in one read were held back."""

IDLE_SECONDS: Final = 0.5
"""A stream that stops before its run ended, after at least this much silence, was cut as
idle (sooner than that, the agent more likely failed: ``aguikit check URL`` says how)."""

FIXES: Final = {
    "AGUI-N001": "send 'X-Accel-Buffering: no' from the agent (aguikit's server does), and "
    "set 'proxy_buffering off;' for this location in nginx (other proxies: disable response "
    "buffering for text/event-stream)",
    "AGUI-N002": "send an SSE keep-alive comment (': ping') more often than the shortest idle "
    "timeout on the way, or raise it ('proxy_read_timeout 3600s;' in nginx)",
    "AGUI-N003": "do not compress text/event-stream ('gzip off;' for this location in nginx, "
    "or leave it out of 'gzip_types'; exclude it from compression middleware)",
    "AGUI-N004": "speak HTTP/1.1 on every hop ('proxy_http_version 1.1;' and "
    "'proxy_set_header Connection \"\";' in nginx)",
    "AGUI-T003": "serve the endpoint with 'Content-Type: text/event-stream' (a login page or "
    "an error page in its place means a hop answered instead of the agent)",
    "AGUI-T005": "send an SSE keep-alive comment (': ping') every 10-15 s while the agent "
    "works, so no hop takes the silence for a dead connection",
    "AGUI-T001": "check that the URL is reachable from here",
    "AGUI-T002": "the endpoint refused the request: check the URL, the method and any "
    "authentication header (--header)",
}
"""The fix printed under each finding doctor can report."""


@attrs.define
class Diagnosis:
    """
    What one request through the infrastructure showed: the facts measured, the findings
    (each with its fix in :data:`FIXES`) and the exit code.

    .. versionadded:: 0.5.0
    """

    url: str
    status: int | None = None
    http_version: str | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    events: int = 0
    reads: int = 0
    keepalives: int = 0
    seconds: float = 0.0
    longest_silence: float = 0.0
    biggest_read: int = 0
    stamped: bool = False
    ended: str = "the stream ended"
    findings: list[Finding] = attrs.Factory(list)
    unreachable: str | None = None

    @property
    def exit_code(self) -> int:
        """0 clean, 1 a finding, 2 the endpoint could not be reached."""
        if self.unreachable is not None:
            return 2
        return 1 if self.findings else 0

    def render(self) -> str:
        """The report as the command prints it: the facts, then each finding and its fix."""
        if self.unreachable is not None:
            lines = [f"aguikit doctor: {self.url}: {self.unreachable}"]
        else:
            lines = [
                f"aguikit doctor: {self.url}",
                f"  answer: HTTP {self.status} over {self.http_version}, "
                f"{self.content_type or 'no content type'}"
                + (f", Content-Encoding: {self.content_encoding}" if self.content_encoding else ""),
                f"  stream: {self.events} events in {self.reads} reads over {self.seconds:.1f} s "
                f"(at most {self.biggest_read} in one read), {self.keepalives} keep-alive "
                f"comments, longest silence {self.longest_silence:.1f} s; {self.ended}",
                "  events carry timestamps: buffering judged by when the agent produced them"
                if self.stamped
                else "  events carry no timestamps: buffering judged by bursts after silence",
            ]
        for finding in self.findings:
            rule = RULES_BY_ID[finding.rule]
            lines.append(
                f"{finding.rule} {rule.symbol} ({finding.severity.value}): {finding.message}"
            )
            fix = FIXES.get(finding.rule)
            if fix:
                lines.append(f"  fix: {fix}")
        if self.unreachable is None and not self.findings:
            lines.append("clean: the stream arrives as the agent sends it")
        return "\n".join(lines)


def diagnose(url: str, config: CheckConfig | None = None) -> Diagnosis:
    """
    Send one run request to ``url`` and report what the way there did to the stream.

    Never raises for what the endpoint does: an unreachable one is
    :attr:`Diagnosis.unreachable` (exit 2).

    .. versionadded:: 0.5.0
    """
    return asyncio.run(adiagnose(url, config or CheckConfig()))


async def adiagnose(url: str, config: CheckConfig) -> Diagnosis:
    """The coroutine behind :func:`diagnose`."""
    diagnosis = Diagnosis(url)
    try:
        body = request_body(config)
    except Unreadable as exc:
        diagnosis.unreachable = str(exc)
        return diagnosis
    headers = [
        *((name.encode("latin-1"), value.encode("latin-1")) for name, value in config.headers),
        (b"content-type", b"application/json"),
        (b"accept", MEDIA_TYPE.encode()),
        (b"accept-encoding", b"gzip, deflate"),  # what a browser asks for
    ]
    timeout = httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0))
    content = json.dumps(body).encode("utf-8")
    async with httpx.AsyncClient(timeout=timeout) as client:
        try:
            began = time.monotonic()
            async with aforward(client, "POST", url, headers, content) as response:
                await _watch(diagnosis, response, config, began)
        except TransportError as failed:
            diagnosis.unreachable = str(failed)
    return diagnosis


def _add(diagnosis: Diagnosis, config: CheckConfig, rule: str, **fields: Any) -> None:
    if config.enabled(rule):
        message = render_message(rule, **fields)
        severity = config.severity_of(rule)
        kind = "transport" if severity is Severity.ERROR else severity.value
        diagnosis.findings.append(Finding(rule, severity, kind, rule, message))


async def _watch(
    diagnosis: Diagnosis, response: httpx.Response, config: CheckConfig, start: float
) -> None:
    diagnosis.status = response.status_code
    diagnosis.http_version = response.http_version
    diagnosis.content_type = response.headers.get("content-type")
    diagnosis.content_encoding = response.headers.get("content-encoding")
    media = (diagnosis.content_type or "").split(";", 1)[0].strip().lower()
    if not response.is_success:
        text = (await response.aread())[:300].decode("utf-8", "replace")
        _add(
            diagnosis,
            config,
            "AGUI-T002",
            url=diagnosis.url,
            status=response.status_code,
            body=text,
        )
        return
    if media != MEDIA_TYPE:
        _add(diagnosis, config, "AGUI-T003", url=diagnosis.url, content_type=diagnosis.content_type)
    if diagnosis.content_encoding not in (None, "identity"):
        _add(diagnosis, config, "AGUI-N003", encoding=diagnosis.content_encoding)
    if response.http_version == "HTTP/1.0":
        _add(diagnosis, config, "AGUI-N004", version=response.http_version)
    decoder = SSEDecoder(source=diagnosis.url, max_frame_bytes=config.max_frame_bytes)
    last = time.monotonic()
    buffered = False
    finished = False
    cut: TransportError | None = None
    try:
        async for chunk in aread(response, raw=False):
            now = time.monotonic()
            silence, last = now - last, now
            diagnosis.reads += 1
            diagnosis.longest_silence = max(diagnosis.longest_silence, silence)
            diagnosis.keepalives += chunk.count(b"\n:") + chunk.startswith(b":")
            try:
                frames = decoder.feed(chunk)
            except DecodeError:
                break  # not an event stream after all: T003 said so, the timing is moot
            stamps: list[float] = []
            for frame in frames:
                try:
                    event = frame_object(frame, source=diagnosis.url, max_depth=config.max_depth)
                except DecodeError:
                    continue
                stamp = event.get("timestamp")
                if isinstance(stamp, int | float) and not isinstance(stamp, bool):
                    stamps.append(float(stamp))
                finished = finished or event.get("type") in ("RUN_FINISHED", "RUN_ERROR")
            count = len(frames)
            diagnosis.events += count
            diagnosis.biggest_read = max(diagnosis.biggest_read, count)
            if silence > config.silent_gap_seconds:
                _add(
                    diagnosis,
                    config,
                    "AGUI-T005",
                    seconds=silence,
                    event=diagnosis.events - count + 1,
                    limit=config.silent_gap_seconds,
                )
            if stamps:
                diagnosis.stamped = True
            if buffered or count < 2:
                continue
            span = (max(stamps) - min(stamps)) / 1000 if len(stamps) >= 2 else 0.0
            if span >= HELD_BACK_SECONDS:
                evidence = f"although the agent produced them over {span:.1f} s"
            elif (
                not stamps
                and count >= config.buffer_events
                and silence >= config.buffer_silence_seconds
            ):
                evidence = f"after {silence:.1f} s of silence"
            else:
                continue
            buffered = True
            _add(diagnosis, config, "AGUI-N001", count=count, evidence=evidence)
    except TransportError as exc:
        cut = exc
    now = time.monotonic()
    diagnosis.seconds = now - start
    tail = now - last
    diagnosis.longest_silence = max(diagnosis.longest_silence, tail)
    if cut is not None:
        diagnosis.ended = f"the connection broke: {cut}"
    elif not finished and diagnosis.events:
        diagnosis.ended = "the stream ended before its run did"
    else:
        diagnosis.ended = "the stream ended with its run"
    if not finished and diagnosis.events and media == MEDIA_TYPE and tail >= IDLE_SECONDS:
        if tail > config.silent_gap_seconds:
            limit = config.silent_gap_seconds
            number = diagnosis.events + 1
            _add(diagnosis, config, "AGUI-T005", seconds=tail, event=number, limit=limit)
        _add(diagnosis, config, "AGUI-N002", seconds=tail)
