"""The viewer reads as the conversation (issue 40), in a real headless Chromium as
tests/view/test_browser.py drives it: an adapter's raw records (here ADK's
``adk/event``, registered ``EventSpec(raw=True)``) are folded away until the page's
"raw records" toggle shows them, and back; ``dsh-session view NAME`` opens the ADK
session of that name, which its page, the list and the search hits show, a deleted one
left out of the list."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from browser_support import ViewProcess, marked, open_page, wait_for

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

pytest_plugins = ("browser_support",)

pytest.importorskip("dsh_session_adk")

NAME = "weather/ada/chat-1"


def _adk_store(path: Path) -> tuple[str, str]:
    """A SQLite store holding the ADK session ``weather/ada/chat-1`` (a user event: an
    ``adk/event`` and its ``user/message``) and a deleted one, ``weather/ada/chat-2``;
    with the first's dsh id."""
    from google.adk.events.event import Event
    from google.genai import types

    from dsh_session_adk import DshSessionService, dsh_session_id

    url = f"sqlite:///{path / 'adk.db'}"

    async def fill() -> None:
        async with DshSessionService(url) as service:
            for sid in ("chat-1", "chat-2"):
                s = await service.create_session(app_name="weather", user_id="ada",
                                                 session_id=sid)
                content = types.Content(role="user", parts=[types.Part(text=f"hi {sid}")])
                await service.append_event(s, Event(author="user", invocation_id="i",
                                                    content=content))
            await service.delete_session(app_name="weather", user_id="ada",
                                         session_id="chat-2")

    asyncio.run(fill())
    return url, dsh_session_id("weather", "ada", "chat-1")


def _items(driver: WebDriver) -> list[list[Any]]:
    """Each timeline item: its type's label, whether it is a raw record, and whether it
    is displayed."""
    found: list[list[Any]] = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=item]'),"
        " e => [e.dataset.kind, e.dataset.raw === 'true', e.offsetParent !== null]);")
    return found


def test_raw_records_are_folded_until_the_toggle_shows_them(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    store, session = _adk_store(tmp_path)
    server = serve(NAME, "--store", store)  # the name, as an ADK user knows it
    assert server.url.endswith(f"/s/{session}"), server.url
    open_page(driver, server.url, complete=True)
    items = _items(driver)
    assert ["adk/event", True, False] in items  # there, folded away
    assert ["user", False, True] in items
    assert all(shown for _, raw, shown in items if not raw)
    assert "weather/ada/chat-1" in marked(driver, "session-header")[0]["text"]
    [toggle] = marked(driver, "toggle-raw")
    assert toggle["text"] == "raw records"

    def press() -> None:
        driver.execute_script(
            "document.querySelector('[data-testid=toggle-raw]').click();")

    press()
    wait_for(driver, lambda d: all(shown for _, _, shown in _items(d)),
             message="the raw records never showed")
    assert driver.execute_script(
        "return document.querySelector('[data-testid=toggle-raw]')"
        ".getAttribute('aria-pressed');") == "true"
    press()
    wait_for(driver, lambda d: not any(shown for _, raw, shown in _items(d) if raw),
             message="the raw records never folded back")


def test_the_list_shows_names_and_leaves_the_deleted_session_out(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    store, session = _adk_store(tmp_path)
    server = serve("--store", store)
    open_page(driver, server.page("/"))
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=session-row]'),"
        " e => [e.dataset.sessionId, e.querySelector('a').textContent]);")
    assert rows == [[session, NAME]]


def test_a_search_hit_names_its_session(
    driver: WebDriver, serve: Callable[..., ViewProcess], tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    store, session = _adk_store(tmp_path)
    server = serve("--store", store)
    open_page(driver, server.page("/"))
    driver.find_element(By.CSS_SELECTOR, "[data-testid=search-input]").send_keys(
        "hi", Keys.ENTER)
    wait_for(driver, lambda d: marked(d, "search-hit"), message="no search-hit for 'hi'")
    hits = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=search-hit]'),"
        " e => [e.dataset.sessionId, e.querySelector('a').textContent]);")
    assert [session, NAME] in hits
    assert all(text.startswith("weather/ada/") for _, text in hits)
