"""The provider tests' corpus: every reference log in ../shared/fixtures/upstream that
derives (read as ``dsh-session derive`` reads it), plus the demo's two sessions.

``corpus()`` loads it once per test process, as ``(name, session)`` pairs; the sessions
are only read (never appended to), so tests share them. ``corpus_failures(check)`` puts
every session through one conversion's check and says which failed.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from pathlib import Path

from conftest import UPSTREAM
from dsh_session_core import Session, open_store, read_session
from dsh_session_core.errors import DshSessionError

__all__ = ["corpus", "corpus_failures", "demo_sessions", "upstream_sessions"]

#: The acceptance counts (tests/test_upstream_goldens.py): 354 logs, 312 that derive.
UPSTREAM_LOGS = 354
UPSTREAM_DERIVING = 312


@functools.cache
def upstream_sessions() -> tuple[tuple[str, Session], ...]:
    """Every upstream log that loads and derives, by its path under the folder."""
    from dsh_session_core._plugins.manager import PluginHooks, create_plugin_manager

    # The installed plugins' registry, built once (read_session builds one per call).
    registry = PluginHooks(create_plugin_manager()).build_registry()
    out = []
    for path in sorted(p for f in ("fixtures", "random", "synthetic")
                       for p in (UPSTREAM / f).rglob("*.jsonl")):
        try:
            session = read_session(path, registry=registry)
            session.derive_messages()
            session.request_header()
        except DshSessionError:
            continue
        out.append((str(path.relative_to(UPSTREAM)), session))
    return tuple(out)


@functools.cache
def demo_sessions() -> tuple[tuple[str, Session], ...]:
    """The demo's main session and its fork, as a fresh JSONL store reopens them."""
    from dsh_session_demo import run_demo

    root = Path(tempfile.mkdtemp(prefix="dsh-providers-demo-"))
    run = run_demo(str(root / "sessions"))
    with open_store(run.location.store) as store:
        return tuple((f"demo:{sid}", store.open(sid)) for sid in ("demo", "demo-fork"))


def corpus() -> tuple[tuple[str, Session], ...]:
    """The whole corpus: the upstream logs that derive, then the demo's sessions."""
    return upstream_sessions() + demo_sessions()


def corpus_failures(check: Callable[[Session], object]) -> list[str]:
    """Each session of the whole corpus that ``check`` raises on, as ``name: error``
    (empty when all pass). The corpus is counted first: one that lost logs fails
    rather than passes over fewer."""
    sessions = corpus()
    assert len(sessions) == UPSTREAM_DERIVING + 2
    failed = []
    for name, session in sessions:
        try:
            check(session)
        except Exception as exc:
            failed.append(f"{name}: {exc!r}")
    return failed
