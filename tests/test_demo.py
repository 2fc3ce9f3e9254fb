"""``dsh-session demo``: the scripted session runs end to end on a real store (JSONL and
SQLite), its log holds every ingredient the issue lists, validates strictly, keeps the
dev invariants, is byte-for-byte reproducible and derives the same messages once
reloaded; the command prints the timeline, the log's location and the next commands,
and fails with one line and a hint."""

from __future__ import annotations

import io
import json
import re
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import dsh_session_demo
from dsh_session_core import Session, check_events, open_store, to_wire
from dsh_session_core._cli import main as cli
from dsh_session_core.invariants import InvariantsPlugin
from dsh_session_demo import DemoRun, run_demo
from dsh_session_demo._crash import CrashError, crash_child
from dsh_session_demo._style import Style, wants_color
from dsh_session_demo._timeline import one_line
from process_support import python_prints

# --- running it ------------------------------------------------------------------------


def _main(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """``dsh-session ARGV`` in-process, through the real ``main`` (its error handling), the
    demo added by its plugin (the ``demo`` entry point of the dsh-session distribution)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(list(argv))
    code = exit_.value.code
    assert isinstance(code, int)
    return code


@pytest.fixture(scope="module")
def jsonl_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    return run_demo(str(tmp_path_factory.mktemp("jsonl") / "sessions"))


@pytest.fixture(scope="module")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'sessions.db'}"
    dsh_session_demo.main(url, out=io.StringIO())
    return url


@pytest.fixture(params=["jsonl", "sqlite"])
def reloaded(
    request: pytest.FixtureRequest, jsonl_run: DemoRun, sqlite_url: str
) -> Iterator[tuple[Session, Session]]:
    """The main session and its fork, reopened by a fresh store."""
    url = jsonl_run.location.store if request.param == "jsonl" else sqlite_url
    with open_store(url) as store:
        yield store.open("demo"), store.open("demo-fork")


def _wire(session: Session) -> list[dict[str, Any]]:
    return [to_wire(e) for e in session.events]


def _of(events: Sequence[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


# --- what the log holds --------------------------------------------------------------------


def test_the_turns_end_completed_rejected_and_interrupted(
    reloaded: tuple[Session, Session],
) -> None:
    events = _wire(reloaded[0])
    ends = [e["data"]["reason"]["kind"] for e in _of(events, "turn/end")]
    assert ends == ["completed", "completed", "rejected", "completed", "interrupted", "completed"]
    triggers = [e["data"]["trigger"]["kind"] for e in _of(events, "turn/start")]
    assert triggers.count("injection") == 1


def test_turns_stream_chunks_and_every_model_call_reports_usage(
    reloaded: tuple[Session, Session],
) -> None:
    events = _wire(reloaded[0])
    kinds = {e["data"]["chunk"]["type"] for e in _of(events, "assistant/chunk")}
    assert {"block-start", "text-delta", "reasoning-delta", "tool-call-delta", "block-end",
            "usage", "finish"} <= kinds
    messages = _of(events, "assistant/message")
    assert len(messages) >= 10
    for m in messages:
        assert m["data"]["usage"]["inputTokens"] > 0
        assert m["data"]["usage"]["outputTokens"] > 0
        # The message records the chunks it was assembled from.
        assert all(events[s]["type"] == "assistant/chunk" for s in m["sourceEventSeqs"])


def test_tool_calls_get_results_and_one_fails(reloaded: tuple[Session, Session]) -> None:
    events = _wire(reloaded[0])
    calls = {e["data"]["callId"] for e in _of(events, "tool/call")}
    results = _of(events, "tool/result")
    assert calls == {r["data"]["callId"] for r in results}
    failed = [r for r in results if r["data"]["isError"]]
    codes = sorted(r["data"]["error"]["code"] for r in failed)
    assert codes == ["EXIT_1", "interrupted"]  # a failing test run, and the crash's call


def test_a_context_injection_and_a_steering_message(reloaded: tuple[Session, Session]) -> None:
    events = _wire(reloaded[0])
    sources = [e["data"]["source"] for e in _of(events, "context/message")]
    assert {"kind": "plugin", "plugin": "file-watch"} in sources
    steering = _of(events, "steering/message")
    assert len(steering) == 1
    assert steering[0]["data"]["source"] == {"kind": "user"}


def test_a_hook_blocks_a_prompt_and_the_turn_is_rejected(
    reloaded: tuple[Session, Session],
) -> None:
    events = _wire(reloaded[0])
    blocked = _of(events, "prompt/blocked")
    assert len(blocked) == 1
    seq = blocked[0]["seq"]
    invoked, result, end = events[seq - 2], events[seq - 1], events[seq + 1]
    assert invoked["type"] == "hook/invoked"
    assert invoked["data"]["point"] == "UserPromptSubmit"
    assert result["type"] == "hook/result"
    assert result["data"]["handlerId"] == invoked["data"]["handlerId"]
    assert (result["data"]["decision"], result["data"]["exitCode"]) == ("block", 2)
    assert result["data"]["stderrSummary"] == blocked[0]["data"]["reason"]
    assert end["type"] == "turn/end"
    assert end["data"]["reason"] == {"kind": "rejected", "reason": blocked[0]["data"]["reason"]}
    assert not any(e["type"] == "user/message" and e["data"]["content"]
                   == blocked[0]["data"]["content"] for e in events)


def test_plan_mode_and_back_reshape_the_request_header(
    reloaded: tuple[Session, Session],
) -> None:
    events = _wire(reloaded[0])
    assert [e["data"]["mode"] for e in _of(events, "mode/set")] == ["plan", "default"]
    notice = events[_of(events, "mode/set")[0]["seq"] + 1]
    assert notice["type"] == "context/message"
    assert notice["data"]["source"] == {"kind": "plugin", "plugin": "mode"}
    deltas = _of(events, "request/header-delta")
    assert deltas
    assert "exit_plan_mode" in json.dumps(deltas[0]["data"]["tools"])
    reasons = [e["data"]["reason"] for e in _of(events, "request/header")]
    assert reasons[0] == "initial"
    assert "resume" in reasons  # the crash child and the resumed process start afresh


def test_todos_are_written_as_whole_lists(reloaded: tuple[Session, Session]) -> None:
    writes = _of(_wire(reloaded[0]), "todo/write")
    assert len(writes) >= 2
    assert {t["status"] for t in writes[-1]["data"]["todos"]} == {"completed"}


def test_the_oldest_turns_are_compacted_by_the_extractive_summarizer(
    reloaded: tuple[Session, Session],
) -> None:
    session = reloaded[0]
    events = _wire(session)
    start, summary, end = (_of(events, t) for t in
                           ("compact/start", "compact/summary", "compact/end"))
    assert len(start) == len(summary) == len(end) == 1
    assert "error" not in end[0]["data"]
    checkpoint = events[summary[0]["seq"] + 1]
    assert checkpoint["surfaceOp"]["op"] == "replace"
    assert checkpoint["data"]["source"] == {"kind": "plugin", "plugin": "compact"}
    shadowed = summary[0]["data"]["shadowedSeqs"]
    turn2_end = _of(events, "turn/end")[1]["seq"]
    assert max(shadowed) < turn2_end
    assert checkpoint["sourceEventSeqs"] == [start[0]["seq"], summary[0]["seq"], *shadowed]
    assert summary[0]["data"]["model"] == "extractive-summarizer"
    assert session.surface.seqs[0] == checkpoint["seq"]


def test_the_fork_keeps_its_lineage_and_shares_the_parents_prefix(
    reloaded: tuple[Session, Session],
) -> None:
    parent, fork = reloaded
    h = fork.header
    assert h.parent_session == "demo"
    assert isinstance(h.seed_length, int)
    assert parent.events[h.seed_length - 1].type == "turn/end"
    assert fork.jsonl(0, h.seed_length) == parent.jsonl(0, h.seed_length)
    assert fork.jsonl(h.seed_length) != parent.jsonl(h.seed_length, len(fork.events))
    assert fork.events[-1].type == "turn/end"


def test_the_logs_validate_strictly_and_keep_the_invariants(
    reloaded: tuple[Session, Session],
) -> None:
    for session in reloaded:
        assert check_events(session.events, session.registry, strict=True) == []
        InvariantsPlugin().watch(session)  # raises on the first broken rule


# --- the crash -----------------------------------------------------------------------------


def test_the_child_was_killed_mid_turn_and_the_reopen_closed_its_turn(
    jsonl_run: DemoRun,
) -> None:
    crash = jsonl_run.crash
    assert crash.signal == signal.SIGKILL
    assert crash.written > crash.durable > 0
    closers = [to_wire(e) for e in jsonl_run.closers]
    assert [c["type"] for c in closers] == ["tool/result", "step/end", "turn/end"]
    assert closers[0]["data"]["error"]["code"] == "interrupted"
    assert closers[0]["seq"] == crash.durable
    # What the child appended after its last flush never reached the disk.
    assert jsonl_run.location.log is not None
    assert b"Running the loader tests" not in Path(jsonl_run.location.log).read_bytes()


def test_a_child_that_fails_before_the_crash_point_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dsh_session_demo._crash as crash_module

    monkeypatch.setattr(crash_module, "_CHILD_CODE", "import sys; sys.exit('child broke')")
    with pytest.raises(CrashError, match="child broke"):
        crash_child(None, "demo", 0)


# --- reproducible, and the same once reloaded ---------------------------------------------


def test_two_runs_write_identical_logs(jsonl_run: DemoRun, tmp_path: Path) -> None:
    again = run_demo(str(tmp_path / "sessions"))
    first, second = jsonl_run.location, again.location
    assert first.log is not None
    assert second.log is not None
    assert first.fork_log is not None
    assert second.fork_log is not None
    assert Path(first.log).read_bytes() == Path(second.log).read_bytes()
    assert Path(first.fork_log).read_bytes() == Path(second.fork_log).read_bytes()
    # The output too, but for where the logs are.
    plain = Style(enabled=False)
    text = dsh_session_demo.render(again, plain).replace(second.store, "<root>")
    assert text == dsh_session_demo.render(jsonl_run, plain).replace(first.store, "<root>")


def test_sqlite_runs_are_identical_too(sqlite_url: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'again.db'}"
    dsh_session_demo.main(url, out=io.StringIO())
    logs = []
    for u in (sqlite_url, url):
        with open_store(u) as store:
            logs.append((store.open("demo").to_jsonl(), store.open("demo-fork").to_jsonl()))
    assert logs[0] == logs[1]


def test_the_reloaded_log_derives_the_sessions_messages(
    jsonl_run: DemoRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    live = to_wire(jsonl_run.session.derive_messages())
    assert jsonl_run.location.log is not None
    assert _main(monkeypatch, "derive", jsonl_run.location.log) == 0
    assert json.loads(capsys.readouterr().out) == live
    with open_store(jsonl_run.location.store) as store:
        assert to_wire(store.open("demo").derive_messages()) == live


# --- the command ---------------------------------------------------------------------------


def test_the_command_prints_the_timeline_the_log_and_the_next_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "sessions"
    assert _main(monkeypatch, "demo", "--store", str(root)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "\x1b[" not in out  # not a terminal: no colour
    positions = [out.index(f"\nturn {n} · ") for n in range(1, 7)]
    assert positions == sorted(positions)
    assert out.index("Fork demo-fork") < out.index("Derived messages") < out.index("The log")
    logs = sorted(root.glob("*/demo*.jsonl"))
    assert [p.name for p in logs] == ["demo-fork.jsonl", "demo.jsonl"]
    fork_log, log = (str(p) for p in logs)
    assert f"  {log}  (" in out
    for command in (f"dsh-session view demo --store {root}",
                    f"dsh-session show demo --store {root}",
                    f"dsh-session stats demo --store {root}",
                    f"dsh-session derive {log}",
                    f"dsh-session validate --strict {log} {fork_log}",
                    f"dsh-session export {log}"):
        assert f"  {command}" in out
    # The suggested commands work on what was written.
    assert _main(monkeypatch, "validate", "--strict", log, fork_log) == 0
    assert capsys.readouterr().out == (
        "2 of 2 logs valid (strict: unknown event types, opaque payloads and unanswered "
        "tool calls are errors)\n"
    )
    assert _main(monkeypatch, "export", log) == 0
    assert capsys.readouterr().out.encode() == Path(log).read_bytes()


def test_the_timeline_is_the_read_models_as_show_prints_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo groups and describes nothing itself: its timeline of the session is what
    ``dsh-session show`` prints (the read model's build_timeline and render_timeline),
    line for line, and the fork's is show's from the fork's own turn on."""
    monkeypatch.setenv("COLUMNS", "100")  # show's width on no terminal, the demo's
    root = str(tmp_path / "sessions")
    assert _main(monkeypatch, "demo", "--store", root) == 0
    demo = capsys.readouterr().out
    assert _main(monkeypatch, "show", "demo", "--store", root) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("session demo\n")
    assert f"\n\n{shown}\n" in demo
    assert _main(monkeypatch, "show", "demo-fork", "--store", root) == 0
    fork = capsys.readouterr().out
    head, _, _ = fork.partition("\n\nturn 1 ")
    own = fork[fork.index("\n\nturn 5 "):]
    assert f"\n\n{head}{own}\n" in demo
    # What the log cannot say by itself follows the session's timeline, by event.
    notes = demo[demo.index(shown) + len(shown):demo.index("Fork demo-fork")]
    assert notes.startswith("\nWhat the log cannot say by itself\n")
    assert "crash: the child process" in notes


def test_the_default_store_is_used_and_a_rerun_takes_a_free_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DSH_SESSION_STORE", str(tmp_path / "default"))
    assert _main(monkeypatch, "demo", "--json") == 0
    first = json.loads(capsys.readouterr().out)
    assert _main(monkeypatch, "demo", "--json") == 0
    second = json.loads(capsys.readouterr().out)
    assert (first["session"], second["session"]) == ("demo", "demo-2")
    assert second["fork"]["session"] == "demo-2-fork"
    assert first["store"] == str(tmp_path / "default")
    assert Path(first["log"]).is_file()
    assert Path(second["log"]).is_file()
    assert all("--store" not in c for c in first["next"])  # the default needs no flag


def test_the_json_summary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'summary.db'}"  # sqlite:////abs/path
    assert _main(monkeypatch, "demo", "--store", url, "--session-id", "s1", "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["session"], summary["backend"], summary["log"]) == ("s1", "sqlite", None)
    assert summary["store"] == str(tmp_path / "summary.db")
    assert [t["end"] for t in summary["turns"]][2:5] == ["rejected", "completed", "interrupted"]
    assert summary["crash"]["signal"] == "SIGKILL"
    assert summary["crash"]["repairedWith"] == ["tool/result", "step/end", "turn/end"]
    assert summary["fork"]["parentSession"] == "s1"
    assert summary["compaction"]["surfaceAfter"] < summary["compaction"]["surfaceBefore"]
    assert f"dsh-session show s1 --store {url}" in summary["next"]
    assert f"dsh-session export s1 --store {url} > s1.jsonl" in summary["next"]


@pytest.mark.parametrize(
    ("argv", "status", "first_line"),
    [
        (["--store", "memory:"], 2, "the demo cannot use an in-memory store"),
        (["--store", "sqlite::memory:"], 2, "the demo cannot use an in-memory store"),
        (["--store", "ftp://host/x"], 2, "unknown store URL scheme 'ftp'"),
        # The one id rule of every command (the store's): "a/b" is a fine id, "" is not.
        (["--session-id", ""], 2, "invalid --session-id '': it is empty"),
        (["--session-id", "x\udc80"], 2, "invalid --session-id 'x\\udc80': it holds a lone"),
    ],
)
def test_bad_usage_is_one_line_and_a_hint(
    argv: list[str], status: int, first_line: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DSH_SESSION_STORE", str(tmp_path / "unused"))
    assert _main(monkeypatch, "demo", *argv) == status
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith(f"dsh-session: {first_line}")
    assert lines[1].startswith("hint: ")
    assert not (tmp_path / "unused").exists()  # nothing was written


def test_a_taken_session_id_is_refused(
    jsonl_run: DemoRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = jsonl_run.location.log
    assert log is not None
    before = Path(log).read_bytes()
    store = jsonl_run.location.store
    assert _main(monkeypatch, "demo", "--store", store, "--session-id", "demo") == 1
    err = capsys.readouterr().err
    assert err.startswith('dsh-session: session "demo" (or "demo-fork") already exists')
    assert "\nhint: pick another --session-id" in err
    assert Path(log).read_bytes() == before


def test_missing_plugins_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "mode,todo")
    assert _main(monkeypatch, "demo", "--store", str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert err.startswith("dsh-session: the demo needs the mode, todo plugin(s)")
    assert "DSH_SESSION_DISABLE_PLUGINS" in err


def test_debug_shows_the_traceback() -> None:
    with pytest.raises(Exception, match="in-memory store") as raised:
        cli.main(["--debug", "demo", "--store", "memory:"])
    assert isinstance(raised.value.__cause__, dsh_session_demo.DemoError)


def test_the_demo_command_imports_nothing_heavy_until_it_runs() -> None:
    # Its plugin is loaded by every store and asked for its command whenever the command
    # line is built: neither loads the demo, its harness or the plugins it drives.
    code = (
        "import sys\n"
        "from dsh_session_core import create_plugin_manager\n"
        "from dsh_session_core._cli.main import _parser\n"
        "create_plugin_manager()\n"
        "_parser(['demo', '--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('dsh_session_demo')))"
    )
    assert python_prints(code) == str(
        ["dsh_session_demo", "dsh_session_demo._command", "dsh_session_demo.plugin"])


# --- colour --------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color() -> None:
    assert wants_color(_Tty(), {}) is True
    assert wants_color(_Tty(), {"NO_COLOR": "1"}) is False
    assert wants_color(_Tty(), {"NO_COLOR": ""}) is True  # empty means unset
    assert wants_color(io.StringIO(), {}) is False
    assert Style(True)("x", "bold", "red") == "\x1b[1;31mx\x1b[0m"
    assert Style(False)("x", "bold", "red") == "x"


def test_long_lines_are_cut_without_breaking_colour_codes() -> None:
    plain = "x" * 50
    coloured = f"{'y' * 10}{Style(True)(plain, 'red')} tail"
    cut = one_line(coloured, 20)
    visible = re.sub(r"\x1b\[[0-9;]*m", "", cut)
    assert visible == "y" * 10 + "x" * 9 + "…"
    assert cut.endswith("\x1b[0m")
    assert one_line(" a\n  b ", 20) == "a b"


def test_a_terminal_gets_colour(jsonl_run: DemoRun, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = dsh_session_demo.render(jsonl_run, Style(wants_color(_Tty())))
    assert "\x1b[1m" in coloured
    plain = dsh_session_demo.render(jsonl_run, Style(False))
    assert "\x1b[" not in plain
    assert len(plain.splitlines()) == len(coloured.splitlines())
