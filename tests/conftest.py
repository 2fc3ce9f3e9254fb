"""Shared fixtures: the testing kit's (stores of every kind, PostgreSQL databases: its
pytest plugin, loaded here), where the reference logs live, and fresh plugin managers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_session_core import PluginManager, create_plugin_manager
from dsh_session_core.testing import BackendFactory

pytest_plugins = ["dsh_session_core.testing.fixtures"]

# pytest-xdist exports the controller's terminal size to its workers (COLUMNS=80,
# LINES=24). The commands the tests run must see what a user's piped run sees (no
# width given: the default), whether the suite runs in one process or in several.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

#: The reference logs and goldens, shipped beside the repository (not in it).
UPSTREAM = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "upstream"


def upstream_dir() -> Path:
    """The upstream fixtures folder, or skip the test saying where it was looked for."""
    if not (UPSTREAM / "README.md").is_file():
        pytest.skip(f"reference fixtures not found at {UPSTREAM} (../shared is absent)")
    return UPSTREAM


@pytest.fixture
def upstream() -> Path:
    return upstream_dir()


@pytest.fixture
def storage(backend_factory: BackendFactory) -> BackendFactory:
    """The kit's ``backend_factory`` (fresh backend instances over one storage, for each
    kind of store), under the persistence tests' name for it."""
    return backend_factory


@pytest.fixture
def pm() -> PluginManager:
    """A plugin manager with core only: no entry point is loaded."""
    return create_plugin_manager(autoload=False)
