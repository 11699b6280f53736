"""
The one rule catalogue: every id a user can see is a row, and every row's example really
triggers it, through the stage that reports it.

The verifier's rows are exercised in ``tests/test_rules.py`` (through ``verify_all``);
this file runs the rows of every other stage: schema, receiver, normalizer, applier,
patches, decoder and limits.  A row whose example does not trigger it, or an id some code
reports that is not a row, fails here.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from tests.support import typed

from aguikit import catalogue
from aguikit.apply import Applier
from aguikit.catalogue import RULES, RULES_BY_ID, Rule, Severity, Stage, find_rule, suggest_rule
from aguikit.checker import check_bytes
from aguikit.chunks import normalize_all
from aguikit.cli import main
from aguikit.client import prepare_input
from aguikit.conversation import check_exchanges, exchanges_of_example, read_har
from aguikit.errors import (
    AguiError,
    ContentTypeError,
    HTTPStatusError,
    PatchError,
    SchemaValidationError,
    TransportError,
    UnknownEventTypeError,
)
from aguikit.proto import encode_message, iter_proto_wire
from aguikit.server import RunWriter
from aguikit.server.eventlog import MemoryEventLog
from aguikit.session import Session
from aguikit.transport.jsonl import encode_line, iter_jsonl
from aguikit.transport.proto import looks_like_frames
from aguikit.transport.sse import iter_events
from aguikit.validate import validate_event

SRC = Path(__file__).resolve().parent.parent / "src" / "aguikit"

OTHER_STAGES = [rule for rule in RULES if rule.stage not in (Stage.VERIFIER, Stage.TRANSPORT)]
"""Rows run here; the transport rows need a live endpoint (their errors: below and
tests/test_http.py)."""


def _produced(example: tuple[Mapping[str, Any], ...], setting: str | None = None) -> set[str]:
    """The ids a repair-mode ``RunWriter`` reports emitting the example's in-run events
    (it writes the example's first ``RUN_STARTED`` and last terminal event itself: a
    ``RUN_ERROR`` last means the handler raises), as warnings or as its RUN_ERROR's code;
    a row naming ``max_total_events`` writes to a memory log that holds one event."""
    started = example[0]
    run_input = {"threadId": started["threadId"], "runId": started["runId"], "messages": []}

    async def produce() -> set[str]:
        if setting == "max_total_events":
            log = MemoryEventLog(max_total_events=1)
            sent: list[Mapping[str, Any]] = []

            async def sink(wire: Mapping[str, Any]) -> None:
                await log.append("r1", wire)
                sent.append(wire)

            run = RunWriter(run_input, mode="repair", sink=sink)
        else:
            sent = []
            run = RunWriter(run_input, mode="repair")
        async with run:
            for document in example[1:-1]:
                await run.emit(document)
            if example[-1]["type"] == "RUN_ERROR":
                raise RuntimeError("the example's handler fails")
        codes = {e.get("code") for e in [*run.events, *sent] if e["type"] == "RUN_ERROR"}
        return {warning.rule for warning in run.warnings} | {str(code) for code in codes}

    return asyncio.run(produce())


def _logged(example: tuple[Mapping[str, Any], ...]) -> set[str]:
    """The codes of the ``RUN_ERROR`` a Redis event log (on a real ``redis-server``) writes
    when a run's producer fails as the example's last event says: its lease lapses
    (``AGUI-E021``, the renewals stopped as in a killed worker), or its next event cannot
    be logged (``AGUI-E022``, the stream gone under it)."""
    from tests.redis_server import redis_server

    from aguikit.server.redis_log import RedisEventLog

    async def produce(url: str) -> set[str]:
        log = RedisEventLog.from_url(url, producer_ttl=0.5)
        assert await log.claim("r1")
        for document in example[:-1]:
            await log.append("r1", document)
        if example[-1]["code"] == "AGUI-E021":
            log._leases["r1"].cancel()
            logged = [wire async for _, wire in log.follow("r1", None)]
        else:
            await log.redis.delete(log.prefix + "r1")
            with contextlib.suppress(AguiError):
                await log.append("r1", {"type": "TEXT_MESSAGE_START", "messageId": "m1"})
            await log.end("r1")
            logged = [wire for _, wire in await log.read("r1")]
        return {str(w.get("code")) for w in logged if w["type"] == "RUN_ERROR"}

    with redis_server() as url:
        return asyncio.run(produce(url))


def _stored(rule: Rule) -> set[str]:
    """The ids a thread store reports when the example's events (``example[1:]``, one
    recorded run) are recorded into their thread and the request (``example[0]``) then
    loads its ``threadId``: on a :class:`MemoryThreadStore` (``setting`` at 1), and, for the
    store-failure row, on a :class:`RedisThreadStore` whose ``redis-server`` has stopped."""
    from tests.redis_server import redis_server

    from aguikit.server.redis_threads import RedisThreadStore
    from aguikit.server.threads import THREAD_STORE_FAILED, MemoryThreadStore, ThreadError

    request, events, setting = rule.example[0], rule.example[1:], rule.setting
    recorded = str(events[0]["threadId"])
    seen: set[str] = set()

    async def run(store: Any) -> None:
        try:
            await store.record(recorded, events)
            await store.load(str(request["threadId"]), None)
        except ThreadError as error:
            seen.add(error.rule)

    asyncio.run(run(MemoryThreadStore(**({setting: 1} if setting else {}))))
    if rule.id == THREAD_STORE_FAILED:
        with redis_server() as url:
            store = RedisThreadStore.from_url(url)
        asyncio.run(run(store))
    return seen


def _triggered(rule: Rule) -> set[str]:
    """Every catalogue id running ``rule``'s example through its stage reports."""
    seen: set[str] = set()

    def note(error: AguiError) -> None:
        if error.rule is not None:
            seen.add(error.rule)

    if rule.stage is Stage.DECODER:
        assert rule.example_bytes is not None
        settings = {}
        if rule.setting is not None:
            settings[rule.setting] = 3 if rule.setting == "max_depth" else 16
        data = rule.example_bytes
        decode: Any = iter_events if data.startswith(b"data:") else iter_jsonl
        if looks_like_frames(data):
            decode = iter_proto_wire
        try:
            list(decode([data], **settings))
        except AguiError as error:
            note(error)
    elif rule.stage is Stage.ENCODER:
        for document in rule.example:
            try:
                encode_message(document)
            except AguiError as error:
                note(error)
    elif rule.stage is Stage.SCHEMA:
        for document in rule.example:
            try:
                validate_event(document)
            except AguiError as error:
                note(error)
    elif rule.stage is Stage.NORMALIZER:
        try:
            normalize_all(typed(d, in_process=rule.in_process) for d in rule.example)
        except AguiError as error:
            note(error)
    elif rule.stage is Stage.APPLIER:
        symbols: list[str] = []
        applier = Applier(on_warning=lambda symbol, message: symbols.append(symbol))
        for document in rule.example:
            try:
                applier.apply(typed(document, in_process=rule.in_process))
            except AguiError as error:
                note(error)
        seen |= {catalogue.RULES_BY_SYMBOL[symbol].id for symbol in symbols}
    elif rule.stage is Stage.PRODUCER:
        seen |= _produced(rule.example, rule.setting)
    elif rule.stage is Stage.EVENT_LOG:
        seen |= _logged(rule.example)
    elif rule.stage is Stage.THREAD_STORE:
        seen |= _stored(rule)
    elif rule.stage is Stage.CLIENT:
        sent: list[str] = []
        for document in rule.example:
            prepare_input(document, warnings=sent)
        seen |= {line.split()[0] for line in sent}
    elif rule.stage is Stage.CHECKER:
        if rule.example_bytes is not None:
            data, name = rule.example_bytes, "example.sse" if rule.id == "AGUI-K004" else "example"
        else:
            data, name = b"".join(encode_line(d).encode() for d in rule.example), "example.jsonl"
        seen |= {finding.rule for finding in check_bytes(data, name).findings}
    elif rule.stage is Stage.CONVERSATION:
        if rule.example_bytes is not None:
            recording = read_har("example.har", data=rule.example_bytes)
            seen |= {recording.cut.rule} if recording.cut and recording.cut.rule else set()
        else:
            report = check_exchanges(exchanges_of_example(rule.example), "example.har")
            seen |= {finding.rule for finding in report.findings}
    elif rule.stage is Stage.RECEIVER:
        session = Session()
        try:
            session.feed_all(rule.example)
            session.finish()
        except AguiError as error:
            note(error)
        seen |= {warning.rule for warning in session.warnings}
    return seen


@pytest.mark.parametrize("rule", OTHER_STAGES, ids=[rule.id for rule in OTHER_STAGES])
def test_each_rows_example_triggers_that_row_through_its_stage(rule: Rule) -> None:
    """The documented example is a real case of the rule it illustrates."""
    assert rule.id in _triggered(rule)


def test_the_transport_rows_are_what_the_transport_errors_carry() -> None:
    """Each HTTP failure class reports its row, so ``aguikit rules`` explains it."""
    assert "AGUI-T001" == TransportError("down").rule
    assert "AGUI-T002" == HTTPStatusError(500, "boom").rule
    assert "AGUI-T003" == ContentTypeError("text/html").rule


def test_every_error_class_that_reports_a_rule_names_a_row() -> None:
    """Schema, patch and decode errors carry catalogue ids too, not only protocol errors."""
    assert "AGUI-S001" == SchemaValidationError("Event", []).rule
    assert "AGUI-S002" == UnknownEventTypeError("X").rule
    assert "AGUI-P001" == PatchError("state", "nope").rule


def test_ids_are_stable_in_form_and_symbols_are_kebab_case() -> None:
    """``AGUI-`` + a stage letter + three digits; symbols are what people grep for."""
    assert [] == [r.id for r in RULES if not re.fullmatch(r"AGUI-[CDEKLNPRSTVW]\d{3}", r.id)]
    assert [] == [r.symbol for r in RULES if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.symbol)]
    assert len(RULES) == len(RULES_BY_ID) == len(catalogue.RULES_BY_SYMBOL)


def test_every_row_but_the_transports_has_an_example() -> None:
    """A row without an example could not be checked by this file."""
    missing = [
        rule.id
        for rule in RULES
        if rule.stage is not Stage.TRANSPORT
        and not (rule.example or rule.example_bytes)
        and not rule.at_finish
    ]

    assert [] == missing


def _reported_ids() -> set[str]:
    """Every ``AGUI-…`` literal in the package's code outside the catalogue itself."""
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        if path.name == "catalogue.py" or "_generated" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found |= set(re.findall(r"\bAGUI-[A-Z]\d{3}\b", node.value))
    return found


def test_every_id_the_code_reports_is_a_row_of_the_catalogue() -> None:
    """No second catalogue: an id written anywhere in the package is looked up here."""
    assert set() == _reported_ids() - set(RULES_BY_ID)


def test_every_warning_symbol_a_stage_emits_is_a_row() -> None:
    """Session warning codes are catalogue symbols, so ``aguikit rules CODE`` explains them."""
    session = Session()
    session.feed_all(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": "9.9"},
            {"type": "FUTURE", "x": 1},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "z": 1},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/nope"}]},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ]
    )

    assert {"AGUI-W007", "AGUI-W001", "AGUI-W002", "AGUI-P001"} == {
        w.rule for w in session.warnings
    }


def test_find_rule_takes_ids_short_ids_and_symbols() -> None:
    """``AGUI-V014``, ``v014`` and ``tool-call-not-open`` name one row."""
    assert {"AGUI-V014"} == {
        rule.id
        for key in ("AGUI-V014", "agui-v014", "V014", "v014", "tool-call-not-open")
        if (rule := find_rule(key)) is not None
    }
    assert find_rule("AGUI-V999") is None


def test_a_typo_gets_the_nearest_ids_and_symbols() -> None:
    """The suggestion names the row the user most likely meant first."""
    assert "AGUI-V014" == suggest_rule("AGUI-V14")[0]
    assert "patch-failed" in suggest_rule("patch-faild")


@pytest.mark.parametrize("key", ["AGUI-C003", "patch-failed", "AGUI-D002", "unknown-member"])
def test_aguikit_rules_id_shows_one_row_of_any_stage(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Codes ``check`` prints (chunk rules, warning symbols, decode ids) can be looked up."""
    assert 0 == main(["rules", key])

    out = capsys.readouterr().out
    rule = find_rule(key)
    assert rule is not None
    assert out.startswith(f"{rule.id}  {rule.symbol}")
    assert f"severity: {rule.severity.value}" in out
    assert f"docs/rules.md#{rule.anchor}" in out


def test_aguikit_rules_suggests_the_nearest_id_on_a_typo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An unknown id exits 2 and names what it probably was."""
    assert 2 == main(["rules", "AGUI-V14"])

    assert "did you mean: AGUI-V014" in capsys.readouterr().err


def test_severities_are_set_on_purpose() -> None:
    """Receiver tolerance is a warning or info; rules that break a stream are errors."""
    assert {Severity.ERROR} == {r.severity for r in RULES if r.stage is Stage.VERIFIER}
    assert Severity.ERROR not in {r.severity for r in RULES if r.stage is Stage.RECEIVER}
