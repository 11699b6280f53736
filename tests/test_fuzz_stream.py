"""
Hostile streams against the stream-level entry points: verifier, chunk normalizer, applier
and session.

The invariant, on every event of every input: the call succeeds or raises an
:class:`~aguikit.AguiError` that says where (the event index for stream errors, the patch
operation for patch errors), and a call that raised left its consumer exactly as it was
before - the verifier's and normalizer's bookkeeping, the applier's and session's messages
and state.  Streams are corpus streams and legal hypothesis streams with events dropped,
duplicated, reordered and corrupted, hostile patches inserted, fed both as raw dicts and as
the typed events that parse out of them.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import hostile
from tests.strategies import legal_streams
from tests.support import run_finished, run_started

from aguikit import (
    AguiError,
    Applier,
    ChunkNormalizer,
    PatchError,
    ProtocolError,
    Session,
    Verifier,
    parse_event,
    to_wire,
)

pytestmark = pytest.mark.fuzz

STREAMS = hostile.corpus_streams()


def hostile_stream(rng: random.Random) -> list[Any]:
    """A corpus stream, mutated; sometimes a hostile patch sequence on a legal run."""
    if rng.random() < 0.15:
        stream = STREAMS[0]
        deltas = [
            {"type": "STATE_DELTA", "delta": hostile.hostile_patch(rng)}
            for _ in range(rng.randint(1, 4))
        ]
        return [*stream[:-1], *deltas, stream[-1]]
    return hostile.mutate_stream(rng.choice(STREAMS), rng)


def typed(stream: list[Any], rng: random.Random) -> list[Any]:
    """The events that parse out of ``stream`` (schema-checked or not), the rest dropped."""
    check = rng.random() < 0.5
    out: list[Any] = []
    for doc in stream:
        try:
            out.append(parse_event(doc, check=check))
        except AguiError:
            continue
    return out


def typed_stream(rng: random.Random) -> list[Any]:
    return typed(hostile_stream(rng), rng)


# ---- views of each consumer's state, compared before and after a failing call ----------


def verifier_view(verifier: Verifier) -> str:
    state = verifier._state
    return hostile.canonical(
        [
            int(state.phase),
            state.run_id,
            state.thread_id,
            state.stream_thread,
            [list(opened) for opened in state.open],
            [sorted(closed, key=hostile.canonical) for closed in state.closed],
            [list(owners.items()) for owners in state.owners],
        ]
    )


def normalizer_view(normalizer: ChunkNormalizer) -> str:
    lanes = [
        [owner, str(s.kind), s.id, s.owner, s.fields] for owner, s in normalizer._lanes.items()
    ]
    return hostile.canonical([lanes, list(normalizer._by_id.items())])


# ---- the entry points ------------------------------------------------------------------


def run_verifier(events: list[Any]) -> None:
    verifier = Verifier()
    for index, event in enumerate(events):
        before = verifier_view(verifier)
        try:
            verifier.verify(event)
        except Exception as error:
            hostile.assert_located(error)
            assert isinstance(error, ProtocolError), f"{type(error).__name__} from verify"
            assert index == error.event_index
            assert before == verifier_view(verifier), f"event {index} changed the verifier"
    try:
        verifier.finish()
    except Exception as error:
        assert isinstance(error, ProtocolError), f"{type(error).__name__} from finish"


def run_normalizer(events: list[Any]) -> None:
    normalizer = ChunkNormalizer()
    for index, event in enumerate(events):
        before = normalizer_view(normalizer)
        try:
            normalizer.normalize(event)
        except Exception as error:
            assert isinstance(error, ProtocolError), f"{type(error).__name__}: {error}"
            assert error.rule and error.message
            assert before == normalizer_view(normalizer), f"event {index} changed the normalizer"
    normalizer.finish()


def run_applier(events: list[Any]) -> None:
    applier = Applier()
    for index, event in enumerate(events):
        before = hostile.view(applier)
        try:
            applier.apply(event)
        except Exception as error:
            assert isinstance(error, PatchError | ProtocolError), f"{type(error).__name__}"
            if isinstance(error, PatchError):
                assert error.op_index is not None or error.reason, repr(error)
            assert before == hostile.view(applier), f"event {index} changed the applier"
        hostile.view(applier)  # reading materialises: it must not fail either


def run_session(events: list[Any], *, patch_errors: Any = "warn", validate: bool = True) -> None:
    session = Session(patch_errors=patch_errors, validate=validate)
    for index, event in enumerate(events):
        before = hostile.view(session)
        try:
            session.feed(event)
        except Exception as error:
            hostile.assert_located(error)
            assert index == error.event_index, f"{error!r} names event {error.event_index}"
            assert before == hostile.view(session), f"event {index} changed the session"
            if isinstance(error, PatchError):
                continue
            with pytest.raises(type(error)):
                session.feed(event)
            assert before == hostile.view(session)
            return
    try:
        session.finish()
    except Exception as error:
        hostile.assert_located(error) if error.event_index is not None else None
        assert isinstance(error, AguiError), f"{type(error).__name__} from finish"
    hostile.view(session)


# ---- seeded volume -----------------------------------------------------------------------


def test_the_verifier_survives_hostile_typed_streams_unchanged_by_what_it_rejects() -> None:
    """Every rejection is a located ProtocolError and leaves the verifier as it was."""
    hostile.drive(run_verifier, typed_stream, hostile.no_escape)


def test_the_verifier_reports_a_non_event_as_a_protocol_error() -> None:
    """Raw dicts, None and strings offered to the verifier are AGUI-V092, not a crash."""
    hostile.drive(run_verifier, hostile_stream, hostile.no_escape)


def test_the_normalizer_survives_hostile_typed_streams_unchanged_by_what_it_rejects() -> None:
    """Every chunk rule violation leaves the normalizer's open streams as they were."""
    hostile.drive(run_normalizer, typed_stream, hostile.no_escape)


def test_the_applier_survives_hostile_typed_streams_and_patches() -> None:
    """The applier raises only PatchError or a chunk ProtocolError, and rolls back."""
    hostile.drive(run_applier, typed_stream, hostile.no_escape)


def test_the_session_survives_hostile_raw_streams_and_keeps_its_state_on_error() -> None:
    """Raw dicts: a located error with the right event index; messages and state untouched."""
    hostile.drive(run_session, hostile_stream, hostile.no_escape)


def test_the_session_survives_hostile_typed_streams_and_keeps_its_state_on_error() -> None:
    """The same for typed events, including ones parsed without the schema check."""
    hostile.drive(run_session, typed_stream, hostile.no_escape)


def test_a_session_raising_patch_errors_keeps_its_state_and_carries_on() -> None:
    """With ``patch_errors="raise"`` a failed patch is an error that changes nothing."""
    hostile.drive(
        lambda events: run_session(events, patch_errors="raise"), hostile_stream, hostile.no_escape
    )


def test_a_session_without_validation_survives_hostile_raw_streams() -> None:
    """``validate=False`` trusts the shape; a wrong shape must still fail cleanly."""
    hostile.drive(
        lambda events: run_session(events, validate=False), hostile_stream, hostile.no_escape
    )


# ---- shrinking properties -------------------------------------------------------------------


@st.composite
def damaged_legal_streams(draw: Any) -> list[Any]:
    """A legal hypothesis stream with events dropped, duplicated or swapped."""
    events = [to_wire(e) for e in draw(legal_streams())]
    for _ in range(draw(st.integers(1, 3))):
        if not events:
            break
        i = draw(st.integers(0, len(events) - 1))
        action = draw(st.sampled_from(["drop", "dup", "swap", "patch"]))
        if action == "drop":
            del events[i]
        elif action == "dup":
            events.insert(i, events[i])
        elif action == "swap":
            j = draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        else:
            seed = draw(st.integers(0, 2**32))
            patch = hostile.hostile_patch(random.Random(seed))
            events.insert(i, {"type": "STATE_DELTA", "delta": patch})
    return events


@given(damaged_legal_streams(), st.booleans())
def test_a_damaged_legal_stream_fails_cleanly_or_not_at_all(events: list[Any], raw: bool) -> None:
    """Shrinks to the smallest damage that breaks the session invariant, if one does."""
    run_session(events if raw else typed(events, random.Random(0)))


@given(damaged_legal_streams())
def test_the_verifier_rejects_damage_without_changing_its_record(events: list[Any]) -> None:
    """The verifier's record after a rejected event equals its record before it."""
    run_verifier(typed(events, random.Random(1)))


# ---- regressions: each input the fuzzing found, pinned --------------------------------------

RS = run_started(thread_id="t", run_id="r")


def test_a_verifier_finding_about_a_deeply_nested_id_is_rendered_bounded() -> None:
    """A run id nested 3000 levels down used to raise RecursionError while the message was
    formatted; it is now shown abbreviated in an ordinary AGUI-V008."""
    verifier = Verifier()
    verifier.verify(parse_event(RS))
    finished = parse_event(run_finished(thread_id="t", run_id="r"))
    finished.run_id = hostile.deep(3000)

    with pytest.raises(ProtocolError) as info:
        verifier.verify(finished)

    assert "AGUI-V008" == info.value.rule
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize(
    ("member", "document"),
    [
        ("message_id", {"type": "TEXT_MESSAGE_END", "messageId": "x"}),
        # The id names the open chunk stream, which an explicit event ends: the unhashable
        # tag must be found before that end is synthesized.
        ("subagent_run_id", {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b"}),
        ("subagent_run_id", {"type": "STATE_DELTA", "delta": []}),
    ],
)
def test_the_normalizer_reports_an_unhashable_id_as_malformed_and_stays_unchanged(
    member: str, document: dict[str, Any]
) -> None:
    """A list where a message id or a tag goes used to escape as TypeError from the
    normalizer."""
    normalizer = ChunkNormalizer()
    normalizer.normalize(
        parse_event({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"})
    )
    before = normalizer_view(normalizer)
    bad = parse_event(document)
    setattr(bad, member, [None, "\x00"])

    with pytest.raises(ProtocolError) as info:
        normalizer.normalize(bad)

    assert "AGUI-V092" == info.value.rule
    assert before == normalizer_view(normalizer)


def test_a_chunk_whose_delta_is_not_text_is_refused_before_anything_is_synthesized() -> None:
    """``validate=False``: a TOOL_CALL_CHUNK with ``delta: false`` used to deliver its
    synthesized TOOL_CALL_START and then fail, leaving a half-applied input."""
    session = Session(validate=False)
    session.feed_all([RS, {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}])
    before = hostile.view(session)
    chunk = {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "delta": False}

    with pytest.raises(ProtocolError) as info:
        session.feed(chunk)

    assert ("AGUI-V092", 2) == (info.value.rule, info.value.event_index)
    assert before == hostile.view(session)


def test_the_applier_refuses_a_delta_that_is_not_text_when_it_arrives() -> None:
    """A numeric delta used to be stored and blow up later, when the messages were read."""
    applier = Applier()
    applier.apply(parse_event({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "user"}))
    bad = parse_event({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"})
    bad.delta = 42  # type: ignore[assignment]

    with pytest.raises(ProtocolError, match="AGUI-V092"):
        applier.apply(bad)

    assert [""] == [m.content for m in applier.messages]


def test_the_applier_copies_a_snapshot_nested_thousands_deep_without_recursing() -> None:
    """``copy.deepcopy`` of a 3000-deep typed snapshot used to raise RecursionError."""
    applier = Applier()
    snapshot = parse_event({"type": "STATE_SNAPSHOT", "snapshot": {}})
    snapshot.snapshot = hostile.deep(3000, kind="dict")

    applier.apply(snapshot)

    assert hostile.canonical(hostile.deep(3000, kind="dict")) == hostile.canonical(applier.state)
    assert applier.state is not snapshot.snapshot


def test_a_patch_inserting_a_value_too_deep_to_copy_is_a_patch_error_and_changes_nothing() -> None:
    """jsonpatch's own deepcopy of the inserted value used to escape as RecursionError."""
    applier = Applier(state={"a": [1]})
    delta = parse_event({"type": "STATE_DELTA", "delta": []})
    delta.delta = [
        {"op": "add", "path": "/b", "value": 1},
        {"op": "add", "path": "/a/-", "value": hostile.deep(5000)},
    ]

    with pytest.raises(PatchError) as info:
        applier.apply(delta)

    assert 1 == info.value.op_index
    assert {"a": [1]} == applier.state


def test_a_session_fed_something_that_is_not_an_object_says_so_with_the_index() -> None:
    """A list or ``None`` fed to a session used to escape as AttributeError."""
    for item in ([0, False, "/"], None, "RUN_STARTED", 5):
        session = Session()
        session.feed(RS)
        with pytest.raises(AguiError) as info:
            session.feed(item)  # type: ignore[arg-type]

        assert 1 == info.value.event_index
        assert "expected an object" in str(info.value)


def test_a_typed_event_with_an_impossible_field_type_is_malformed_not_a_crash() -> None:
    """``protocolVersion=inf`` on a typed RUN_STARTED used to escape as TypeError from the
    receiver's version comparison."""
    session = Session()
    started = parse_event(RS)
    started.protocol_version = float("inf")  # type: ignore[assignment]

    with pytest.raises(ProtocolError) as info:
        session.feed(started)

    assert ("AGUI-V092", 0) == (info.value.rule, info.value.event_index)


def test_a_truncated_stream_is_located_where_it_ended() -> None:
    """The truncation error used to carry no location at all; it names the end position."""
    session = Session()
    session.feed_all([RS, {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}])

    with pytest.raises(ProtocolError) as info:
        session.finish()

    assert "AGUI-V006" == info.value.rule
    assert 2 == info.value.event_index
    assert "event 2" == info.value.location


def test_a_chunk_repeating_a_field_as_a_deeply_nested_value_is_malformed() -> None:
    """The field-conflict message used to ``str()`` a 3000-deep name and raise
    RecursionError out of the normalizer."""
    normalizer = ChunkNormalizer()
    normalizer.normalize(
        parse_event({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"})
    )
    before = normalizer_view(normalizer)
    bad = parse_event({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "b"})
    bad.name = hostile.deep(3000)  # type: ignore[assignment]

    with pytest.raises(ProtocolError) as info:
        normalizer.normalize(bad)

    assert "AGUI-V092" == info.value.rule
    assert before == normalizer_view(normalizer)


def test_metadata_that_is_not_an_object_fails_before_the_content_lands() -> None:
    """``metadata: "~"`` on a content event used to fail after its text was appended."""
    applier = Applier()
    applier.apply(parse_event({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "user"}))
    bad = parse_event({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "done"})
    bad.metadata = "~"  # type: ignore[assignment]

    with pytest.raises(ProtocolError, match="AGUI-V092"):
        applier.apply(bad)

    assert [""] == [m.content for m in applier.messages]


def test_an_ended_message_keeps_its_text_as_one_string_not_its_fragments() -> None:
    """Fragments used to be kept one object each until somebody read the messages, so a
    long stream checked without reading held several times its text; an ended message now
    holds one string, and re-opening it still appends."""
    applier = Applier()
    applier.apply(parse_event({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "user"}))
    for piece in ("a", "b", "c"):
        applier.apply(
            parse_event({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": piece})
        )
    applier.apply(parse_event({"type": "TEXT_MESSAGE_END", "messageId": "m"}))

    assert "m" not in applier._text
    assert "abc" == applier._messages[0].content
    applier.apply(parse_event({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "d"}))
    assert ["abcd"] == [m.content for m in applier.messages]
