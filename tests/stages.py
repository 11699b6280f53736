"""
Run a stream through one named stage of aguikit and collect what that stage reports.

``docs/spec-coverage.toml`` holds each normative statement of the specification with the
stage that enforces it and a minimal stream built from the statement; the test runs the
stream through exactly that stage, so an entry that says "held by the verifier" is proved
by the verifier alone, not by whichever stage of a session happened to object first.

Each runner returns a :class:`Outcome`: the catalogue ids of the errors raised (a stage
stops at its first fatal error, as a consumer does), the ids of the warnings it emitted,
and a projection of what it produced (delivered events, messages, state, runs, a request
body) for an entry that states what a conforming stream must leave behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs
from tests.support import typed

from aguikit.apply import Applier
from aguikit.catalogue import RULES_BY_SYMBOL, Severity
from aguikit.checker import check_events
from aguikit.chunks import ChunkNormalizer
from aguikit.client import prepare_input
from aguikit.errors import AguiError
from aguikit.models import AgentCapabilities
from aguikit.receiver import Receiver
from aguikit.session import Session
from aguikit.validate import validate_event
from aguikit.verify import Verifier
from aguikit.wire import parse_as, to_wire

Wire = dict[str, Any]


@attrs.define
class Outcome:
    """What one stage made of one stream."""

    errors: list[str] = attrs.field(factory=list)
    """Catalogue ids of the fatal errors, in order (at most one for a pipeline stage)."""
    warnings: list[str] = attrs.field(factory=list)
    """Catalogue ids of the warnings, in order."""
    projection: dict[str, Any] = attrs.field(factory=dict)
    """What the stage produced, as wire JSON, for a statement about the result."""
    messages: list[str] = attrs.field(factory=list)
    """The errors' and warnings' texts, for a failing test's report."""

    def error(self, error: AguiError) -> None:
        self.errors.append(error.rule or type(error).__name__)
        self.messages.append(str(error))

    def warn(self, symbol: str, message: str) -> None:
        self.warnings.append(RULES_BY_SYMBOL[symbol].id)
        self.messages.append(message)


def documents(text: str) -> list[Wire]:
    """The JSON documents of a JSON Lines example, one a line (blank lines skipped)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _wire_all(items: Iterable[Any]) -> list[Wire]:
    return [to_wire(item) for item in items]


def _schema(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    for document in docs:
        try:
            validate_event(document)
        except AguiError as error:
            outcome.error(error)
    return outcome


def _receiver(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    receiver = Receiver(on_warning=outcome.warn, **settings)
    delivered = []
    try:
        for document in docs:
            event = receiver.receive(document)
            if event is not None:
                delivered.append(event)
    except AguiError as error:
        outcome.error(error)
    outcome.projection = {"delivered": _wire_all(delivered)}
    return outcome


def _normalizer(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    normalizer = ChunkNormalizer(**settings)
    delivered = []
    try:
        for document in docs:
            delivered.extend(normalizer.normalize(typed(document)))
        delivered.extend(normalizer.finish())
    except AguiError as error:
        outcome.error(error)
    outcome.projection = {"delivered": _wire_all(delivered)}
    return outcome


def _verifier(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    verifier = Verifier(**settings)
    try:
        for document in docs:
            verifier.verify(typed(document))
        verifier.finish()
    except AguiError as error:
        outcome.error(error)
    return outcome


def _applier(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    applier = Applier(on_warning=outcome.warn, **settings)
    for document in docs:
        try:
            applier.apply(typed(document))
        except AguiError as error:
            outcome.error(error)
            break
    outcome.projection = {"state": applier.state, "messages": _wire_all(applier.messages)}
    return outcome


def _session(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    session = Session(**settings)
    try:
        session.feed_all(docs)
        session.finish()
    except AguiError as error:
        outcome.error(error)
    for warning in session.warnings:
        outcome.warn(warning.code, warning.message)
    outcome.projection = {
        "state": session.state,
        "messages": _wire_all(session.messages),
        "runs": [{"runId": run.run_id, "status": run.status} for run in session.runs],
        "subagents": [
            {"runId": subagent.run_id, "status": str(subagent.status)}
            for subagent in session.subagents
        ],
        "delivered": _wire_all(session.delivered),
    }
    return outcome


def _checker(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    report = check_events(docs, "example")
    for finding in report.findings:
        target = outcome.errors if finding.severity is Severity.ERROR else outcome.warnings
        target.append(finding.rule)
        outcome.messages.append(finding.message)
    return outcome


def _client(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    (run_input,) = docs
    warnings: list[str] = []
    try:
        body = prepare_input(run_input, warnings=warnings, **settings)
    except AguiError as error:
        outcome.error(error)
        body = None
    outcome.messages.extend(warnings)
    # A warning the catalogue names starts with its id (``AGUI-W002 unknown-member: ...``);
    # a downgrade's note names what it dropped and has none.
    outcome.warnings.extend(w.split()[0] for w in warnings if w.startswith("AGUI-"))
    outcome.projection = {"body": body, "warnings": len(warnings)}
    return outcome


def _capabilities(docs: list[Wire], settings: Mapping[str, Any]) -> Outcome:
    outcome = Outcome()
    (declaration,) = docs
    try:
        outcome.projection = {"declaration": to_wire(parse_as(AgentCapabilities, declaration))}
    except AguiError as error:
        outcome.error(error)
    return outcome


STAGES: Final[Mapping[str, Callable[[list[Wire], Mapping[str, Any]], Outcome]]] = {
    "schema": _schema,
    "receiver": _receiver,
    "normalizer": _normalizer,
    "verifier": _verifier,
    "applier": _applier,
    "session": _session,
    "checker": _checker,
    "client": _client,
    "capabilities": _capabilities,
}
"""Every stage an entry may name, by name: ``validate_event`` (``schema``), ``Receiver``,
``ChunkNormalizer``, ``Verifier``, ``Applier``, a whole ``Session``, ``aguikit check``'s
pass (``checker``), the client's ``prepare_input`` (``client``, one run input) and the
client's reading of an ``AgentCapabilities`` declaration (``capabilities``)."""


def run(stage: str, text: str, settings: Mapping[str, Any] | None = None) -> Outcome:
    """Run the JSON Lines ``text`` through ``stage`` with ``settings`` as its options."""
    return STAGES[stage](documents(text), dict(settings or {}))
