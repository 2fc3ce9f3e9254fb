"""The page's files (issue 26): ES modules served as they are and bundled into the one
script of an exported file, with every rule that keeps a log's text from becoming markup
or a link in one module, ``dom.js``.

The bundle is checked by what it does, in the real browser the view tests drive
(browser_support.py): modules evaluated once each, after what they import, each in its
own scope; and by what it refuses, every form of import or export it does not rewrite.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from browser_support import (
    ViewProcess,
    clear_requests,
    dsh_session,
    marked,
    open_page,
    requests_made,
    wait_complete,
    wait_for,
)
from store_support import write_turns

from dsh_session_view._static import ENTRY, BundleError, bundle, page_files, page_script

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

pytest_plugins = ("browser_support",)

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "packages" / "dsh-session-view" / "src" / "dsh_session_view" / "static"
MODULES = sorted(p.name for p in STATIC.glob("*.js"))

# --- the XSS rules live in dom.js ---------------------------------------------------------

#: What puts markup, a URL or an attribute into the page, or builds an element without
#: dom.js's el() and svg() (which hold the attribute list and the link rule).
SINKS = (
    "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser",
    "createContextualFragment", "setHTML", "srcdoc", "setAttribute", "setAttributeNS",
    "setAttributeNode", "createElement", "createElementNS", "createTextNode", ".href",
    ".src", ".action", ".formAction", "window.open", "location.assign", "data:",
    "javascript:",
)


def sinks(code: str) -> list[str]:
    """The sinks ``code`` names (an attribute written as a property counts, as
    ``node.href = ...`` does: ``.href`` followed by anything but a letter)."""
    return [sink for sink in SINKS
            if re.search(re.escape(sink) + (r"(?![\w-])" if sink[-1].isalpha() else ""), code)]


def test_the_rule_catches_what_it_forbids() -> None:
    planted = {
        "node.innerHTML = text;": ["innerHTML"],
        'a.setAttribute("href", url);': ["setAttribute"],
        "img.src = url;": [".src"],
        "link.href = log.url;": [".href"],
        'row.insertAdjacentHTML("beforeend", html);': ["insertAdjacentHTML"],
        'document.createElement("a")': ["createElement"],
        'const u = "javascript:x";': ["javascript:"],
        'el("a", { href: sessionLink(id) }, id);': [],
        'node.classList.add("hl"); x.hrefs = 1;': [],
    }
    for code, expected in planted.items():
        assert sinks(code) == expected, code


def test_only_dom_js_touches_attributes_or_builds_elements() -> None:
    assert "dom.js" in MODULES
    for name in MODULES:
        if name != "dom.js":
            assert sinks((STATIC / name).read_text()) == [], name
    dom = (STATIC / "dom.js").read_text()
    # There, one setAttribute, after the attribute list and the link rule, and the
    # element builders: no markup, no URL of its own.
    assert len(re.findall(r"\bsetAttribute\(", dom)) == 1
    set_attr = dom[dom.index("export function setAttr("):]
    set_attr = set_attr[:set_attr.index("\n}\n")]
    assert set_attr.index("SAFE_ATTRIBUTES.has(name)") < set_attr.index("linkAllowed(") \
        < set_attr.index("setAttribute(")
    assert [s for s in sinks(dom) if s not in (
        "setAttribute", "createElement", "createElementNS", "createTextNode")] == []


# --- the files and the routes -------------------------------------------------------------


def test_every_module_is_served_and_bundled() -> None:
    assert {"app.js", "dom.js", "api.js", "list.js", "session.js", "charts.js"} <= set(MODULES)
    assert page_files() == {**{name: "text/javascript; charset=utf-8" for name in MODULES},
                            "app.css": "text/css; charset=utf-8"}
    script = page_script().decode()
    assert [name for name in MODULES if f"// --- {name}\n" not in script] == []
    assert script.rindex("// --- ") == script.index(f"// --- {ENTRY}\n")
    html = (STATIC / "index.html").read_text()
    assert re.findall(r"<script\b[^>]*>", html) == [f'<script type="module" src="/static/{ENTRY}">']


def test_the_served_page_loads_its_modules_from_its_own_origin(
    driver: WebDriver, demo_server: ViewProcess,
) -> None:
    clear_requests(driver)
    open_page(driver, demo_server.page("/s/demo"))
    requested = {u.removeprefix(demo_server.url.rstrip("/")) for u in requests_made(driver)}
    assert {"/static/" + name for name in MODULES} <= requested
    assert all(u.startswith(("/", "data:")) for u in requested), requested


# --- the bundle ---------------------------------------------------------------------------

_SOURCES = {
    "app.js": 'import { b, twice } from "./b.js";\nimport { a, count } from "./a.js";\n'
              "const secret = 'app';\n"
              "window.__bundled = [a(), b, twice(2), count(), secret];\n",
    "a.js": "let runs = 0;\nconst secret = 'a';\nruns += 1;\n"
            "export function a() {\n  return secret;\n}\n"
            "export const count = () => runs;\n",
    "b.js": 'import { a } from "./a.js";\nconst secret = "b";\n'
            "export const b = a() + secret;\nexport async function later() {}\n"
            "export class Twice {}\nexport function twice(n) {\n  return 2 * n;\n}\n",
}


def test_the_bundle_orders_the_modules_and_rewrites_only_their_imports() -> None:
    script = bundle(_SOURCES)
    heads = re.findall(r"^// --- (\S+)$", script, re.M)
    assert heads == ["a.js", "b.js", "app.js"]  # each once, after what it imports
    assert "import" not in script.replace("// --- ", "")
    assert not re.search(r"^export\b", script, re.M)
    # Everything else is the modules' own text.
    for text in _SOURCES.values():
        for line in text.splitlines():
            if not line.startswith("import "):
                assert line.removeprefix("export ") in script.splitlines(), line


def test_the_bundle_runs_as_the_modules_would(driver: WebDriver) -> None:
    driver.get("about:blank")
    found = driver.execute_script(bundle(_SOURCES) + "\nreturn window.__bundled;")
    # a.js ran once though two modules import it; each module kept its own `secret`.
    assert found == ["a", "ab", 4, 1, "app"]
    leaked = driver.execute_script("return [typeof secret, typeof a, typeof runs];")
    assert leaked == ["undefined"] * 3


@pytest.mark.parametrize(("app", "others", "refusal"), [
    ("export default function f() {}", {}, "export default"),
    ('export { a };\nconst a = 1;', {}, "export { a }"),
    ('export * from "./a.js";', {"a.js": ""}, "export *"),
    ("export let a = 1;", {}, "export let"),
    ("export var a = 1;", {}, "export var"),
    ('  import { a } from "./a.js";', {"a.js": "export const a = 1;"}, "import { a }"),
    ('import {\n  a,\n} from "./a.js";', {"a.js": "export const a = 1;"}, "import {"),
    ('import a from "./a.js";', {"a.js": "export const a = 1;"}, "import a from"),
    ('import { a as b } from "./a.js";', {"a.js": "export const a = 1;"}, "a as b"),
    ('import * as m from "./a.js";', {"a.js": "export const a = 1;"}, "import * as"),
    ('import { a } from "https://cdn.example/a.js";', {}, "https://"),
    ('import { a } from "./A.js";', {"A.js": "export const a = 1;"}, "./name.js"),
    ('import { a } from "./a.js";\nimport { a } from "./b.js";',
     {"a.js": "export const a = 1;", "b.js": "export const a = 2;"}, "imported twice"),
    ('const m = import("./a.js");', {"a.js": ""}, "import()"),
    ("const u = import.meta.url;", {}, "import.meta"),
    ('import { q } from "./q.js";', {}, "'q.js', which is not one of the modules"),
    ('import { zz } from "./a.js";', {"a.js": "export const a = 1;"},
     "imports zz from a.js, which does not export it"),
    ('import { a } from "./a.js";', {"a.js": 'import { b } from "./b.js";\nexport const a = 1;',
                                     "b.js": 'import { a } from "./a.js";\nexport const b = 1;'},
     "import cycle: a.js -> b.js -> a.js"),
    ("export const a = 1;\nexport function a() {}", {}, "a is exported twice"),
    ("const __dsh_module_a = 1;", {}, "is the bundle's"),
])
def test_the_bundle_refuses_what_it_does_not_rewrite(app: str, others: dict[str, str],
                                                     refusal: str) -> None:
    with pytest.raises(BundleError) as refused:
        bundle({"app.js": app, **others})
    assert refusal in str(refused.value)


def test_without_the_entry_there_is_no_bundle() -> None:
    with pytest.raises(BundleError, match=r"the entry is 'app\.js'"):
        bundle({"main.js": "window.x = 1;"})


# --- the exported file, paged ---------------------------------------------------------------


def _shown(driver: WebDriver) -> tuple[list[str], list[tuple[str, str]]]:
    turns = [t["turn"] for t in marked(driver, "turn", "turn")]
    messages = [(m["role"], m["seq"]) for m in marked(driver, "message", "role", "seq")]
    return turns, messages


def test_an_exported_long_session_pages_as_the_served_one(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    write_turns(str(store), "long", 120)
    server = serve("--store", str(store))
    open_page(driver, server.page("/s/long?all=1"), complete=True)
    served = _shown(driver)
    assert served[0] == [str(t) for t in range(1, 121)]
    exported = tmp_path / "long.html"
    dsh_session("export", "--html", "long", "--store", str(store), "-o", str(exported))
    # The first page, then the next ones as the page is scrolled to its end.
    open_page(driver, exported.as_uri())
    assert _shown(driver)[0] == [str(t) for t in range(1, 51)]
    def at_least(n: int) -> Callable[[WebDriver], bool]:
        return lambda d: len(marked(d, "turn")) >= n

    for shown in (100, 120):
        driver.execute_script("document.querySelector('.sentinel').scrollIntoView();")
        wait_for(driver, at_least(shown), message=f"the exported page never showed {shown} turns")
    wait_complete(driver)
    assert _shown(driver) == served
    # A link to an event of the last page loads the pages up to it.
    seq = driver.execute_script(
        "return document.querySelector('[data-turn=\"110\"] [data-testid=item]').dataset.seq;")
    driver.get("about:blank")
    open_page(driver, exported.as_uri() + "#seq-" + seq)
    wait_for(driver, lambda d: d.execute_script(
        "const e = document.querySelector('.item.hl');"
        " return e ? e.closest('[data-testid=turn]').dataset.turn : null;") == "110",
        message="the exported page never highlighted the linked event")


# --- the raw event of an item -------------------------------------------------------------


def test_an_items_raw_event_is_fetched_served_and_absent_exported(
    driver: WebDriver, demo_server: ViewProcess, demo_store: Path, tmp_path: Path,
) -> None:
    open_page(driver, demo_server.page("/s/demo?all=1"), complete=True)
    seq = driver.execute_script(
        "const b = document.querySelector('[data-testid=item] button[title=\"the raw event\"]');"
        " b.click(); return b.closest('[data-testid=item]').dataset.seq;")
    shown = wait_for(driver, lambda d: d.execute_script(
        "const e = document.querySelector('[data-seq=\"' + arguments[0] + '\"] pre.raw');"
        " return e ? e.textContent : null;", seq), message="the raw event never showed")
    with urllib.request.urlopen(demo_server.page(f"/api/session/demo/events?after={int(seq) - 1}"
                                                 f"&limit=1"), timeout=30) as answer:
        [stored] = json.loads(answer.read())["events"]
    assert json.loads(shown) == stored
    assert stored["seq"] == int(seq)
    exported = tmp_path / "demo.html"
    dsh_session("export", "--html", "demo", "--store", str(demo_store), "-o", str(exported))
    open_page(driver, exported.as_uri(), complete=True)
    assert marked(driver, "item")
    assert driver.execute_script(
        "return document.querySelectorAll('button[title=\"the raw event\"]').length;") == 0
