"""
The producer side of AG-UI: emit a verified stream from any Starlette or FastAPI endpoint.

:class:`RunWriter` runs every event a producer emits through the same schema check, chunk
expansion and verifier a receiver uses (strict, repair or audit), with typed helpers that
make the legal order the easy one; :func:`agui_endpoint` and :func:`create_app` serve a
handler over HTTP (SSE, JSONL or protobuf, keep-alive comments, backpressure, each run
bound to its connection as the standard binding has it, or, given an event log such as
:class:`MemoryEventLog`, resumable with ``Last-Event-ID`` and stopped by a cancel
request), and :func:`capabilities_endpoint` publishes what the agent declares it can do;
:class:`MemoryThreadStore` keeps what each thread's runs fold to, so a reloaded page is
restated by snapshots (``docs/threads.md``); :class:`Access` and :class:`Denied` are
what an endpoint's ``authorize`` hook is given and raises.  ``RunAgentInput`` is
re-exported so a handler's module needs no other import.  The HTTP half needs Starlette
(``aguikit[server]``) and is imported on first use, so the writer works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._generated.models import RunAgentInput
from .access import Access, Authorize, Denied
from .eventlog import EventLog, MemoryEventLog
from .threads import MemoryThreadStore, Thread, ThreadError, ThreadStore
from .writer import (
    HANDLER_FAILED,
    Activity,
    ErrorReport,
    EventWriter,
    Mode,
    ReasoningBlock,
    ReasoningMessage,
    RunWriter,
    Sink,
    SubagentWriter,
    TextMessage,
    ToolCall,
)

if TYPE_CHECKING:
    from .http import (
        Handler,
        agui_endpoint,
        capabilities_endpoint,
        connect_endpoint,
        create_app,
        delete_thread_endpoint,
    )

__all__ = [
    "HANDLER_FAILED",
    "Access",
    "Activity",
    "Authorize",
    "Denied",
    "ErrorReport",
    "EventLog",
    "EventWriter",
    "Handler",
    "MemoryEventLog",
    "MemoryThreadStore",
    "Mode",
    "ReasoningBlock",
    "ReasoningMessage",
    "RunAgentInput",
    "RunWriter",
    "Sink",
    "SubagentWriter",
    "TextMessage",
    "Thread",
    "ThreadError",
    "ThreadStore",
    "ToolCall",
    "agui_endpoint",
    "capabilities_endpoint",
    "connect_endpoint",
    "create_app",
    "delete_thread_endpoint",
]

_HTTP = frozenset(
    {
        "Handler",
        "agui_endpoint",
        "capabilities_endpoint",
        "connect_endpoint",
        "create_app",
        "delete_thread_endpoint",
    }
)


def __getattr__(name: str) -> Any:
    if name in _HTTP:
        from . import http

        return getattr(http, name)
    raise AttributeError(f"module 'aguikit.server' has no attribute {name!r}")
