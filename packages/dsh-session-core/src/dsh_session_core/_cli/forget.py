"""``dsh-session forget``: sessions' content removed for good, everywhere.

What ``store.forget`` does (docs/erasing.md), from the command line: each session named
(``ID...``), or every session whose named labels match (``--label NAME=VALUE``, a
person: ``--label app=weather --label user=ada``), removed from the store, from the
archives ``prune --archive`` put it in (and ``--archive URL``), what the deletes left
made unreadable, and the forget recorded in the ledger by a digest. The keys of
``DSH_SESSION_KEYS`` are shared by every session: the command line never drops a key
(crypto-shredding needs a keyring with a ``drop`` hook, from Python).

As ``rm``: asks first on a terminal (``--yes`` skips the question), refuses without
``--yes`` when stdin is not one; a session a live writer holds is refused and left.

Exit codes: 0 every session asked for is forgotten everywhere; 1 a session was
refused (not stored, locked), something was left (an archive that cannot be opened, a
scrub that failed), or the question was not answered yes; 2 bad usage (no id and no
``--label``, both, a label without ``=``, no ``--yes`` without a terminal).
"""

from __future__ import annotations

import argparse

from .commands import HELP
from .support import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Failure

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from .._persistence.retention.forget import Forgotten
    from .._persistence.store.durable import DurableStore

__all__ = ["add_commands"]

_DESCRIPTION = """\
Remove sessions' content for good: the log, its projection rows and search index
entries, its copies in the archives prune --archive put it in (and --archive URL);
then what the deletes left is made unreadable (SQLite vacuumed, its freed pages
zeroed and its write-ahead log truncated; a JSONL store's projection sidecar the
same; PostgreSQL's tables vacuumed). The store's ledger records that a forget
happened, naming the session by a digest only, and loses every earlier record of
it. By person: --label app=APP --label user=USER (an ADK user's sessions and
state). On a terminal, asks first. See docs/erasing.md."""

_EXAMPLE = """\
example:
  dsh-session forget --label app=weather --label user=ada --store ~/sessions --yes"""


def _labels(values: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for text in values:
        name, sep, value = text.partition("=")
        if not sep or not name:
            msg = f"--label takes NAME=VALUE (app=weather, user=ada), got {text!r}"
            raise Failure(msg, EXIT_USAGE)
        labels[name] = value
    return labels


def _forget(args: argparse.Namespace) -> int:
    from .._persistence.store.forgetting import selected
    from ..errors import DshSessionError
    from .lifecycle import _confirm, _must_be_able_to_ask, _open, _problem
    from .term import printable, shorten

    if bool(args.ids) == bool(args.label):
        msg = ("forget takes session ids, or --label NAME=VALUE (not both)" if args.ids
               else "forget needs session ids, or --label NAME=VALUE")
        raise Failure(msg, EXIT_USAGE, hint="see `dsh-session forget --help`")
    labels = _labels(args.label) if args.label else None
    _must_be_able_to_ask(args, "forget sessions",
                         "pass --yes to forget them without being asked")
    problems: list[tuple[str, str, str | None]] = []
    store, shown = _open(args)
    with store:
        if labels is not None:
            ids = selected(store, labels, (), args.archive)
            if not ids:
                msg = (f"no session of {shown} (nor of its archives) has the labels "
                       f"{', '.join(f'{k}={v}' for k, v in labels.items())}: nothing to forget")
                raise Failure(msg)
        else:
            ids = []
            for sid in dict.fromkeys(args.ids):
                try:
                    _check(store, sid, args.archive)
                    ids.append(sid)
                except (DshSessionError, OSError) as exc:
                    problems.append((sid, *_problem(sid, exc, shown)))
        names = ", ".join(printable(shorten(i, 40)) for i in ids[:5])
        if len(ids) > 5:
            names += f" and {len(ids) - 5} more"
        if ids and not args.yes and not _confirm(
                f"forget {len(ids)} session(s) for good ({names}), from {shown} and its "
                f"archives? This cannot be undone"):
            msg = "not confirmed: nothing was forgotten"
            raise Failure(msg)
        done: list[Forgotten] = []
        if ids:
            try:
                done = store.forget_all(ids=ids, archives=args.archive, rule="forget-cli")
            except (DshSessionError, OSError) as exc:  # changed since it was looked at
                problems.append(("", *_problem(ids[0] if len(ids) == 1 else "", exc,
                                               shown)))
    for d in done:
        for line in d.left:
            problems.append((d.session_id, f'session "{d.session_id}": {line}', None))
    return _report(args, shown, done, problems)


def _check(store: DurableStore, session_id: str, archives: list[str]) -> None:
    """Refuse, before anything is done, an id that neither the store, its archives nor
    its ledger (an earlier delete's record, a forget begun) knows, and a session a
    writer holds (``store.forget`` refuses them the same way)."""
    from .._persistence.retention.forget import named_by_ledger
    from ..errors import SessionNotStoredError

    try:
        store.delete(session_id, dry_run=True)
    except SessionNotStoredError as exc:
        if exc.session_id != session_id or not (
                archives or named_by_ledger(store)(session_id)):
            raise


def _report(args: argparse.Namespace, shown: str, done: list[Forgotten],
            problems: list[tuple[str, str, str | None]]) -> int:
    from .._persistence.retention.forget import wire
    from .lifecycle import _report_problems
    from .source import out_json, out_text
    from .term import printable

    if args.json:
        out_json({"store": shown, "forgotten": [wire(d) for d in done],
                  "errors": [{"id": i, "error": m} for i, m, _ in problems]})
        return EXIT_REJECTED if problems else EXIT_OK
    if problems and not done and len(problems) == 1:
        _, message, hint = problems[0]
        raise Failure(message, hint=hint)
    for d in done:
        where = []
        if d.deleted is not None:
            where.append(f"{d.deleted.events or 0:,} event(s), {d.deleted.bytes or 0:,} "
                         f"bytes")
        if d.archives:
            where.append(f"{'and ' if where else ''}from {len(d.archives)} archive(s)")
        if not where:
            where.append("what an earlier delete or forget left")
        out_text(f"forgot {printable(d.session_id)}: {' '.join(where)}\n")
    _report_problems(problems)
    if done or not problems:
        out_text(f"forgot {len(done)} session(s) in {shown}; the ledger records each by "
                 f"a digest\n")
    return EXIT_REJECTED if problems else EXIT_OK


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Only argparse here: `dsh-session --help` must not import what the commands use.
    from .lifecycle import _STORE_HELP, _Formatter

    p = sub.add_parser("forget", help=HELP["forget"], description=_DESCRIPTION,
                       epilog=_EXAMPLE, formatter_class=_Formatter)
    p.add_argument("ids", nargs="*", metavar="ID", help="the id of a session to forget")
    p.add_argument("--label", action="append", default=[], metavar="NAME=VALUE",
                   help="forget every session with this named label (repeat: all must "
                        "match); NAME label is the label ls shows")
    p.add_argument("--archive", action="append", default=[], metavar="URL",
                   help="an archive to forget them in too (beside those the ledger names)")
    p.add_argument("--store", metavar="URL", help=_STORE_HELP)
    p.add_argument("--yes", "-y", action="store_true",
                   help="forget without asking (needed when stdin is not a terminal)")
    p.add_argument("--json", action="store_true", help="print what was done as JSON")
    p.set_defaults(run=_forget)
