"""``dsh-session rm``, and what ``prune`` shares with it.

Removing sessions from a store, one by one (the rules are
:meth:`~.durable.DurableStore.delete`'s), and what ``prune`` shares with it (asking, the
lines and rows of a removed session; ``prune`` itself is ``retention.py``).

A session is removed whole and physically (its JSONL file, or its rows, and its lock
file), under its writer lock: one that a live writer holds, in any process, is refused
(``rm``) or skipped (``prune``), and left intact. Nothing else is touched.

Both ask before removing anything when stdin is a terminal (``--yes`` skips the
question); when it is not, they refuse without ``--yes`` (a script must say so).
``prune --dry-run`` removes nothing and needs no ``--yes``.

Exit codes: 0 everything asked for is removed (``prune``: a locked session skipped is
no error); 1 a session was refused (not found, locked, or it could not be removed), or
the question was not answered yes; 2 bad usage (no id, a bad duration, a negative
``--keep``, no ``--yes`` without a terminal, a bad or ``memory:`` store URL).
"""

from __future__ import annotations

import argparse
import sys

from .commands import HELP
from .support import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Failure

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    import datetime
    from typing import Any

    from .._persistence.base import Deleted
    from .._persistence.store.durable import DurableStore

# What the commands run is imported in the functions that run it: `dsh-session rm --help`
# imports this module to build the parser, with argparse alone (the store, read-model and
# terminal modules would cost it some 100-250 ms).

__all__ = ["add_commands", "parse_duration"]

#: How many ids the question of ``rm`` names (then "and N more").
_NAMED = 5

_NOT_CONFIRMED = "not confirmed: nothing was removed"

_DURATION_HINT = "a DURATION is a number and a unit (s, m, h, d, w), e.g. 30d, 12h, 90m, 2w"


def parse_duration(text: str) -> datetime.timedelta:
    """A DURATION (``30d``, ``12h``, ``90m``, ``2w``, ``45s``, or several, ``1d12h``):
    the retention policy's rule (:func:`~.policy.parse_duration`).

    :raises Failure: anything else (a usage error).
    """
    from .._persistence.retention.policy import parse_duration as parse

    try:
        return parse(text)
    except ValueError as exc:
        # The rule raises it from the OverflowError of a duration no date can hold.
        if isinstance(exc.__context__, OverflowError):
            msg = f"--older-than {text} is longer than any date can be"
        else:
            msg = f"--older-than takes a duration such as 30d, 12h, 90m or 2w, got {text!r}"
        raise Failure(msg, EXIT_USAGE, hint=_DURATION_HINT) from None


# --- asking ---------------------------------------------------------------------------


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):  # closed, or no file behind it
        return False


def _must_be_able_to_ask(args: argparse.Namespace, what: str, hint: str) -> None:
    """Refuse (usage) to remove anything without ``--yes`` when no one can be asked."""
    if not args.yes and not _interactive():
        msg = f"refusing to {what} without asking: stdin is not a terminal"
        raise Failure(msg, EXIT_USAGE, hint=hint)


def _confirm(question: str) -> bool:
    """Ask on stderr, read the answer from stdin: only ``y`` or ``yes`` is yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer.endswith("\n"):  # end of input: no answer
        sys.stderr.write("\n")
    return answer.strip().lower() in ("y", "yes")


# --- what is reported -----------------------------------------------------------------


def _wire(d: Deleted) -> dict[str, Any]:
    row: dict[str, Any] = {"id": d.session_id, "status": d.status, "location": d.location,
                           "removed": list(d.removed), "bytes": d.bytes, "events": d.events,
                           "lastActivity": d.last_activity}
    if d.header is not None and isinstance(d.header.cwd, str):
        row["cwd"] = d.header.cwd
    if d.reason is not None:
        row["reason"] = d.reason
    return row


def _size(d: Deleted) -> str:
    events = "?" if d.events is None else f"{d.events:,}"
    size = "?" if d.bytes is None else f"{d.bytes:,}"
    return f"{events} event(s), {size} bytes"


def _total(found: list[Deleted]) -> int:
    return sum(d.bytes or 0 for d in found)


def _shown(url: str) -> str:
    from .._persistence.urls import printable_url

    return printable_url(url)


def _open(args: argparse.Namespace) -> tuple[DurableStore, str]:
    """The store of ``--store`` (it must exist: nothing is created to remove from)."""
    from .._persistence.store.durable import DurableStore
    from .source import open_backend, store_url

    url = store_url(args)
    return DurableStore(open_backend(url)), _shown(url)


# --- rm -------------------------------------------------------------------------------


def _problem(session_id: str, exc: Exception, shown: str) -> tuple[str, str | None]:
    """One line naming why a session cannot be removed, and a hint."""
    from ..errors import PersistenceError, SessionLockedError, SessionNotStoredError
    from .support import not_stored_failure, one_line
    from .term import printable

    name = printable(session_id)
    if isinstance(exc, SessionLockedError):
        return (f'session "{name}" is held by a writer ({printable(exc.holder)}): left as '
                f"it is", "stop its writer, or let it release the session, then run rm again")
    if isinstance(exc, SessionNotStoredError) and exc.session_id == session_id:
        failure = not_stored_failure(exc, shown)
        return str(failure), failure.hint
    if isinstance(exc, OSError) and not isinstance(exc, PersistenceError):
        return f'cannot remove session "{name}": {exc.strerror or exc}', None
    return f'cannot remove session "{name}": {printable(one_line(exc))}', None


def _rm(args: argparse.Namespace) -> int:
    from ..errors import DshSessionError
    from .source import out_json, out_text
    from .term import printable, shorten

    _must_be_able_to_ask(args, "remove sessions",
                         "pass --yes to remove them without being asked")
    problems: list[tuple[str, str, str | None]] = []
    removed: list[Deleted] = []
    store, shown = _open(args)
    with store:
        ids = list(dict.fromkeys(_named_ids(store, args.ids, shown, problems)))
        marked = _marked(store, ids)
        planned: list[Deleted] = []
        for session_id in ids:  # first what can go, and what cannot
            try:
                planned.append(store.delete(session_id, dry_run=True))
            except (DshSessionError, OSError) as exc:
                problems.append((session_id, *_problem(session_id, exc, shown)))
        if planned and not args.yes:
            names = ", ".join(shorten(d.session_id, 40) for d in planned[:_NAMED])
            if len(planned) > _NAMED:
                names += f" and {len(planned) - _NAMED} more"
            question = (f"remove {len(planned)} session(s) from {shown} ({names}: "
                        f"{_total(planned):,} bytes)?")
            kept = [d.session_id for d in planned if d.session_id in marked]
            if kept:
                question = (f"{_named(kept)} marked never to be pruned (the mark goes "
                            f"with the session); {question}")
            if not _confirm(question):
                raise Failure(_NOT_CONFIRMED)
        for plan in planned:
            try:
                removed.append(store.delete(plan.session_id, rule="rm"))
            except (DshSessionError, OSError) as exc:  # changed since it was looked at
                problems.append((plan.session_id, *_problem(plan.session_id, exc, shown)))
    if args.json:
        out_json({"store": shown, "removed": [
                      {**_wire(d), "retained": True} if d.session_id in marked else _wire(d)
                      for d in removed],
                  "bytes": _total(removed),
                  "errors": [{"id": i, "error": m} for i, m, _ in problems]})
        return EXIT_REJECTED if problems else EXIT_OK
    if problems and not removed and len(problems) == 1:
        _, message, hint = problems[0]
        raise Failure(message, hint=hint)
    for d in removed:
        mark = (" (it was marked never to be pruned: its mark is removed with it)"
                if d.session_id in marked else "")
        out_text(f"removed {printable(d.session_id)}: {_size(d)}{mark}\n")
    _report_problems(problems)
    if removed or not problems:
        out_text(f"removed {len(removed)} session(s), {_total(removed):,} bytes freed\n")
    return EXIT_REJECTED if problems else EXIT_OK


def _named_ids(store: DurableStore, texts: list[str], shown: str,
               problems: list[tuple[str, str, str | None]]) -> list[str]:
    """The ids ``texts`` name: each an id, or a session's name (never an id prefix: what
    names one session today may name another tomorrow, and rm cannot be undone). A name
    several sessions bear, and a prefix, are problems (nothing of theirs is removed);
    anything else is kept as it is, for the removal to say it is not there."""
    from .._inspect.lookup import find_session, prefix_candidates
    from ..errors import AmbiguousSessionError
    from .support import plugin_manager, registry
    from .term import printable

    ids: list[str] = []
    headers = None
    for text in texts:
        try:
            found = find_session(store.backend, text, shown, registry=registry(),
                                 plugins=plugin_manager())
        except AmbiguousSessionError as exc:
            problems.append((text, exc.message, exc.hint))
            continue
        if found is None and text:
            headers = store.backend.list() if headers is None else headers
            starting = prefix_candidates(headers, text)
            if starting:
                many = f" and {len(starting) - 3} more" if len(starting) > 3 else ""
                problems.append((text, f'no session "{printable(text)}" in {shown}',
                                 "rm takes a whole id or a name, never an id prefix: "
                                 f"ids starting so are {', '.join(starting[:3])}{many}"))
                continue
        ids.append(found or text)
    return ids


def _marked(store: DurableStore, ids: list[str]) -> set[str]:
    """Which of ``ids`` are marked never to be pruned (the ledger's records that cannot
    be read without keys are left out: the removal still takes their mark with it)."""
    from .._persistence.retention.ledger import backend_marks

    marks = backend_marks(store.backend, store.registry)
    return {i for i in ids if marks.get(i, False)}


def _named(ids: list[str]) -> str:
    from .term import printable, shorten

    names = ", ".join(printable(shorten(i, 40)) for i in ids[:_NAMED])
    if len(ids) > _NAMED:
        names += f" and {len(ids) - _NAMED} more"
    return f"{names} {'is' if len(ids) == 1 else 'are'}"


def _report_problems(problems: list[tuple[str, str, str | None]]) -> None:
    from .term import Style

    style = Style.for_stream(sys.stderr)
    for _, message, _ in problems:
        sys.stderr.write(f"dsh-session: {style('error:', 'red')} {message}\n")
    for hint in dict.fromkeys(h for _, _, h in problems if h):
        sys.stderr.write(f"{style('hint:', 'bold')} {hint}\n")


# --- prune ----------------------------------------------------------------------------


def _line(d: Deleted) -> str:
    from .._inspect.describe import when
    from .term import printable

    name = printable(d.session_id)
    last = when(d.last_activity)
    if d.status == "locked":
        return f"skipped {name} (a writer holds it; last activity {last})"
    if d.status == "failed":
        return f"failed {name}: {printable(d.reason or '')}"
    verb = "would remove" if d.status == "would-delete" else "removed"
    return f"{verb} {name}  ({_size(d)}, last activity {last})"


# --- wiring ---------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; the width measured as the other commands'
    help measures it."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        from .help import columns

        super().__init__(prog, indent_increment, max_help_position,
                         columns() - 2 if width is None else width)


_STORE_HELP = ("the store: a folder, jsonl:///path, jsonl+zstd:///path (compact), "
               "sqlite:///path.db or postgresql://host/dbname (default: "
               "$DSH_SESSION_STORE, else the user's data folder)")

_RM_DESCRIPTION = """\
Remove sessions from a store, whole: the log (a JSONL file, or the rows of a
database) and its lock file. A session that a live writer holds is refused and
left intact. A session marked never to be pruned (retain) goes with its mark. Each
removal is recorded in the store's retention ledger (prune --log prints them). On a
terminal, asks first."""

_RM_EXAMPLE = """\
example:
  dsh-session rm chat-1 chat-1-retry --store sqlite:///agent.db --yes"""

def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Only argparse here: `dsh-session --help` must not import what the commands use.
    rm = sub.add_parser("rm", help=HELP["rm"], description=_RM_DESCRIPTION,
                        epilog=_RM_EXAMPLE, formatter_class=_Formatter)
    rm.add_argument("ids", nargs="+", metavar="ID",
                    help="a session to remove: its id, or its name (an ADK session's "
                         "app/user/session; never an id prefix)")
    rm.add_argument("--store", metavar="URL", help=_STORE_HELP)
    rm.add_argument("--yes", "-y", action="store_true",
                    help="remove without asking (needed when stdin is not a terminal)")
    rm.add_argument("--json", action="store_true", help="print what was removed as JSON")
    rm.set_defaults(run=_rm)
