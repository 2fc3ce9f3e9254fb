// dsh-session view: where the page's data comes from. Served, the /api/ routes (and
// their errors); exported, the pages the export embedded in the JSON script element with
// the id "data", and no request at all.
//
// Paging is the server's (SessionDocument.page): the served page asks for the turn
// blocks from a start, the exported one takes the page the export built for that start.


// The exported file's data ({head, pages}), or null when served.
export const exported = readEmbedded();

function readEmbedded() {
  const node = document.getElementById("data");
  if (!node) return null;
  return JSON.parse(node.textContent);
}

export class ApiError extends Error {
  constructor(body, status) {
    super(body && typeof body.error === "string" ? body.error : "HTTP " + status);
    this.hint = body && typeof body.hint === "string" ? body.hint : null;
    this.status = status;
  }
}

export async function api(path) {
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

export function sessionPages(id) {
  // The pages of one session's document: page(start) the turn blocks from start on (a
  // page of them), full the whole document's rather than a first quick one's; head() the
  // header and counts with no block.
  if (exported) {
    const byStart = new Map(exported.pages.map((p) => [p.range[0], p]));
    return {
      page(start) {
        const body = byStart.get(start);
        if (!body) return Promise.reject(new Error("the exported file has no page at turn block " + start));
        return Promise.resolve(Object.assign({}, exported.head, body));
      },
    };
  }
  const base = "/api/session/" + encodeURIComponent(id);
  return {
    page(start, full) {
      // "A-": the page from A, as long as the server pages (its PAGE_TURNS).
      return api(base + "?turns=" + start + "-" + (full ? "&full=1" : ""));
    },
    head() {
      return api(base + "?turns=1000000000-1000000000"); // no block: the head and the charts
    },
    event(seq) {
      return api(base + "/events?after=" + (seq - 1) + "&limit=1");
    },
    follow(after) {
      return new EventSource(base + "/follow?after=" + after);
    },
  };
}
