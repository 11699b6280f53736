"""
The pytest plugin: AG-UI fixtures and readable failures, loaded by installing aguikit.

Registered through the ``pytest11`` entry point, so a project that has aguikit installed
gets, with no ``conftest.py`` line:

* ``agui_client``: a factory, ``agui_client(app_or_url, **options)`` ->
  :class:`aguikit.testing.AgentTestClient`;
* ``agui_trace``: golden traces, ``agui_trace.check(result, "name")`` against
  ``agui_traces/name.jsonl`` beside the test file, ids mapped to stable placeholders and
  timestamps dropped so a trace pins the *behaviour*, not the run; ``pytest
  --agui-update-traces`` rewrites the files;
* a ``pytest_assertrepr_compare`` hook, so ``assert result == expected`` on two
  :class:`~aguikit.testing.RunResult` values says which messages, state or outcome
  differ instead of printing two reprs.

The plugin is imported by every pytest run of an environment with aguikit in it, so this
module imports nothing of aguikit at the top: the testing helpers load on first use.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from .testing import AgentTestClient, RunResult

__all__ = ["TraceRecorder", "agui_client", "agui_trace", "normalise_trace"]

UPDATE_OPTION: Final = "--agui-update-traces"

_ID_KINDS: Final = {
    "threadId": "thread",
    "runId": "run",
    "parentRunId": "run",
    "messageId": "message",
    "parentMessageId": "message",
    "toolCallId": "tool-call",
    "subagentRunId": "subagent",
}
"""Members whose values are generated per run, and the placeholder family of each."""

_MERGEABLE: Final = {
    "TEXT_MESSAGE_CONTENT": ("messageId", "delta"),
    "TOOL_CALL_ARGS": ("toolCallId", "delta"),
    "REASONING_MESSAGE_CONTENT": ("messageId", "delta"),
}
"""Delta events whose chunking is the producer's business, not its behaviour."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aguikit", "AG-UI testing (aguikit)")
    group.addoption(
        UPDATE_OPTION,
        action="store_true",
        default=False,
        help="rewrite the agui_trace golden files from this run instead of comparing",
    )


class _Ids:
    """Each generated id mapped to ``<kind-N>``, the same value always to the same name."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def name(self, value: str, kind: str) -> str:
        if value not in self.names:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.names[value] = f"<{kind}-{self.counts[kind]}>"
        return self.names[value]

    def walk(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.walk(item) for item in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "timestamp":
                continue
            if isinstance(item, str) and key in _ID_KINDS:
                out[key] = self.name(item, _ID_KINDS[key])
            elif key == "id" and isinstance(item, str):
                out[key] = self._snapshot_id(item, value)
            else:
                out[key] = self.walk(item)
        return out

    def _snapshot_id(self, value: str, owner: dict[str, Any]) -> str:
        """An ``id`` inside a snapshot: a message's (it has a ``role``), a tool call's (a
        ``function``), or one already named; anything else is not generated, so kept."""
        if "role" in owner:
            return self.name(value, "message")
        if "function" in owner:
            return self.name(value, "tool-call")
        return self.names.get(value, value)


def _merge_deltas(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event in events:
        rule = _MERGEABLE.get(event.get("type", ""))
        last = out[-1] if out else None
        if (
            rule is not None
            and last is not None
            and last.get("type") == event["type"]
            and last.get(rule[0]) == event.get(rule[0])
            and set(last) == set(event)
        ):
            out[-1] = {**last, rule[1]: last[rule[1]] + event[rule[1]]}
        else:
            out.append(event)
    return out


def normalise_trace(result: RunResult, *, rechunk: bool = False) -> list[dict[str, Any]]:
    """
    The wire events of ``result`` as a golden trace stores them: every generated id
    (thread, run, message, tool call, subagent) replaced by a placeholder numbered in
    order of first appearance, consistently, and timestamps removed; with ``rechunk``,
    consecutive deltas of one message or tool call merged into one, so a producer that
    streams in different pieces still matches.
    """
    from .wire import to_wire

    ids = _Ids()
    events = [ids.walk(to_wire(event)) for event in result.events]
    return _merge_deltas(events) if rechunk else events


def _lines(events: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(event, ensure_ascii=False) for event in events]


class TraceRecorder:
    """
    The ``agui_trace`` fixture: compares runs with golden traces in ``directory``.

    Args:
        directory: Where ``name.jsonl`` files live (``agui_traces`` beside the test).
        update: Rewrite the files instead of comparing (``--agui-update-traces``).
    """

    def __init__(self, directory: Path, *, update: bool) -> None:
        self.directory = directory
        self.update = update

    def path(self, name: str) -> Path:
        """The golden file for ``name``."""
        return self.directory / f"{name}.jsonl"

    def check(self, result: RunResult, name: str, *, rechunk: bool = False) -> None:
        """
        Fail the test, with a unified diff, unless ``result`` normalises to the trace.

        A missing trace fails too (a golden test that writes its own expectation on a CI
        machine would pass whatever the server did); create it with
        ``pytest --agui-update-traces``.
        """
        actual = _lines(normalise_trace(result, rechunk=rechunk))
        path = self.path(name)
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in actual), encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(
                f"no AG-UI trace {path}; record it with `pytest {UPDATE_OPTION}`", pytrace=False
            )
        expected = path.read_text(encoding="utf-8").splitlines()
        if expected != actual:
            diff = difflib.unified_diff(
                expected, actual, f"{path} (golden)", "this run", lineterm="", n=2
            )
            pytest.fail(
                f"AG-UI trace {name!r} differs (update with `pytest {UPDATE_OPTION}`):\n"
                + "\n".join(diff),
                pytrace=False,
            )


@pytest.fixture
def agui_client() -> Callable[..., AgentTestClient]:
    """A factory: ``agui_client(app_or_url, **options)`` -> ``AgentTestClient``."""
    from .testing import AgentTestClient

    def make(target: Any, **options: Any) -> AgentTestClient:
        return AgentTestClient(target, **options)

    return make


@pytest.fixture
def agui_trace(request: pytest.FixtureRequest) -> Iterator[TraceRecorder]:
    """Golden AG-UI traces in ``agui_traces/`` beside the test file."""
    update = bool(request.config.getoption(UPDATE_OPTION))
    yield TraceRecorder(Path(request.path).parent / "agui_traces", update=update)


def _compare_lines(left: RunResult, right: RunResult) -> list[str]:
    from .wire import to_wire

    lines = ["RunResult differs:"]
    if left.outcome != right.outcome:
        lines += ["outcome:", f"  {left.outcome!r}", f"  != {right.outcome!r}"]
    if left.state != right.state:
        lines += ["state:", f"  {left.state!r}", f"  != {right.state!r}"]
    mine = [json.dumps(to_wire(m), ensure_ascii=False) for m in left.messages]
    theirs = [json.dumps(to_wire(m), ensure_ascii=False) for m in right.messages]
    if mine != theirs:
        lines.append("messages:")
        lines += [
            "  " + line
            for line in difflib.unified_diff(mine, theirs, "left", "right", lineterm="", n=1)
        ]
    if left.events != right.events:
        kinds = ([e.type for e in left.events], [e.type for e in right.events])
        if kinds[0] != kinds[1]:
            lines += ["event types:", f"  {kinds[0]}", f"  != {kinds[1]}"]
        else:
            lines.append("events: same types, different members (compare result.events)")
    return lines


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> Any:
    testing = sys.modules.get("aguikit.testing")  # never loaded here: only compare its values
    if testing is None or op != "==":
        return None
    if isinstance(left, testing.RunResult) and isinstance(right, testing.RunResult):
        return _compare_lines(left, right)
    return None
