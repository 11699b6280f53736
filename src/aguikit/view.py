"""
``aguikit view``: one offline HTML file that shows a run, for a bug report or a CI artefact.

Someone looking at a failed run wants to *see* it: the text as it streamed, each tool call
with its arguments and result, the state after any event, the conversation as the UI
would have shown it, and each finding at the event it is about.  This module builds that
page from anything ``aguikit check`` reads (a stream, a directory, a URL, a HAR file or an
aguikit recording), as one self-contained file: HTML, CSS, JavaScript and the data inline,
no request of any kind, openable from ``file://`` years later.

The protocol is judged here, in Python, exactly once: each source goes through the
checker's own pass (:func:`aguikit.checker.check_source`, or the conversation's
:func:`aguikit.conversation.check_recording`) with a recording session, :class:`_Recorder`,
that keeps what the session's fold did at each event.  The page's script only renders
that resolved data; it never applies a patch or folds an event:

* the conversation is a list of row operations (a message is now *this* at *that*
  position; text or arguments grew by *this*), the applier's own change records resolved
  into values;
* the state is its initial document plus, per event that changed it, the structural
  difference (added, removed, replaced paths and values) computed from the state before
  and after, so the page shows a ``STATE_DELTA`` as a diff and the document after any
  event by setting and deleting values at pointers;
* findings are the checker's, with their event, pointer and the rule's reference text.

Every string of the data is the producer's and may be hostile: the data is embedded as
JSON with ``<`` and the two JavaScript line separators escaped, so no string can close the
script element, and the page writes it with ``textContent`` only.  A
``Content-Security-Policy`` meta tag allows only the page's own inline script and style
(by hash) and no load from anywhere.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, Final

import attrs

from .catalogue import RULES_BY_ID, Severity
from .changes import ChangeKind, What
from .checker import CheckConfig, SourceReport, Unreadable, check_source, is_recording
from .conversation import Exchange, Recording, Watching, check_recording
from .errors import AguiError
from .jsonio import escape_pointer, loads
from .patch import copy_json
from .session import Update
from .wire import to_wire

__all__ = ["LANES", "ViewData", "build_view", "concern", "embed_json", "render_page", "state_diff"]

LANES: Final = ("run", "text", "tool", "reasoning", "step", "activity", "state", "messages")
"""The timeline's concerns, in the order their lanes are drawn (subagents nest below)."""

_CONCERN: Final[Mapping[str, str]] = {
    "TEXT_MESSAGE": "text",
    "TOOL_CALL": "tool",
    "REASONING": "reasoning",
    "THINKING": "reasoning",
    "STEP": "step",
    "ACTIVITY": "activity",
    "STATE": "state",
    "MESSAGES": "messages",
    "RUN": "run",
    "SUBAGENT": "run",
}

_STREAMED: Final = frozenset(
    {
        ChangeKind.STARTED,
        ChangeKind.ENDED,
        ChangeKind.UPDATED,
        ChangeKind.TOOL_CALL_STARTED,
        ChangeKind.TOOL_CALL_ENDED,
        ChangeKind.ENCRYPTED_VALUE,
    }
)
"""Changes after which a message's text and arguments are what its content and arguments
operations accumulated: the row operation leaves them out (the page keeps its own)."""


def concern(event_type: str) -> str:
    """The timeline lane of an event type (``other`` for ``CUSTOM``, ``RAW`` and unknown)."""
    for prefix, lane in _CONCERN.items():
        if event_type.startswith(prefix):
            return lane
    return "other"


def state_diff(before: Any, after: Any, pointer: str = "") -> list[list[Any]]:
    """
    What changed from ``before`` to ``after``, as ``["+"|"-"|"~", pointer, value]`` rows.

    Objects are compared member by member, arrays element by element over their common
    length with the rest added or removed at the end; a value whose kind changed is one
    replacement.  The
    page rebuilds a state by setting (``+``, ``~``) and deleting (``-``) at pointers, so it
    needs nothing of RFC 6902 (the event shows the operations as sent).
    """
    out: list[list[Any]] = []
    stack: list[tuple[Any, Any, str]] = [(before, after, pointer)]
    while stack:
        old, new, where = stack.pop()
        if type(old) is dict and type(new) is dict:
            for key in old:
                if key not in new:
                    out.append(["-", f"{where}/{escape_pointer(key)}"])
            for key, value in new.items():
                path = f"{where}/{escape_pointer(key)}"
                if key not in old:
                    out.append(["+", path, value])
                elif old[key] is not value or type(value) in (dict, list):
                    stack.append((old[key], value, path))
        elif type(old) is list and type(new) is list:
            # Element by element over the common length, then the tail added or removed
            # (from the end, so each index is still there when its row is applied).
            common = min(len(old), len(new))
            for index in range(len(old) - 1, common - 1, -1):
                out.append(["-", f"{where}/{index}"])
            for index in range(common, len(new)):
                out.append(["+", f"{where}/{index}", new[index]])
            for index in range(common):
                stack.append((old[index], new[index], f"{where}/{index}"))
        elif type(old) is not type(new) or old != new:
            out.append(["~", where, new])
    return out


class _Recorder(Watching):
    """
    The checker's session, keeping per event what its fold did: the raw event, its lane,
    the row operations of the conversation and the state's difference.  The fold, the
    verdicts and the findings are the session's and the checker's, untouched.
    """

    def __init__(self, sink: _Collector, exchange: Exchange | None = None, **kwargs: Any) -> None:
        kwargs["keep_text"] = True  # the page shows the text; the findings do not change
        super().__init__(**kwargs)
        self.exchange = exchange
        self.raw: list[Any] = []
        self.lanes: list[str] = []
        self.message_ops: list[tuple[int, list[list[Any]]]] = []
        self.state_ops: list[tuple[int, list[list[Any]]]] = []
        self.calls: dict[str, dict[str, Any]] = {}
        self.initial_messages = [_wire(m) for m in self.messages]
        self.initial_state = copy_json(self.state)
        self._rows: dict[str, list[Any]] = {}  # the last row operation of each message
        self._target: dict[str, list[Any]] = {}  # the last text and arguments targets
        sink.sessions.append(self)

    def feed(self, event: Any) -> list[Update]:
        number = len(self.raw)
        self.raw.append(event)
        etype = event.get("type") if isinstance(event, Mapping) else None
        lane = concern(etype) if isinstance(etype, str) else "other"
        sub = event.get("subagentRunId") if isinstance(event, Mapping) else None
        before = self.state  # replaced, never edited, by a snapshot
        parents = _parents(before, event.get("delta")) if etype == "STATE_DELTA" else None
        try:
            updates = super().feed(event)
        except AguiError:
            self.lanes.append(_lane(lane, sub))
            raise
        for update in updates:
            sub = update.change.subagent_run_id or sub
        self.lanes.append(_lane(lane, sub))
        self._note(number, updates, before, parents)
        return updates

    def finish(self) -> list[Update]:
        updates = super().finish()
        if self.raw:
            self._note(len(self.raw) - 1, updates, self.state, None)
        return updates

    def _note(
        self,
        number: int,
        updates: list[Update],
        before: Any,
        parents: list[tuple[str, list[str], Any]] | None,
    ) -> None:
        ops: list[list[Any]] = []
        raw = self.raw[number] if len(updates) == 1 else None
        state = False
        for update in updates:
            change = update.change
            what = change.what
            if what is What.STATE:
                state = True
            elif what is What.SUBAGENTS or what is What.RUN or what is What.NOTHING:
                continue
            elif change.kind is ChangeKind.REPLACED:
                self._rows.clear()
                ops.append(["L", [_wire(m) for m in self.messages]])
            elif change.kind is ChangeKind.CONTENT and change.delta is not None:
                ops.append(self._grew("t", [change.message_id], raw, change.delta))
            elif change.kind is ChangeKind.TOOL_CALL_ARGS and change.delta is not None:
                target = [change.message_id, change.tool_call_id]
                ops.append(self._grew("g", target, raw, change.delta))
            elif change.message_id is not None:
                message = self.applier.message(change.message_id)
                if message is not None:
                    wire = _wire(message)
                    keep = change.kind in _STREAMED and wire.get("role") != "activity"
                    if keep:
                        wire.pop("content", None)
                        for call in wire.get("toolCalls") or ():
                            call.get("function", {}).pop("arguments", None)
                    row = [change.message_id, change.index, wire, int(keep)]
                    if self._rows.get(change.message_id) != row:  # not only its text grew
                        self._rows[change.message_id] = row
                        ops.append(["m", *row])
            self._call(number, update)
        if ops:
            self.message_ops.append((number, ops))
        if state:
            after = self.state
            if after is not before:  # a snapshot, or a patch that replaced the root
                diff = state_diff(before, after)
            elif parents is not None:
                diff = _patched(parents, after)
            else:  # pragma: no cover - a patch the session applied names its paths
                diff = [["~", "", after]]
            # Copies: the applier patches its state in place, and the rows keep values.
            self.state_ops.append(
                (number, [[*op[:2], copy_json(op[2])] if len(op) > 2 else op for op in diff])
            )

    def _grew(self, op: str, target: list[Any], raw: Any, delta: str) -> list[Any]:
        """
        A text (``t``: message) or arguments (``g``: message, tool call) operation: the
        target left out (``0``) when it is the previous one's, the text when it is the
        event's own ``delta`` (the page takes it from there), so streamed text costs a
        few bytes an event beyond the event itself.
        """
        same = self._target.get(op) == target
        self._target[op] = target
        text = [] if isinstance(raw, Mapping) and raw.get("delta") == delta else [delta]
        if same:
            return [op] if not text else [op, *([0] * len(target)), *text]
        return [op, *target, *text]

    def _call(self, number: int, update: Update) -> None:
        """A tool call's events by kind, its parsed arguments and its result's event."""
        change = update.change
        call_id = change.tool_call_id
        if call_id is None:
            return
        entry = self.calls.setdefault(call_id, {"args": []})
        kind = change.kind
        if kind is ChangeKind.TOOL_CALL_STARTED:
            entry["name"] = getattr(update.event, "tool_call_name", None)
            entry["start"] = number
        elif kind is ChangeKind.TOOL_CALL_ARGS:
            entry["args"].append(number)
        elif kind is ChangeKind.TOOL_CALL_ENDED and change.message_id is not None:
            entry["end"] = number
            message = self.applier.message(change.message_id)
            for call in getattr(message, "tool_calls", None) or ():
                if call.id == call_id:
                    try:
                        entry["parsed"] = loads(call.function.arguments)
                    except (AguiError, ValueError) as exc:
                        entry["unparsed"] = str(exc)
        elif kind is ChangeKind.TOOL_RESULT:
            entry["result"] = number


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _child(node: Any, token: str) -> Any:
    """``node``'s member ``token``, or ``_MISSING``."""
    if type(node) is dict:
        return node.get(token, _MISSING)
    if type(node) is list and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return _MISSING


def _resolve(document: Any, tokens: list[str]) -> Any:
    for token in tokens:
        document = _child(document, token)
        if document is _MISSING:
            break
    return document


def _parents(state: Any, delta: Any) -> list[tuple[str, list[str], Any]] | None:
    """
    Before a ``STATE_DELTA``: a shallow copy of each container its operations edit (the
    parent of each ``path`` and ``from``), shallowest first; ``None`` when one names the
    root (the whole document is then compared).  The applier patches in place and copies
    what it inserts, so afterwards a member that is the same object as before is unchanged
    unless an operation edited inside it, and that operation's own parent says how.
    """
    if not isinstance(delta, list):
        return None
    found: dict[str, tuple[str, list[str], Any]] = {}
    for op in delta:
        for key in ("path", "from"):
            pointer = op.get(key) if isinstance(op, Mapping) else None
            if not isinstance(pointer, str):
                continue
            if pointer == "":
                return None
            parent = pointer.rsplit("/", 1)[0]
            if parent in found:
                continue
            tokens = _tokens(parent)
            node = _resolve(state, tokens)
            if type(node) is dict or type(node) is list:
                found[parent] = (parent, tokens, copy.copy(node))
    return sorted(found.values(), key=lambda item: len(item[1]))


def _patched(parents: list[tuple[str, list[str], Any]], state: Any) -> list[list[Any]]:
    """What a patch changed, member by member of the containers it edited (by identity:
    cost follows what the patch touched, not the document's size)."""
    out: list[list[Any]] = []
    written: list[str] = []
    for pointer, tokens, old in parents:
        if any(pointer == w or pointer.startswith(w + "/") for w in written):
            continue  # a container above it was written whole: nothing left to say
        new = _resolve(state, tokens)
        if new is _MISSING:
            continue  # removed: the container above it says so
        if type(new) is not type(old):
            out.append(["~", pointer, new])
            written.append(pointer)
            continue
        if type(new) is dict:
            for key in old:
                if key not in new:
                    out.append(["-", f"{pointer}/{escape_pointer(key)}"])
            for key, value in new.items():
                if key not in old or old[key] is not value:
                    path = f"{pointer}/{escape_pointer(key)}"
                    out.append(["+" if key not in old else "~", path, value])
                    written.append(path)
        else:
            common = min(len(old), len(new))
            for index in range(common):
                if old[index] is not new[index]:
                    out.append(["~", f"{pointer}/{index}", new[index]])
                    written.append(f"{pointer}/{index}")
            for index in range(len(old) - 1, common - 1, -1):
                out.append(["-", f"{pointer}/{index}"])
            for index in range(common, len(new)):
                out.append(["+", f"{pointer}/{index}", new[index]])
                written.append(f"{pointer}/{index}")
    return out


_MISSING: Final = object()


def _wire(message: Any) -> dict[str, Any]:
    """A message's wire dict, sharing nothing with the applier (which edits in place)."""
    wire: dict[str, Any] = copy_json(to_wire(message))
    return wire


def _lane(concern_name: str, subagent: Any) -> str:
    return f"{concern_name}@{subagent}" if isinstance(subagent, str) and subagent else concern_name


@attrs.define
class _Collector:
    sessions: list[_Recorder] = attrs.Factory(list)


@attrs.define
class ViewData:
    """
    What one page shows: the check's reports (the same :class:`SourceReport` values
    ``aguikit check`` gives) and the resolved data the page renders, a JSON-ready dict.
    """

    reports: list[SourceReport]
    data: dict[str, Any]


def _check(spec: str, config: CheckConfig) -> tuple[SourceReport, _Collector, Recording | None]:
    """One source through the check's own pass, with recording sessions."""
    sink = _Collector()
    if is_recording(spec):
        read: list[Recording] = []

        def make(exchange: Exchange, **kwargs: Any) -> Watching:
            return _Recorder(sink, exchange, **kwargs)

        report = check_recording(spec, config, make_session=make, seen=read.append)
        return report, sink, read[0] if read else None
    session = _Recorder(
        sink,
        verify=True,
        validate=True,
        keep_delivered=False,
        collect_issues=True,
        recover=True,
    )
    return check_source(spec, config, session=session), sink, None


def _usage(raw: Iterable[Any], total: dict[str, int]) -> None:
    for event in raw:
        if isinstance(event, Mapping) and event.get("type") == "RUN_FINISHED":
            for entry in event.get("usage") or ():
                if isinstance(entry, Mapping):
                    for key, value in entry.items():
                        if isinstance(value, int) and not isinstance(value, bool):
                            total[key] = total.get(key, 0) + value


def _request_diff(before: Any, after: Any) -> dict[str, Any]:
    """What a client's request added, changed or dropped against its previous one."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {}
    old = {m.get("id"): m for m in before.get("messages") or () if isinstance(m, dict)}
    new = {m.get("id"): m for m in after.get("messages") or () if isinstance(m, dict)}
    rest_old = {k: v for k, v in before.items() if k != "messages"}
    rest_new = {k: v for k, v in after.items() if k != "messages"}
    return {
        "added": [m for key, m in new.items() if key not in old],
        "dropped": [key for key in old if key not in new],
        "changed": [key for key, m in new.items() if key in old and old[key] != m],
        "fields": state_diff(rest_old, rest_new),
    }


def _timing(exchange: Exchange, config: CheckConfig) -> dict[str, Any] | None:
    """An exchange's timing, when the recording kept it: per event, and what stands out."""
    har = dict(exchange.timings)
    times = [t.upstream_ms for t in exchange.times]
    if not times and not har:
        return None
    out: dict[str, Any] = {"har": har, "at": times}
    out["down"] = [t.downstream_ms for t in exchange.times]
    known = [(i, t) for i, t in enumerate(times) if t is not None]
    if known:
        out["first"] = known[0][1]
        # (gap in ms, the 0-based event after it)
        gaps = [(b - a, i) for (_, a), (i, b) in itertools.pairwise(known)]
        out["gaps"] = sorted(gaps, reverse=True)[:5]
        silence = config.buffer_silence_seconds * 1000
        bursts = []
        for gap, index in gaps:
            if gap >= silence:  # a silence, then many events at once: held by a buffer?
                at = times[index] or 0.0
                same = sum(1 for _, t in known if at <= t < at + 5)
                if same >= config.buffer_events:
                    bursts.append([index, same, gap])
        out["bursts"] = bursts
    if exchange.framing == "sse":
        body = exchange.body
        out["keepalives"] = body.count(b"\n:") + int(body.startswith(b":"))
    return out


def _rule_text(rule: str) -> dict[str, str]:
    row = RULES_BY_ID[rule]
    return {"symbol": row.symbol, "title": row.title, "source": row.source}


def build_view(specs: list[str], config: CheckConfig) -> ViewData:
    """
    Check every source as ``aguikit check`` does and resolve what the page shows.

    The reports are exactly the check's (a source that cannot be read is its report's
    ``unreadable``); the data holds every event that was read, in order, each with its
    source, exchange, number, lane and raw wire dict, the conversation's row operations,
    the state's differences, tool calls, findings at their events, timing and requests.
    """
    reports: list[SourceReport] = []
    sources: list[dict[str, Any]] = []
    events: list[Any] = []
    event_lanes: list[int] = []
    lanes: dict[str, int] = {name: i for i, name in enumerate(LANES)}
    findings: list[list[Any]] = []
    message_ops: list[list[Any]] = []
    state_ops: list[list[Any]] = []
    starts: list[list[Any]] = []
    calls: dict[str, Any] = {}
    subagents: dict[str, dict[str, Any]] = {}
    usage: dict[str, int] = {}
    threads: set[str] = set()
    runs: list[dict[str, Any]] = []
    timestamps: list[int] = []
    rules: dict[str, dict[str, str]] = {}
    for source_index, spec in enumerate(specs):
        report, sink, recording = _check(spec, config)
        reports.append(report)
        bases: dict[int | None, tuple[int, int]] = {}
        exchanges: list[dict[str, Any]] = []
        previous: dict[str | None, Any] = {}
        if recording is not None:
            for exchange in recording.exchanges:
                thread = exchange.thread_id
                exchanges.append(
                    {
                        "number": exchange.number,
                        "url": exchange.url,
                        "status": exchange.status,
                        "thread": thread,
                        "run": exchange.run_id,
                        "request": exchange.request,
                        "diff": _request_diff(previous.get(thread), exchange.request)
                        if thread in previous
                        else None,
                        "timing": _timing(exchange, config),
                    }
                )
                previous[thread] = exchange.request
        for session in sink.sessions:
            number = session.exchange.number if session.exchange is not None else None
            base = len(events)
            bases[number] = (base, len(session.raw))
            starts.append(
                [base, session.initial_messages, session.initial_state, source_index, number]
            )
            for raw, lane in zip(session.raw, session.lanes, strict=True):
                if lane not in lanes:
                    lanes[lane] = len(lanes)
                events.append(raw)
                event_lanes.append(lanes[lane])
                if isinstance(raw, Mapping):
                    stamp = raw.get("timestamp")
                    if isinstance(stamp, int) and not isinstance(stamp, bool):
                        timestamps.append(stamp)
                    thread = raw.get("threadId")
                    if raw.get("type") == "RUN_STARTED" and isinstance(thread, str):
                        threads.add(thread)
            message_ops.extend([base + n, ops] for n, ops in session.message_ops)
            state_ops.extend([base + n, ops] for n, ops in session.state_ops)
            for call_id, call in session.calls.items():
                for key in ("start", "end", "result"):
                    if key in call:
                        call[key] += base
                call["args"] = [base + n for n in call["args"]]
                calls[call_id] = call
            _usage(session.raw, usage)
            for sub in session.subagents:
                subagents[sub.run_id] = {
                    "name": sub.name,
                    "parent": sub.parent_subagent_run_id,
                    "status": str(sub.status),
                }
        for finding in report.findings:
            at = None
            base_of, count = bases.get(finding.exchange, (0, 0))
            if finding.event is not None and count:
                at = base_of + min(finding.event, count) - 1  # past the end: its last event
            rules.setdefault(finding.rule, _rule_text(finding.rule))
            findings.append(
                [
                    at,
                    source_index,
                    finding.exchange,
                    finding.event,
                    finding.rule,
                    finding.severity.value,
                    finding.message,
                    finding.pointer,
                    finding.count,
                    finding.line,
                ]
            )
        for run in report.runs:
            runs.append({"source": source_index, **run.as_json()})
        threads.update(run.thread_id for run in report.runs if run.thread_id)
        sources.append(
            {
                "name": report.source,
                "kind": report.kind,
                "events": report.events,
                "unreadable": report.unreadable,
                "stoppedAt": report.stopped_at,
                "exchanges": exchanges,
            }
        )
    severities = {s.value: sum(r.by_severity(s) for r in reports) for s in Severity}
    duration = max(timestamps) - min(timestamps) if timestamps else None
    data = {
        "sources": sources,
        "lanes": list(lanes),
        "events": events,
        "eventLanes": event_lanes,
        "findings": findings,
        "rules": rules,
        "messageOps": message_ops,
        "stateOps": state_ops,
        "starts": starts,
        "calls": calls,
        "subagents": subagents,
        "summary": {
            "threads": sorted(threads),
            "runs": runs,
            "severities": severities,
            "usage": usage,
            "durationMs": duration,
            "events": len(events),
        },
    }
    return ViewData(reports, data)


def embed_json(data: Any) -> str:
    """
    ``data`` as JSON that may sit inside a ``<script>`` element: every ``<`` (so no string
    can write ``</script>`` or ``<!--``) and U+2028/U+2029 escaped; compact.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


@functools.cache
def _asset(name: str) -> str:
    return resources.files("aguikit").joinpath(f"templates/{name}").read_text(encoding="utf-8")


def _lean(script: str) -> str:
    """The script without its indentation and comment lines (a page of a few events is
    mostly script); hashed as it is written."""
    lines = (line.strip() for line in script.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//"))


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def render_page(view: ViewData, title: str, version: str) -> str:
    """
    The page: the template with the script, the style and the data inline, under a
    Content-Security-Policy that admits only that script and style (by hash) and forbids
    every load (``default-src 'none'``), so the file works offline from ``file://``.

    Raises:
        Unreadable: Jinja2 (the ``[view]`` extra) is not installed; the command line
            prints it as it prints a source it cannot read (exit 2).
    """
    try:
        import jinja2  # the [view] extra: only this command renders a page
        from markupsafe import Markup
    except ImportError:
        raise Unreadable("the page needs Jinja2: pip install 'aguikit[view]'") from None

    script, style = _lean(_asset("view.js")), _asset("view.css")
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(_asset("view.html.j2"))
    policy = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return template.render(
        title=title,
        version=version,
        policy=policy,
        script=Markup(script),
        style=Markup(style),
        data=Markup(embed_json(view.data)),
    )
