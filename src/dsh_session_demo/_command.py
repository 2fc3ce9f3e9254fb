"""``dsh-session demo``: the README's main job, a scripted agent session on a real store,
as the demo's plugin (:mod:`.plugin`) adds it to the command line: its help and
arguments, :func:`main` (run and print), and :func:`run` (what the command runs, a
:class:`~._run.DemoError` made the CLI's failure).

Kept light: the plugin's hook reads this module whenever ``dsh-session`` lists or builds
its commands, so the demo itself (its harness, the plugins it drives) is imported only
when it runs.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False

if TYPE_CHECKING:
    import argparse
    from typing import TextIO

__all__ = ["DESCRIPTION", "EXAMPLE", "HELP", "arguments", "main", "run"]

HELP = "run a scripted agent session into a store and show its log"
EXAMPLE = "dsh-session demo --store sqlite:////tmp/demo.db"
DESCRIPTION = """\
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


def arguments(parser: argparse.ArgumentParser) -> None:
    """``demo``'s arguments."""
    parser.add_argument("--store", metavar="URL", help=_STORE_HELP)
    parser.add_argument(
        "--session-id", metavar="ID",
        help="the session's id (default: demo, or demo-2, demo-3... when taken); the fork "
             "is ID-fork",
    )
    parser.add_argument("--json", action="store_true",
                        help="print a JSON summary instead of the timeline")


def main(
    store: str | None = None,
    session_id: str | None = None,
    *,
    as_json: bool = False,
    out: TextIO | None = None,
) -> int:
    """Run the demo and print it; the exit status (0).

    :param store: the store URL; ``None`` for the embedded default.
    :param session_id: the session id; ``demo`` (or the first free ``demo-<n>``) if
        ``None``.
    :param as_json: print the JSON summary instead of the story.
    :param out: where to print; stdout by default.
    :raises DemoError: the demo could not run (a message, a hint and an exit status).
    """
    from ._output import render, summary
    from ._run import run_demo
    from ._style import Style, wants_color

    stream = out if out is not None else sys.stdout
    run_ = run_demo(store, session_id)
    if as_json:
        import json

        text = json.dumps(summary(run_, store=store), indent=2, ensure_ascii=False) + "\n"
    else:
        text = render(run_, Style(wants_color(stream)), store=store)
    encoding = getattr(stream, "encoding", None) or "utf-8"
    # A terminal that cannot show "→" or "…" gets "?" rather than a UnicodeEncodeError.
    stream.write(text.encode(encoding, errors="replace").decode(encoding))
    stream.flush()
    return 0


def run(args: argparse.Namespace) -> int:
    """``dsh-session demo [--store URL] [--session-id ID] [--json]``: :func:`main`, its
    :class:`~._run.DemoError` shown as the CLI shows a failure (one line for what, one
    for what to do, and its exit status)."""
    from dsh_session_core.cli import Failure

    from ._run import DemoError

    try:
        return main(args.store, args.session_id, as_json=args.json)
    except DemoError as exc:
        raise Failure(str(exc), exc.status, hint=exc.hint) from exc
