"""``dsh-session demo``: a scripted, offline agent session written through a durable store.

No network and no model: a fake model streams fixed replies and fixed tool outputs, on
an injected clock, so two runs into two fresh stores write the same bytes. The session
exercises every part of dsh-session: streamed turns with token usage, tool calls (one
failing), a context injection and a steering message, a prompt blocked by a hook, plan
mode and back, todos, a compaction, a fork, and a crash (a child process killed
mid-turn, the session reopened, repaired and continued)::

    from dsh_session_demo import run_demo

    run = run_demo("/tmp/dsh-demo")          # or "sqlite:////tmp/dsh-demo.db"; None: default
    run.session.derive_messages()
    run.location.log                         # the JSONL file

This package may import the plugins (core may not). It adds ``dsh-session demo`` to the
command line through its own plugin (:mod:`.plugin`, entry point ``demo``), which loads
the demo only when the command runs.
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (every store and
# CLI command does) does not load the demo, its harness and the plugins it drives.
if _typing.TYPE_CHECKING:
    from ._command import main
    from ._output import next_commands, render, summary
    from ._run import DemoError, DemoRun, Location, run_demo

_LAZY: dict[str, str] = {
    "DemoError": "._run",
    "DemoRun": "._run",
    "Location": "._run",
    "main": "._command",
    "next_commands": "._output",
    "render": "._output",
    "run_demo": "._run",
    "summary": "._output",
}

__all__ = [
    "DemoError",
    "DemoRun",
    "Location",
    "main",
    "next_commands",
    "render",
    "run_demo",
    "summary",
]

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__, distribution="dsh-session")
