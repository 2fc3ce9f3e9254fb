"""``dsh-session demo``: the README's main job, a scripted agent session on a real store.

The demo lives in its own package, ``dsh_session_demo``, shipped by the batteries-included
``dsh-session`` distribution, because it drives the plugins (compaction, hooks, modes,
todos) and core never imports a plugin. It is imported by
name, and only when the command runs, so ``dsh-session --help`` stays fast.
"""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import EXIT_REJECTED, Failure

__all__ = ["add_commands"]

_DESCRIPTION = """\
Run a deterministic, offline, scripted agent session (no network, no model) through a
durable store, then print its timeline, the messages derived from its log, where the
log is, and the commands to try next. The session has streamed turns with token usage,
tool calls (one failing), a context injection and a steering message, a prompt blocked
by a hook, plan mode and back, todos, a compaction, a fork, and a crash: a child process
killed mid-turn, the session reopened, repaired and continued.
"""

_STORE_HELP = (
    "where to write: a folder (JSONL), jsonl:///folder, sqlite:///file.db or "
    "postgresql://host/dbname (default: the "
    "embedded store, $DSH_SESSION_STORE or ~/.local/share/dsh-session/sessions)"
)


def _demo(args: argparse.Namespace) -> int:
    import importlib

    try:
        demo = importlib.import_module("dsh_session_demo")
    except ModuleNotFoundError as exc:
        msg = (f"the demo is not installed ({exc}): it ships with the batteries-included "
               "distribution\nhint: pip install dsh-session (core, the four plugins and "
               "the demo)")
        raise Failure(msg, EXIT_REJECTED) from exc
    try:
        status: int = demo.main(args.store, args.session_id, as_json=args.json)
    except demo.DemoError as exc:
        msg = f"{exc}\nhint: {exc.hint}"  # one line for what, one for what to do
        raise Failure(msg, exc.status) from exc
    return status


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo", help=HELP["demo"],
        description=_DESCRIPTION,
    )
    demo.add_argument("--store", metavar="URL", help=_STORE_HELP)
    demo.add_argument(
        "--session-id", metavar="ID",
        help="the session's id (default: demo, or demo-2, demo-3... when taken); the fork "
             "is ID-fork",
    )
    demo.add_argument("--json", action="store_true",
                      help="print a JSON summary instead of the timeline")
    demo.set_defaults(run=_demo)
