"""
Every official conformance stream, replayed through :class:`aguikit.session.Session`.

Each fixture's ``expect`` block is checked key by key.  Three things are decided here and
nowhere else:

* **The lane.**  aguikit expands chunks and keeps a state store like the TypeScript client,
  so a fixture's ``expectOverrides.typescript`` applies; the ``dotnet`` overrides do not.
* **The version the client speaks.**  Each corpus directory is written for a client of its
  own version: the ``1.1`` fixtures declare ``1.1`` on a clean stream and demand silence,
  the ``draft`` and ``1.0`` ones declare ``1.0``.  aguikit speaks 1.1, so the ``1.1``
  corpus runs with a default ``Session()``; the older ones are built with the
  ``protocol_version`` they are written for (their "a newer producer warns" fixtures
  declare ``1.1``).
* **What is not ours.**  ``request``/``requestAbsentPaths`` describe the outgoing request,
  and a fixture pinning ``client.maxProtocolVersion`` tests the HTTP client's era shims;
  those keys are skipped with the reason in :data:`NOT_OURS`.  The ``THINKING_*``
  translation is the receiver boundary's, so ``era-0-0-45-thinking-translated`` is asserted
  whole.

A fixture aguikit does not pass as written is listed in :data:`DIVERGENT` with the reason,
and its alternative assertion (what aguikit does instead) is run, so it can still fail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs
import pytest
from tests.corpus import MISSING, Stream, dotted_get, params, streams, subset_match

from aguikit.errors import AguiError, SchemaValidationError, TruncatedStreamError
from aguikit.session import Session
from aguikit.wire import to_wire

CLIENT_VERSION: Final = {"draft": "1.0", "1.0": "1.0"}
"""The corpora written for an older client than aguikit; the others run with the default."""

NOT_OURS: Final = {
    "request": "asserts the outgoing RunAgentInput: the HTTP client's concern",
    "requestAbsentPaths": "asserts the outgoing RunAgentInput: the HTTP client's concern",
}

ERA_KEYS: Final = ("warnings", "eventTypes", "eventTypesAbsent", "eventPaths", "eventAbsentPaths")
"""Keys an era-pinned fixture uses for the downgrade shim's output (HTTP client's concern)."""

RECEIVER_ERA_FIXTURES: Final = frozenset({"era-0-0-45-thinking-translated"})


@attrs.frozen
class Run:
    """What consuming one fixture produced."""

    session: Session
    error: AguiError | None


def consume(case: Stream, session: Session | None = None) -> Run:
    if session is None:
        version = CLIENT_VERSION.get(case.corpus)
        session = Session() if version is None else Session(protocol_version=version)
    try:
        for event in case.events:
            session.feed(event)
        session.finish()
    except AguiError as error:
        return Run(session, error)
    return Run(session, None)


@attrs.frozen
class Divergence:
    """A fixture aguikit deliberately does not pass as written, and what it does instead."""

    reason: str
    instead: Callable[[Run], None]


def _truncation_fails(run: Run) -> None:
    assert isinstance(run.error, TruncatedStreamError)
    assert "ended without a terminal event" in str(run.error)
    assert 1 == len(run.session.messages)


def _wrong_reasoning_role_fails(run: Run) -> None:
    assert isinstance(run.error, SchemaValidationError)
    assert "/role" == run.error.issues[0].pointer
    assert "'reasoning' was expected" in str(run.error)


def _outcome_array_fails(run: Run) -> None:
    assert isinstance(run.error, SchemaValidationError)
    assert "/outcome" == run.error.issues[0].pointer
    assert ["RUN_STARTED"] == [e.type for e in run.session.delivered]


DIVERGENT: Final[dict[str, Divergence]] = {
    "1.0/truncated-run-reported-as-completed": Divergence(
        "ADMITTED GAP in the corpus: it pins clients that report a truncated run as "
        "completed.  aguikit follows the rule the draft fixture "
        "truncated-stream-fails-the-run asserts: finish() raises TruncatedStreamError.",
        _truncation_fails,
    ),
    "draft/truncated-run-reported-as-completed": Divergence(
        "Same admitted gap as 1.0/truncated-run-reported-as-completed; the draft corpus's own "
        "truncated-stream-fails-the-run asserts the rule aguikit follows.",
        _truncation_fails,
    ),
    "1.1/reasoning-message-wrong-role-fatal": Divergence(
        "errorContains pins the TypeScript client's JSON-escaped zod wording "
        '(expected \\"reasoning\\"); aguikit fails the stream the same way with its '
        "own schema message at /role.",
        _wrong_reasoning_role_fails,
    ),
    "1.1/unknown-outcome-array-fatal": Divergence(
        "errorContains pins zod's wording ('expected object, received array'); aguikit fails "
        "the stream the same way with its own schema message at /outcome.",
        _outcome_array_fails,
    ),
}


def _expectations(case: Stream) -> dict[str, Any]:
    expect = case.expect
    override = case.raw.get("expectOverrides", {}).get("typescript")
    if override:
        expect.update({k: v for k, v in override.items() if k != "intentional"})
    for key in NOT_OURS:
        expect.pop(key, None)
    client = case.client or {}
    if "maxProtocolVersion" in client and case.name not in RECEIVER_ERA_FIXTURES:
        for key in ERA_KEYS:
            expect.pop(key, None)
    if case.input is not None:
        # The fixture's input messages are what the client sends, not what it receives.
        expect.pop("messages", None)
        expect.pop("messageCount", None)
    return expect


def _check(case: Stream, run: Run, expect: dict[str, Any]) -> None:
    session = run.session
    if expect.get("outcome") == "failed":
        assert run.error is not None, "the stream was consumed, the fixture wants a failure"
        assert expect["errorContains"] in str(run.error)
    else:
        assert run.error is None, f"unexpected failure: {run.error!r}"
    delivered = [to_wire(event) for event in session.delivered]
    types = [event["type"] for event in delivered]
    if "eventTypes" in expect:
        assert expect["eventTypes"] == types
    for absent in expect.get("eventTypesAbsent", []):
        assert absent not in types
    for path, value in expect.get("eventPaths", {}).items():
        assert value == dotted_get(delivered, path), path
    for path in expect.get("eventAbsentPaths", []):
        assert MISSING is dotted_get(delivered, path), path
    warnings = [warning.message for warning in session.warnings]
    for needle in expect.get("warnings", []):
        assert any(needle in message for message in warnings), (needle, warnings)
    if expect.get("noWarnings"):
        assert [] == warnings
    if "runError" in expect:
        errors = [e for e in delivered if e["type"] == "RUN_ERROR"]
        assert errors, "no RUN_ERROR was delivered"
        if isinstance(expect["runError"], str):
            assert any(expect["runError"] in e["message"] for e in errors)
    if "messageCount" in expect:
        assert expect["messageCount"] == len(session.messages)
    if "messages" in expect:
        actual = [to_wire(message) for message in session.messages]
        assert subset_match(expect["messages"], actual), actual
    if "state" in expect:
        assert subset_match(expect["state"], session.state), session.state


@pytest.mark.parametrize("case", params())
def test_every_corpus_stream_is_consumed_as_the_fixture_requires(case: Stream) -> None:
    """Each fixture's outcome, events, warnings, messages and state hold for the session."""
    run = consume(case)
    divergence = DIVERGENT.get(case.id)
    if divergence is not None:
        divergence.instead(run)
        return
    _check(case, run, _expectations(case))


def test_every_declared_divergence_names_a_fixture_that_exists() -> None:
    """A stale divergence entry (a renamed or deleted fixture) fails rather than lingering."""
    known = {case.id for case in streams()}
    if not known:
        pytest.skip("conformance corpus not available")
    assert set() == set(DIVERGENT) - known


def test_the_default_session_speaks_the_version_of_the_newest_corpus() -> None:
    """The ``1.1`` corpus runs with ``Session()``: that is only a claim if 1.1 is the default."""
    from aguikit.models import PROTOCOL_VERSION

    assert "1.1" == PROTOCOL_VERSION == Session()._receiver.protocol_version
    assert "1.1" not in CLIENT_VERSION


@pytest.mark.parametrize("case", params([s for s in streams() if s.corpus == "1.0"]))
def test_a_1_0_producer_is_no_noisier_for_a_1_1_consumer(case: Stream) -> None:
    """
    Negotiation, consuming side: every ``1.0`` corpus stream, fed to a default (1.1)
    session, warns exactly as it does for the 1.0 client it was written for, and never
    about the version: a producer declaring ``1.0`` is older, which is quiet.
    """
    default = consume(case)
    as_written = consume(case, Session(protocol_version="1.0"))

    assert [w.code for w in as_written.session.warnings] == [
        w.code for w in default.session.warnings
    ]
    assert [] == [w for w in default.session.warnings if w.code.startswith("protocol-version")]
