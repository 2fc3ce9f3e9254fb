// dsh-session view: a session's two charts, drawn as SVG: tokens per turn (in, out, cache
// read) and events per turn by type.

import { el, svg } from "./dom.js";
import { num } from "./format.js";

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

export function renderCharts(tokensChart, typesChart, charts) {
  if (!charts) return;
  tokensChart.replaceChildren(el("h3", {}, "tokens per turn: in, out, cache read"), tokenBars(charts),
    legend([["in", "#4a7fb5"], ["out", "#e08a2c"], ["cache read", "#9fc4e8"]]));
  const colours = charts.types.map((_, i) => PALETTE[i % PALETTE.length]);
  typesChart.replaceChildren(el("h3", {}, "events per turn, by type"), typeBars(charts, colours),
    legend(charts.types.map((t, i) => [t, colours[i]])));
}
