"""
Every Python snippet in ``README.md`` runs alone, as written, in a fresh interpreter; the
producer snippet is a whole FastAPI server that serves a correct stream; the commands of
the Install section install aguikit from a checkout.

A newcomer copies one snippet, not the README: a snippet that leans on a name an earlier
one imported, or that only works once, teaches the wrong API.  So each block is a script
of its own, run by a new ``python``; a client snippet runs twice against a real server
(uvicorn on a free loopback port: the only change made to any snippet is that port, where
the README says ``8000``), which must see a new ``runId`` each time; a server snippet is
started as ``python server.py`` would start it, and answers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from tests.servers import serve_asgi
from tests.test_pytest_plugin import PLUGIN_ARGS
from tests.tree_digest import tracked_files, tree_digest

from aguikit.session import Session
from aguikit.transport.asgi import ASGIApp
from aguikit.transport.sse import iter_events

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
WEATHER_SERVER = ROOT / "examples" / "weather_todo_server.py"
"""The server a snippet naming ``weather_todo_server`` runs against (the ``Agent`` tour);
any other client snippet runs against the README's own server ("Serve an agent")."""
README_URL = "http://127.0.0.1:8000/agent"

pytest_plugins = ("pytester",)


def python_blocks() -> list[str]:
    """The fenced ``python`` blocks of the README, in order."""
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def _block_ids() -> list[str]:
    """``N-section``: each block's number and the heading it sits under."""
    text = README.read_text(encoding="utf-8")
    ids = []
    for number, match in enumerate(re.finditer(r"```python\n", text), 1):
        headings = re.findall(r"^#{2,3} (.+)$", text[: match.start()], re.MULTILINE)
        section = re.sub(r"\W+", "-", headings[-1].lower()).strip("-") if headings else "top"
        ids.append(f"{number}-{section}")
    return ids


EXPECTED: dict[str, list[str]] = {
    "client.run(run_input)": ["RUN_FINISHED"],  # "Talk to an agent" streamed a whole run
    "weather_todo_server": [
        "arguments so far: {'city': 'Os'}",  # parsed while they stream...
        "arguments so far: {'city': 'Oslo'}",
        "Thanks, noted: confirmed.",  # ... the second turn
        "['get_weather']",  # ... and the capabilities the example declares
    ],
    # the client's spans of a run of the README's server, traced by the three lines
    "AguikitInstrumentor": ["['execute_tool get_time', 'invoke_agent', 'invoke_agent critic']"],
    "ScriptedAgent": [
        "- exchange 2 request: AGUI-R003 at /resume:",  # the thread rule fails the turn
        "3 exchanges",
    ],
    # the reloaded page holds the thread and the background run it attached to, whole
    "reloaded.connect()": [
        "['Hello', 'You said: Hello ', 'Tell me more', 'You said: Tell me more ']"
    ],
}
"""What a snippet holding the key prints, beyond running without an error."""


class RunIds:
    """An ASGI app that passes every request on to ``app``, noting each POST's ``runId``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[Any] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        messages, body = [], b""
        while not messages or messages[-1].get("more_body"):
            messages.append(await receive())
            body += messages[-1].get("body", b"")
        self.seen.append(json.loads(body).get("runId"))
        queued = iter(messages)

        async def replay() -> Any:
            return next(queued, None) or await receive()

        return await self.app(scope, replay, send)


def _module(path: Path | None = None, code: str | None = None, name: str = "readme") -> Any:
    """A module executed from ``path`` or ``code``, not as ``__main__``."""
    if code is not None:
        module = ModuleType(name)
        exec(compile(code, f"{README} ({name})", "exec"), module.__dict__)
        return module
    assert path is not None
    spec = importlib.util.spec_from_file_location(f"readme_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, tuple[str, RunIds]]]:
    """The README's own server and the weather example, each behind a :class:`RunIds`, on
    uvicorn: their agent URLs."""
    readme = RunIds(_module(code=_server_snippet(), name="readme_server").app)
    weather = RunIds(_module(WEATHER_SERVER).app)
    with serve_asgi(readme) as readme_url, serve_asgi(weather) as weather_url:
        yield {
            "readme": (f"{readme_url}/agent", readme),
            "weather": (f"{weather_url}/agent", weather),
        }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _fresh_env() -> dict[str, str]:
    """This environment's ``python`` with nothing of the test run's: no ``PYTHONPATH``."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _run_server_script(script: Path, code: str) -> None:
    """``python script`` for a snippet that serves (``uvicorn.run``): it must come up on the
    port it names and answer; a snippet serving ``/agent`` must stream a correct run."""
    port = _free_port()
    script.write_text(code.replace("port=8000", f"port={port}"), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=script.parent,
        env=_fresh_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0].decode()
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the server never listened"
            time.sleep(0.1)
        if '"/agent"' in code:
            body = {"threadId": "t", "runId": "r", "messages": []}
            response = httpx.post(f"http://127.0.0.1:{port}/agent", json=body, timeout=30)
            session = Session()
            session.feed_all(iter_events([response.content]))
            session.finish()
            assert 200 == response.status_code
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_the_readme_has_the_snippets_this_test_runs() -> None:
    """A README without Python snippets would make the next test vacuous."""
    assert len(python_blocks()) >= 4


@pytest.mark.parametrize("block", python_blocks(), ids=_block_ids())
def test_each_python_snippet_runs_alone_in_a_fresh_interpreter(
    block: str, tmp_path: Path, servers: dict[str, tuple[str, RunIds]]
) -> None:
    """
    The block alone, saved as a file and run by a new ``python`` in an empty directory; a
    client block twice, against a server that must see a fresh ``runId`` every time.
    """
    script = tmp_path / "snippet.py"
    if "uvicorn.run(" in block:
        _run_server_script(script, block)
        return
    name = "weather" if "weather_todo_server" in block else "readme"
    url, run_ids = servers[name]
    client = README_URL in block
    script.write_text(block.replace(README_URL, url), encoding="utf-8")
    before = len(run_ids.seen)

    outputs = []
    for _ in range(2 if client else 1):
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=_fresh_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert 0 == done.returncode, f"{done.stdout[-2000:]}{done.stderr[-3000:]}"
        outputs.append(done.stdout)

    minted = run_ids.seen[before:]
    if client:
        assert len(minted) >= 2 and len(set(minted)) == len(minted), minted
    for key, fragments in EXPECTED.items():
        if key in block:
            for out in outputs:
                assert [f for f in fragments if f not in out] == []


def _server_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (server,) = [block for block in blocks if "FastAPI()" in block]
    return server


def test_the_readme_fastapi_server_runs_as_written() -> None:
    module = _module(code=_server_snippet(), name="readme_server")

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


def _demo_har(demo: bytes) -> str:
    """The demo run as the one exchange of a HAR file, the request that asked for it."""
    request = {
        "threadId": "thread-trip-42",
        "runId": "run-1",
        "messages": [],
        "state": {},
        "protocolVersion": "1.0",
    }
    entry = {
        "startedDateTime": "2025-01-01T10:00:00.000Z",
        "time": 1.0,
        "request": {
            "method": "POST",
            "url": "http://127.0.0.1:8000/agent",
            "httpVersion": "HTTP/1.1",
            "headers": [],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": -1,
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [],
            "cookies": [],
            "content": {
                "size": len(demo),
                "mimeType": "text/event-stream",
                "text": demo.decode("utf-8"),
            },
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": {"send": 0, "wait": 0, "receive": 1},
    }
    return json.dumps({"log": {"version": "1.2", "creator": {"name": "test"}, "entries": [entry]}})


def test_every_command_of_the_readme_runs_as_written(tmp_path: Path) -> None:
    """In a directory holding the ``stream.sse`` and ``stream.jsonl`` the commands name
    (the bundled demo run, in both framings), and ``conversation.har`` (the demo as one
    exchange of a HAR file), each command exits 0."""
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
    (tmp_path / "conversation.har").write_text(_demo_har(demo), encoding="utf-8")
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


@pytest.mark.build_independent
def test_the_readme_install_and_build_blocks_install_aguikit_from_a_checkout_as_written(
    tmp_path: Path,
) -> None:
    """
    The "Install" section's commands, run as written with a fresh virtual environment
    first on ``PATH``, in a copy of this checkout's tracked files named as the clone would
    be (the ``git clone`` line itself is the one not run: it must clone the repository
    ``[project.urls]`` names).  The build block first (a compile of about a minute and a
    half), after which the README's "which build" snippet names the compiled build; then
    the checkout install, which reinstalls the pure build with the ``[server]`` extra: the
    ``aguikit`` command runs, ``aguikit.server`` imports, and the snippet says so.
    """
    import shutil
    import tomllib

    commands = _sh_block("pip install build")
    clone, *install = _sh_block("git clone ")
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["urls"]
    assert any("HATCH_BUILD_HOOKS_ENABLE=1" in command for command in commands)
    assert f"git clone {urls['Repository']}" == clone
    assert "cd aguikit" == install[0]
    checkout = tmp_path / "aguikit"
    digest = tree_digest(ROOT)
    for name in tracked_files(ROOT):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, checkout / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = _fresh_env()
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    (which,) = [block for block in python_blocks() if "EXTENSION_SUFFIXES" in block]

    def run_block(commands: list[str], cwd: Path) -> None:
        for command in commands:
            done = subprocess.run(
                command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=900
            )
            assert 0 == done.returncode, f"{command}: {done.stdout[-2000:]}{done.stderr[-2000:]}"

    def build() -> str:
        shown = subprocess.run(
            [str(bin_dir / "python"), "-c", which],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        return shown.stdout + shown.stderr

    run_block(commands, checkout)
    assert "aguikit build: compiled (mypyc)\n" == build()
    cache = os.environ.get("AGUIKIT_WHEEL_CACHE")
    if cache and digest == tree_digest(ROOT):  # tests_compiled installs this very wheel
        (wheel,) = (checkout / "dist").glob("aguikit-*-cp3*-*.whl")
        shutil.rmtree(cache, ignore_errors=True)  # only the wheel of the tree as it is now
        kept = Path(cache) / digest
        kept.mkdir(parents=True)
        shutil.copy2(wheel, kept / wheel.name)

    run_block([" && ".join(install)], tmp_path)  # one shell, as a user types them
    assert "aguikit build: pure Python\n" == build()
    version = subprocess.run(["aguikit", "--version"], env=env, capture_output=True, text=True)
    assert version.stdout.startswith("aguikit "), version.stderr
    server = [str(bin_dir / "python"), "-c", "import aguikit.server, starlette"]
    assert 0 == subprocess.run(server, cwd=tmp_path, env=env).returncode


def test_the_readme_proxy_block_records_the_example_agent_and_checks_the_recording(
    tmp_path: Path,
) -> None:
    """
    The README's "Between a UI and an agent", as written: the example agent and the proxy
    started by the block's commands (ports swapped for free ones), the official client as the UI
    (one turn and the frontend tool's answer, thread ``t1``), SIGTERM as Ctrl-C's
    stand-in, then the block's ``aguikit check`` on the recording: exit 0, both runs.
    """
    import signal
    import subprocess

    from tests.node_client import run_http_agent
    from tests.servers import free_port, wait_listening
    from tests.test_server_integration import QUESTION

    commands = [c for c in _sh_block("uvicorn --app-dir examples") if not c.startswith("#")]
    start_agent, start_proxy, check = commands
    agent_port, proxy_port = free_port(), free_port()
    env = {
        **_fresh_env(),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
    }

    def launch(command: str) -> subprocess.Popen[str]:
        command = command.removesuffix("&").strip()
        command = command.replace("8000", str(agent_port)).replace("8080", str(proxy_port))
        return subprocess.Popen(
            command.split(),
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    (tmp_path / "examples").symlink_to(ROOT / "examples")
    agent = launch(start_agent)
    proxy = launch(start_proxy)
    try:
        wait_listening(agent_port, agent, "the example agent")
        wait_listening(proxy_port, proxy, "aguikit proxy")
        outcome = run_http_agent(
            f"http://127.0.0.1:{proxy_port}/", {**QUESTION, "answerFrontendTool": "confirmed"}
        )
    finally:
        proxy.send_signal(signal.SIGTERM)
        printed, _ = proxy.communicate(timeout=30)
        agent.terminate()
        agent.communicate(timeout=30)

    assert [{"result": None}, {"result": None}] == outcome["runs"]
    assert "aguikit proxy: 2 exchanges" in printed, printed
    done = subprocess.run(check.split(), cwd=tmp_path, env=env, capture_output=True, text=True)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "recordings/t1.har" in done.stdout


def test_the_readme_thread_agent_reload_attaches_to_a_background_run_in_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's TypeScript page reload, as written (``threadId`` and the URL given), in
    Node with ``@ag-ui/client`` 1.0.0 and ``tests/node/thread_agent.mjs``: started while a
    background run answers, it prints the run's whole answer."""
    from tests.node_client import NODE_DIR, require_node
    from tests.test_threads_http import PAUSE, WORDS, _answering, _background_app, _until, _user

    from aguikit import Agent

    shown = re.search(r"```js\n(import \{ ThreadAgent.*?)```", README.read_text("utf-8"), re.S)
    assert shown is not None
    monkeypatch.setitem(PAUSE, "seconds", 0.2)  # six seconds of run: Node starts inside it
    app, store = _background_app()
    with serve_asgi(app) as base:
        url = base + "/agent"
        code = 'const threadId = "t1";\n' + shown.group(1).replace("https://example.com/agent", url)

        async def scenario() -> str:
            page = Agent(url, thread_id="t1")
            page.add_message(_user("u1", "go"))
            running = asyncio.ensure_future(page.run())
            await _until(lambda: _answering(page, 2))
            assert store._threads["t1"][0].running is not None
            done = await asyncio.to_thread(
                subprocess.run,
                [require_node(), "--input-type=module", "-e", code],
                cwd=NODE_DIR,
                capture_output=True,
                text=True,
                timeout=120,
            )
            await running
            assert 0 == done.returncode, done.stderr[-3000:]
            return done.stdout

        out = asyncio.run(scenario())
    assert "".join(f"w{index} " for index in range(WORDS)) == out.strip() + " "
