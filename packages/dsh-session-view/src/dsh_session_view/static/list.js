// dsh-session view: the session list page (filters, the sessions, search, fork lineage).

import { api } from "./api.js";
import { el, markReady, sessionLink, showError, topBar } from "./dom.js";
import { bytes, num, str, when } from "./format.js";

const FILTERS = ["cwd", "parent", "since", "until", "limit"];

export function renderList(app) {
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
  app.replaceChildren(topBar(count, true), el("main", {}, errors, filters, table,
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

function row(r) {
  return el("tr", { "data-testid": "session-row", "data-session-id": str(r.id) },
    el("td", { class: "mono" }, el("a", { href: sessionLink(str(r.id)), title: str(r.id) },
      r.name !== undefined ? str(r.name) : r.label === undefined ? str(r.id) : str(r.label)),
      r.deleted === true ? el("span", { class: "badge", "data-testid": "deleted" }, "deleted") : null,
      retainedBadge(r.retained)),
    el("td", { class: "mono", title: r.cwd === undefined ? null : str(r.cwd) }, r.cwd === undefined ? "-" : str(r.cwd)),
    el("td", {}, when(r.createdAt)), el("td", {}, when(r.lastActivity)),
    el("td", { class: "num" }, num(r.events), r.torn ? " +torn" : ""),
    el("td", { class: "num" }, num(r.turns)), el("td", { class: "num" }, bytes(r.sizeBytes)),
    el("td", { class: "mono" }, r.parentSession === undefined ? "-" :
      el("a", { href: sessionLink(str(r.parentSession)) }, str(r.parentSession))));
}

// A session its store marks never to be pruned (`dsh-session retain`), as ls's RETAINED.
function retainedBadge(retained) {
  return retained === true ? el("span", { class: "badge", "data-testid": "retained",
    title: "never pruned (dsh-session retain --release to unmark)" }, "retained") : "";
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
    el("a", { href: sessionLink(id) + "#seq-" + str(h.seq), class: "mono", title: id },
      h.sessionName === undefined ? id : str(h.sessionName)), " ",
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
