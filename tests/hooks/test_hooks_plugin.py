"""The ``hooks`` plugin as installed: found through its entry point, removable by the
block list, declaring two log-only types with the catalog's doc lines, and decoding every
hook/* record of the reference logs as typed events, byte for byte. Also the package's
shape: explicit exports, an entry-point module of hook implementations only, and imports
of core's public names only."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hooks_support import HOOK_SNAPSHOTS, hooks_store

import dsh_session_hooks
import dsh_session_hooks.errors
import dsh_session_hooks.plugin
from dsh_session_core import (
    ENTRY_POINT_GROUP,
    Event,
    OpaqueEvent,
    Session,
    SessionStore,
    create_plugin_manager,
    encode_event,
)
from dsh_session_core.testing import check_plugin
from dsh_session_hooks import HookInvoked, HookInvokedData, HookResult, HookResultData

HOOK_TYPES: dict[str, type[Event]] = {"hook/invoked": HookInvoked, "hook/result": HookResult}

# The reference's catalog lines (seeds, persistence-log catalog), verbatim.
INVOKED_DOC = (
    "A hook command was invoked at a hook point — log-only provenance (like `compact/*`; NOT "
    "a surface type, carries no `surfaceOp`). `dialect` is the bridge that ran it "
    "(`claude`/`codex`), `point` the hook point (`PreToolUse`, `Stop`, …), `matcher` the "
    "matcher-group pattern that selected it (absent for match-all), `handlerId` a stable id "
    "for the command (so an invoked/result pair correlates). `turn` is the open turn the "
    "invocation lives inside."
)
RESULT_DOC = (
    "A hook command's outcome — log-only, paired with a prior `hook/invoked` (same "
    "`handlerId`). `decision` is the dialect-neutral outcome derived by `append_hook_result()` "
    "(which owns the rule): the hook's parsed decision (`approve`/`allow`/`block`/`deny`/"
    "`ask`), else `'stop'` when it asked to halt via `continue:false`, else `'pass'`. "
    "`exitCode` is the process exit (absent if it never ran), `stderrSummary` the trimmed "
    "stderr truncated to the bridge's configured cap (the block reason source on exit 2), "
    "`durationMs` the wall-clock runtime (audit timing; snapshot replay normalizes it). "
    "`turn` matches the `hook/invoked`."
)


def _other_plugins() -> list[str]:
    """Every other installed plugin name: blocked so this test is about ``hooks`` only."""
    names = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(names - {"hooks"})


# The plugin as a user's installation loads it, whatever this shell's switches say.
pytestmark = pytest.mark.usefixtures("plugins_as_installed")


# --- discovery -----------------------------------------------------------------------------------


def test_the_plugin_check_passes() -> None:
    # The kit's check: the entry point, the registration, the block list, the errors.
    report = check_plugin("hooks")
    assert report.plugin is dsh_session_hooks.plugin
    assert report.errors is dsh_session_hooks.errors
    assert report.event_types == tuple(sorted(HOOK_TYPES))
    for etype, cls in HOOK_TYPES.items():
        entry = report.entry(etype)
        assert (entry.plugin, entry.event, entry.surface) == ("hooks", cls, False)
    assert report.entry("hook/invoked").payload is HookInvokedData
    assert report.entry("hook/result").payload is HookResultData
    assert report.entry("hook/invoked").doc == INVOKED_DOC
    assert report.entry("hook/result").doc == RESULT_DOC


def test_blocked_by_name() -> None:
    pm = create_plugin_manager(blocked=["hooks", *_other_plugins()])
    assert pm.get_plugin("hooks") is None
    assert pm.is_blocked("hooks")
    store = SessionStore(pm)
    assert "hook/invoked" not in store.registry
    assert "hook/result" not in store.registry
    # Its records still load, kept verbatim as opaque events.
    line = (
        b'{"type":"hook/invoked","seq":0,"time":1,"data":{"turn":1,"point":"Stop",'
        b'"dialect":"codex","handlerId":"codex:Stop:1"}}'
    )
    session = store.create(seed=[msgspec.json.decode(line)])
    assert type(session.events[0]) is OpaqueEvent
    assert encode_event(session.events[0]) == line


def test_blocked_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SESSION_DISABLE_PLUGINS", "hooks")
    pm = create_plugin_manager(blocked=_other_plugins())
    assert pm.get_plugin("hooks") is None
    assert "hook/result" not in SessionStore(pm).registry


# --- the reference logs --------------------------------------------------------------------------


def _hook_logs() -> list[Path]:
    return sorted(HOOK_SNAPSHOTS.glob("hook-*/session.jsonl"))


def test_every_reference_hook_record_decodes_typed_and_round_trips() -> None:
    logs = _hook_logs()
    if not logs:
        pytest.skip(f"reference logs not found under {HOOK_SNAPSHOTS}")
    assert len(logs) == 13
    store = hooks_store()
    seen: list[Any] = []
    for log in logs:
        lines = log.read_bytes().splitlines()[1:]  # line 1 is the session header
        session = store.create(seed=[msgspec.json.decode(line) for line in lines])
        for line, event in zip(lines, session.events, strict=True):
            wire = msgspec.json.decode(line)
            if not wire["type"].startswith("hook/"):
                continue
            assert type(event) is HOOK_TYPES[wire["type"]], (log.parent.name, line)
            assert encode_event(event) == line  # key order and numbers as logged
            seen.append(event.data)
        store.detach(session)
    assert len(seen) == 40
    # Both shapes of each optional key, and both kinds of duration, are in there.
    invoked = [d for d in seen if isinstance(d, HookInvokedData)]
    results = [d for d in seen if isinstance(d, HookResultData)]
    assert {d.dialect for d in invoked} == {"claude", "codex"}
    assert {d.matcher for d in invoked} == {"bash", msgspec.UNSET}
    assert {type(d.duration_ms) for d in results} == {int, float}
    assert {d.stderr_summary is msgspec.UNSET for d in results} == {True, False}
    assert {d.decision for d in results} == {"block", "pass", "ask"}


def test_an_off_schema_reference_record_stays_opaque() -> None:
    # The snapshot suite's blocked-log fixture holds a hook/result without turn, point or
    # handlerId: it is kept verbatim rather than refused.
    line = b'{"type":"hook/result","seq":0,"time":13,"data":{"decision":"block","durationMs":99}}'
    session = Session("s", seed=[msgspec.json.decode(line)], registry=hooks_store().registry)
    assert type(session.events[0]) is OpaqueEvent
    assert encode_event(session.events[0]) == line


# --- package shape -------------------------------------------------------------------------------

SRC = Path(dsh_session_hooks.__file__).resolve().parent


def test_exports_are_explicit_sorted_and_exist() -> None:
    names = dsh_session_hooks.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(dsh_session_hooks, name), name
    public = {n for n in vars(dsh_session_hooks) if not n.startswith("_")}
    assert public - set(names) <= {"annotations", "plugin", "errors"}  # public submodules


def test_private_modules_start_with_an_underscore() -> None:
    public = {"__init__", "plugin", "events", "errors"}
    for module in SRC.glob("*.py"):
        assert module.stem.startswith("_") or module.stem in public, module.name
    assert (SRC / "py.typed").is_file()
