"""
What a stage reports instead of the ``TypeError`` it ran into.

Events do not only come off the wire: an in-process producer can hand a stage a typed
event whose id is a list, whose delta is a number, or something that is not an event at
all.  The wire parser would have refused such a value; a stage that trusts its input's
types would crash on it with an unrelated exception.  Every stage instead reports it as
``AGUI-V092`` through :func:`malformed_event`, and checks the one value it would otherwise
only discover later (a text fragment joined when read) with :func:`check_delta`, before
it changes anything.
"""

from __future__ import annotations

from typing import Any

from .catalogue import RULES_BY_ID
from .errors import ProtocolError, short_repr

__all__ = ["check_delta", "malformed_event"]


def malformed_event(event: Any, exc: Exception) -> ProtocolError:
    """
    ``AGUI-V092`` for an object that is not an event, or an event whose fields have types
    no wire document could give them (an in-process producer's list where an id goes).
    """
    rule = RULES_BY_ID["AGUI-V092"]
    event_type = getattr(event, "type", None)
    event_type = event_type if isinstance(event_type, str) else type(event).__name__
    detail = short_repr(f"{type(exc).__name__}: {exc}")
    message = rule.template.format(event_type=event_type, detail=detail)
    return ProtocolError(rule.id, rule.symbol, message, event_type=event_type)


def check_delta(delta: object) -> None:
    """
    Refuse a text fragment that is not text, now rather than when the fragments are
    joined: a chunk's expansion and the applier's buffers must fail before they change.

    Raises:
        TypeError: ``delta`` is not a string (``None`` is accepted: "no fragment").
    """
    if delta is not None and not isinstance(delta, str):
        raise TypeError(f"delta must be a string, not {type(delta).__name__}")
