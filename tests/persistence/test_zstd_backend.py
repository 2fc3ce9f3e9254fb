"""The compact JSONL store (``jsonl+zstd:``, ``_persistence/backends/jsonl/zstd.py``; issue 17,
point 4): a log is the plain log's bytes as zstd frames, one per durable write, which
``zstd -d`` turns back into the reference's log; a torn last frame is cut as a torn line
is, a corrupt frame before a ``turn/end`` is refused; the reference logs come back out
of it byte for byte; the wrong kind of folder and a missing ``zstandard`` are refused
with what to do.

The backend contract, the copy tests, the crash (SIGKILL) and fault-injection tests and
the partial reads run on this store too (they are parametrized over the kinds of store).
"""

from __future__ import annotations

import io
import itertools
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from persist_support import meta

from conftest import upstream_dir
from dsh_session_core import (
    JsonlBackend,
    Session,
    SessionHeader,
    core_registry,
    create_plugin_manager,
    encode_events,
    open_store,
)
from dsh_session_core._logformat.frames import decode_frames
from dsh_session_core._logformat.logfile import scan_log
from dsh_session_core._persistence.backends.jsonl.buckets import COMPACT_MARK
from dsh_session_core._persistence.backends.jsonl.zstd import FrameCut, JsonlZstdBackend
from dsh_session_core._persistence.copy import copy_sessions
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.store.coordinator import PersistencePlugin
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.errors import (
    LogFormatError,
    StoreKindError,
)
from dsh_session_core.testing import run_cli

REG = core_registry()
USER = {"kind": "user"}


def _frames(data: bytes) -> list[bytes]:
    """A compact log's frames, each as written, found with zstandard's own reader."""
    frames = []
    at = 0
    while at < len(data):
        d = zstandard.ZstdDecompressor().decompressobj()
        d.decompress(data[at:])
        assert d.eof, f"an incomplete frame at byte {at}"
        end = len(data) - len(d.unused_data)
        frames.append(data[at:end])
        at = end
    return frames


def _zstd_d(data: bytes) -> bytes:
    """What ``zstd -d`` makes of a compact log: every frame, decoded, concatenated."""
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data),
                                                        read_across_frames=True)
    return reader.read()


def _turn(s: Session, turn: int, *, end: bool = True, words: int = 20) -> None:
    s.append("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": USER}})
    s.append("user/message", {"content": [{"type": "text", "text": f"q{turn} " * words}],
                              "source": USER}, surface_op="append")
    s.append("step/start", {"turn": turn, "step": 1})
    s.append("assistant/message", {"turn": turn, "step": 1,
                                   "content": [{"type": "text", "text": f"a{turn} é"}]},
             surface_op="append")
    if end:
        s.append("step/end", {"turn": turn, "step": 1})
        s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _store(url: str) -> DurableStore:
    ticks = itertools.count(1_700_000_000_000)
    return DurableStore(backend_for(url), create_plugin_manager(autoload=False),
                        clock=lambda: next(ticks))


def _write(url: str, sid: str, turns: int, *, open_last: bool = False) -> None:
    """``turns`` turns, one flush each (the last left open when ``open_last``)."""
    with _store(url) as store:
        s = store.create(sid, cwd="/w")
        for t in range(1, turns + 1):
            _turn(s, t, end=not (open_last and t == turns))
            store.flush(s)


def _log(root: Path, sid: str = "s") -> Path:
    [path] = root.glob(f"*/{sid}.jsonl.zst")
    return path


@pytest.fixture
def stores(tmp_path: Path) -> tuple[str, str]:
    """A plain and a compact store holding the same session, written the same way: five
    turns of one flush each."""
    plain, compact = str(tmp_path / "plain"), f"jsonl+zstd:///{tmp_path}/compact"
    for url in (plain, compact):
        _write(url, "s", 5)
    return plain, compact


# --- the format -----------------------------------------------------------------------


def test_a_compact_log_is_one_zstd_frame_per_write_of_the_plain_log(
    stores: tuple[str, str], tmp_path: Path
) -> None:
    [plain_log] = (tmp_path / "plain").glob("*/s.jsonl")
    plain = plain_log.read_bytes()
    data = _log(tmp_path / "compact").read_bytes()
    assert _zstd_d(data) == plain
    frames = _frames(data)
    assert len(frames) == 5  # one per flush; the first holds the header too
    decoded = [zstandard.ZstdDecompressor().decompress(f) for f in frames]  # each alone
    assert b"".join(decoded) == plain
    assert decoded[0].startswith(b'{"type":"session","version":0,"id":"s"')
    assert decoded[0].count(b"\n") == 1 + 6
    assert all(d.endswith(b'"reason":{"kind":"completed"}}}\n') for d in decoded)
    assert all(zstandard.get_frame_parameters(f).has_checksum for f in frames)
    assert (tmp_path / "compact" / COMPACT_MARK).is_dir()
    assert not list((tmp_path / "compact").glob("*/*.jsonl"))  # never named as a plain log


@pytest.mark.skipif(shutil.which("zstd") is None, reason="no zstd command installed")
def test_zstd_d_gives_the_plain_log(stores: tuple[str, str], tmp_path: Path) -> None:
    [plain_log] = (tmp_path / "plain").glob("*/s.jsonl")
    out = subprocess.run(["zstd", "-dc", str(_log(tmp_path / "compact"))],
                         capture_output=True, check=True)
    assert out.stdout == plain_log.read_bytes()


def test_every_read_gives_what_the_plain_store_gives(stores: tuple[str, str]) -> None:
    answers = []
    for url in stores:
        with open_store(url) as store:
            summaries = [(s.header, s.events, s.turns, s.last_activity, s.torn)
                         for s in store.backend.summaries()]
            answers.append((
                store.stored(), summaries, store.tail("s", 4), store.tail("s", 0),
                store.read("s", after=7, limit=5), store.read("s"),
                [h.to_dict() for h in store.search("q3")],
                [h.to_dict() for h in store.search("a2 é", sessions=["s"])],
                encode_events(store.open("s").events),
            ))
    assert answers[0] == answers[1]
    assert answers[1][6]  # the search found something


def test_a_follower_reads_whole_frames_only(tmp_path: Path) -> None:
    url = f"jsonl+zstd:///{tmp_path}/store"
    _write(url, "s", 3)
    log = _log(tmp_path / "store")
    data = log.read_bytes()
    last = _frames(data)[-1]
    base = data[: len(data) - len(last)]
    log.write_bytes(base)  # two turns; the third is written below, as a writer would
    reader = backend_for(url)
    tail = reader.tail_lines("s", 3)
    assert tail is not None
    assert tail.lines == _zstd_d(base).split(b"\n")[-4:-1]
    with log.open("ab") as f:
        f.write(last[:-3])  # a frame being written (or torn): no news
    assert list(reader.follow_lines("s", tail.position, timeout=0.2)) == []
    with log.open("ab") as f:
        f.write(last[-3:])
    news = next(reader.follow_lines("s", tail.position, timeout=60))
    assert news.lines == _zstd_d(last).split(b"\n")[:-1]
    assert news.note is None
    log.write_bytes(base)  # cut back (a repair): said, and followed from there
    cut = next(reader.follow_lines("s", news.position, timeout=60))
    assert cut.lines == []
    assert "cut back" in (cut.note or "")
    assert cut.position == tail.position
    reader.close()


# --- torn and corrupt frames -----------------------------------------------------------


def test_a_torn_last_frame_is_cut_at_every_byte(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write(f"jsonl+zstd:///{root}", "s", 4, open_last=True)
    log = _log(root)
    data = log.read_bytes()
    frames = _frames(data)
    start = len(data) - len(frames[-1])
    before = _zstd_d(data[:start])  # the first three turns, untouched by any cut
    kept = before.count(b"\n") - 1
    for cut in range(start, len(data)):
        log.write_bytes(data[:cut])
        stored = JsonlZstdBackend(root).load_stored("s", REG)
        assert stored is not None
        assert len(stored.events) == kept, cut
        assert stored.jsonl == before.split(b"\n", 1)[1], cut
        assert stored.torn == (None if cut == start else start), cut
        # Loading to write repairs it: the torn frame is cut, nothing else changes.
        loaded = PersistencePlugin(JsonlZstdBackend(root), REG)
        events = loaded.load("s").events
        assert len(events) == kept, cut
        loaded.close()
        assert log.read_bytes() == data[:start], cut
    # The whole last frame holds an open turn: loading it closes the turn, in a frame of
    # its own.
    log.write_bytes(data)
    loaded = PersistencePlugin(JsonlZstdBackend(root), REG)
    events = loaded.load("s").events
    loaded.close()
    assert [e.type for e in events[-2:]] == ["step/end", "turn/end"]
    after = log.read_bytes()
    assert after.startswith(data)
    assert len(_frames(after)) == len(frames) + 1
    assert _zstd_d(after) == _zstd_d(data) + encode_events(events[-2:])


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]


def test_a_corrupt_frame_before_a_turn_end_is_refused_and_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write(f"jsonl+zstd:///{root}", "s", 4)
    log = _log(root)
    data = log.read_bytes()
    frames = _frames(data)
    second = len(frames[0])
    corrupt = _flip(data, second + len(frames[1]) // 2)
    log.write_bytes(corrupt)
    with pytest.raises(LogFormatError, match="inside the committed region") as caught:
        JsonlZstdBackend(root).load_stored("s", REG)
    assert caught.value.path == str(log)
    assert caught.value.line == 8  # the first line of the second frame
    with _store(f"jsonl+zstd:///{root}") as store, pytest.raises(LogFormatError):
        store.open("s")
    assert log.read_bytes() == corrupt
    # The same damage in the last frame is a torn tail: cut, the rest loads.
    last = len(data) - len(frames[-1])
    log.write_bytes(_flip(data, last + len(frames[-1]) // 2))
    stored = JsonlZstdBackend(root).load_stored("s", REG)
    assert stored is not None
    assert stored.torn == last
    assert len(stored.events) == 18
    # And in the first, the header's, nothing can load.
    log.write_bytes(_flip(data, len(frames[0]) // 2))
    with pytest.raises(LogFormatError, match="first zstd frame"):
        JsonlZstdBackend(root).load_stored("s", REG)


def test_a_hole_inside_a_whole_frame_after_the_last_turn_end_is_cut_inside_it(
    tmp_path: Path
) -> None:
    # Only a log written by hand holds a line that does not parse inside a whole frame:
    # the frame's lines before it are kept, written again as a frame of their own.
    root = tmp_path / "store"
    backend = JsonlZstdBackend(root)
    header = meta("s", "/w")
    s = Session("s", header=header, clock=lambda: 5)
    _turn(s, 1)
    _turn(s, 2, end=False)
    events = list(s.events)
    lines = encode_events(events).split(b"\n")[:-1]
    backend.append_batch(header, events[:6], b"\n".join(lines[:6]) + b"\n", False)
    backend.append_batch(header, events[6:8],
                         b"\n".join([*lines[6:8], b"{not json", lines[8]]) + b"\n", True)
    backend.close()
    log = _log(root)
    first = len(_frames(log.read_bytes())[0])
    stored = JsonlZstdBackend(root).load_stored("s", REG)
    assert stored is not None
    assert len(stored.events) == 8
    assert stored.torn == FrameCut(first, b"\n".join(lines[6:8]) + b"\n", 6)
    loaded = PersistencePlugin(JsonlZstdBackend(root), REG)
    repaired = loaded.load("s").events
    loaded.close()
    assert [e.type for e in repaired[8:]] == ["turn/end"]
    data = log.read_bytes()
    assert len(_frames(data)) == 2  # the header's, then the kept lines with the closer
    assert _zstd_d(data) == _header_line(header) + encode_events(repaired)
    again = JsonlZstdBackend(root).load_stored("s", REG)
    assert again is not None
    assert (again.torn, len(again.events)) == (None, 9)


def _header_line(header: SessionHeader) -> bytes:
    from dsh_session_core._schema.codec import ENCODER

    return ENCODER.encode(header) + b"\n"


def test_a_torn_frame_is_counted_as_a_torn_tail(tmp_path: Path) -> None:
    url = f"jsonl+zstd:///{tmp_path}/store"
    _write(url, "s", 3)
    log = _log(tmp_path / "store")
    data = log.read_bytes()
    log.write_bytes(data[:-7])
    with open_store(url) as store:
        [summary] = store.backend.summaries()
        assert (summary.events, summary.turns, summary.torn) == (12, 2, True)
        assert [e.seq for e in store.tail("s", 2)] == [10, 11]
        assert store.read("s", after=10) == store.tail("s", 1)
        assert [h.id for h in store.stored()] == ["s"]


# --- the reference logs, copies and the command line ------------------------------------


def test_every_reference_log_comes_out_of_a_compact_store_byte_for_byte(
    tmp_path: Path
) -> None:
    compared = 0
    for i, path in enumerate(sorted(upstream_dir().rglob("*.jsonl"))):
        data = path.read_bytes()
        try:
            scan = scan_log(data, REG, path=str(path))
        except LogFormatError:
            continue  # a version-less header, or no line: no store's session
        if not scan.events:
            continue  # no event: not stored (a session is stored from its first event)
        url = f"jsonl+zstd:///{tmp_path}/store-{i}"
        backend = backend_for(url)
        lines = scan.jsonl.split(b"\n")[:-1]
        for start in range(0, len(lines), 5):  # a frame per 5 events
            batch = lines[start:start + 5]
            backend.append_batch(scan.header, scan.events[start:start + 5],
                                 b"\n".join(batch) + b"\n", start > 0)
        backend.close()
        expected = data[:scan.committed_bytes]  # a torn reference log: its valid prefix
        [log] = (tmp_path / f"store-{i}").glob("*/*.jsonl.zst")
        assert _zstd_d(log.read_bytes()) == expected, path
        code, out, err = run_cli("export", scan.header.id, "--store", url)
        assert code == 0, (path, err)  # err may warn of a session left open: not ours
        assert out == expected, path
        compared += 1
    assert compared >= 300  # 354 logs: the version-less and the empty ones are not stored


def test_a_plain_store_goes_compact_and_back_byte_for_byte(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    for sid, turns in (("a", 3), ("b/../c", 1), ("d", 7)):
        _write(str(plain), sid, turns, open_last=sid == "d")
    compact = JsonlZstdBackend(tmp_path / "compact")
    back = JsonlBackend(tmp_path / "back")
    assert copy_sessions(JsonlBackend(plain), compact, registry=REG, batch_size=4).ok
    assert copy_sessions(compact, back, registry=REG).ok
    logs = sorted(plain.rglob("*.jsonl"))
    assert len(logs) == 3
    for log in logs:
        rel = log.relative_to(plain)
        assert (tmp_path / "back" / rel).read_bytes() == log.read_bytes()
        packed = (tmp_path / "compact" / rel).with_suffix(".jsonl.zst").read_bytes()
        assert _zstd_d(packed) == log.read_bytes()


def test_the_command_line_copies_and_exports_a_compact_store(tmp_path: Path) -> None:
    plain, compact = str(tmp_path / "plain"), f"jsonl+zstd:{tmp_path}/compact"
    _write(plain, "s", 3)
    code, out, err = run_cli("copy", plain, compact)
    assert (code, err) == (0, ""), err
    assert out.decode().splitlines()[-1].startswith("copied 1 session(s)")
    exported = [run_cli("export", "s", "--store", url) for url in (plain, compact)]
    assert exported[0] == exported[1]
    assert exported[0][0] == 0
    code, out, _ = run_cli("ls", "--store", compact, "--json")
    assert code == 0
    assert b'"id":"s"' in out
    code, out, err = run_cli("rm", "s", "--store", compact, "--yes")
    assert (code, err) == (0, ""), err
    assert not list((tmp_path / "compact").rglob("s.*"))  # the log and its lock


def test_the_commands_on_a_log_file_read_a_compact_one(tmp_path: Path) -> None:
    _write(f"jsonl+zstd:///{tmp_path}/store", "s", 2)
    log = _log(tmp_path / "store")
    plain = tmp_path / "s.jsonl"
    plain.write_bytes(_zstd_d(log.read_bytes()))
    for command in ("export", "derive", "validate"):
        assert run_cli(command, str(log)) == run_cli(command, str(plain)), command
    # A torn frame is skipped, and said so, as a torn line is.
    torn = tmp_path / "torn.jsonl.zst"
    torn.write_bytes(log.read_bytes()[:-4])
    code, out, err = run_cli("export", str(torn))
    assert code == 0
    assert out == _zstd_d(log.read_bytes()[: len(_frames(log.read_bytes())[0])])
    assert "do not decode (a torn write?): skipped" in err
    # Repair writes: never plain lines into a compact log.
    before = log.read_bytes()
    code, _, err = run_cli("repair", str(log))
    assert code == 1
    assert "is a compact log (zstd frames): repair writes it through its store" in err
    assert log.read_bytes() == before


def test_a_delete_frees_the_compact_file(tmp_path: Path) -> None:
    url = f"jsonl+zstd:///{tmp_path}/store"
    _write(url, "a", 2)
    _write(url, "b", 3)
    a, b = _log(tmp_path / "store", "a"), _log(tmp_path / "store", "b")
    size, kept = a.stat().st_size, b.read_bytes()
    with open_store(url) as store:
        deleted = store.delete("a")
    assert (deleted.bytes, deleted.events, deleted.location) == (size, 12, str(a))
    assert not a.exists()
    assert b.read_bytes() == kept


# --- the kind of a folder, and zstandard --------------------------------------------------


def test_a_folder_holds_one_kind_of_log(tmp_path: Path) -> None:
    _write(str(tmp_path / "plain"), "s", 1)
    _write(f"jsonl+zstd:///{tmp_path}/compact", "s", 1)
    with pytest.raises(StoreKindError, match=r"is a plain JSONL store, not a compact one: "
                                             r"open it as jsonl://") as caught:
        JsonlZstdBackend(tmp_path / "plain")
    assert (caught.value.location, caught.value.kind) == (str(tmp_path / "plain"), "plain")
    with pytest.raises(StoreKindError, match=r"is a compact JSONL store, not a plain one: "
                                             r"open it as jsonl\+zstd://") as compact:
        open_store(str(tmp_path / "compact"))
    # The URL each message names opens the folder (an absolute path: four slashes).
    for error, kind in ((caught.value, JsonlBackend), (compact.value, JsonlZstdBackend)):
        named = str(error).split("open it as ", 1)[1].split(",", 1)[0]
        assert named.count("/") == str(error.location).count("/") + 3
        opened = backend_for(named)
        assert isinstance(opened, JsonlBackend)
        assert (type(opened), opened.root) == (kind, error.location)
    code, _, err = run_cli("ls", "--store", str(tmp_path / "compact"))
    assert code == 1
    assert "open it as jsonl+zstd://" in err
    assert "Traceback" not in err
    # A folder that holds no bucket yet is either kind until its first write.
    (tmp_path / "empty").mkdir()
    JsonlBackend(tmp_path / "empty")
    JsonlZstdBackend(tmp_path / "empty")
    JsonlZstdBackend(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()  # opening creates nothing


def test_a_relative_url_names_a_folder_of_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()  # a store is made in a folder that exists
    for url in ("jsonl+zstd:rel/store", "jsonl+zstd:///rel/store",
                f"jsonl+zstd:///{tmp_path}/rel/store", f"jsonl+zstd:{tmp_path}/rel/store"):
        backend = backend_for(url)
        assert isinstance(backend, JsonlZstdBackend)
        assert backend.root == str(tmp_path / "rel" / "store")


_WITHOUT_ZSTANDARD = textwrap.dedent("""
    import sys
    sys.modules["zstandard"] = None  # as if it were not installed
    from dsh_session_core import open_store
    from dsh_session_core.errors import MissingExtraError
    with open_store(sys.argv[1] + "/plain") as store:  # a plain store needs no zstandard
        store.create("s")
    try:
        open_store("jsonl+zstd:///" + sys.argv[1] + "/compact")
    except MissingExtraError as exc:
        print(type(exc).__name__, isinstance(exc, ImportError), exc.requirement)
        print(exc)
    from dsh_session_core._cli.main import main
    main(["ls", "--store", "jsonl+zstd:///" + sys.argv[1] + "/compact"])
""")


def test_without_zstandard_a_compact_store_says_what_to_install(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_ZSTANDARD, str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "MissingExtraError True dsh-session-core[zstd]"
    assert out[1] == ("the compact JSONL store (jsonl+zstd:) needs zstandard, which is not "
                      "installed: pip install 'dsh-session-core[zstd]'")
    assert "pip install 'dsh-session-core[zstd]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "compact").exists()


# --- any batches ----------------------------------------------------------------------

_texts = st.text(st.characters(codec="utf-8"), max_size=80)  # no lone surrogate


@st.composite
def _batches(draw: st.DrawFn) -> tuple[list[Any], list[int]]:
    """A session's events (some turns, some texts) and where the flushes fall."""
    s = Session("h", header=meta("h", "/w"), clock=lambda: 9)
    for t in range(1, draw(st.integers(1, 5)) + 1):
        s.append("turn/start", {"turn": t, "trigger": {"kind": "message", "source": USER}})
        for text in draw(st.lists(_texts, max_size=4)):
            s.append("user/message", {"content": [{"type": "text", "text": text}],
                                      "source": USER}, surface_op="append")
        s.append("turn/end", {"turn": t, "reason": {"kind": "completed"}})
    events = list(s.events)
    cuts = draw(st.lists(st.integers(1, len(events) - 1), unique=True, max_size=8))
    return events, sorted({0, *cuts, len(events)})


def _write_batches(backend: Any, events: Sequence[Any], cuts: list[int]) -> None:
    for a, b in itertools.pairwise(cuts):
        backend.append_batch(meta("h", "/w"), events[a:b], encode_events(events[a:b]), a > 0)
    backend.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_batches())
def test_any_batches_make_a_compact_log_of_the_plain_one(case: tuple[list[Any], list[int]],
                                                         ) -> None:
    import tempfile

    events, cuts = case
    with tempfile.TemporaryDirectory() as tmp:
        _write_batches(JsonlBackend(f"{tmp}/plain"), events, cuts)
        _write_batches(JsonlZstdBackend(f"{tmp}/compact"), events, cuts)
        [plain] = Path(tmp, "plain").glob("*/h.jsonl")
        [compact] = Path(tmp, "compact").glob("*/h.jsonl.zst")
        data = compact.read_bytes()
        assert _zstd_d(data) == plain.read_bytes()
        assert len(decode_frames(data).ends) == len(cuts) - 1  # a frame per batch
        stored = JsonlZstdBackend(f"{tmp}/compact").load_stored("h", REG)
        assert stored is not None
        assert stored.torn is None
        assert stored.jsonl == encode_events(events)
        exported = [run_cli("export", "h", "--store", url)
                    for url in (f"{tmp}/plain", f"jsonl+zstd:///{tmp}/compact")]
        assert exported[0] == exported[1] == (0, plain.read_bytes(), "")
