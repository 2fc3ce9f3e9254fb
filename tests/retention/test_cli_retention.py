"""``dsh-session prune`` with a policy, ``prune --log`` and ``retain``, on JSONL, compact
JSONL, SQLite and PostgreSQL: the plan as a table and as JSON, asking on a terminal, a
policy file, marks shown by ``ls`` and ``show``, and every bad input one line with its
exit status, leaving the store as it was."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from dsh_session_core.testing import run_cli
from lifecycle_support import Clock, opened, snapshot, write

pytestmark = pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql", "redis")

T0 = 1_600_000_000_000  # long ago: every session is old
DAY = 86_400_000


class _Terminal(io.StringIO):
    """stdin as a terminal a person answers on."""

    def isatty(self) -> bool:
        return True


def _fill(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        for i, (sid, cwd) in enumerate([("p1", "/p"), ("p2", "/p"), ("q1", "/q"),
                                        ("p3", "/p")]):
            write(store, clock, sid, cwd=cwd, at=T0 + i * DAY)


def _ids(store_url: str) -> set[str]:
    with opened(store_url) as store:
        return {h.id for h in store.stored()} - {"dsh-session.retention"}


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))


@pytest.mark.usefixtures("piped")
def test_the_plan_as_a_table_then_the_removal(store_url: str) -> None:
    _fill(store_url)
    code, out, err = run_cli("prune", "--keep-latest", "1", "--per", "cwd", "--dry-run",
                             "--store", store_url)
    assert (code, err) == (0, "")
    lines = out.decode().splitlines()
    assert lines[0].split() == ["ACTION", "ID", "RULE", "LAST", "ACTIVITY", "BYTES", "GROUP"]
    rows = [line.split()[:3] for line in lines[1:-1]]
    assert rows == [["would", "remove", "p1"], ["would", "remove", "p2"],
                    ["keep", "q1", "keep-latest"], ["keep", "p3", "keep-latest"]]
    assert lines[-1].startswith("would remove 2 session(s), ")
    assert lines[-1].endswith("(dry run: nothing was removed); kept 2")
    assert _ids(store_url) == {"p1", "p2", "q1", "p3"}
    code, out, err = run_cli("prune", "--keep-latest", "1", "--per", "cwd", "--yes",
                             "--store", store_url)
    assert (code, err) == (0, "")
    assert out.decode().splitlines()[-1].startswith("removed 2 session(s), ")
    assert _ids(store_url) == {"q1", "p3"}
    code, out, err = run_cli("prune", "--log", "--store", store_url, "--json")
    assert code == 0, err
    log = json.loads(out)["removals"]
    assert [(r["sessionId"], r["rule"], r["policy"]) for r in log] == [
        ("p1", "keep-latest", "keep latest 1 per cwd"),
        ("p2", "keep-latest", "keep latest 1 per cwd")]
    code, out, _ = run_cli("prune", "--log", "--store", store_url)
    assert out.decode().splitlines()[-1].startswith("2 removal(s) from ")


@pytest.mark.usefixtures("piped")
def test_json_report_and_a_policy_file_the_options_override(store_url: str,
                                                            tmp_path: Path) -> None:
    _fill(store_url)
    policy = tmp_path / "retention.toml"
    policy.write_text('[retention]\nolder_than = "1d"\nkeep_latest = 3\n')
    code, out, err = run_cli("prune", "--policy", str(policy), "--keep-latest", "2",
                             "--dry-run", "--json", "--store", store_url)
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["policy"] == "retention.toml: older than 1d, keep latest 2"
    assert doc["dryRun"] is True
    assert [(s["id"], s["action"], s["rule"]) for s in doc["sessions"]] == [
        ("p1", "remove", "older-than"), ("p2", "remove", "older-than"),
        ("q1", "keep", "keep-latest"), ("p3", "keep", "keep-latest")]
    assert doc["bytesFreed"] == sum(s["bytes"] for s in doc["sessions"][:2])


def test_on_a_terminal_it_shows_the_plan_and_asks(store_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(store_url)
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    code, out, err = run_cli("prune", "--max-size", "0", "--store", store_url)
    assert (code, out) == (1, b"")
    assert "remove 4 session(s) from" in err
    assert "not confirmed: nothing was removed" in err
    assert _ids(store_url) == {"p1", "p2", "q1", "p3"}
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    code, out, err = run_cli("prune", "--max-size", "0", "--store", store_url)
    assert code == 0, err
    assert out.decode().splitlines()[-1].startswith("removed 4 session(s)")
    assert _ids(store_url) == set()


@pytest.mark.usefixtures("piped")
def test_retain_marks_ls_and_show_say_so_and_prune_keeps_it(store_url: str) -> None:
    _fill(store_url)
    code, out, err = run_cli("retain", "p1", "nope", "--store", store_url, "--note", "x")
    assert code == 1
    assert out.decode().splitlines() == [
        "retained p1", "1 session(s) retained in " + _printed(store_url) + " (never pruned)"]
    assert err.startswith('dsh-session: error: no session "nope" in ')
    code, out, _ = run_cli("ls", "--store", store_url, "--json")
    assert {r["id"]: r.get("retained", False) for r in json.loads(out)} == {
        "p1": True, "p2": False, "q1": False, "p3": False}
    code, out, _ = run_cli("ls", "--store", store_url)
    header, *rows = out.decode().splitlines()[:-1]
    assert header.split()[-1] == "RETAINED"
    assert {r.split()[0]: r.split()[-1] for r in rows} == {
        "p1": "yes", "p2": "-", "q1": "-", "p3": "-"}
    code, out, _ = run_cli("show", "p1", "--store", store_url)
    assert "retained: never pruned" in out.decode()
    code, out, _ = run_cli("show", "p2", "--store", store_url)
    assert "retained" not in out.decode()
    code, out, err = run_cli("prune", "--older-than", "1d", "--yes", "--store", store_url)
    assert code == 0, err
    assert _ids(store_url) == {"p1"}
    code, out, _ = run_cli("retain", "p1", "--release", "--store", store_url, "--json")
    assert json.loads(out)["retained"] == []
    code, out, _ = run_cli("ls", "--store", store_url)
    assert "RETAINED" not in out.decode()


def _printed(url: str) -> str:
    from dsh_session_core._persistence.urls import printable_url

    return printable_url(url)


@pytest.mark.usefixtures("piped")
def test_archive_from_the_command_line(store_url: str, tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    (tmp_path / "arch").mkdir()
    archive = f"jsonl+zstd:///{tmp_path / 'arch'}"
    _fill(store_url)
    code, out, err = run_cli("prune", "--older-than", "1d", "--keep-latest", "1",
                             "--archive", archive, "--yes", "--store", store_url, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [(s["id"], s.get("archivedTo")) for s in doc["sessions"] if s["action"] == "remove"
            ] == [("p1", archive), ("p2", archive), ("q1", archive)]
    with opened(archive) as kept:
        assert {h.id for h in kept.stored()} == {"p1", "p2", "q1"}


BAD: list[tuple[list[str], int, str]] = [
    (["prune"], 2, "prune needs a rule: --older-than DURATION"),
    (["prune", "--keep-latest", "-1"], 2, "keep_latest takes a whole number (0 or more)"),
    (["prune", "--keep-latest", "1", "--per", "team"], 2, "unknown grouping 'team'"),
    (["prune", "--per", "user"], 2, "per groups sessions for keep_latest"),
    (["prune", "--max-size", "lots"], 2, "not a size: 'lots'"),
    (["prune", "--older-than", "1x", "--max-size", "1G"], 2,
     "--older-than takes a duration such as 30d, 12h, 90m or 2w, got '1x'"),
    (["prune", "--keep", "2", "--max-size", "1G"], 2, "--keep belongs to the plain"),
    (["prune", "--policy", "missing.toml"], 2, "cannot read the policy file missing.toml"),
    (["prune", "--policy", "bad.toml"], 2, "unknown retention policy key 'keep'"),
    (["prune", "--log", "--max-size", "1G"], 2, "--log prints what was removed"),
    (["prune", "--max-size", "1G"], 2, "refusing to prune sessions without asking"),
    (["prune", "--max-size", "0", "--archive", "nowhere/arch", "--yes"], 1,
     "does not exist"),
    # Issue 37, point 5: no --per is the whole store, and an empty one is no grouping.
    (["prune", "--keep-latest", "1", "--per", ""], 2,
     "--per '' names an empty grouping: --per takes cwd, label, user, app or label:NAME"),
    (["prune", "--keep-latest", "1", "--per", "cwd,"], 2, "names an empty grouping"),
    (["prune", "--keep-latest", "1", "--per", "cwd", "--per", ""], 2,
     "names an empty grouping"),
    # A dry run refuses the archive the run would refuse.
    (["prune", "--max-size", "0", "--archive", "nowhere/arch", "--dry-run"], 1,
     "does not exist"),
    (["prune", "--max-size", "0", "--archive", "bad.toml/arch", "--dry-run"], 1,
     "bad.toml does not exist"),
    (["prune", "--max-size", "0", "--archive", "ftp://host/arch", "--dry-run"], 2,
     "unknown store URL scheme 'ftp'"),
    (["prune", "--max-size", "0", "--archive", "arch.db", "--dry-run"], 2,
     "use its URL: sqlite:///arch.db"),
    (["retain", "nope"], 1, 'no session "nope" in '),
]


@pytest.mark.usefixtures("piped")
@pytest.mark.parametrize(("argv", "status", "says"), BAD)
def test_bad_input_is_one_line_and_leaves_the_store(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        argv: list[str], status: int, says: str) -> None:
    _fill(store_url)
    (tmp_path / "bad.toml").write_text("keep = 3\n")
    monkeypatch.chdir(tmp_path)
    with opened(store_url) as store:
        before = snapshot(store)
    code, _out, err = run_cli(*argv, "--store", store_url)
    assert code == status, err
    assert "Traceback" not in err
    first = next(line for line in err.splitlines() if line.startswith("dsh-session"))
    assert says in first, err
    assert len([line for line in err.splitlines() if line.startswith("dsh-session")]) == 1
    with opened(store_url) as store:
        assert snapshot(store) == before


@pytest.mark.usefixtures("piped")
def test_a_dry_run_checks_the_archive_the_run_checks(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 37, point 5: a dry run printed a plan for an archive the run then refused.
    _fill(store_url)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("not a folder\n")
    with opened(store_url) as store:
        before = snapshot(store)
    for archive in (store_url, "ftp://host/arch", "file/arch"):
        said = []
        for how in ("--dry-run", "--yes"):
            code, out, err = run_cli("prune", "--max-size", "0", "--archive", archive, how,
                                     "--store", store_url)
            assert out == b"", how
            said.append((code, err))
        assert said[0] == said[1], archive  # the same refusal, the same status
        assert said[0][0] in (1, 2)
    assert "cannot archive into the store it prunes" in run_cli(
        "prune", "--max-size", "0", "--archive", store_url, "--dry-run",
        "--store", store_url)[2]
    # Nothing to remove: the archive is checked all the same, and never made.
    code, _, err = run_cli("prune", "--max-size", "1T", "--archive", "ftp://host/a",
                           "--dry-run", "--store", store_url)
    assert code == 2, err
    code, out, err = run_cli("prune", "--max-size", "0", "--archive", "sqlite:///new.db",
                             "--dry-run", "--store", store_url)
    assert (code, err) == (0, "")
    assert not (tmp_path / "new.db").exists()  # a dry run makes no archive
    with opened(store_url) as store:
        assert snapshot(store) == before
