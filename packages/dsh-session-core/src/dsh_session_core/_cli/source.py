"""The SOURCE of the session commands, on the command line.

``SOURCE``, ``--store``, ``--file``/``--id`` and ``--recover``
(:func:`add_source_arguments`), turned into the read model's
:class:`~.._inspect.sources.SourceSpec` (:func:`spec_of`) and read by its rule
(:mod:`.._inspect.sources`: a log file, or a session id in a store, read without writing
anything or taking a lock). What the read model refuses becomes a
:class:`~.support.Failure` here (:func:`~.support.failure_of`, the row of main's one
table for the read model's errors): a command that reads several SOURCEs catches it to
report each in a row of its own (``validate``, ``derive --jsonl``). This module adds
nothing to the read model's rules."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .support import Failure, failure_of, warn, write

if TYPE_CHECKING:
    from .._inspect.sources import Source, SourceSpec
    from .._persistence.base import Backend
    from .._schema.registry import EventRegistry
    from ..errors import StoreFolderError
    from ..events import Event

# The read model is imported on use: building the parsers (``dsh-session --help``) must
# not load it (dataclasses, msgspec).
__all__ = [
    "add_key_argument",
    "add_source_arguments",
    "check_session_id",
    "find_stored",
    "folder_failure",
    "is_log_file",
    "load_source",
    "not_found",
    "open_backend",
    "out_json",
    "out_text",
    "payload",
    "read_bytes",
    "refuse_sealed",
    "resolve",
    "spec_of",
    "store_url",
    "warn",
]


def out_text(text: str) -> None:
    """Text on stdout; what UTF-8 cannot hold (a lone surrogate) becomes ``?``."""
    write(text.encode("utf-8", "replace"))


def out_json(doc: object) -> None:
    """One JSON document on stdout, on one line (lone surrogates escaped as JS does)."""
    from .._schema.codec import encode_line

    write(encode_line(doc) + b"\n")


def payload(event: Event) -> dict[str, Any]:
    """An event's ``data`` in its wire shape, or ``{}`` when it is not an object (an
    opaque event may hold anything there)."""
    from .._inspect.describe import wire_of

    data = wire_of(event.data)
    return data if isinstance(data, dict) else {}


def read_bytes(path: str, label: str = "reading") -> bytes:
    """A whole log file, with a progress bar on a terminal when it is big."""
    from .support import read_file

    return read_file(path, label)


def _scanned(path: str, data: bytes, reg: EventRegistry) -> Source:
    """The log file ``path`` read by the durable load rules (``--recover``)."""
    from .._inspect.sources import scanned_source
    from ..errors import InspectError

    try:
        return scanned_source(path, data, reg)
    except InspectError as exc:
        raise failure_of(exc) from exc.__cause__ or exc


def is_log_file(source: str) -> bool:
    """Whether SOURCE names a log file (:func:`~.._inspect.sources.is_log_file`)."""
    from .._inspect.sources import is_log_file as is_file

    return is_file(source)


def spec_of(args: argparse.Namespace, source: str | None = None) -> SourceSpec:
    """The read model's SOURCE of a command's arguments (``source``: instead of
    ``args.source``)."""
    from .._inspect.sources import SourceSpec

    return SourceSpec(args.source if source is None else source,
                      store=getattr(args, "store", None),
                      as_file=bool(getattr(args, "as_file", False)),
                      as_id=bool(getattr(args, "as_id", False)),
                      recover=bool(getattr(args, "recover", False)),
                      prefixes=bool(getattr(args, "prefixes", False)))


def store_url(args: argparse.Namespace) -> str:
    """``--store``, else the default store's URL.

    :raises Failure: ``--store ""`` (usage).
    """
    from .._inspect.stores import store_url as url_of
    from ..errors import InspectError

    try:
        return url_of(getattr(args, "store", None))
    except InspectError as exc:
        raise failure_of(exc) from None


def open_backend(url: str, *, must_exist: bool = True, empty_if_missing: bool = False
                 ) -> Backend:
    """The backend of a store, for reading (:func:`~.._inspect.stores.open_store`).

    :raises Failure: what the read model refuses.
    """
    from .._inspect.stores import open_store
    from ..errors import InspectError

    try:
        return open_store(url, must_exist=must_exist, empty_if_missing=empty_if_missing)
    except InspectError as exc:
        raise failure_of(exc) from exc.__cause__ or exc


def refuse_sealed(backend: Backend, session_id: str) -> None:
    """Refuse, in one line, to print the lines of an encrypted session read without
    keys (they are ciphertext: a store opened with keys gives their plaintext).

    :raises Failure: the session is encrypted, and ``backend`` has no keys.
    """
    from .._schema.header import SEALED_FORMAT_VERSION
    from ..errors import EncryptedSessionError

    if any(h.id == session_id and h.version == SEALED_FORMAT_VERSION
           for h in backend.list()):
        raise Failure(str(EncryptedSessionError(session_id)))


def folder_failure(exc: StoreFolderError) -> Failure:
    """The failure for a store that would be created in a folder that does not exist."""
    from .._inspect.stores import folder_error

    return failure_of(folder_error(exc))


def not_found(session_id: str, url: str) -> Failure:
    """The failure for a SOURCE that is neither a file nor a session in the store."""
    from .._inspect.sources import not_found as missing

    return failure_of(missing(session_id, url))


def check_session_id(backend: Backend, session_id: str) -> None:
    """Refuse (usage), as one line naming the rule, an id the store's backend cannot
    hold."""
    from .._inspect.sources import check_session_id as check
    from ..errors import InspectError

    try:
        check(backend, session_id)
    except InspectError as exc:
        raise failure_of(exc) from None


def find_stored(backend: Backend, text: str, url: str, *, prefixes: bool = False) -> str:
    """The id of the session ``text`` names in ``backend``: its id, its name, or (with
    ``prefixes``) an unambiguous id prefix (:mod:`.._inspect.lookup`'s rule); ``text``
    itself when it names none (the caller says it is not there).

    :raises Failure: a name or a prefix that names several sessions.
    """
    from .._inspect.lookup import find_session
    from ..errors import InspectError
    from .support import plugin_manager, registry

    try:
        return find_session(backend, text, url, registry=registry(), plugins=plugin_manager(),
                            prefixes=prefixes) or text
    except InspectError as exc:
        raise failure_of(exc) from None


def resolve(source: str, args: argparse.Namespace) -> str:
    """How SOURCE is read: ``"file"`` or ``"id"``
    (:func:`~.._inspect.sources.resolve_source`).

    :raises Failure: what the read model refuses.
    """
    from .._inspect.sources import resolve_source
    from ..errors import InspectError

    try:
        return resolve_source(spec_of(args, source))
    except InspectError as exc:
        raise failure_of(exc) from exc.__cause__ or exc


def load_source(args: argparse.Namespace, reg: EventRegistry,
                source: str | None = None) -> Source:
    """The session ``source`` (default: ``args.source``) names, read by the read
    model's rule; a big file shows a progress bar on a terminal, and what is odd about
    its bytes is a warning on stderr at once.

    :raises Failure: what the read model refuses.
    """
    from .._inspect.sources import load_source as load
    from ..errors import InspectError
    from .term import Progress

    try:
        return load(spec_of(args, source), reg, progress=Progress, report=warn)
    except InspectError as exc:
        raise failure_of(exc) from exc.__cause__ or exc


#: The ``--store`` help of every command that reads a SOURCE.
STORE_HELP = ("the store holding a SOURCE that is a session id: a folder, jsonl:///path, "
              "jsonl+zstd:///path (compact), sqlite:///path.db or postgresql://host/dbname "
              "(default: $DSH_SESSION_STORE, else the user's data folder)")


#: The ``--key-env`` help of every command that reads or writes a store.
KEY_ENV_HELP = ("the environment variable holding an encrypted store's keys, "
                "kid:base64key[,...] the first the current (default: DSH_SESSION_KEYS; "
                "without keys an encrypted session is refused)")


def add_key_argument(parser: argparse.ArgumentParser) -> None:
    """``--key-env NAME``: where the keys of an encrypted store are (docs/encryption.md)."""
    parser.add_argument("--key-env", metavar="NAME", help=KEY_ENV_HELP)


#: The SOURCE help of a read command that takes an id prefix (show, tail, view).
PREFIX_SOURCE_HELP = ("a log file (.jsonl), or a session in the store: its id, its name "
                      "(an ADK session's app/user/session), or an unambiguous prefix of "
                      "its id")


def add_source_arguments(parser: argparse.ArgumentParser, *, many: bool = False,
                         recover: bool = True, optional: str | None = None,
                         prefixes: bool = False) -> None:
    """SOURCE (one, or with ``many`` one or more), ``--store``, ``--file``/``--id``, and
    ``--recover``: the same arguments, with the same meaning, on every command that
    reads sessions.

    :param optional: SOURCE may be left out; this says what it does when given.
    :param prefixes: SOURCE may be an unambiguous prefix of a stored session's id, as
        git takes a short object id: for the commands that only read and show (never
        for one that writes or removes).
    """
    if prefixes:
        parser.set_defaults(prefixes=True)
    if many:
        parser.add_argument("sources", nargs="+", metavar="SOURCE",
                            help="log files (.jsonl) or ids of sessions in the store")
    elif optional is not None:
        parser.add_argument("source", nargs="?", metavar="SOURCE", help=optional)
    else:
        parser.add_argument("source", metavar="SOURCE",
                            help=PREFIX_SOURCE_HELP if prefixes else
                            "a log file (.jsonl), or the id of a session in the store")
    parser.add_argument("--store", metavar="URL", help=STORE_HELP)
    add_key_argument(parser)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--file", dest="as_file", action="store_true",
                     help="read SOURCE as a file path, never a session id")
    how.add_argument("--id", dest="as_id", action="store_true",
                     help="read SOURCE as a session id, even when a file has its name")
    if recover:
        parser.add_argument(
            "--recover", action="store_true",
            help="read a file as a durable backend loads it: a torn tail is dropped, "
                 "a hole before the last turn/end is an error",
        )
