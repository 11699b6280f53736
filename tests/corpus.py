"""
Loader for the official AG-UI conformance corpus, shared by every conformance test.

The corpus is not vendored: it lives beside the repository in ``../shared/reference``
(``AGUIKIT_REFERENCE`` overrides the location).  When it is absent, :func:`streams` returns
no cases and the tests that parametrize over it skip with a reason instead of failing,
except where ``AGUIKIT_REQUIRE_REFERENCE`` is set (CI sets it in ``.ci/run``): there
:func:`require` fails instead, so a CI run never passes by skipping what it must check.
The normative specification pages (``upstream/docs/spec/<version>``) are located here too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

REPO = Path(__file__).resolve().parent.parent
REFERENCE = Path(os.environ.get("AGUIKIT_REFERENCE", REPO.parent / "shared" / "reference"))
UPSTREAM_SPEC = REFERENCE / "upstream" / "spec"
OFFICIAL_SCHEMA = REFERENCE / "upstream" / "docs" / "spec" / "1.1" / "schema.json"
"""The normative AG-UI 1.1 specification's bundled schema, authoritative for structure."""
OFFICIAL_FIXTURES = UPSTREAM_SPEC / "1.1" / "fixtures"
"""Where upstream keeps the 1.1 schema's fixture documents (only ``MANIFEST.txt`` is stored)."""
UPSTREAM_DOCS = REFERENCE / "upstream" / "docs" / "spec"
"""The normative specification, one folder per version (``1.1/``: its pages and schema)."""


REQUIRED_BY = "AGUIKIT_REQUIRE_REFERENCE is set"


def required() -> bool:
    """Whether the reference must be present (CI): its absence then fails, never skips."""
    return bool(os.environ.get("AGUIKIT_REQUIRE_REFERENCE"))


def require(path: Path, what: str) -> None:
    """
    Skip the calling test when ``path`` (part of the reference) is absent, naming ``what``;
    fail instead where :func:`required`, as in CI.
    """
    if path.exists():
        return
    message = f"{what} not found at {path}"
    if required():
        pytest.fail(f"{message} ({REQUIRED_BY})")
    pytest.skip(message)


@attrs.frozen
class Stream:
    """One corpus fixture: the events a producer sent and what a client must do with them."""

    corpus: str
    """The corpus directory the fixture comes from: ``draft``, ``1.0`` or ``1.1``."""
    name: str
    path: Path
    raw: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.corpus}/{self.name}"

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self.raw["stream"])

    @property
    def expect(self) -> dict[str, Any]:
        return dict(self.raw.get("expect", {}))

    @property
    def input(self) -> dict[str, Any] | None:
        return self.raw.get("input")

    @property
    def client(self) -> dict[str, Any] | None:
        return self.raw.get("client")


def available() -> bool:
    return UPSTREAM_SPEC.is_dir()


def _iter_streams() -> Iterator[Stream]:
    if not available():
        return
    for path in sorted(UPSTREAM_SPEC.glob("*/conformance/streams/*.json")):
        corpus = path.parent.parent.parent.name
        raw = json.loads(path.read_text(encoding="utf-8"))
        yield Stream(corpus=corpus, name=path.stem, path=path, raw=raw)


def streams() -> list[Stream]:
    """Every fixture of every corpus directory, in a stable order (empty when absent)."""
    return list(_iter_streams())


def params(selected: list[Stream] | None = None) -> list[Any]:
    """
    ``pytest.param`` per stream, with readable ids; a single skipping param when the
    reference is absent, so a parametrized test reports a skip rather than vanishing.
    """
    cases = streams() if selected is None else selected
    if not cases:
        if not available() and required():
            pytest.fail(f"conformance corpus not found at {UPSTREAM_SPEC} ({REQUIRED_BY})")
        return [
            pytest.param(
                None,
                id="corpus-absent",
                marks=pytest.mark.skip(reason=f"conformance corpus not found at {UPSTREAM_SPEC}"),
            )
        ]
    return [pytest.param(case, id=case.id) for case in cases]


def event_params(keep: Callable[[Any], bool] = lambda event: True) -> list[Any]:
    """
    ``pytest.param`` per event of every stream that ``keep`` accepts, with the id
    ``<stream id>#<index>``; the single skipping param of :func:`params` when there is none.
    """
    cases = [
        pytest.param(event, id=f"{stream.id}#{index}")
        for stream in streams()
        for index, event in enumerate(stream.events)
        if keep(event)
    ]
    return cases or params([])


def subset_match(expected: Any, actual: Any) -> bool:
    """
    The corpus README's subset match: arrays must have the same length and match element
    by element; objects are compared only on the keys ``expected`` names; scalars are equal.
    """
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and subset_match(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(subset_match(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


_MISSING = object()


def dotted_get(document: Any, dotted: str) -> Any:
    """
    Follow a corpus ``"<index>.<dotted path>"`` into a list of delivered wire dicts.
    Returns a sentinel (compare with :data:`MISSING`) when a step does not exist.
    """
    node = document
    for part in dotted.split("."):
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return _MISSING
            node = node[int(part)]
        elif isinstance(node, dict):
            if part not in node:
                return _MISSING
            node = node[part]
        else:
            return _MISSING
    return node


MISSING = _MISSING
