"""``dsh-session --version`` lists every installed distribution of dsh-session's with its
version: core, the plugins, the viewer, the batteries, the integrations, and a third
party's that depends on core; nothing else. Run as a user runs it, in a subprocess of
the test environment (where every member of the workspace is installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _members() -> dict[str, str]:
    """Every distribution of the workspace (and the tests' example plugin): name →
    version, from their pyproject files."""
    found = {}
    for pyproject in [ROOT / "pyproject.toml", *sorted(ROOT.glob("packages/*/pyproject.toml")),
                      ROOT / "tests" / "example_plugin" / "pyproject.toml"]:
        project = tomllib.loads(pyproject.read_text())["project"]
        found[project["name"]] = project["version"]
    return found


def _dist_info(where: Path, name: str, version: str, *requires: str) -> None:
    """An installed distribution's metadata, as an installer leaves it."""
    folder = where / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    (folder / "METADATA").write_text("\n".join(lines) + "\n")


def _version(extra_path: Path | None = None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "DSH_SESSION_DISABLE_PLUGINS"}
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", "--version"],
                          capture_output=True, text=True, env=env, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
    lines = proc.stdout.splitlines()
    start = lines.index("distributions:")
    return lines[start + 1:]


def test_version_lists_every_installed_distribution_with_its_version() -> None:
    rows = [line.split() for line in _version()]
    members = _members()
    assert {"dsh-session", "dsh-session-core", "dsh-session-view", "dsh-session-adk",
            "dsh-session-openai-agents"} <= members.keys()
    assert dict(rows) == members  # every one, each once, and nothing else
    assert [name for name, _ in rows] == sorted(members)


def test_version_finds_a_third_party_distribution_by_what_it_depends_on(
    tmp_path: Path,
) -> None:
    _dist_info(tmp_path, "acme-session-store", "2.3.1", "dsh-session-core>=0.1",
               "psycopg[binary]")
    _dist_info(tmp_path, "dsh_session_Extra", "0.9.0")  # a name spelled another way
    _dist_info(tmp_path, "acme-unrelated", "1.0.0", "msgspec")
    _dist_info(tmp_path, "acme-core-fan", "1.0.0", "dsh-session-core-tools")  # not core
    rows = dict(line.split() for line in _version(tmp_path))
    assert rows["acme-session-store"] == "2.3.1"
    assert rows["dsh_session_Extra"] == "0.9.0"
    assert "acme-unrelated" not in rows
    assert "acme-core-fan" not in rows
    assert {k: v for k, v in rows.items()
            if k not in ("acme-session-store", "dsh_session_Extra")} == _members()
