"""
The README's producer snippet is a complete FastAPI server that runs as written: it is
extracted, executed as a module, served by uvicorn and read by a receiver.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from tests.servers import serve_asgi

from aguikit.session import Session
from aguikit.transport.sse import iter_events

README = Path(__file__).resolve().parent.parent / "README.md"


def _server_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (server,) = [block for block in blocks if "FastAPI()" in block]
    return server


def test_the_readme_fastapi_server_runs_as_written() -> None:
    pytest.importorskip("fastapi")
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
