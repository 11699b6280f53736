"""
The request side of ``aguikit.server.agui_endpoint``, against a real uvicorn on loopback:
what a client may send, what every refusal looks like (an RFC 9457 problem document, a
4xx, never a 500, the handler never run), the body size limit, the ``authorize`` hook on
a start, and which handlers an endpoint accepts when it is built.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from tests.servers import serve_asgi

from aguikit.models import RunAgentInput
from aguikit.server import Access, Denied, RunWriter, agui_endpoint, create_app
from aguikit.transport.sse import iter_events

BODY = {"threadId": "t1", "runId": "r1", "messages": []}
JSON = "application/json"


class Recording:
    """A handler that says one word and keeps each writer it was given."""

    def __init__(self) -> None:
        self.runs: list[RunWriter] = []

    async def __call__(self, run_input: RunAgentInput, run: RunWriter) -> None:
        self.runs.append(run)
        await run.say("hi")


def post(url: str, content: bytes, content_type: str | None = JSON, **headers: str) -> Any:
    if content_type is not None:
        headers["Content-Type"] = content_type
    return httpx.post(url, content=content, headers=headers, timeout=30)


def body_with(**members: Any) -> bytes:
    return json.dumps({**BODY, **members}).encode()


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """An RFC 9457 document: its media type and its four members, the status matching."""
    assert status == response.status_code, response.text
    assert "application/problem+json" == response.headers["content-type"]
    document: dict[str, Any] = response.json()
    assert "about:blank" == document["type"]
    assert status == document["status"]
    assert isinstance(document["title"], str) and document["title"]
    assert isinstance(document["detail"], str) and document["detail"]
    return document


HOSTILE: dict[str, tuple[bytes, str | None, int, str | None]] = {
    # name: (body, Content-Type, status, the pointer of the one issue a 422 lists)
    "a form post (a cross-origin form can send it)": (b"threadId=t1&runId=r1", None, 415, None),
    "text/plain (a CORS simple request, no preflight)": (body_with(), "text/plain", 415, None),
    "multipart": (body_with(), "multipart/form-data; boundary=x", 415, None),
    "no Content-Type at all": (body_with(), None, 415, None),
    "JSON declared UTF-16": (body_with(), "application/json; charset=utf-16", 415, None),
    "not JSON": (b"{not json", JSON, 400, None),
    "UTF-16 bytes": (json.dumps(BODY).encode("utf-16"), JSON, 400, None),
    "Latin-1 bytes": ('{"threadId": "caf\xe9", "runId": "r"}'.encode("latin-1"), JSON, 400, None),
    "a byte order mark": (b"\xef\xbb\xbf" + body_with(), JSON, 400, None),
    "nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, JSON, 400, None),
    "an integer of 5,000 digits": (
        b'{"threadId": "t", "state": ' + b"9" * 5000 + b"}",
        JSON,
        400,
        None,
    ),
    "NaN": (b'{"threadId": "t", "runId": "r", "messages": [], "state": NaN}', JSON, 400, None),
    "an array": (b"[]", JSON, 422, ""),
    "a string": (b'"run"', JSON, 422, ""),
    "null": (b"null", JSON, 422, ""),
    "a lone surrogate in runId": (body_with(runId="\ud800"), JSON, 422, "/runId"),
    "a lone surrogate in threadId": (body_with(threadId="x\udfff"), JSON, 422, "/threadId"),
    "a lone surrogate in a message": (
        body_with(messages=[{"id": "u1", "role": "user", "content": "\udc00"}]),
        JSON,
        422,
        "/messages/0/content",
    ),
    "a lone surrogate as a member name": (body_with(state={"\ud83d": 1}), JSON, 422, "/state"),
    "a wrong type": (body_with(runId=5), JSON, 422, "/runId"),
}


@pytest.fixture(scope="module")
def server() -> Any:
    handler = Recording()
    with serve_asgi(create_app(handler)) as url:
        yield url + "/", handler


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_request_gets_a_4xx_problem_document_and_no_run(case: str, server: Any) -> None:
    """Each refusal is an RFC 9457 problem document with its status, never a 500; the
    handler never runs; a 422 points at what is wrong."""
    url, handler = server
    content, content_type, status, pointer = HOSTILE[case]
    before = len(handler.runs)

    document = assert_problem(post(url, content, content_type), status)

    assert before == len(handler.runs)
    if pointer is not None:
        assert [pointer] == [issue["pointer"] for issue in document["issues"]]


def test_the_server_keeps_serving_after_every_hostile_request(server: Any) -> None:
    """And the run ids refused requests named were never claimed."""
    url, _ = server
    for content, content_type, _, _ in HOSTILE.values():
        post(url, content, content_type)

    response = post(url, body_with(runId="r1"))

    assert 200 == response.status_code
    assert "RUN_FINISHED" == list(iter_events([response.content]))[-1]["type"]


def test_a_compressed_body_is_415_naming_the_codings_accepted() -> None:
    """RFC 9110: an unsupported content coding is 415 with ``Accept-Encoding``."""
    import gzip

    with serve_asgi(create_app(Recording())) as url:
        response = post(url + "/", gzip.compress(body_with()), **{"Content-Encoding": "gzip"})

    assert_problem(response, 415)
    assert "identity" == response.headers["accept-encoding"]


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON", "application/ld+json"]
)
def test_every_json_content_type_starts_a_run(content_type: str) -> None:
    """``application/json`` with or without its charset, in any case, and the structured
    ``+json`` types (RFC 6839)."""
    with serve_asgi(create_app(Recording(), event_log=None)) as url:
        response = post(url + "/", body_with(), content_type)

    assert 200 == response.status_code


def test_a_problem_document_escapes_what_utf8_cannot_carry() -> None:
    """A refusal quoting the request (here the Content-Encoding's 415) is ASCII JSON."""
    with serve_asgi(create_app(Recording())) as url:
        response = httpx.post(
            url + "/",
            content=body_with(),
            headers={"Content-Type": JSON, "Content-Encoding": b"x-\xe9"},
        )

    assert "x-\\u00e9" in response.text
    assert_problem(response, 415)


def test_a_body_over_the_limit_is_413_whether_it_declares_its_length_or_not() -> None:
    """Declared over the limit (``Content-Length``) or sent chunked: 413 at the limit."""
    with serve_asgi(create_app(Recording(), max_body_bytes=1000)) as url:
        declared = post(url + "/", b" " * 1001)
        chunked = httpx.post(
            url + "/",
            content=iter([b" " * 600, b" " * 600]),
            headers={"Content-Type": JSON},
        )
        at_limit = post(url + "/", body_with().ljust(1000))

    assert 1000 == assert_problem(declared, 413)["maxBodyBytes"]
    assert_problem(chunked, 413)
    assert 200 == at_limit.status_code


def test_a_declared_oversize_body_is_refused_before_a_byte_of_it_is_sent() -> None:
    """A Content-Length over the limit is answered at once: the client never sends it."""
    with serve_asgi(create_app(Recording(), max_body_bytes=1000)) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"POST / HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000000000\r\n\r\n"
            )
            head = sock.recv(4096)

    assert head.startswith(b"HTTP/1.1 413 ")
    assert b"application/problem+json" in head


def test_the_body_is_read_incrementally_and_reading_stops_at_the_limit() -> None:
    """An ASGI client sending 100 MB in 64 KB pieces without a length: the endpoint asks
    for pieces only until the limit is passed, so the rest is never held."""
    endpoint = agui_endpoint(Recording(), max_body_bytes=1024 * 1024)
    piece = b" " * 65536
    asked = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return {"type": "http.request", "body": piece, "more_body": asked < 1600}

    async def main() -> Any:
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/",
            "headers": [(b"content-type", b"application/json")],
        }
        return await endpoint(Request(scope, receive))

    response = asyncio.run(main())

    assert 413 == response.status_code
    assert 17 == asked  # 16 pieces are the limit; the 17th passes it


def test_a_large_body_is_checked_off_the_event_loop_and_a_small_one_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past 64 KiB, reading, checking and explaining a body run in the one checking thread,
    so the streams on the loop go on meanwhile (``bench/bench_request.py`` measures the
    gaps); a small body costs less than the hand-over."""
    import threading

    from aguikit.server import http

    threads: list[str] = []
    decode = http._decode

    def noting(body: bytes) -> Any:
        threads.append(threading.current_thread().name)
        return decode(body)

    monkeypatch.setattr(http, "_decode", noting)
    large = body_with(messages=[{"id": n, "role": "user", "content": n} for n in range(10_000)])
    with serve_asgi(create_app(Recording())) as url:
        refused = post(url + "/", large)
        started = post(url + "/", body_with())

    assert len(large) > 64 * 1024
    assert 101 == len(assert_problem(refused, 422)["issues"])
    assert 200 == started.status_code
    assert threads[0].startswith("aguikit-request")
    assert not threads[1].startswith("aguikit-request")


# -- authorize on a start ------------------------------------------------------------------


def bearer(request: Request, access: Access) -> str:
    """Tokens ``alice`` and ``bob`` are users; anything else is refused."""
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    if not token:
        raise Denied(401, "a bearer token is required", www_authenticate='Bearer realm="agent"')
    if token not in ("alice", "bob"):
        raise Denied(403, "this token may not start runs")
    return token


def test_authorize_names_the_principal_the_handler_sees_and_is_given_the_start() -> None:
    """The hook (sync or async) gets the request and an Access for the start; the
    principal it returns is the writer's."""
    seen: list[Access] = []

    async def hook(request: Request, access: Access) -> str:
        seen.append(access)
        return bearer(request, access)

    handler = Recording()
    with serve_asgi(create_app(handler, authorize=hook)) as url:
        response = post(url + "/", body_with(state={"n": 1}), Authorization="Bearer alice")

    assert 200 == response.status_code
    assert ["alice"] == [run.principal for run in handler.runs]
    assert [Access("start", "t1", "r1", {**BODY, "state": {"n": 1}})] == seen


def test_a_refused_start_is_a_problem_document_with_its_challenge_and_claims_nothing() -> None:
    """401 with the hook's WWW-Authenticate, 403; the handler never runs, and the run id
    is still free for its owner."""
    handler = Recording()
    with serve_asgi(create_app(handler, authorize=bearer)) as url:
        anonymous = post(url + "/", body_with())
        foreign = post(url + "/", body_with(), Authorization="Bearer mallory")
        owner = post(url + "/", body_with(), Authorization="Bearer bob")

    assert "a bearer token is required" == assert_problem(anonymous, 401)["detail"]
    assert 'Bearer realm="agent"' == anonymous.headers["www-authenticate"]
    assert "this token may not start runs" == assert_problem(foreign, 403)["detail"]
    assert 200 == owner.status_code
    assert ["bob"] == [run.principal for run in handler.runs]


def test_a_failing_hook_is_503_with_its_text_in_the_log_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An identity provider that is down is a dependency failure, not a 500."""

    def hook(request: Request, access: Access) -> str:
        raise ConnectionError("idp.internal:8443 refused, client_secret=s3cr3t")

    with (
        caplog.at_level(logging.ERROR, logger="aguikit.server"),
        serve_asgi(create_app(Recording(), authorize=hook)) as url,
    ):
        response = post(url + "/", body_with())

    assert "s3cr3t" not in response.text
    assert_problem(response, 503)
    assert any("s3cr3t" in str(r.exc_info) for r in caplog.records if r.exc_info)


def test_without_a_hook_every_run_is_anonymous() -> None:
    handler = Recording()
    with serve_asgi(create_app(handler)) as url:
        post(url + "/", body_with())

    assert [None] == [run.principal for run in handler.runs]


# -- the handler an endpoint accepts ---------------------------------------------------------


async def coroutine_handler(run_input: RunAgentInput, run: RunWriter) -> None:
    await run.say("hi")


async def generator_handler(run_input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
    yield {"type": "CUSTOM", "name": "n", "value": 1}


class Agent:
    async def run(self, run_input: RunAgentInput, run: RunWriter) -> None:
        await run.say("hi")

    async def events(self, run_input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
        yield {"type": "CUSTOM", "name": "n", "value": 1}


ACCEPTED = {
    "a coroutine function": coroutine_handler,
    "an async generator function": generator_handler,
    "a bound async method": Agent().run,
    "a bound async generator method": Agent().events,
    "an object with an async __call__": Recording(),
    "a partial of a coroutine function": functools.partial(coroutine_handler),
    "a partial of an async generator function": functools.partial(generator_handler),
}


@pytest.mark.parametrize("name", ACCEPTED)
def test_an_endpoint_accepts_a_coroutine_or_an_async_generator_however_wrapped(name: str) -> None:
    """Each serves a run that ends with RUN_FINISHED."""
    with serve_asgi(create_app(ACCEPTED[name], event_log=None)) as url:
        response = post(url + "/", body_with())

    assert "RUN_FINISHED" == list(iter_events([response.content]))[-1]["type"]


def sync_handler(run_input: RunAgentInput, run: RunWriter) -> None:
    pass


class SyncCall:
    def __call__(self, run_input: RunAgentInput, run: RunWriter) -> None:
        pass


async def one_argument(run_input: RunAgentInput) -> None:
    pass


async def three_arguments(a: Any, b: Any, c: Any) -> AsyncIterator[Any]:
    yield a


REFUSED = {
    "a synchronous function": (sync_handler, "sync_handler is a synchronous function"),
    "a lambda": (lambda run_input, run: None, "is a synchronous function: make it `async def`"),
    "an object with a synchronous __call__": (SyncCall(), "SyncCall is a synchronous function"),
    "a class": (Recording, "not a coroutine function or an async generator function"),
    "a partial of a synchronous function": (functools.partial(sync_handler), "synchronous"),
    "a coroutine function taking one argument": (one_argument, "does not take (input, run)"),
    "an async generator taking three": (three_arguments, "takes neither (input) nor"),
    "not callable at all": ("agent", "'str', not a coroutine function"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_an_endpoint_refuses_when_built_what_would_fail_every_request(name: str) -> None:
    """A TypeError at build time, saying what to write."""
    handler, why = REFUSED[name]

    with pytest.raises(TypeError, match="a handler is `async def") as raised:
        agui_endpoint(handler)

    assert why in str(raised.value)
    assert "yield event" in str(raised.value)


# -- docs/authorize.md, as written -----------------------------------------------------------


def _authorize_example() -> Any:
    """The bearer-token server of ``docs/authorize.md``, executed as a module."""
    import re
    from pathlib import Path
    from types import ModuleType

    page = Path(__file__).resolve().parent.parent / "docs" / "authorize.md"
    (code,) = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    module = ModuleType("authorize_example")
    exec(compile(code, str(page), "exec"), module.__dict__)
    return module


def test_the_bearer_token_example_refuses_without_a_token_and_greets_its_user() -> None:
    """No token and an unknown one are 401 with the challenge; Alice's token starts a run
    whose handler knows her, also for the official client sending the header."""
    from tests.node_client import run_http_agent

    with serve_asgi(_authorize_example().app) as url:
        none = post(url + "/agent", body_with())
        unknown = post(url + "/agent", body_with(), Authorization="Bearer guess")
        alice = post(url + "/agent", body_with(), Authorization="Bearer token-of-alice")
        official = run_http_agent(
            url + "/agent",
            {"threadId": "t1", "headers": {"Authorization": "Bearer token-of-bob"}},
        )

    assert_problem(none, 401)
    assert 'Bearer realm="agent"' == none.headers["www-authenticate"]
    assert_problem(unknown, 401)
    assert "invalid_token" in unknown.headers["www-authenticate"]
    deltas = [e.get("delta") for e in iter_events([alice.content])]
    assert "Hello, alice." in deltas
    assert [{"result": None}] == official["runs"]
    assert "Hello, bob." == official["messages"][-1]["content"]


# -- what the handler is given, and what the run declares ------------------------------------


class Keeping:
    """A handler that keeps the input it was given and says one word."""

    def __init__(self) -> None:
        self.inputs: list[RunAgentInput] = []

    async def __call__(self, run_input: RunAgentInput, run: RunWriter) -> None:
        self.inputs.append(run_input)
        await run.say("hi")


def served(body: bytes) -> tuple[Keeping, list[dict[str, Any]]]:
    """Serve one request on a real uvicorn: the handler and the events the client read."""
    keeping = Keeping()
    with serve_asgi(create_app(keeping)) as url:
        response = post(url + "/", body)
        assert 200 == response.status_code, response.text
        events = list(iter_events([response.content]))
    return keeping, events


def test_an_input_member_the_server_does_not_know_is_stripped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The processing page binds a producer receiving input as a consumer receiving events:
    "unrecognised material does not make the input invalid", and the producer "strips it
    with a warning and runs"; the handler never sees it."""
    caplog.set_level(logging.WARNING, logger="aguikit.server")
    messages = [{"id": "u1", "role": "user", "content": "hi", "mood": "curious"}]
    keeping, events = served(body_with(messages=messages, futureInput={"x": 1}))

    (run_input,) = keeping.inputs
    assert not run_input.extra_members
    assert not run_input.messages[0].extra_members
    assert "RUN_FINISHED" == events[-1]["type"]
    logged = [r.getMessage() for r in caplog.records if r.name == "aguikit.server"]
    assert 2 == len([line for line in logged if line.startswith("AGUI-W002 unknown-member")])
    assert any("'/messages/0/mood'" in line for line in logged)
    assert any("'/futureInput'" in line for line in logged)


def test_an_absent_tools_or_context_reaches_the_handler_as_the_empty_list_it_means() -> None:
    """ "A producer MUST treat a missing `tools` exactly as it would treat an empty one":
    the handler is given ``[]``, never ``None``, for either list."""
    keeping, _ = served(body_with())

    (run_input,) = keeping.inputs
    assert ([], []) == (run_input.tools, run_input.context)


@pytest.mark.parametrize(
    ("declared", "answered"),
    [("1.1", "1.1"), ("1.9", "1.1"), ("2.0", "1.1"), ("draft", "1.1"), ("1.0", "1.0")],
)
def test_the_run_declares_the_version_its_stream_speaks(declared: str, answered: str) -> None:
    """ "A producer declares the version *it* speaks on `RUN_STARTED.protocolVersion`: its
    own, never an echo of the input's"; written down for an older peer, the stream speaks
    the peer's version and says so."""
    _, events = served(body_with(protocolVersion=declared))

    assert answered == events[0]["protocolVersion"]


@pytest.mark.parametrize("declared", ["1.9", "draft"])
def test_a_newer_or_unreadable_input_version_is_served_with_a_warning(
    declared: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ "A producer meeting a newer minor of a line it implements MUST serve the run ...
    and SHOULD warn"; a declaration it cannot interpret "is handled like a newer one"."""
    caplog.set_level(logging.WARNING, logger="aguikit.server")
    _, events = served(body_with(protocolVersion=declared))

    assert "RUN_FINISHED" == events[-1]["type"]
    assert any(f"protocol {declared!r}" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("declared", [None, "0.0.57"])
def test_a_peer_that_predates_the_declaration_is_not_sent_one(declared: str | None) -> None:
    """A client declaring no version, or a pre-1.0 one, predates ``protocolVersion``: the
    writer already omits every member newer than it, and the declaration too."""
    body = body_with() if declared is None else body_with(protocolVersion=declared)
    _, events = served(body)

    assert "protocolVersion" not in events[0]
