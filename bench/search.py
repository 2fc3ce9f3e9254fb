"""Benchmark of full-text search (``store.search``, ``dsh-session search``; issue 15,
point 4).

- **JSONL at scale**: the 100,000-session store of bench/ls.py (cached under the temp
  folder). A word no log holds (every file skipped by its bytes), and a word every
  session holds (100,000 hits, each line decoded and checked), searched in-process,
  against ``grep -c -w`` of the same word over the same files as a subprocess (what
  reading every log costs). Both scans are timed as a user waits for them.
- **Every backend**: 1,000 generated sessions (3 turns each, words drawn from a small
  vocabulary) in a JSONL store, copied into SQLite and, with ``--url`` or
  ``$DSH_SESSION_TEST_POSTGRESQL``, into PostgreSQL; a common word and a rare one
  searched on each (SQLite and PostgreSQL answer from their index); the hit lists are
  compared, and must be equal.

Targets: the JSONL scan of the 100k store at most 2x ``grep -c`` for the rare word and
6x for the common one (which decodes 100,000 lines where grep decodes none)::

    python bench/search.py            # a table with the targets
    python bench/search.py --json     # one JSON object

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import functools
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable

from copies import every_backend
from dsh_session_core import Session, open_store
from dsh_session_core._logformat.logfile import dump_log
from ls import _best_ms
from ls import store as ls_store
from run import Target, cli

SMALL = 1_000
WORDS = ["paris", "weather", "sunny", "rain", "error", "timeout", "file", "read", "write",
         "grep", "list", "deploy", "build", "test", "commit", "branch", "merge", "review",
         "docs", "api", "token", "limit", "retry", "cache", "index"]


def _grep(root: str, word: str) -> Callable[[], None]:
    files = [os.path.join(d.path, f.name) for d in os.scandir(root) if d.is_dir()
             for f in os.scandir(d.path) if f.name.endswith(".jsonl")]
    lists = os.path.join(root, ".files")
    with open(lists, "w") as f:
        f.write("\0".join(files))

    def call() -> None:
        subprocess.run(["sh", "-c", f"xargs -0 grep -c -i -w {word} < {lists}"],
                       check=False, stdout=subprocess.DEVNULL)

    return call


def _small_store(root: str) -> None:
    rng = random.Random(4)
    bucket = os.path.join(root, "_no-cwd")
    os.makedirs(bucket, exist_ok=True)
    for i in range(SMALL):
        ticks = iter(range(1_767_225_600_000 + i * 60_000, 1_767_225_600_000 + i * 60_000
                           + 100_000, 10))
        s = Session(f"s{i:04d}", clock=functools.partial(next, ticks))
        for _ in range(3):
            with s.turn() as turn:
                turn.user(" ".join(rng.choices(WORDS, k=12)))
                with turn.step() as step:
                    call = step.tool_call(f"c{rng.random()}", "bash",
                                          f'{{"command": "{rng.choice(WORDS)}"}}')
                    step.tool_result(call, " ".join(rng.choices(WORDS, k=40)))
                with turn.step() as step:
                    step.assistant(" ".join(rng.choices(WORDS, k=30)))
        with open(os.path.join(bucket, f"s{i:04d}.jsonl"), "wb") as f:
            f.write(dump_log(s.header, list(s.events)))


def _pg_url() -> str | None:
    args = sys.argv[1:]
    if "--url" in args:
        return args[args.index("--url") + 1]
    return os.environ.get("DSH_SESSION_TEST_POSTGRESQL")


def run() -> dict[str, float]:
    results: dict[str, float] = {}
    root = ls_store()
    with open_store(root) as big:
        results["jsonl_100k_rare_ms"] = _best_ms(lambda: big.search("zebra"), 3)
        results["jsonl_100k_common_ms"] = _best_ms(lambda: big.search("yo", limit=20), 3)
        results["jsonl_100k_common_hits"] = len(big.search("yo"))
    results["grep_c_rare_ms"] = _best_ms(_grep(root, "zebra"), 3)
    results["grep_c_common_ms"] = _best_ms(_grep(root, "yo"), 3)

    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "jsonl")
        _small_store(small)
        with every_backend(small, tmp, _pg_url(), "dsh_bench_search") as urls:
            answers = {}
            for name, url in urls.items():
                with open_store(url) as s:
                    s.search("paris")  # a first search catches an index up; not timed
                    results[f"{name}_1k_common_ms"] = _best_ms(
                        functools.partial(s.search, "paris"), 5)
                    results[f"{name}_1k_rare_ms"] = _best_ms(
                        functools.partial(s.search, '"deploy build test"'), 5)
                    answers[name] = [h.to_dict() for h in s.search("paris")]
            results["1k_common_hits"] = len(answers["jsonl"])
            results["backends_agree"] = float(all(a == answers["jsonl"]
                                                  for a in answers.values()))
    return results


TARGETS: dict[str, Target] = {
    "jsonl_100k_rare_ms / grep_c_rare_ms": (
        "<=", lambda r: r["jsonl_100k_rare_ms"] / r["grep_c_rare_ms"], 2),
    "jsonl_100k_common_ms / grep_c_common_ms": (
        "<=", lambda r: r["jsonl_100k_common_ms"] / r["grep_c_common_ms"], 6),
    "backends_agree": ("<=", lambda r: 1 - r["backends_agree"], 0),
}


def main() -> None:
    if "--url" in sys.argv:
        i = sys.argv.index("--url")
        del sys.argv[i:i + 2]
    cli(__doc__ or "", run, TARGETS)


if __name__ == "__main__":
    main()
