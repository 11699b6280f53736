"""
Closing a chunk stream exactly as the AG-UI 1.1 specification lists it.

``basic/patterns/streaming``, "Closing a chunk stream": the consumer synthesizes an open
chunk stream's ``*_END``

* "when a chunk opens a different item in the same lane;"
* "when a message, tool-call, step, state, custom or reasoning event arrives in the item's
  lane — with four exceptions that stand aside from assembly and close nothing: ``RAW``,
  ``ACTIVITY_SNAPSHOT``, ``ACTIVITY_DELTA``, ``REASONING_ENCRYPTED_VALUE`` (and
  ``SUBAGENT_STARTED``, which opens a new lane rather than touching this one);"
* "when a run-level event arrives — ``RUN_STARTED``, ``RUN_FINISHED``, ``RUN_ERROR`` or
  ``MESSAGES_SNAPSHOT`` — which closes every lane, or when the subagent the item is
  attributed to terminates, which closes that subagent's lane."

and "The chunked form": "An explicit event carrying an identifier a chunk stream is
assembling is not a continuation of it: it ends the shorthand [...] and what follows is
judged by the triad rules".

Three things are held here.  Every event type of the registry does to an open chunk
stream what that list says, in its own lane and in another (so a type the protocol gains
is judged the moment codegen has run: it closes unless it is declared standing aside).
A stream the list makes malformed is rejected by every consumer aguikit has, at the event
that misbehaves and with the catalogued rule: ``Session`` (its messages and state as they
were before that event), ``RunWriter(mode="strict")`` at that emit, and
``aguikit check --strict`` (exit 1); and the official ``@ag-ui/client`` 1.0.0, run in Node
over a real socket, reaches the same verdict, except on the one stream where the
specification's sentence on mixed spellings makes aguikit stricter than the client
(``docs/divergences-apply.md``).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Final

import pytest
from tests import corpus
from tests.node_client import run_http_agent
from tests.servers import Route, serve
from tests.support import jsonl_bytes, representatives, sse_bytes, typed

from aguikit import to_wire
from aguikit._dispatch import STAND_ASIDE
from aguikit._generated.registry import DEPRECATED_EVENT_TYPES
from aguikit.chunks import ChunkNormalizer
from aguikit.cli import main as cli_main
from aguikit.errors import ProtocolError
from aguikit.server import RunWriter
from aguikit.session import Session

STANDS_ASIDE: Final = frozenset(
    {"RAW", "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA", "REASONING_ENCRYPTED_VALUE", "SUBAGENT_STARTED"}
)
"""The events the specification lets stand aside from chunk assembly, and only those."""
RUN_LEVEL: Final = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"})
"""The run-level events, which close every lane."""
SUBAGENT_TERMINALS: Final = frozenset({"SUBAGENT_FINISHED", "SUBAGENT_ERROR"})
"""Close the lane of the subagent they name (their ``subagentRunId`` is required)."""
CHUNKS: Final = frozenset({"TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"})
ASIDE_BY_DECLARATION: Final = frozenset(
    event_type for event_type, stages in STAND_ASIDE.items() if "normalizer" in stages
)
"""A type a later protocol version adds and declares standing aside (none in 1.1)."""

LANE: Final = "lane-x"
OPEN_ID: Final = "open-chunk"


def _documents() -> list[Any]:
    params = []
    for docs in representatives().values():
        for doc in docs:
            if doc["type"] not in CHUNKS:
                params.append(pytest.param(doc, id=doc["type"]))
    return params


DOCUMENTS: Final = _documents()


def _closes_its_lane(event_type: str) -> bool:
    """What the list says an event does to the chunk stream of the lane it arrives in."""
    return event_type not in STANDS_ASIDE | DEPRECATED_EVENT_TYPES | ASIDE_BY_DECLARATION


def _in_lane(doc: dict[str, Any], lane: str | None) -> Any:
    """``doc`` attributed to ``lane`` (``None``: untagged), where its type is attributable."""
    out = {key: value for key, value in doc.items() if key != "subagentRunId"}
    attributable = hasattr(typed(doc), "subagent_run_id")
    if lane is not None and attributable:
        out["subagentRunId"] = lane
    elif doc["type"] in SUBAGENT_TERMINALS | {"SUBAGENT_STARTED"}:
        out["subagentRunId"] = doc["subagentRunId"]  # required; names another subagent
    return typed(out)


def _ends(events: list[Any]) -> list[tuple[str, str | None]]:
    """The ends synthesized ahead of the event fed (the last one out)."""
    return [(e.message_id, e.subagent_run_id) for e in events[:-1] if e.type == "TEXT_MESSAGE_END"]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_an_event_closes_the_chunk_stream_of_its_own_lane_exactly_as_listed(
    doc: dict[str, Any],
) -> None:
    """Untagged, an event arrives in the parent agent's lane; tagged, in that subagent's.
    The synthesized end comes before the event; a run-level event closes every lane, a
    subagent's terminal only its own, and the five listed events close nothing."""
    event_type = doc["type"]
    parent = ChunkNormalizer()
    parent.normalize(typed({"type": "TEXT_MESSAGE_CHUNK", "messageId": OPEN_ID, "delta": "a"}))
    out = parent.normalize(_in_lane(doc, None))

    closes = _closes_its_lane(event_type) and event_type not in SUBAGENT_TERMINALS
    assert ([(OPEN_ID, None)] if closes else []) == _ends(out), event_type
    assert event_type == out[-1].type
    assert (not closes) == parent.is_open

    tagged = _in_lane(doc, LANE)
    if event_type in SUBAGENT_TERMINALS or getattr(tagged, "subagent_run_id", None) == LANE:
        sub = ChunkNormalizer()
        sub.normalize(
            typed(
                {
                    "type": "TEXT_MESSAGE_CHUNK",
                    "messageId": OPEN_ID,
                    "delta": "a",
                    "subagentRunId": LANE,
                }
            )
        )
        if event_type in SUBAGENT_TERMINALS:
            tagged = _in_lane({**doc, "subagentRunId": LANE}, LANE)
        out = sub.normalize(tagged)
        assert ([(OPEN_ID, LANE)] if _closes_its_lane(event_type) else []) == _ends(out)


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_an_event_leaves_another_lanes_chunk_stream_open_unless_it_is_run_level(
    doc: dict[str, Any],
) -> None:
    """A subagent's stream survives every untagged event but the run-level ones ("MUST NOT
    close one invocation's entities because another invocation ended", the subagents
    page), the parent's every event attributed to a subagent."""
    event_type = doc["type"]
    normalizer = ChunkNormalizer()
    normalizer.normalize(
        typed(
            {
                "type": "TEXT_MESSAGE_CHUNK",
                "messageId": OPEN_ID,
                "delta": "a",
                "subagentRunId": LANE,
            }
        )
    )
    out = normalizer.normalize(_in_lane(doc, None))

    assert ([(OPEN_ID, LANE)] if event_type in RUN_LEVEL else []) == _ends(out), event_type


def test_the_lists_above_are_the_specifications() -> None:
    """The standing-aside and run-level lists, read from the bundled page (not vendored)."""
    page = corpus.UPSTREAM_DOCS / "1.1" / "basic" / "patterns" / "streaming.mdx"
    corpus.require(page, "the 1.1 streaming page")
    text = " ".join(page.read_text(encoding="utf-8").split())
    closing = text[text.index("### Closing a chunk stream") :]
    aside = closing[closing.index("with four exceptions") : closing.index("rather than touching")]
    run_level = closing[
        closing.index("when a run-level event") : closing.index("which closes every")
    ]

    assert STANDS_ASIDE == set(re.findall(r"`([A-Z_]+)`", aside))
    assert RUN_LEVEL == set(re.findall(r"`([A-Z_]+)`", run_level))
    assert "message, tool-call, step, state, custom or reasoning event" in closing


# -- the two spellings do not mix within one item ------------------------------------------

RS: Final = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
RF: Final = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}


def _text_chunk(delta: str, message_id: str | None = None, **extra: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = {"type": "TEXT_MESSAGE_CHUNK", "delta": delta, **extra}
    if message_id is not None:
        chunk["messageId"] = message_id
    return chunk


def _held(session: Session) -> Any:
    """What a session holds, as JSON (a copy: nothing the next event does can reach it)."""
    return json.loads(json.dumps([[to_wire(m) for m in session.messages], session.state]))


MIXED: Final = [
    pytest.param(
        [_text_chunk("a", "m1"), {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"}],
        "AGUI-V012",
        id="text-content",
    ),
    pytest.param(
        [_text_chunk("a", "m1"), {"type": "TEXT_MESSAGE_END", "messageId": "m1"}],
        "AGUI-V012",
        id="text-end",
    ),
    pytest.param(
        [
            _text_chunk("a", "m1", subagentRunId="s1"),
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"},
        ],
        "AGUI-V012",
        id="untagged-content-for-a-subagents-chunk-stream",
    ),
    pytest.param(
        [
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "}"},
        ],
        "AGUI-V014",
        id="tool-args",
    ),
    pytest.param(
        [
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        ],
        "AGUI-V014",
        id="tool-end",
    ),
    pytest.param(
        [
            {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "a"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "b"},
        ],
        "AGUI-V024",
        id="reasoning-content",
    ),
    pytest.param(
        [{"type": "TEXT_MESSAGE_START", "messageId": "m1"}, _text_chunk("b")],
        "AGUI-C001",
        id="id-less-chunk-after-an-explicit-start",
    ),
    pytest.param(
        [{"type": "TEXT_MESSAGE_START", "messageId": "m1"}, _text_chunk("b", "m1")],
        "AGUI-V011",
        id="chunk-naming-an-explicitly-open-message",
    ),
]


@pytest.mark.parametrize(("events", "rule"), MIXED)
def test_an_explicit_event_ends_the_shorthand_and_is_judged_by_the_triad_rules(
    events: list[dict[str, Any]], rule: str
) -> None:
    """Mixing the spellings within one item is "a malformed sequence a producer MUST NOT
    emit": the second spelling is refused at its own event, and nothing it carried is
    applied."""
    session = Session()
    session.feed_all([RS, events[0]])
    before = _held(session)

    with pytest.raises(ProtocolError) as caught:
        session.feed(events[1])

    assert (rule, 2) == (caught.value.rule, caught.value.event_index)
    assert before == _held(session)


def test_the_explicit_event_comes_after_the_end_it_implies() -> None:
    """What the normalizer hands on: the synthesized end, then the event as sent."""
    normalizer = ChunkNormalizer()
    normalizer.normalize(typed(_text_chunk("a", "m1", subagentRunId="s1")))
    content = typed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"})
    out = normalizer.normalize(content)

    assert [("TEXT_MESSAGE_END", "s1"), ("TEXT_MESSAGE_CONTENT", None)] == [
        (e.type, e.subagent_run_id) for e in out
    ]
    assert content is out[-1]
    assert not normalizer.is_open


# -- every consumer, and the official client --------------------------------------------------

STREAMS: Final = [
    pytest.param(
        [_text_chunk("Hello", "m1"), {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}],
        _text_chunk(", world"),
        "AGUI-C001",
        True,
        id="state-snapshot-closes",
    ),
    pytest.param(
        [
            {"type": "STATE_SNAPSHOT", "snapshot": {"n": 0}},
            _text_chunk("Hello", "m1"),
            {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 1}]},
        ],
        _text_chunk(", world"),
        "AGUI-C001",
        True,
        id="state-delta-closes",
    ),
    pytest.param(
        [
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{"},
            {"type": "STEP_STARTED", "stepName": "plan"},
            {"type": "STEP_FINISHED", "stepName": "plan"},
        ],
        {"type": "TOOL_CALL_CHUNK", "delta": "}"},
        "AGUI-C001",
        True,
        id="steps-close-a-tool-call",
    ),
    pytest.param(
        [
            {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "hm"},
            {"type": "REASONING_START", "messageId": "span"},
            {"type": "REASONING_END", "messageId": "span"},
        ],
        {"type": "REASONING_MESSAGE_CHUNK", "delta": "m"},
        "AGUI-C001",
        True,
        id="a-reasoning-span-closes",
    ),
    pytest.param(
        [_text_chunk("Hello", "m1")],
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": ", world"},
        "AGUI-V012",
        True,
        id="explicit-content-ends-the-shorthand",
    ),
    pytest.param(
        [_text_chunk("Hello", "m1", subagentRunId="s1")],
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": ", world"},
        "AGUI-V012",
        False,
        id="untagged-explicit-content-ends-a-subagents-shorthand",
    ),
]
"""A stream's events before the one that misbehaves, that event, the rule it breaks, and
whether the official client rejects the stream too (the last: the client closes the lane of
the event's tag only, and never by id; the sentence quoted above makes it malformed)."""


def _assert_session_refuses(prefix: list[Any], bad: Any, rule: str) -> None:
    session = Session()
    session.feed_all([RS, *prefix])
    before = _held(session)

    with pytest.raises(ProtocolError) as caught:
        session.feed(bad)

    assert (rule, 1 + len(prefix)) == (caught.value.rule, caught.value.event_index)
    assert before == _held(session)


def _assert_writer_refuses(prefix: list[Any], bad: Any, rule: str) -> None:
    raised: list[ProtocolError] = []

    async def main() -> RunWriter:
        run = RunWriter({"threadId": "t1", "runId": "r1", "messages": []}, mode="strict")
        async with run:
            for event in prefix:
                await run.emit(event)
            try:
                await run.emit(bad)
            except ProtocolError as error:
                raised.append(error)
                raise
        return run

    run = asyncio.run(main())

    (error,) = raised
    assert (rule, bad["type"]) == (error.rule, error.event_type)
    assert [e["type"] for e in prefix] == [e["type"] for e in run.events[1 : 1 + len(prefix)]]
    assert {"type": "RUN_ERROR", "code": rule} == {k: run.events[-1][k] for k in ("type", "code")}


def _assert_check_fails(prefix: list[Any], bad: Any, rule: str, tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    path.write_bytes(jsonl_bytes([RS, *prefix, bad, RF]))
    report = tmp_path / "report.txt"

    code = cli_main(["check", "--strict", str(path), "--output", str(report)])

    assert 1 == code
    assert f"event {2 + len(prefix)} {bad['type']}: error {rule}" in report.read_text()


@pytest.mark.parametrize(("prefix", "bad", "rule", "client_rejects"), STREAMS)
def test_every_consumer_refuses_the_stream_at_the_event_that_misbehaves(
    prefix: list[Any], bad: Any, rule: str, client_rejects: bool, tmp_path: Path
) -> None:
    """``Session``, ``RunWriter(mode="strict")`` and ``aguikit check --strict`` alike."""
    _assert_session_refuses(prefix, bad, rule)
    _assert_writer_refuses(prefix, bad, rule)
    _assert_check_fails(prefix, bad, rule, tmp_path)


@pytest.mark.parametrize(("prefix", "bad", "rule", "client_rejects"), STREAMS)
def test_the_official_client_reaches_the_same_verdict(
    prefix: list[Any], bad: Any, rule: str, client_rejects: bool
) -> None:
    """``@ag-ui/client`` 1.0.0's ``HttpAgent`` over a real socket: the run fails where
    aguikit's does, and the same stream without the misbehaving event passes both."""
    with serve() as server:
        bad_url = server.add("/bad", Route([sse_bytes([RS, *prefix, bad, RF])]))
        good_url = server.add("/good", Route([sse_bytes([RS, *prefix, RF])]))
        rejected = run_http_agent(bad_url, {"threadId": "t1", "runId": "r1"})
        accepted = run_http_agent(good_url, {"threadId": "t1", "runId": "r1"})

    assert client_rejects == ("error" in rejected["runs"][0]), rejected
    assert "error" not in accepted["runs"][0], accepted
    session = Session()
    session.feed_all([RS, *prefix, RF])
    session.finish()


def test_the_official_client_also_lets_the_listed_events_stand_aside() -> None:
    """The other half of the list: an id-less continuation after ``RAW``, an activity or an
    encrypted value still continues the message, for both (the corpus's
    ``raw-does-not-close-chunk-stream``, widened to every event that stands aside)."""
    stream = [
        RS,
        _text_chunk("Half ", "m1"),
        {"type": "RAW", "event": {"k": 1}},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a1", "activityType": "plan", "content": {}},
        {
            "type": "ACTIVITY_DELTA",
            "messageId": "a1",
            "activityType": "plan",
            "patch": [{"op": "add", "path": "/x", "value": 1}],
        },
        {
            "type": "REASONING_ENCRYPTED_VALUE",
            "subtype": "message",
            "entityId": "m1",
            "encryptedValue": "opaque",
        },
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "helper"},
        _text_chunk("and half."),
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
        RF,
    ]
    session = Session()
    session.feed_all(stream)
    session.finish()
    with serve() as server:
        out = run_http_agent(
            server.add("/", Route([sse_bytes(stream)])), {"threadId": "t1", "runId": "r1"}
        )

    assert "error" not in out["runs"][0], out
    ours = [m.content for m in session.messages if m.role == "assistant"]
    theirs = [m["content"] for m in out["messages"] if m["role"] == "assistant"]
    assert ["Half and half."] == ours == theirs
