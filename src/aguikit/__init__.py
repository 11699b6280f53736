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

from ._generated.registry import PROTOCOL_VERSION, SCHEMA_ID
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
from .validate import is_valid, iter_schema_errors, validate_event
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

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL_VERSION",
    "SCHEMA_ID",
    "AguiError",
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
    "TransportError",
    "TruncatedStreamError",
    "UnknownEventTypeError",
    "WireFormatError",
    "__version__",
    "converter",
    "dumps_event",
    "is_valid",
    "iter_schema_errors",
    "loads_event",
    "parse_as",
    "parse_event",
    "parse_message",
    "parse_run_agent_input",
    "to_wire",
    "validate_event",
]
