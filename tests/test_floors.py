"""
The floor plan: each module imports only the floors below it, never upward, lazily or not.

The layout is the data flow (``docs/DESIGN.md`` opens with it): bytes come in at the
bottom, typed events climb through validation, parsing, the receiver boundary, chunk
expansion, verification and application, and the client and the command line sit on top.
An import that climbs a floor (the SSE decoder importing the converter, the client's
session living inside the transport package) makes a lower stage depend on a higher one,
and the plan stops telling the truth.  This test reads every module's imports, wherever
they are written (a function-level import is an arrow too), and fails naming each one
that climbs, and each module that has no floor yet.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Final

SRC: Final = Path(__file__).resolve().parent.parent / "src" / "aguikit"

FLOORS: Final[dict[str, int]] = {
    # errors, limits and the catalogue of every id a user can see
    "aguikit.limits": 0,
    "aguikit.catalogue": 0,
    "aguikit._deprecation": 0,
    "aguikit._observe": 0,
    "aguikit.errors": 1,
    "aguikit._guard": 2,
    # one JSON reader, one writer, one depth guard; the RFC 6902 engine
    "aguikit.jsonio": 3,
    "aguikit.patch": 3,
    # generated models and the facts derived from the schema
    "aguikit._generated": 4,
    "aguikit._generated.models": 4,
    "aguikit._generated.registry": 4,
    "aguikit._generated.agui_pb2": 4,
    "aguikit._generated.exports": 4,
    "aguikit.models": 4,
    "aguikit._dispatch": 5,
    # the consuming pipeline, one stage per floor
    "aguikit.validate": 6,
    "aguikit.wire": 7,
    "aguikit.interop": 7,
    "aguikit.receiver": 8,
    "aguikit.chunks": 9,
    "aguikit.rules": 10,
    "aguikit.verify": 11,
    "aguikit.changes": 12,
    "aguikit.apply": 13,
    "aguikit.session": 14,
    # bytes: transports (restricted further, below) and the typed encoders
    "aguikit.transport": 15,
    "aguikit.transport.sse": 15,
    "aguikit.transport.jsonl": 15,
    "aguikit.transport.http": 15,
    "aguikit.transport.asgi": 15,
    "aguikit.transport.proto": 15,
    "aguikit.proto": 15,
    "aguikit.encode": 16,
    # run telemetry: reads typed events and warnings, called by the producer and clients
    "aguikit.otel": 16,
    # the top: the HTTP client, the reference renderer, the command line
    "aguikit.client": 17,
    "aguikit.agent": 17,
    "aguikit.server": 17,
    "aguikit.server.writer": 17,
    "aguikit.server.access": 17,
    "aguikit.server.http": 17,
    "aguikit.server.eventlog": 17,
    "aguikit.server.prelude": 17,
    "aguikit.server.redis_log": 17,
    "aguikit.server.threads": 17,
    "aguikit.server.redis_threads": 17,
    "aguikit.server.faults": 17,
    "aguikit.reference": 18,
    "aguikit.checker": 18,
    "aguikit.report": 18,
    # a thread of exchanges, judged by the check pass and the thread rules
    "aguikit.conversation": 19,
    # on the wire: forwarding, replaying and diagnosing live traffic, over the conversation
    "aguikit.proxy": 20,
    "aguikit.replay": 20,
    "aguikit.doctor": 20,
    "aguikit.cli": 20,
    "aguikit.view": 20,
    "aguikit.__main__": 21,
    # testing helpers judge through the check pass; the pytest plugin sits on them
    "aguikit.testing": 21,
    "aguikit.pytest_plugin": 22,
}
"""Every module and its floor; a module may import modules on its floor or below."""

JSON_LAYER: Final = 3
"""``aguikit.transport`` speaks bytes and wire dicts: it imports nothing above this floor."""

FACADE: Final = "aguikit"
"""The package itself re-exports every floor (lazily); it may import only the errors eagerly."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported aguikit module, line) for every import in the file, nested ones included."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("aguikit")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("aguikit"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((sub if sub in FLOORS else target, node.lineno))
    return found


def _floor(module: str) -> int | None:
    while module:
        if module in FLOORS:
            return FLOORS[module]
        module = module.rpartition(".")[0]
    return None


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_module_has_a_floor() -> None:
    """A new module must be placed in the plan before it can be imported by anything."""
    unplaced = [_module_name(p) for p in _modules() if _module_name(p) not in FLOORS | {FACADE: 0}]

    assert [] == unplaced


def test_no_import_climbs_a_floor() -> None:
    """Each arrow points down (or along its floor); none climbs, lazily or not."""
    climbing = []
    for path in _modules():
        name = _module_name(path)
        if name == FACADE:
            continue
        own = FLOORS[name]
        for target, line in _imports(path):
            floor = _floor(target)
            if floor is not None and floor > own:
                climbing.append(f"{name}:{line} imports {target} (floor {floor} > {own})")

    assert [] == climbing


def test_the_transport_imports_nothing_above_the_json_layer() -> None:
    """Bytes in, wire dicts out: no model, converter or session below the byte floor."""
    offending = []
    for path in (SRC / "transport").glob("*.py"):
        for target, line in _imports(path):
            if target.startswith("aguikit.transport"):
                continue
            floor = _floor(target)
            if floor is None or floor > JSON_LAYER:
                offending.append(f"{_module_name(path)}:{line} imports {target}")

    assert [] == offending


def test_the_facade_imports_only_the_errors_eagerly() -> None:
    """``import aguikit`` must not load the pipeline; names are loaded on first use."""
    tree = ast.parse((SRC / "__init__.py").read_text(encoding="utf-8"))
    eager = [
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level and node.module
    ]

    assert ["errors"] == eager


def test_importing_the_transport_loads_no_stage_above_it() -> None:
    """``import aguikit.transport`` leaves the models, the session and the client unloaded."""
    code = (
        "import sys, aguikit.transport, aguikit.transport.sse, aguikit.transport.jsonl\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('aguikit'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()

    above = [m for m in loaded if m != FACADE and (_floor(m) or 0) > JSON_LAYER]
    assert [] == [m for m in above if not m.startswith("aguikit.transport")]


def test_every_public_name_of_the_package_still_resolves() -> None:
    """The lazy façade keeps every name of ``aguikit.__all__`` working."""
    import aguikit

    missing = [name for name in aguikit.__all__ if not hasattr(aguikit, name)]

    assert [] == missing


def test_the_design_document_opens_with_the_plan_naming_every_module() -> None:
    """``docs/DESIGN.md`` starts with the floor plan, and every module is on it."""
    design = (SRC.parent.parent / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    plan = design.split("## The floor plan", 1)[1].split("\n## ", 1)[0]
    assert design.index("## The floor plan") < design.index("## The decisions")

    short = {name.removeprefix("aguikit.").split(".")[0] for name in FLOORS}
    missing = sorted(name for name in short if f"`{name}" not in plan)

    assert [] == missing
