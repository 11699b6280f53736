"""
RFC 6902 JSON Patch, applied atomically, and the JSON copy the applier needs.

Shared state is the part of AG-UI that silently goes wrong: a ``STATE_DELTA`` computed
against a document the client does not hold applies half its operations and then fails,
and a naive client is left with a state nobody ever had.  :func:`apply_patch` runs
:mod:`jsonpatch` with its undo journal, so a patch either applies whole or leaves the
document exactly as it was and raises :class:`~aguikit.errors.PatchError` naming the
failing operation; the cost is what the operations touch, never a copy of the document.

:func:`copy_json` is the deep copy a consumer needs for values it will later patch in
place (snapshots, activity content): it never recurses, so a document nested thousands of
levels deep is copied, not a ``RecursionError``.

This is a floor of its own, below the generated models: it knows JSON values and RFC 6902
operations, nothing of events.  Typed operations are read by attribute.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

import jsonpatch
import jsonpointer

from .errors import PatchError

__all__ = ["UNSET", "apply_patch", "copy_json", "operations"]

UNSET: Final[Any] = object()
"""The "no value given" sentinel, where ``None`` (JSON null) is a value."""

_OP_FIELDS: Final = (("path", "path"), ("from_", "from"), ("value", "value"))

_PATCH_FAILURES: Final = (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException)


def operations(patch: Sequence[Any]) -> list[dict[str, Any]]:
    """
    A patch as the RFC's wire dicts: wire dicts are copied, typed operations (the generated
    ``AddOperation``... classes, read by attribute so this floor needs no model) are
    converted, members beyond the RFC ignored.
    """
    out: list[dict[str, Any]] = []
    for op in patch:
        if isinstance(op, Mapping):
            out.append(dict(op))
            continue
        wire: dict[str, Any] = {"op": op.op}
        for attr, name in _OP_FIELDS:
            value = getattr(op, attr, UNSET)
            if value is not UNSET:
                wire[name] = value
        out.append(wire)
    return out


_PLAIN: Final = frozenset({str, int, float, bool, type(None)})


def copy_json(value: Any) -> Any:
    """
    A deep copy of a JSON value that never recurses.

    ``copy.deepcopy`` recurses once per nesting level, so a snapshot nested a few thousand
    levels down (legal JSON, and a typed event may carry it past the wire's depth guard)
    would raise ``RecursionError`` in the middle of an update.  Dicts and lists are copied
    with an explicit stack, sharing and cycles preserved as ``deepcopy`` preserves them;
    anything else that is not a plain scalar falls back to ``deepcopy``.
    """
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is not dict and kind is not list:
        return copy.deepcopy(value)
    root: Any = {} if kind is dict else []
    memo: dict[int, Any] = {id(value): root}
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        pairs = source.items() if type(source) is dict else enumerate(source)
        for key, child in pairs:
            child_kind = type(child)
            if child_kind in _PLAIN:
                copied = child
            elif id(child) in memo:
                copied = memo[id(child)]
            elif child_kind is dict or child_kind is list:
                copied = memo[id(child)] = {} if child_kind is dict else []
                stack.append((child, copied))
            else:
                copied = copy.deepcopy(child)
            if type(target) is dict:
                target[key] = copied
            else:
                target.append(copied)
    return root


def _describe_failure(exc: Exception) -> str:
    text = str(exc)
    # jsonpointer puts the whole document in its message; the state is not a reason.
    cut = text.find(" not found in ")
    if cut != -1:
        text = text[: cut + len(" not found")]
    if len(text) > 200:
        text = text[:197] + "..."
    return text or type(exc).__name__


_PARSED: Final[dict[str, tuple[str, ...]]] = {}
"""Pointer strings with escapes already parsed, to their unescaped parts (see
:class:`_Pointer`)."""

_PARSED_MAX: Final = 4096
"""Distinct paths remembered; past it the memory starts over (a hostile stream of ever new
paths costs a parse each, as without the memory, and never grows it)."""


class _Pointer(jsonpointer.JsonPointer):
    """
    jsonpointer's pointer, parsed without its regexes, stepping through plain dicts and
    lists directly.

    :mod:`jsonpatch` builds a fresh pointer for every operation: parsing it (escape check,
    split, unescape) and then stepping through each container with ``isinstance`` checks
    against the ``Mapping`` and ``Sequence`` ABCs cost more than the change itself.  This is
    the ``pointer_cls`` extension point jsonpatch offers for exactly that; the semantics stay
    jsonpointer's: a path with nothing escaped is exactly its split, one with escapes is
    parsed by jsonpointer the first time and remembered, each pointer gets its own list of
    the parts, and anything but a plain dict or list holding the step falls back to
    jsonpointer's own walk, with its errors.
    """

    def __init__(self, pointer: str) -> None:
        if "~" not in pointer and pointer[:1] in _ROOTS:
            # Nothing escaped: jsonpointer's parse is exactly this split.
            self.parts = pointer.split("/")[1:]
            return
        parts = _PARSED.get(pointer)
        if parts is not None:
            self.parts = list(parts)
            return
        super().__init__(pointer)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[pointer] = tuple(self.parts)

    def to_last(self, doc: Any) -> tuple[Any, Any]:
        parts = self.parts
        if not parts:
            return doc, None
        for part in parts[:-1]:
            doc = self.walk(doc, part)
        return doc, _step(doc, parts[-1])

    def walk(self, doc: Any, part: Any) -> Any:
        kind = type(doc)
        if kind is dict:
            found = doc.get(part, UNSET)
            if found is not UNSET:
                return found
        elif kind is list:
            index = _index(part)
            if index is not None and index < len(doc):
                return doc[index]
        return super().walk(doc, part)


_ROOTS: Final = frozenset({"", "/"})


def _index(part: Any) -> int | None:
    """``part`` as a list index when it is one in jsonpointer's grammar (``0|[1-9][0-9]*``)."""
    if type(part) is str and part.isascii() and part.isdigit() and (part == "0" or part[0] != "0"):
        return int(part)
    return None


def _step(doc: Any, part: Any) -> Any:
    """jsonpointer's ``get_part`` (the last step of a path, in its container's terms),
    without its ``Mapping``/``Sequence`` checks for a plain dict or list."""
    kind = type(doc)
    if kind is dict or (kind is list and part == "-"):
        return part
    if kind is list:
        index = _index(part)
        if index is not None:
            return index
    return jsonpointer.JsonPointer.get_part(doc, part)


def _prepared(ops: list[dict[str, Any]]) -> jsonpatch.JsonPatch:
    """
    A :class:`jsonpatch.JsonPatch` over ``ops`` without its constructor's validation pass.

    The constructor checks a patch by building every operation object, and ``apply``
    builds them all again; the second build checks exactly the same things (an unknown
    ``op``, a missing ``path`` raise there too), so the first is skipped and a delta pays
    for its operations once.  ``tests/test_apply.py`` holds the two to the same results.
    """
    patch: jsonpatch.JsonPatch = jsonpatch.JsonPatch.__new__(jsonpatch.JsonPatch)
    patch.pointer_cls = _Pointer
    patch.patch = ops
    return patch


def apply_patch(
    document: Any,
    patch: Sequence[Any],
    target: str = "state",
) -> Any:
    """
    Apply an RFC 6902 patch to ``document`` in place, atomically.

    Uses :mod:`jsonpatch`'s journal: every change is recorded with what it replaced, and if
    an operation fails the changes already made are undone, so the cost is what the
    operations touch rather than a copy of the whole document.  Values the patch inserts
    are copied, so the document never shares a mutable value with the event.

    Returns:
        The patched document (a new object only when an operation replaced the root).

    Raises:
        PatchError: an operation did not apply; ``document`` is exactly as it was, and
            ``op_index``/``op``/``pointer`` name the first operation that failed.
    """
    ops = operations(patch)
    try:
        return _prepared(ops).apply(document, in_place=True, atomic=True)
    except RecursionError:
        # jsonpatch copies inserted values with deepcopy; its journal has undone the rest.
        failing = _find_failing(document, ops, None)
        op = ops[failing] if failing is not None else None
        raise PatchError(
            target,
            "a value is nested too deeply to copy",
            op_index=failing,
            op=op,
            pointer=op.get("path") if op is not None else None,
        ) from None
    except _PATCH_FAILURES as exc:
        failing = _find_failing(document, ops, exc)
        op = ops[failing] if failing is not None else None
        raise PatchError(
            target,
            _describe_failure(exc),
            op_index=failing,
            op=op,
            pointer=op.get("path") if op is not None else None,
        ) from None


def _find_failing(
    document: Any, operations: list[dict[str, Any]], exc: Exception | None
) -> int | None:
    """Which operation failed: named by the exception, or found by replaying on a copy."""
    failed = getattr(exc, "op", None)
    failed = getattr(failed, "operation", failed)
    for index, operation in enumerate(operations):
        if operation is failed:
            return index
    # The failure path only: a copy costs the document's size, once, to name the culprit.
    scratch = copy_json(document)
    for index, operation in enumerate(operations):
        try:
            scratch = jsonpatch.JsonPatch([operation]).apply(scratch, in_place=True)
        except (*_PATCH_FAILURES, RecursionError):
            return index
    return None
