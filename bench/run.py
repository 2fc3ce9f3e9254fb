"""Benchmark of the core on the standard workload (../shared/reference/performance.md).

The workload: 2,084 turns x 48 events = 100,032 events (turn/start, user/message,
step/start, 40 assistant/chunk text deltas, assistant/message with a text block, a
tool-call block and usage, tool/call, tool/result, step/end, turn/end), about 16 MB of
JSONL, deriving to 6,252 messages. :func:`builder_fill` writes the same events through
the builders (``session.turn()``, ``turn.step()``...); ``builder_vs_append`` is its rate
over the raw appends', the two run in alternating rounds (the median of each).

Each figure is the median of several runs, and each limit is measured in the same run on
the same data, so ratios hold from machine to machine. Every figure here is in memory:
each is printed with its fsync policy (none: no figure of this benchmark writes to disk;
bench/persistence.py measures the durable writes, an fsync per flush)::

    python bench/run.py            # a table with the targets
    python bench/run.py --json     # one JSON object

This is a benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

from dsh_session_core import (
    PluginManager,
    Session,
    SessionStore,
    create_plugin_manager,
    encode_events,
    hookimpl,
)
from dsh_session_core._logformat.logfile import dump_log, open_session, parse_log
from dsh_session_core.vocabulary import TextBlock, TextDeltaChunk, TokenUsage, ToolCallBlock

TURNS = 2084
CHUNKS = 40
BUILDER_ROUNDS = 7

Append = tuple[str, dict[str, Any], dict[str, Any]]


def turn_appends(turn: int, base: int) -> list[Append]:
    """The 48 appends of one standard turn, starting at seq ``base``."""
    call_id = f"call-{turn}"
    text = f"turn {turn}: the quick brown fox jumps over the lazy dog"
    out: list[Append] = [
        ("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}},
         {}),
        ("user/message", {"content": [{"type": "text", "text": f"question {turn}"}],
                          "source": {"kind": "user"}}, {"surface_op": "append"}),
        ("step/start", {"turn": turn, "step": 1}, {}),
    ]
    for i in range(CHUNKS):
        out.append(("assistant/chunk", {"turn": turn, "step": 1, "chunk": {
            "type": "text-delta", "index": 0, "text": f"tok{i} "}}, {}))
    chunk_seqs = list(range(base + 3, base + 3 + CHUNKS))
    out.append(("assistant/message", {
        "turn": turn, "step": 1,
        "content": [{"type": "text", "text": text},
                    {"type": "tool-call", "id": call_id, "name": "bash",
                     "arguments": '{"command":"ls"}'}],
        "usage": {"inputTokens": 1200, "outputTokens": 80, "cacheReadTokens": 1000},
    }, {"surface_op": "append", "source_event_seqs": chunk_seqs}))
    call_seq = base + 3 + CHUNKS + 1
    out.append(("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "bash",
                              "arguments": '{"command":"ls"}'}, {}))
    out.append(("tool/result", {"turn": turn, "step": 1, "callId": call_id,
                                "content": [{"type": "text", "text": "a.txt\nb.txt\n"}],
                                "isError": False},
                {"surface_op": "append", "source_event_seqs": [call_seq]}))
    out.append(("step/end", {"turn": turn, "step": 1}, {}))
    out.append(("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, {}))
    return out


def workload(turns: int = TURNS) -> list[Append]:
    appends: list[Append] = []
    for t in range(1, turns + 1):
        appends.extend(turn_appends(t, len(appends)))
    return appends


def _clock() -> int:
    return 1_783_000_000_000


def fill(session: Session, appends: list[Append]) -> None:
    append = session.append
    for etype, data, kw in appends:
        append(etype, data, **kw)


ARGUMENTS = '{"command":"ls"}'
RESULT = "a.txt\nb.txt\n"


def builder_inputs(turns: int = TURNS) -> list[tuple[str, str, str]]:
    """What a harness has in hand per standard turn: the prompt, the reply, the call id."""
    return [(f"question {t}", f"turn {t}: the quick brown fox jumps over the lazy dog",
             f"call-{t}") for t in range(1, turns + 1)]


def builder_fill(session: Session, inputs: list[tuple[str, str, str]]) -> None:
    """The standard workload written with the builders (``session.turn()``...): the same
    events, byte for byte, as :func:`fill` of :func:`workload`."""
    chunks = [TextDeltaChunk(index=0, text=f"tok{i} ") for i in range(CHUNKS)]
    for question, text, call_id in inputs:
        with session.turn() as turn:
            turn.user(question)
            with turn.step() as step:
                for chunk in chunks:
                    step.chunk(chunk)
                call = ToolCallBlock(id=call_id, name="bash", arguments=ARGUMENTS)
                usage = TokenUsage(input_tokens=1200, output_tokens=80, cache_read_tokens=1000)
                step.assistant([TextBlock(text=text), call], usage=usage)
                step.tool_result(step.tool_call(call), RESULT)


def median_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    """The median of ``repeat`` timed calls. What a call returns is freed after its
    time is taken: tearing a result down (a loaded session's objects) is not part of
    making it."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        made = fn()
        times.append((time.perf_counter() - t0) * 1000)
        del made
    return statistics.median(times)


class _Listener:
    def __init__(self) -> None:
        self.count = 0

    @hookimpl
    def session_event(self, session: Session, event: object) -> None:
        self.count += 1


def store_with_listener() -> SessionStore:
    pm: PluginManager = create_plugin_manager(autoload=False)
    pm.register(_Listener())
    return SessionStore(pm, clock=_clock)


class _RawEnvelope(msgspec.Struct):
    type: str
    seq: int
    time: int
    data: msgspec.Raw
    sourceEventSeqs: list[int] | None = None  # wire name
    surfaceOp: Any = None


def rss_of_loaded_session(path: str) -> float:
    """RSS (MB) of a fresh process holding the loaded standard session."""
    code = (
        "import gc,sys\n"
        "from dsh_session_core import Session, core_registry\n"
        "from dsh_session_core._logformat.logfile import open_session, parse_log\n"
        f"data=open({path!r},'rb').read()\n"
        "log=parse_log(data, core_registry()); del data\n"
        "s=open_session(log, core_registry()); del log\n"
        "m=s.derive_messages(); gc.collect()\n"
        "rss=[l for l in open('/proc/self/status') if l.startswith('VmRSS')][0]\n"
        "print(int(rss.split()[1]) / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return float(out.stdout)


def run() -> dict[str, float]:
    appends = workload()
    n = len(appends)
    results: dict[str, float] = {}

    # Appends: a bare session, then a store session with one session_event listener.
    ms = median_ms(lambda: fill(Session("bench", clock=_clock), appends), repeat=3)
    results["append_bare_eps"] = n / (ms / 1000)

    def store_fill() -> None:
        store = store_with_listener()
        fill(store.create("bench"), appends)

    ms = median_ms(store_fill, repeat=3)
    results["append_store_eps"] = n / (ms / 1000)

    # The builders, against raw appends of the same events, in alternating rounds (a raw
    # fill, then a builder fill), the median of each: a slow spell of a busy machine
    # falls on both sides (append_bare_eps is measured as before).
    inputs = builder_inputs()
    raw_ms, builder_ms = [], []
    for _ in range(BUILDER_ROUNDS):
        raw_ms.append(median_ms(lambda: fill(Session("bench", clock=_clock), appends), 1))
        builder_ms.append(median_ms(
            lambda: builder_fill(Session("bench", clock=_clock), inputs), 1))
    results["append_builder_eps"] = n / (statistics.median(builder_ms) / 1000)
    results["builder_vs_append"] = statistics.median(raw_ms) / statistics.median(builder_ms)

    # Derivation: cold on a freshly built session, then after one more turn.
    sessions = []
    for _ in range(5):
        s = Session("bench", clock=_clock)
        fill(s, appends)
        sessions.append(s)
    cold = []
    for s in sessions:
        t0 = time.perf_counter()
        msgs = s.derive_messages()
        cold.append((time.perf_counter() - t0) * 1000)
    results["derive_cold_ms"] = statistics.median(cold)
    results["derived_messages"] = len(msgs)
    incremental = []
    for i, s in enumerate(sessions):
        fill(s, turn_appends(TURNS + 1 + i, s.seq))
        t0 = time.perf_counter()
        s.derive_messages()
        incremental.append((time.perf_counter() - t0) * 1000)
    results["derive_incremental_ms"] = statistics.median(incremental)

    # Serialization against the raw encode of the same payloads.
    session = Session("bench", clock=_clock)
    fill(session, appends)
    events = list(session.events)
    # Lines are encoded once, as events are appended: serializing only joins them.
    results["serialize_ms"] = median_ms(session.to_jsonl)
    results["reencode_ms"] = median_ms(lambda: encode_events(events))
    payloads = [a[1] for a in appends]
    limit_encoder = msgspec.json.Encoder()
    results["serialize_limit_ms"] = median_ms(lambda: limit_encoder.encode_lines(payloads))

    # Load: parse + validate + build + cold derive, against a raw line decode.
    data = dump_log(session.header, events)
    results["log_mb"] = len(data) / 1e6
    registry = session.registry

    def load() -> Session:
        session = open_session(parse_log(data, registry), registry)
        session.derive_messages()
        return session

    results["load_ms"] = median_ms(load)
    raw = msgspec.json.Decoder(_RawEnvelope)

    def load_limit() -> list[_RawEnvelope]:
        return [raw.decode(line) for line in data.split(b"\n")[1:-1]]

    results["load_limit_ms"] = median_ms(load_limit)

    path = "/tmp/dsh-session-bench.jsonl"
    with open(path, "wb") as f:
        f.write(data)
    results["rss_mb"] = rss_of_loaded_session(path)
    return results


TARGETS: dict[str, tuple[str, Callable[[dict[str, float]], float], float]] = {
    "append_bare_eps": (">=", lambda r: r["append_bare_eps"], 509_000),
    "append_store_eps": (">=", lambda r: r["append_store_eps"], 400_000),
    "builder_vs_append": (">=", lambda r: r["builder_vs_append"], 0.8),
    "derive_cold_ms": ("<=", lambda r: r["derive_cold_ms"], 12),
    "derive_incremental_ms": ("<=", lambda r: r["derive_incremental_ms"], 0.1),
    "load_ms / load_limit_ms": ("<=", lambda r: r["load_ms"] / r["load_limit_ms"], 3),
    "serialize_ms / serialize_limit_ms": (
        "<=", lambda r: r["serialize_ms"] / r["serialize_limit_ms"], 1.5),
    "rss_mb": ("<=", lambda r: r["rss_mb"], 150),
}


_IN_MEMORY = "none (in memory)"
_NO_WRITE = "none (no write)"

#: The fsync policy behind each figure (and target) of this benchmark: none writes to
#: disk. The appends are a bare Session's, and a SessionStore's without a backend.
FSYNC: dict[str, str] = {
    "append_bare_eps": _IN_MEMORY,
    "append_store_eps": _IN_MEMORY,
    "append_builder_eps": _IN_MEMORY,
    "builder_vs_append": f"{_IN_MEMORY}, both sides",
    "derive_cold_ms": _NO_WRITE,
    "derived_messages": _NO_WRITE,
    "derive_incremental_ms": _NO_WRITE,
    "serialize_ms": _NO_WRITE,
    "reencode_ms": _NO_WRITE,
    "serialize_limit_ms": _NO_WRITE,
    "log_mb": _NO_WRITE,
    "load_ms": _NO_WRITE,
    "load_limit_ms": _NO_WRITE,
    "load_ms / load_limit_ms": _NO_WRITE,
    "serialize_ms / serialize_limit_ms": _NO_WRITE,
    "rss_mb": _NO_WRITE,
}


Target = tuple[str, Callable[[dict[str, float]], float], float]


def cli(doc: str, run_benchmark: Callable[[], dict[str, float]],
        targets: dict[str, Target], fsync: dict[str, str] | None = None) -> None:
    """Parse ``--json``, run, and print the figures and each target's verdict; with
    ``fsync`` (figure or target name -> policy), the fsync policy beside each, and the
    target beside a figure that has one."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results = run_benchmark()
    if args.json:
        out: dict[str, object] = dict(results)
        if fsync is not None:
            out["fsync"] = {name: fsync.get(name, "?") for name in [*results, *targets]}
        sys.stdout.buffer.write(msgspec.json.encode(out) + b"\n")
        return
    width = max(map(len, [*results, *targets]))

    def policy(name: str) -> str:
        return "" if fsync is None else f"  fsync: {fsync.get(name, '?')}"

    def verdict(name: str) -> tuple[float, str]:
        op, get, target = targets[name]
        value = get(results)
        ok = value >= target if op == ">=" else value <= target
        return value, f"  target {op} {target:<10,} {'ok' if ok else 'MISS':4}"

    blank = " " * len(verdict(next(iter(targets)))[1]) if targets else ""
    for name, value in results.items():
        beside = verdict(name)[1] if name in targets else blank
        print(f"{name:{width}} {value:14,.3f}{beside if fsync is not None else ''}"
              f"{policy(name)}")
    print()
    for name in targets:
        value, said = verdict(name)
        print(f"{name:{width}} {value:14,.3f}{said}{policy(name)}")


def main() -> None:
    cli(__doc__ or "", run, TARGETS, FSYNC)


if __name__ == "__main__":
    main()
