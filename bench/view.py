"""Benchmark of the viewer (``dsh-session view``, ``export --html``; issue 16) on the
standard 100k-event session of bench/run.py, in headless Chromium (Debian's ``chromium``
and ``chromium-driver``, driven by Selenium as tests/view does).

The session is written to a fresh JSONL store and served by ``dsh-session view`` as a
subprocess. Timed, from the browser's navigation to the page's own markers:

- **first paint, cold**: the session page of a session the server has never read,
  until ``body[data-ready="1"]``;
- **first paint, warm**: the same page again (the server keeps what it read);
- **full render**: ``?all=1``, every turn page loaded and drawn, until
  ``body[data-complete="1"]``;
- **export**: ``dsh-session export --html`` of the session (the command's wall time and the
  file's size), and that file opened from disk offline until its first paint.

Target: the first paint, cold, under 1 s::

    python bench/view.py            # a table with the targets
    python bench/view.py --json     # one JSON object

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsh_session_core import open_store
from run import Target, cli, fill, workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "view"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

SESSION = "standard"


def _write(root: str) -> None:
    with open_store(root) as store:
        session = store.create(SESSION)
        fill(session, workload())
        store.flush(session)
        store.release(session)


def run() -> dict[str, float]:
    from browser_support import (
        ViewProcess,
        set_offline,
        start_browser,
        wait_complete,
        wait_ready,
    )

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "store")
        _write(root)
        exe = os.path.join(os.path.dirname(sys.executable), "dsh-session")
        out = os.path.join(tmp, "standard.html")
        t0 = time.perf_counter()
        subprocess.run([exe, "export", "--html", SESSION, "--store", root, "-o", out],
                       check=True)
        results["export_s"] = time.perf_counter() - t0
        results["export_bytes"] = os.path.getsize(out)
        results["log_bytes"] = sum(p.stat().st_size for p in Path(root).glob("*/*.jsonl"))
        server = ViewProcess("--store", root)
        driver = start_browser(Path(tmp) / "profile")
        try:
            for name, path in (("first_paint_cold_ms", f"s/{SESSION}"),
                               ("first_paint_warm_ms", f"s/{SESSION}")):
                t0 = time.perf_counter()
                driver.get(server.page(path))
                wait_ready(driver, timeout=60)
                results[name] = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            driver.get(server.page(f"s/{SESSION}?all=1"))
            wait_complete(driver, timeout=600)
            results["full_render_ms"] = (time.perf_counter() - t0) * 1000
            results["turns_rendered"] = driver.execute_script(
                "return document.querySelectorAll('[data-testid=turn]').length;")
            set_offline(driver, True)
            t0 = time.perf_counter()
            driver.get(Path(out).as_uri())
            wait_ready(driver, timeout=60)
            results["export_first_paint_ms"] = (time.perf_counter() - t0) * 1000
        finally:
            driver.quit()
            server.stop()
    return results


TARGETS: dict[str, Target] = {
    "first_paint_cold_ms": ("<=", lambda r: r["first_paint_cold_ms"], 1000),
}


def main() -> None:
    cli(__doc__ or "", run, TARGETS)


if __name__ == "__main__":
    main()
