"""
The official TypeScript client (``@ag-ui/client`` 1.0.0 ``HttpAgent``), run in Node, for
integration tests against a real server.

``tests/node/package.json`` pins it; the first use installs it into the gitignored
``tests/node/node_modules`` with ``npm ci`` (npm's cache outside the repository).  Without
``node`` the tests skip with that reason, except where ``AGUIKIT_REQUIRE_NODE`` is set
(CI sets it in ``.ci/run``), where a missing Node is a failure, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Final

import pytest

NODE_DIR: Final = Path(__file__).resolve().parent / "node"
CLIENT: Final = NODE_DIR / "node_modules" / "@ag-ui" / "client" / "package.json"


def require_node() -> str:
    """The ``node`` executable, with ``@ag-ui/client`` installed next to the script."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("AGUIKIT_REQUIRE_NODE"):
            pytest.fail("node and npm are required here (AGUIKIT_REQUIRE_NODE is set)")
        pytest.skip("node/npm not found: the official TypeScript client cannot run")
    if not CLIENT.exists():
        cache = Path(tempfile.gettempdir()) / "aguikit-npm-cache"
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--cache", str(cache)],
            cwd=NODE_DIR,
            check=True,
            capture_output=True,
            timeout=600,
        )
    installed = json.loads(CLIENT.read_text(encoding="utf-8"))["version"]
    assert "1.0.0" == installed
    return node


def run_http_agent(url: str, script: dict[str, Any], *, crash_ok: bool = False) -> dict[str, Any]:
    """
    Run ``HttpAgent`` against ``url`` (see ``tests/node/run_http_agent.mjs``).

    With ``crash_ok``, a Node process that dies (an error the client throws outside the
    run's promise, as on a cut connection) is an outcome, not a test failure:
    ``{"crashed": <the first line of its stderr>}``.
    """
    return run_node_script("run_http_agent.mjs", url, script, crash_ok=crash_ok)


def run_node_script(
    name: str, url: str, script: dict[str, Any], *, crash_ok: bool = False
) -> dict[str, Any]:
    """Run ``tests/node/<name>`` with ``url`` and ``script`` (JSON); the JSON of its last
    line of output (``crash_ok``: as for :func:`run_http_agent`)."""
    node = require_node()
    done = subprocess.run(
        [node, str(NODE_DIR / name), url, json.dumps(script)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=not crash_ok,
    )
    if done.returncode:
        return {"crashed": (done.stderr.strip().splitlines() or [""])[0]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
