"""
Every Python snippet in ``README.md`` runs as written, and the producer snippet is a whole
FastAPI server that serves a correct stream.

A newcomer copies the README first; a snippet that no longer runs teaches the wrong API.
The blocks are executed in order in one namespace (later snippets use names the first one
imported), the client snippet against the bundled example server started for real with
uvicorn on a free loopback port: the only change made to any snippet is that port, where
the README says ``8000``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import uvicorn
from tests.servers import serve_asgi
from tests.test_pytest_plugin import PLUGIN_ARGS

from aguikit.session import Session
from aguikit.transport.sse import iter_events

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXAMPLE_SERVER = ROOT / "examples" / "fastapi_server.py"
WEATHER_SERVER = ROOT / "examples" / "weather_todo_server.py"
"""The server a snippet naming ``weather_todo_server`` runs against (the ``Agent`` tour)."""
README_URL = "http://127.0.0.1:8000/agent"

pytest_plugins = ("pytester",)


def python_blocks() -> list[str]:
    """The fenced ``python`` blocks of the README, in order."""
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def example_server(path: Path = EXAMPLE_SERVER) -> Iterator[str]:
    """An example server (``examples/fastapi_server.py`` unless told) served by uvicorn in
    a thread; yields its agent URL."""
    spec = importlib.util.spec_from_file_location(f"readme_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(module.app, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the example server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/agent"
    finally:
        server.should_exit = True
        thread.join(10)


def test_the_readme_has_the_snippets_this_test_runs() -> None:
    """A README without Python snippets would make the next test vacuous."""
    assert len(python_blocks()) >= 4


def test_every_python_snippet_of_the_readme_runs_as_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Executed in order, in one namespace, the client one against a real example server."""
    namespace: dict[str, Any] = {"__name__": "readme"}
    with example_server() as url, example_server(WEATHER_SERVER) as weather:
        for number, block in enumerate(python_blocks(), 1):
            code = block.replace(README_URL, weather if "weather_todo_server" in block else url)
            try:
                exec(compile(code, f"README.md python block {number}", "exec"), namespace)
            except Exception as exc:  # pragma: no cover - the message is the point
                raise AssertionError(f"README python block {number} failed: {exc!r}") from exc

    out = capsys.readouterr().out
    assert "RUN_FINISHED" in out  # the client snippet streamed a whole run
    assert "arguments so far: {'city': 'Oslo'}" in out  # the Agent tour's subscriber
    assert "Thanks, noted: confirmed." in out  # ... and its second turn
    assert "['get_weather']" in out  # ... and the capabilities the example declares


def _server_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (server,) = [block for block in blocks if "FastAPI()" in block]
    return server


def test_the_readme_fastapi_server_runs_as_written() -> None:
    module = ModuleType("readme_server")
    exec(compile(_server_snippet(), str(README), "exec"), module.__dict__)

    with serve_asgi(module.app) as url:
        response = httpx.post(url + "/agent", json={"threadId": "t", "runId": "r", "messages": []})
    session = Session()
    session.feed_all(iter_events([response.content]))
    session.finish()

    assert 200 == response.status_code
    assert "Hello from aguikit." == session.messages[0].content
    assert '{"time":"12:00"}' == session.messages[2].content
    assert "Short and friendly." == session.messages[3].content
    assert {"greeted": True} == session.state


def test_the_readme_pytest_file_runs_as_written(pytester: pytest.Pytester) -> None:
    """The "Test your AG-UI server" file, as a user saves it: it records its golden trace
    with --agui-update-traces, then passes against it."""
    (block,) = [b for b in python_blocks() if b.startswith("# test_agent.py")]
    # Named apart from tests/test_agent.py: pytester runs in this process, one module table.
    pytester.makepyfile(test_readme_agui_agent=block)

    pytester.runpytest(*PLUGIN_ARGS, "--agui-update-traces").assert_outcomes(passed=4)
    result = pytester.runpytest(*PLUGIN_ARGS)

    result.assert_outcomes(passed=4)
    assert (pytester.path / "agui_traces" / "weather.jsonl").exists()


def _sh_block(first: str) -> list[str]:
    """The README's ``sh`` block starting with ``first``, one command a line, comments
    dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    (block,) = [b for b in blocks if b.startswith(first)]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def _command_block() -> list[str]:
    """The README's block of ``aguikit`` commands."""
    return _sh_block("aguikit ")


def test_every_command_of_the_readme_runs_as_written(tmp_path: Path) -> None:
    """In a directory holding the ``stream.sse`` and ``stream.jsonl`` the commands name
    (the bundled demo run, in both framings), each command exits 0."""
    import os
    import subprocess
    import sys
    from importlib import resources

    from aguikit.transport.jsonl import encode_line

    demo = resources.files("aguikit").joinpath("examples/demo.sse").read_bytes()
    (tmp_path / "stream.sse").write_bytes(demo)
    (tmp_path / "stream.jsonl").write_text(
        "".join(encode_line(event) for event in iter_events([demo])), encoding="utf-8"
    )
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    commands = _command_block()

    assert len(commands) >= 5
    for command in commands:
        done = subprocess.run(
            command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert 0 == done.returncode, f"{command}: {done.stdout}{done.stderr}"
    assert (tmp_path / "stream.pb").stat().st_size > 0  # convert wrote what it said


def test_the_readme_build_block_builds_and_installs_the_compiled_wheel_as_written(
    tmp_path: Path,
) -> None:
    """
    The "Install" section's build commands, run as written in a copy of this checkout's
    tracked files with a fresh virtual environment first on ``PATH`` (a compile of about a
    minute and a half); the README's own "which build" snippet, run by that environment's
    Python, then names the compiled build.
    """
    import os
    import shutil
    import subprocess
    import sys

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    checkout = tmp_path / "aguikit"
    for name in filter(None, listed.stdout.decode("utf-8").split("\0")):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is gone
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    commands = _sh_block("pip install build")

    assert any("HATCH_BUILD_HOOKS_ENABLE=1" in command for command in commands)
    for command in commands:
        done = subprocess.run(
            command, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=900
        )
        assert 0 == done.returncode, f"{command}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    (snippet,) = [block for block in python_blocks() if "EXTENSION_SUFFIXES" in block]
    shown = subprocess.run(
        [str(bin_dir / "python"), "-c", snippet],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert "aguikit build: compiled (mypyc)\n" == shown.stdout, shown.stderr
