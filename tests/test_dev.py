"""
``./dev`` and ``noxfile.py``: arguments reach only the session they are meant for.

``./dev test -- -k receiver`` used to hand ``-k receiver`` to every default session, and
``codegen_check`` passed it on to ``codegen/generate.py``, which failed on it.  Both ends
are checked: the script (run against a stand-in ``nox`` that records its arguments) and
each session (run against a stand-in ``nox.Session`` that records what it runs).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


class _Recorder:
    """Stands in for ``nox.Session``: keeps every ``run`` call."""

    python: str | None = None

    def __init__(self, posargs: list[str]) -> None:
        self.posargs = posargs
        self.runs: list[tuple[str, ...]] = []
        self.installs: list[tuple[str, ...]] = []

    def install(self, *args: str) -> None:
        self.installs.append(args)

    def log(self, *args: Any) -> None:
        pass

    def run(self, *args: str, **kwargs: Any) -> None:
        self.runs.append(args)


def _noxfile(monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = types.ModuleType("nox")
    fake.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    fake.Session = _Recorder  # type: ignore[attr-defined]

    def session(*args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]):
            return args[0]
        return lambda function: function

    fake.session = session  # type: ignore[attr-defined]
    fake.parametrize = lambda *args, **kwargs: lambda function: function  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nox", fake)
    spec = importlib.util.spec_from_file_location("aguikit_noxfile", REPO / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INTEGRATIONS = [f"integrations{suffix}" for suffix in ("", "_agent_framework", "_adk")]


@pytest.mark.parametrize("name", ["lint", "typecheck", "codegen_check", *INTEGRATIONS])
def test_the_check_sessions_ignore_pytest_arguments(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nox -- -k foo`` reaches every session; the checks must not pass it on."""
    session = _Recorder(["-k", "foo"])

    getattr(_noxfile(monkeypatch), name)(session)

    assert session.runs
    assert [] == [run for run in session.runs if "-k" in run or "foo" in run]


def test_the_tests_session_hands_its_arguments_to_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _Recorder(["-k", "foo"])

    _noxfile(monkeypatch).tests(session)

    # Only pytest takes them; the one other run, installing the Node packages the tests
    # prove against (when npm is there), takes none.
    assert ("pytest", "-k", "foo") == session.runs[-1]
    assert [] == [run for run in session.runs[:-1] if "-k" in run or "foo" in run]
    assert [] == [run for run in session.runs[:-1] if run[:2] != ("npm", "install")]


class _Builder(_Recorder):
    """A recorder whose ``python -m build`` leaves a compiled wheel's name in ``--outdir``."""

    def __init__(self, posargs: list[str], tmp: Path) -> None:
        super().__init__(posargs)
        self.tmp = tmp

    def create_tmp(self) -> str:
        return str(self.tmp)

    def run(self, *args: str, **kwargs: Any) -> None:
        super().run(*args, **kwargs)
        if args[:3] == ("python", "-m", "build"):
            out = Path(args[args.index("--outdir") + 1])
            out.mkdir(parents=True, exist_ok=True)
            (out / "aguikit-0.1.0-cp311-cp311-linux_x86_64.whl").touch()


def test_the_compiled_tests_session_hands_its_arguments_to_pytest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Built, installed and checked compiled without them, then pytest with them (after the
    modules the compiled build cannot change, left out)."""
    session = _Builder(["-k", "foo"], tmp_path)
    noxfile = _noxfile(monkeypatch)
    monkeypatch.setattr(noxfile, "WHEEL_CACHE", tmp_path / "wheels")  # none kept: it builds

    noxfile.tests_compiled(session)

    ignored = tuple(f"--ignore={path}" for path in noxfile.UNCOMPILED_TESTS)
    assert ("pytest", *ignored, "-k", "foo") == session.runs[-1]
    assert all((REPO / path).is_file() for path in noxfile.UNCOMPILED_TESTS)
    assert [] == [run for run in session.runs[:-1] if "-k" in run or "foo" in run]
    assert [("-m", "build"), ("-c",)] == [
        run[1 : 3 if run[1] == "-m" else 2] for run in session.runs if run[0] == "python"
    ]


def test_the_compiled_session_installs_the_wheel_the_readme_test_built_from_this_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One compile serves ``./dev test``: the wheel ``tests/test_readme.py`` built by the
    README's commands is kept under the tree's digest and installed by ``tests_compiled``
    instead of a second build; a wheel kept for another tree is not."""
    from tests.tree_digest import tree_digest

    noxfile = _noxfile(monkeypatch)
    monkeypatch.setattr(noxfile, "WHEEL_CACHE", tmp_path / "wheels")
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    name = f"aguikit-0.1.0-{tag}-{tag}-linux_x86_64.whl"
    stale = tmp_path / "wheels" / ("0" * 64) / name
    stale.parent.mkdir(parents=True)
    stale.touch()
    session = _Builder([], tmp_path / "tmp")
    noxfile.tests_compiled(session)
    assert ("-m", "build") in [run[1:3] for run in session.runs]  # the stale one is not used

    kept = tmp_path / "wheels" / tree_digest(REPO) / name
    kept.parent.mkdir(parents=True)
    kept.touch()
    session = _Builder([], tmp_path / "tmp")
    noxfile.tests_compiled(session)
    assert [] == [run for run in session.runs if run[1:3] == ("-m", "build")]
    assert (f"{kept}[test]",) == session.installs[0]
    assert ("--force-reinstall", "--no-deps", str(kept)) == session.installs[1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="./dev is a bash script")
def test_dev_test_with_arguments_runs_the_checks_bare_and_pytest_with_them(
    tmp_path: Path,
) -> None:
    """``./dev test -- -k foo``: the checks without the arguments, then the tests with them."""
    shutil.copy(REPO / "dev", tmp_path / "dev")
    log = tmp_path / "nox.log"
    fake = tmp_path / ".venv" / "bin" / "nox"
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n', encoding="utf-8")
    fake.chmod(0o755)

    subprocess.run(["bash", str(tmp_path / "dev"), "test", "--", "-k", "foo"], check=True)

    assert ["-s lint typecheck codegen_check", "-s tests tests_compiled -- -k foo"] == (
        log.read_text(encoding="utf-8").splitlines()
    )


def test_the_demo_session_runs_the_demo_as_python_m_aguikit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """
    ``./dev demo`` runs in nox's environment, whose ``bin`` is on nox's PATH but not on
    the user's: run as ``python -m aguikit``, the demo prints its commands under that
    interpreter's absolute path, which the user's shell can run
    (``tests/test_cli.py`` runs what the demo prints).
    """
    session = _Recorder([])

    _noxfile(monkeypatch).demo(session)

    assert [("python", "-m", "aguikit", "demo")] == session.runs
