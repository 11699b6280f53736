// aguikit view: renders the data aguikit resolved (docs/view.md).  Every value from the
// data is written with textContent: nothing of it is ever parsed as HTML or followed.
// The protocol was judged in Python: this script applies no patch and folds no event; it
// sets and deletes values at pointers and keeps a list of rows, as the data says.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("aguikit-data").textContent);
  const EV = D.events; // the raw events, in order; D.eventLanes[i] is event i's lane
  const LANE = D.eventLanes;
  const ROW = 22;
  const CUT = 2000; // characters of one value shown before "expand"
  const COLORS = { run: "#455a64", text: "#1565c0", tool: "#8e24aa", reasoning: "#00897b",
    step: "#6d4c41", activity: "#f9a825", state: "#2e7d32", messages: "#5c6bc0", other: "#9e9e9e" };

  // --- small DOM helpers: text only ---------------------------------------------------
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function typeOf(raw) {
    return raw && typeof raw === "object" && typeof raw.type === "string" ? raw.type : "(no type)";
  }
  function clone(value) { return value === undefined ? undefined : JSON.parse(JSON.stringify(value)); }
  function short(value, n) {
    const s = typeof value === "string" ? value : JSON.stringify(value);
    return s === undefined ? "" : s.length > n ? s.slice(0, n) + "\u2026" : s;
  }
  function bisect(list, index) { // the first entry of list ([eventIndex, ...]) past index
    let lo = 0, hi = list.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (list[mid][0] <= index) lo = mid + 1; else hi = mid; }
    return lo;
  }

  // --- findings by event ------------------------------------------------------------------
  const byEvent = new Map();
  D.findings.forEach(function (f, i) {
    if (f[0] === null) return;
    if (!byEvent.has(f[0])) byEvent.set(f[0], []);
    byEvent.get(f[0]).push(i);
  });
  const findingEvents = Array.from(byEvent.keys()).sort(function (a, b) { return a - b; });
  const SEVERITY_ORDER = { error: 2, warning: 1, info: 0 };
  function worst(list) {
    let best = null;
    list.forEach(function (i) {
      const s = D.findings[i][5];
      if (best === null || SEVERITY_ORDER[s] > SEVERITY_ORDER[best]) best = s;
    });
    return best;
  }

  // --- state and conversation after an event -------------------------------------------
  function startOf(index) { const at = bisect(D.starts, index) - 1; return at >= 0 ? D.starts[at] : null; }
  function unescapeToken(t) { return t.replace(/~1/g, "/").replace(/~0/g, "~"); }
  function setAt(root, pointer, value, remove) {
    if (pointer === "") return remove ? null : clone(value);
    const parts = pointer.slice(1).split("/").map(unescapeToken);
    let node = root;
    for (let i = 0; i < parts.length - 1; i++) { node = node[parts[i]]; if (node === undefined || node === null) return root; }
    const last = parts[parts.length - 1];
    if (remove) { if (Array.isArray(node)) node.splice(Number(last), 1); else delete node[last]; }
    else node[Array.isArray(node) ? Number(last) : last] = clone(value);
    return root;
  }
  function stateAfter(index) {
    const start = startOf(index);
    if (!start) return null;
    let state = clone(start[2]);
    for (let i = bisect(D.stateOps, start[0] - 1); i < D.stateOps.length && D.stateOps[i][0] <= index; i++) {
      D.stateOps[i][1].forEach(function (op) { state = setAt(state, op[1], op[2], op[0] === "-"); });
    }
    return state;
  }
  function messagesAfter(index) {
    const start = startOf(index);
    if (!start) return [];
    let list = clone(start[1]), lastText = null, lastArgs = [null, null];
    function find(id) { for (let i = 0; i < list.length; i++) if (list[i].id === id) return i; return -1; }
    for (let i = bisect(D.messageOps, start[0] - 1); i < D.messageOps.length && D.messageOps[i][0] <= index; i++) {
      D.messageOps[i][1].forEach(function (op) {
        if (op[0] === "L") { list = clone(op[1]); return; }
        // A text operation's target is given, or 0 / left out: the previous one's; the
        // text it appends is given, or else it is its event's own delta member.
        if (op[0] === "t") {
          if (op.length > 1 && op[1] !== 0) lastText = op[1];
          const t = find(lastText);
          if (t >= 0) list[t].content = (list[t].content || "") + (op.length > 2 ? op[2] : EV[D.messageOps[i][0]].delta);
          return;
        }
        if (op[0] === "g") {
          if (op.length > 1 && op[1] !== 0) lastArgs = [op[1], op[2]];
          const g = find(lastArgs[0]);
          if (g < 0) return;
          const text = op.length > 3 ? op[3] : EV[D.messageOps[i][0]].delta;
          (list[g].toolCalls || []).forEach(function (c) {
            if (c.id === lastArgs[1]) c.function.arguments = (c.function.arguments || "") + text;
          });
          return;
        }
        const at = find(op[1]);
        const row = clone(op[3]);
        if (op[4]) { // text and arguments as the content operations left them
          const old = at >= 0 ? list[at] : null;
          if (row.role !== "activity") row.content = old && old.content !== undefined ? old.content : "";
          (row.toolCalls || []).forEach(function (c) {
            let kept = "";
            ((old && old.toolCalls) || []).forEach(function (o) { if (o.id === c.id) kept = o.function.arguments || ""; });
            c.function.arguments = kept;
          });
        }
        if (at >= 0) list.splice(at, 1);
        const where = typeof op[2] === "number" && op[2] <= list.length ? op[2] : list.length;
        list.splice(where, 0, row);
      });
    }
    return list;
  }

  // --- JSON with a pointer highlighted, long values cut -------------------------------
  function cutText(text, into) {
    if (text.length <= CUT) { into.appendChild(document.createTextNode(text)); return; }
    const shown = document.createTextNode(text.slice(0, CUT));
    into.appendChild(shown);
    const more = el("button", "more", "expand (" + (text.length - CUT) + " more characters)");
    more.type = "button";
    more.addEventListener("click", function (e) { e.stopPropagation(); shown.textContent = text; more.remove(); });
    into.appendChild(more);
  }
  function jsonView(value, mark) {
    const root = el("div", "json");
    function walk(v, pointer, indent, into) {
      const target = pointer === mark ? into.appendChild(el("mark")) : into;
      if (pointer === mark) target.id = "pointer-mark";
      if (v === null || typeof v !== "object") {
        if (typeof v === "string") {
          const s = el("span", "s"); cutText(JSON.stringify(v), s); target.appendChild(s);
        } else target.appendChild(el("span", "v", JSON.stringify(v)));
        return;
      }
      const isArray = Array.isArray(v);
      const keys = isArray ? v.map(function (_, i) { return i; }) : Object.keys(v);
      if (!keys.length) { target.appendChild(document.createTextNode(isArray ? "[]" : "{}")); return; }
      target.appendChild(document.createTextNode(isArray ? "[\n" : "{\n"));
      keys.forEach(function (k, n) {
        target.appendChild(document.createTextNode(indent + "  "));
        if (!isArray) { target.appendChild(el("span", "k", JSON.stringify(String(k)))); target.appendChild(document.createTextNode(": ")); }
        const token = String(k).replace(/~/g, "~0").replace(/\//g, "~1");
        walk(v[k], pointer + "/" + token, indent + "  ", target);
        target.appendChild(document.createTextNode(n < keys.length - 1 ? ",\n" : "\n"));
      });
      target.appendChild(document.createTextNode(indent + (isArray ? "]" : "}")));
    }
    walk(value, "", "", root);
    return root;
  }

  // --- summary ------------------------------------------------------------------------
  function card(label, value) {
    const c = el("div", "card"); c.appendChild(el("div", "big", value)); c.appendChild(el("div", "dim", label)); return c;
  }
  function findingRow(i) {
    const f = D.findings[i];
    const row = el("div", "finding " + f[5]);
    row.dataset.finding = String(i);
    row.appendChild(el("span", "sev " + f[5], f[5]));
    row.appendChild(el("span", "rule", " " + f[4]));
    const where = [];
    if (f[2] !== null) where.push("exchange " + f[2]);
    if (f[3] !== null) where.push("event " + f[3]);
    if (f[7] !== null) where.push(f[7] === "" ? "/" : f[7]);
    if (f[8] > 1) where.push("\u00d7" + f[8]);
    row.appendChild(el("span", "dim", where.join(" \u00b7 ") + "  "));
    row.appendChild(el("span", "", f[6]));
    row.addEventListener("click", function () { openFinding(i); });
    return row;
  }
  function summary() {
    const s = D.summary, box = document.getElementById("summary");
    const cards = el("div", "cards");
    cards.appendChild(card("events", s.events));
    cards.appendChild(card("threads", s.threads.length));
    cards.appendChild(card("runs", s.runs.length));
    ["error", "warning", "info"].forEach(function (k) { cards.appendChild(card(k + "s", s.severities[k] || 0)); });
    if (s.durationMs !== null) cards.appendChild(card("duration", (s.durationMs / 1000).toFixed(2) + " s"));
    Object.keys(s.usage).forEach(function (k) { cards.appendChild(card(k, s.usage[k])); });
    box.appendChild(cards);
    box.appendChild(el("h2", "", "Sources"));
    const st = el("table");
    D.sources.forEach(function (src) {
      const tr = el("tr");
      tr.appendChild(el("td", "", src.name)); tr.appendChild(el("td", "dim", src.kind));
      tr.appendChild(el("td", "", src.events + " events" + (src.exchanges.length ? ", " + src.exchanges.length + " exchanges" : "")));
      tr.appendChild(el("td", src.unreadable ? "unreadable" : "", src.unreadable || (src.stoppedAt ? "stopped after event " + src.stoppedAt : "")));
      st.appendChild(tr);
    });
    box.appendChild(st);
    box.appendChild(el("h2", "", "Runs"));
    const rt = el("table"); rt.id = "runs";
    s.runs.forEach(function (r) {
      const tr = el("tr");
      [r.number, r.run_id || "(no id)", r.thread_id || "", r.status,
        (r.message || "") + (r.code ? " [" + r.code + "]" : "") + (r.interrupts ? " interrupts: " + r.interrupts.join(", ") : ""),
        r.first_event ? "events " + r.first_event + "\u2013" + (r.last_event || "") : ""].forEach(function (v) { tr.appendChild(el("td", "", v)); });
      rt.appendChild(tr);
    });
    box.appendChild(rt);
    box.appendChild(el("h2", "", "Findings (" + D.findings.length + ")"));
    const list = el("div"); list.id = "findings"; box.appendChild(list);
    let shown = 0;
    function more() {
      const end = Math.min(D.findings.length, shown + 500);
      for (; shown < end; shown++) list.appendChild(findingRow(shown));
      if (shown < D.findings.length) {
        const b = el("button", "more", "show more findings"); b.type = "button";
        b.addEventListener("click", function () { b.remove(); more(); }); list.appendChild(b);
      }
    }
    more();
  }

  // --- timeline -----------------------------------------------------------------------
  const rows = document.getElementById("rows"), spacer = document.getElementById("spacer");
  let visible = [], selected = -1, tab = "event", markPointer = null;
  const types = Array.from(new Set(EV.map(typeOf))).sort();
  function options(select, values, labels) {
    values.forEach(function (v, i) { const o = el("option", "", labels ? labels[i] : v); o.value = String(v); select.appendChild(o); });
  }
  options(document.getElementById("f-type"), types);
  options(document.getElementById("f-lane"), D.lanes.map(function (_, i) { return i; }), D.lanes);
  const heads = document.getElementById("lane-heads");
  D.lanes.forEach(function (name) {
    // A subagent's lane: its concern under the invocation, and the invocations above it.
    const at = name.indexOf("@");
    let label = name;
    if (at > 0) {
      const chain = [];
      let id = name.slice(at + 1), guard = 0;
      while (id && guard++ < 32) {
        const sub = Object.prototype.hasOwnProperty.call(D.subagents, id) ? D.subagents[id] : null;
        chain.unshift(sub && sub.name ? sub.name + " " + id : id);
        id = sub ? sub.parent : null;
      }
      label = name.slice(0, at) + " \u21b3 " + chain.join(" \u21b3 ");
    }
    const h = el("div", "lane-head", label);
    h.title = label;
    heads.appendChild(h);
  });
  let searchText = null;
  function applyFilter() {
    const type = document.getElementById("f-type").value;
    const lane = document.getElementById("f-lane").value;
    const only = document.getElementById("f-findings").checked;
    const text = document.getElementById("f-text").value.toLowerCase();
    if (text && !searchText) searchText = EV.map(function (e) { return JSON.stringify(e).toLowerCase(); });
    visible = [];
    for (let i = 0; i < EV.length; i++) {
      if (type && typeOf(EV[i]) !== type) continue;
      if (lane && String(LANE[i]) !== lane) continue;
      if (only && !byEvent.has(i)) continue;
      if (text && searchText[i].indexOf(text) < 0) continue;
      visible.push(i);
    }
    spacer.style.height = visible.length * ROW + "px";
    rows.dataset.count = String(visible.length);
    document.getElementById("f-count").textContent = visible.length + " of " + EV.length + " events";
    draw();
  }
  function describe(raw) {
    if (!raw || typeof raw !== "object") return short(raw, 120);
    const bits = [];
    ["messageId", "toolCallId", "toolCallName", "stepName", "runId", "activityType", "name"].forEach(function (k) {
      if (typeof raw[k] === "string") bits.push(raw[k]);
    });
    if (typeof raw.delta === "string") bits.push(JSON.stringify(short(raw.delta, 80)));
    else if (raw.delta !== undefined) bits.push(short(raw.delta, 80));
    if (typeof raw.message === "string") bits.push(short(raw.message, 80));
    if (raw.encryptedValue !== undefined) bits.push("\ud83d\udd12 encrypted");
    return bits.join("  ");
  }
  function draw() {
    const top = rows.scrollTop, height = rows.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW) - 5), last = Math.min(visible.length, Math.ceil((top + height) / ROW) + 5);
    Array.from(rows.querySelectorAll(".row")).forEach(function (r) { r.remove(); });
    for (let p = first; p < last; p++) {
      const i = visible[p], e = EV[i], lane = LANE[i];
      const row = el("div", "row" + (i === selected ? " sel" : ""));
      row.style.top = p * ROW + "px";
      row.dataset.i = String(i);
      row.appendChild(el("span", "n", i + 1));
      const cells = el("span", "lanes"), dot = el("span", "dot");
      cells.style.width = D.lanes.length * 16 + "px";
      dot.style.left = lane * 16 + 4 + "px";
      dot.style.background = COLORS[D.lanes[lane].split("@")[0]] || "#777";
      cells.appendChild(dot);
      row.appendChild(cells);
      const found = byEvent.get(i);
      if (found) row.appendChild(el("span", "b " + worst(found), found.length));
      row.appendChild(el("span", "t", typeOf(e)));
      row.appendChild(el("span", "s", describe(e)));
      rows.appendChild(row);
    }
  }
  rows.addEventListener("scroll", function () { window.requestAnimationFrame(draw); });
  // One listener for every row: a row redrawn between a press and its release still clicks.
  rows.addEventListener("click", function (ev) {
    const row = ev.target instanceof Element ? ev.target.closest(".row") : null;
    if (row) select(Number(row.dataset.i), null);
  });
  window.addEventListener("resize", draw);

  function reveal(i) {
    const p = visible.indexOf(i);
    if (p < 0) return;
    if (p * ROW < rows.scrollTop) rows.scrollTop = p * ROW;
    else if ((p + 1) * ROW > rows.scrollTop + rows.clientHeight) rows.scrollTop = (p + 1) * ROW - rows.clientHeight;
  }
  function select(i, pointer) {
    selected = i; markPointer = pointer;
    document.body.dataset.selected = String(i);
    reveal(i); draw(); detail();
  }
  function openFinding(n) {
    const f = D.findings[n];
    showTimeline();
    if (f[0] === null) { selected = -1; tab = "event"; detail(n); return; }
    if (visible.indexOf(f[0]) < 0) { resetFilters(); }
    tab = "event"; tabs();
    select(f[0], f[7]);
  }
  function resetFilters() {
    ["f-type", "f-lane", "f-text"].forEach(function (id) { document.getElementById(id).value = ""; });
    document.getElementById("f-findings").checked = false; applyFilter();
  }
  function step(by) {
    if (!visible.length) return;
    const p = visible.indexOf(selected);
    const next = p < 0 ? (by > 0 ? 0 : visible.length - 1) : Math.min(visible.length - 1, Math.max(0, p + by));
    select(visible[next], null);
  }
  function stepFinding(by) {
    if (!findingEvents.length) return;
    let target = null;
    if (by > 0) { for (const i of findingEvents) if (i > selected) { target = i; break; } }
    else { for (let k = findingEvents.length - 1; k >= 0; k--) if (findingEvents[k] < selected) { target = findingEvents[k]; break; } }
    if (target === null) return;
    if (visible.indexOf(target) < 0) resetFilters();
    const f = D.findings[byEvent.get(target)[0]];
    select(target, f[7]);
  }

  // --- the detail panel ---------------------------------------------------------------
  function tabs() {
    Array.from(document.querySelectorAll(".dtab")).forEach(function (b) { b.classList.toggle("on", b.dataset.tab === tab); });
  }
  function detail(findingOnly) {
    const panel = document.getElementById("panel");
    clear(panel); tabs();
    if (findingOnly !== undefined) { panel.appendChild(findingBlock(findingOnly)); return; }
    if (selected < 0) { panel.appendChild(el("p", "dim", "Select an event.")); return; }
    const start = startOf(selected);
    const e = { raw: EV[selected], source: start[3], exchange: start[4], number: selected - start[0] + 1 };
    const head = el("h2", "", "Event " + (selected + 1) + ": " + typeOf(e.raw));
    head.appendChild(el("span", "dim", "  " + D.sources[e.source].name + (e.exchange !== null ? " \u00b7 exchange " + e.exchange : "") + " \u00b7 #" + e.number + " \u00b7 lane " + D.lanes[LANE[selected]]));
    panel.appendChild(head);
    ({ event: eventTab, state: stateTab, conversation: conversationTab, timing: timingTab, request: requestTab })[tab](panel, e);
  }
  function findingBlock(n) {
    const f = D.findings[n], rule = D.rules[f[4]] || {};
    const box = el("div", "finding " + f[5]); box.dataset.finding = String(n);
    box.appendChild(el("span", "sev " + f[5], f[5]));
    box.appendChild(el("span", "rule", " " + f[4] + " " + (rule.symbol || "")));
    box.appendChild(el("div", "", f[6]));
    if (f[7] !== null) box.appendChild(el("div", "dim", "at " + (f[7] === "" ? "/" : f[7])));
    if (rule.title) box.appendChild(el("div", "dim", rule.title));
    if (rule.source) box.appendChild(el("div", "dim", "reference: " + rule.source));
    return box;
  }
  function eventTab(panel, e) {
    (byEvent.get(selected) || []).forEach(function (n) { panel.appendChild(findingBlock(n)); });
    const raw = e.raw;
    panel.appendChild(jsonView(raw, markPointer));
    const mark = document.getElementById("pointer-mark");
    if (mark) mark.scrollIntoView({ block: "nearest" });
    const id = raw && typeof raw === "object" ? raw.toolCallId : undefined;
    const call = typeof id === "string" && Object.prototype.hasOwnProperty.call(D.calls, id) ? D.calls[id] : null;
    if (call) {
      panel.appendChild(el("h2", "", "Tool call " + id + (call.name ? " \u00b7 " + call.name : "")));
      panel.appendChild(el("div", "dim", "arguments as they streamed"));
      const streamed = el("pre"); streamed.id = "call-args";
      call.args.forEach(function (i) {
        const r = EV[i];
        if (r && typeof r.delta === "string") { const part = el("span", "", r.delta); part.title = "event " + (i + 1); streamed.appendChild(part); streamed.appendChild(el("span", "dim", "\u2502")); }
      });
      panel.appendChild(streamed);
      if (call.parsed !== undefined) { panel.appendChild(el("div", "dim", "parsed")); const p = jsonView(call.parsed, null); p.id = "call-parsed"; panel.appendChild(p); }
      if (call.unparsed) panel.appendChild(el("div", "del", "not JSON: " + call.unparsed));
      if (call.result !== undefined) { panel.appendChild(el("div", "dim", "result (event " + (call.result + 1) + ")")); const r = jsonView(EV[call.result], null); r.id = "call-result"; panel.appendChild(r); }
    }
  }
  function diffOf(index) {
    const at = bisect(D.stateOps, index) - 1;
    return at >= 0 && D.stateOps[at][0] === index ? D.stateOps[at][1] : null;
  }
  function stateTab(panel) {
    const ops = diffOf(selected);
    if (ops) {
      panel.appendChild(el("h2", "", "What this event changed"));
      const box = el("div", "diff"); box.id = "state-diff";
      ops.forEach(function (op) {
        const cls = op[0] === "+" ? "add" : op[0] === "-" ? "del" : "rep";
        const word = op[0] === "+" ? "added " : op[0] === "-" ? "removed " : "replaced ";
        box.appendChild(el("div", cls, word + (op[1] || "/") + (op[0] === "-" ? "" : " = " + short(op[2], CUT))));
      });
      panel.appendChild(box);
    }
    panel.appendChild(el("h2", "", "State after event " + (selected + 1)));
    const pre = el("pre"); pre.id = "state";
    cutText(JSON.stringify(stateAfter(selected), null, 2), pre);
    panel.appendChild(pre);
  }
  function conversationTab(panel) {
    const list = messagesAfter(selected);
    panel.appendChild(el("h2", "", list.length + " messages after event " + (selected + 1)));
    const box = el("div"); box.id = "conversation"; panel.appendChild(box);
    list.forEach(function (m) {
      const div = el("div", "msg" + (m.subagentRunId ? " sub" : ""));
      const head = el("div", "head", m.role + (m.name ? " (" + m.name + ")" : ""));
      head.appendChild(el("span", "tag", m.id));
      if (m.subagentRunId) head.appendChild(el("span", "tag", "subagent " + m.subagentRunId));
      if (m.toolCallId) head.appendChild(el("span", "tag", "result of " + m.toolCallId));
      if (m.encryptedValue !== undefined) head.appendChild(el("span", "tag enc", "encrypted value"));
      div.appendChild(head);
      const body = el("pre");
      cutText(typeof m.content === "string" ? m.content : m.content === undefined ? "" : JSON.stringify(m.content, null, 2), body);
      div.appendChild(body);
      (m.toolCalls || []).forEach(function (c) {
        const line = el("div", "", "\u2699 " + (c.function && c.function.name) + " (" + c.id + ") ");
        if (c.encryptedValue !== undefined) line.appendChild(el("span", "tag enc", "encrypted value"));
        div.appendChild(line);
        const args = el("pre"); cutText(String((c.function && c.function.arguments) || ""), args); div.appendChild(args);
      });
      box.appendChild(div);
    });
  }
  function exchangeOf(e) {
    for (const x of D.sources[e.source].exchanges) if (x.number === e.exchange) return x;
    return null;
  }
  function timingTab(panel, e) {
    const x = exchangeOf(e);
    const t = x && x.timing;
    if (!t) { panel.appendChild(el("p", "dim", "This source has no timing (only an aguikit recording or a HAR file keeps it).")); return; }
    const box = el("div"); box.id = "timing"; panel.appendChild(box);
    const at = t.at[e.number - 1];
    if (at !== undefined && at !== null) {
      box.appendChild(el("div", "", "event left the upstream at " + at.toFixed(1) + " ms" + (t.down[e.number - 1] != null ? ", written downstream at " + t.down[e.number - 1].toFixed(1) + " ms" : "")));
      const before = t.at[e.number - 2];
      if (before !== undefined && before !== null) box.appendChild(el("div", "", "gap before it: " + (at - before).toFixed(1) + " ms"));
    }
    if (t.first !== undefined) box.appendChild(el("div", "", "time to first event: " + t.first.toFixed(1) + " ms"));
    if (t.keepalives !== undefined) box.appendChild(el("div", "", "keep-alive comments: " + t.keepalives));
    (t.gaps || []).forEach(function (g) { box.appendChild(el("div", "", "gap of " + g[0].toFixed(1) + " ms before event " + (g[1] + 1))); });
    (t.bursts || []).forEach(function (b) { box.appendChild(el("div", "rep", b[1] + " events within 5 ms at event " + (b[0] + 1) + " after " + b[2].toFixed(0) + " ms of silence: buffered?")); });
    Object.keys(t.har).forEach(function (k) { box.appendChild(el("div", "dim", "HAR " + k + ": " + t.har[k] + " ms")); });
  }
  function requestTab(panel, e) {
    const x = exchangeOf(e);
    if (!x) { panel.appendChild(el("p", "dim", "This event is not part of a recorded conversation.")); return; }
    panel.appendChild(el("div", "", "exchange " + x.number + " \u00b7 " + x.status + " \u00b7 " + x.url + " \u00b7 thread " + x.thread + " \u00b7 run " + x.run));
    if (x.diff) {
      panel.appendChild(el("h2", "", "Against the previous request of this thread"));
      const d = el("div", "diff"); d.id = "request-diff";
      x.diff.added.forEach(function (m) { d.appendChild(el("div", "add", "added message " + m.id + " (" + m.role + ")")); });
      x.diff.changed.forEach(function (id) { d.appendChild(el("div", "rep", "changed message " + id)); });
      x.diff.dropped.forEach(function (id) { d.appendChild(el("div", "del", "dropped message " + id)); });
      x.diff.fields.forEach(function (op) { d.appendChild(el("div", op[0] === "+" ? "add" : op[0] === "-" ? "del" : "rep", op[0] + " " + op[1] + (op[0] === "-" ? "" : " = " + short(op[2], 200)))); });
      panel.appendChild(d);
    }
    const resume = x.request && Array.isArray(x.request.resume) ? x.request.resume : [];
    if (resume.length) {  // the interrupts this request answers, as it sent them
      panel.appendChild(el("h2", "", "Resumes"));
      const r = el("div"); r.id = "request-resume";
      resume.forEach(function (item) {
        r.appendChild(el("div", "", "interrupt " + (item && item.interruptId) + ": " + (item && item.status)));
      });
      panel.appendChild(r);
    }
    panel.appendChild(el("h2", "", "Request"));
    panel.appendChild(jsonView(x.request, null));
  }

  // --- wiring -------------------------------------------------------------------------
  function showTimeline() {
    document.getElementById("summary").hidden = true; document.getElementById("timeline").hidden = false;
    document.getElementById("show-summary").classList.remove("on"); document.getElementById("show-timeline").classList.add("on");
    draw();
  }
  document.getElementById("show-timeline").addEventListener("click", showTimeline);
  document.getElementById("show-summary").addEventListener("click", function () {
    document.getElementById("summary").hidden = false; document.getElementById("timeline").hidden = true;
    document.getElementById("show-summary").classList.add("on"); document.getElementById("show-timeline").classList.remove("on");
  });
  Array.from(document.querySelectorAll(".dtab")).forEach(function (b) {
    b.addEventListener("click", function () { tab = b.dataset.tab; detail(); });
  });
  ["f-type", "f-lane", "f-findings"].forEach(function (id) { document.getElementById(id).addEventListener("change", applyFilter); });
  document.getElementById("f-text").addEventListener("input", applyFilter);
  document.addEventListener("keydown", function (ev) {
    const t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT")) { if (ev.key === "Escape") t.blur(); return; }
    if (document.getElementById("timeline").hidden) { if (ev.key === "t") showTimeline(); return; }
    const keys = { j: 1, ArrowDown: 1, k: -1, ArrowUp: -1, PageDown: 20, PageUp: -20 };
    if (ev.key in keys) { step(keys[ev.key]); ev.preventDefault(); }
    else if (ev.key === "n") stepFinding(1);
    else if (ev.key === "p" || ev.key === "N") stepFinding(-1);
    else if (ev.key === "/") { document.getElementById("f-text").focus(); ev.preventDefault(); }
  });
  summary();
  applyFilter();
  document.body.dataset.ready = "1";
})();
