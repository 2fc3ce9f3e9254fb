// dsh-session view: values of a log as the page writes them (text only, no elements).

export function str(value) {
  if (typeof value === "string") return value;
  if (typeof value === "number" && isFinite(value)) return String(value);
  return "?";
}

export function when(ms) {
  if (typeof ms !== "number" || !isFinite(ms)) return "?";
  const d = new Date(ms);
  if (isNaN(d.getTime())) return "?";
  const pad = (n) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

export function bytes(n) {
  if (typeof n !== "number") return "";
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

export function num(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "0";
}

export function blocksText(content) {
  // A message's content blocks as one text.
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
