"""``dsh-session export --html``: one self-contained file, no network, the document
embedded as JSON that no log content can break out of, and decodable back to the pages
the server serves."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from server_support import running
from store_support import write_turns

from dsh_session_core import open_store
from dsh_session_core._cli.support import EXIT_USAGE, registry
from dsh_session_core.inspect import Source, SourceSpec, load_source
from dsh_session_demo import run_demo
from dsh_session_view import SessionDocument, embed_json, export_html, make_server

ROOT = Path(__file__).resolve().parents[2]
_DATA = re.compile(rb'<script type="application/json" id="data">(.*?)</script>', re.S)


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from dsh_session_core._cli.main import main; "
                           "main()", *argv], capture_output=True, text=True, check=False)


def _document(store: str, session_id: str) -> SessionDocument:
    reg = registry()
    source = load_source(SourceSpec(session_id, store=store, as_id=True), reg)
    return SessionDocument(source, reg)


def _served(store: str, session_id: str, starts: list[int]) -> list[dict[str, Any]]:
    """The server's pages of the session from each of ``starts`` (the whole document's,
    ``full=1``), and its whole document (``all=1``) last, over HTTP."""
    server = make_server(registry(), url=store, host="127.0.0.1", port=0)
    with running(server):
        urls = [f"/api/session/{session_id}?turns={s}-{s + 49}&full=1" for s in starts]
        answers = []
        for path in [*urls, f"/api/session/{session_id}?all=1"]:
            with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=30) as r:
                answers.append(json.loads(r.read()))
    return answers


def _pages(embedded: Any) -> list[dict[str, Any]]:
    """The pages of an exported file's data, each with the head, as the server sends
    them."""
    return [{**embedded["head"], **page} for page in embedded["pages"]]


def _embedded(page: bytes) -> Any:
    [data] = _DATA.findall(page)
    for raw in (b"<", b">", b"&", "\u2028".encode(), "\u2029".encode()):
        assert raw not in data
    return json.loads(data)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    store = tmp_path_factory.mktemp("demo") / "store"
    run_demo(str(store))
    return str(store)


def test_the_demo_exports_as_one_file_with_no_request(demo_store: str, tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    proc = _cli("export", "--html", "demo", "--store", demo_store, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"wrote {out} (")
    page = out.read_bytes()
    assert page.startswith(b"<!doctype html>")
    assert b"unsafe-inline" not in page  # the policy: test_the_policy_names_its_own_code
    # Nothing is fetched: no external file, no URL to load.
    assert not re.search(rb"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(rb"<(?:link|iframe|img|object|embed)\b", page, re.I)
    assert re.findall(rb"<script\b[^>]*>", page) == [
        b'<script type="application/json" id="data">', b"<script>"]
    assert page.count(b"</script") == 2
    assert page.count(b"<style>") == 1
    # The embedded pages are the server's, decoded back.
    pages = _pages(_embedded(page))
    *served, whole = _served(demo_store, "demo", [p["range"][0] for p in pages])
    assert pages == served
    assert [p["range"][0] for p in pages] == [0]  # the demo: fewer than 50 turns
    assert pages[0]["timeline"] == whole["timeline"]


class _Inline(HTMLParser):
    """The texts of a page's elements as the HTML parser reads them, by tag (the data of
    a ``<script>`` without ``type`` under ``"script"``), and its CSP meta tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.texts: dict[str, list[str]] = {}
        self.csp: list[str] = []
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "meta" and (named.get("http-equiv") or "").lower() == \
                "content-security-policy":
            self.csp.append(named.get("content") or "")
        if tag in ("script", "style"):
            self._open = tag if "type" not in named else f"{tag}[type={named['type']}]"
            self.texts.setdefault(self._open, []).append("")

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.texts[self._open][-1] += data


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_runs_the_files_own_code_by_hash_and_no_other(demo_store: str,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    proc = _cli("export", "--html", "demo", "--store", demo_store, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    parsed = _Inline()
    parsed.feed(out.read_bytes().decode("utf-8"))
    parsed.close()
    [csp] = parsed.csp
    directives = {name: sources for name, *sources in
                  (d.split() for d in csp.split(";") if d.strip())}
    [script] = parsed.texts["script"]
    [style] = parsed.texts["style"]
    # The page's own files, inlined: each module's code (less its import lines and its
    # export keywords) in the one script, in the order they import each other.
    static = ROOT / "packages" / "dsh-session-view" / "src" / "dsh_session_view" / "static"
    at = []
    for module in sorted(static.glob("*.js")):
        # Its code between import lines (the bundle writes them as bindings), in order.
        text = module.read_text()
        runs = re.split(r"^import .*\n", re.sub(r"^export ", "", text, flags=re.M), flags=re.M)
        start = 0
        for run in filter(None, runs):
            assert run in script[start:], module.name
            start = script.index(run, start) + len(run)
        at.append((start, module.name))
    order = [name for _, name in sorted(at)]
    assert order.index("dom.js") < order.index("list.js") < order.index("app.js")
    assert order.index("api.js") < order.index("session.js") < order.index("app.js")
    assert order[-1] == "app.js"
    assert style.strip() == (static / "app.css").read_text().strip()
    assert directives == {
        "default-src": ["'none'"],
        "script-src": [_sha256(script)],
        "style-src": [_sha256(style)],
        "img-src": ["data:"],
    }
    # The data element is no script: the policy need not (and does not) name it.
    assert list(parsed.texts) == ["style", "script[type=application/json]", "script"]


def test_export_goes_to_stdout_without_o(demo_store: str) -> None:
    proc = _cli("export", "--html", "demo-fork", "--store", demo_store)
    assert proc.returncode == 0, proc.stderr
    [doc] = _pages(_embedded(proc.stdout.encode()))
    assert doc["header"]["parentSession"] == "demo"
    assert doc["complete"] is True


def test_export_refuses_mixed_options(demo_store: str) -> None:
    both = _cli("export", "--html", "--json", "demo", "--store", demo_store)
    assert both.returncode == EXIT_USAGE
    assert "pick one" in both.stderr
    alone = _cli("export", "-o", "x.html", "demo", "--store", demo_store)
    assert alone.returncode == EXIT_USAGE
    assert "goes with --html" in alone.stderr
    missing = _cli("export", "--html", "nope", "--store", demo_store)
    assert missing.returncode == 1
    assert missing.stderr.startswith('dsh-session: no session "nope" in ')


HOSTILE = [
    "</script><script>window.pwned=1</script>",
    "<img src=x onerror=window.pwned=1>",
    "[link](javascript:window.pwned=1) & <!-- --> \u2028\u2029",
    "</SCRIPT ><ScRiPt>window.pwned=1</sCrIpT>",
]


def test_log_content_cannot_leave_the_data_element(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    with open_store(store) as s:
        chat = s.create("</script>", cwd="/<script>/")
        with chat.turn() as turn:
            for text in HOSTILE:
                turn.user(text)
        s.flush(chat)
    out = tmp_path / "hostile.html"
    proc = _cli("export", "--html", "--id", "</script>", "--store", store, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_bytes()
    assert page.lower().count(b"</script") == 2  # the data's own end, and the code's
    assert b"pwned" not in page.replace(_DATA.search(page).group(1), b"")  # type: ignore[union-attr]
    assert b"<title>dsh-session &lt;/script&gt;</title>" in page
    [doc] = _pages(_embedded(page))
    texts = [i["text"] for b in doc["timeline"] for i in b["items"] if i["kind"] == "user"]
    assert texts == HOSTILE
    assert doc["header"]["cwd"] == "/<script>/"


def test_embed_json_escapes_what_could_end_the_element() -> None:
    value = {"a": "</script>&<!--\u2028\u2029", "b": ["\ud800"]}
    data = embed_json(value)
    assert data == (b'{"a":"\\u003c/script\\u003e\\u0026\\u003c!--\\u2028\\u2029",'
                    b'"b":["\\ud800"]}')
    assert json.loads(data) == value


def test_a_long_session_is_embedded_as_the_servers_pages(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    write_turns(store, "long", 120)
    embedded = _embedded(export_html(_document(store, "long")))
    pages = _pages(embedded)
    # Pages of 50 turn blocks, as the page asks for them, tiling the 120 turns.
    assert [p["range"] for p in pages] == [[0, 49], [50, 99], [100, 119]]
    assert [b["turn"] for p in pages for b in p["timeline"]] == list(range(1, 121))
    assert [p["turnCount"] for p in pages] == [120] * 3
    # Each message in the page of its turn, once: a question and an answer a turn.
    assert [len(p["messages"]) for p in pages] == [100, 100, 40]
    assert [m["content"][0]["text"] for m in pages[2]["messages"][:2]] == [
        "question 101", "answer 101"]
    # The charts on the first and the last page only, as served.
    assert ["charts" in p for p in pages] == [True, False, True]
    *served, whole = _served(store, "long", [0, 50, 100])
    assert pages == served
    assert [m for p in pages for m in p["messages"]] == whole["messages"]
    # The head is embedded once, not in every page.
    assert all(not set(page) & set(embedded["head"]) for page in embedded["pages"])


def test_a_session_without_turns_is_one_empty_page(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    write_turns(store, "s<1>", 1)
    header = load_source(SourceSpec("s<1>", store=store, as_id=True), registry()).header
    page = export_html(SessionDocument(Source(header, [], "its header alone"), registry()))
    assert b"<title>dsh-session s&lt;1&gt;</title>" in page
    [doc] = _pages(_embedded(page))
    assert (doc["session"], doc["range"], doc["timeline"], doc["turnCount"]) == (
        "s<1>", [0, -1], [], 0)


# Without the viewer installed, `view` and `export --html` name it: in a child process
# whose environment lacks its files (tests/cli/test_cli_plugin_commands.py).
