"""
Which aguikit the suite is testing: the pure package or the compiled one, whole, never a mix.

The compiled wheel (docs/DESIGN.md, "The hot core is compiled") compiles the modules listed in
pyproject.toml (hatch-mypyc's ``include``) with mypyc; the same source is the pure package.
The suite runs against both (``nox -s tests`` and ``nox -s tests_compiled``, which set
``AGUIKIT_BUILD``), so these tests make sure each run tests the build it claims to: a
compile that silently fell back to ``.py`` files, a stray in-place ``.so`` shadowing edited
source, or a module compiled that the list does not name all fail here.
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import tomllib
from pathlib import Path

import aguikit

ROOT = Path(__file__).resolve().parent.parent
MYPYC = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"][
    "build"
]["targets"]["wheel"]["hooks"]["mypyc"]
LISTED = {p.removeprefix("/src/").removesuffix(".py") for p in MYPYC["include"]}
"""The compiled modules as paths under src/ without suffix: ``aguikit/session``, ..."""
SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)
PACKAGE = Path(aguikit.__file__).resolve().parent


def _extensions(package: Path) -> set[str]:
    """The extension modules in an ``aguikit`` package directory, as ``aguikit/x`` paths."""
    found = set()
    for path in package.rglob("*"):
        # The most specific first: ``.cpython-311-x86_64-linux-gnu.so`` before ``.so``.
        suffix = next((s for s in SUFFIXES if path.name.endswith(s)), None)
        if suffix is not None:
            found.add(path.relative_to(package.parent).as_posix().removesuffix(suffix))
    return found


def test_the_compiled_list_names_modules_that_exist() -> None:
    """A renamed or deleted module must leave the list too (hatch-mypyc would skip it)."""
    missing = sorted(m for m in LISTED if not (ROOT / "src" / f"{m}.py").is_file())
    assert not missing, f"pyproject.toml's mypyc include names missing modules: {missing}"
    assert LISTED, "the mypyc include list is empty"


def test_the_build_under_test_is_the_one_the_session_asked_for() -> None:
    """``AGUIKIT_BUILD=compiled``: exactly the listed modules are extension modules, and
    aguikit comes from an install, not from src/.  ``pure``: none is.  Unset (a bare
    ``pytest``): one or the other, whole."""
    build = os.environ.get("AGUIKIT_BUILD")
    compiled = _extensions(PACKAGE)
    if build == "compiled":
        assert compiled == LISTED, (
            f"not compiled: {sorted(LISTED - compiled)}; compiled but not listed: "
            f"{sorted(compiled - LISTED)} (in {PACKAGE})"
        )
        assert not PACKAGE.is_relative_to(ROOT / "src"), f"aguikit imported from {PACKAGE}"
    elif build == "pure":
        assert not compiled, f"the pure build has extension modules: {sorted(compiled)}"
    else:
        assert build is None, f"AGUIKIT_BUILD is 'compiled', 'pure' or unset, not {build!r}"
        assert compiled in (set(), LISTED), f"half a compiled build in {PACKAGE}: {compiled}"


def test_the_imported_modules_are_the_files_found() -> None:
    """What Python imported agrees with the files: a listed module is an extension module
    exactly when its ``.so`` sits next to its ``.py`` (an import from elsewhere would not)."""
    compiled = _extensions(PACKAGE)
    for module in sorted(LISTED):
        file = importlib.import_module(module.replace("/", ".")).__file__
        assert file is not None
        where = (PACKAGE.parent / module).parent  # aguikit/transport/sse: aguikit/transport
        assert Path(file).resolve().parent == where, f"{module} imported from {file}"
        assert file.endswith(SUFFIXES) == (module in compiled), file


def test_no_compiled_module_sits_in_the_source_tree() -> None:
    """hatch-mypyc compiles in place: a ``.so`` left in src/ by ``pip wheel .`` with the hook
    on would be imported instead of the edited ``.py`` beside it, so the pure tests would
    test stale code.  Build the compiled wheel with ``python -m build`` (README, "Install"),
    which compiles a copy; remove strays with ``git clean -fdX src``."""
    stray = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*")
        if p.name.endswith(SUFFIXES)
    )
    assert not stray, f"compiled modules in the source tree shadow its .py files: {stray}"


def test_a_compiled_function_binds_each_exception_name_to_one_type() -> None:
    """mypyc gives a local one type, the first it sees: after ``except A as exc``, a later
    ``except B as exc`` in the same function raises ``TypeError: A object expected; got B``
    in the compiled build when B is caught (the pure build runs fine).  So in a listed module
    each ``except ... as name`` of a function uses a name no other clause types differently.
    """
    clashes = []
    for module in sorted(LISTED):
        tree = ast.parse((ROOT / "src" / f"{module}.py").read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            bound: dict[str, set[str]] = {}
            for node in ast.walk(function):
                if isinstance(node, ast.ExceptHandler) and node.name and node.type:
                    bound.setdefault(node.name, set()).add(ast.unparse(node.type))
            clashes += [
                f"{module}.py:{function.lineno} {function.name}: {name} is {sorted(types)}"
                for name, types in bound.items()
                if len(types) > 1
            ]
    assert not clashes, "one exception name, several types (rename all but one):\n" + "\n".join(
        clashes
    )
