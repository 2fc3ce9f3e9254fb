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

This package may import the plugins (core may not); the ``dsh-session demo`` command
imports it lazily.
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import sys as _sys
import typing as _typing

from ._output import next_commands, render, summary
from ._run import DemoError, DemoRun, Location, run_demo
from ._style import Style as _Style
from ._style import wants_color as _wants_color

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


def main(
    store: str | None = None,
    session_id: str | None = None,
    *,
    as_json: bool = False,
    out: _typing.TextIO | None = None,
) -> int:
    """Run the demo and print it; the exit status (0).

    :param store: the store URL; ``None`` for the embedded default.
    :param session_id: the session id; ``demo`` (or the first free ``demo-<n>``) if
        ``None``.
    :param as_json: print the JSON summary instead of the story.
    :param out: where to print; stdout by default.
    :raises DemoError: the demo could not run (a message, a hint and an exit status).
    """
    stream = out if out is not None else _sys.stdout
    run = run_demo(store, session_id)
    if as_json:
        import json

        text = json.dumps(summary(run, store=store), indent=2, ensure_ascii=False) + "\n"
    else:
        text = render(run, _Style(_wants_color(stream)), store=store)
    encoding = getattr(stream, "encoding", None) or "utf-8"
    # A terminal that cannot show "→" or "…" gets "?" rather than a UnicodeEncodeError.
    stream.write(text.encode(encoding, errors="replace").decode(encoding))
    stream.flush()
    return 0
