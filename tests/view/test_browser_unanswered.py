"""The viewer's page marks a tool call no ``tool/result`` answers (issue 24, point 3), in
a real headless Chromium as tests/view/test_browser.py drives it: served and exported,
for a log written here and for the reference's crashed log."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from browser_support import ViewProcess, dsh_session, marked, open_page
from unanswered_support import CALL_ID, CALL_SEQ, unanswered_log

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

pytest_plugins = ("browser_support",)

CRASH_CALL = "call_00_nleXELfnppSd9WhEQof34008"


def _all(url: str) -> str:
    return url + ("&" if "?" in url else "?") + "all=1"


def _marks(driver: WebDriver) -> list[tuple[str | None, str]]:
    """The unanswered badges: the seq of the line each is on, and its text."""
    found: list[tuple[str | None, str]] = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=unanswered]'),"
        " e => [e.closest('[data-testid=item]').dataset.seq, e.textContent]);")
    return [(seq, text) for seq, text in found]


def _warnings(driver: WebDriver) -> list[str]:
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll('.warning'), e => e.textContent);")
    return texts


def _check(driver: WebDriver, call_id: str, seq: int) -> None:
    assert _marks(driver) == [(str(seq), f"unanswered: {call_id}")]
    (item,) = [i for i in marked(driver, "item") if i.get("unanswered")]
    assert item["unanswered"] == call_id
    assert item["kind"] == "tool call"
    assert any(call_id in w and "no tool/result" in w for w in _warnings(driver))


def test_an_unanswered_call_is_marked_served_and_exported(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    log = unanswered_log(tmp_path / "store")
    server = serve(str(log))
    open_page(driver, _all(server.page("/s/lost")), complete=True)
    _check(driver, CALL_ID, CALL_SEQ)

    exported = tmp_path / "lost.html"
    dsh_session("export", "--html", str(log), "-o", str(exported))
    open_page(driver, exported.as_uri(), complete=True)
    _check(driver, CALL_ID, CALL_SEQ)


def test_the_references_crashed_log_is_marked(
    driver: WebDriver, tmp_path: Path, upstream: Path,
) -> None:
    log = tmp_path / "crash.jsonl"
    shutil.copy(upstream / "synthetic" / "crash-after-tool-call.jsonl", log)
    exported = tmp_path / "crash.html"
    dsh_session("export", "--html", str(log), "-o", str(exported))
    open_page(driver, exported.as_uri(), complete=True)
    _check(driver, CRASH_CALL, 59)
