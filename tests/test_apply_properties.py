"""
Properties of chunk expansion and application that no list of examples pins down.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tests.strategies import chunk_form, conversations, explicit_form, json_values, split_texts

from aguikit.apply import Applier, apply_patch
from aguikit.chunks import normalize_all
from aguikit.errors import PatchError
from aguikit.models import TextMessageContentEvent, TextMessageEndEvent, TextMessageStartEvent
from aguikit.session import Session
from aguikit.wire import to_wire


def _view(session_or_applier: Session | Applier) -> tuple[list[dict[str, Any]], Any]:
    return (
        [to_wire(message) for message in session_or_applier.messages],
        session_or_applier.state,
    )


@given(conversations())
def test_the_chunk_form_and_the_explicit_form_build_the_same_conversation(
    runs: Any,
) -> None:
    """A conversation written as chunks and written as triads yields identical messages and
    state, including state deltas and RAW events between two chunks of one message."""
    explicit = Session()
    explicit.feed_all(explicit_form(runs))
    explicit.finish()
    chunked = Session()
    chunked.feed_all(chunk_form(runs))
    chunked.finish()

    assert _view(explicit) == _view(chunked)


@given(conversations())
def test_feeding_event_by_event_equals_normalizing_the_whole_stream_then_applying(
    runs: Any,
) -> None:
    """The streaming path (one event at a time) and the batch path agree."""
    events = chunk_form(runs)
    session = Session(verify=False)
    for event in events:
        session.feed(event)
    session.finish()
    applier = Applier()
    for event in normalize_all(events):
        applier.apply(event)

    assert _view(applier) == _view(session)


@given(split_texts())
def test_text_split_anywhere_assembles_to_the_original(case: tuple[str, list[str]]) -> None:
    """Deltas cut inside combining sequences and ZWJ emoji still assemble the exact text."""
    text, deltas = case
    applier = Applier()
    applier.apply(TextMessageStartEvent(message_id="m"))
    for delta in deltas:
        applier.apply(TextMessageContentEvent(message_id="m", delta=delta))
        applier.text_of("m")  # reading in between must not disturb the buffer
    applier.apply(TextMessageEndEvent(message_id="m"))

    assert text == applier.text_of("m")


_keys = st.sampled_from(["a", "b", "0", "1", "2", "-", "x~y", "", "01", "10", "\u00b2", "+1", " 1"])
_pointers = st.lists(_keys, max_size=3).map(
    lambda parts: "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
)
_ops = st.one_of(
    st.fixed_dictionaries(
        {"op": st.sampled_from(["add", "replace", "test"]), "path": _pointers, "value": json_values}
    ),
    st.fixed_dictionaries({"op": st.just("remove"), "path": _pointers}),
    st.fixed_dictionaries(
        {"op": st.sampled_from(["move", "copy"]), "from": _pointers, "path": _pointers}
    ),
)


@given(json_values, st.lists(_ops, max_size=4))
def test_patches_agree_with_jsonpatch_and_a_failed_one_changes_nothing(
    document: Any, patch: list[dict[str, Any]]
) -> None:
    """The in-place atomic patch gives jsonpatch's copying result, and on failure leaves the
    document exactly as it was."""
    before = copy.deepcopy(document)
    try:
        expected = jsonpatch.apply_patch(copy.deepcopy(document), patch)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
        with pytest.raises(PatchError):
            apply_patch(document, patch)
        assert before == document
        return
    assert expected == apply_patch(document, patch)


@given(json_values, _pointers)
@example([1, [2, 3]], "/\u00b2")
@example([1, [2, 3]], "/01")
@example([1, [2, 3]], "/1/01")
@example([1, [2, 3]], "/1/\u00b2")
@example([1, [2, 3]], "/1/-")
@example([1, [2, 3]], "/2")
@example([1, [2, 3]], "/1/2/0")
@example({"a": [0]}, "/a/ 1")
@example({"a": [0]}, "a")
def test_the_pointer_fast_paths_answer_as_jsonpointer_does(document: Any, pointer: str) -> None:
    """aguikit's pointer (its own split, list and dict steps) resolves every path to what
    jsonpointer resolves it to, and refuses exactly what jsonpointer refuses."""
    from aguikit.patch import _Pointer

    def outcome(make: Any) -> Any:
        try:
            ours = make(pointer)
            return ("parts", ours.parts, "last", ours.to_last(document))
        except jsonpointer.JsonPointerException as exc:
            return ("refused", str(exc))

    ours = outcome(_Pointer)
    theirs = outcome(jsonpointer.JsonPointer)
    assert theirs[0] == ours[0]
    if theirs[0] == "parts":
        assert theirs[1] == ours[1]
        assert theirs[3][0] is ours[3][0] and theirs[3][1] == ours[3][1]
