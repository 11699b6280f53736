"""
The reference a user reads: the rule catalogue and the verifier's table, as Markdown and text.

``docs/rules.md``, ``aguikit rules`` and ``aguikit rules ID`` are all rendered here from
the same two sources of truth, :mod:`aguikit.catalogue` (every id a user can see) and
:mod:`aguikit.rules` (what each event type does, for the verifier), so none of them can
drift from the code that reports the rules.  A test keeps ``docs/rules.md`` equal to
:func:`render_markdown`; regenerate it with ``aguikit rules --markdown > docs/rules.md``.

This is presentation, so it sits on the top floor with the command line.
"""

from __future__ import annotations

import json
from typing import Final

from ._generated.registry import DEPRECATED_EVENT_TYPES
from .catalogue import RULES, Rule, Stage
from .rules import LIFECYCLE_GATE, TABLE, Attribution, Lifecycle, Row

__all__ = ["render_markdown", "render_rule", "render_text"]

_STAGE_TITLES: Final = {
    Stage.VERIFIER: "Protocol rules (the verifier)",
    Stage.SCHEMA: "Schema",
    Stage.NORMALIZER: "Chunk expansion (the normalizer)",
    Stage.RECEIVER: "What a tolerant receiver accepts (session warnings)",
    Stage.APPLIER: "Applying events",
    Stage.DECODER: "Decoding bytes, and the safety limits",
    Stage.TRANSPORT: "HTTP",
    Stage.PRODUCER: "Producing a stream (aguikit.server.RunWriter)",
    Stage.CHECKER: "What `aguikit check` looks at beyond the pipeline",
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
    Stage.TRANSPORT: "`aguikit.errors.TransportError` and its subclasses; the timing rules "
    "(`T004`-`T006`) are findings of `aguikit check URL`, thresholds in docs/check.md",
    Stage.CHECKER: "a finding of `aguikit check` (`aguikit.checker.Finding`), never an "
    "exception: the library accepts these streams",
    Stage.PRODUCER: "a `SessionWarning` in `RunWriter.warnings` whose `code` is the symbol, "
    "or the `code` of the `RUN_ERROR` the writer sends; each with a record on the "
    "`aguikit.server` logger",
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
