"""
The safety limits every entry point applies to input it did not produce, in one place.

aguikit reads somebody else's process.  A peer that never ends a frame, nests an array
a million levels deep or opens entities without ever closing them must be stopped with an
error naming the limit, not by the operating system running out of memory or Python out of
stack.  Each default below is far beyond what a legitimate stream needs and small enough
that hitting it costs megabytes, not gigabytes; each is a keyword argument of the entry
points that apply it, so a caller with a legitimate need raises it there.
``docs/limits.md`` is the table of all of them.

What is deliberately not limited: the number of messages, the length of one message's
text, the size of the state and the number of events in a stream.  Those *are* the
conversation; bounding them would refuse real work, and memory already grows with them
and nothing else.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_OPEN_ENTITIES",
    "MAX_WARNINGS",
]

MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""Largest SSE frame, in bytes including line ends (setting ``max_frame_bytes``;
:class:`~aguikit.errors.LimitExceededError`)."""

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""Longest JSONL line, in bytes (setting ``max_line_bytes``;
:class:`~aguikit.errors.LimitExceededError`)."""

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""Largest protobuf event message behind one length prefix, in bytes (setting
``max_message_bytes``; :class:`~aguikit.errors.LimitExceededError`), checked against the
prefix before the payload is buffered."""

MAX_BODY_BYTES: Final = 1024 * 1024
"""
Largest run request body an agent endpoint reads, in bytes (setting ``max_body_bytes`` of
:func:`aguikit.server.agui_endpoint`; ``413`` beyond it), read incrementally so an
oversize body is never held whole.  1 MiB, nginx's own default: a quarter of a million
tokens of conversation.  It also bounds what a hostile body costs: a body of 1 MiB of tiny
wrong members is refused with its ``422`` in well under 100 ms of CPU.  A deployment taking
inline images raises it (their bytes are one string each, cheap to read and to check).
"""

MAX_JSON_DEPTH: Final = 256
"""
Deepest array/object nesting of one event's JSON (setting ``max_depth``;
:class:`~aguikit.errors.LimitExceededError`).  The one default of every decoder (SSE,
JSONL, :func:`aguikit.encode.loads_event`): the schema validator, the wire converter and
:mod:`copy` recurse a few frames per level, and 256 levels leave them ample stack under
Python's default recursion limit.
"""

MAX_OPEN_ENTITIES: Final = 10_000
"""
Most entities (messages, tool calls, reasoning, steps, subagents) open at once in one run,
and most chunk streams the normalizer tracks at once (setting ``max_open_entities``;
:class:`~aguikit.errors.ProtocolError` ``AGUI-V093``).
"""

MAX_WARNINGS: Final = 1000
"""
Most :class:`~aguikit.session.SessionWarning` records a session keeps (setting
``max_warnings``).  Every warning is still counted and logged; only the list stops
growing, so a stream that earns one warning per event cannot fill memory with them.
"""
