"""
Transports: how AG-UI events travel as bytes, and the client that fetches them.

* :mod:`aguikit.transport.sse` - Server-Sent Events, what agents speak over HTTP: an
  incremental WHATWG-conformant decoder and the encoder a server streams with.
* :mod:`aguikit.transport.jsonl` - one event per line, for recordings and pipelines.
* :mod:`aguikit.transport.http` - :class:`AgentClient`, which POSTs a ``RunAgentInput``
  and folds the answer into a :class:`aguikit.Session` as it arrives.

Every layer here speaks bytes and wire dicts; typing, verifying and applying events is
left to the modules above, so a transport can be swapped without touching them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._json import DEFAULT_MAX_DEPTH
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

if TYPE_CHECKING:
    from .http import AgentClient, Update

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "MEDIA_TYPE",
    "AgentClient",
    "Frame",
    "JSONLDecoder",
    "SSEDecoder",
    "Update",
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


def __getattr__(name: str) -> Any:
    # The client pulls in httpx and the session; a reader of recorded files needs neither.
    if name in ("AgentClient", "Update"):
        from . import http

        return getattr(http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
