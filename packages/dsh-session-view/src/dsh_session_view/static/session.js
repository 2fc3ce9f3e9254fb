// dsh-session view: one session's page: its header, charts, turn blocks and derived
// messages, loaded a page of turns at a time, and (served) following the log live.

import { exported, sessionPages } from "./api.js";
import { renderCharts } from "./charts.js";
import { append, el, fill, markReady, sessionLink, setAttr, showError, topBar } from "./dom.js";
import { blocksText, num, str, when } from "./format.js";
import { renderBlock } from "./timeline.js";

export function renderSession(app, id) {
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
  const timeline = el("div", { class: "timeline hide-raw" });
  const sentinel = el("div", { class: "sentinel" }, "");
  const toggle = el("button", { type: "button", "data-testid": "toggle-sources", "aria-pressed": "false",
    title: "highlight the events a message came from" }, "sources");
  // The raw records of adapters, which their typed twins tell: folded away until asked.
  const rawToggle = el("button", { type: "button", "data-testid": "toggle-raw", "aria-pressed": "false",
    title: "show the raw records of adapters (agents/item, adk/event...), which their typed events tell" },
    "raw records");
  const messageList = el("div", {});
  const messages = el("aside", { class: "messages" },
    el("h2", {}, "derived messages", toggle), messageList);
  app.replaceChildren(
    topBar([el("span", { class: "mono" }, id), el("span", { class: "dim" }, el("span", {}, eventCount), " event(s)"),
      exported ? null : live], !exported),
    el("main", {}, errors, head, el("div", { class: "charts" }, tokensChart, typesChart),
      el("div", { class: "columns" }, el("div", {}, el("div", { class: "timeline-tools" }, rawToggle),
        timeline, sentinel), messages)));

  const pages = sessionPages(id);
  // What the turn blocks tell this page: their items by seq, and how to show a raw event.
  const seen = { bySeq: state.bySeq, raw: exported ? null : rawEvent };

  rawToggle.addEventListener("click", () => {
    const shown = timeline.classList.toggle("hide-raw") === false;
    setAttr(rawToggle, "aria-pressed", shown ? "true" : "false");
  });

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
      ...(doc.name !== undefined ? [["name", str(doc.name) + (doc.deleted === true ? " (deleted)" : "")]]
        : doc.label === undefined ? [] : [["name", str(doc.label)]]),
      ["id", str(h.id)], ["created", when(h.createdAt)],
      ["cwd", h.cwd === undefined ? "-" : str(h.cwd)],
      ["format", h.version === undefined ? "no format version" : "v" + str(h.version)],
    ];
    const dl = el("dl", {});
    for (const [k, v] of facts) append(dl, [el("dt", {}, k), el("dd", { class: "mono" }, v)]);
    if (doc.retained === true) {
      append(dl, [el("dt", {}, "retained"), el("dd", { "data-testid": "retained" }, "never pruned",
        doc.retainedNote === undefined ? "" : " · note: " + str(doc.retainedNote))]);
    }
    if (h.parentSession !== undefined) {
      const parent = str(h.parentSession);
      append(dl, [el("dt", {}, "forked from"), el("dd", { class: "mono" },
        exported ? parent : el("a", { href: sessionLink(parent) }, parent),
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

  function drawCharts(data) {
    renderCharts(tokensChart, typesChart, data);
  }

  async function rawEvent(node, seq) {
    const open = node.querySelector("pre.raw");
    if (open) {
      open.remove();
      return;
    }
    try {
      const body = await pages.event(seq);
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
      const node = renderBlock(block, start + i, seen);
      state.blocks.push(node);
      timeline.appendChild(node);
    });
    for (const m of page.messages) messageList.appendChild(renderMessage(m));
    state.count = page.turnCount;
    state.lastSeq = page.lastSeq;
    state.partial = page.partial === true;
    renderHead(page);
    if (page.charts) drawCharts(page.charts);
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
      addPage(await pages.page(start));
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
        addPage(await pages.page(start));
      } else {
        const page = await pages.head();
        state.count = page.turnCount;
        renderHead(page);
        if (page.charts) drawCharts(page.charts);
        delete document.body.dataset.complete;
      }
    } catch (err) {
      showError(errors, err);
    } finally {
      state.loading = false;
    }
  }

  function follow() {
    if (exported || typeof EventSource === "undefined") return;
    const source = pages.follow(typeof state.lastSeq === "number" ? state.lastSeq : -1);
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
      addPage(await pages.page(0));
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
        addPage(await pages.page(0, true));
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
