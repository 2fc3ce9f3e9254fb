"""Issue 15, point 4: full-text search gives the same hits on JSONL, SQLite and
PostgreSQL. One JSONL store (the demo's sessions and 1,000 generated ones, with words
in many cases and scripts, words that fold into others, JSON escapes and phrases) is
copied into the other two, and a table of queries, with every filter, runs on all
three; each answer is also checked against an oracle written here from the typed
events (``read_session``), not from the search's own code.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import (
    SearchHit,
    Session,
    TextBlock,
    ToolCallBlock,
    open_store,
)
from dsh_session_core._logformat.logfile import dump_log
from dsh_session_core._persistence.copy import copy_sessions
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core.testing import run_cli

SESSIONS = 1000
#: Words the generated sessions speak: cases, scripts, folds (ß/ss, the Kelvin sign,
#: the fi ligature), joiners that split words (read_file, a-b, a.b), digits.
VOCABULARY = [
    "Paris", "paris", "PARIS", "weather", "Weather", "sunny", "rain", "Straße", "STRASSE",
    "strasse", "\u212aelvin", "kelvin", "\ufb01le", "file", "read_file", "naïve", "naive",
    "東京", "日本語", "Ελλάδα", "ελλάδα", "error", "Error:", "timeout", "rate-limit",
    "rate", "limit", "v2.1", "42", "x86_64", "ls", "grep", "λ", "🙂", "O'Brien",
    '"quoted"', "back\\slash", "tab\there", "line\nbreak", "\x1b[31mred\x1b[0m",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(n))


def _generated(rng: random.Random, sid: str, t0: int) -> Session:
    clock = iter(range(t0, t0 + 10_000, 7))
    session = Session(sid, clock=lambda: next(clock))
    if rng.random() < 0.3:
        session.inject(_text(rng, 4))  # context outside any turn
    for turn_no in range(rng.randint(1, 3)):
        with session.turn() as turn:
            turn.user(_text(rng, rng.randint(1, 8)))
            with turn.step() as step:
                call = ToolCallBlock(id=f"c{turn_no}", name=rng.choice(["read_file", "bash"]),
                                     arguments='{{"q": "{}"}}'.format(_text(rng, 2).replace(
                                         "\\", "").replace('"', "").replace("\n", " ")
                                     .replace("\t", " ").replace("\x1b", "")))
                step.assistant([TextBlock(text=_text(rng, 3)), call])
                step.tool_result(step.tool_call(call), _text(rng, rng.randint(0, 12)),
                                 is_error=rng.random() < 0.2)
            with turn.step() as step:
                step.assistant(_text(rng, rng.randint(1, 10)))
    return session


@pytest.fixture(scope="module")
def jsonl_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's sessions and the generated ones, in a JSONL store."""
    root = tmp_path_factory.mktemp("search") / "store"
    code, _, err = run_cli("demo", "--store", str(root))
    assert code == 0, err
    rng = random.Random(15)
    bucket = root / "_no-cwd"
    bucket.mkdir(exist_ok=True)
    for i in range(SESSIONS):
        s = _generated(rng, f"gen-{i:04d}", 1_700_000_000_000 + i * 60_000)
        (bucket / f"gen-{i:04d}.jsonl").write_bytes(dump_log(s.header, list(s.events)))
    return str(root)


def _copy(source: str, destination: str) -> str:
    src, dst = backend_for(source), backend_for(destination)
    try:
        report = copy_sessions(src, dst)
        assert len(report.sessions) == SESSIONS + 2, report
    finally:
        src.close()
        dst.close()
    return destination


@pytest.fixture(scope="module")
def stores(jsonl_store: str, tmp_path_factory: pytest.TempPathFactory,
           postgresql_databases: Any) -> Iterator[dict[str, str]]:
    sqlite = f"sqlite:///{tmp_path_factory.mktemp('search-sqlite')}/store.db"
    with postgresql_databases.database("search") as pg:
        yield {"jsonl": jsonl_store, "sqlite": _copy(jsonl_store, sqlite),
               "postgresql": _copy(jsonl_store, pg)}


# --- the oracle: the spec, from typed events -----------------------------------------------

_SEARCHED = {"user/message": "user", "prompt/blocked": "user", "context/message": "user",
             "steering/message": "user", "assistant/message": "assistant",
             "tool/call": "assistant", "tool/result": "tool"}


def _words(text: str) -> list[str]:
    return [w.casefold() for w in re.findall(r"[^\W_]+", text)]


def _event_text(event: dict[str, Any]) -> str:
    data = event["data"]
    if event["type"] == "tool/call":
        return f"{data['name']}\n{data['arguments']}"
    return "\n".join(b["text"] for b in data["content"]
                     if b.get("type") in ("text", "reasoning"))


@pytest.fixture(scope="module")
def corpus(jsonl_store: str) -> list[tuple[Any, str, int, str, set[str]]]:
    """Every searched event of the store: (time, session, seq, type, its words), the
    logs read with the standard library's json, line by line."""
    found = []
    for path in sorted(Path(jsonl_store).glob("*/*.jsonl")):
        header, *lines = path.read_text(encoding="utf-8").splitlines()
        sid = json.loads(header)["id"]
        for line in lines:
            event = json.loads(line)
            if event["type"] in _SEARCHED:
                found.append((event["time"], sid, event["seq"], event["type"],
                              set(_words(_event_text(event)))))
    return found


def _oracle(corpus: list[tuple[Any, str, int, str, set[str]]], word: str, **filters: Any
            ) -> list[tuple[str, int]]:
    """(session, seq) of every event holding ``word`` whole, newest first."""
    found = [(t, sid, seq) for t, sid, seq, kind, words in corpus
             if word in words
             and ("types" not in filters or kind in filters["types"])
             and ("roles" not in filters or _SEARCHED[kind] in filters["roles"])]
    found.sort(key=lambda f: (-f[0], f[1], -f[2]))
    return [(sid, seq) for _, sid, seq in found]


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("paris", {}), ("PARIS weather", {}), ("strasse", {}), ("straße", {}),
    ("kelvin", {}), ("file", {}), ("ﬁle", {}), ("read_file", {}), ('"read file"', {}),
    ("naïve", {}), ("naive", {}), ("東京", {}), ("ελλάδα", {}), ("error", {}),
    ("rate-limit", {}), ('"rate limit" sunny', {}), ("wea*", {}), ("x86*", {}),
    ("red", {}), ("31m", {}), ("brien", {}), ("slash", {}), ("quoted", {}),
    ("paris", {"types": ["tool/result"]}), ("paris", {"roles": ["user"]}),
    ("paris", {"roles": ["assistant", "tool"]}), ("sunny", {"sessions": ["gen-0007", "demo"]}),
    ("rain", {"since": 1_700_000_000_000 + 500 * 60_000}),
    ("rain", {"until": 1_700_000_000_000 + 20 * 60_000}),
    ("sunny", {"sort": "relevance"}), ("weather", {"limit": 7, "offset": 5}),
    ("nowhere", {}), ("demo", {}), ("todo", {}), ("plan", {}),
]


@pytest.mark.parametrize(("query", "options"), QUERIES, ids=[q for q, _ in QUERIES])
def test_every_backend_gives_the_same_hits(stores: dict[str, str], query: str,
                                           options: dict[str, Any]) -> None:
    answers = {}
    for name, url in stores.items():
        with open_store(url) as store:
            answers[name] = [h.to_dict() for h in store.search(query, **options)]
    assert answers["sqlite"] == answers["jsonl"]
    assert answers["postgresql"] == answers["jsonl"]


WORDS = ["paris", "strasse", "kelvin", "file", "naïve", "東京", "error", "limit", "31mred",
         "brien", "grep", "42", "λ"]


@pytest.mark.parametrize("word", WORDS)
def test_a_word_finds_exactly_the_events_that_hold_it(
        stores: dict[str, str], corpus: list[Any], word: str) -> None:
    expected = _oracle(corpus, word)
    assert expected, "the corpus holds every word of the table"
    for url in stores.values():
        with open_store(url) as store:
            assert [(h.session_id, h.seq) for h in store.search(word)] == expected


def test_filters_agree_with_the_oracle(stores: dict[str, str], corpus: list[Any]) -> None:
    expected = _oracle(corpus, "paris", roles=["tool"])
    with open_store(stores["sqlite"]) as store:
        hits = store.search("paris", roles=["tool"])
    assert [(h.session_id, h.seq) for h in hits] == expected
    assert {h.type for h in hits} == {"tool/result"}


def test_a_hit_says_where_it_is(stores: dict[str, str]) -> None:
    with open_store(stores["jsonl"]) as store:
        (hit,) = store.search("paris", sessions=["gen-0000"], limit=1)
        session = store.open("gen-0000")
        event = session.events[hit.seq]
        turns = [e for e in session.events[: hit.seq + 1] if e.type == "turn/start"]
        store.release(session)
    assert isinstance(hit, SearchHit)
    assert hit.type == event.type
    assert hit.time == event.time
    assert hit.turn == turns[-1].data.turn
    for start, end in hit.highlights:
        assert hit.snippet[start:end].casefold() == "paris"


def test_the_cli_prints_the_same_on_every_backend(stores: dict[str, str]) -> None:
    outputs = set()
    for url in stores.values():
        code, out, err = run_cli("search", "weather", "sunny", "--store", url, "--json",
                                 "--limit", "0")
        assert code == 0, err
        outputs.add(out)
    assert len(outputs) == 1


def test_the_parallel_scan_finds_what_the_serial_one_finds(jsonl_store: str) -> None:
    # In a fresh process with no other thread, as the command line runs it: workers are
    # forked there (and only there).
    script = f"""
from dsh_session_core._persistence.backends.jsonl.scan import _may_fork, log_files, scan_files
from dsh_session_core._search import SearchQuery

root = {jsonl_store!r}
assert _may_fork()
paths = log_files(root)
for text in ("paris", "sun*", '"rate limit"', "nowhere"):
    query = SearchQuery.parse(text)
    key = lambda h: (h.session_id, h.seq)
    serial = sorted(scan_files(root, paths, query, workers=0), key=key)
    parallel = sorted(scan_files(root, paths, query, workers=2), key=key)
    assert serial == parallel, text
    print(text, len(serial))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    counts = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert int(counts["paris"]) > 0
    assert counts["nowhere"] == "0"


@pytest.mark.parametrize("sid", ["", "\udcff", "a\x00b", "%", "gen-0001' OR '1'='1"])
def test_a_session_filter_no_session_can_have_finds_nothing(stores: dict[str, str],
                                                            sid: str) -> None:
    for url in stores.values():
        with open_store(url) as store:
            assert store.search("paris", sessions=[sid]) == []
