"""``dsh-session copy``: copy sessions between two stores.

``dsh-session copy SRC DST``: copy sessions between two stores, resumably, and check
the copies (the rules are :mod:`dsh_session_core._persistence.copy`'s).

SRC and DST are store URLs, as ``--store`` takes them elsewhere: a folder (JSONL),
``jsonl:///path``, ``jsonl+zstd:///path`` (compact JSONL: copying converts between the
two), ``sqlite:///path.db`` or ``postgresql://user@host/dbname``;
``memory:`` is refused (nothing outlives the process). SRC may also be a log file, as
the SOURCE of the other commands: its session is copied into DST (a torn tail is
dropped, as a store's load drops it). SRC must exist (for PostgreSQL: a
database holding dsh-session's tables) and is only read; DST is created when missing (a
dry run creates nothing), in a folder that exists: a path is a JSONL store's folder, and
a new one is said on stderr (``created the JSONL store PATH``); a SQLite database named
by its path (an existing one, or a missing ``*.db``, ``*.sqlite``...) is refused with
its URL, as SRC is. A PostgreSQL URL is shown without its password. Each session
gets one line on stdout as it is done (a failure: one line on stderr), then a summary
line, with one ``hint:`` line per kind of failure; ``--json`` prints one document
instead. On a terminal, stderr shows a progress bar (events of the session being
copied, and which session of how many).

Exit codes: 0 every session is (or, with ``--dry-run``, would be) complete in DST; 1 a
session was refused (diverged, locked, unstorable, failed, mismatch, missing), SRC does not exist,
or the copy was interrupted (what was copied is kept: run it again to resume); 2 bad
usage (a bad URL, ``memory:``, SRC and DST the same store, a batch size below 1).
"""

from __future__ import annotations

import argparse
import os
import sys

from .commands import HELP
from .support import EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Failure

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from .._persistence.base import Backend
    from .._persistence.copy import CopyProgress, CopyReport, CopyStatus, SessionCopy
    from .._schema.registry import EventRegistry
    from .term import Progress

# What the commands run is imported in the functions that run it: `dsh-session copy --help`
# imports this module to build the parser, with argparse alone (the store, read-model and
# terminal modules would cost it some 100-250 ms).

__all__ = ["add_commands"]

#: What to do about each kind of refused session.
_HINTS: dict[CopyStatus, str] = {
    "diverged": "a diverged session is never overwritten: remove it from DST, or copy into "
                "another store",
    "locked": "a writer holds the session in DST: stop it, then run the copy again",
    "unstorable": "DST cannot store these sessions (their id, or a value, breaks its rules: "
                  "see the errors); copying again will not help: copy them into another "
                  "kind of store",
    "failed": "run the copy again to retry (it resumes); --debug shows the traceback",
    "mismatch": "the copy differs from the source: inspect it with `dsh-session export "
                "ID --store DST`",
    "missing": "`dsh-session ls --store SRC` lists the sessions of SRC",
}


_URL_HINT = ("SRC and DST are stores: a folder, jsonl:///path, jsonl+zstd:///path, "
             "sqlite:///path.db or postgresql://user@host/dbname")


def _shown(url: str) -> str:
    """A store URL for messages and reports: without its password."""
    from .._persistence.urls import printable_url

    return printable_url(url)


def _opened(url: str, *, must_exist: bool, empty_if_missing: bool = False) -> Backend:
    """The store's backend; a bad URL is a usage error that says what a URL is."""
    from .source import open_backend

    try:
        return open_backend(url, must_exist=must_exist, empty_if_missing=empty_if_missing)
    except Failure as exc:
        if exc.hint is None and exc.status == EXIT_USAGE:
            raise Failure(str(exc), EXIT_USAGE, hint=_URL_HINT) from exc
        raise


def _by_url(role: str, path: str, example: str) -> Failure:
    """The usage error for a SQLite database named by its path (SRC or DST): a plain
    path is a JSONL store's folder, so a database is named by its URL."""
    from .._persistence.urls import url_for

    url = url_for("sqlite", path)  # the path as given: relative stays relative
    msg = f"{role} {path} is a SQLite database: name it by its URL ({url})"
    return Failure(msg, EXIT_USAGE, hint=example.replace(role, url, 1))


def _open_source(url: str, reg: EventRegistry) -> Backend:
    from .source import is_log_file

    if is_log_file(url):
        if _is_sqlite_file(url):
            refused = _by_url("SRC", url, "dsh-session copy SRC DST")
            raise refused
        return _log_file_source(url, reg)
    # must_exist: a missing SQLite file or PostgreSQL store would be created.
    backend = _opened(url, must_exist=True)
    if not backend.exists():  # a JSONL folder that is not there
        backend.close()
        msg = f"no store at {_shown(url)} (it does not exist)"
        raise Failure(msg, hint="check SRC: a folder, jsonl:///path, jsonl+zstd:///path, "
                                "sqlite:///path.db or postgresql://user@host/dbname")
    return backend


def _check_destination(url: str) -> bool:
    """Refuse a DST that is a path but no store folder: a SQLite database (or a missing
    one, by its suffix) and any other file. Whether DST is a store folder to be made
    (a path that does not exist), for the note that says so.

    :raises Failure: a database or a file named by its path.
    """
    from .._persistence.urls import DATABASE_SUFFIXES, check_folder, local_store
    from ..errors import StoreFolderError, StoreUrlError
    from .source import folder_failure

    scheme, sep, _ = url.partition(":")
    if sep and len(scheme) > 1:  # a URL: it says what it is; its folder must exist
        try:
            local = local_store(url)
        except StoreUrlError:
            return False  # said when it is opened
        if local is not None and local[1] != ":memory:":
            try:  # now, so that a dry run says it too
                check_folder(os.path.abspath(local[1]))
            except StoreFolderError as exc:
                raise folder_failure(exc) from None
        return False
    if os.path.isdir(url):
        return False
    if os.path.lexists(url):
        if _is_sqlite_file(url):
            refused = _by_url("DST", url, "dsh-session copy SRC DST")
            raise refused
        msg = f"DST {url} is a file, not a store: a path names a JSONL store's folder"
        raise Failure(msg, EXIT_USAGE, hint=_URL_HINT)
    if url.lower().endswith(DATABASE_SUFFIXES):  # the library's rule (urls.py)
        from .._persistence.urls import url_for

        sqlite, folder = url_for("sqlite", url), url_for("jsonl", url)
        msg = (f"DST {url} does not exist, and a path names a JSONL store's folder: name a "
               f"new SQLite database by its URL ({sqlite})")
        raise Failure(msg, EXIT_USAGE, hint=f"dsh-session copy SRC {sqlite} (or DST "
                                            f"{folder}, for a JSONL folder of that name)")
    try:  # now, so that a dry run says it too
        check_folder(os.path.abspath(url))
    except StoreFolderError as exc:
        raise folder_failure(exc) from None
    return True


def _is_sqlite_file(path: str) -> bool:
    """Whether a file is a SQLite database (the library's test,
    :func:`~.._persistence.urls.is_sqlite_file`)."""
    from .._persistence.urls import is_sqlite_file

    return is_sqlite_file(path)


def _log_file_source(path: str, reg: EventRegistry) -> Backend:
    """SRC as a log file (the SOURCE rule of the other commands): its session, read by
    the durable load rules (a torn tail dropped, as a store drops it), in an in-memory
    store to copy from."""
    from .._logformat.logfile import scan_log
    from .._persistence.opening import backend_for
    from .source import _scanned, read_bytes, warn

    data = read_bytes(path, "loading")
    try:
        source = _scanned(path, data, reg)  # the checks and warnings of `--recover`
    except Failure as exc:
        raise Failure(str(exc), exc.status,
                      hint="SRC is a store, or a log file: `dsh-session validate FILE` "
                           "says what is wrong with this one") from exc
    for warning in source.warnings:
        warn(f"{path}: {warning}")
    scan = scan_log(data, reg, path=path)  # its lines as written, to copy byte for byte
    backend = backend_for("memory:")  # an in-memory store: the one URL mapping
    if scan.events:
        backend.append_batch(scan.header, scan.events, scan.jsonl, materialized=False)
    return backend


def _open_destination(url: str, dry_run: bool) -> Backend:
    if dry_run:  # creates nothing: a store that does not exist yet is empty
        return _opened(url, must_exist=True, empty_if_missing=True)
    return _opened(url, must_exist=False)


class _Bar:
    """One progress bar for the whole run, on stderr when it is a terminal: the events
    of the session being copied, and which session of how many."""

    def __init__(self) -> None:
        from .term import Progress

        self.bar: Progress = Progress(0, "copying", min_total=0, unit="events")

    def __call__(self, p: CopyProgress) -> None:
        from .term import shorten

        bar = self.bar
        bar.label = f"copying {p.index}/{p.count} {shorten(p.session_id, 24)}"
        bar.total, bar.done = max(p.total, 1), p.done
        bar.advance(0)

    def erase(self) -> None:
        self.bar.close()  # it draws again on the next advance


def _outcome(s: SessionCopy, dry_run: bool) -> str:
    """What happened to a session that was (or would be) copied, for people."""
    would = "would " if dry_run else ""
    if s.status == "copied":
        text = f"{would}copy {s.copied:,} event(s)" if dry_run else f"copied {s.copied:,} event(s)"
    elif s.status == "resumed":
        verb = "would append" if dry_run else "appended"
        text = f"{verb} {s.copied:,} event(s) to the {s.existing:,} already in DST"
    elif s.status == "up-to-date":
        text = f"up to date ({s.events:,} event(s))"
    else:
        text = "nothing to copy (no event stored)"
    if s.cut_destination_tail:
        text += f" · {would}cut a torn tail in DST"
    if s.source_torn:
        text += " · a torn tail in SRC is not copied (SRC is left as it is)"
    return text


def _summary(report: CopyReport) -> str:
    copied = report.count("copied", "resumed")
    verb = "would copy" if report.dry_run else "copied"
    parts = [f"{verb} {copied} session(s) ({report.copied_events:,} event(s))",
             f"{report.count('up-to-date')} up to date"]
    statuses: tuple[CopyStatus, ...] = (
        "empty", "missing", "diverged", "locked", "mismatch", "unstorable", "failed")
    for status in statuses:
        n = report.count(status)
        if n:
            parts.append(f"{n} {status}")
    text = ", ".join(parts)
    if report.dry_run:
        text += " (dry run: nothing was written)"
    elif report.verify and (copied or report.count("up-to-date")):
        text += "; verified"
    return text + "\n"


def _copy(args: argparse.Namespace) -> int:
    from .._persistence.copy import same_store
    from .source import out_json, out_text
    from .support import registry
    from .term import Style, printable

    if args.batch_size < 1:
        msg = f"--batch-size must be at least 1, got {args.batch_size}"
        raise Failure(msg, EXIT_USAGE)
    reg = registry()
    made = _check_destination(args.dst)  # before SRC is read: a usage error
    src = _open_source(args.src, reg)
    try:
        dst = _open_destination(args.dst, args.dry_run)
        try:
            if same_store(src, dst):
                msg = (f"SRC and DST are the same store ({_shown(args.src)} and "
                       f"{_shown(args.dst)})")
                raise Failure(msg, EXIT_USAGE, hint="copy into another folder or database")
            report = _run(args, src, dst, reg)
        finally:
            dst.close()
    finally:
        src.close()
    if made and (os.path.isdir(args.dst) or (args.dry_run and report.sessions)):
        # A path that did not exist is a new JSONL store: said, never done silently.
        verb = "would create" if args.dry_run else "created"
        sys.stderr.write(f"dsh-session: {verb} the JSONL store {printable(args.dst)} (a "
                         f"folder; a SQLite database is named sqlite:///PATH)\n")
    if args.debug:
        for s in report.sessions:
            if s.status == "failed" and s.cause is not None:
                raise s.cause
    if args.json:
        out_json({"source": _shown(args.src), "destination": _shown(args.dst),
                  **report.to_wire()})
        return EXIT_OK if report.ok else EXIT_REJECTED
    if not report.sessions:
        out_text(f"no sessions in {printable(_shown(args.src))}: nothing to copy\n")
        return EXIT_OK
    out_text(_summary(report))
    style = Style.for_stream(sys.stderr)
    for status, hint in _HINTS.items():
        if report.count(status):
            sys.stderr.write(f"{style('hint:', 'bold')} {hint}\n")
    return EXIT_OK if report.ok else EXIT_REJECTED


def _run(
    args: argparse.Namespace, src: Backend, dst: Backend, reg: EventRegistry
) -> CopyReport:
    from .._persistence.copy import copy_sessions
    from .source import out_text
    from .term import Style, printable

    bar = _Bar()
    style = Style.for_stream(sys.stderr)

    def done(s: SessionCopy) -> None:
        bar.erase()
        if args.json:
            return
        name = printable(s.session_id)
        if s.ok:
            out_text(f"{name}: {_outcome(s, args.dry_run)}\n")
            sys.stdout.flush()
        else:
            sys.stderr.write(f"dsh-session: {style('error:', 'red')} session \"{name}\" "
                             f"{s.status}: {printable(s.error or '')}\n")
            sys.stderr.flush()

    try:
        return copy_sessions(
            src, dst, args.session_ids, registry=reg,
            batch_size=args.batch_size, verify=args.verify, dry_run=args.dry_run,
            progress=bar, on_done=done,
        )
    except KeyboardInterrupt:
        bar.erase()
        msg = "interrupted: the sessions and batches already copied are kept"
        raise Failure(msg, hint="run the same command again to resume") from None
    except OSError as exc:
        bar.erase()
        msg = f"cannot list the sessions of {_shown(args.src)}: {exc.strerror or exc}"
        raise Failure(msg) from exc
    finally:
        bar.erase()


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Only argparse here: `dsh-session --help` must not import what the command uses.
    copy = sub.add_parser(
        "copy", help=HELP["copy"],
        description="Copy every session of SRC (or the --session ones) into DST, each "
                    "under its writer lock in DST. A session DST already holds a prefix of "
                    "is completed; one it holds something else under is refused, never "
                    "overwritten. Each copy is loaded back and checked against SRC.",
    )
    copy.add_argument("src", metavar="SRC",
                      help="the store to read: a folder, jsonl:///path, jsonl+zstd:///path "
                           "(compact), sqlite:///path.db or postgresql://user@host/dbname; "
                           "or a log file (its session)")
    copy.add_argument("dst", metavar="DST",
                      help="the store to write (created when missing, in a folder that "
                           "exists; a path is a JSONL folder: name a SQLite database "
                           "sqlite:///path.db)")
    copy.add_argument("--session", action="append", dest="session_ids", metavar="ID",
                      help="copy only this session (repeatable; default: every session)")
    copy.add_argument("--batch-size", type=int, default=2000, metavar="N",
                      help="events per write (default 2000): a crash loses at most one")
    copy.add_argument("--no-verify", action="store_false", dest="verify",
                      help="do not load each copy back to check it")
    copy.add_argument("--dry-run", action="store_true",
                      help="say what would be copied; write nothing")
    copy.add_argument("--json", action="store_true", help="print the report as JSON")
    copy.set_defaults(run=_copy)
