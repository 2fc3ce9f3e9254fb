"""The real-browser tests' machinery: a headless Chromium driven by Selenium, the
``dsh-session view`` server as a subprocess, and waits on what the page says.

The browser is Debian's ``chromium`` with its ``chromedriver`` (``apt-get install
chromium chromium-driver``), found on ``PATH``: Selenium is given both paths, so it never
runs Selenium Manager (which would try to download a browser or a driver). Without
them the browser tests skip, except under CI (``CI`` set), where they fail: CI must
never pass by skipping them (``.ci/run`` installs both).

It is also the tests' pytest plugin, for its fixtures (``pytest_plugins =
("browser_support",)``: a conftest.py here would clash with tests/conftest.py for mypy):
one browser for the whole run, the demo's store and a server on it once per module,
servers of a test's own. The test module imports it before pytest loads it as a plugin,
too late for assertion rewriting: PYTEST_DONT_REWRITE (its asserts carry messages).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dsh_session_core.testing.postgresql import under_ci

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

#: Where the browser and its driver are looked for on ``PATH``, in this order.
BROWSERS = ("chromium",)
DRIVERS = ("chromedriver",)
INSTALL = "apt-get install chromium chromium-driver"

#: This machine has no network and runs as root: no sandbox, nothing fetched at start.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)

#: Bounds on waits for a page's first paint, a condition of the page, or a server to
#: print its URL: each wait ends as soon as its condition holds, so these only bound a
#: hang (generous: a loaded machine may take many seconds).
PAGE_TIMEOUT = 60.0
SERVER_TIMEOUT = 60.0

#: The ``dsh-session`` command, as the interpreter running the tests has it.
DSH_SESSION = (sys.executable, "-m", "dsh_session_core")


def unavailable(reason: str) -> None:
    """Skip the test for ``reason``, or fail it under CI."""
    if under_ci():
        pytest.fail(f"{reason} (CI is set: the browser tests must not skip)", pytrace=False)
    pytest.skip(reason)


def _which(names: tuple[str, ...]) -> str | None:
    return next((found for name in names if (found := shutil.which(name))), None)


def browser_paths() -> tuple[str, str]:
    """Chromium's and chromedriver's paths, or skip (fail under CI) without them."""
    browser, driver = _which(BROWSERS), _which(DRIVERS)
    missing = [what for what, path in (("chromium", browser), ("chromedriver", driver))
               if path is None]
    if browser is None or driver is None:
        unavailable(f"no {' and no '.join(missing)} on PATH: the browser tests need "
                    f"Debian's chromium and chromium-driver ({INSTALL})")
    assert browser is not None
    assert driver is not None
    return browser, driver


def start_browser(user_data_dir: Path) -> WebDriver:
    """A headless Chromium with a fresh profile in ``user_data_dir``; its performance log
    records every request the pages make (:func:`requests_made`)."""
    browser, driver = browser_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        unavailable("selenium is not installed (it is in the test dependency group: "
                    "python3 dev.py test installs it)")
        raise
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={user_data_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    service = Service(executable_path=driver)
    return webdriver.Chrome(service=service, options=options)


# --- waiting on the page -------------------------------------------------------------------


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any],
             timeout: float = PAGE_TIMEOUT, message: str = "") -> Any:
    """``condition``'s first truthy value, polled by WebDriverWait (never a sleep)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition, message)


def body_data(driver: WebDriver, key: str) -> Any:
    """``document.body.dataset[key]`` (``None`` before the body exists)."""
    return driver.execute_script(
        "return document.body ? document.body.dataset[arguments[0]] : null;", key)


def wait_ready(driver: WebDriver, timeout: float = PAGE_TIMEOUT) -> None:
    """Until the page's first paint: ``body[data-ready="1"]``."""
    wait_for(driver, lambda d: body_data(d, "ready") == "1", timeout,
             f"the page never set body[data-ready=1]: {page_error(driver)}")


def wait_complete(driver: WebDriver, timeout: float = PAGE_TIMEOUT) -> None:
    """Until the whole timeline is rendered: ``body[data-complete="1"]``."""
    wait_for(driver, lambda d: body_data(d, "complete") == "1", timeout,
             f"the page never set body[data-complete=1]: {page_error(driver)}")


def open_page(driver: WebDriver, url: str, *, complete: bool = False) -> None:
    """Load ``url`` and wait for its first paint (and its whole timeline, if asked)."""
    driver.get(url)
    wait_ready(driver)
    if complete:
        wait_complete(driver)


def page_error(driver: WebDriver) -> str:
    """The text of the page's ``error`` elements, for a failure's message."""
    texts = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=error]'),"
        " e => e.textContent.trim());")
    return "; ".join(texts) if texts else "(no error element)"


def marked(driver: WebDriver, testid: str, *attributes: str) -> list[dict[str, Any]]:
    """Every element of ``data-testid=testid``, as its ``data-*`` attributes (the
    dataset, keys camelCased) plus ``text``; ``attributes`` keep only those keys."""
    found: list[dict[str, Any]] = driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-testid=\"' + arguments[0]"
        " + '\"]'), e => Object.assign({text: e.textContent}, e.dataset));", testid)
    if attributes:
        return [{k: e.get(k) for k in attributes} for e in found]
    return found


def _performance_log(driver: WebDriver) -> list[dict[str, Any]]:
    """The performance log's entries since it was last read (and forget them)."""
    get_log: Callable[[str], list[dict[str, Any]]] = driver.get_log  # untyped in selenium
    return get_log("performance")


def clear_requests(driver: WebDriver) -> None:
    """Forget the requests logged so far."""
    _performance_log(driver)


def requests_made(driver: WebDriver) -> list[str]:
    """The URLs the browser requested since the last :func:`clear_requests`."""
    import json

    urls = []
    for entry in _performance_log(driver):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def set_offline(driver: WebDriver, offline: bool) -> None:
    """Cut (or restore) the browser's network, through the DevTools protocol."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1,
    })


# --- the commands ----------------------------------------------------------------------------


def dsh_session(*args: str, timeout: float = 120) -> str:
    """Run ``dsh-session ARGS`` and return its output; a failure shows its stderr."""
    proc = subprocess.run([*DSH_SESSION, *args], capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, (
        f"dsh-session {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout


def write_demo(store: Path) -> Path:
    """The demo's sessions (``demo`` and its fork ``demo-fork``) in a JSONL store."""
    dsh_session("demo", "--store", str(store))
    return store


_URL = re.compile(r"https?://[^\s\"'<>]+")


class ViewProcess:
    """``dsh-session view ... --no-open --port 0`` on the loopback, as a subprocess: its
    URL is the first one it prints; :meth:`stop` ends it."""

    def __init__(self, *args: str) -> None:
        argv = [*DSH_SESSION, "view", *args, "--no-open", "--host", "127.0.0.1",
                "--port", "0"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env)
        self.output: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(lines,), daemon=True)
        self._reader.start()
        self.url = self._await_url(lines, " ".join(args))

    def _read(self, lines: queue.Queue[str | None]) -> None:
        # Read to the end, so that the server never blocks on a full pipe.
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            lines.put(line)
        lines.put(None)

    def _await_url(self, lines: queue.Queue[str | None], what: str) -> str:
        while True:
            try:
                line = lines.get(timeout=SERVER_TIMEOUT)
            except queue.Empty:
                self.stop()
                pytest.fail(f"dsh-session view {what} printed no URL in {SERVER_TIMEOUT} s:"
                            f"\n{''.join(self.output)}", pytrace=False)
            if line is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=10)
                self.stop()
                pytest.fail(f"dsh-session view {what} exited {self.proc.returncode} before"
                            f" printing its URL:\n{''.join(self.output)}", pytrace=False)
            if found := _URL.search(line):
                return found.group(0)

    def page(self, path: str) -> str:
        """The URL of ``path`` on this server."""
        from urllib.parse import urljoin

        return urljoin(self.url, path)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def viewer_installed() -> None:
    """The viewer's distribution is installed (``python3 dev.py test`` installs it)."""
    if importlib.util.find_spec("dsh_session_view") is None:
        pytest.skip("dsh-session-view is not installed (python3 dev.py test installs it)")


@pytest.fixture(scope="session")
def browser(viewer_installed: None) -> Iterator[WebDriver]:
    """A headless Chromium for the whole run (skipped without chromium and chromedriver,
    failed instead under CI), with a fresh profile removed afterwards."""
    profile = Path(tempfile.mkdtemp(prefix="dsh-session-chromium-"))
    try:
        driver = start_browser(profile)
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def driver(browser: WebDriver) -> Iterator[WebDriver]:
    """The run's browser, online again and on a blank page after the test."""
    yield browser
    set_offline(browser, False)
    browser.get("about:blank")


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory, viewer_installed: None) -> Path:
    """A JSONL store holding the demo's ``demo`` and ``demo-fork``, one per module."""
    return write_demo(tmp_path_factory.mktemp("demo") / "sessions")


@pytest.fixture(scope="module")
def demo_server(demo_store: Path) -> Iterator[ViewProcess]:
    """``dsh-session view --store DEMO``, one per module."""
    server = ViewProcess("--store", str(demo_store))
    yield server
    server.stop()


@pytest.fixture
def serve(viewer_installed: None) -> Iterator[Callable[..., ViewProcess]]:
    """Starts ``dsh-session view ARGS`` servers of the test's own, stopped after it."""
    servers: list[ViewProcess] = []

    def start(*args: str) -> ViewProcess:
        servers.append(ViewProcess(*args))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
