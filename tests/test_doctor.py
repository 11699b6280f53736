"""
``aguikit doctor`` against a real nginx (started per test on a loopback port, its own
prefix and configuration) in front of an aguikit server: each configuration people get
wrong is named with its fix, and the README's configuration is clean.

The agent stamps each event (``timestamp``) and spaces them 0.2 s apart, so buffering is
judged from when the agent produced what arrived together, not from guesses about timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.nginx_server import RECOMMENDED, nginx
from tests.servers import Route, serve, serve_asgi

from aguikit.checker import CheckConfig
from aguikit.doctor import diagnose
from aguikit.models import RunAgentInput
from aguikit.server import RunWriter, create_app

pytest.importorskip("uvicorn")

README = Path(__file__).resolve().parent.parent / "README.md"


def _stamp() -> int:
    return int(time.time() * 1000)


def _agent(pause: float = 0.0) -> Any:
    """Ten deltas 0.2 s apart; with ``pause``, that long a silence after the third."""

    async def handler(run_input: RunAgentInput, run: RunWriter) -> None:
        start = {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}
        await run.emit({**start, "timestamp": _stamp()})
        for n in range(10):
            await asyncio.sleep(pause if pause and n == 3 else 0.2)
            delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"{n} "}
            await run.emit({**delta, "timestamp": _stamp()})
        await run.emit({"type": "TEXT_MESSAGE_END", "messageId": "m1", "timestamp": _stamp()})

    return create_app(handler, event_log=None)


def _rules(diagnosis: Any) -> list[str]:
    return [finding.rule for finding in diagnosis.findings]


BUFFERING = """
proxy_buffering on;
proxy_ignore_headers X-Accel-Buffering;
proxy_buffer_size 1k;
proxy_buffers 4 1k;
"""
"""proxy_buffering on with small buffers; the agent's 'X-Accel-Buffering: no' (which
aguikit's server sends, and nginx would otherwise obey) ignored, as a shared
configuration often does."""


def test_doctor_names_buffering_behind_nginx_with_proxy_buffering_on() -> None:
    with serve_asgi(_agent()) as agent, nginx(agent, BUFFERING) as url:
        diagnosis = diagnose(url + "/")

    assert ["AGUI-N001"] == _rules(diagnosis), diagnosis.render()
    assert 1 == diagnosis.exit_code
    report = diagnosis.render()
    assert "proxy_buffering off;" in report and "X-Accel-Buffering: no" in report
    assert re.search(r"\d+ events arrived in one read although the agent produced them", report)


def test_doctor_reports_clean_with_the_readmes_configuration_through_the_command() -> None:
    """The README's location block, as the README prints it, and `aguikit doctor URL`."""
    assert RECOMMENDED.strip() in README.read_text("utf-8")
    with serve_asgi(_agent()) as agent, nginx(agent, RECOMMENDED) as url:
        done = subprocess.run(
            [sys.executable, "-m", "aguikit", "doctor", url + "/"],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert 0 == done.returncode, done.stdout + done.stderr
    assert "clean: the stream arrives as the agent sends it" in done.stdout
    assert "14 events" in done.stdout  # the run, the message and its ten deltas


def test_doctor_names_compression_on_the_stream() -> None:
    gzip = "proxy_buffering off;\ngzip on;\ngzip_types text/event-stream;\ngzip_min_length 1;"
    with serve_asgi(_agent()) as agent, nginx(agent, gzip) as url:
        diagnosis = diagnose(url + "/")

    assert "AGUI-N003" in _rules(diagnosis)
    assert "gzip off;" in diagnosis.render()


def test_doctor_names_an_idle_timeout_and_the_missing_keepalive() -> None:
    """nginx cuts an upstream silent longer than proxy_read_timeout (1 s here); the agent
    paused 2.5 s without a keep-alive comment."""
    idle = "proxy_buffering off;\nproxy_read_timeout 1s;"
    config = CheckConfig(silent_gap_seconds=0.5)
    with serve_asgi(_agent(pause=2.5)) as agent, nginx(agent, idle) as url:
        diagnosis = diagnose(url + "/", config)

    assert ["AGUI-T005", "AGUI-N002"] == _rules(diagnosis), diagnosis.render()
    assert "proxy_read_timeout" in diagnosis.render()
    assert diagnosis.events < 12


@contextlib.contextmanager
def _http10() -> Iterator[str]:
    """A server that answers over HTTP/1.0 (as a proxy left at proxy_http_version 1.0 to
    a client speaking 1.0 would): the body ends when the connection closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    body = (
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
    )

    def answer() -> None:
        with contextlib.suppress(OSError):
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body
                )

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        listener.close()
        thread.join(timeout=5)


def test_doctor_names_http_1_0_and_a_wrong_content_type() -> None:
    with _http10() as url:
        old = diagnose(url)
    with serve() as server:
        page = server.add("/", Route([b"<html>log in</html>"], content_type="text/html"))
        html = diagnose(page)

    assert ["AGUI-N004"] == _rules(old), old.render()
    assert "proxy_http_version 1.1;" in old.render()
    assert ["AGUI-T003"] == _rules(html)


def test_an_unreachable_url_exits_2_with_the_reason() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aguikit", "doctor", "http://127.0.0.1:9/"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert 2 == done.returncode
    assert "ConnectError" in done.stdout
