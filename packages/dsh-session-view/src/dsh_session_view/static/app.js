// dsh-session view: the page's entry. Served, it shows the session list at / and one
// session at /s/<id>; exported, the session the file holds.
//
// The page is ES modules with no build step: dom.js builds every element (and holds every
// rule keeping log text from becoming markup), format.js writes values as text, api.js
// fetches (or, exported, reads the embedded pages), list.js and session.js are the two
// pages (timeline.js a session's turn blocks), charts.js draws. An exported file holds them as one script, bundled by
// _static.py: so each import is one line `import { a, b } from "./x.js";` and each export
// an `export function|const|class NAME` at the start of a line.

import { exported } from "./api.js";
import { markReady, showError, topBar } from "./dom.js";
import { str } from "./format.js";
import { renderList } from "./list.js";
import { renderSession } from "./session.js";

function main() {
  const app = document.getElementById("app");
  if (exported) {
    renderSession(app, str(exported.head.session));
    return;
  }
  const path = location.pathname;
  if (path.startsWith("/s/")) {
    let id;
    try {
      id = decodeURIComponent(path.slice(3));
    } catch (e) {
      app.replaceChildren(topBar(null, true));
      showError(app, new Error("the session id in the URL is not UTF-8"));
      markReady();
      return;
    }
    renderSession(app, id);
  } else {
    renderList(app);
  }
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
else main();
