"""
aguikit: the schema-first Python toolkit for the AG-UI protocol.

The house, one floor per stage, each importing only the floors below it
(``docs/DESIGN.md`` has the plan and why):

``errors``, ``limits``, ``catalogue``  what can go wrong, the safety limits, every rule id
``jsonio``, ``patch``    the one JSON reader and writer; RFC 6902 applied atomically
``models``              typed attrs events, generated from ``schema/``
``validate``            raw dicts checked against the bundled JSON Schema
``wire``                raw dicts ⇄ typed events (the one validate-then-parse path)
``receiver``            the compatibility boundary (strip, drop, translate, warn)
``chunks``              ``*_CHUNK`` shorthand expanded into explicit events
``verify``              ordering and attribution rules, declared as data in ``rules``
``apply``               events folded into messages, state, activities, subagents
``session``             all of the above for one consumer: ``Update`` per event
``encode``, ``transport``   events as SSE, JSONL and protobuf bytes; bytes ⇄ wire dicts
                        (or frames); the HTTP fetch
``proto``               events ⇄ ``ag_ui.Event`` protobuf messages, as ``@ag-ui/proto``
``client``, ``agent``   :class:`AgentClient`, over HTTP; :class:`Agent`, a conversation
``conversation``        a thread's exchanges (HAR files, recordings, the test kit) and
                        the thread rules across its runs
``proxy``, ``replay``, ``doctor``   live traffic: forwarded and judged, recorded, served
                        back with faults, and what the infrastructure does to a stream
``cli``, ``reference``  the ``aguikit`` command and the rendered rule reference
``view``                one offline HTML page of a run (``aguikit view``)

Every error is an :class:`AguiError`.  The names below are loaded when first used, so
``import aguikit.transport`` (or any lower floor) does not load the floors above it.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any, Final

from .errors import (
    AguiError,
    ContentTypeError,
    DecodeError,
    EncodeError,
    HTTPStatusError,
    LimitExceededError,
    PatchError,
    ProtocolError,
    SchemaIssue,
    SchemaValidationError,
    StageOrderError,
    TransportError,
    TruncatedStreamError,
    UnknownEventTypeError,
    WireFormatError,
)

if TYPE_CHECKING:
    from ._generated.registry import PROTOCOL_VERSION, SCHEMA_ID
    from .agent import Agent, compact_events
    from .apply import Applier
    from .catalogue import RULES
    from .changes import Changed
    from .chunks import ChunkNormalizer, normalize_all
    from .client import AgentClient
    from .encode import dumps_event, encode_proto, loads_event
    from .models import Event, EventType, Message, RunAgentInput
    from .proto import iter_proto
    from .session import RunOutcome, Session, SessionWarning, Update
    from .validate import is_valid, iter_schema_errors, validate_event
    from .verify import Verifier, verify_all
    from .wire import (
        converter,
        parse_as,
        parse_event,
        parse_message,
        parse_run_agent_input,
        to_wire,
    )

__version__ = "0.1.0"

_LAZY: Final[dict[str, str]] = {
    "PROTOCOL_VERSION": "._generated.registry",
    "SCHEMA_ID": "._generated.registry",
    "Agent": ".agent",
    "compact_events": ".agent",
    "Applier": ".apply",
    "RULES": ".catalogue",
    "Changed": ".changes",
    "ChunkNormalizer": ".chunks",
    "normalize_all": ".chunks",
    "AgentClient": ".client",
    "dumps_event": ".encode",
    "encode_proto": ".encode",
    "iter_proto": ".proto",
    "loads_event": ".encode",
    "Event": ".models",
    "EventType": ".models",
    "Message": ".models",
    "RunAgentInput": ".models",
    "Session": ".session",
    "RunOutcome": ".session",
    "SessionWarning": ".session",
    "Update": ".session",
    "is_valid": ".validate",
    "iter_schema_errors": ".validate",
    "validate_event": ".validate",
    "Verifier": ".verify",
    "verify_all": ".verify",
    "converter": ".wire",
    "parse_as": ".wire",
    "parse_event": ".wire",
    "parse_message": ".wire",
    "parse_run_agent_input": ".wire",
    "to_wire": ".wire",
}
"""Public name → the module that defines it, imported on first use (PEP 562)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'aguikit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


# A library never decides where its log records go; the application does.
logging.getLogger("aguikit").addHandler(logging.NullHandler())

__all__ = [
    "PROTOCOL_VERSION",
    "RULES",
    "SCHEMA_ID",
    "Agent",
    "AgentClient",
    "AguiError",
    "Applier",
    "Changed",
    "ChunkNormalizer",
    "ContentTypeError",
    "DecodeError",
    "EncodeError",
    "Event",
    "EventType",
    "HTTPStatusError",
    "LimitExceededError",
    "Message",
    "PatchError",
    "ProtocolError",
    "RunAgentInput",
    "RunOutcome",
    "SchemaIssue",
    "SchemaValidationError",
    "Session",
    "SessionWarning",
    "StageOrderError",
    "TransportError",
    "TruncatedStreamError",
    "UnknownEventTypeError",
    "Update",
    "Verifier",
    "WireFormatError",
    "__version__",
    "compact_events",
    "converter",
    "dumps_event",
    "encode_proto",
    "is_valid",
    "iter_proto",
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
