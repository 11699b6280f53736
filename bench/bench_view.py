"""
``aguikit view`` at size: page size against the compact JSONL, build time, and the time a
page takes to open in headless Chromium, at 1,000, 10,000 and 100,000 events.

Printed, never asserted (the machine is shared): the targets are a page at most twice the
JSONL of its events, an open (parse, summary and first timeline draw) under 3 seconds at
100,000 events, and scrolling without stalls (the longest of 120 frames that each jump
far through the timeline).  The open time needs Debian's ``/usr/bin/chromium`` and Playwright's
Python package; without them only sizes and build times are printed.

Run with ``python bench/bench_view.py [COUNT...]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


_SCROLL = """() => new Promise(resolve => {
  const rows = document.getElementById("rows");
  const total = Number(rows.dataset.count);
  let k = 0, worst = 0, last = performance.now();
  function frame() {
    const now = performance.now();
    if (k > 1) worst = Math.max(worst, now - last);
    last = now;
    rows.scrollTop = ((k * 7919) % total) * 22;
    if (++k < 120) requestAnimationFrame(frame); else resolve(worst);
  }
  requestAnimationFrame(frame);
})"""
"""120 frames, each scrolling to a far place of the timeline: the longest frame (the
draw of the rows then visible) in milliseconds."""


def stream(count: int) -> list[dict[str, Any]]:
    """A realistic run of about ``count`` events: reasoning, text deltas, parallel tool
    calls with their results, state deltas on a growing document, steps."""
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"todos": [], "progress": 0}},
    ]
    turn = 0
    while len(events) < count - 1:
        rid, mid = f"reason-{turn}", f"msg-{turn}"
        events += [
            {"type": "STEP_STARTED", "stepName": f"turn-{turn}"},
            {"type": "REASONING_START", "messageId": rid},
            {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"},
            *(
                {
                    "type": "REASONING_MESSAGE_CONTENT",
                    "messageId": rid,
                    "delta": "thinking about it ",
                }
                for _ in range(3)
            ),
            {"type": "REASONING_MESSAGE_END", "messageId": rid},
            {"type": "REASONING_END", "messageId": rid},
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            *(
                {
                    "type": "TEXT_MESSAGE_CONTENT",
                    "messageId": mid,
                    "delta": f"word {n} of the answer ",
                }
                for n in range(12)
            ),
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
        ]
        for call in range(2):
            cid = f"call-{turn}-{call}"
            events += [
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": cid,
                    "toolCallName": "add_todo",
                    "parentMessageId": mid,
                },
                {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": '{"title": "buy '},
                {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": f'milk {turn}"}}'},
                {"type": "TOOL_CALL_END", "toolCallId": cid},
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": f"result-{cid}",
                    "toolCallId": cid,
                    "content": '{"ok": true}',
                },
                {
                    "type": "STATE_DELTA",
                    "delta": [
                        {"op": "add", "path": "/todos/-", "value": {"title": f"buy milk {turn}"}},
                        {"op": "replace", "path": "/progress", "value": turn},
                    ],
                },
            ]
        events.append({"type": "STEP_FINISHED", "stepName": f"turn-{turn}"})
        turn += 1
    events = events[: count - 1]
    # close what the cut left open, so the run ends where it may
    events.append({"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"})
    return events


def main(counts: list[int]) -> None:
    from aguikit.checker import CheckConfig
    from aguikit.transport.jsonl import encode_line
    from aguikit.view import build_view, render_page

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None  # type: ignore[assignment]
    chromium = Path("/usr/bin/chromium")
    tmp = Path(tempfile.mkdtemp(prefix="bench-view-"))
    results = []
    for count in counts:
        jsonl = tmp / f"{count}.jsonl"
        jsonl.write_text("".join(encode_line(e) for e in stream(count)), encoding="utf-8")
        start = time.perf_counter()
        view = build_view([str(jsonl)], CheckConfig(max_errors=sys.maxsize))
        page = tmp / f"{count}.html"
        page.write_text(render_page(view, jsonl.name, "bench"), encoding="utf-8")
        built = time.perf_counter() - start
        size, base = page.stat().st_size, jsonl.stat().st_size
        results.append([count, base, size, size / base, built, None, None])
    if sync_playwright is not None and chromium.exists():
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(chromium), args=ARGS)
            for row in results:
                opened: list[float] = []
                frames: list[float] = []
                for _ in range(3):
                    tab = browser.new_page(viewport={"width": 1400, "height": 900})
                    start = time.perf_counter()
                    tab.goto((tmp / f"{row[0]}.html").as_uri())
                    tab.wait_for_selector("body[data-ready='1']", timeout=60_000)
                    tab.click("#show-timeline")
                    tab.wait_for_selector(".row")
                    opened.append(time.perf_counter() - start)
                    frames.append(tab.evaluate(_SCROLL))
                    tab.close()
                row[5] = min(opened)
                row[6] = min(frames)
            browser.close()
    print(
        f"{'events':>8} {'jsonl':>12} {'page':>12} {'ratio':>6} {'build s':>8} {'open s':>7} "
        f"{'worst frame ms':>15}"
    )
    for count, base, size, ratio, built, opened_s, frame in results:
        shown = f"{opened_s:7.2f}" if opened_s is not None else "      -"
        worst = f"{frame:15.1f}" if frame is not None else "              -"
        print(f"{count:>8} {base:>12,} {size:>12,} {ratio:>6.2f} {built:>8.2f} {shown} {worst}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000, 10_000, 100_000])
