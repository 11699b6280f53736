"""Tests for aguikit.transport.sse: the WHATWG event-stream decoder and the SDK-exact encoder."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support import split_every

from aguikit._generated import models as m
from aguikit.encode import encode_sse, encode_sse_bytes
from aguikit.errors import DecodeError, LimitExceededError, WireFormatError
from aguikit.transport.sse import (
    MEDIA_TYPE,
    Frame,
    SSEDecoder,
    aiter_events,
    aiter_frames,
    encode,
    iter_events,
    iter_frames,
)


def frames(data: bytes, **kwargs: Any) -> list[Frame]:
    return list(iter_frames([data], **kwargs))


def datas(data: bytes) -> list[str]:
    return [f.data for f in frames(data)]


# --- decoding rules --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        pytest.param(b"data: a\n\ndata: b\n\n", ["a", "b"], id="lf"),
        pytest.param(b"data: a\r\rdata: b\r\r", ["a", "b"], id="cr"),
        pytest.param(b"data: a\r\n\r\ndata: b\r\n\r\n", ["a", "b"], id="crlf"),
        pytest.param(b"data: a\r\n\ndata: b\n\r\n", ["a", "b"], id="mixed-line-ends"),
        pytest.param(b"\xef\xbb\xbfdata: a\n\n", ["a"], id="leading-bom"),
        pytest.param(b": keep-alive\n\ndata: a\n\n", ["a"], id="comment-only-frame-skipped"),
        pytest.param(b"data: a\n: note\ndata: b\n\n", ["a\nb"], id="comment-inside-frame"),
        pytest.param(b"data: one\ndata: two\ndata:three\n\n", ["one\ntwo\nthree"], id="multi-line"),
        pytest.param(b"data:  two spaces\n\n", [" two spaces"], id="only-one-space-stripped"),
        pytest.param(b"data:no-space\n\n", ["no-space"], id="no-space"),
        pytest.param(b"data\n\n", [""], id="field-without-colon"),
        pytest.param(b"data:\n\n", [""], id="empty-data"),
        pytest.param(b"\n\n\ndata: a\n\n\n\n", ["a"], id="extra-blank-lines"),
        pytest.param(b"foo: bar\ndata: a\n\n", ["a"], id="unknown-field-ignored"),
        pytest.param(b"event: x\n\ndata: a\n\n", ["a"], id="frame-without-data-not-dispatched"),
        pytest.param(b"data: caf\xc3\xa9 \xf0\x9f\x8c\x9e\n\n", ["café 🌞"], id="utf-8"),
        pytest.param(b"data: a\xef\xbb\xbf\n\n", ["a\ufeff"], id="bom-not-at-start-is-content"),
        pytest.param(b"", [], id="empty-stream"),
        pytest.param(b": only a comment\n", [], id="trailing-comment-without-blank-line"),
    ],
)
def test_decoder_follows_the_event_stream_line_rules(stream: bytes, expected: list[str]) -> None:
    """Each WHATWG line rule produces the frames a conforming reader produces."""
    assert expected == datas(stream)


def test_event_id_and_retry_fields_are_reported_on_the_frame() -> None:
    """``event`` and ``retry`` belong to their frame; ``id`` persists as the last event id."""
    got = frames(b"event: e\nid: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")

    assert [("e", "7", 1500), (None, "7", None), (None, "", None)] == [
        (f.event, f.id, f.retry) for f in got
    ]


def test_invalid_retry_and_id_with_nul_are_ignored() -> None:
    """A non-digit retry and an id containing NUL are dropped, as the standard says."""
    got = frames(b"retry: 1s\nid: a\x00b\ndata: a\n\n")

    assert (None, None) == (got[0].retry, got[0].id)


def test_frames_are_numbered_and_located() -> None:
    """Frame numbers count dispatched frames; offsets point at the frame's first line."""
    got = frames(b": ka\n\ndata: a\n\n\ndata: b\n\n")

    assert [(1, 6), (2, 16)] == [(f.number, f.byte_offset) for f in got]


def test_cr_at_chunk_end_and_lf_at_next_chunk_start_are_one_line_end() -> None:
    """A CRLF split across two reads must not be read as two line ends (an empty line)."""
    decoder = SSEDecoder()

    first = decoder.feed(b"data: a\r")
    second = decoder.feed(b"\ndata: b\r")
    third = decoder.feed(b"\n\r")
    fourth = decoder.feed(b"\n")

    assert ([], [], ["a\nb"], []) == (first, second, [f.data for f in third], fourth)


def test_multi_byte_character_split_across_chunks_decodes() -> None:
    """A UTF-8 character cut between reads is reassembled, not replaced."""
    data = "data: 🌞é\n\n".encode()
    got = list(iter_frames([data[:7], data[7:9], data[9:]]))

    assert ["🌞é"] == [f.data for f in got]


def test_bom_split_across_chunks_is_stripped() -> None:
    """A BOM arriving one byte at a time is still recognised."""
    got = list(iter_frames([b"\xef", b"\xbb", b"\xbfdata: a\n\n"]))

    assert [("a", 3)] == [(f.data, f.byte_offset) for f in got]


def test_truncated_final_frame_raises_after_complete_frames() -> None:
    """A frame without its blank line at EOF is reported, after the frames before it."""
    seen: list[str] = []
    with pytest.raises(DecodeError) as info:
        for frame in iter_frames([b"data: a\n\ndata: b\n"]):
            seen.append(frame.data)

    assert ["a"] == seen
    assert (2, 9) == (info.value.frame, info.value.byte_offset)
    assert "truncated" in str(info.value)


def test_unterminated_last_line_is_truncation() -> None:
    """EOF in the middle of a data line is truncation too."""
    with pytest.raises(DecodeError, match="inside a line"):
        frames(b'data: {"type":')


def test_invalid_utf8_names_its_byte_offset_after_good_frames() -> None:
    """Bad UTF-8 is a DecodeError at the exact offending byte; earlier frames survive."""
    seen: list[str] = []
    with pytest.raises(DecodeError) as info:
        for frame in iter_frames([b"data: ok\n\ndata: ab\xffcd\n\n"]):
            seen.append(frame.data)

    assert ["ok"] == seen
    assert (2, 18) == (info.value.frame, info.value.byte_offset)


def _decoded(stream: bytes, cuts: list[bytes], limit: int) -> tuple[list[Frame], Any]:
    decoder = SSEDecoder(source="s", max_frame_bytes=limit)
    out: list[Frame] = []
    try:
        for cut in cuts:
            out += decoder.feed(cut)
        out += decoder.close()
    except DecodeError as exc:
        return out, (type(exc), str(exc), exc.frame, exc.byte_offset, decoder.bytes_consumed)
    return out, decoder.bytes_consumed


@pytest.mark.parametrize(
    "stream",
    [
        b"data: {}\n\ndata: {}\n\n",
        b"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\n\n",
        b"\xef\xbb\xbfid: 7\ndata: a\n\ndata: b\n\nid: 8\n\ndata: c\n\n",
        b": keep-alive\ndata: a\n\n: ping\n\ndata:b\n\ndata:\n\ndata\n\n",
        b"event: e\ndata: a\n\nretry: 5\ndata: b\n\ndata: c\n\n",
        b"data: a\ndata: b\n\ndata: c\n\n\n\ndata: d\n",
        b"data: ok\n\ndata: ab\xffcd\n\ndata: never\n\n",
        b'{"type": "RUN_STARTED"}\n\ndata: a\n\n',
    ],
)
def test_a_frame_of_one_data_line_taken_whole_is_what_the_line_steps_give(stream: bytes) -> None:
    """Fed whole, a ``data`` line and its blank line are taken as one frame (the fast
    step the proxy's judging relies on); fed a byte at a time, every line takes the
    general steps: the frames, their numbers, offsets, lines and ids, the errors and the
    bytes consumed are the same."""
    whole = _decoded(stream, [stream], 40)
    bytewise = _decoded(stream, split_every(stream, [1]), 40)

    assert whole == bytewise
    assert whole[0]


def test_decoder_stays_failed_after_an_error() -> None:
    """Once an error is reported, every later call reports it again."""
    decoder = SSEDecoder()
    with pytest.raises(DecodeError):
        decoder.feed(b"data: \xff\n\n")

    with pytest.raises(DecodeError):
        decoder.feed(b"data: fine\n\n")


def test_frame_larger_than_the_limit_raises_limit_exceeded() -> None:
    """A frame beyond ``max_frame_bytes`` raises, naming the setting."""
    with pytest.raises(LimitExceededError) as info:
        frames(b"data: " + b"x" * 100 + b"\n\n", max_frame_bytes=64)

    assert ("max_frame_bytes", 64, 1) == (info.value.limit, info.value.maximum, info.value.frame)


def test_endless_line_is_stopped_by_the_limit_while_streaming() -> None:
    """A peer that never sends a line end cannot grow the buffer past the limit."""
    decoder = SSEDecoder(max_frame_bytes=1000)
    with pytest.raises(LimitExceededError):
        for _ in range(100):
            decoder.feed(b"y" * 100)


def test_frames_under_the_limit_pass() -> None:
    """The limit applies per frame, not to the stream."""
    stream = b"data: " + b"x" * 50 + b"\n\n"

    assert 20 == len(frames(stream * 20, max_frame_bytes=64))


# --- events layer ----------------------------------------------------------------------


def test_events_are_parsed_from_frame_data() -> None:
    """Each frame's data becomes one JSON object."""
    stream = b'data: {"type":"RUN_STARTED",\ndata: "threadId":"t","runId":"r"}\n\n'

    assert [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}] == list(iter_events([stream]))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "expected a JSON object, got an array"),
        (b'"text"', "got a string"),
        (b"null", "got null"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": 1', "not valid JSON"),
    ],
)
def test_frame_data_that_is_not_an_object_is_a_located_decode_error(
    data: bytes, fragment: str
) -> None:
    """Bad frame data raises DecodeError naming the frame number and offset."""
    with pytest.raises(DecodeError) as info:
        list(iter_events([b"data: {}\n\ndata: " + data + b"\n\n"]))

    assert fragment in info.value.message
    assert (2, 10) == (info.value.frame, info.value.byte_offset)


def test_deep_nesting_raises_limit_exceeded_not_recursion_error() -> None:
    """100,000 nested arrays are refused by the depth guard, not by the interpreter."""
    stream = b'data: {"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n\n"

    with pytest.raises(LimitExceededError) as info:
        list(iter_events([stream]))

    assert "max_depth" == info.value.limit


def test_depth_limit_is_configurable_and_ignores_brackets_in_strings() -> None:
    """Brackets inside strings do not count; real nesting is compared with ``max_depth``."""
    shallow = b'data: {"s":"[[[[[[[[[[[[[[[[[[[[","a":[[1]]}\n\n'
    deep = b'data: {"a":[[[[1]]]]}\n\n'

    assert 1 == len(list(iter_events([shallow], max_depth=4)))
    with pytest.raises(LimitExceededError):
        list(iter_events([deep], max_depth=4))


def test_async_iteration_matches_sync_iteration() -> None:
    """The async decoder yields the same events from an async byte iterator."""
    stream = b'data: {"n":1}\r\n\r\ndata: {"n":2}\n\n'

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(len(stream)):
            yield stream[i : i + 1]

    async def collect() -> tuple[list[Frame], list[dict[str, Any]]]:
        got_frames = [f async for f in aiter_frames(chunks())]
        got_events = [e async for e in aiter_events(chunks())]
        return got_frames, got_events

    got_frames, got_events = asyncio.run(collect())

    assert frames(stream) == got_frames
    assert [{"n": 1}, {"n": 2}] == got_events


def test_async_iterators_end_at_their_error_and_close_their_source() -> None:
    """
    ``aiter_frames`` and ``aiter_events`` are iterator classes (mypyc compiles no async
    generators) that keep an async generator's contract: the frames before a fault come
    first, the fault is raised once and iteration then ends, and ``aclose()`` closes the
    byte source.
    """
    closed: list[str] = []

    async def chunks(*pieces: bytes) -> AsyncIterator[bytes]:
        try:
            for piece in pieces:
                yield piece
        finally:
            closed.append("source")

    async def drain(iterator: AsyncIterator[Any]) -> tuple[list[Any], BaseException | None]:
        got: list[Any] = []
        try:
            async for item in iterator:
                got.append(item)
        except (DecodeError, LimitExceededError) as exc:
            return got, exc
        return got, None

    async def scenario() -> None:
        # Bad UTF-8 after a good frame, in one chunk: the frame, then the error, then nothing.
        bad = aiter_frames(chunks(b"data: 1\n\ndata: \xff\n\n", b"data: 2\n\n"))
        got, error = await drain(bad)
        assert ["1"] == [f.data for f in got]
        assert isinstance(error, DecodeError)
        with pytest.raises(StopAsyncIteration):
            await anext(bad)
        # A frame cut at the end is the decoder's close() error, after the rest.
        cut = aiter_frames(chunks(b"data: 1\n\n", b"data: 2"))
        got, error = await drain(cut)
        assert ["1"] == [f.data for f in got]
        assert isinstance(error, DecodeError) and "truncated" in str(error)
        with pytest.raises(StopAsyncIteration):
            await anext(cut)
        # A frame that is not JSON ends aiter_events, though more frames follow it.
        events = aiter_events(chunks(b'data: {"n":1}\n\ndata: nope\n\ndata: {"n":3}\n\n'))
        got, error = await drain(events)
        assert [{"n": 1}] == got
        assert isinstance(error, DecodeError) and 2 == error.frame
        with pytest.raises(StopAsyncIteration):
            await anext(events)
        # aclose() mid-stream closes the source and delivers nothing more, decoded or not.
        closed.clear()
        early = aiter_events(chunks(b'data: {"n":1}\n\ndata: {"n":2}\n\n', b"data: 3\n\n"))
        assert {"n": 1} == await anext(early)
        await early.aclose()  # type: ignore[attr-defined]
        assert ["source"] == closed
        with pytest.raises(StopAsyncIteration):
            await anext(early)

    asyncio.run(scenario())


# --- properties ------------------------------------------------------------------------

_line_end = st.sampled_from(["\n", "\r", "\r\n"])
_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
    max_size=12,
)


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """A valid event stream with random line ends, comments, fields and multi-line data."""
    parts: list[str] = []
    if draw(st.booleans()):
        parts.append("\ufeff")
    for _ in range(draw(st.integers(0, 5))):
        lines = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["data", "data", "event", "id", "comment", "retry"]))
            value = draw(_text)
            if kind == "comment":
                lines.append(":" + value)
            elif kind == "retry":
                lines.append(f"retry: {draw(st.integers(0, 10_000))}")
            else:
                lines.append(f"{kind}:{draw(st.sampled_from(['', ' ']))}{value}")
        for line in lines:
            parts.append(line + draw(_line_end))
        blank = draw(_line_end)
        # After a CR, a lone LF would merge with it into one CRLF line end, not a blank line.
        parts.append("\r\n" if blank == "\n" and parts[-1].endswith("\r") else blank)
    return "".join(parts).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(stream=sse_streams(), data=st.data())
def test_any_split_of_a_stream_decodes_to_the_same_frames(
    stream: bytes, data: st.DataObject
) -> None:
    """Where the network cuts the bytes never changes the frames (CRLF and UTF-8 included)."""
    cuts = sorted(data.draw(st.sets(st.integers(0, len(stream)), max_size=12)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]

    assert frames(stream) == list(iter_frames(pieces))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(delta=st.text(max_size=40), value=_json_values, cut=st.integers(1, 9))
def test_encoder_output_decodes_back_to_the_event(delta: str, value: Any, cut: int) -> None:
    """encode → decode (split anywhere) is the identity on the wire dict."""
    from aguikit.wire import to_wire

    events = [
        m.TextMessageContentEvent(message_id="m", delta=delta or "x"),
        m.CustomEvent(name="n", value=value),
    ]
    stream = b"".join(encode_sse_bytes(e) for e in events)
    pieces = split_every(stream, [cut])

    assert [to_wire(e) for e in events] == list(iter_events(pieces))


# --- encoder vs. the official SDK -------------------------------------------------------


def _sample_events() -> list[Any]:
    """One event of every type the official SDK also defines, most optional fields set."""
    msg = {"subagent_run_id": "s1"}
    return [
        m.RunStartedEvent(
            thread_id="t", run_id="r", timestamp=1, parent_run_id="p", protocol_version="1.0"
        ),
        m.RunFinishedEvent(thread_id="t", run_id="r", result={"ok": True}, metadata={"k": 1}),
        m.RunErrorEvent(message="boom", code="E1", raw_event={"x": [1, 2]}),
        m.StepStartedEvent(step_name="s", **msg),
        m.StepFinishedEvent(step_name="s"),
        m.TextMessageStartEvent(message_id="m", role=m.TextMessageRole("assistant"), **msg),
        m.TextMessageContentEvent(message_id="m", delta='héllo "quoted" \n\t\x01 🌞 </script>'),
        m.TextMessageEndEvent(message_id="m", **msg),
        m.TextMessageChunkEvent(message_id="m", delta="d", name="bot"),
        m.ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m"),
        m.ToolCallArgsEvent(tool_call_id="c", delta='{"a":'),
        m.ToolCallEndEvent(tool_call_id="c"),
        m.ToolCallChunkEvent(tool_call_id="c", tool_call_name="f", delta="{}"),
        m.ToolCallResultEvent(message_id="r1", tool_call_id="c", content="42", role="tool"),
        m.StateSnapshotEvent(snapshot={"a": [1, {"b": None}], "ü": "ß"}),
        m.StateDeltaEvent(delta=[m.AddOperation(path="/a", value=1)]),
        m.MessagesSnapshotEvent(messages=[m.UserMessage(id="u", content="hi")]),
        m.ActivitySnapshotEvent(message_id="a", activity_type="plan", content={"x": 1}),
        m.ActivityDeltaEvent(
            message_id="a", activity_type="plan", patch=[m.RemoveOperation(path="/x")]
        ),
        m.RawEvent(event={"any": "thing"}, source="openai"),
        m.CustomEvent(name="n", value=[1, "two", None]),
        m.ReasoningStartEvent(message_id="r"),
        m.ReasoningMessageStartEvent(message_id="rm"),
        m.ReasoningMessageContentEvent(message_id="rm", delta="hmm"),
        m.ReasoningMessageEndEvent(message_id="rm"),
        m.ReasoningMessageChunkEvent(message_id="rm", delta="d"),
        m.ReasoningEndEvent(message_id="r"),
        m.ReasoningEncryptedValueEvent(
            subtype=m.ReasoningEncryptedValueSubtype("message"),
            entity_id="rm",
            encrypted_value="b64",
        ),
        m.SubagentStartedEvent(subagent_run_id="s1", name="researcher", parent_tool_call_id="c"),
        m.SubagentFinishedEvent(subagent_run_id="s1", result="done"),
        m.SubagentErrorEvent(subagent_run_id="s1", message="failed"),
    ]


def test_sample_covers_every_event_type_the_sdk_defines() -> None:
    """The byte-equality test below really covers every shared event type."""
    import ag_ui.core as sdk

    from aguikit._generated.registry import EVENT_CLASSES

    ours = {e.type for e in _sample_events()}
    # The shared set is the SDK's own: an event aguikit adds later is not the SDK's concern.
    expected = {member.value for member in sdk.EventType}

    assert expected == ours
    assert expected <= set(EVENT_CLASSES)
    assert all(hasattr(sdk, EVENT_CLASSES[t].__name__) for t in expected)


@pytest.mark.parametrize("event", _sample_events(), ids=lambda e: e.type)
def test_encoder_is_byte_identical_to_the_official_sdk(event: Any) -> None:
    """For every event type, aguikit's frame equals ``ag_ui.encoder.EventEncoder``'s."""
    import ag_ui.core as sdk
    from ag_ui.encoder import EventEncoder

    from aguikit.wire import to_wire

    sdk_event = getattr(sdk, type(event).__name__).model_validate(to_wire(event))

    assert EventEncoder().encode(sdk_event) == encode_sse(event)
    assert EventEncoder().get_content_type() == MEDIA_TYPE


def test_encoder_accepts_wire_dicts_and_refuses_nan() -> None:
    """A mapping is written as is; a value JSON cannot hold is a WireFormatError."""
    assert 'data: {"type":"CUSTOM","name":"n","value":1}\n\n' == encode(
        {"name": "n", "type": "CUSTOM", "value": 1}
    )
    with pytest.raises(WireFormatError):
        encode({"type": "CUSTOM", "name": "n", "value": float("nan")})


def test_the_frame_writer_takes_wire_dicts_and_points_typed_events_to_aguikit_encode() -> None:
    """The transport floor knows no models: a typed event is refused with the way forward."""
    with pytest.raises(TypeError, match=r"aguikit\.encode"):
        encode(m.CustomEvent(name="n", value=1))  # type: ignore[arg-type]


def test_frame_records_are_values() -> None:
    """Frames are immutable records that compare by value."""
    frame = Frame(data="x", number=1)

    assert Frame(data="x", number=1) == frame
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        frame.data = "y"  # type: ignore[misc]


def test_encoded_json_is_what_json_dumps_compact_gives() -> None:
    """The payload is compact JSON with UTF-8 kept, so it is one ``data:`` line."""
    event = m.CustomEvent(name="ü", value={"a": "line\nbreak"})
    body = encode_sse(event)

    assert body.count("\n") == 2
    assert {"type": "CUSTOM", "name": "ü", "value": {"a": "line\nbreak"}} == json.loads(body[6:])


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=200)
    | st.lists(
        st.sampled_from([b"data:", b" ", b"\r", b"\n", b"{", b"}", b"[", b'"', b"\xff", b":"]),
        max_size=60,
    ).map(b"".join),
    cut=st.integers(1, 17),
)
def test_arbitrary_bytes_raise_only_decode_errors(data: bytes, cut: int) -> None:
    """Whatever the bytes, the decoder yields objects or raises DecodeError, nothing else."""
    pieces = split_every(data, [cut])
    try:
        for event in iter_events(pieces, max_depth=8):
            assert isinstance(event, dict)
    except DecodeError:
        pass


@pytest.mark.parametrize("digits", [19, 5000, 100_000])
def test_a_retry_field_thousands_of_digits_long_is_clamped_not_a_value_error(digits: int) -> None:
    """Any run of ASCII digits is a valid ``retry``; Python's 4300-digit limit is not the
    stream's: the frame is kept, the value clamped, and later offsets stay right."""
    from aguikit.transport.sse import MAX_RETRY

    data = b"retry: " + b"9" * digits + b'\ndata: {"a":1}\n\ndata: {"b":2}\n\n'

    frames = list(iter_frames([data]))

    assert [MAX_RETRY, None] == [f.retry for f in frames]
    assert [1, 2] == [f.number for f in frames]
    assert data.index(b'data: {"b"') == frames[1].byte_offset


def test_a_retry_with_leading_zeros_is_its_value() -> None:
    """``retry: 000…0005`` is 5, however many zeros lead."""
    frames = list(iter_frames([b"retry: " + b"0" * 5000 + b"5\ndata: x\n\n"]))

    assert 5 == frames[0].retry


def test_no_field_value_escapes_the_decoder_as_a_bare_python_error() -> None:
    """Whatever a field holds, the decoder raises located aguikit errors or nothing."""
    from aguikit.errors import AguiError

    values = [b"9" * 10_000, b"\xff\xfe", b"\x00", b"-1", b"1e9", "٣".encode(), b" " * 100]
    for name in (b"data", b"event", b"id", b"retry", b"x"):
        for value in values:
            try:
                list(iter_frames([name + b": " + value + b"\n\n"]))
            except AguiError as error:
                assert error.byte_offset is not None
