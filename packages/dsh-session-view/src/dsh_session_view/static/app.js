// dsh-session view: the page (the session list, and one session), vanilla JavaScript.
//
// Safe by construction: every string that comes from a log reaches the DOM as a text
// node (el() turns strings into text nodes) or as the value of an attribute from the
// SAFE_ATTRIBUTES list, set with setAttribute. Nothing here parses markup, and the
// only links are "/s/" + encodeURIComponent(id): never a URL taken from a log.
//
// Served, the page reads the /api/ routes; exported, it renders the document embedded in the
// JSON script element with the id "data", and makes no request at all.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const PAGE = 50;
  const SAFE_ATTRIBUTES = new Set([
    "class", "id", "type", "name", "value", "placeholder", "title", "role", "for",
    "aria-pressed", "aria-label", "aria-live", "colspan", "autocomplete", "spellcheck",
    "data-testid", "data-session-id", "data-seq", "data-turn", "data-end-reason",
    "data-interrupted", "data-kind", "data-sources", "data-state", "data-role",
    "data-index", "viewBox", "width", "height", "x", "y", "x1", "x2", "y1", "y2", "fill",
    "stroke", "preserveAspectRatio", "font-size", "text-anchor", "href",
  ]);

  const embedded = readEmbedded();
  const app = document.getElementById("app");

  function readEmbedded() {
    const node = document.getElementById("data");
    if (!node) return null;
    return JSON.parse(node.textContent);
  }

  // --- DOM helpers --------------------------------------------------------------------

  function setAttr(node, name, value) {
    if (!SAFE_ATTRIBUTES.has(name)) throw new Error("attribute not allowed: " + name);
    if (name === "href") {
      const text = String(value);
      if (!(text === "/" || text.startsWith("/s/") || text.startsWith("/?") ||
            text.startsWith("#"))) {
        throw new Error("link not allowed");
      }
    }
    node.setAttribute(name, String(value));
  }

  function append(node, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(node, child);
      else if (child instanceof Node) node.appendChild(child);
      else node.appendChild(document.createTextNode(String(child)));
    }
    return node;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined && v !== false) setAttr(node, k, v);
    }
    return append(node, children);
  }

  function fill(node, ...children) {
    // The node's children replaced; null, false and undefined leave no trace.
    node.replaceChildren();
    return append(node, children);
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) setAttr(node, k, v);
    }
    return append(node, children);
  }

  function sessionLink(id) {
    return "/s/" + encodeURIComponent(id);
  }

  function str(value) {
    if (typeof value === "string") return value;
    if (typeof value === "number" && isFinite(value)) return String(value);
    return "?";
  }

  function when(ms) {
    if (typeof ms !== "number" || !isFinite(ms)) return "?";
    const d = new Date(ms);
    if (isNaN(d.getTime())) return "?";
    const pad = (n) => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function bytes(n) {
    if (typeof n !== "number") return "";
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
    return (n / 1024 / 1024).toFixed(1) + " MiB";
  }

  function num(n) {
    return typeof n === "number" ? n.toLocaleString("en-US") : "0";
  }

  function showError(where, err) {
    const box = el("div", { class: "error", "data-testid": "error", role: "alert" },
      err && err.message ? err.message : String(err));
    if (err && err.hint) append(box, ["\nhint: " + err.hint]);
    where.appendChild(box);
  }

  class ApiError extends Error {
    constructor(body, status) {
      super(body && typeof body.error === "string" ? body.error : "HTTP " + status);
      this.hint = body && typeof body.hint === "string" ? body.hint : null;
      this.status = status;
    }
  }

  async function api(path) {
    const response = await fetch(path, { headers: { Accept: "application/json" } });
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) throw new ApiError(body, response.status);
    return body;
  }

  function topBar(extra) {
    const home = embedded ? el("h1", {}, "dsh-session") : el("h1", {}, el("a", { href: "/" }, "dsh-session"));
    return el("header", { class: "top" }, home, extra);
  }

  function markReady() {
    document.body.dataset.ready = "1";
  }

  // --- the session list ---------------------------------------------------------------

  const FILTERS = ["cwd", "parent", "since", "until", "limit"];

  function renderList() {
    const params = new URLSearchParams(location.search);
    const errors = el("div", {});
    const inputs = {};
    const filters = el("form", { class: "filters", "aria-label": "filters" });
    for (const name of FILTERS) {
      inputs[name] = el("input", { name: name, value: params.get(name) || "", autocomplete: "off",
        placeholder: name === "since" || name === "until" ? "7d, 2026-01-01" : "" });
      filters.appendChild(el("label", {}, name, inputs[name]));
    }
    filters.appendChild(el("button", { type: "submit" }, "filter"));
    const body = el("tbody", {});
    const count = el("span", { class: "dim" });
    const table = el("table", { class: "sessions" },
      el("thead", {}, el("tr", {}, el("th", {}, "id"), el("th", {}, "cwd"), el("th", {}, "created"),
        el("th", {}, "last activity"), el("th", { class: "num" }, "events"),
        el("th", { class: "num" }, "turns"), el("th", { class: "num" }, "size"), el("th", {}, "parent"))),
      body);
    const searchInput = el("input", { type: "search", name: "q", "data-testid": "search-input",
      placeholder: "search messages, tool calls and results", autocomplete: "off", spellcheck: "false" });
    const hits = el("ul", { class: "hits" });
    const search = el("form", { class: "search", role: "search" }, searchInput,
      el("button", { type: "submit" }, "search"));
    const lineage = el("div", { class: "lineage", "data-testid": "lineage" });
    app.replaceChildren(topBar(count), el("main", {}, errors, filters, table,
      el("h2", {}, "search"), search, hits, el("h2", {}, "fork lineage"), lineage));

    async function load() {
      const query = new URLSearchParams();
      for (const name of FILTERS) if (inputs[name].value) query.set(name, inputs[name].value);
      errors.replaceChildren();
      try {
        const rows = await api("/api/sessions?" + query.toString());
        body.replaceChildren(...rows.map(row));
        count.replaceChildren(rows.length + " session(s)");
        lineage.replaceChildren(tree(rows));
      } catch (err) {
        showError(errors, err);
      }
      markReady();
    }

    function row(r) {
      return el("tr", { "data-testid": "session-row", "data-session-id": str(r.id) },
        el("td", { class: "mono" }, el("a", { href: sessionLink(str(r.id)), title: str(r.id) },
          r.label === undefined ? str(r.id) : str(r.label))),
        el("td", { class: "mono", title: r.cwd === undefined ? null : str(r.cwd) }, r.cwd === undefined ? "-" : str(r.cwd)),
        el("td", {}, when(r.createdAt)), el("td", {}, when(r.lastActivity)),
        el("td", { class: "num" }, num(r.events), r.torn ? " +torn" : ""),
        el("td", { class: "num" }, num(r.turns)), el("td", { class: "num" }, bytes(r.sizeBytes)),
        el("td", { class: "mono" }, r.parentSession === undefined ? "-" :
          el("a", { href: sessionLink(str(r.parentSession)) }, str(r.parentSession))));
    }

    filters.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const query = new URLSearchParams();
      for (const name of FILTERS) if (inputs[name].value) query.set(name, inputs[name].value);
      history.replaceState(null, "", "/" + (query.toString() ? "?" + query.toString() : ""));
      load();
    });

    let searchTimer = null;
    async function runSearch() {
      const q = searchInput.value.trim();
      if (!q) {
        hits.replaceChildren();
        return;
      }
      try {
        const found = await api("/api/search?" + new URLSearchParams({ q: q }).toString());
        hits.replaceChildren(...(found.length ? found.map(hit) : [el("li", { class: "dim" }, "no hits")]));
      } catch (err) {
        hits.replaceChildren(el("li", {}, el("div", { class: "error", "data-testid": "error" },
          err.message, err.hint ? "\nhint: " + err.hint : "")));
      }
    }
    search.addEventListener("submit", (ev) => {
      ev.preventDefault();
      runSearch();
    });
    searchInput.addEventListener("input", () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(runSearch, 300);
    });
    load();
  }

  function snippet(text, highlights) {
    // The snippet split at the highlight offsets: text nodes and <mark> elements.
    const parts = [];
    let at = 0;
    const chars = Array.from(text); // offsets count code points, as Python's do
    for (const pair of highlights || []) {
      const start = pair[0], end = pair[1];
      if (typeof start !== "number" || typeof end !== "number" || start < at || end < start) continue;
      parts.push(chars.slice(at, start).join(""));
      parts.push(el("mark", {}, chars.slice(start, end).join("")));
      at = end;
    }
    parts.push(chars.slice(at).join(""));
    return parts;
  }

  function hit(h) {
    const id = str(h.session);
    return el("li", { "data-testid": "search-hit", "data-session-id": id, "data-seq": str(h.seq) },
      el("a", { href: sessionLink(id) + "#seq-" + str(h.seq), class: "mono" }, id), " ",
      el("span", { class: "dim" }, "#" + str(h.seq) + " · turn " + (h.turn === null ? "-" : str(h.turn)) +
        " · " + str(h.type) + " · " + when(h.time)),
      el("div", {}, snippet(str(h.snippet), h.highlights)));
  }

  function tree(rows) {
    const ids = new Set(rows.map((r) => r.id));
    const children = new Map();
    const roots = [];
    for (const r of rows) {
      const parent = r.parentSession;
      if (typeof parent === "string" && ids.has(parent) && parent !== r.id) {
        if (!children.has(parent)) children.set(parent, []);
        children.get(parent).push(r);
      } else {
        roots.push(r);
      }
    }
    const seen = new Set();
    function branch(list) {
      const ul = el("ul", {});
      for (const r of list) {
        if (seen.has(r.id)) continue;
        seen.add(r.id);
        const li = el("li", { "data-session-id": str(r.id) },
          el("a", { href: sessionLink(str(r.id)), class: "mono" }, str(r.id)),
          r.seedLength !== undefined ? el("span", { class: "dim" }, " (seeded with " + str(r.seedLength) + " events)") : "",
          typeof r.parentSession === "string" && !ids.has(r.parentSession) ?
            el("span", { class: "dim" }, " ← " + r.parentSession + " (not listed)") : "");
        const kids = children.get(r.id);
        if (kids) li.appendChild(branch(kids));
        ul.appendChild(li);
      }
      return ul;
    }
    return branch(roots);
  }

  // --- one session ------------------------------------------------------------------------

  function pageOf(doc, start, end) {
    // What the server's /api/session/<id>?turns=start-end answers, from a whole document.
    const count = doc.timeline.length;
    start = Math.max(0, Math.min(start, count));
    end = Math.max(start - 1, Math.min(end, count - 1));
    const blocks = doc.timeline.slice(start, end + 1);
    const lo = start === 0 || !blocks.length ? null : blocks[0].startSeq;
    const hi = end >= count - 1 || !blocks.length ? null : blocks[blocks.length - 1].endSeq;
    const messages = !blocks.length && count ? [] : doc.messages.filter((m) =>
      (typeof lo !== "number" || m.seq >= lo) && (typeof hi !== "number" || m.seq <= hi));
    return Object.assign({}, doc, { range: [start, end], timeline: blocks, messages: messages,
      turnCount: count });
  }

  function blocksText(content) {
    const out = [];
    for (const b of Array.isArray(content) ? content : []) {
      if (!b || typeof b !== "object") continue;
      if (b.type === "text") out.push(str(b.text));
      else if (b.type === "tool-call") out.push("[call " + str(b.name) + " " + str(b.arguments) + "]");
      else if (b.type === "tool-result") out.push("[result" + (b.isError ? " error" : "") + "] " + blocksText(b.content));
      else if (b.type === "reasoning" || b.type === "thinking") out.push("(reasoning) " + str(b.text));
      else out.push(JSON.stringify(b));
    }
    return out.join("\n");
  }

  function renderSession(id) {
    const state = {
      doc: null, blocks: [], count: 0, loading: false, bySeq: new Map(), active: null,
      highlight: false, pinned: null, messageNodes: [], follow: null, lastSeq: null,
      partial: false,
    };
    const errors = el("div", {});
    const live = el("span", { class: "live", "data-testid": "live", "data-state": "off" }, "live: off");
    const eventCount = el("span", { "data-testid": "event-count" }, "0");
    const head = el("section", { class: "head-card", "data-testid": "session-header" });
    const tokensChart = el("div", { class: "chart" });
    const typesChart = el("div", { class: "chart" });
    const timeline = el("div", { class: "timeline" });
    const sentinel = el("div", { class: "sentinel" }, "");
    const toggle = el("button", { type: "button", "data-testid": "toggle-sources", "aria-pressed": "false",
      title: "highlight the events a message came from" }, "sources");
    const messageList = el("div", {});
    const messages = el("aside", { class: "messages" },
      el("h2", {}, "derived messages", toggle), messageList);
    app.replaceChildren(
      topBar([el("span", { class: "mono" }, id), el("span", { class: "dim" }, el("span", {}, eventCount), " event(s)"),
        embedded ? null : live]),
      el("main", {}, errors, head, el("div", { class: "charts" }, tokensChart, typesChart),
        el("div", { class: "columns" }, el("div", {}, timeline, sentinel), messages)));

    const getPage = embedded
      ? (a, b) => Promise.resolve(pageOf(embedded, a, b))
      : (a, b) => api("/api/session/" + encodeURIComponent(id) + "?turns=" + a + "-" + b);

    toggle.addEventListener("click", () => {
      state.highlight = !state.highlight;
      state.pinned = null;
      setAttr(toggle, "aria-pressed", state.highlight ? "true" : "false");
      if (!state.highlight) clearHighlight();
    });

    function clearHighlight() {
      for (const node of document.querySelectorAll(".hl, .hl-replaced")) node.classList.remove("hl", "hl-replaced");
      for (const node of document.querySelectorAll(".message.active")) node.classList.remove("active");
    }

    function highlight(message, node, scroll) {
      if (!state.highlight) return;
      clearHighlight();
      node.classList.add("active");
      let first = null;
      for (const seq of message.sourceEventSeqs || []) {
        for (const item of state.bySeq.get(seq) || []) {
          item.classList.add("hl");
          first = first || item;
        }
      }
      for (const seq of message.replacedSeqs || []) {
        for (const item of state.bySeq.get(seq) || []) {
          item.classList.add("hl-replaced");
          first = first || item;
        }
      }
      if (scroll && first) first.scrollIntoView({ block: "center" });
    }

    function renderHead(doc) {
      const h = doc.header || {};
      const facts = [
        ...(doc.label === undefined ? [] : [["name", str(doc.label)]]),
        ["id", str(h.id)], ["created", when(h.createdAt)],
        ["cwd", h.cwd === undefined ? "-" : str(h.cwd)],
        ["format", h.version === undefined ? "no format version" : "v" + str(h.version)],
      ];
      const dl = el("dl", {});
      for (const [k, v] of facts) append(dl, [el("dt", {}, k), el("dd", { class: "mono" }, v)]);
      if (h.parentSession !== undefined) {
        const parent = str(h.parentSession);
        append(dl, [el("dt", {}, "forked from"), el("dd", { class: "mono" },
          embedded ? parent : el("a", { href: sessionLink(parent) }, parent),
          h.seedLength !== undefined ? " (seeded with " + str(h.seedLength) + " events)" : "")]);
      }
      const surface = doc.surface || {};
      append(dl, [el("dt", {}, "events"), el("dd", {}, num(doc.events) + " event(s) · " + num(doc.turns) + " turn(s) · " +
        (surface.error !== undefined ? "messages cannot be derived" : surface.pending ? "surface: counting…" :
          "surface " + num(surface.nodes) + " node(s) → " + num(surface.messages) + " message(s)"))]);
      append(dl, [el("dt", {}, "source"), el("dd", { class: "mono" }, str(doc.source))]);
      const warnings = (doc.warnings || []).map((w) => el("div", { class: "warning" }, "warning: " + w));
      const closers = (doc.closers || []).length
        ? el("div", { class: "warning" }, "a load would close the last turn with " + doc.closers.length +
          " event(s) (" + doc.closers.map((c) => str(c.type)).join(", ") + ")")
        : null;
      fill(head, el("h2", {}, "session ", el("span", { class: "mono" }, str(h.id))), dl, warnings, closers);
      eventCount.replaceChildren(String(doc.events));
    }

    function renderCharts(charts) {
      if (!charts) return;
      tokensChart.replaceChildren(el("h3", {}, "tokens per turn: in, out, cache read"), tokenBars(charts),
        legend([["in", "#4a7fb5"], ["out", "#e08a2c"], ["cache read", "#9fc4e8"]]));
      const colours = charts.types.map((_, i) => PALETTE[i % PALETTE.length]);
      typesChart.replaceChildren(el("h3", {}, "events per turn, by type"), typeBars(charts, colours),
        legend(charts.types.map((t, i) => [t, colours[i]])));
    }

    function renderBlock(block, index) {
      const turn = block.turn;
      const isTurn = turn !== null && turn !== undefined;
      const section = el("section", { class: "turn", "data-testid": "turn", "data-index": index,
        "data-turn": isTurn ? str(turn) : "", "data-end-reason": block.endKind || "",
        "data-interrupted": block.interrupted ? "true" : "false" });
      const headBits = [el("span", { class: "title" }, isTurn ? "turn " + str(turn) : "outside a turn")];
      if (block.trigger) headBits.push(el("span", {}, block.trigger));
      headBits.push(el("span", { class: "dim mono" }, "seq " + str(block.startSeq) +
        (block.endSeq !== block.startSeq ? "-" + str(block.endSeq) : "")));
      if (isTurn) headBits.push(el("span", {}, block.steps + " step(s)" + (block.chunks ? " · " + block.chunks + " chunk(s)" : "")));
      const u = block.usage || {};
      if (Object.keys(u).length) {
        headBits.push(el("span", { class: "dim" }, "tokens in " + num(u.inputTokens) + " · out " + num(u.outputTokens) +
          (u.cacheReadTokens ? " · cache read " + num(u.cacheReadTokens) : "")));
      }
      if (isTurn && block.end) {
        headBits.push(el("span", { class: "end-reason" + (block.endKind === "completed" ? "" : " badge err") },
          block.end.text));
        if (block.interrupted) headBits.push(el("span", { class: "badge err" }, "interrupted (crash repair)"));
      }
      const items = el("div", { class: "items" });
      let bracket = null;
      let lone = false; // a summary without a compact/start: a bracket of its own
      for (const item of block.items) {
        if (item.type === "compact/start" || (item.type === "compact/summary" && !bracket)) {
          lone = item.type === "compact/summary";
          bracket = compaction();
          items.appendChild(bracket);
        }
        (bracket || items).appendChild(renderItem(item));
        if (bracket && item.type === "compact/summary") {
          const seqs = Array.isArray(item.shadowedSeqs) ? item.shadowedSeqs.filter((s) => typeof s === "number") : [];
          const range = seqs.length ? "#" + Math.min(...seqs) + "…#" + Math.max(...seqs) : "?";
          bracket.firstChild.replaceChildren("compaction: replaced seq " + range + " (" + seqs.length + " node(s))");
        }
        if (item.type === "compact/end" || (lone && item.type === "compact/summary")) {
          bracket = null;
          lone = false;
        }
      }
      section.append(el("div", { class: "turn-head" }, headBits), items);
      return section;
    }

    function compaction() {
      return el("div", { class: "compaction", "data-testid": "compaction" }, el("div", { class: "bracket-head" }, "compaction"));
    }

    function renderItem(item) {
      const isError = item.error === true || (item.result && item.result.isError === true);
      const node = el("div", { class: "item" + (item.inStep ? " in-step" : "") + (isError ? " is-error" : ""),
        "data-testid": "item", "data-kind": str(item.kind), "data-seq": str(item.seq) });
      let text = item.text;
      if (item.kind === "step") {
        text = (item.text || "step") + (item.endSeq !== null && item.endSeq !== undefined ? " · seq " + str(item.seq) + "-" + str(item.endSeq) : " · not ended") +
          (item.chunks ? " · " + item.chunks + " chunk(s)" : "");
      }
      const textNode = item.type === "prompt/blocked"
        ? el("div", { class: "text blocked-prompt", "data-testid": "blocked-prompt" }, str(text))
        : el("div", { class: "text" }, str(text));
      const extras = el("div", { class: "tools" });
      if (item.type === "tool/call") {
        const r = item.result;
        extras.appendChild(el("span", { class: "result-beside" + (r && r.isError ? " badge err" : "") },
          r ? "→ #" + str(r.seq) + (r.isError ? " error" : " ok") : "→ no result"));
      }
      if (Array.isArray(item.unanswered) && item.unanswered.length) {
        // A call no tool/result answers: a provider refuses the request holding it.
        node.classList.add("is-error");
        node.setAttribute("data-unanswered", item.unanswered.map(str).join(" "));
        extras.appendChild(el("span", { class: "badge err", "data-testid": "unanswered",
          title: "no tool/result answers this call: a provider refuses such a request" },
          "unanswered: " + item.unanswered.map(str).join(", ")));
      }
      if (item.decision !== undefined && item.decision !== null) {
        extras.appendChild(el("span", { class: "badge" }, "decision: " + (typeof item.decision === "string" ? item.decision : JSON.stringify(item.decision))));
      }
      if (item.error) extras.appendChild(el("span", { class: "badge err" }, "error"));
      if (item.cut) extras.appendChild(el("span", { class: "badge", title: "the whole text is in the raw event" }, "cut"));
      if (item.opaque) extras.appendChild(el("span", { class: "badge" }, "opaque"));
      if (item.replaces) extras.appendChild(el("span", { class: "badge" }, "replaces #" + str(item.replaces.start) + "…#" + str(item.replaces.end)));
      if (item.usage && Object.keys(item.usage).length) {
        extras.appendChild(el("span", { class: "badge dim" }, "in " + num(item.usage.inputTokens) + " · out " + num(item.usage.outputTokens)));
      }
      if (!embedded && typeof item.seq === "number") {
        const button = el("button", { type: "button", title: "the raw event" }, "JSON");
        button.addEventListener("click", () => rawEvent(node, item.seq));
        extras.appendChild(button);
      }
      textNode.addEventListener("click", () => node.classList.toggle("open-text"));
      append(node, [el("span", { class: "seq mono" }, str(item.seq)), el("span", { class: "kind" }, str(item.kind)), textNode, extras]);
      if (typeof item.seq === "number") {
        if (!state.bySeq.has(item.seq)) state.bySeq.set(item.seq, []);
        state.bySeq.get(item.seq).push(node);
        if (typeof item.resultSeq === "number") {
          if (!state.bySeq.has(item.resultSeq)) state.bySeq.set(item.resultSeq, []);
          state.bySeq.get(item.resultSeq).push(node);
        }
      }
      return node;
    }

    async function rawEvent(node, seq) {
      const open = node.querySelector("pre.raw");
      if (open) {
        open.remove();
        return;
      }
      try {
        const body = await api("/api/session/" + encodeURIComponent(id) + "/events?after=" + (seq - 1) + "&limit=1");
        node.appendChild(el("pre", { class: "raw mono" }, JSON.stringify(body.events[0], null, 2)));
      } catch (err) {
        showError(node, err);
      }
    }

    function renderMessage(m) {
      const node = el("div", { class: "message", "data-testid": "message", "data-seq": str(m.seq),
        "data-role": str(m.role), "data-sources": (m.sourceEventSeqs || []).join(",") },
        el("div", { class: "role" }, str(m.role) + " ", el("span", { class: "dim mono" }, "#" + str(m.seq)),
          m.replaces ? el("span", { class: "badge" }, "replaces #" + str(m.replaces.start) + "…#" + str(m.replaces.end) +
            " (" + (m.replacedSeqs || []).length + " node(s))") : null,
          m.cut ? el("span", { class: "badge" }, "cut") : null),
        el("div", { class: "body" }, blocksText(m.content)));
      // Hovering shows a message's sources; a click pins them (and scrolls to them) until
      // the next click, so that the scroll moving other messages under the pointer does
      // not replace them.
      node.addEventListener("mouseenter", () => {
        if (!state.pinned) highlight(m, node, false);
      });
      node.addEventListener("click", () => {
        if (state.pinned === node) {
          state.pinned = null;
          return;
        }
        state.pinned = node;
        highlight(m, node, true);
      });
      state.messageNodes.push({ seq: m.seq, node: node });
      return node;
    }

    function addPage(page) {
      const [start] = page.range;
      // Replace what this page covers (a live refresh refetches the last blocks).
      while (state.blocks.length > start) {
        const gone = state.blocks.pop();
        for (const item of gone.querySelectorAll("[data-testid=item]")) {
          const seq = Number(item.getAttribute("data-seq"));
          const list = state.bySeq.get(seq);
          if (list) state.bySeq.set(seq, list.filter((n) => n !== item));
        }
        gone.remove();
      }
      if (page.timeline.length) {
        const lo = start === 0 ? null : page.timeline[0].startSeq;
        state.messageNodes = state.messageNodes.filter((m) => {
          if (lo === null || m.seq >= lo) {
            m.node.remove();
            return false;
          }
          return true;
        });
      }
      page.timeline.forEach((block, i) => {
        const node = renderBlock(block, start + i);
        state.blocks.push(node);
        timeline.appendChild(node);
      });
      for (const m of page.messages) messageList.appendChild(renderMessage(m));
      state.count = page.turnCount;
      state.lastSeq = page.lastSeq;
      state.partial = page.partial === true;
      renderHead(page);
      if (page.charts) renderCharts(page.charts);
      const complete = state.blocks.length >= state.count && !state.partial;
      sentinel.replaceChildren(complete ? "" : "loading more turns…");
      if (complete) document.body.dataset.complete = "1";
      else delete document.body.dataset.complete;
    }

    async function loadMore() {
      if (state.loading || state.blocks.length >= state.count) return;
      state.loading = true;
      try {
        const start = state.blocks.length;
        addPage(await getPage(start, start + PAGE - 1));
      } catch (err) {
        showError(errors, err);
      } finally {
        state.loading = false;
      }
    }

    async function refresh() {
      // After news from the follow stream: the last blocks again, and the counts.
      if (state.loading) {
        setTimeout(refresh, 200);
        return;
      }
      state.loading = true;
      try {
        if (state.blocks.length >= state.count) {
          const start = Math.max(0, state.blocks.length - 1);
          addPage(await getPage(start, start + PAGE - 1));
        } else {
          const page = await getPage(1e9, 1e9); // no block: the head and the charts
          state.count = page.turnCount;
          renderHead(page);
          if (page.charts) renderCharts(page.charts);
          delete document.body.dataset.complete;
        }
      } catch (err) {
        showError(errors, err);
      } finally {
        state.loading = false;
      }
    }

    function follow() {
      if (embedded || typeof EventSource === "undefined") return;
      const source = new EventSource("/api/session/" + encodeURIComponent(id) + "/follow?after=" +
        (typeof state.lastSeq === "number" ? state.lastSeq : -1));
      const set = (on) => {
        setAttr(live, "data-state", on ? "on" : "off");
        live.replaceChildren(on ? "live" : "live: off");
      };
      source.addEventListener("hello", () => set(true));
      source.addEventListener("append", () => {
        set(true);
        refresh();
      });
      source.addEventListener("error", () => set(source.readyState === EventSource.OPEN));
      state.follow = source;
    }

    async function start() {
      const params = new URLSearchParams(location.search);
      try {
        addPage(await getPage(0, PAGE - 1));
      } catch (err) {
        showError(errors, err);
        markReady();
        return;
      }
      markReady();
      if (state.partial) {
        // The first page came from the log's first blocks while the rest was built: the
        // same page again, whole (a later compaction, a later result, the surface).
        state.loading = true;
        try {
          addPage(await (embedded ? getPage(0, PAGE - 1)
            : api("/api/session/" + encodeURIComponent(id) + "?turns=0-" + (PAGE - 1) + "&full=1")));
        } catch (err) {
          showError(errors, err);
        } finally {
          state.loading = false;
        }
      }
      follow();
      if (params.get("all") === "1") {
        while (state.blocks.length < state.count) {
          const before = state.blocks.length;
          await loadMore();
          if (state.blocks.length === before) break;
        }
      } else if (typeof IntersectionObserver !== "undefined") {
        new IntersectionObserver((entries) => {
          if (entries.some((e) => e.isIntersecting)) loadMore();
        }, { rootMargin: "800px" }).observe(sentinel);
      }
      const target = /^#seq-(\d+)$/.exec(location.hash);
      if (target) {
        const seq = Number(target[1]);
        while (!state.bySeq.has(seq) && state.blocks.length < state.count) {
          const before = state.blocks.length;
          await loadMore();
          if (state.blocks.length === before) break;
        }
        const nodes = state.bySeq.get(seq);
        if (nodes && nodes.length) {
          nodes[0].classList.add("hl");
          nodes[0].scrollIntoView({ block: "center" });
        }
      }
    }
    start();
  }

  // --- charts -----------------------------------------------------------------------------

  const PALETTE = ["#4a7fb5", "#e08a2c", "#4aa564", "#c8504b", "#8d6cc0", "#8c6d5a", "#d77fbf",
    "#7f7f7f", "#b5b23a", "#3bb5c4", "#1f4e79", "#a0522d"];

  function legend(entries) {
    return el("div", { class: "legend" }, entries.map(([label, colour]) => {
      const sw = svg("svg", { width: 10, height: 10, class: "swatch" }, svg("rect", { x: 0, y: 0, width: 10, height: 10, fill: colour }));
      return el("span", {}, sw, label);
    }));
  }

  // At most this many bars: a long session's turns are summed in groups of equal size.
  const MAX_BARS = 360;

  function groups(turns) {
    const n = turns.length;
    const size = Math.max(1, Math.ceil(n / MAX_BARS));
    const out = [];
    for (let start = 0; start < n; start += size) {
      const end = Math.min(n, start + size);
      const first = label(turns[start], start);
      out.push({ start: start, end: end,
        label: end - start === 1 ? first : first + " to " + label(turns[end - 1], end - 1) });
    }
    return out;
  }

  function frame(n) {
    const width = Math.max(240, Math.min(900, n * 12));
    return { width: width, height: 120, slot: width / Math.max(n, 1) };
  }

  function label(turn, i) {
    return turn === null || turn === undefined ? "outside a turn (block " + (i + 1) + ")" : "turn " + turn;
  }

  function sums(rows, g, width) {
    const total = new Array(width).fill(0);
    for (let i = g.start; i < g.end; i++) {
      for (let k = 0; k < width; k++) total[k] += typeof rows[i][k] === "number" ? rows[i][k] : 0;
    }
    return total;
  }

  function tokenBars(charts) {
    const bars = groups(charts.turns);
    const f = frame(bars.length);
    const values = bars.map((g) => sums(charts.tokens, g, 3));
    let most = 1;
    for (const t of values) most = Math.max(most, t[0], t[1], t[2]);
    const root = svg("svg", { "data-testid": "chart-tokens", viewBox: "0 0 " + f.width + " " + f.height,
      width: f.width, height: f.height, role: "img", "aria-label": "tokens per turn" });
    const colours = ["#4a7fb5", "#e08a2c", "#9fc4e8"];
    bars.forEach((g, i) => {
      const t = values[i];
      const bar = svg("g", {}, svg("title", {}, g.label + ": in " + num(t[0]) + " · out " + num(t[1]) + " · cache read " + num(t[2])));
      const w = f.slot / 3;
      t.forEach((value, k) => {
        const h = (value / most) * (f.height - 4);
        bar.appendChild(svg("rect", { x: (i * f.slot + k * w).toFixed(2), y: (f.height - h).toFixed(2),
          width: Math.max(w * 0.9, 0.3).toFixed(2), height: h.toFixed(2), fill: colours[k] }));
      });
      root.appendChild(bar);
    });
    return root;
  }

  function typeBars(charts, colours) {
    const bars = groups(charts.turns);
    const f = frame(bars.length);
    const values = bars.map((g) => sums(charts.counts, g, charts.types.length));
    let most = 1;
    for (const c of values) most = Math.max(most, c.reduce((a, b) => a + b, 0));
    const root = svg("svg", { "data-testid": "chart-types", viewBox: "0 0 " + f.width + " " + f.height,
      width: f.width, height: f.height, role: "img", "aria-label": "events per turn by type" });
    bars.forEach((g, i) => {
      const c = values[i];
      const total = c.reduce((a, b) => a + b, 0);
      const parts = charts.types.map((t, k) => c[k] ? t + " " + c[k] : null).filter(Boolean).join(", ");
      const bar = svg("g", {}, svg("title", {}, g.label + ": " + total + " event(s): " + parts));
      let y = f.height;
      c.forEach((value, k) => {
        if (!value) return;
        const h = (value / most) * (f.height - 4);
        y -= h;
        bar.appendChild(svg("rect", { x: (i * f.slot).toFixed(2), y: y.toFixed(2),
          width: Math.max(f.slot * 0.85, 0.3).toFixed(2), height: h.toFixed(2), fill: colours[k] }));
      });
      root.appendChild(bar);
    });
    return root;
  }

  // --- start ------------------------------------------------------------------------------

  function main() {
    if (embedded) {
      renderSession(str(embedded.session));
      return;
    }
    const path = location.pathname;
    if (path.startsWith("/s/")) {
      let id;
      try {
        id = decodeURIComponent(path.slice(3));
      } catch (e) {
        app.replaceChildren(topBar(null));
        showError(app, new Error("the session id in the URL is not UTF-8"));
        markReady();
        return;
      }
      renderSession(id);
    } else {
      renderList();
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
