"""``dsh-session view``: the real server, on a free loopback port in a thread, called with
``urllib.request`` (no mocks): the list, search and session APIs on the demo store, paging
by turn blocks, refusals (the id rule, unknown sessions and paths, other methods), a
hostile log served as data only, nothing written, the address rule, and live follow of
an event another process appends."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import running
from store_support import write_turns

from dsh_session_core import open_store
from dsh_session_core._cli.parser import build_parser
from dsh_session_core._cli.support import EXIT_USAGE, Failure, registry
from dsh_session_demo import run_demo
from dsh_session_view import ViewServer, check_address, make_server
from dsh_session_view._server import CSP
from lifecycle_support import store_url

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "packages" / "dsh-session-view" / "src" / "dsh_session_view" / "static"
#: A bound on a wait for what should come at once: only a hang reaches it.
PATIENCE = 60


@contextlib.contextmanager
def serving(*, url: str | None = None, file: str | None = None) -> Iterator[ViewServer]:
    server = make_server(registry(), url=url, file=file, host="127.0.0.1", port=0)
    with running(server) as served:
        yield served


def call(server: ViewServer, path: str, method: str = "GET") -> tuple[int, Any, bytes]:
    request = urllib.request.Request(server.url.rstrip("/") + path, method=method,
                                     data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def get_json(server: ViewServer, path: str, status: int = 200) -> Any:
    got, headers, body = call(server, path)
    assert got == status, body
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"] == CSP
    return json.loads(body)


def tree_hash(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    store = tmp_path_factory.mktemp("demo") / "store"
    run_demo(str(store))
    return str(store)


@pytest.fixture(scope="module")
def demo_server(demo_store: str) -> Iterator[ViewServer]:
    with serving(url=demo_store) as server:
        yield server


def _cli_json(*argv: str) -> Any:
    out = subprocess.run([sys.executable, "-c", "from dsh_session_core._cli.main import main; "
                          "main()", *argv], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _cli_error(*argv: str) -> str:
    out = subprocess.run([sys.executable, "-c", "from dsh_session_core._cli.main import main; "
                          "main()", *argv], capture_output=True, text=True, check=False)
    assert out.returncode != 0
    first = out.stderr.splitlines()[0]
    assert first.startswith("dsh-session: ")
    return first.removeprefix("dsh-session: ")


# --- the list and search ------------------------------------------------------------------


def test_the_list_is_ls_json_with_sizes_and_lineage(demo_server: ViewServer,
                                                    demo_store: str) -> None:
    rows = get_json(demo_server, "/api/sessions")
    # The viewer lists the oldest first; ls the newest (--reverse: the oldest).
    expected = _cli_json("ls", "--store", demo_store, "--json", "--reverse")
    assert [{k: v for k, v in r.items() if k != "sizeBytes"} for r in rows] == expected
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == {"demo", "demo-fork"}
    assert by_id["demo-fork"]["parentSession"] == "demo"
    for row in rows:
        [log] = Path(demo_store).rglob(f"{row['id']}.jsonl")
        assert row["sizeBytes"] == log.stat().st_size
    forks = get_json(demo_server, "/api/sessions?parent=demo")
    assert [r["id"] for r in forks] == ["demo-fork"]
    assert get_json(demo_server, "/api/sessions?cwd=/elsewhere") == []
    assert len(get_json(demo_server, "/api/sessions?cwd=/demo/workspace&limit=1")) == 1
    assert len(get_json(demo_server, "/api/sessions?since=2020-01-01&until=2100-01-01")) == 2


def test_a_bad_filter_is_the_cli_message(demo_server: ViewServer, demo_store: str) -> None:
    error = get_json(demo_server, "/api/sessions?since=yesterday", 400)
    assert error["error"] == _cli_error("ls", "--store", demo_store, "--since", "yesterday")
    assert "duration" in error["hint"]


def test_search_gives_the_cli_hits(demo_server: ViewServer, demo_store: str) -> None:
    hits = get_json(demo_server, "/api/search?q=config&limit=5")
    assert hits == _cli_json("search", "config", "--store", demo_store, "--json",
                             "--limit", "5")
    assert hits
    assert all(h["highlights"] for h in hits)
    only = get_json(demo_server, "/api/search?q=config&type=tool/result&session=demo-fork")
    assert only
    assert {(h["type"], h["session"]) for h in only} == {("tool/result", "demo-fork")}
    assert "error" in get_json(demo_server, "/api/search?q=", 400)


# --- one session --------------------------------------------------------------------------


def test_the_session_document_holds_every_turn_of_the_demo(demo_server: ViewServer,
                                                           demo_store: str) -> None:
    doc = get_json(demo_server, "/api/session/demo?all=1")
    shown = _cli_json("show", "demo", "--store", demo_store, "--json")
    assert doc["header"] == shown["header"]
    assert (doc["events"], doc["turns"], doc["turnCount"]) == (270, 6, 6)
    blocks = doc["timeline"]
    assert [(b["turn"], b["endKind"], b["interrupted"]) for b in blocks] == [
        (1, "completed", False), (2, "completed", False), (3, "rejected", False),
        (4, "completed", False), (5, "interrupted", True), (6, "completed", False)]
    # The same blocks and items as `show --json`, texts in full.
    assert [[(i["seq"], i["kind"]) for i in b["items"]] for b in blocks] == [
        [(i["seq"], i["kind"]) for i in b["items"]] for b in shown["timeline"]]
    items = [i for b in blocks for i in b["items"]]
    assert any(len(i["text"]) > 300 for i in items)  # show --json cuts at 300
    [blocked] = [i for i in items if i["type"] == "prompt/blocked"]
    assert blocked["kind"] == "blocked"
    assert "deleting tests" in blocked["text"]
    assert any(i["kind"] == "tool call" and i["result"]["isError"] for i in items)
    assert any(i["kind"] == "hook" and i.get("decision") is not None for i in items)
    [summary] = [i for i in items if i["type"] == "compact/summary"]
    shadowed = summary["shadowedSeqs"]
    assert len(shadowed) == 9
    # The messages: what `derive` prints, each with its sources; the compaction's one
    # names what it replaced.
    messages = doc["messages"]
    derived = _cli_json("derive", "demo", "--store", demo_store)
    assert [{"role": m["role"], "content": m["content"]} for m in messages] == derived
    assert all(m["seq"] in m["sourceEventSeqs"] for m in messages)
    assert len(messages) == doc["surface"]["messages"] == 22
    [replacing] = [m for m in messages if "replaces" in m]
    assert replacing["replacedSeqs"] == shadowed
    assert replacing["replaces"] == {"start": min(shadowed), "end": max(shadowed)}
    assert not {m["seq"] for m in messages} & set(shadowed)
    # The charts: one bar per block, the tokens of its assistant messages.
    charts = doc["charts"]
    assert charts["turns"] == [1, 2, 3, 4, 5, 6]
    for block, tokens in zip(blocks, charts["tokens"], strict=True):
        usage = block["usage"]
        assert tokens == [usage.get("inputTokens", 0), usage.get("outputTokens", 0),
                          usage.get("cacheReadTokens", 0)]
    assert [sum(c) for c in charts["counts"]] == [
        b["endSeq"] - b["startSeq"] + 1 for b in blocks]
    assert doc["closers"] == []
    assert doc["complete"] is True


def test_the_raw_events_are_the_log_lines(demo_server: ViewServer, demo_store: str) -> None:
    [log] = Path(demo_store).rglob("demo.jsonl")
    lines = log.read_bytes().splitlines()[1:]
    answer = get_json(demo_server, "/api/session/demo/events?after=2&limit=3")
    assert answer == {"events": [json.loads(line) for line in lines[3:6]], "more": True}
    assert get_json(demo_server, "/api/session/demo/events?after=269")["events"] == []


def test_the_document_is_paged_by_turn_blocks(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    write_turns(store, "long", 120)
    with serving(url=store) as server:
        first = get_json(server, "/api/session/long")  # cold: from the log's first blocks
        assert first["partial"] is True
        assert first["surface"] == {"pending": True}
        assert (first["turnCount"], first["events"], first["range"]) == (120, 720, [0, 49])
        assert [b["turn"] for b in first["timeline"]] == list(range(1, 51))
        assert len(first["charts"]["tokens"]) == 120
        whole = get_json(server, "/api/session/long?turns=0-49&full=1")
        assert "partial" not in whole
        assert whole["timeline"] == first["timeline"]
        assert whole["messages"] == first["messages"]
        assert len(whole["messages"]) == 100
        second = get_json(server, "/api/session/long?turns=50-99")
        assert [b["turn"] for b in second["timeline"]] == list(range(51, 101))
        assert [m["seq"] for m in second["messages"]] == [
            s for b in second["timeline"] for s in (b["startSeq"] + 1, b["startSeq"] + 3)]
        assert "charts" not in second
        last = get_json(server, "/api/session/long?turns=100-500")
        assert last["range"] == [100, 119]
        assert len(last["timeline"]) == 20
        assert get_json(server, "/api/session/long?turns=0-49")["timeline"] == first["timeline"]
        bad = get_json(server, "/api/session/long?turns=9-2", 400)
        assert "turns takes a range" in bad["error"]
        # "A-" is a page from A as long as the server pages: the page asks so, and does
        # not keep the size itself.
        opened = get_json(server, "/api/session/long?turns=50-")
        assert opened["range"] == [50, 99]
        assert opened["timeline"] == second["timeline"]
        assert get_json(server, "/api/session/long?turns=100-")["range"] == [100, 119]
        assert "turns takes a range" in get_json(server, "/api/session/long?turns=-", 400)["error"]


# --- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "problem"), [
    ("/api/session/", "it is empty"),
    ("/api/session/%ED%A0%80", "lone surrogate"),
    ("/api/session/%ED%A0%80/follow", "lone surrogate"),
    ("/api/session//events", "it is empty"),
])
def test_an_id_the_store_cannot_hold_is_refused_by_its_rule(
        demo_server: ViewServer, path: str, problem: str) -> None:
    error = get_json(demo_server, path, 400)
    assert problem in error["error"]
    assert "non-empty strings with a UTF-8 form" in error["hint"]


def test_an_id_that_is_not_utf8_is_refused(demo_server: ViewServer) -> None:
    assert "not UTF-8" in get_json(demo_server, "/api/session/%FF", 400)["error"]


def test_unknown_sessions_and_pages_are_404(demo_server: ViewServer, demo_store: str) -> None:
    error = get_json(demo_server, "/api/session/nope", 404)
    assert error["error"] == _cli_error("show", "nope", "--store", demo_store)
    assert get_json(demo_server, "/api/session/nope/follow", 404)["error"] == error["error"]
    assert "no such page" in get_json(demo_server, "/api/nothing", 404)["error"]
    assert get_json(demo_server, "/api/session/demo/other", 404)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_every_method_but_get_is_405(demo_server: ViewServer, method: str) -> None:
    status, headers, body = call(demo_server, "/api/session/demo", method)
    assert status == 405
    assert headers["Allow"] == "GET"
    assert "read-only" in json.loads(body)["error"]


def test_the_pages_are_the_static_shell(demo_server: ViewServer) -> None:
    for path in ("/", "/s/demo", "/s/%3Cscript%3E"):
        status, headers, body = call(demo_server, path)
        assert status == 200
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert headers["Content-Security-Policy"] == CSP
        assert body == (STATIC / "index.html").read_bytes()
    modules = sorted(p.name for p in STATIC.glob("*.js"))
    assert {"app.js", "dom.js", "api.js", "list.js", "session.js"} <= set(modules)
    for name in modules:  # the entry and every module it imports
        status, headers, body = call(demo_server, "/static/" + name)
        assert (status, headers["Content-Type"]) == (200, "text/javascript; charset=utf-8")
        assert headers["Content-Security-Policy"] == CSP
        assert body == (STATIC / name).read_bytes()
    assert call(demo_server, "/static/app.css")[1]["Content-Type"] == "text/css; charset=utf-8"
    for path in ("/static/../../etc/passwd", "/static/index.html", "/static/", "/static/x.js",
                 "/static/%61pp.js", "/static/app.js/", "/static//app.js"):
        assert call(demo_server, path)[0] == 404, path


def test_the_page_code_never_writes_markup() -> None:
    for module in STATIC.glob("*.js"):
        code = module.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                     "eval(", "new Function", "setTimeout(\"", "javascript:"):
            assert sink not in code, (module.name, sink)
    assert "<script" not in (STATIC / "index.html").read_text().replace(
        '<script type="module" src="/static/app.js"></script>', "")


# --- hostile logs -------------------------------------------------------------------------

HOSTILE = [
    "<script>window.pwned=1</script>",
    "<img src=x onerror=window.pwned=1>",
    "[click](javascript:window.pwned=1) </script><script>window.pwned=1</script>",
    "\u2028\u2029 & \"quotes\" 'single' --> <!--",
]


def _hostile_store(store: str) -> None:
    with open_store(store) as s:
        chat = s.create("<b>id</b>", cwd="/x/<script>window.pwned=1</script>")
        with chat.turn() as turn:
            for text in HOSTILE:
                turn.user(text)
            with turn.step() as step:
                step.assistant(HOSTILE[0])
        s.flush(chat)


def test_a_hostile_log_comes_back_as_data_only(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    _hostile_store(store)
    with serving(url=store) as server:
        [row] = get_json(server, "/api/sessions")
        assert row["id"] == "<b>id</b>"
        assert row["cwd"] == "/x/<script>window.pwned=1</script>"
        doc = get_json(server, "/api/session/%3Cb%3Eid%3C%2Fb%3E?all=1")
        texts = [i["text"] for b in doc["timeline"] for i in b["items"] if i["kind"] == "user"]
        assert texts == HOSTILE
        assert [m["content"][0]["text"] for m in doc["messages"]][:4] == HOSTILE
        hits = get_json(server, "/api/search?q=pwned")
        assert hits
        assert all(h["session"] == "<b>id</b>" for h in hits)


def test_broken_utf8_and_lone_surrogates_are_data_or_the_cli_error(tmp_path: Path) -> None:
    log = tmp_path / "odd.jsonl"
    header = b'{"type":"session","version":0,"id":"odd","createdAt":1}\n'
    start = (b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":'
             b'{"kind":"message","source":{"kind":"user"}}}}\n')
    surrogate = (b'{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text",'
                 b'"text":"lone \\ud800 <script>x</script>"}],"source":{"kind":"user"}},'
                 b'"surfaceOp":{"op":"append"}}\n')
    log.write_bytes(header + start + surrogate)
    with serving(file=str(log)) as server:
        status, headers, body = call(server, "/api/session/odd?all=1")
        assert status == 200
        assert headers["Content-Type"] == "application/json"
        assert b"\\ud800" in body  # escaped as JavaScript writes it, never raw
        [item] = [i for b in json.loads(body)["timeline"] for i in b["items"]
                  if i["kind"] == "user"]
        assert item["text"].startswith("lone \ud800 <script>")
        assert json.loads(body)["timeline"][0]["interrupted"] is True  # no turn/end
        assert [r["id"] for r in get_json(server, "/api/sessions")] == ["odd"]
        assert get_json(server, "/api/session/other", 404)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(header + start + surrogate.replace(b"lone \\ud800", b"bad \xff\xfe"))
    with serving(file=str(broken)) as server:
        status, headers, body = call(server, "/api/session/odd?all=1")
        assert headers["Content-Type"] == "application/json"
        answer = json.loads(body)
        if status == 200:  # the line is skipped, and said so
            assert answer["warnings"]
        else:
            assert answer["error"] == _cli_error("show", str(broken))


# --- nothing is written ---------------------------------------------------------------------


def test_the_server_writes_nothing(tmp_path: Path) -> None:
    # (A JSONL listing refreshes the store's header cache when a log changed since the
    # last listing, as `ls` does: the demo's listing left it up to date.)
    store = tmp_path / "store"
    run_demo(str(store))
    before = tree_hash(store)
    with serving(url=str(store)) as server:
        for path in ("/", "/s/demo", "/api/sessions", "/api/sessions?since=7d",
                     "/api/search?q=config", "/api/session/demo", "/api/session/demo?all=1",
                     "/api/session/demo-fork?turns=0-2", "/api/session/demo/events",
                     "/api/session/nope", "/api/session/"):
            call(server, path)
        for method in ("POST", "DELETE"):
            call(server, "/api/session/demo", method)
        with _stream(server, "/api/session/demo/follow") as lines:
            assert _next_event(lines, time.monotonic() + PATIENCE)[0] == "hello"
    assert tree_hash(store) == before


# --- the address --------------------------------------------------------------------------


def _view_args(*argv: str) -> Any:
    return build_parser(["view", *argv]).parse_args(["view", *argv])


def test_the_viewer_listens_on_loopback_unless_told_otherwise(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert check_address(_view_args()) == ("127.0.0.1", 0)
    assert check_address(_view_args("--host", "::1", "--port", "8765")) == ("::1", 8765)
    assert check_address(_view_args("--host", "localhost")) == ("localhost", 0)
    with pytest.raises(Failure) as refused:
        check_address(_view_args("--host", "0.0.0.0"))
    assert refused.value.status == EXIT_USAGE
    assert "reachable from the network" in str(refused.value)
    assert "--allow-remote" in (refused.value.hint or "")
    assert capsys.readouterr().err == ""
    assert check_address(_view_args("--host", "0.0.0.0", "--allow-remote",
                                    "--allowed-host", "box.lan")) == ("0.0.0.0", 0)
    assert "no authentication" in capsys.readouterr().err
    assert check_address(_view_args("--host", "10.0.0.7", "--allow-remote")) == ("10.0.0.7", 0)
    assert "no authentication" in capsys.readouterr().err
    with pytest.raises(Failure) as refused:  # every address: which names does it answer?
        check_address(_view_args("--host", "0.0.0.0", "--allow-remote"))
    assert "--allowed-host" in (refused.value.hint or "")
    with pytest.raises(Failure):
        check_address(_view_args("--port", "70000"))


def test_the_command_refuses_a_network_host_at_once() -> None:
    out = subprocess.run([sys.executable, "-c", "from dsh_session_core._cli.main import main; "
                          "main()", "view", "--host", "0.0.0.0", "--no-open"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == EXIT_USAGE
    assert out.stderr.startswith("dsh-session: --host 0.0.0.0 would make the viewer reachable")


def test_the_command_refuses_a_session_it_cannot_show(demo_store: str) -> None:
    for source in ("nope", ""):
        out = subprocess.run([sys.executable, "-c", "from dsh_session_core._cli.main import "
                              "main; main()", "view", source, "--store", demo_store,
                              "--no-open"], capture_output=True, text=True, timeout=60,
                             check=False)
        assert out.returncode == (1 if source else EXIT_USAGE)
        assert out.stderr.splitlines()[0] == "dsh-session: " + _cli_error(
            "show", source, "--store", demo_store)


def test_the_command_serves_until_ctrl_c_which_exits_130(demo_store: str) -> None:
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-c", "from dsh_session_core._cli.main import main; main()",
         "view", "demo", "--store", demo_store, "--no-open"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"viewing {demo_store} at http://127.0.0.1:")
        url = line.split(" at ", 1)[1].strip()
        assert url.endswith("/s/demo")
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err  # interrupted, as every command is (docs/cli.md)
    assert err == "dsh-session: interrupted: the viewer is stopped\n"


# --- live follow ----------------------------------------------------------------------------


@contextlib.contextmanager
def _stream(server: ViewServer, path: str) -> Iterator[Any]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=PATIENCE)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        yield response
    finally:
        conn.close()


def _next_event(lines: Any, deadline: float) -> tuple[str, Any]:
    """The next event of a stream (heartbeats skipped), before ``deadline``."""
    name = None
    while time.monotonic() < deadline:
        line = lines.readline()
        assert line, "the stream ended"
        text = line.decode().rstrip("\n")
        if text.startswith("event: "):
            name = text[7:]
        elif text.startswith("data: ") and name is not None:
            return name, json.loads(text[6:])
    raise AssertionError("no event in time")


_APPEND = """
import sys
from dsh_session_core import open_store
with open_store(sys.argv[1]) as store:
    chat = store.open("long")
    with chat.turn() as turn:
        turn.user("appended by another process")
    store.flush(chat)
"""


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of each backend (PostgreSQL: a new database of the test server)."""
    return store_url(request.param, request, tmp_path)


def test_follow_delivers_an_event_another_process_appends(any_store: str) -> None:
    # On every backend: each follows its own way (a file's size, an indexed query,
    # PostgreSQL's NOTIFY), behind the one Backend.follow_lines.
    store = any_store
    write_turns(store, "long", 2)
    with serving(url=store) as server, _stream(server, "/api/session/long/follow?after=11") as s:
        name, hello = _next_event(s, time.monotonic() + PATIENCE)
        assert (name, hello["lastSeq"]) == ("hello", 11)
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", _APPEND, store], check=True, timeout=60)
        written = time.monotonic()
        name, news = _next_event(s, written + PATIENCE)
        assert name == "append"
        # Within two seconds on an idle machine; on a loaded one, held to a control of
        # the same run: the appending process (a Python start, a store opened, a flush)
        # slows down with the machine as the server's follow does.
        waited, control = time.monotonic() - written, written - start
        assert waited < 2 + 2 * control, (waited, control)
        assert news["lastSeq"] >= 12
        # The page then fetches the last blocks again: the new turn is there.
        doc = get_json(server, "/api/session/long?turns=1-9")
        assert doc["events"] == 15
        assert doc["timeline"][-1]["turn"] == 3


def test_follow_catches_up_on_events_past_after(demo_server: ViewServer) -> None:
    with _stream(demo_server, "/api/session/demo/follow?after=200") as s:
        deadline = time.monotonic() + PATIENCE
        assert _next_event(s, deadline)[0] == "hello"
        name, news = _next_event(s, deadline)
        assert (name, news["lastSeq"], news["count"]) == ("append", 269, 69)

