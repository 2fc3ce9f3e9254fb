"""The testing kit, ``dsh_session_core.testing``, as a third party's suite uses it: it
costs nothing until asked for, its fixtures run a test once per kind of store, the
backend contract fails a backend that breaks it, and the plugin check names the rule a
plugin breaks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_session_core import DurableStore, Session, SessionStore, open_store, to_wire
from dsh_session_core.testing import (
    KINDS,
    assistant,
    call_block,
    exchange,
    one_turn_log,
    step_start,
    tool_call,
    tool_result,
    user_turn,
)


def _run(*code: str) -> str:
    out = subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``folder``, a suite of its own that loads the kit's plugin."""
    (folder / "conftest.py").write_text(
        'pytest_plugins = ["dsh_session_core.testing.fixtures"]\n')
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, check=False, cwd=folder, env=env)


# --- what importing it costs -----------------------------------------------------------------


def test_importing_the_kit_loads_no_pytest_no_backend_and_no_psycopg() -> None:
    loaded = _run("import sys, dsh_session_core.testing as t",
                  "t.user, t.make_store_url, t.check_plugin",
                  "print(' '.join(sorted(sys.modules)))").split()
    assert "pytest" not in loaded
    assert "psycopg" not in loaded
    assert not [m for m in loaded if m.startswith("dsh_session_core._persistence")]


def test_importing_core_loads_no_part_of_the_kit() -> None:
    loaded = _run("import sys, dsh_session_core",
                  "print(' '.join(sorted(sys.modules)))").split()
    assert not [m for m in loaded if m.startswith(("dsh_session_core.testing", "pytest"))]


# --- the event shorthands --------------------------------------------------------------------


def test_an_exchange_is_one_closed_turn_of_one_step() -> None:
    s = SessionStore(clock=lambda: 7).create("x")
    exchange(s, 1, "hi", "hello")
    assert [to_wire(e) for e in s.events] == [
        {"type": "turn/start", "seq": 0, "time": 7,
         "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}},
        {"type": "user/message", "seq": 1, "time": 7,
         "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
         "surfaceOp": "append"},
        {"type": "step/start", "seq": 2, "time": 7, "data": {"turn": 1, "step": 1}},
        {"type": "assistant/message", "seq": 3, "time": 7,
         "data": {"turn": 1, "step": 1, "content": [{"type": "text", "text": "hello"}]},
         "surfaceOp": "append"},
        {"type": "step/end", "seq": 4, "time": 7, "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "seq": 5, "time": 7,
         "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    # The log line form says the same, with each time one more than its seq.
    assert [{**to_wire(e), "time": e.seq + 1} for e in s.events] == one_turn_log("hi", "hello")


def test_an_open_user_turn_and_a_tool_round_trip() -> None:
    s: Session = SessionStore().create("x")
    user_turn(s, 1, "run ls", end=False)
    step_start(s, 1, 1)
    assistant(s, 1, 1, [call_block("c1")])
    tool_call(s, 1, 1, "c1")
    result = tool_result(s, 1, 1, "c1", "a.txt", is_error=True)
    assert [e.type for e in s.events][:2] == ["turn/start", "user/message"]
    assert to_wire(result)["data"] == {"turn": 1, "step": 1, "callId": "c1",
                                       "content": [{"type": "text", "text": "a.txt"}],
                                       "isError": True}
    assert to_wire(s.derive_messages()) == [
        {"role": "user", "content": [{"type": "text", "text": "run ls"}]},
        {"role": "assistant", "content": [
            {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}]},
        {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1",
                                      "content": [{"type": "text", "text": "a.txt"}],
                                      "isError": True}]},
    ]


def test_each_one_turn_log_is_a_list_of_its_own() -> None:
    first = one_turn_log()
    first[1]["data"]["content"][0]["text"] = "changed"
    assert one_turn_log()[1]["data"]["content"][0]["text"] == "hi"


# --- the store fixtures ----------------------------------------------------------------------


def test_the_store_fixture_is_empty_and_durable_as_its_kind(
    store: DurableStore, store_url: str, store_kind: str
) -> None:
    assert store.stored() == []
    s = store.create("kept")
    exchange(s, 1)
    store.release(s)
    if store_kind == "memory":
        return  # a memory store lives as long as its object
    with open_store(store_url) as again:
        assert [e.type for e in again.read_session("kept").events] == [
            e.type for e in s.events]


def test_a_suite_runs_a_store_test_once_per_kind_its_mark_names(tmp_path: Path) -> None:
    (tmp_path / "test_kinds.py").write_text(textwrap.dedent("""\
        import pytest

        def test_every_kind(store_url):
            pass

        @pytest.mark.store_kinds("jsonl", "sqlite")
        def test_two_kinds(store_kind):
            pass

        @pytest.mark.parametrize("store_kind", ["memory"], indirect=True)
        def test_its_own(store_kind):
            pass

        def test_no_store():
            pass
        """))
    proc = _pytest(tmp_path, "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    items = [line for line in proc.stdout.splitlines() if "::" in line]
    assert items == [
        *(f"test_kinds.py::test_every_kind[{kind}]" for kind in KINDS),
        "test_kinds.py::test_two_kinds[jsonl]", "test_kinds.py::test_two_kinds[sqlite]",
        "test_kinds.py::test_its_own[memory]", "test_kinds.py::test_no_store"]


def test_an_unknown_kind_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_bad.py").write_text(textwrap.dedent("""\
        import pytest

        @pytest.mark.store_kinds("jsonl", "cassette")
        def test_it(store_url):
            pass
        """))
    proc = _pytest(tmp_path, "--collect-only", "-q")
    assert proc.returncode != 0
    assert "unknown kinds of store ['cassette']" in proc.stdout + proc.stderr


#: The docs' example (docs/testing.md), in a suite whose Python cannot import ``driver``:
#: pytest run with the module set to ``None`` in ``sys.modules``, so importing it fails
#: as it does where it is not installed.
_WITHOUT = ("import sys; sys.modules[sys.argv[1]] = None; import pytest; "
            "sys.exit(pytest.main(sys.argv[2:]))")

_EVERY_KIND_OF_STORE = textwrap.dedent("""\
    import pytest

    from dsh_session_core import open_store
    from dsh_session_core.testing import exchange, make_backend_factory


    @pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "postgresql")
    def test_a_session_outlives_its_store(store_url):
        with open_store(store_url) as store:
            session = store.create("kept")
            exchange(session, 1)
            store.release(session)


    @pytest.mark.parametrize("kind", ["jsonl+zstd", "postgresql"])
    def test_a_factory(kind, request, tmp_path):
        make_backend_factory(kind, request, tmp_path)
    """)


@pytest.mark.parametrize(("driver", "kind", "reason"), [
    ("psycopg", "postgresql",
     "psycopg is not installed: pip install 'dsh-session-core[postgresql]'"),
    ("zstandard", "jsonl+zstd",
     "zstandard is not installed: pip install 'dsh-session-core[zstd]'"),
])
def test_a_kind_whose_driver_is_missing_skips_saying_what_to_install(
    driver: str, kind: str, reason: str, tmp_path: Path
) -> None:
    (tmp_path / "conftest.py").write_text(
        'pytest_plugins = ["dsh_session_core.testing.fixtures"]\n')
    (tmp_path / "test_kinds.py").write_text(_EVERY_KIND_OF_STORE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "CI")}
    env["DSH_SESSION_TEST_POSTGRESQL"] = ""  # no server: a skip, but for another reason
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT, driver, "-p", "no:cacheprovider", "-q", "-rs",
         "-k", kind], capture_output=True, text=True, check=False, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # -k: the two tests of this kind, the fixture's and the factory's: both skip, for
    # the reason given.
    assert proc.stdout.splitlines()[-1].startswith("2 skipped, 4 deselected"), proc.stdout
    reasons = [line.split(": ", 1)[1] for line in proc.stdout.splitlines()
               if line.startswith("SKIPPED [")]
    assert reasons == [reason, reason], proc.stdout
    assert "ModuleNotFoundError" not in proc.stdout + proc.stderr


def test_without_psycopg_under_ci_a_postgresql_store_fails_saying_so(tmp_path: Path) -> None:
    # CI must not pass by skipping the PostgreSQL tests: a missing driver fails them, as
    # a missing server does.
    (tmp_path / "conftest.py").write_text(
        'pytest_plugins = ["dsh_session_core.testing.fixtures"]\n')
    (tmp_path / "test_kinds.py").write_text(_EVERY_KIND_OF_STORE)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["CI"] = "true"
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT, "psycopg", "-p", "no:cacheprovider", "-q",
         "-k", "postgresql"], capture_output=True, text=True, check=False, cwd=tmp_path,
        env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "psycopg is not installed: pip install 'dsh-session-core[postgresql]' (CI is " \
           "set: PostgreSQL tests must not skip)" in proc.stdout
    assert "ModuleNotFoundError" not in proc.stdout + proc.stderr


# --- the backend contract --------------------------------------------------------------------

_FORGETFUL = textwrap.dedent("""\
    import pytest
    from dsh_session_core import MemoryBackend
    from dsh_session_core.testing import BackendContract

    class Forgetful(MemoryBackend):
        def list(self):
            return []  # lists no session, whatever it holds

    class TestForgetful(BackendContract):
        @pytest.fixture
        def make_backend(self):
            backend = Forgetful()
            return lambda: backend

    class TestMemory(BackendContract):
        @pytest.fixture
        def make_backend(self):
            backend = MemoryBackend()
            return lambda: backend
    """)


def test_the_contract_passes_a_sound_backend_and_fails_one_that_breaks_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_backends.py").write_text(_FORGETFUL)
    proc = _pytest(tmp_path, "-q", "-rf")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = {line.split("::")[2].split(" ")[0] for line in proc.stdout.splitlines()
              if line.startswith("FAILED")}
    assert {"test_s2_s3_lazy_create_then_materialize", "test_s9_accepted_json"} <= failed
    assert not [line for line in proc.stdout.splitlines()
                if line.startswith("FAILED") and "TestMemory" in line]


def test_a_contract_without_its_backend_says_what_to_override(tmp_path: Path) -> None:
    (tmp_path / "test_nothing.py").write_text(textwrap.dedent("""\
        from dsh_session_core.testing import BackendContract

        class TestNothing(BackendContract):
            pass
        """))
    proc = _pytest(tmp_path, "-q", "-x")
    assert proc.returncode == 1
    assert "TestNothing must override the make_backend fixture" in proc.stdout


# --- the plugin check ------------------------------------------------------------------------


def _planted_plugin(root: Path, *, errors: str, elsewhere: str = "",
                    init: str = "__all__ = []\n", typed: bool = True) -> dict[str, str]:
    """An installed (if minimal) plugin ``planted``, with the given ``errors.py``,
    ``_other.py`` and ``__init__.py`` (and ``py.typed``, when ``typed``); the environment
    that finds it."""
    dist = root / "dsh_session_planted-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-session-planted\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text("[dsh_session.plugins]\nplanted = planted.plugin\n")
    package = root / "planted"
    package.mkdir()
    (package / "__init__.py").write_text(init)
    if typed:
        (package / "py.typed").write_text("")
    (package / "plugin.py").write_text(textwrap.dedent("""\
        from dsh_session_core import Event, EventSpec, hookimpl
        from msgspec import Struct

        class NoteData(Struct, frozen=True):
            text: str

        class Note(Event, tag="planted/note", frozen=True):
            data: NoteData

        @hookimpl
        def register_event_types():
            return [EventSpec(Note, doc="A planted note.")]
        """))
    (package / "errors.py").write_text(errors)
    (package / "_other.py").write_text(elsewhere)
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = ("from dsh_session_core.testing import check_plugin\n"
            "print(check_plugin('planted').event_types)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, env=env)


def test_the_plugin_check_passes_a_plugin_that_keeps_the_rules(tmp_path: Path) -> None:
    env = _planted_plugin(tmp_path, errors=textwrap.dedent("""\
        from dsh_session_core.errors import DshSessionError

        class PlantedError(DshSessionError):
            pass
        """))
    proc = _check(env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "('planted/note',)"


def test_the_plugin_check_names_each_error_out_of_place(tmp_path: Path) -> None:
    env = _planted_plugin(
        tmp_path,
        errors="class RootlessError(ValueError):\n    pass\n",
        elsewhere="class StrayError(Exception):\n    pass\n\n"
                  "class _Internal(Exception):\n    pass\n")
    proc = _check(env)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("AssertionError: plugin 'planted': ")
    assert "planted._other.StrayError is an error outside planted.errors" in last
    assert "planted.errors.RootlessError does not derive from DshSessionError" in last
    assert "_Internal" not in last  # a private class is the module's own business


def test_the_plugin_check_names_what_the_public_api_lacks(tmp_path: Path) -> None:
    env = _planted_plugin(tmp_path, errors="", typed=False,
                          init='__all__ = ["note", "Note", "note", "gone"]\n'
                               'note = Note = 1\n')
    proc = _check(env)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert "planted has no py.typed (PEP 561)" in last
    assert "planted.__all__ lists a name twice" in last
    assert "planted.__all__ is not sorted as ruff's RUF022 sorts it" in last
    assert "planted.__all__ names what it does not define: ['gone']" in last


def test_the_plugin_check_asks_for_an_all(tmp_path: Path) -> None:
    proc = _check(_planted_plugin(tmp_path, errors="", init=""))
    assert proc.returncode == 1
    assert "planted has no __all__ listing its public names" in proc.stderr


def test_the_plugin_check_fails_a_plugin_the_block_list_hides(tmp_path: Path) -> None:
    env = _planted_plugin(tmp_path, errors="")
    proc = _check({**env, "DSH_SESSION_DISABLE_PLUGINS": "planted"})
    assert proc.returncode == 1
    assert "did not load its entry point planted.plugin" in proc.stderr


def test_the_plugin_check_fails_a_name_no_plugin_has() -> None:
    code = "from dsh_session_core.testing import check_plugin\ncheck_plugin('nobody')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 1
    assert "plugin 'nobody': 0 entry point(s) of that name" in proc.stderr


@pytest.mark.parametrize("kind", ["cassette", ""])
def test_make_store_url_refuses_an_unknown_kind(kind: str, request: pytest.FixtureRequest,
                                                tmp_path: Path) -> None:
    from dsh_session_core.testing import make_backend_factory, make_store_url

    with pytest.raises(ValueError, match="unknown kind of store"):
        make_store_url(kind, request, tmp_path)
    with pytest.raises(ValueError, match="unknown kind of store"):
        make_backend_factory(kind, request, tmp_path)
