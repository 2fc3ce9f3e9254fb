"""The viewer's pages show a session's never-prune mark (issue 38), in a real headless
Chromium as tests/view/test_browser.py drives it: a badge on its row of the list, and
the mark with its note on its page; the sessions not marked show none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from browser_support import ViewProcess, marked, open_page
from store_support import write_chat, write_turns

from dsh_session_core import open_store

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

pytest_plugins = ("browser_support",)


def test_the_list_and_the_page_show_the_mark(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    store = write_chat(str(tmp_path / "store"), "hello")
    write_turns(store, "kept", 3)
    with open_store(store) as s:
        s.retain("kept", note="the incident")
    server = serve("--store", store)
    open_page(driver, server.page("/"))
    badges = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=retained]'),"
        " e => [e.closest('[data-testid=session-row]').dataset.sessionId, e.textContent]);")
    assert badges == [["kept", "retained"]]
    open_page(driver, server.page("/s/kept"), complete=True)
    [mark] = marked(driver, "retained")
    assert mark["text"] == "never pruned · note: the incident"
    assert "never pruned" in marked(driver, "session-header")[0]["text"]
    open_page(driver, server.page("/s/chat-1"), complete=True)
    assert marked(driver, "retained") == []
