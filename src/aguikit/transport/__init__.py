"""
Transports: how AG-UI events travel as bytes.  Bytes in, wire dicts out, and back.

* :mod:`aguikit.transport.sse` - Server-Sent Events, what agents speak over HTTP: an
  incremental WHATWG-conformant decoder and the frame writer a server streams with.
* :mod:`aguikit.transport.jsonl` - one event per line, for recordings and pipelines.
* :mod:`aguikit.transport.proto` - the binary transport's 4-byte length-prefixed frames
  (``application/vnd.ag-ui.event+proto``); imported on its own, since its ``iter_frames``
  would shadow SSE's here.  What a frame's payload means is :mod:`aguikit.proto`'s job.
* :mod:`aguikit.transport.http` - the one HTTP fetch: POST a run request, check the
  answer's status and content type, hand over its bytes (imported on its own, because it
  pulls in ``httpx``).
* :mod:`aguikit.transport.asgi` - an ``httpx`` transport that runs an ASGI app in process
  and streams its answer as a server would (``httpx.ASGITransport`` hands it over only
  once the app has ended): what ``Agent(url, app=...)`` and the test client use.

This floor speaks bytes and wire dicts and imports nothing above the JSON layer
(:mod:`aguikit.jsonio`): typing, validating, verifying and applying events are the floors
above, so a transport can be used, or swapped, without them.  Typed events are encoded by
:mod:`aguikit.encode`; the HTTP client that folds an answer into a session is
:mod:`aguikit.client`.
"""

from __future__ import annotations

from ..limits import MAX_JSON_DEPTH as DEFAULT_MAX_DEPTH
from .jsonl import (
    DEFAULT_MAX_LINE_BYTES,
    JSONLDecoder,
    aiter_jsonl,
    encode_line,
    iter_jsonl,
    write_jsonl,
)
from .sse import (
    DEFAULT_MAX_FRAME_BYTES,
    MEDIA_TYPE,
    Frame,
    SSEDecoder,
    aiter_events,
    aiter_frames,
    encode,
    encode_bytes,
    iter_events,
    iter_frames,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "MEDIA_TYPE",
    "Frame",
    "JSONLDecoder",
    "SSEDecoder",
    "aiter_events",
    "aiter_frames",
    "aiter_jsonl",
    "encode",
    "encode_bytes",
    "encode_line",
    "iter_events",
    "iter_frames",
    "iter_jsonl",
    "write_jsonl",
]
