"""
Interoperability with the official Python SDK (``ag-ui-protocol``, the ``ag_ui.core``
pydantic models): convert its events, messages and run requests to aguikit's and back.

Most Python agent frameworks already build ``ag_ui.core`` objects; a service adopting
aguikit for verification should not have to rewrite them.  Both libraries describe the
same wire documents, so the one conversion is *through the wire dict*: the SDK's
``model_dump(mode="json", by_alias=True)`` (its base model already omits optional members
without a value and keeps required ``null``\\ s, exactly the wire shape) goes into aguikit's
one validate-then-parse path (:mod:`aguikit.wire`), and :func:`aguikit.wire.to_wire` goes
into the SDK's own validators.  Nothing here declares a protocol shape, so the two cannot
drift apart silently: a document either library cannot represent fails loudly.

*Floor.*  This module sits on the converter's floor and imports nothing above it.  The
session's receiver accepts an SDK event by duck typing through :func:`sdk_wire` (any
object of an ``ag_ui`` module with ``model_dump``), so ``Session.feed`` and
``RunWriter.emit`` take SDK events without importing the SDK and without a stage climbing
to this module's callers.

``ag-ui-protocol`` stays optional: only :func:`to_sdk` and :func:`from_sdk` need it, and
without it they raise an :class:`ImportError` naming the extra to install
(``aguikit[sdk]``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Final

from ._generated import models as _models
from ._generated.registry import DEPRECATED_EVENT_TYPES, EVENT_CLASSES, MESSAGE_CLASSES
from .wire import parse_as, parse_event, parse_message, to_wire

__all__ = ["from_sdk", "is_sdk_model", "sdk_wire", "to_sdk"]

_EXTRA: Final = (
    "aguikit.interop needs the official SDK: pip install 'aguikit[sdk]' "
    "(which installs ag-ui-protocol==1.0.0)"
)
_MESSAGE_CLASSES: Final = frozenset(MESSAGE_CLASSES.values())
_MESSAGE_NAMES: Final = frozenset(cls.__name__ for cls in MESSAGE_CLASSES.values())
_EVENT_CLASSES: Final = frozenset(EVENT_CLASSES.values())


def _sdk() -> ModuleType:
    try:
        import ag_ui.core as core
    except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
        raise ImportError(_EXTRA, name="ag_ui") from exc
    return core


def is_sdk_model(obj: object) -> bool:
    """
    Whether ``obj`` looks like an ``ag_ui`` pydantic model, decided without importing the
    SDK (its class lives in an ``ag_ui`` module and it has ``model_dump``).
    """
    module = type(obj).__module__
    return (module == "ag_ui" or module.startswith("ag_ui.")) and hasattr(obj, "model_dump")


def sdk_wire(obj: Any) -> dict[str, Any]:
    """
    The wire dict of an ``ag_ui`` model: its camelCase JSON-mode dump.

    The SDK's base model leaves out optional members without a value and keeps a required
    ``null`` (``STATE_SNAPSHOT.snapshot``), which is exactly the wire shape; passing
    ``exclude_none`` would lose that ``null``, so this does not.
    """
    dumped: dict[str, Any] = obj.model_dump(mode="json", by_alias=True)
    return dumped


def from_sdk(obj: Any) -> Any:
    """
    Convert an ``ag_ui.core`` event, message, run request (or any other model both
    libraries define, by class name) into the aguikit typed value.

    The conversion goes through the wire dict and aguikit's validate-then-parse path, so
    the result is what aguikit would have parsed from the SDK's JSON, members the SDK kept
    as extras included (in ``extra_members``).

    Raises:
        ImportError: ``ag-ui-protocol`` is not installed (install ``aguikit[sdk]``).
        TypeError: ``obj`` is not an ``ag_ui.core`` model aguikit knows.
        SchemaValidationError: the SDK object holds a document the schema rejects (the
            SDK coerces where the schema is exact).
    """
    core = _sdk()
    if isinstance(obj, core.BaseEvent):
        return parse_event(sdk_wire(obj))
    if not is_sdk_model(obj):
        raise TypeError(f"from_sdk takes an ag_ui.core model, not {type(obj).__name__}")
    wire = sdk_wire(obj)
    name = type(obj).__name__
    if name in _MESSAGE_NAMES:
        return parse_message(wire)
    cls = getattr(_models, name, None)
    if not isinstance(cls, type) or cls in _EVENT_CLASSES:
        raise TypeError(f"aguikit has no model for ag_ui.core.{name}")
    return parse_as(cls, wire)


def to_sdk(obj: Any) -> Any:
    """
    Convert an aguikit typed event, message, run request (or any other generated model the
    SDK also defines, by class name) into the ``ag_ui.core`` model.

    The SDK validates aguikit's exact wire dict, so the result dumps back to the same JSON.

    Raises:
        ImportError: ``ag-ui-protocol`` is not installed (install ``aguikit[sdk]``).
        TypeError: the SDK has no model for this value (the deprecated ``THINKING_*``
            events, which ag-ui-protocol 1.0 dropped, or an event the installed SDK
            predates), or ``obj`` is not an aguikit model.
    """
    core = _sdk()
    wire = to_wire(obj)
    cls = type(obj)
    if cls in _EVENT_CLASSES:
        event_type = wire["type"]
        if event_type not in {member.value for member in core.EventType}:
            why = "deprecated" if event_type in DEPRECATED_EVENT_TYPES else "not in this SDK"
            raise TypeError(f"ag_ui.core has no event {event_type} ({why})")
        return _adapter(core, "Event").validate_python(wire)
    if cls in _MESSAGE_CLASSES:
        return _adapter(core, "Message").validate_python(wire)
    target = getattr(core, cls.__name__, None)
    if target is None or not hasattr(target, "model_validate"):
        raise TypeError(f"ag_ui.core has no model {cls.__name__}")
    return target.model_validate(wire)


_ADAPTERS: dict[str, Any] = {}


def _adapter(core: ModuleType, union: str) -> Any:
    adapter = _ADAPTERS.get(union)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[union] = TypeAdapter(getattr(core, union))
    return adapter
