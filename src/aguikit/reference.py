"""
The reference a user reads: the rule catalogue and the verifier's table, as Markdown and text.

``docs/rules.md``, ``aguikit rules`` and ``aguikit rules ID`` are all rendered here from
the same two sources of truth, :mod:`aguikit.catalogue` (every id a user can see) and
:mod:`aguikit.rules` (what each event type does, for the verifier), so none of them can
drift from the code that reports the rules.  A test keeps ``docs/rules.md`` equal to
:func:`render_markdown`; regenerate it with ``aguikit rules --markdown > docs/rules.md``.

The specification's coverage matrix (``docs/spec-coverage.toml``: every normative sentence
of the AG-UI specification and how aguikit holds it) is rendered here too, by
:func:`render_coverage`, into ``docs/spec-coverage.md``, with each rule id it names linked
to its section of ``docs/rules.md``; regenerate it with
``aguikit rules --coverage docs/spec-coverage.toml > docs/spec-coverage.md``.

This is presentation, so it sits on the top floor with the command line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ._generated.registry import DEPRECATED_EVENT_TYPES
from .catalogue import RULES, RULES_BY_ID, Rule, Stage
from .rules import LIFECYCLE_GATE, TABLE, Attribution, Lifecycle, Row

__all__ = ["HOLDINGS", "render_coverage", "render_markdown", "render_rule", "render_text"]

_STAGE_TITLES: Final = {
    Stage.VERIFIER: "Protocol rules (the verifier)",
    Stage.SCHEMA: "Schema",
    Stage.NORMALIZER: "Chunk expansion (the normalizer)",
    Stage.RECEIVER: "What a tolerant receiver accepts (session warnings)",
    Stage.APPLIER: "Applying events",
    Stage.DECODER: "Decoding bytes, and the safety limits",
    Stage.ENCODER: "Encoding events",
    Stage.TRANSPORT: "HTTP",
    Stage.PRODUCER: "Producing a stream (aguikit.server.RunWriter)",
    Stage.CLIENT: "Sending a run input (aguikit.client.prepare_input)",
    Stage.EVENT_LOG: "Logging a run (aguikit.server event logs)",
    Stage.THREAD_STORE: "Keeping threads (aguikit.server thread stores)",
    Stage.CHECKER: "What `aguikit check` looks at beyond the pipeline",
    Stage.CONVERSATION: "Conversations: requests and the thread across runs",
}

_REPORTED_AS: Final = {
    Stage.VERIFIER: "`aguikit.errors.ProtocolError` (`rule`, `symbol`, event index and type, "
    "the entity)",
    Stage.SCHEMA: "`aguikit.errors.SchemaValidationError` (every issue with its JSON pointer "
    "and keyword)",
    Stage.NORMALIZER: "`aguikit.errors.ProtocolError`",
    Stage.RECEIVER: "a `SessionWarning` whose `code` is the symbol (the event is still "
    "delivered, stripped or translated)",
    Stage.APPLIER: "a `SessionWarning` whose `code` is the symbol, or an error where noted",
    Stage.DECODER: "`aguikit.errors.DecodeError` / `LimitExceededError` (source, line or frame, "
    "byte offset)",
    Stage.ENCODER: "`aguikit.errors.EncodeError` (the event type), raised while writing",
    Stage.TRANSPORT: "`aguikit.errors.TransportError` and its subclasses; the timing rules "
    "(`T004`-`T006`) are findings of `aguikit check URL`, thresholds in docs/check.md",
    Stage.CHECKER: "a finding of `aguikit check` (`aguikit.checker.Finding`), never an "
    "exception: the library accepts these streams",
    Stage.PRODUCER: "a `SessionWarning` in `RunWriter.warnings` whose `code` is the symbol, "
    "or the `code` of the `RUN_ERROR` the writer sends; each with a record on the "
    "`aguikit.server` logger",
    Stage.EVENT_LOG: "the `code` of the `RUN_ERROR` the event log writes to end the run, "
    "`aguikit.server.eventlog.EventLogError` at the handler's `emit`, `503` (a problem "
    "document) for a request the log could not answer; each with a record on the "
    "`aguikit.server` logger",
    Stage.THREAD_STORE: "`aguikit.server.threads.ThreadError` (`rule`, the thread, the event "
    "number or pointer where it broke) from the store, and the endpoint's problem document "
    "carrying the rule id",
    Stage.CLIENT: "a line of `AgentClient.request_warnings` (the id and the symbol, then the "
    "message) and a record on the `aguikit` logger; the request is still sent",
    Stage.CONVERSATION: "a finding of `aguikit check` on a HAR file or recording "
    "(`aguikit.checker.Finding`, with its `exchange`), and a problem of the test kit's "
    "`Conversation`; `AGUI-R001` is also `aguikit.conversation.read_har`'s `DecodeError`",
}


def _rows_reporting(rule_id: str) -> list[str]:
    events = [str(row.event) for row in TABLE if rule_id in row.rules.values()]
    for lifecycle, gate in LIFECYCLE_GATE.items():
        if rule_id in gate.values():
            events.extend(
                str(row.event)
                for row in TABLE
                if row.lifecycle is lifecycle and str(row.event) not in events
            )
    return events


def _describe_row(row: Row) -> str:
    parts: list[str] = []
    if row.lifecycle is not Lifecycle.IN_RUN:
        parts.append(row.lifecycle.value)
    if row.family is not None:
        keyed = f" keyed by `{row.key}`" if row.key else ""
        parts.append(f"{row.effect.value} a {row.family.value}{keyed}")
    if row.requires_open is not None:
        parts.append(f"requires an open {row.requires_open.value}")
    if row.requires_closed is not None:
        parts.append(f"requires the {row.requires_closed.value} closed")
    if row.owner is not Attribution.NONE and row.bucket is not None:
        parts.append(f"owner ({row.bucket.value}): {row.owner.value}")
    if row.parent_key is not None:
        parts.append(f"inherits the owner of `{row.parent_key}`")
    parts.extend(f"hook `{name}`" for name in (*row.checks, *row.effects))
    if not parts:
        parts.append("unordered; closes nothing")
    return "; ".join(parts)


def _example_lines(rule: Rule) -> list[str]:
    if rule.example_bytes is not None:
        text = rule.example_bytes.decode("utf-8", "backslashreplace")
        return ["```text", *text.splitlines(), "```"]
    if not rule.example:
        return []
    lines = ["```json", *(json.dumps(event) for event in rule.example)]
    if rule.at_finish:
        lines.append("// (end of stream)")
    lines.append("```")
    return lines


def _section(rule: Rule) -> list[str]:
    out = [
        f'<a id="{rule.anchor}"></a>',
        "",
        f"### {rule.id} `{rule.symbol}`",
        "",
        rule.title + ".",
        "",
        f"- Severity: {rule.severity.value}; reported by the {rule.stage.value}",
        f"- Source: {rule.source}",
    ]
    reporters = _rows_reporting(rule.id)
    if rule.at_finish:
        out.append("- Reported by: `finish()`, when the stream ends")
    elif reporters:
        out.append("- Reported on: " + ", ".join(f"`{e}`" for e in reporters))
    if rule.in_process:
        out.append("- Only an in-process producer or caller can trigger this; the wire rejects it")
    if rule.setting is not None:
        out.append(
            f"- The limit is the `{rule.setting}` setting (see `docs/limits.md`); the example "
            "assumes it is tiny"
        )
    out.append(f"- Message: `{rule.template}`")
    example = _example_lines(rule)
    if example:
        out += ["", "Example:", "", *example]
    out.append("")
    return out


def render_markdown() -> str:
    """
    The catalogue and the verifier's table as Markdown, the content of ``docs/rules.md``.

    Returns:
        The whole document, ending with a newline.
    """
    out: list[str] = [
        "# Rules",
        "",
        "<!-- Generated by `aguikit rules --markdown > docs/rules.md` from "
        "src/aguikit/catalogue.py and src/aguikit/rules.py. Do not edit. -->",
        "",
        "Every id aguikit reports is a row of one catalogue: a stable id, a readable symbol",
        "(what session warnings carry as their `code`), a default severity, the stage that",
        "reports it, its source, its message template and an example that triggers it.",
        "`aguikit rules ID` prints one row; ids and symbols are both accepted.",
        "",
        "| id | symbol | severity | stage | title |",
        "| --- | --- | --- | --- | --- |",
    ]
    out.extend(
        f"| [{rule.id}](#{rule.anchor}) | `{rule.symbol}` | {rule.severity.value} | "
        f"{rule.stage.value} | {rule.title} |"
        for rule in RULES
    )
    out.append("")
    for stage, title in _STAGE_TITLES.items():
        rules = [rule for rule in RULES if rule.stage is stage]
        if not rules:
            continue
        out += [f"## {title}", "", f"Reported as {_REPORTED_AS[stage]}.", ""]
        for rule in rules:
            out += _section(rule)
    out += [
        "## The verifier's table",
        "",
        "One row per event type; the verifier interprets these rows.",
        "",
        "| event | what it does | rules |",
        "| --- | --- | --- |",
    ]
    for row in TABLE:
        deprecated = " (deprecated)" if str(row.event) in DEPRECATED_EVENT_TYPES else ""
        rules_cell = ", ".join(sorted(set(row.rules.values())))
        out.append(f"| `{row.event}`{deprecated} | {_describe_row(row)} | {rules_cell} |")
    out.append("")
    return "\n".join(out)


def render_text() -> str:
    """
    The catalogue as plain text, one rule a line, for ``aguikit rules``.

    Returns:
        Lines of ``id  symbol  severity  title``, ending with a newline.
    """
    width = max(len(rule.symbol) for rule in RULES)
    return "".join(
        f"{rule.id}  {rule.symbol:<{width}}  {rule.severity.value:<7}  {rule.title}\n"
        for rule in RULES
    )


def render_rule(rule: Rule) -> str:
    """One rule in full, for ``aguikit rules ID``."""
    lines = [
        f"{rule.id}  {rule.symbol}",
        "",
        rule.title + ".",
        "",
        f"severity: {rule.severity.value}",
        f"stage:    {rule.stage.value}",
        f"source:   {rule.source}",
        f"message:  {rule.template}",
    ]
    if rule.setting is not None:
        lines.append(f"setting:  {rule.setting} (docs/limits.md)")
    reporters = _rows_reporting(rule.id)
    if reporters:
        lines.append("events:   " + ", ".join(reporters))
    example = _example_lines(rule)
    if example:
        lines += ["", "example:", *("  " + line for line in example[1:-1])]
    lines.append(f"\ndocs/rules.md#{rule.anchor}")
    return "\n".join(lines) + "\n"


# ---- the specification's coverage matrix -----------------------------------------------------

HOLDINGS: Final[Mapping[str, str]] = {
    "rule": "held by a rule",
    "behaviour": "held by a stage's behaviour",
    "decided": "decided in docs/",
    "n/a": "not applicable",
    "gap": "gap",
}
"""How an entry of the matrix is held, in the order the counts are given."""

_BINDS: Final = {
    "producer": "the producer",
    "consumer": "the consumer",
    "both": "producer and consumer",
    "transport": "a transport binding",
    "application": "the application",
    "all": "every implementation",
}


def _rule_link(rule_id: str) -> str:
    rule = RULES_BY_ID.get(rule_id)
    if rule is None:
        return f"`{rule_id}`"
    return f"[{rule.id}](rules.md#{rule.anchor}) `{rule.symbol}`"


def _holding(entry: Mapping[str, Any]) -> str:
    held = entry["held"]
    how = f" {entry['how']}" if entry.get("how") else ""
    stage = entry.get("stage")
    if held == "rule":
        rules = ", ".join(_rule_link(rule_id) for rule_id in entry["rules"])
        text = f"Held by {rules}, in the {stage}.{how}"
    elif held == "behaviour":
        text = f"Held by the {stage}.{how}"
    elif held == "decided":
        target = entry["decision"]
        link = target.removeprefix("docs/")
        text = f"Decided: [{link}]({link}).{how}"
    elif held == "n/a":
        text = f"Not applicable: {entry['reason']}"
    else:
        owner = f" (passed to {entry['owner']})" if entry.get("owner") else ""
        text = f"Gap{owner}: {entry['gap']}"
    tests: Sequence[str] = entry.get("tests", ())
    if tests and held in ("rule", "behaviour"):
        text += " Tests: " + ", ".join(f"`{test}`" for test in tests) + "."
    return text


def _examples(entry: Mapping[str, Any]) -> list[str]:
    """The entry's example streams, folded away under a summary (JSON Lines as written)."""
    out: list[str] = []
    for kind, label in (("reject", "violates it"), ("accept", "conforms")):
        value = entry.get(kind)
        for text in [value] if isinstance(value, str) else list(value or ()):
            out += [f"A stream that {label} (the {entry['stage']}):", "", "```json"]
            out += [line for line in text.splitlines() if line.strip()]
            out += ["```", ""]
    if entry.get("settings"):
        out += [f"With settings `{json.dumps(entry['settings'])}`.", ""]
    if entry.get("warns"):
        out += ["Warns: " + ", ".join(f"`{rule}`" for rule in entry["warns"]) + ".", ""]
    if entry.get("expect"):
        out += ["Leaves at least:", "", "```json", entry["expect"], "```", ""]
    if not out:
        return []
    return ["<details><summary>examples</summary>", "", *out, "</details>", ""]


def _counts(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {held: sum(1 for e in entries if e["held"] == held) for held in HOLDINGS}


def render_coverage(matrix: Mapping[str, Any]) -> str:
    """
    The specification's coverage matrix as Markdown, the content of
    ``docs/spec-coverage.md``: a table of counts per page, then every page's entries.

    Args:
        matrix: ``docs/spec-coverage.toml`` as :mod:`tomllib` reads it: its ``statement``
            list (``id``, ``page``, ``section``, ``text``, ``binds``, ``held`` and what the
            holding needs: ``rules`` and ``stage``, ``decision``, ``reason`` or ``gap``).

    Returns:
        The whole document, ending with a newline.
    """
    entries: Sequence[Mapping[str, Any]] = matrix["statement"]
    pages: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        pages.setdefault(entry["page"], []).append(entry)
    out: list[str] = [
        "# Specification coverage",
        "",
        "<!-- Generated by `aguikit rules --coverage docs/spec-coverage.toml > "
        "docs/spec-coverage.md` from docs/spec-coverage.toml. Do not edit. -->",
        "",
        f"Every normative sentence of the AG-UI {matrix['version']} specification (each "
        "sentence of its pages carrying a BCP 14 key word in capitals) has one entry here, "
        "with who it binds and how aguikit holds it:",
        "by a rule of the catalogue (its id, the stage that reports it, and an example "
        "stream built from the sentence that makes the rule fire),",
        "by a stage's behaviour (the stage, and a stream whose result the sentence prescribes),",
        "by a decision written in `docs/` (why not, or why stricter),",
        "or not at all, because it binds no part aguikit plays (a UI's rendering, an "
        "agent's model).",
        "`tests/test_spec_coverage.py` extracts the sentences from the specification's "
        "pages and fails on any sentence without an entry and any entry whose sentence is "
        "gone, and runs every example through the stage its entry names.",
        "",
        "| page | statements | " + " | ".join(HOLDINGS.values()) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in HOLDINGS) + " |",
    ]
    for page, items in pages.items():
        counts = _counts(items)
        anchor = page.replace("/", "").lower()
        out.append(
            f"| [{page}](#{anchor}) | {len(items)} | "
            + " | ".join(str(counts[held]) for held in HOLDINGS)
            + " |"
        )
    totals = _counts(entries)
    out.append(
        f"| **all pages** | **{len(entries)}** | "
        + " | ".join(f"**{totals[held]}**" for held in HOLDINGS)
        + " |"
    )
    out.append("")
    for page, items in pages.items():
        counts = _counts(items)
        summary = ", ".join(f"{counts[h]} {label}" for h, label in HOLDINGS.items() if counts[h])
        out += [f"## {page}", "", f"{len(items)} statements: {summary}.", ""]
        for entry in items:
            section = f" · *{entry['section']}*" if entry["section"] else ""
            out += [
                f'<a id="{entry["id"]}"></a>',
                f"**{entry['id']}**{section} · binds {_BINDS[entry['binds']]}",
                "",
                f"> {entry['text']}",
                "",
                _holding(entry),
                "",
                *_examples(entry),
            ]
    return "\n".join(out)
