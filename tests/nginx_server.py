"""
A real ``nginx`` (the Debian package's binary) in front of a test agent, on a free loopback
port, with its own temporary prefix and configuration.

``aguikit doctor`` is about what a real proxy does to a stream; a simulated one would only
show what its author believed.  Without nginx the tests skip with that reason, except
where ``AGUIKIT_REQUIRE_NGINX`` is set (CI sets it in ``.ci/run``, which installs nginx),
where a missing nginx is a failure, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from tests.servers import free_port, wait_listening

RECOMMENDED: Final = """
proxy_http_version 1.1;
proxy_set_header Connection "";
proxy_buffering off;
proxy_cache off;
gzip off;
proxy_read_timeout 3600s;
"""
"""The README's configuration for an AG-UI location (kept equal to it by test_doctor)."""

_CONFIG: Final = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass {upstream};
{location}
        }}
    }}
}}
"""


def _binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        if os.environ.get("AGUIKIT_REQUIRE_NGINX"):
            pytest.fail("nginx is required here (AGUIKIT_REQUIRE_NGINX is set)")
        pytest.skip("nginx not found: aguikit doctor cannot be proved against it")
    return found


@contextlib.contextmanager
def nginx(upstream: str, location: str) -> Iterator[str]:
    """nginx proxying ``/`` to ``upstream`` with ``location``'s directives; yields its URL."""
    binary = _binary()
    port = free_port()
    with tempfile.TemporaryDirectory() as prefix:
        config = Path(prefix) / "nginx.conf"
        config.write_text(
            _CONFIG.format(prefix=prefix, port=port, upstream=upstream, location=location)
        )
        process = subprocess.Popen(
            [binary, "-p", prefix, "-c", str(config), "-e", f"{prefix}/error.log"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_listening(port, process, "nginx", timeout=10)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
