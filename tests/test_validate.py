"""
Tests for :mod:`aguikit.validate`: precise issues, any definition, two strictnesses, and two
backends that must agree.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import corpus, strategies
from tests.support import text_content

from aguikit import validate
from aguikit.errors import SchemaIssue, SchemaValidationError, UnknownEventTypeError
from aguikit.validate import definitions, is_valid, iter_schema_errors, validate_event
from aguikit.wire import to_wire

HAS_RS = importlib.util.find_spec("jsonschema_rs") is not None

VALID_EVENT = text_content("m", "hi")


def test_a_valid_event_passes_in_both_strictnesses() -> None:
    """No exception, no issue, ``is_valid`` true."""
    validate_event(VALID_EVENT)
    validate_event(VALID_EVENT, strict=False)

    assert [] == list(iter_schema_errors(VALID_EVENT))
    assert is_valid(VALID_EVENT)


@pytest.mark.parametrize(
    "doc",
    [
        {"type": "TEXT_MESSAGE_CONTENT"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": 1, "delta": 2, "extra": 3},
        {"type": "STATE_DELTA", "delta": [{"op": "add"}, {"op": "nope"}, 5]},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "interrupt"}},
    ],
)
def test_every_issue_has_a_pointer_a_keyword_and_a_message(doc: dict[str, Any]) -> None:
    """Issues are structured: a JSON pointer, the failing keyword, a readable message."""
    issues = list(iter_schema_errors(doc))

    assert issues
    for issue in issues:
        assert isinstance(issue, SchemaIssue)
        assert issue.pointer == "" or issue.pointer.startswith("/")
        assert issue.keyword
        assert issue.message


def test_dispatch_on_type_reports_the_missing_field_not_a_failed_union() -> None:
    """One precise issue, instead of "not valid under any of the given schemas"."""
    issues = list(iter_schema_errors({"type": "TEXT_MESSAGE_START"}))

    assert [("", "required", "'messageId' is a required property")] == [
        (i.pointer, i.keyword, i.message) for i in issues
    ]


def test_validate_event_raises_with_the_selected_definition_and_every_issue() -> None:
    """The error names the event class and carries all violations, not only the first."""
    with pytest.raises(SchemaValidationError) as info:
        validate_event({"type": "TOOL_CALL_START", "toolCallId": 1})

    assert "ToolCallStartEvent" == info.value.definition
    assert {("/toolCallId", "type"), ("", "required")} == {
        (i.pointer, i.keyword) for i in info.value.issues
    }


@pytest.mark.parametrize(
    ("doc", "value", "suggestion"),
    [
        ({"type": "runStarted"}, "runStarted", "RUN_STARTED"),
        ({"type": "NOT_AN_EVENT_AT_ALL"}, "NOT_AN_EVENT_AT_ALL", None),
        ({"messageId": "m"}, None, None),
    ],
)
def test_validate_event_on_an_unknown_or_missing_type_raises_unknown_event_type(
    doc: dict[str, Any], value: str | None, suggestion: str | None
) -> None:
    """The unknown-type error carries the value and the suggestion."""
    with pytest.raises(UnknownEventTypeError) as info:
        validate_event(doc)

    assert (value, suggestion) == (info.value.value, info.value.suggestion)


def test_iter_schema_errors_on_an_unknown_type_suggests_the_close_match() -> None:
    """The issue for an unknown type points at ``/type`` and names the known type."""
    issues = list(iter_schema_errors({"type": "text_message_end", "messageId": "m"}))

    assert ["/type"] == [i.pointer for i in issues]
    assert "TEXT_MESSAGE_END" in issues[0].message


def test_validate_event_records_the_event_index() -> None:
    """A caller consuming a stream can say which event failed."""
    with pytest.raises(SchemaValidationError) as info:
        validate_event({"type": "RUN_ERROR"}, event_index=7)

    assert 7 == info.value.event_index
    assert "event 7" in info.value.location


@pytest.mark.parametrize(
    ("definition", "good", "bad", "pointer"),
    [
        (
            "RunAgentInput",
            {"threadId": "t", "runId": "r", "messages": []},
            {"threadId": "t", "runId": "r", "messages": [{"id": "x", "role": "user"}]},
            "/messages/0",
        ),
        (
            "Message",
            {"id": "x", "role": "assistant"},
            {"id": "x", "role": "assistant", "toolCalls": "no"},
            "/toolCalls",
        ),
        (
            "ToolCall",
            {"id": "c", "type": "function", "function": {"name": "n", "arguments": ""}},
            {"id": "c", "type": "method", "function": {"name": "n", "arguments": ""}},
            "/type",
        ),
        ("ContentPart", {"type": "text", "text": "a"}, {"type": "text", "text": 1}, "/text"),
        ("JsonPatchOperation", {"op": "remove", "path": "/a"}, {"op": "remove"}, ""),
        ("TokenUsage", {"inputTokens": 0}, {"inputTokens": -1}, "/inputTokens"),
        (
            "AgentCapabilities",
            {},
            {"execution": {"maxIterations": 1.5}},
            "/execution/maxIterations",
        ),
        ("Metadata", {"any": None}, [], ""),
    ],
)
def test_any_definition_can_be_validated(
    definition: str, good: Any, bad: Any, pointer: str
) -> None:
    """``definition=`` selects any ``$defs`` entry; issues point into that document."""
    assert [] == list(iter_schema_errors(good, definition=definition))
    assert is_valid(good, definition)
    assert not is_valid(bad, definition)
    assert pointer == next(iter_schema_errors(bad, definition=definition)).pointer


def test_definitions_lists_every_model_class() -> None:
    """Every generated class has a definition of the same name to validate against."""
    assert set(strategies.MODEL_CLASSES) <= set(definitions())


def test_an_unknown_definition_is_a_key_error_with_a_suggestion() -> None:
    """A typo in a definition name is a caller bug, reported with the close match."""
    with pytest.raises(KeyError, match="RunAgentInput"):
        list(iter_schema_errors({}, definition="RunAgentInputs"))


def test_strict_rejects_undeclared_members_and_tolerant_allows_them() -> None:
    """Strict is the schema as written; tolerant is what a receiver applies."""
    doc = {**VALID_EVENT, "futureMember": 1}

    issues = list(iter_schema_errors(doc, strict=True))

    assert ["unevaluatedProperties"] == [i.keyword for i in issues]
    assert "futureMember" in issues[0].message
    assert [] == list(iter_schema_errors(doc, strict=False))
    assert (False, True) == (is_valid(doc), is_valid(doc, strict=False))


def test_tolerant_allows_nested_undeclared_members_but_still_checks_declared_ones() -> None:
    """Extra members anywhere are fine in tolerant mode; a wrong declared field is not."""
    good = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [{"id": "a", "role": "assistant", "x": 1}],
    }
    bad = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [{"id": "a", "role": "assistant", "x": 1, "content": 5}],
    }

    assert is_valid(good, strict=False)
    assert not is_valid(good, strict=True)
    assert ["/messages/0/content"] == [i.pointer for i in iter_schema_errors(bad, strict=False)]


def test_a_hostile_document_reports_a_bounded_number_of_issues() -> None:
    """A document that fails once per element does not produce an unbounded report."""
    doc = {"type": "STATE_DELTA", "delta": [{"op": "add"}] * 5000}

    issues = list(iter_schema_errors(doc))

    assert 101 >= len(issues)
    assert "maxIssues" == issues[-1].keyword


def _slow_validator_steps(data: Any, definition: str = "RunAgentInput") -> tuple[int, list[str]]:
    """How many times the pure-Python validator descends into a value while the whole
    explanation of ``data`` is computed, and the issues' pointers: a count of work that
    does not depend on how busy the machine is."""
    import sys

    steps = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal steps
        if event == "call" and frame.f_code.co_name == "descend":
            steps += 1

    sys.setprofile(count)
    try:
        issues = list(iter_schema_errors(data, definition, strict=False))
    finally:
        sys.setprofile(None)
    return steps, [issue.pointer for issue in issues]


def _request(messages: list[Any], **members: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r", "messages": messages, **members}


USER = {"id": "u", "role": "user", "content": "a valid message, long enough to cost something"}
BAD = {"id": "x", "role": "user", "content": 5}
PART = {"type": "text", "text": "a valid part"}


@pytest.mark.parametrize(
    ("small", "large"),
    [
        # one bad message after valid ones
        (_request([USER] * 10 + [BAD]), _request([USER] * 20_000 + [BAD])),
        # a bad top-level member beside valid messages
        (_request([USER] * 10, threadId=5), _request([USER] * 20_000, threadId=5)),
        # one message of many parts, the last one bad
        (
            _request([{**USER, "content": [PART] * 10 + [{"type": "text", "text": 5}]}]),
            _request([{**USER, "content": [PART] * 20_000 + [{"type": "text", "text": 5}]}]),
        ),
        # an assistant message of many tool calls, one bad
        (
            _request([{"id": "a", "role": "assistant", "toolCalls": [{"id": 1}]}]),
            _request(
                [
                    {
                        "id": "a",
                        "role": "assistant",
                        "toolCalls": [
                            {
                                "id": f"c{n}",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                            for n in range(20_000)
                        ]
                        + [{"id": 1}],
                    }
                ]
            ),
        ),
    ],
    ids=["valid-messages-then-one-bad", "bad-thread-id", "many-parts", "many-tool-calls"],
)
def test_explaining_a_document_costs_what_is_wrong_in_it_not_its_size(
    small: dict[str, Any], large: dict[str, Any]
) -> None:
    """The slow validator sees only what the fast verdict refused: the same work for one
    error among 10 elements as among 20,000 (the explanation of a request body used to
    walk every message, seconds for 100 KB)."""
    small_steps, small_issues = _slow_validator_steps(small)
    large_steps, large_issues = _slow_validator_steps(large)

    assert len(small_issues) == len(large_issues) >= 1
    assert small_steps == large_steps


def test_an_explanation_stops_at_the_cap_without_computing_the_rest() -> None:
    """50,000 bad messages cost what 101 cost: the report stops at 100 issues, and
    nothing past them is computed (it used to be materialised and sorted whole)."""
    few_steps, few = _slow_validator_steps(_request([BAD] * 101))
    many_steps, many = _slow_validator_steps(_request([BAD] * 50_000))

    assert 101 == len(few) == len(many)
    assert few_steps == many_steps


def test_explaining_a_hostile_document_allocates_a_bounded_amount() -> None:
    """A MiB of wrong-typed messages: the explanation allocates little beyond its 101
    issues (every error used to be materialised and sorted: 3.9 GB for 2.2 MB)."""
    import tracemalloc

    document = _request([{"id": n, "role": "user", "content": n} for n in range(30_000)])
    list(iter_schema_errors(_request([BAD]), "RunAgentInput", strict=False))  # warm caches
    tracemalloc.start()
    try:
        issues = list(iter_schema_errors(document, "RunAgentInput", strict=False))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert 101 == len(issues)
    assert peak < 4 * 1024 * 1024


# --------------------------------------------------------------------------- backend equivalence

needs_rs = pytest.mark.skipif(not HAS_RS, reason="jsonschema-rs is not installed")


def _python_verdict(data: Any, definition: str, strict: bool) -> bool:
    """The pure-Python validator alone, on the member the discriminator selects."""
    member, problem = validate._select(definition, data)
    return problem is None and bool(validate._python_validator(member, strict).is_valid(data))


def _explained_verdict(data: Any, definition: str, strict: bool) -> bool:
    """The explainer finds nothing: it judges arrays of definitions element by element
    with the fast verdict, so it must agree with both backends."""
    return next(iter_schema_errors(data, definition, strict=strict), None) is None


def _rust_whole_definition_verdict(data: Any, definition: str, strict: bool) -> bool:
    """jsonschema-rs on the *undispatched* definition: checks the dispatch as well."""
    rust = validate._rust_validator(definition, strict)
    return bool(rust.is_valid(data))


def _assert_backends_agree(data: Any, definition: str) -> None:
    for strict in (True, False):
        python = _python_verdict(data, definition, strict)

        assert python == _explained_verdict(data, definition, strict), (strict, data)
        assert python == is_valid(data, definition, strict=strict), (strict, data)
        assert python == _rust_whole_definition_verdict(data, definition, strict), (strict, data)


@needs_rs
@pytest.mark.parametrize("doc", corpus.event_params())
def test_the_accelerated_verdict_equals_the_python_verdict_on_the_corpus(doc: Any) -> None:
    """jsonschema-rs and jsonschema agree on every conformance event, valid or not."""
    _assert_backends_agree(doc, "Event")


_DEFINITIONS = sorted(strategies.MODEL_CLASSES)


@needs_rs
@given(
    st.sampled_from(_DEFINITIONS).flatmap(
        lambda name: strategies.instances(strategies.MODEL_CLASSES[name]).map(
            lambda obj: (name, obj)
        )
    )
)
def test_the_accelerated_verdict_equals_the_python_verdict_on_generated_documents(
    pair: tuple[str, Any],
) -> None:
    """Both backends accept every generated document of every definition."""
    name, obj = pair
    doc = to_wire(obj)

    _assert_backends_agree(doc, name)
    assert is_valid(doc, name)


@needs_rs
@given(
    st.sampled_from(_DEFINITIONS).flatmap(
        lambda name: strategies.mutations(strategies.instances(strategies.MODEL_CLASSES[name])).map(
            lambda m: (name, m)
        )
    )
)
def test_the_accelerated_verdict_equals_the_python_verdict_on_mutated_documents(
    pair: tuple[str, strategies.Mutation],
) -> None:
    """Both backends agree on single-place breakages, in strict and tolerant mode."""
    name, mutation = pair

    _assert_backends_agree(mutation.document, name)


@needs_rs
@given(strategies.mutations(strategies.events()))
def test_the_accelerated_verdict_equals_the_python_verdict_on_mutated_events(
    mutation: strategies.Mutation,
) -> None:
    """Through the 36-way ``Event`` union too, where dispatch comes into play."""
    _assert_backends_agree(mutation.document, "Event")


def test_a_pattern_is_read_as_ecma_262_reads_it_so_a_final_newline_is_not_the_end() -> None:
    """
    JSON Schema's ``pattern`` is ECMA-262, where ``$`` matches only at the end of the text;
    Python's also matches before a final newline, which made the explanation accept ``"\\n"``
    as a JSON pointer while jsonschema-rs (and the official suite's ajv) rejected it, and
    ``validate_event`` trusted the explanation.  A newline inside a segment stays legal.
    """
    delta = {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "\n"}]}

    assert not is_valid("\n", "JsonPointer")
    assert ["pattern"] == [i.keyword for i in iter_schema_errors("\n", "JsonPointer")]
    assert [] == list(iter_schema_errors("/\n", "JsonPointer"))
    with pytest.raises(SchemaValidationError) as caught:
        validate_event(delta)
    assert ["/delta/0/path"] == [i.pointer for i in caught.value.issues]
    if HAS_RS:
        _assert_backends_agree(delta, "Event")
