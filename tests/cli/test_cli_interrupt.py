"""Ctrl-C exits 130 in every command (``copy`` of a large store, ``tail -f``), and
``tail -F`` waits for a session (or a store, or a log file) that does not exist yet while
``tail -f`` refuses it. Each runs the real command in a subprocess, and waits on what it
prints, never on a sleep."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest
from cli_process import RUN, command_env, running

from dsh_session_core._codec import ENCODER
from dsh_session_core._persistence.paths import log_path
from lifecycle_support import Clock, opened, store_url, write


def _interrupt(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=60)


# --- Ctrl-C ---------------------------------------------------------------------------


def _large_store(root: Path, sessions: int) -> None:
    """A JSONL store of ``sessions`` sessions of one small log each (written as files:
    the library writes the first, the others are its copies under other ids)."""
    clock = Clock()
    with opened(str(root), clock) as store:
        write(store, clock, "s-0", turns=3)
        [header] = store.stored()
        events = Path(store.location("s-0")).read_bytes().split(b"\n", 1)[1]
    for i in range(1, sessions):
        sid = f"s-{i}"
        with open(log_path(root, None, sid), "wb") as f:
            f.write(ENCODER.encode(msgspec.structs.replace(header, id=sid)) + b"\n" + events)


def test_ctrl_c_stops_a_copy_with_130_and_says_what_was_kept(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    _large_store(tmp_path / "big", 1500)  # seconds of copying: stopped long before the end
    destination = store_url("sqlite", request, tmp_path, "copy")
    with running("copy", str(tmp_path / "big"), destination) as (proc, out, err):
        out.until(b": copied 9 event(s)")  # copying: one session is done
        assert _interrupt(proc) == 130
        stderr = err.rest().decode()
        assert "interrupted: the sessions and batches already copied are kept" in stderr
        assert "hint: run the same command again to resume" in stderr
        assert "Traceback" not in stderr


def test_ctrl_c_stops_tail_f_with_130(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    clock = Clock()
    with opened(url, clock) as store:
        write(store, clock, "s")
    with running("tail", "-f", "-n", "1", "s", "--store", url) as (proc, out, err):
        out.until(b"turn/end")  # printed the last event: now following
        assert _interrupt(proc) == 130
        assert err.rest() == b""


# --- tail -F --------------------------------------------------------------------------

_CREATE = textwrap.dedent("""
    import sys
    from dsh_session_core import create_plugin_manager, open_store

    user = {"kind": "user"}
    with open_store(sys.argv[1], plugin_manager=create_plugin_manager(autoload=False)) as st:
        s = st.create(sys.argv[2])
        for turn in (1, 2):
            s.append("turn/start", {"turn": turn, "trigger": {"kind": "message",
                                                              "source": user}})
            s.append("user/message", {"content": [{"type": "text", "text": f"q{turn}"}],
                                      "source": user}, surface_op="append")
            s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        st.flush(s)
        st.release(s)
""")


def _create_in_another_process(url: str, session_id: str) -> None:
    subprocess.run([sys.executable, "-c", _CREATE, url, session_id], check=True, env=command_env())


@pytest.mark.parametrize("kind", ["jsonl", "jsonl+zstd", "sqlite", "postgresql"])
def test_tail_F_waits_for_a_session_made_later_and_prints_it_whole(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)  # no store yet: -F waits for it too
    with running("tail", "-F", "-n", "2", "--json", "later", "--store", url) as (
            proc, out, err):
        err.until(b"waiting for it")
        _create_in_another_process(url, "later")
        err.until(b'session "later" has appeared')
        lines = [out.until(b"\n") for _ in range(6)]  # every event, whatever -n says
        events = [json.loads(line) for line in lines]
        assert [(e["seq"], e["type"]) for e in events] == [
            (0, "turn/start"), (1, "user/message"), (2, "turn/end"),
            (3, "turn/start"), (4, "user/message"), (5, "turn/end")]
        assert _interrupt(proc) == 130


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_tail_f_still_refuses_a_session_that_does_not_exist(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path)
    clock = Clock()
    with opened(url, clock) as store:
        write(store, clock, "other")
    proc = subprocess.run([sys.executable, "-c", RUN, "tail", "-f", "later", "--store", url],
                          capture_output=True, text=True, env=command_env(), timeout=60,
                          check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f'dsh-session: no session "later" in {url}')


def test_tail_F_of_an_existing_session_follows_it_as_tail_f(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    _create_in_another_process(url, "s")
    with running("tail", "-F", "-n", "1", "--json", "s", "--store", url) as (proc, out, err):
        assert json.loads(out.until(b"\n"))["seq"] == 5  # -n 1: the last event only
        assert _interrupt(proc) == 130
        assert err.rest() == b""


def test_tail_F_waits_for_a_log_file(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    with running("tail", "-F", "--json", "--file", str(path)) as (proc, out, err):
        err.until(b"waiting for it")
        clock = Clock()
        with opened(str(tmp_path / "store"), clock) as store:
            write(store, clock, "s")
            data = Path(store.location("s")).read_bytes()
        temp = tmp_path / "later.tmp"
        temp.write_bytes(data)
        temp.rename(path)  # whole at once, as a log is published
        err.until(b"has appeared")
        assert [json.loads(out.until(b"\n"))["type"] for _ in range(3)] == [
            "turn/start", "user/message", "turn/end"]
        assert _interrupt(proc) == 130
