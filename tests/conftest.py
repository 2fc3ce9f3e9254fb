"""Shared fixtures: where the reference logs live, and fresh plugin managers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import PluginManager, create_plugin_manager

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


@pytest.fixture(params=["jsonl", "memory", "sqlite"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """Opens fresh backend instances over one storage (the persistence contract runs on
    every backend of ``persist_support.BACKENDS``)."""
    from persist_support import BACKENDS

    return BACKENDS[request.param](tmp_path)


@pytest.fixture
def pm() -> PluginManager:
    """A plugin manager with core only: no entry point is loaded."""
    return create_plugin_manager(autoload=False)
