"""
Tests for :mod:`aguikit.jsonio`'s two engines: jiter reads first, ``json`` reads what jiter
refuses, and a caller cannot tell which one answered (same value, same located error).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import json_values

from aguikit.errors import DecodeError, LimitExceededError
from aguikit.jsonio import loads, loads_object, quick_object


def _same(left: Any, right: Any) -> bool:
    """Equal, and of the same types all the way down (``True`` is not ``1``)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same, left, right))
    return bool(left == right)


@given(json_values)
def test_a_document_reads_as_json_reads_it(value: Any) -> None:
    """Whatever engine answers, the value is the standard library's, as text and as bytes."""
    text = json.dumps(value, ensure_ascii=False)
    expected = json.loads(text)

    assert _same(expected, loads(text))
    assert _same(expected, loads(text.encode("utf-8")))


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ('{"a":1,"a":2,"b":3}', {"a": 2, "b": 3}),  # the first place, the last value
        ('{"x":"\\ud800"}', {"x": "\ud800"}),  # a lone surrogate escape jiter refuses
        ('{"x":"\\udc00\\ud800"}', {"x": "\udc00\ud800"}),
        ('{"x":' + "9" * 4000 + "}", {"x": int("9" * 4000)}),  # past jiter's range
        ('{"x":1e400}', {"x": float("inf")}),
        ('{"x":-0}', {"x": 0}),
        ('{"x":2.2250738585072011e-308}', {"x": 2.2250738585072011e-308}),
        ('  {"x":[true,false,null]}\r\n', {"x": [True, False, None]}),
    ],
)
def test_what_only_one_engine_reads_reads_the_same(document: str, expected: Any) -> None:
    assert _same(expected, loads(document))
    assert _same(expected, loads_object(document.encode("utf-8", "surrogatepass")))


_JSON = "not valid JSON: "


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b'{"x":NaN}', _JSON + "NaN is not valid JSON"),
        (b'{"x":-Infinity}', _JSON + "-Infinity is not valid JSON"),
        (
            b'{"x":1,}',
            _JSON + "Expecting property name enclosed in double quotes (line 1 column 8)",
        ),
        (b'{"x":"a\x01b"}', _JSON + "Invalid control character at (line 1 column 8)"),
        (b'{"x":1}x', _JSON + "Extra data (line 1 column 8)"),
        (b'{"x":1}\x0c', _JSON + "Extra data (line 1 column 8)"),
        (b'\xef\xbb\xbf{"x":1}', _JSON + "Expecting value (line 1 column 1)"),
        (b"", _JSON + "Expecting value (line 1 column 1)"),
        (b'{"x":"\xed\xa0\x80"}', "invalid UTF-8 (invalid continuation byte) at byte 126"),
        (b'{"x":"\xff"}', "invalid UTF-8 (invalid start byte) at byte 126"),
    ],
)
def test_a_refused_document_gets_the_located_error_it_always_got(
    document: bytes, message: str
) -> None:
    """The standard library's words and place (these are the messages before jiter came)."""
    with pytest.raises(DecodeError) as caught:
        loads(document, source="s.jsonl", line=7, byte_offset=120)
    error = caught.value
    assert ("s.jsonl", 7, 120) == (error.source, error.line, error.byte_offset)
    assert message == error.message
    assert ("AGUI-D002" if message.startswith(_JSON) else "AGUI-D001") == error.rule
    assert quick_object(document) is None


def test_the_depth_guard_runs_before_either_engine() -> None:
    deep = "[" * 65 + "]" * 65
    with pytest.raises(LimitExceededError):
        loads(deep, max_depth=64)
    assert quick_object('{"x":' + deep + "}", 64) is None
    assert {"x": [[[]]]} == quick_object('{"x":[[[]]]}', 4)


@given(
    st.one_of(
        json_values.filter(lambda v: not isinstance(v, dict)),
        st.binary(max_size=8).filter(lambda b: b"{" not in b),
    )
)
def test_quick_object_answers_only_for_an_object(value: Any) -> None:
    """Anything but an object (a list, a number, bytes that are not JSON) is ``None``."""
    document = value if isinstance(value, bytes) else json.dumps(value).encode()
    assert quick_object(document) is None
