"""
Warn when user code builds a deprecated event, but not when one arrives on the wire.

The deprecated ``THINKING_*`` events are still valid protocol: a consumer receiving them
from an old producer has done nothing wrong, so parsing them must stay silent.  A service
that *constructs* one is writing new code against a retired shape, and that is what the
warning is for.  The wire converter marks its own constructions with
:func:`constructing_from_wire`; everything else is user code.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, TypeVar

import attrs

T = TypeVar("T")

# mypy's attrs plugin cannot see that a TypeVar is bound to attrs classes only.
_evolve: Any = attrs.evolve

_FROM_WIRE: Final[ContextVar[bool]] = ContextVar("aguikit_from_wire", default=False)


def warn_if_constructed_by_user(cls: type) -> None:
    """Emit a ``DeprecationWarning`` naming ``cls`` unless the wire converter is building it."""
    if _FROM_WIRE.get():
        return
    replacement = getattr(cls, "__deprecated__", "deprecated")
    warnings.warn(
        f"{cls.__name__} is deprecated: {replacement}",
        DeprecationWarning,
        stacklevel=4,
    )


@contextmanager
def constructing_from_wire() -> Iterator[None]:
    """Silence :func:`warn_if_constructed_by_user` for constructions inside the block."""
    token = _FROM_WIRE.set(True)
    try:
        yield
    finally:
        _FROM_WIRE.reset(token)


def evolve_quietly(inst: T, **changes: Any) -> T:
    """
    ``attrs.evolve`` for library code that rebuilds an event it received (to strip members,
    say): re-constructing a deprecated event it did not author must not warn its user.
    """
    with constructing_from_wire():
        evolved: T = _evolve(inst, **changes)
    return evolved
