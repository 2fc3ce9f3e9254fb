"""Benchmark of encrypted stores (issue 28, point 4): the standard workload (see
bench/run.py) appended and loaded on a store opened with keys (each record sealed with
AES-256-GCM) against the same store without them, each kind (JSONL, SQLite) measured in
the same run, the rounds alternating:

- append: the whole run (every append, one durable flush per turn), encrypted over plain
  (target: at most 1.5);
- load: the cold load of the session (open: read, open each record, decode, scan, repair
  check, build; then derive), encrypted over plain (target: at most 1.5);
- for the record: ChaCha20-Poly1305 in AES-GCM's place, on JSONL::

    python bench/encryption.py            # a table with the targets
    python bench/encryption.py --json     # one JSON object

A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsh_session_core import Keyring, create_plugin_manager
from dsh_session_core._persistence.opening import backend_for, sealed_backend
from dsh_session_core._persistence.store.durable import DurableStore
from persistence import durable_fill
from run import Target, cli, median_ms, workload

#: Alternating rounds (each round writes, then loads, on both stores once).
ROUNDS = 5
KEYS = Keyring({"bench": os.urandom(32)})
CHACHA = Keyring({"bench": os.urandom(32)}, algorithm="chacha20-poly1305")


def _load(url: str, keys: Keyring | None) -> None:
    backend = backend_for(url)
    if keys is not None:
        backend = sealed_backend(backend, keys)
    store = DurableStore(backend, create_plugin_manager(autoload=False))
    store.open("bench").derive_messages()
    store.close()


def _url(kind: str, tmp: str, name: str) -> str:
    return f"sqlite:///{tmp}/{name}.db" if kind == "sqlite" else f"{tmp}/{name}"


def run() -> dict[str, float]:
    appends = workload()
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-encryption-") as tmp:
        sides = {"plain": None, "sealed": KEYS, "chacha": CHACHA}
        for kind in ("jsonl", "sqlite"):
            names = ("plain", "sealed") if kind == "sqlite" else tuple(sides)
            writes: dict[str, list[float]] = {name: [] for name in names}
            loads: dict[str, list[float]] = {name: [] for name in names}
            for i in range(ROUNDS):
                for name in names:
                    url = _url(kind, tmp, f"{kind}-{name}-{i}")
                    elapsed, _, _ = durable_fill(url, appends, keys=sides[name])
                    writes[name].append(elapsed * 1000)
                    loads[name].append(median_ms(
                        functools.partial(_load, url, sides[name]), 1))
            for name in names:
                results[f"{kind}_{name}_append_ms"] = statistics.median(writes[name])
                results[f"{kind}_{name}_load_ms"] = statistics.median(loads[name])
            for what in ("append", "load"):
                results[f"{kind}_{what}_ratio"] = (results[f"{kind}_sealed_{what}_ms"]
                                                   / results[f"{kind}_plain_{what}_ms"])
        results["jsonl_chacha_load_ratio"] = (results["jsonl_chacha_load_ms"]
                                              / results["jsonl_plain_load_ms"])
    return results


def _ratio(name: str) -> Target:
    return ("<=", lambda r: r[name], 1.5)


TARGETS: dict[str, Target] = {
    name: _ratio(name)
    for name in ("jsonl_append_ratio", "jsonl_load_ratio", "sqlite_append_ratio",
                 "sqlite_load_ratio")
}


if __name__ == "__main__":
    cli(__doc__ or "", run, TARGETS)
