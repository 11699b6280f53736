"""
``aguikit view`` in a real browser: Debian's ``/usr/bin/chromium``, driven by Playwright's
Python package (never a downloaded browser), over pages opened from ``file://``.

One browser for the module and one page per generated file, shared by the tests that read
it.  Every page is checked for console errors and for any request other than its own file.
What the page shows is compared with what aguikit computed: event, lane and finding
counts, the state after a chosen ``STATE_DELTA`` against a :class:`aguikit.Session` fed
the same events, the conversation's message ids, the filters and the keys.  A stream
whose every free string is a script payload must run none of it and show it as text.
Screenshots of the summary and the timeline go to ``AGUIKIT_ARTEFACTS`` (default:
the test's temporary directory).

Without chromium or Playwright the browser tests skip, except where
``AGUIKIT_REQUIRE_CHROMIUM`` is set (CI sets it in ``.ci/run``): then it is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from bench.bench_view import ARGS, stream
from tests.servers import Route, serve
from tests.test_check import cli
from tests.test_conversation import _entry
from tests.test_conversation import _recording as _har

from aguikit import Session
from aguikit import view as view_module
from aguikit.catalogue import RULES_BY_ID
from aguikit.checker import CheckConfig, check_source, open_events
from aguikit.errors import AguiError
from aguikit.transport.jsonl import encode_line
from aguikit.transport.sse import encode_bytes
from aguikit.view import LANES, build_view, embed_json, render_page, state_diff

DEMO = Path(__file__).parent.parent / "src" / "aguikit" / "examples" / "demo.sse"
BROWSER_HAR = Path(__file__).parent / "conversations" / "browser.har"
CHROMIUM = "/usr/bin/chromium"
PAYLOADS = (
    "<script>window.__pwned = 1</script>",
    '</script><img src=x onerror="window.__pwned = 2">',
    "javascript:window.__pwned = 3",
    "&lt;b&gt;&amp;&#x3C;script&#x3E;",
)
_FIXED = frozenset({"type", "role", "op", "path", "from", "encoding"})
"""Members whose strings the schema constrains: a payload there is only a schema error."""

Wire = dict[str, Any]


def _require(what: str) -> None:
    if os.environ.get("AGUIKIT_REQUIRE_CHROMIUM"):
        pytest.fail(f"{what} is required here (AGUIKIT_REQUIRE_CHROMIUM is set)")
    pytest.skip(f"{what} not found: the page cannot be tested in a browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        _require(CHROMIUM)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _require("playwright (the test extra)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("AGUIKIT_ARTEFACTS")
    path = Path(where) if where else tmp_path_factory.mktemp("artefacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Opened:
    """A page opened from ``file://``, with what it logged and requested."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready='1']")

    def clean(self) -> None:
        assert [] == self.errors
        assert [self.url] == self.requests

    def timeline(self) -> None:
        self.page.click("#show-timeline")

    def filter(self, **given: str | bool) -> int:
        page = self.page
        page.select_option("#f-type", str(given.get("type", "")))
        page.select_option("#f-lane", str(given.get("lane", "")))
        page.set_checked("#f-findings", bool(given.get("findings", False)))
        page.fill("#f-text", str(given.get("text", "")))
        return int(page.get_attribute("#rows", "data-count") or -1)

    def select(self, index: int, tab: str = "event") -> None:
        """Select event ``index`` (0-based) by filtering to its type and clicking its row."""
        page = self.page
        self.filter()
        page.evaluate(f"document.getElementById('rows').scrollTop = {index} * 22")
        page.click(f".row[data-i='{index}']")
        page.click(f".dtab[data-tab='{tab}']")
        assert str(index) == page.get_attribute("body", "data-selected")

    def selected(self) -> int:
        return int(self.page.get_attribute("body", "data-selected") or -1)


def _page(tmp: Path, name: str, sources: list[str], config: CheckConfig | None = None) -> Path:
    view = build_view(sources, config or CheckConfig(max_errors=10**9))
    path = tmp / f"{name}.html"
    path.write_text(render_page(view, name, "test"), encoding="utf-8")
    return path


def _hostile(value: Any, key: str = "") -> Any:
    """Every free string of ``value`` prefixed by one of the payloads (the same for the
    same string, so ids still match)."""
    if isinstance(value, dict):
        return {k: _hostile(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile(v, key) for v in value]
    if isinstance(value, str) and key not in _FIXED:
        return PAYLOADS[sum(value.encode()) % len(PAYLOADS)] + value
    return value


def _demo_events() -> list[Wire]:
    return list(open_events(str(DEMO)))


def _broken_events() -> list[Wire]:
    """The demo with violations: content for a message never started, a patch that does
    not apply, a schema error, and the run's end dropped (truncated)."""
    events = _demo_events()
    events[-3:-3] = [  # what only a patch's own paths can say, after the demo's deltas
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "add", "path": "/trip/destinations/0", "value": {"city": "Porto"}},
                {"op": "remove", "path": "/trip/destinations/1"},
                {"op": "copy", "from": "/trip/destinations/0", "path": "/trip/first"},
            ],
        },
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "move", "from": "/trip/first", "path": "/moved"},
                {"op": "replace", "path": "/trip/destinations/0/city", "value": "Faro"},
                {"op": "add", "path": "/trip/a~1b", "value": {"deep": [1, [2]]}},
                {"op": "add", "path": "/trip/a~1b/deep/1/-", "value": 3},
                {"op": "test", "path": "/moved/city", "value": "Porto"},
            ],
        },
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "", "value": {"x": 1}}]},
        {"type": "STATE_SNAPSHOT", "snapshot": {"x": 2, "y": [1]}},
    ]
    events.insert(12, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "ghost", "delta": "boo"})
    events.insert(
        26, {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/nope/x", "value": 1}]}
    )
    events.insert(5, {"type": "STEP_STARTED", "stepName": 7})
    return events[:-1]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("view")
    broken = tmp / "broken.jsonl"
    broken.write_text("".join(encode_line(e) for e in _broken_events()), encoding="utf-8")
    hostile = tmp / "hostile.sse"
    hostile.write_bytes(b"".join(encode_bytes(_hostile(e)) for e in _demo_events()))
    huge = tmp / "huge.jsonl"
    events = _demo_events()
    events[10] = {**events[10], "delta": "x" * 100_000 + "END"}
    huge.write_text("".join(encode_line(e) for e in events), encoding="utf-8")
    recording = tmp / "thread.har"
    recording.write_text(json.dumps(_recording()), encoding="utf-8")
    hostile_nested = tmp / "hostile-nested.har"
    hostile_nested.write_text(
        json.dumps(_har([_entry(_hostile(r), _frames(_hostile(e))[0]) for r, e in _nested()]))
    )
    refused = tmp / "refused.har"
    (first, run1), (second, _) = _nested()
    answer = _entry({**second, "resume": RESUME[:1]}, b"{}", media="application/json")
    answer["response"]["status"] = 409  # refused: the request is judged, nothing streamed
    refused.write_text(json.dumps(_har([_entry(first, _frames(run1)[0]), answer])))
    nested = tmp / "nested.har"
    nested.write_text(json.dumps(_har([_entry(r, _frames(e)[0]) for r, e in _nested()])))
    return {
        "demo": _page(tmp, "demo", [str(DEMO)]),
        "broken": _page(tmp, "broken", [str(broken)]),
        "hostile": _page(tmp, "hostile", [str(hostile)]),
        "huge": _page(tmp, "huge", [str(huge)]),
        "thread": _page(tmp, "thread", [str(recording)]),
        "browser": _page(tmp, "browser", [str(BROWSER_HAR)]),
        "two": _page(tmp, "two", [str(DEMO), str(broken)]),
        "nested": _page(tmp, "nested", [str(nested)]),
        "_nested": nested,
        "refused": _page(tmp, "refused", [str(refused)]),
        "hostile-nested": _page(tmp, "hostile-nested", [str(hostile_nested)]),
        "_broken": broken,
        "_hostile": hostile,
        "_recording": recording,
    }


@pytest.fixture(scope="module")
def opened(browser: Any, pages: dict[str, Path]) -> Iterator[dict[str, Opened]]:
    shown = {name: Opened(browser, path) for name, path in pages.items() if path.suffix == ".html"}
    yield shown
    for page in shown.values():
        page.page.close()


# --- the recording -------------------------------------------------------------------------


def _frames(events: list[Wire]) -> tuple[bytes, list[Wire], list[bytes]]:
    body = b""
    times: list[Wire] = []
    frames = [encode_bytes(e) for e in events]
    at = 40.0
    for index, frame in enumerate(frames):
        body += frame
        if index == 5:
            body += b": keep-alive\n\n"
            at += 3000.0  # silence, then the rest at once: buffered
        at += 0.1 if index >= 5 else 10.0
        times.append({"end": len(body), "upstreamMs": at, "downstreamMs": at + 0.5})
    return body, times, frames


def _recording() -> Wire:
    """Two exchanges of one thread, with per-event timing as aguikit's proxy records it."""
    user = {"id": "u1", "role": "user", "content": "hello"}
    first = {"threadId": "t1", "runId": "r1", "messages": [user], "tools": [], "context": []}
    run1 = [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 0, "items": []}},
        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
        *(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": f"part {i} "}
            for i in range(25)
        ),
        {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 1}]},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
    ]
    answer = {"id": "a1", "role": "assistant", "content": "".join(f"part {i} " for i in range(25))}
    again = {"id": "u2", "role": "user", "content": "more"}
    second = {
        "threadId": "t1",
        "runId": "r2",
        "messages": [user, answer, again],
        "state": {"n": 1, "items": []},
        "tools": [],
        "context": [],
    }
    run2 = [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r2"},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/items/-", "value": "x"}]},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r2"},
    ]
    entries = []
    for request, events in ((first, run1), (second, run2)):
        body, times, _ = _frames(events)
        entries.append(_entry(request, body, events=times))
    return _har(entries)


RESUME: Final = [
    {"interruptId": "ok-1", "status": "resolved", "payload": True},
    {"interruptId": "late-1", "status": "resolved", "payload": 1},
    {"interruptId": "drop-1", "status": "cancelled"},
]
"""The second request's answers: one in time, one to an interrupt expired in 2020, one
abandoning another expired one (allowed), and none for ``skip-1``."""


SEALED: Final = {"encryptedValue": "b3BhcXVl"}
USAGE: Final = {"usage": [{"model": "m", "inputTokens": 10, "outputTokens": 4}]}


def _nested() -> list[tuple[Wire, list[Wire]]]:
    """
    Two requests of one thread.  The first run delegates to ``planner`` (``sub-a``), which
    delegates to ``searcher`` (``sub-b``), then ends waiting on four interrupts; the
    second request answers three of them (``RESUME``) and its run, after a reasoning message
    with an encrypted value, ends on another, which nothing later answers.
    """
    a, b = {"subagentRunId": "sub-a"}, {"subagentRunId": "sub-b"}
    user = {"id": "u1", "role": "user", "content": "plan"}
    first = {"threadId": "t9", "runId": "r1", "messages": [user], "tools": [], "context": []}
    first.update(state={}, protocolVersion="1.1")
    ask = [
        {"id": "ok-1", "reason": "approval", "message": "Book it?"},
        {"id": "late-1", "reason": "input", "expiresAt": "2020-01-01T00:00:00Z"},
        {"id": "skip-1", "reason": "input"},
        {"id": "drop-1", "reason": "input", "expiresAt": "2020-01-01T00:00:00Z"},
    ]
    run1 = [
        {"type": "RUN_STARTED", "threadId": "t9", "runId": "r1", "protocolVersion": "1.1"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-a", "name": "planner"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m-a", "role": "assistant", **a},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-a", "delta": "asking", **a},
        {"type": "TEXT_MESSAGE_END", "messageId": "m-a", **a},
        {"type": "SUBAGENT_STARTED", "name": "searcher", "parentSubagentRunId": "sub-a", **b},
        {"type": "STEP_STARTED", "stepName": "look", **b},
        {"type": "STEP_FINISHED", "stepName": "look", **b},
        {"type": "SUBAGENT_FINISHED", **b},
        {"type": "SUBAGENT_FINISHED", **a},
        {
            "type": "RUN_FINISHED",
            "threadId": "t9",
            "runId": "r1",
            "outcome": {"type": "interrupt", "interrupts": ask},
            "usage": [{"model": "m", "inputTokens": 20, "outputTokens": 3}],
        },
    ]
    said = {"id": "m-a", "role": "assistant", "content": "asking", **a}
    second = {**first, "runId": "r2", "messages": [user, said], "resume": RESUME}
    again = {"type": "interrupt", "interrupts": [{"id": "again-1", "reason": "approval"}]}
    run2 = [
        {"type": "RUN_STARTED", "threadId": "t9", "runId": "r2", "protocolVersion": "1.1"},
        {"type": "STEP_STARTED", "stepName": "book"},
        {"type": "REASONING_START", "messageId": "r-1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "th-1", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "th-1", "delta": "hmm"},
        {"type": "REASONING_MESSAGE_END", "messageId": "th-1"},
        {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "th-1", **SEALED},
        {"type": "REASONING_END", "messageId": "r-1"},
        {"type": "STEP_FINISHED", "stepName": "book"},
        {"type": "RUN_FINISHED", "threadId": "t9", "runId": "r2", "outcome": again, **USAGE},
    ]
    return [(first, run1), (second, run2)]


# --- without a browser ---------------------------------------------------------------------


def test_embedded_data_cannot_close_its_script_element() -> None:
    """Every ``<`` and both JavaScript line separators are escapes in the embedded JSON."""
    text = embed_json({"a": "</script><!--", "b": "\u2028\u2029"})
    assert "<" not in text and "\u2028" not in text and "\u2029" not in text
    assert {"a": "</script><!--", "b": "\u2028\u2029"} == json.loads(text)


def test_state_diff_names_added_removed_and_replaced_paths() -> None:
    before = {"a": 1, "b": {"c": [1, 2]}, "gone": True, "x/y": 0}
    after = {"a": 2, "b": {"c": [1, 3]}, "new": None, "x/y": 0}
    assert sorted(
        [["~", "/a", 2], ["~", "/b/c/1", 3], ["-", "/gone"], ["+", "/new", None]]
    ) == sorted(state_diff(before, after))
    assert [["~", "", [1]]] == state_diff({}, [1])
    assert [["+", "/x~1y", 1]] == state_diff({}, {"x/y": 1})


def test_the_page_is_self_contained_with_a_policy_forbidding_loads(
    pages: dict[str, Path],
) -> None:
    html = pages["demo"].read_text()
    assert "default-src &#39;none&#39;" in html or "default-src 'none'" in html
    assert "http://" not in html.split('id="aguikit-data"')[0]
    assert "src=" not in html.split('id="aguikit-data"')[0]


def test_the_page_is_at_most_twice_the_compact_jsonl(tmp_path: Path) -> None:
    """The size budget, on a stream of 1,000 events of text, tools and state (the
    smallest the issue names: there the script weighs most)."""

    events = stream(1_000)
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text("".join(encode_line(e) for e in events), encoding="utf-8")
    page = _page(tmp_path, "s", [str(jsonl)])
    assert page.stat().st_size <= 2 * jsonl.stat().st_size


def _aguikit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aguikit", *args], capture_output=True, text=True, check=False
    )


def test_a_directory_of_protobuf_and_jsonl_is_one_page(tmp_path: Path) -> None:
    """A directory is its streams, each read as check reads it: length-prefixed protobuf
    and JSONL give the demo's events, in the page's data, under their sources' names."""
    folder = tmp_path / "streams"
    folder.mkdir()
    for name, kind in (("demo.pb", "proto"), ("demo.jsonl", "jsonl")):
        assert 0 == cli("convert", str(DEMO), "--to", kind, "-o", str(folder / name))[0]
    out = tmp_path / "page.html"
    code, said, _ = cli("view", str(folder), "-o", str(out))
    assert (0, f"{out}: 88 events, 0 findings\n") == (code, said)
    data = json.loads(out.read_text().split('id="aguikit-data">')[1].split("</script>")[0])
    assert [("jsonl", 44), ("proto", 44)] == sorted(
        (s["kind"], s["events"]) for s in data["sources"]
    )
    demo = _demo_events()
    assert demo + demo == data["events"]


def test_a_url_is_viewed_as_check_reads_it(tmp_path: Path) -> None:
    """A URL is fetched as ``check`` fetches it (the same source path): the page holds the
    agent's events, under the URL's name."""
    with serve() as server:
        url = server.add("/agent", Route([DEMO.read_bytes()]))
        out = tmp_path / "page.html"
        code, said, _ = cli("view", url, "-o", str(out))
    assert (0, f"{out}: 44 events, 0 findings\n") == (code, said)
    data = _data(out.read_text())
    assert _demo_events() == data["events"]
    assert [url] == [s["name"] for s in data["sources"]]


def test_an_unreadable_source_gives_checks_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.sse")
    out = tmp_path / "page.html"
    viewed, checked = _aguikit("view", missing, "-o", str(out)), _aguikit("check", missing)
    assert 2 == viewed.returncode == checked.returncode
    assert checked.stderr == viewed.stderr and "cannot open" in viewed.stderr
    assert not out.exists()


def test_check_format_html_writes_the_page_with_checks_findings(
    tmp_path: Path, pages: dict[str, Path]
) -> None:
    source = str(pages["_broken"])
    out = tmp_path / "report.html"
    written = _aguikit("check", source, "--format", "html", "-o", str(out))
    listed = _aguikit("check", source, "--format", "json")
    assert 1 == written.returncode == listed.returncode
    data = json.loads(out.read_text().split('id="aguikit-data">')[1].split("</script>")[0])
    findings = json.loads(listed.stdout)["sources"][0]["problems"]
    assert [(f["rule"], f.get("event")) for f in findings] == [
        (f[4], f[3]) for f in data["findings"]
    ]


# --- in the browser ------------------------------------------------------------------------


def test_every_page_logs_no_error_and_requests_nothing(opened: dict[str, Opened]) -> None:
    for name, page in opened.items():
        page.timeline()
        page.page.keyboard.press("j")
        for tab in ("event", "state", "conversation", "timing", "request"):
            page.page.click(f".dtab[data-tab='{tab}']")
        assert (name, []) == (name, page.errors)
        assert (name, [page.url]) == (name, page.requests)


def test_counts_equal_what_aguikit_computed(
    opened: dict[str, Opened], pages: dict[str, Path]
) -> None:
    sources = {"demo": DEMO, "broken": pages["_broken"], "thread": pages["_recording"]}
    for name, path in sources.items():
        source = str(path)
        view = build_view([source], CheckConfig(max_errors=10**9))
        page = opened[name]
        page.timeline()
        assert sum(r.events for r in view.reports) == page.filter()
        assert len(view.data["lanes"]) == page.page.locator(".lane-head").count()
        assert (
            sum(len(r.findings) for r in view.reports)
            == page.page.locator("#findings .finding").count()
        )
    assert opened["broken"].page.locator("#findings .finding").count() >= 3
    heads = opened["demo"].page.locator(".lane-head").all_text_contents()
    nested = [h for h in heads if "\u21b3" in h]  # a subagent's work, in lanes of its own
    assert nested and all("researcher" in h for h in nested)


def test_only_visible_rows_are_rendered(opened: dict[str, Opened]) -> None:
    page = opened["thread"]
    page.timeline()
    assert page.filter() > 0
    rows = page.page.locator(".row").count()
    assert 0 < rows <= 900 // 22 + 12


def test_clicking_a_finding_selects_its_event_and_marks_the_pointer(
    opened: dict[str, Opened], pages: dict[str, Path]
) -> None:
    page = opened["broken"]
    page.page.click("#show-summary")
    report = check_source(str(pages["_broken"]), CheckConfig(max_errors=10**9))
    events = list(open_events(str(pages["_broken"])))
    located = [
        (n, f) for n, f in enumerate(report.findings) if f.pointer and f.event and f.pointer != "/"
    ]
    assert located
    for number, finding in located:
        page.page.click("#show-summary")
        page.page.click(f"#findings .finding[data-finding='{number}']")
        assert finding.event is not None
        assert finding.event - 1 == page.selected()
        value: Any = events[finding.event - 1]
        for token in (finding.pointer or "").split("/")[1:]:
            key = token.replace("~1", "/").replace("~0", "~")
            value = value[int(key)] if isinstance(value, list) else value[key]
        marked = page.page.text_content("#pointer-mark")
        assert json.loads(marked or "null") == value
        panel = page.page.text_content("#panel") or ""
        rule = RULES_BY_ID[finding.rule]  # the rule's reference text beside its message
        assert finding.rule in panel and rule.title in panel and rule.source in panel


def _session_after(events: list[Wire], index: int) -> Session:
    session = Session(recover=True, keep_delivered=False)
    for event in events[: index + 1]:
        try:
            session.feed(event)
        except AguiError:  # a violation is skipped, as the checker's session does
            continue
    return session


def test_state_after_each_delta_equals_the_sessions(
    opened: dict[str, Opened], pages: dict[str, Path]
) -> None:
    for name, events in (("demo", _demo_events()), ("broken", _broken_events())):
        page = opened[name]
        page.timeline()
        deltas = [
            i for i, e in enumerate(events) if e.get("type") in ("STATE_DELTA", "STATE_SNAPSHOT")
        ]
        assert deltas
        for index in deltas:
            page.select(index, "state")
            shown = json.loads(page.page.text_content("#state") or "null")
            assert _session_after(events, index).state == shown, (name, index)
        assert page.page.locator("#state-diff").count() in (0, 1)


def test_a_delta_is_shown_as_its_paths(opened: dict[str, Opened]) -> None:
    events = _demo_events()
    index = next(i for i, e in enumerate(events) if e["type"] == "STATE_DELTA")
    page = opened["demo"]
    page.timeline()
    page.select(index, "state")
    before, after = _session_after(events, index - 1).state, _session_after(events, index).state
    lines = (page.page.text_content("#state-diff") or "").strip()
    for op in state_diff(before, after):
        assert op[1] in lines
    sent = page.page.locator("#state-ops div").all_text_contents()
    assert [f"{op['op']} {op['path']}" for op in events[index]["delta"]] == [
        " ".join(line.split(" ")[:2]) for line in sent
    ]


def test_the_conversation_after_an_event_is_the_sessions(opened: dict[str, Opened]) -> None:
    events = _demo_events()
    page = opened["demo"]
    page.timeline()
    for index in range(0, len(events), 3):
        page.select(index, "conversation")
        session = _session_after(events, index)
        ids = page.page.locator("#conversation .msg .tag:first-of-type").all_text_contents()
        assert [m.id for m in session.messages] == ids, index
        text = page.page.text_content("#conversation") or ""
        for message in session.messages:
            content = getattr(message, "content", None)
            if isinstance(content, str) and content:
                assert content in text
            for call in getattr(message, "tool_calls", None) or ():  # streamed so far
                assert f"{call.function.name} ({call.id})" in text, index
                assert call.function.arguments in text


def test_filters_and_keys(opened: dict[str, Opened]) -> None:
    events = _broken_events()
    page = opened["broken"]
    page.timeline()
    assert sum(1 for e in events if e["type"] == "TOOL_CALL_ARGS") == page.filter(
        type="TOOL_CALL_ARGS"
    )
    assert sum(1 for e in events if "Krak" in json.dumps(e, ensure_ascii=False)) == page.filter(
        text="Krak"
    )
    with_findings = page.filter(findings=True)
    assert 3 <= with_findings
    tool_lane = str(LANES.index("tool"))
    assert sum(
        1 for e in events if e["type"].startswith("TOOL_CALL") and "subagentRunId" not in e
    ) == page.filter(lane=tool_lane)
    page.filter()
    page.page.focus("#rows")
    page.page.evaluate("document.activeElement.blur()")
    page.select(0)
    for expected in (1, 2, 3):
        page.page.keyboard.press("j")
        assert expected == page.selected()
    page.page.keyboard.press("k")
    assert 2 == page.selected()
    page.page.keyboard.press("n")
    first = page.selected()
    assert page.page.locator("#panel .finding").count() >= 1
    page.page.keyboard.press("n")
    assert page.selected() > first
    page.page.keyboard.press("p")
    assert first == page.selected()


def test_hostile_strings_run_nothing_and_show_as_text(opened: dict[str, Opened]) -> None:
    page = opened["hostile"]
    page.timeline()
    events = [_hostile(e) for e in _demo_events()]
    for index in range(len(events)):
        for tab in ("event", "conversation", "state"):
            page.select(index, tab)
    page.page.click("#show-summary")
    assert page.page.evaluate("window.__pwned") is None
    page.timeline()
    page.select(10, "conversation")
    shown = page.page.text_content("#conversation") or ""
    assert any(payload in shown for payload in PAYLOADS)
    page.select(0, "event")
    assert events[0]["runId"] in json.loads(page.page.text_content(".json") or "{}")["runId"]
    assert 0 == page.page.locator("body img, body a, body iframe, #panel script").count()
    assert page.page.evaluate("window.__pwned") is None
    page.clean()


def test_an_enormous_value_is_cut_with_a_way_to_expand_it(opened: dict[str, Opened]) -> None:
    page = opened["huge"]
    page.timeline()
    page.select(10, "event")
    text = page.page.text_content(".json") or ""
    assert "END" not in text and "expand" in text
    page.page.click("#panel .json .more")
    assert "x" * 100_000 + "END" in (page.page.text_content(".json") or "")


def test_a_recording_shows_timing_and_request_diffs(opened: dict[str, Opened]) -> None:
    page = opened["thread"]
    page.timeline()
    page.select(8, "timing")
    timing = page.page.text_content("#timing") or ""
    assert "time to first event" in timing and "keep-alive comments: 1" in timing
    assert "buffered" in timing
    page.filter()
    last = page.filter() - 1
    page.select(last, "request")
    diff = page.page.text_content("#request-diff") or ""
    assert "added message a1" in diff and "added message u2" in diff and "/state" in diff


def test_several_sources_are_one_timeline_each_event_naming_its_source(
    opened: dict[str, Opened], pages: dict[str, Path]
) -> None:
    view = build_view([str(DEMO), str(pages["_broken"])], CheckConfig(max_errors=10**9))
    page = opened["two"]
    page.timeline()
    demo = view.reports[0].events
    assert demo + view.reports[1].events == page.filter()
    page.select(demo - 1, "event")
    assert "demo.sse \u00b7 #44" in (page.page.text_content("#panel h2") or "")
    page.select(demo, "state")  # the second source starts from its own empty state
    assert {} == json.loads(page.page.text_content("#state") or "null")
    page.page.click(".dtab[data-tab='event']")
    assert "broken.jsonl \u00b7 #1" in (page.page.text_content("#panel h2") or "")
    page.clean()


def test_a_browser_har_shows_the_interrupt_and_the_request_that_continued(
    opened: dict[str, Opened],
) -> None:
    """The devtools export: run-1 ends interrupted, the next request sends no resume
    (AGUI-R003, a request's finding: in the summary, at no event); HAR timings only."""
    page = opened["browser"]
    page.page.click("#show-summary")
    runs = page.page.text_content("#runs") or ""
    assert "interrupted" in runs and "interrupts:" in runs
    findings = page.page.locator("#findings .finding")
    assert 1 == findings.count()
    assert "AGUI-R003" in (findings.first.text_content() or "")
    assert "unanswered" in (page.page.text_content("#interrupts .ist") or "")
    assert "/resume" in (findings.first.text_content() or "")
    page.timeline()
    last = page.filter() - 1
    page.select(last, "request")
    diff = page.page.text_content("#request-diff") or ""
    assert "added message a1" in diff and "added message u2" in diff
    assert 0 == page.page.locator("#request-resume").count()
    page.page.click(".dtab[data-tab='timing']")
    assert "HAR wait" in (page.page.text_content("#timing") or "")
    page.clean()


def test_screenshots_of_the_summary_and_the_timeline(
    opened: dict[str, Opened], artefacts: Path
) -> None:
    page = opened["demo"]
    page.page.click("#show-summary")
    page.page.screenshot(path=str(artefacts / "view-summary.png"))
    page.timeline()
    page.select(27, "event")
    page.page.screenshot(path=str(artefacts / "view-timeline.png"))
    assert (artefacts / "view-summary.png").stat().st_size > 10_000
    assert (artefacts / "view-timeline.png").stat().st_size > 10_000


def _data(page: str) -> Any:
    return json.loads(page.split('id="aguikit-data">')[1].split("</script>")[0])


def test_check_format_html_honours_jobs(
    tmp_path: Path, pages: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--jobs`` spreads the page's sources as it spreads the other formats' (one
    ``map_sources``), and the page is the same as from one process."""
    real, jobs = view_module.map_sources, []

    def spy(check: Any, specs: list[str], config: CheckConfig, n: int) -> Any:
        jobs.append((check, n))
        return real(check, specs, config, n)

    monkeypatch.setattr(view_module, "map_sources", spy)
    sources = [str(DEMO), str(pages["_nested"]), str(pages["_broken"])]
    pages_by_jobs = {}
    for n in ("1", "2"):
        out = tmp_path / f"jobs{n}.html"
        code, _, _ = cli("check", *sources, "--format", "html", "-o", str(out), "--jobs", n)
        assert 1 == code == cli("check", *sources, "--format", "json", "--jobs", n)[0]
        pages_by_jobs[n] = out.read_text()
    out = tmp_path / "view.html"  # aguikit view takes --jobs too: the same data
    assert 0 == cli("view", *sources, "-o", str(out), "--jobs", "2")[0]
    assert _data(pages_by_jobs["1"]) == _data(out.read_text())
    assert [(view_module._check, 1), (view_module._check, 2), (view_module._check, 2)] == jobs
    assert pages_by_jobs["1"] == pages_by_jobs["2"]


def _depths(events: list[Wire]) -> list[int]:
    """Each event's nesting, from the events alone: an invocation is one deeper than the
    one its ``parentSubagentRunId`` names; the event that starts it, at its parent's."""
    parents = {
        e["subagentRunId"]: e.get("parentSubagentRunId")
        for e in events
        if e["type"] == "SUBAGENT_STARTED"
    }
    out = []
    for event in events:
        depth, sub = 0, event.get("subagentRunId")
        while sub:
            depth, sub = depth + 1, parents.get(sub)
        out.append(depth - 1 if event["type"] == "SUBAGENT_STARTED" else depth)
    return out


def test_subagents_nest_under_the_event_that_started_them(opened: dict[str, Opened]) -> None:
    events = [e for _, run in _nested() for e in run]
    page = opened["nested"]
    page.timeline()
    assert len(events) == page.filter()
    rows = page.page.locator(".row")
    drawn = sorted(
        (int(r.get_attribute("data-i") or -1), int(r.get_attribute("data-depth") or -1))
        for r in rows.all()
    )
    assert list(enumerate(_depths(events))) == drawn
    assert 2 == max(d for _, d in drawn)
    # Geometry: each level moves the event's type right by one step, a guide per level;
    # the event that starts an invocation has its opener mark there instead.
    left: dict[int, set[int]] = {}
    for index, depth in drawn:
        row = page.page.locator(f".row[data-i='{index}']")
        opener = row.locator(".opener")
        box = (opener if opener.count() else row.locator(".t")).bounding_box()
        assert box is not None
        left.setdefault(depth, set()).add(round(box["x"]))
        assert depth == row.locator(".guide").count()
        assert (events[index]["type"] == "SUBAGENT_STARTED") == bool(opener.count())
    assert all(1 == len(x) for x in left.values())
    (x0,), (x1,), (x2,) = left[0], left[1], left[2]
    assert x2 - x1 == x1 - x0 > 0
    # The lanes: the invocation's under the parent's, the searcher's nested twice.
    heads = page.page.locator(".lane-head")
    assert [0] * len(LANES) + [1, 1, 2, 2] == [
        int(h.get_attribute("data-depth") or -1) for h in heads.all()
    ]
    last = heads.last.text_content() or ""
    assert "step" in last and last.index("planner") < last.index("searcher")
    page.clean()


def test_interrupts_link_to_the_resume_entries_that_answer_them(
    opened: dict[str, Opened], pages: dict[str, Path]
) -> None:
    (_, run1), (_, run2) = _nested()
    finished, resumed = len(run1) - 1, len(run1)  # RUN_FINISHED; the next request's first
    view = build_view([str(pages["_nested"])], CheckConfig(max_errors=10**9))
    assert ["AGUI-R005", "AGUI-R003"] == [f.rule for f in view.reports[0].findings]
    page = opened["nested"]
    page.page.click("#show-summary")
    cards = dict(
        zip(
            page.page.locator(".card .dim").all_text_contents(),
            page.page.locator(".card .big").all_text_contents(),
            strict=True,
        )
    )  # the summary's token usage: the runs' entries summed
    assert ("30", "7", "2") == (cards["inputTokens"], cards["outputTokens"], cards["runs"])
    lines = page.page.locator("#interrupts .interrupt")
    raised = sum(len(r.interrupts) for r in view.reports[0].runs)
    assert 5 == raised == lines.count()
    assert ["resolved", "expired", "unanswered", "cancelled, expired", "open"] == [
        (line.locator(".ist").text_content() or "") for line in lines.all()
    ]
    page.timeline()
    page.filter()
    row = page.page.locator(f".row[data-i='{finished}']")
    assert 4 == row.locator(".ilink[data-interrupt]").count()
    back = page.page.locator(f".row[data-i='{resumed}'] .ilink[data-raised]")
    assert [f"\u25b6 resumes {i}" for i in ("ok-1", "late-1", "drop-1")] == back.all_text_contents()
    for index in range(len(run1) + len(run2)):  # the line from the interrupt to its answer
        segments = page.page.locator(f".row[data-i='{index}'] .links .seg").count()
        assert (index in (finished, resumed)) == bool(segments), index
    # Following a link: the resuming request, its entry marked.
    row.locator(".ilink[data-interrupt='1']").click()
    assert resumed == page.selected()
    assert "request" == page.page.get_attribute(".dtab.on", "data-tab")
    assert RESUME[1] == json.loads(page.page.text_content("#pointer-mark") or "null")
    assert "expired" in (page.page.text_content("#request-resume") or "")
    # ... and back from the entry to the interrupt in the event that raised it.
    page.page.locator("#request-resume .ilink").first.click()
    assert finished == page.selected()
    asked = run1[-1]["outcome"]["interrupts"][0]
    assert asked == json.loads(page.page.text_content("#pointer-mark") or "null")
    # An interrupt nobody answered: marked, and its link stays at the event.
    row = page.page.locator(f".row[data-i='{finished}']")
    assert "unanswered" in (row.locator(".ilink[data-interrupt='2']").text_content() or "")
    row.locator(".ilink[data-interrupt='2']").click()
    assert finished == page.selected()
    shown = page.page.text_content("#event-interrupts") or ""
    assert "unanswered" in shown and "no resume entry" in shown
    page.clean()


def test_hostile_interrupts_and_subagents_stay_text(opened: dict[str, Opened]) -> None:
    """The interrupts' ids, reasons and messages, the subagents' names and the resume
    entries, every one a payload: each link followed, each event's panels shown."""
    page = opened["hostile-nested"]
    page.page.click("#show-summary")
    shown = page.page.text_content("#interrupts") or ""
    assert any(payload + "ok-1" in shown for payload in PAYLOADS)
    page.timeline()
    count = page.filter()
    assert count == sum(len(run) for _, run in _nested())
    run1 = _nested()[0][1]
    raised, resumed = len(run1) - 1, len(run1)  # RUN_FINISHED; the next request's first
    for index, tab in ((raised, "event"), (resumed, "request")):
        page.select(index, tab)
        for link in page.page.locator("#panel .ilink").all():
            link.click()
    for link in page.page.locator(".row .ilink").all():
        link.click()
    page.page.keyboard.press("j")
    for tab in ("event", "state", "conversation", "timing", "request"):
        page.page.click(f".dtab[data-tab='{tab}']")
    assert any("planner" in h for h in page.page.locator(".lane-head").all_text_contents())
    assert 0 == page.page.locator("body img, body a, body iframe, #panel script").count()
    assert page.page.evaluate("window.__pwned") is None
    page.clean()


def test_an_encrypted_reasoning_value_is_marked(opened: dict[str, Opened]) -> None:
    """The event's row says it carries an encrypted value, and the conversation marks the
    reasoning message that holds it (the value itself is opaque: shown as sent)."""
    events = [e for _, run in _nested() for e in run]
    index = next(i for i, e in enumerate(events) if e["type"] == "REASONING_ENCRYPTED_VALUE")
    page = opened["nested"]
    page.timeline()
    page.select(index, "conversation")
    assert "encrypted" in (page.page.text_content(f".row[data-i='{index}'] .s") or "")
    marked = page.page.locator("#conversation .msg", has=page.page.locator(".tag.enc"))
    assert 1 == marked.count()
    assert "th-1" in (marked.first.text_content() or "")
    page.select(index - 1, "conversation")  # before it: nothing marked
    assert 0 == page.page.locator("#conversation .tag.enc").count()


def test_a_resuming_request_that_streamed_nothing_opens_alone(opened: dict[str, Opened]) -> None:
    """The request answering ``ok-1`` was refused (409): no event of it to select, so its
    link opens the request itself, its entry marked."""
    page = opened["refused"]
    page.timeline()
    finished = len(_nested()[0][1]) - 1
    assert finished + 1 == page.filter()  # only the first exchange streamed
    page.page.click(f".row[data-i='{finished}'] .ilink[data-interrupt='0']")
    assert -1 == page.selected()
    assert "exchange 2 \u00b7 409" in (page.page.text_content("#panel") or "")
    assert RESUME[0] == json.loads(page.page.text_content("#pointer-mark") or "null")
    page.clean()
