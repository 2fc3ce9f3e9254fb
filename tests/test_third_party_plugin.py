"""A real third-party plugin: ``tests/example_plugin`` is its own distribution
(``dsh-session-example``), installed into the test environment beside dsh-session, and
found only through the ``dsh_session.plugins`` entry-point group."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from dsh_session_core import EventSpec, SessionStore, create_plugin_manager, hookimpl, to_wire
from dsh_session_core.errors import DuplicateEventTypeError
from dsh_session_core.testing import check_plugin


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_session_core", *args],
        capture_output=True, text=True, check=False, env={**os.environ, **(env or {})},
    )


def test_discovered_as_a_separate_distribution() -> None:
    proc = _cli("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in msgspec.json.decode(proc.stdout)}
    assert rows["example"]["distribution"] == "dsh-session-example"
    assert rows["example"]["event_types"] == ["example/note", "example/ping"]
    assert rows["example"]["hooks"] == ["register_event_types", "register_union_members"]


def test_it_passes_the_plugin_check() -> None:
    report = check_plugin("example")
    assert report.distribution == "dsh-session-example"
    assert report.package == "dsh_session_example"
    assert report.event_types == ("example/note", "example/ping")
    assert report.errors is None  # it defines no error


def test_its_types_are_registered_with_their_badges() -> None:
    rows = {r["type"]: r
            for r in msgspec.json.decode(_cli("events", "--json").stdout)["events"]}
    assert rows["example/note"]["surface"] is True
    assert rows["example/ping"]["surface"] is False
    assert rows["example/note"]["plugin"] == rows["example/ping"]["plugin"] == "example"


def test_its_surface_type_derives_a_message_and_its_log_only_type_does_not() -> None:
    store = SessionStore(create_plugin_manager())
    s = store.create("third-party")
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    s.append("example/ping", {"turn": 1, "note": "alive"})
    s.append("example/note", {"text": "remember the tests"}, surface_op="append")
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    wire = to_wire(s.derive_messages())
    assert wire == [{"role": "user", "content": [
        {"type": "text", "text": "<note>remember the tests</note>"}]}]
    assert type(s.events[1]).__name__ == "ExamplePing"


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_the_block_list_disables_it(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "environment":
        monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "mode,example")
        pm = create_plugin_manager()
    else:
        pm = create_plugin_manager(blocked=["example"])
    assert pm.get_plugin("example") is None
    assert "example/note" not in SessionStore(pm).registry
    proc = _cli("events", "--json", env={"DSH_SESSION_DISABLE_PLUGINS": "example"})
    assert "example/" not in proc.stdout


def test_a_second_plugin_claiming_its_type_fails_naming_both() -> None:
    class Rival:
        @hookimpl
        def register_event_types(self) -> list[EventSpec]:
            from dsh_session_example import ExamplePing

            return [EventSpec(ExamplePing)]

    pm = create_plugin_manager()
    pm.register(Rival(), name="rival")
    with pytest.raises(DuplicateEventTypeError) as info:
        SessionStore(pm)
    assert info.value.plugins == ("example", "rival")
    assert "'example'" in str(info.value)
    assert "'rival'" in str(info.value)


def test_two_distributions_with_one_entry_point_name_are_refused(tmp_path: Path) -> None:
    # A second, real (if minimal) installed distribution claiming the name "example".
    dist = tmp_path / "dsh_session_impostor-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-session-impostor\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""\
        [dsh_session.plugins]
        example = dsh_session_impostor.plugin
        """))
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = _cli("plugins", env=env)
    assert proc.returncode == 1
    assert "dsh-session-example" in proc.stderr
    assert "dsh-session-impostor" in proc.stderr
    lines = proc.stderr.splitlines()  # the error, then a hint; no traceback
    assert len(lines) == 2
    assert lines[1].startswith("hint: ")
    # Blocking the contested name is the documented way out.
    ok = _cli("plugins", env={**env, "DSH_SESSION_DISABLE_PLUGINS": "example"})
    assert ok.returncode == 0, ok.stderr
