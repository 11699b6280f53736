"""
The recording's writer while answers stream (``aguikit.proxy.HarRecorder``): after every
rewrite the file is a complete HAR document whose open entry holds what had arrived,
the final entry is the one a whole dump gives, and a rewrite encodes only what arrived
since the last one (an answer's recording costs no more per event as it grows).

The proxy around it is driven for real in ``tests/test_proxy.py``; here the writer takes
the bodies a real answer can have, cut at every kind of place.
"""

from __future__ import annotations

import base64
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from aguikit import proxy
from aguikit.proxy import Flow, HarRecorder

SSE = "text/event-stream"
PROTO = "application/vnd.ag-ui.event+proto"


def _whole(flow: Flow) -> bytes:
    """The entry dumped whole, as the writer's bytes must be."""
    return json.dumps(flow.har(), ensure_ascii=False).encode("utf-8")


def _flow(media: str, thread: str = "t1") -> Flow:
    body = json.dumps({"threadId": thread, "runId": "r1", "x": "\x00aguikit-text-\x00"})
    return Flow(
        number=1,
        method="POST",
        url="http://agent/run",
        request_headers=[(b"content-type", b"application/json")],
        request_body=body.encode(),
        started=time.perf_counter(),
        started_iso="2026-12-04T00:00:00.000+00:00",
        thread_id=thread,
        run_id="r1",
        status=200,
        reason="OK",
        response_headers=[(b"content-type", media.encode())],
        media=media,
    )


def _body(rng: random.Random, events: int) -> bytes:
    """An SSE body whose deltas carry what JSON escapes and what UTF-8 spreads over bytes."""
    pieces = ['"quoted"', "back\\slash", "tab\tnew\nline", "\x01ctl", "é", "日本", "🙂", "\u2028"]
    frames = [
        "data: "
        + json.dumps(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": rng.choice(pieces)},
            ensure_ascii=False,
        )
        + "\n\n"
        for _ in range(events)
    ]
    return "".join(frames).encode("utf-8")


def _cuts(rng: random.Random, body: bytes) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, 60)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


def _entry(path: Path) -> dict[str, Any]:
    (entry,) = json.loads(path.read_bytes())["log"]["entries"]
    return entry


def _stream(flow: Flow, recorder: HarRecorder, chunks: list[bytes]) -> list[dict[str, Any]]:
    """Feed ``chunks`` as the proxy does, a forced rewrite after each; each rewrite's entry."""
    seen = []
    for chunk in chunks:
        flow.body += chunk
        flow.events.append((len(flow.body), 1.0 / 3, 2.0 / 3))
        recorder.update(flow, force=True)
        seen.append(_entry(recorder.paths[0]))
    return seen


@pytest.mark.parametrize("seed", range(12))
def test_every_rewrite_is_a_har_document_holding_what_arrived(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    body = _body(rng, 40)
    if seed % 3 == 2:  # an answer that stops being UTF-8 part way (base64 from then on)
        at = rng.randrange(len(body))
        body = body[:at] + b"\xff\xfe" + body[at:]
    flow = _flow(SSE)
    recorder = HarRecorder(tmp_path, {"name": "aguikit", "version": "test"})
    seen = _stream(flow, recorder, _cuts(rng, body))

    sizes = []
    for entry in seen:
        content = entry["response"]["content"]
        covered = content["size"]
        assert entry["response"]["bodySize"] == covered
        held = body[:covered]
        if content.get("encoding") == "base64":
            assert base64.b64decode(content["text"]) == held
            assert covered % 3 == 0
        else:
            assert content["text"].encode("utf-8") == held
        assert not sizes or covered >= sizes[-1]  # never less than the last rewrite held
        sizes.append(covered)
        assert entry["_aguikit"]["complete"] is False
        assert entry["request"]["postData"]["text"] == flow.request_body.decode()
    assert sizes[-1] >= len(body) - 3

    # the open entry's fields are the whole dump's, but for the growing ones
    last, whole = seen[-1], flow.har()
    for key in ("startedDateTime", "request", "cache"):
        assert last[key] == whole[key]
    assert last["_aguikit"]["events"] == whole["_aguikit"]["events"]
    assert {k: v for k, v in last["response"].items() if k not in ("content", "bodySize")} == {
        k: v for k, v in whole["response"].items() if k not in ("content", "bodySize")
    }

    flow.complete = True
    flow.finished = time.perf_counter()
    recorder.update(flow, force=True)
    recorder.close()
    data = recorder.paths[0].read_bytes()
    assert _whole(flow) in data  # the final entry: the whole dump, as ever
    final = _entry(recorder.paths[0])
    assert final["response"]["content"]["size"] == len(body)
    assert final["_aguikit"]["complete"] is True


def test_a_protobuf_answer_is_base64_while_it_streams(tmp_path: Path) -> None:
    rng = random.Random(7)
    body = bytes(rng.randrange(256) for _ in range(1000))
    flow = _flow(PROTO)
    recorder = HarRecorder(tmp_path, {"name": "aguikit", "version": "test"})
    for entry in _stream(flow, recorder, _cuts(rng, body)):
        content = entry["response"]["content"]
        assert content["encoding"] == "base64"
        assert base64.b64decode(content["text"]) == body[: content["size"]]
    recorder.close()


def test_a_rewrite_encodes_only_what_arrived_since_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over 400 rewrites of one streaming answer, the JSON the writer encodes adds up to
    about the answer itself: the whole entry encoded again at each rewrite (what the
    writer did) is about 200 times it."""
    encoded = 0
    dumps = json.dumps

    def counting(obj: Any, **kwargs: Any) -> str:
        nonlocal encoded
        text = dumps(obj, **kwargs)
        encoded += len(text)
        return text

    monkeypatch.setattr(proxy.json, "dumps", counting)
    rng = random.Random(3)
    body = _body(rng, 400)
    frames = body.split(b"\n\n")[:-1]
    flow = _flow(SSE)
    recorder = HarRecorder(tmp_path, {"name": "aguikit", "version": "test"})
    _stream(flow, recorder, [frame + b"\n\n" for frame in frames])
    assert len(frames) == 400
    recorded = len(recorder.paths[0].read_bytes())
    # what arrived, its times, and a small skeleton per rewrite (headers, ids)
    assert encoded < 2 * recorded + 400 * 2_000, (encoded, recorded)
    recorder.close()


def test_a_file_whose_rewrites_are_dear_is_rewritten_less_often(tmp_path: Path) -> None:
    flow = _flow(SSE)
    recorder = HarRecorder(tmp_path, {"name": "aguikit", "version": "test"})
    recorder.update(flow)  # a new entry is written at once
    (har,) = recorder.files.values()
    har.written -= proxy.WRITE_INTERVAL  # its interval is over
    assert har.due()
    har.cost = proxy.WRITE_INTERVAL  # a write that took as long as the interval
    assert not har.due()  # waits 1 / WRITE_SHARE times that
    har.written -= proxy.WRITE_INTERVAL / proxy.WRITE_SHARE
    assert har.due()
    recorder.close()


def _finish(flow: Flow) -> None:
    flow.complete = True
    flow.finished = time.perf_counter()


@pytest.mark.parametrize(
    ("media", "tail"),
    [
        (PROTO, b""),  # protobuf whose bytes happen to be UTF-8: base64 all the same
        (SSE, "🙂".encode()[:2]),  # an answer cut inside a character: base64 when final
        (SSE, b""),
    ],
)
def test_the_first_write_comes_before_the_answer_is_known(
    tmp_path: Path, media: str, tail: bytes
) -> None:
    """The proxy writes the entry when the request comes, before the answer's headers:
    its media type, and whether its body is text, are known only later."""
    flow = _flow(media)
    flow.media, flow.response_headers, flow.status = None, [], 0
    recorder = HarRecorder(tmp_path, {"name": "aguikit", "version": "test"})
    recorder.update(flow)
    flow.media, flow.status = media, 200
    flow.response_headers = [(b"content-type", media.encode())]
    body = b"data: plain ascii\n\n" * 5 + tail
    _stream(flow, recorder, [body[:7], body[7:50], body[50:]])
    _finish(flow)
    recorder.update(flow)
    recorder.close()
    assert _whole(flow) in recorder.paths[0].read_bytes()
    final = _entry(recorder.paths[0])["response"]["content"]
    assert ("encoding" in final) == (media == PROTO or bool(tail))


def test_answers_of_one_thread_ending_out_of_order(tmp_path: Path) -> None:
    """Two answers of one thread stream at once into one file; the second ends first, so
    the first stays open ahead of it: every write is a document, and the final one holds
    both entries as dumped whole, in the order they came."""
    first, second = _flow(SSE), _flow(SSE)
    second.number = 2
    recorder = HarRecorder(tmp_path, {"name": "aguikit", "version": "test"})
    for n in range(30):
        for flow in (first, second) if n <= 10 else (first,):
            flow.body += f"data: {n} {flow.number}\n\n".encode()
            flow.events.append((len(flow.body), 0.5, 1.5))
            recorder.update(flow, force=True)
            json.loads(recorder.paths[0].read_bytes())
        if n == 10:
            _finish(second)
            recorder.update(second)
    entries = json.loads(recorder.paths[0].read_bytes())["log"]["entries"]
    assert [e["_aguikit"]["complete"] for e in entries] == [False, True]
    _finish(first)
    recorder.update(first)
    recorder.close()
    data = recorder.paths[0].read_bytes()
    assert data.index(_whole(first)) < data.index(_whole(second))
    assert len(json.loads(data)["log"]["entries"]) == 2
