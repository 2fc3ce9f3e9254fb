"""The viewer in a real browser (issue 16): the list page and its lineage, a session's
every turn as ``dsh-session show --json`` has them, hostile text shown as text (served and
exported), a live page following another process's writes, the exported file working
offline with no request leaving, search, and a message's sources highlighted.

One headless Chromium serves the whole run and one demo store each module (the fixtures
are in browser_support.py); each test loads its own pages, so any of them runs alone. The
screenshot of the demo's session page is saved under pytest's temporary folder, and written
to ``docs/images/view-session.png`` too when ``DSH_SESSION_UPDATE_SCREENSHOT=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from browser_support import (
    ViewProcess,
    clear_requests,
    dsh_session,
    marked,
    open_page,
    requests_made,
    set_offline,
    wait_for,
)

from dsh_session_core import ToolCallBlock, open_store

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

pytest_plugins = ("browser_support",)  # the fixtures: browser, driver, demo_server...

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "images" / "view-session.png"

#: Each would set ``window.__pwned`` if the page ever treated it as markup.
PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=2">',
    '<a href="javascript:window.__pwned=3">x</a>',
)


def _timeline(store: Path, session: str) -> list[dict[str, Any]]:
    """``dsh-session show SESSION --json``'s timeline: a block per turn."""
    timeline: list[dict[str, Any]] = json.loads(
        dsh_session("show", session, "--store", str(store), "--json"))["timeline"]
    return timeline


def _end_kind(block: dict[str, Any]) -> str | None:
    end = block.get("end")
    return end["reason"]["kind"] if end else None


def _all(url: str) -> str:
    """``url`` asking for every page of the timeline."""
    return url + ("&" if "?" in url else "?") + "all=1"


def _turns(driver: WebDriver) -> list[tuple[str, str, bool]]:
    """The page's turns: (number, end reason's kind, interrupted), in page order."""
    return [(t["turn"], t["endReason"], t["interrupted"] == "true")
            for t in marked(driver, "turn", "turn", "endReason", "interrupted")]


def _items(driver: WebDriver) -> list[tuple[str | None, str, int]]:
    """The page's items: (the number of the turn holding it, kind, seq), in page order."""
    found: list[list[Any]] = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=item]'), e => {"
        "  const turn = e.closest('[data-testid=turn]');"
        "  return [turn ? turn.dataset.turn : null, e.dataset.kind, e.dataset.seq]; });")
    return [(turn, kind, int(seq)) for turn, kind, seq in found]


def _turn_of(driver: WebDriver, testid: str) -> list[str | None]:
    """For each element of ``testid``, the number of the turn that holds it."""
    found: list[str | None] = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=\"' + arguments[0]"
        " + '\"]'), e => { const t = e.closest('[data-testid=turn]');"
        " return t ? t.dataset.turn : null; });", testid)
    return found


# --- the list page -------------------------------------------------------------------------


_LINEAGE_BOXES = """
const root = document.querySelector('[data-testid=lineage]');
if (!root) return null;
function find(id) {
  for (const e of root.querySelectorAll('[data-session-id]'))
    if (e.dataset.sessionId === id) return e;
  for (const e of root.querySelectorAll('a[href]'))
    if (decodeURIComponent(new URL(e.href).pathname).endsWith('/s/' + id)) return e;
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode())
    if (n.textContent.trim() === id) return n.parentElement;
  return null;
}
return arguments[0].map(id => {
  const e = find(id);
  if (!e) return null;
  const r = e.getBoundingClientRect();
  return {left: r.left, top: r.top, width: r.width, height: r.height};
});
"""


def test_the_list_shows_the_demos_sessions_and_the_fork_under_its_parent(
    driver: WebDriver, demo_server: ViewProcess,
) -> None:
    open_page(driver, demo_server.page("/"))
    rows = marked(driver, "session-row", "sessionId")
    assert sorted(r["sessionId"] for r in rows) == ["demo", "demo-fork"]
    tags = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=session-row]'),"
        " e => e.tagName);")
    assert set(tags) == {"TR"}
    boxes = driver.execute_script(_LINEAGE_BOXES, ["demo", "demo-fork"])
    assert boxes is not None, "no lineage element"
    parent, fork = boxes
    assert parent is not None, "the lineage does not show demo"
    assert fork is not None, "the lineage does not show demo-fork"
    assert parent["width"] > 0
    assert fork["width"] > 0
    # Under its parent: below it, and indented.
    assert fork["top"] > parent["top"], (parent, fork)
    assert fork["left"] > parent["left"], (parent, fork)


def test_search_finds_a_word_of_the_demo(
    driver: WebDriver, demo_server: ViewProcess, demo_store: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    expected = {(h["session"], h["seq"]) for h in json.loads(
        dsh_session("search", "loader", "--store", str(demo_store), "--json",
                    "--limit", "1000"))}
    assert expected
    open_page(driver, demo_server.page("/"))
    box = driver.find_element(By.CSS_SELECTOR, "[data-testid=search-input]")
    box.send_keys("loader", Keys.ENTER)
    hits = wait_for(driver, lambda d: marked(d, "search-hit", "sessionId", "seq"),
                    message="no search-hit for 'loader'")
    shown = {(h["sessionId"], int(h["seq"])) for h in hits}
    assert shown <= expected, shown - expected


# --- a session page --------------------------------------------------------------------------


def test_the_session_page_shows_every_turn_of_the_demo(
    driver: WebDriver, demo_server: ViewProcess, demo_store: Path,
) -> None:
    timeline = _timeline(demo_store, "demo")
    open_page(driver, _all(demo_server.page("/s/demo")), complete=True)

    assert [(t[0], t[1]) for t in _turns(driver)] == [
        (str(b["turn"]), _end_kind(b)) for b in timeline]
    assert _items(driver) == [(str(b["turn"]), item["kind"], item["seq"])
                              for b in timeline for item in b["items"]]
    # The crash's turn, closed by the repair on reload, and it alone.
    interrupted = [t[0] for t in _turns(driver) if t[2]]
    assert interrupted == [str(b["turn"]) for b in timeline
                           if _end_kind(b) == "interrupted"]
    assert interrupted
    # The hook's blocked prompt, in the turn it rejected.
    rejected = [str(b["turn"]) for b in timeline if _end_kind(b) == "rejected"]
    assert _turn_of(driver, "blocked-prompt") == rejected
    # The compaction's bracket, in the turn it ran in.
    compacted = {str(b["turn"]) for b in timeline
                 for item in b["items"] if item["kind"] == "compact"}
    assert set(_turn_of(driver, "compaction")) == compacted
    assert compacted
    events = json.loads(dsh_session("show", "demo", "--store", str(demo_store), "--json"))
    assert str(events["events"]) in marked(driver, "event-count")[0]["text"]
    charts = driver.execute_script(
        "return ['chart-tokens', 'chart-types'].map(id => {"
        " const e = document.querySelector('[data-testid=' + id + ']');"
        " return e ? e.tagName.toLowerCase() : null; });")
    assert charts == ["svg", "svg"]
    header = marked(driver, "session-header")[0]["text"]
    assert "demo" in header
    for leak in ("null", "undefined", "NaN", "[object "):  # JavaScript values as text
        assert leak not in header, f"the header shows {leak!r}: {header!r}"


_STYLE = """
return arguments[0].map(e => {
  const s = getComputedStyle(e);
  return [e.className, JSON.stringify(Object.assign({}, e.dataset)), s.backgroundColor,
          s.outlineStyle, s.outlineColor, s.outlineWidth, s.boxShadow, s.borderColor,
          s.color, s.fontWeight].join('|');
});
"""


def test_toggle_sources_highlights_the_events_of_a_message(
    driver: WebDriver, demo_server: ViewProcess,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webelement import WebElement

    open_page(driver, _all(demo_server.page("/s/demo")), complete=True)
    items: dict[int, WebElement] = {
        int(str(e.get_attribute("data-seq"))): e
        for e in driver.find_elements(By.CSS_SELECTOR, "[data-testid=item]")}
    # The message citing the most events shown as items, and an item no message cites.
    cited: dict[WebElement, list[int]] = {
        m: sorted({int(s) for s in str(m.get_attribute("data-sources")).split(",")
                   if s.strip()} & items.keys())
        for m in driver.find_elements(By.CSS_SELECTOR, "[data-testid=message]")}
    assert cited, "no message"
    message = max(cited, key=lambda m: len(cited[m]))
    shown = cited[message]
    others = sorted(items.keys() - {s for seqs in cited.values() for s in seqs})
    assert shown, "no message cites an event shown as an item"
    assert others, "every item is cited by a message"
    watched = [items[s] for s in shown] + [items[others[0]]]
    before = driver.execute_script(_STYLE, watched)
    # The switch (the message's own, or the page's), then the message.
    toggles = (message.find_elements(By.CSS_SELECTOR, "[data-testid=toggle-sources]")
               or driver.find_elements(By.CSS_SELECTOR, "[data-testid=toggle-sources]"))
    assert toggles, "no toggle-sources button"
    for target in (toggles[0], message):
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", target)
        target.click()

    def highlighted(d: WebDriver) -> bool:
        after = d.execute_script(_STYLE, watched)
        return all(a != b for a, b in zip(after[:-1], before[:-1], strict=True))

    wait_for(driver, highlighted, message=f"the sources {shown} were not highlighted")
    after = driver.execute_script(_STYLE, watched)
    assert after[-1] == before[-1], f"item {others[0]}, not a source, changed too"


def test_a_screenshot_of_the_demo_session(
    driver: WebDriver, demo_server: ViewProcess, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    size = driver.get_window_size()
    driver.set_window_size(1280, 1500)  # the head, the charts and the first turns
    try:
        open_page(driver, demo_server.page("/s/demo"))
        path = tmp_path_factory.mktemp("screenshots") / "view-session.png"
        assert driver.save_screenshot(str(path))
    finally:
        driver.set_window_size(size["width"], size["height"])
    assert path.read_bytes().startswith(b"\x89PNG")
    print(f"screenshot of the demo's session page: {path}")
    if os.environ.get("DSH_SESSION_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        SCREENSHOT.write_bytes(path.read_bytes())
        print(f"written to {SCREENSHOT}")


# --- following a live session ------------------------------------------------------------


_APPEND_A_TURN = """
import sys
from dsh_session_core import open_store
with open_store(sys.argv[1]) as store:
    session = store.open("live")
    with session.turn() as turn:
        turn.user("And one more thing?")
        with turn.step() as step:
            step.assistant("Done.")
    store.flush(session)
"""


def test_a_turn_another_process_appends_appears_within_two_seconds(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    store = tmp_path / "sessions"
    with open_store(str(store)) as opened:
        session = opened.create("live")
        with session.turn() as turn:
            turn.user("Hello?")
            with turn.step() as step:
                step.assistant("Hello.")
        opened.flush(session)
    server = serve("--store", str(store))
    open_page(driver, server.page("/s/live"))
    assert [t[0] for t in _turns(driver)] == ["1"]
    # Following from here on: the page says so once its stream is open.
    wait_for(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, "[data-testid=live]").get_attribute("data-state") == "on",
        message="the page never went live")

    start = time.monotonic()
    subprocess.run([sys.executable, "-c", _APPEND_A_TURN, str(store)], check=True,
                   timeout=60)
    written = time.monotonic()
    wait_for(driver, lambda d: [t[0] for t in _turns(d)] == ["1", "2"],
             message="the appended turn never appeared")
    # Within two seconds on an idle machine; on a loaded one, held to a control of the
    # same run: the appending process (a Python start, a store opened, a flush) slows
    # down with the machine as the server's follow and the page do.
    waited, control = time.monotonic() - written, written - start
    assert waited < 2 + 2 * control, (waited, control)


# --- hostile text ---------------------------------------------------------------------------


def _hostile_log(tmp_path: Path) -> Path:
    """A log whose user messages, tool names and tool results are the payloads, and
    whose last line holds a byte that is not UTF-8."""
    with open_store(str(tmp_path / "sessions")) as store:
        session = store.create("xss")
        for n, payload in enumerate(PAYLOADS):
            with session.turn() as turn:
                turn.user(payload)
                with turn.step() as step:
                    reply = step.assistant(
                        [ToolCallBlock(id=f"call-{n}", name=payload, arguments="{}")])
                    call = reply.data.content[0]
                    assert isinstance(call, ToolCallBlock)
                    step.tool_result(step.tool_call(call), payload)
                with turn.step() as step:
                    step.assistant("ok")
        store.flush(session)
        log = Path(store.location("xss"))
    lines = log.read_bytes().splitlines(keepends=True)
    event = json.loads(next(line for line in lines if b'"user/message"' in line))
    event["seq"] = len(lines) - 1  # after the header, one line per event
    event["data"]["content"] = [{"type": "text", "text": "BAD"}]
    bad = json.dumps(event, separators=(",", ":")).encode().replace(b"BAD", b"bad \xff byte")
    log.write_bytes(b"".join(lines) + bad + b"\n")
    return log


_LITERAL_TEXT = """
const copy = document.body.cloneNode(true);
for (const e of copy.querySelectorAll('script, style, template, noscript')) e.remove();
return copy.textContent;
"""


def _assert_inert(driver: WebDriver, where: str, bad_line: int) -> None:
    assert driver.execute_script("return typeof window.__pwned;") == "undefined", where
    text = driver.execute_script(_LITERAL_TEXT)
    for payload in PAYLOADS:
        assert payload in text, f"{where}: {payload!r} is not shown as text"
    # The line with the byte that is not UTF-8: shown replaced, or said to be skipped.
    assert "\ufffd" in text or f"line {bad_line} " in text, f"{where}: line {bad_line}?"
    made = driver.execute_script(
        "return [document.querySelectorAll('img[src=\"x\"]').length,"
        " document.querySelectorAll('a[href^=\"javascript:\" i]').length];")
    assert made == [0, 0], f"{where}: a payload became an element"


def test_hostile_text_is_shown_as_text_served_and_exported(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    log = _hostile_log(tmp_path)
    bad_line = len(log.read_bytes().splitlines())
    server = serve(str(log))
    open_page(driver, _all(server.url), complete=True)
    if not marked(driver, "turn") and marked(driver, "session-row"):
        open_page(driver, _all(server.page("/s/xss")), complete=True)
    assert len(marked(driver, "turn")) == len(PAYLOADS)
    _assert_inert(driver, "served", bad_line)

    exported = tmp_path / "xss.html"
    dsh_session("export", "--html", str(log), "-o", str(exported))
    open_page(driver, exported.as_uri(), complete=True)
    assert len(marked(driver, "turn")) == len(PAYLOADS)
    _assert_inert(driver, "exported", bad_line)


# --- the exported file ----------------------------------------------------------------------


def test_the_exported_file_renders_offline_and_requests_nothing(
    driver: WebDriver, demo_server: ViewProcess, demo_store: Path, tmp_path: Path,
) -> None:
    exported = tmp_path / "demo.html"
    dsh_session("export", "--html", "demo", "--store", str(demo_store), "-o", str(exported))
    open_page(driver, _all(demo_server.page("/s/demo")), complete=True)
    served = (_turns(driver), _items(driver))
    assert served[0]

    driver.get("about:blank")  # the served page's live stream ends before the count starts
    set_offline(driver, True)
    clear_requests(driver)
    open_page(driver, exported.as_uri(), complete=True)
    assert (_turns(driver), _items(driver)) == served
    resources = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name);")
    assert all(r.startswith("data:") for r in resources), resources
    requested = [u for u in requests_made(driver) if u != exported.as_uri()]
    assert all(u.startswith(("data:", "blob:", "about:")) for u in requested), requested
    # And the file forbids any: its Content-Security-Policy allows no origin, no scheme
    # but data:.
    csp = driver.execute_script(
        "const m = document.querySelector('meta[http-equiv=Content-Security-Policy i]');"
        " return m ? m.content : null;")
    assert csp, "the exported file has no Content-Security-Policy"
    directives = {name: sources for name, *sources in
                  (d.split() for d in csp.split(";") if d.strip())}
    assert directives.get("default-src") == ["'none'"], csp
    for name, sources in directives.items():
        for source in sources:
            assert source in ("data:", "blob:") or (
                source.startswith("'") and source != "'self'"), f"{name} allows {source}"
    external = driver.execute_script(
        "return Array.from(document.querySelectorAll('[src], link[href]'),"
        " e => e.getAttribute('src') || e.getAttribute('href'))"
        ".filter(u => !u.startsWith('data:'));")
    assert external == []


_LOOKS = """
const s = getComputedStyle(document.body);
return [s.fontFamily, s.backgroundColor, s.color, s.margin];
"""
#: Two scripts something might slip into an exported file: inline code, and a handler.
_INJECTED = (b'<script>window.__injected = "inline";</script>\n'
             b'<svg><image href="data:," onerror="window.__injected = \'handler\'">'
             b"</image></svg>\n")


def test_the_exported_file_runs_its_own_code_only(
    driver: WebDriver, demo_server: ViewProcess, demo_store: Path, tmp_path: Path,
) -> None:
    exported = tmp_path / "demo.html"
    dsh_session("export", "--html", "demo", "--store", str(demo_store), "-o", str(exported))
    open_page(driver, _all(demo_server.page("/s/demo")), complete=True)
    served = (_turns(driver), driver.execute_script(_LOOKS))
    driver.get("about:blank")
    page = exported.read_bytes()
    assert page.count(b"</body>") == 1
    # Its own code runs (the page renders) and its own style applies (the served page's
    # look), each allowed by its hash.
    open_page(driver, exported.as_uri(), complete=True)
    assert (_turns(driver), driver.execute_script(_LOOKS)) == served
    # Anything else is refused, though it sits in the same file.
    injected = tmp_path / "injected.html"
    injected.write_bytes(page.replace(b"</body>", _INJECTED + b"</body>"))
    open_page(driver, injected.as_uri(), complete=True)
    assert _turns(driver) == served[0]
    assert driver.execute_script("return typeof window.__injected;") == "undefined"
    # The same file under a policy allowing inline code (the one before issue 24) runs
    # both: the check above is not vacuous.
    csp = re.search(rb'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp is not None
    loose = page.replace(csp.group(1), b"default-src 'none'; style-src 'unsafe-inline'; "
                                       b"script-src 'unsafe-inline'; img-src data:")
    injected.write_bytes(loose.replace(b"</body>", _INJECTED + b"</body>"))
    open_page(driver, injected.as_uri(), complete=True)
    assert driver.execute_script("return window.__injected;") in ("inline", "handler")
