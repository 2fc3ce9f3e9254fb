// dsh-session view: one turn block's elements: its head (turn, trigger, seqs, steps,
// tokens, how it ended), its items, and the brackets of a compaction within it.
//
// renderBlock(block, index, seen): seen.bySeq (a Map) gets each item's element under its
// seq and its result's, for the messages' sources to find; seen.raw(node, seq), when
// given, shows an item's raw event (served only: an export holds no raw events).

import { append, el, setAttr } from "./dom.js";
import { num, str } from "./format.js";

export function renderBlock(block, index, seen) {
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
    (bracket || items).appendChild(renderItem(item, seen));
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

function renderItem(item, seen) {
  const isError = item.error === true || (item.result && item.result.isError === true);
  // A raw record of an adapter (its typed twins tell it): hidden until the page's
  // "raw records" toggle shows it.
  const node = el("div", { class: "item" + (item.inStep ? " in-step" : "") + (isError ? " is-error" : "") +
    (item.raw === true ? " raw-record" : ""),
    "data-testid": "item", "data-kind": str(item.kind), "data-seq": str(item.seq),
    "data-raw": item.raw === true ? "true" : null });
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
    setAttr(node, "data-unanswered", item.unanswered.map(str).join(" "));
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
  if (seen.raw && typeof item.seq === "number") {
    const button = el("button", { type: "button", title: "the raw event" }, "JSON");
    button.addEventListener("click", () => seen.raw(node, item.seq));
    extras.appendChild(button);
  }
  textNode.addEventListener("click", () => node.classList.toggle("open-text"));
  append(node, [el("span", { class: "seq mono" }, str(item.seq)), el("span", { class: "kind" }, str(item.kind)), textNode, extras]);
  if (typeof item.seq === "number") {
    if (!seen.bySeq.has(item.seq)) seen.bySeq.set(item.seq, []);
    seen.bySeq.get(item.seq).push(node);
    if (typeof item.resultSeq === "number") {
      if (!seen.bySeq.has(item.resultSeq)) seen.bySeq.set(item.resultSeq, []);
      seen.bySeq.get(item.resultSeq).push(node);
    }
  }
  return node;
}
