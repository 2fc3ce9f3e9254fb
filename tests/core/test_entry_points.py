"""The entry-point scan reads what importlib.metadata reads, without its cost."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from dsh_session_core import ENTRY_POINT_GROUP
from dsh_session_core._plugins.entry_points import find_entry_points


def test_it_finds_what_importlib_metadata_finds() -> None:
    ours = {(e.name, e.value, e.distribution, e.version)
            for e in find_entry_points(ENTRY_POINT_GROUP)}
    theirs = {(e.name, e.value, e.dist.metadata["Name"] if e.dist else "",
               e.dist.version if e.dist else "")
              for e in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert ours == theirs
    assert {"compact", "hooks", "mode", "todo"} <= {name for name, *_ in ours}


def test_a_distribution_found_twice_counts_once_where_first_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder, version in (("first", "2.0"), ("second", "1.0")):
        dist = tmp_path / folder / "dsh_session_twice-1.0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: dsh-session-twice\n"
                                       f"Version: {version}\n\nbody\n")
        (dist / "entry_points.txt").write_text(
            "[console_scripts]\nx = y:z\n\n[dsh_session.plugins]\ntwice = twice.plugin\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "first"), str(tmp_path / "second")])
    found = find_entry_points(ENTRY_POINT_GROUP)
    assert [(e.name, e.value, e.distribution, e.version) for e in found] == [
        ("twice", "twice.plugin", "dsh-session-twice", "2.0")]


def test_load_imports_module_and_attribute() -> None:
    from dsh_session_core._plugins.entry_points import EntryPoint

    assert EntryPoint("x", "os.path:join", "", "").load() is __import__("os").path.join
    assert EntryPoint("x", "json", "", "").load() is __import__("json")
