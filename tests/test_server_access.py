"""
Nobody reads, joins or stops a run that is not theirs (issue 29, item 11; issue 24, the
cancel request across workers).

The run's owner (the starting request's ``threadId`` and the principal the ``authorize``
hook named) is kept with the run in its event log from the claim, so every worker sharing
the log checks a resume (``Last-Event-ID``), a join (``X-AGUI-Join``) and a cancel
(``X-AGUI-Cancel``) against it.  An unknown run, an expired one and another's get answers
equal byte for byte (status, headers, body), so run ids cannot be probed; a start whose
run id someone else took is not told to follow that run.  A cancel request landing on
another worker than the run's stops it through the log's cancel flag, within about a
second: tested with two uvicorn workers over one real ``redis-server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.redis_server import redis_server
from tests.resume_app import Endless
from tests.servers import serve_asgi, uvicorn_workers
from tests.test_server_stop import _Bearer

import aguikit
from aguikit.server import MemoryEventLog, create_app
from aguikit.server.eventlog import EventLog, Owner

ROOT = Path(__file__).resolve().parent.parent
BOUND = 2.0
"""Seconds from a cancel request on another worker to the handler's cancellation that
pass (the flag is looked at every 0.25 s; the machine is shared and loaded)."""


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def _body(run_id: str, thread_id: str = "t-own") -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "messages": []}


def _headers(user: str | None, **more: str) -> dict[str, str]:
    return {**({"Authorization": f"Bearer {user}"} if user else {}), **more}


def _answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """What a client can compare of an answer: status, headers but the date, body."""
    headers = sorted((k, v) for k, v in response.headers.items() if k.lower() != "date")
    return response.status_code, headers, response.content


@contextlib.contextmanager
def _started(url: str, body: dict[str, Any], user: str | None) -> Iterator[None]:
    """A run started by ``user``, read up to its first bytes, its connection held open."""
    with httpx.stream("POST", url, json=body, headers=_headers(user), timeout=30) as response:
        assert 200 == response.status_code
        chunks = response.iter_bytes()  # held: a dropped iterator closes the connection
        next(chunks)
        yield


def _asks(url: str, body: dict[str, Any], user: str | None) -> list[httpx.Response]:
    """A resume, a join with a prelude and a plain join of ``body``'s run, as ``user``."""
    return [
        httpx.post(url, json=body, headers=_headers(user, **{"Last-Event-ID": "0"})),
        httpx.post(
            url,
            json=body,
            headers=_headers(user, **{"Last-Event-ID": "0", "X-AGUI-Join": "prelude"}),
        ),
        httpx.post(url, json=body, headers=_headers(user, **{"Last-Event-ID": "1"})),
    ]


def test_unknown_foreign_and_expired_runs_get_the_same_answer_to_a_resume_or_a_join() -> None:
    """Asked before the run exists, while another principal's run or another thread's,
    and after it expired: the same 410, byte for byte; the owner follows it (200), and
    the hook is asked with ``resume`` and ``join``."""
    endless = Endless()
    bearer = _Bearer()
    log = MemoryEventLog(ttl=0.3)
    app = create_app(endless, path="/agent", event_log=log, authorize=bearer, resume_grace=0)
    body = _body("r-probe")
    with serve_asgi(app) as base:
        url = base + "/agent"
        unknown = _asks(url, body, "bob")
        with _started(url, body, "alice"):
            foreign = _asks(url, body, "bob")
            elsewhere = _asks(url, _body("r-probe", "t-other"), "alice")
            anonymous = _asks(url, body, None)
            with httpx.stream(
                "POST", url, json=body, headers=_headers("alice", **{"Last-Event-ID": "0"})
            ) as own:
                owner_status = own.status_code
            refused = httpx.post(
                url, json=body, headers=_headers("mallory", **{"Last-Event-ID": "0"})
            )
        assert endless.cancelled.wait(10)
        time.sleep(0.6)  # past the ttl: the run's log expired
        expired = _asks(url, body, "alice")

    reference = [_answer(r) for r in unknown]
    assert 410 == reference[0][0] and b"r-probe" in reference[0][2]
    for case in (foreign, elsewhere, anonymous, expired):
        assert reference == [_answer(r) for r in case]
    assert 200 == owner_status
    assert 403 == refused.status_code
    actions = [(a.action, a.thread_id, a.run_id) for a in bearer.seen]
    assert ("resume", "t-own", "r-probe") in actions
    assert ("join", "t-own", "r-probe") in actions
    assert ("resume", "t-other", "r-probe") in actions


def test_without_a_hook_a_resume_must_name_the_runs_thread() -> None:
    """No principal to compare: the thread alone, and the same answer as an unknown run."""
    endless = Endless()
    app = create_app(endless, path="/agent", event_log=MemoryEventLog(), resume_grace=0)
    with serve_asgi(app) as base:
        url = base + "/agent"
        unknown = _asks(url, _body("r-free", "t-other"), None)
        with _started(url, _body("r-free"), None):
            foreign = _asks(url, _body("r-free", "t-other"), None)
            with httpx.stream(
                "POST", url, json=_body("r-free"), headers={"Last-Event-ID": "0"}
            ) as own:
                owner_status = own.status_code
    assert [_answer(r) for r in unknown] == [_answer(r) for r in foreign]
    assert 410 == unknown[0].status_code and 200 == owner_status


def test_a_run_id_someone_else_took_does_not_offer_their_run_to_its_owner() -> None:
    """bob squats alice's run id: alice's start is refused 409 without being told to
    follow bob's run (she could not anyway: 410); alice starting her own run twice is
    told to follow it."""
    endless = Endless()
    app = create_app(
        endless, path="/agent", event_log=MemoryEventLog(), authorize=_Bearer(), resume_grace=0
    )
    with serve_asgi(app) as base:
        url = base + "/agent"
        with _started(url, _body("r-squat"), "bob"):
            squatted = httpx.post(url, json=_body("r-squat"), headers=_headers("alice"))
            follow = httpx.post(
                url, json=_body("r-squat"), headers=_headers("alice", **{"Last-Event-ID": "0"})
            )
        with _started(url, _body("r-mine"), "alice"):
            twice = httpx.post(url, json=_body("r-mine"), headers=_headers("alice"))

    assert 409 == squatted.status_code == twice.status_code
    assert "Last-Event-ID" not in squatted.json()["detail"]
    assert "new runId" in squatted.json()["detail"]
    assert "Last-Event-ID" in twice.json()["detail"]
    assert 410 == follow.status_code


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_both_logs_keep_the_owner_from_the_claim_and_carry_the_cancel_flag(
    kind: str, redis_url: str
) -> None:
    """``owner`` is what the claim stored (a principal of ``None``, or holding a lone
    surrogate, kept as given); ``cancel`` flags a running run only, and says so."""
    from aguikit.server.redis_log import RedisEventLog

    async def scenario() -> None:
        log: EventLog = (
            MemoryEventLog()
            if kind == "memory"
            else RedisEventLog.from_url(redis_url, prefix="own:")
        )
        alice = Owner("t1", "alice\ud800")
        assert await log.claim("r1", alice)
        assert not await log.claim("r1", Owner("t1", "bob"))  # the claim keeps its owner
        assert alice == await log.owner("r1")
        assert await log.claim("r2", Owner("t2"))
        assert Owner("t2", None) == await log.owner("r2")
        assert await log.owner("unknown") is None
        assert not await log.cancel("unknown") and not await log.cancel_requested("unknown")
        await log.append("r1", {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"})
        assert not await log.cancel_requested("r1")
        assert await log.cancel("r1") and await log.cancel_requested("r1")
        await log.end("r1")
        assert not await log.cancel("r1")  # ended: nothing to stop
        assert alice == await log.owner("r1")  # kept as long as the run's log

    asyncio.run(scenario())


def test_the_redis_owner_record_expires_with_the_run(redis_url: str) -> None:
    """The owner key lives as the stream does: gone with it, never left behind."""
    from aguikit.server.redis_log import RedisEventLog

    async def scenario() -> None:
        log = RedisEventLog.from_url(redis_url, prefix="exp:", ttl=1)
        assert await log.claim("r", Owner("t", "p"))
        await log.append("r", {"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
        await log.end("r")
        assert 0 < await log.redis.ttl("aguikit:owner:r") <= 1
        await asyncio.sleep(2.2)
        assert await log.owner("r") is None and not await log.resumable("r", "0")

    asyncio.run(scenario())


def _marks(marks: Path, run_id: str, what: str) -> list[Path]:
    return list(marks.glob(f"{run_id}.{what}.*"))


def _wait_mark(marks: Path, run_id: str, what: str, timeout: float) -> Path | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _marks(marks, run_id, what)
        if found:
            return found[0]
        time.sleep(0.02)
    return None


def test_a_cancel_request_on_another_worker_stops_the_run(redis_url: str, tmp_path: Path) -> None:
    """Two uvicorn workers over one Redis: a run started on A is cancelled by a request to
    B (``204``, once the run ended), the handler on A seeing ``CancelledError`` within the
    bound; B refuses another thread's cancel (``404``, the run untouched) and answers
    another thread's resume as an unknown run's."""
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {
        **os.environ,
        "AGUIKIT_TEST_REDIS": redis_url,
        "PYTHONPATH": os.pathsep.join([str(Path(aguikit.__file__).parent.parent), str(ROOT)]),
        "AGUIKIT_TEST_HANDLER": "endless",
        "AGUIKIT_TEST_GRACE": "30",
        "AGUIKIT_TEST_MARKS": str(marks),
    }
    with uvicorn_workers("tests.resume_app:app", 2, env, ROOT) as workers:
        a, b = (base + "/agent" for base, _ in workers)
        body = _body("r-across")
        with httpx.stream("POST", a, json=body, timeout=30) as started:
            assert 200 == started.status_code
            chunks = started.iter_bytes()
            next(chunks)
            assert _wait_mark(marks, "r-across", "started", 10) is not None
            foreign = httpx.post(
                b, json=_body("r-across", "t-other"), headers={"X-AGUI-Cancel": "1"}, timeout=30
            )
            peek = httpx.post(
                b, json=_body("r-across", "t-other"), headers={"Last-Event-ID": "0"}, timeout=30
            )
            unknown = httpx.post(
                b, json=_body("r-nobody", "t-other"), headers={"Last-Event-ID": "0"}, timeout=30
            )
            time.sleep(0.6)  # more than two looks at the flag: the foreign cancel set none
            assert not _marks(marks, "r-across", "cancelled")
            asked = time.time()
            cancel = httpx.post(b, json=body, headers={"X-AGUI-Cancel": "1"}, timeout=30)
            answered = time.time()
            mark = _wait_mark(marks, "r-across", "cancelled", 10)
            rest = b"".join(chunks)  # A's stream ends with the run
        again = httpx.post(b, json=body, headers={"X-AGUI-Cancel": "1"}, timeout=30)

    assert 404 == foreign.status_code
    assert 204 == cancel.status_code
    assert mark is not None, "the handler on worker A was never cancelled"
    cancelled_at = mark.stat().st_mtime
    assert cancelled_at - asked < BOUND
    assert cancelled_at <= answered + 0.05  # the 204 came once the run was cancelled
    assert b"TEXT_MESSAGE_CONTENT" in rest or rest == b""
    assert 404 == again.status_code
    assert 410 == peek.status_code
    assert _answer(peek)[2] == _answer(unknown)[2].replace(b"r-nobody", b"r-across")
