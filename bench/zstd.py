"""Benchmark of the compact JSONL store (``jsonl+zstd:``, issue 17, point 4) against the
plain JSONL store, on the standard workload (see bench/run.py), both measured in the same
run: the workload written with one flush per turn (2,084 zstd frames of 48 events), then

- the size of the compact log over the plain log's (target: at most 0.25);
- the cold load of the session (open: read, decode, scan, repair check, build; then
  derive) from each store, the rounds alternating, the compact one's median over the
  plain one's (target: at most 1.3);
- for the record: the durable flushes' rate of each store, and the size of a compact log
  written by ``copy`` (frames of 2,000 events) over the plain log's::

    python bench/zstd.py            # a table with the targets
    python bench/zstd.py --json     # one JSON object, its targets under "targets"

A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsh_session_core import create_plugin_manager
from dsh_session_core._persistence.copy import copy_sessions
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.store.durable import DurableStore
from persistence import durable_fill
from run import Target, cli, median_ms, workload

#: Alternating rounds of the cold loads (each round loads from both stores once).
ROUNDS = 7


def _log_size(root: Path, suffix: str) -> int:
    [log] = root.glob(f"*/bench{suffix}")
    return log.stat().st_size


def _load(url: str) -> None:
    store = DurableStore(backend_for(url), create_plugin_manager(autoload=False))
    store.open("bench").derive_messages()
    store.close()


def run() -> dict[str, float]:
    appends = workload()
    n = len(appends)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-zstd-") as tmp:
        plain, compact = f"{tmp}/plain", f"jsonl+zstd:///{tmp}/compact"
        _, plain_flushing, _ = durable_fill(plain, appends)
        _, compact_flushing, _ = durable_fill(compact, appends)
        results["plain_bytes"] = _log_size(Path(tmp, "plain"), ".jsonl")
        results["compact_bytes"] = _log_size(Path(tmp, "compact"), ".jsonl.zst")
        results["size_ratio"] = results["compact_bytes"] / results["plain_bytes"]
        results["plain_durable_eps"] = n / plain_flushing
        results["compact_durable_eps"] = n / compact_flushing
        loads: dict[str, list[float]] = {"plain": [], "compact": []}
        for _ in range(ROUNDS):  # alternating: both see the same machine
            loads["plain"].append(median_ms(lambda: _load(plain), 1))
            loads["compact"].append(median_ms(lambda: _load(compact), 1))
        results["plain_load_ms"] = statistics.median(loads["plain"])
        results["compact_load_ms"] = statistics.median(loads["compact"])
        results["load_ratio"] = results["compact_load_ms"] / results["plain_load_ms"]
        # A compact store filled by `dsh-session copy`: bigger frames, smaller log.
        copied = backend_for(f"jsonl+zstd:///{tmp}/copied")
        source = backend_for(plain)
        copy_sessions(source, copied, verify=False)
        copied.close()
        source.close()
        results["copied_size_ratio"] = (_log_size(Path(tmp, "copied"), ".jsonl.zst")
                                        / results["plain_bytes"])
    return results


TARGETS: dict[str, Target] = {
    "size_ratio": ("<=", lambda r: r["size_ratio"], 0.25),
    "load_ratio": ("<=", lambda r: r["load_ratio"], 1.3),
}


def main() -> None:
    if "--json" not in sys.argv[1:]:
        cli(__doc__ or "", run, TARGETS)
        return
    results = run()
    targets = {name: {"value": get(results), "limit": limit, "op": op}
               for name, (op, get, limit) in TARGETS.items()}
    sys.stdout.buffer.write(msgspec.json.encode({**results, "targets": targets}) + b"\n")


if __name__ == "__main__":
    main()
