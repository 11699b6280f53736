"""
aguikit: the schema-first Python toolkit for the AG-UI protocol.

The pipeline a consumer runs, one module per stage:

``transport``  bytes off the wire (SSE, JSONL, HTTP) → raw event dicts
``validate``   raw dicts checked against the bundled JSON Schema
``wire``       raw dicts ⇄ typed attrs events (``models``, generated from ``schema/``)
``chunks``     ``*_CHUNK`` shorthand expanded into explicit start/content/end events
``verify``     ordering and attribution rules, declared as data in ``rules``
``apply``      events folded into messages, state, activities, reasoning, subagents
``session``    all of the above for one consumer, with the receiver's tolerance rules

Every error is an :class:`AguiError`.
"""

import logging
from typing import TYPE_CHECKING, Any

from ._generated.registry import PROTOCOL_VERSION, SCHEMA_ID
from .apply import Applier, Changed
from .chunks import ChunkNormalizer, normalize_all
from .errors import (
    AguiError,
    ContentTypeError,
    DecodeError,
    HTTPStatusError,
    LimitExceededError,
    PatchError,
    ProtocolError,
    SchemaIssue,
    SchemaValidationError,
    TransportError,
    TruncatedStreamError,
    UnknownEventTypeError,
    WireFormatError,
)
from .models import Event, EventType, Message, RunAgentInput
from .rules import RULES
from .session import Session, SessionWarning
from .validate import is_valid, iter_schema_errors, validate_event
from .verify import Verifier, verify_all
from .wire import (
    converter,
    dumps_event,
    loads_event,
    parse_as,
    parse_event,
    parse_message,
    parse_run_agent_input,
    to_wire,
)

if TYPE_CHECKING:
    from .transport.http import AgentClient, Update

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The HTTP client pulls in httpx; reading a recorded stream should not pay for that.
    if name in ("AgentClient", "Update"):
        from .transport import http

        return getattr(http, name)
    raise AttributeError(f"module 'aguikit' has no attribute {name!r}")


# A library never decides where its log records go; the application does.
logging.getLogger("aguikit").addHandler(logging.NullHandler())

__all__ = [
    "PROTOCOL_VERSION",
    "RULES",
    "SCHEMA_ID",
    "AgentClient",
    "AguiError",
    "Applier",
    "Changed",
    "ChunkNormalizer",
    "ContentTypeError",
    "DecodeError",
    "Event",
    "EventType",
    "HTTPStatusError",
    "LimitExceededError",
    "Message",
    "PatchError",
    "ProtocolError",
    "RunAgentInput",
    "SchemaIssue",
    "SchemaValidationError",
    "Session",
    "SessionWarning",
    "TransportError",
    "TruncatedStreamError",
    "UnknownEventTypeError",
    "Update",
    "Verifier",
    "WireFormatError",
    "__version__",
    "converter",
    "dumps_event",
    "is_valid",
    "iter_schema_errors",
    "loads_event",
    "normalize_all",
    "parse_as",
    "parse_event",
    "parse_message",
    "parse_run_agent_input",
    "to_wire",
    "validate_event",
    "verify_all",
]
