// dsh-session view: building the page's elements, and every rule that keeps a log's text
// from becoming markup or a link (the only module that touches attributes).
//
// Safe by construction: every string that comes from a log reaches the DOM as a text node
// (el() turns strings into text nodes) or as the value of an attribute from the
// SAFE_ATTRIBUTES list, set with setAttribute here and nowhere else. Nothing parses
// markup, and the only links are "/", "/?...", "#..." and "/s/" + encodeURIComponent(id):
// never a URL taken from a log. tests/view/test_static.py checks that no other module
// sets an attribute or builds an element itself.

const SVG = "http://www.w3.org/2000/svg";
const SAFE_ATTRIBUTES = new Set([
  "class", "id", "type", "name", "value", "placeholder", "title", "role", "for",
  "aria-pressed", "aria-label", "aria-live", "colspan", "autocomplete", "spellcheck",
  "data-testid", "data-session-id", "data-seq", "data-turn", "data-end-reason",
  "data-interrupted", "data-kind", "data-sources", "data-state", "data-role",
  "data-index", "data-unanswered", "data-raw", "viewBox", "width", "height", "x", "y", "x1", "x2",
  "y1", "y2", "fill", "stroke", "preserveAspectRatio", "font-size", "text-anchor", "href",
]);

// The links the page makes: its own pages, never another origin or scheme.
function linkAllowed(text) {
  return text === "/" || text.startsWith("/s/") || text.startsWith("/?") || text.startsWith("#");
}

export function setAttr(node, name, value) {
  if (!SAFE_ATTRIBUTES.has(name)) throw new Error("attribute not allowed: " + name);
  if (name === "href" && !linkAllowed(String(value))) throw new Error("link not allowed");
  node.setAttribute(name, String(value));
}

export function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
  return node;
}

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) setAttr(node, k, v);
  }
  return append(node, children);
}

export function fill(node, ...children) {
  // The node's children replaced; null, false and undefined leave no trace.
  node.replaceChildren();
  return append(node, children);
}

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) setAttr(node, k, v);
  }
  return append(node, children);
}

export function sessionLink(id) {
  return "/s/" + encodeURIComponent(id);
}

export function showError(where, err) {
  const box = el("div", { class: "error", "data-testid": "error", role: "alert" },
    err && err.message ? err.message : String(err));
  if (err && err.hint) append(box, ["\nhint: " + err.hint]);
  where.appendChild(box);
}

export function topBar(extra, linked) {
  // linked: the title links to the session list (not in an exported file, which has none).
  const home = linked ? el("h1", {}, el("a", { href: "/" }, "dsh-session")) : el("h1", {}, "dsh-session");
  return el("header", { class: "top" }, home, extra);
}

export function markReady() {
  document.body.dataset.ready = "1";
}
