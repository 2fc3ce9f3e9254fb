"""An encrypted store: any backend, its records sealed at the store boundary.

:class:`SealedBackend` wraps a backend (JSONL, compact JSONL, SQLite, PostgreSQL, a
plugin's): what goes down is sealed (:mod:`.sealing`), what comes up is opened before
it is decoded, so the wrapped backend stores, recovers, tails, follows, counts and locks
sealed lines exactly as it does plaintext ones: a torn tail is cut by its own rules, a
fork is written (and sealed under the fork's id) like any new session.

The header is the one thing changed on the way down: its ``version`` is
:data:`~.header.SEALED_FORMAT_VERSION`, so the session says it is encrypted, and every
reader without keys (this library's, the reference's) refuses it rather than reading
ciphertext as data. On the way up a session not so marked is refused (a plaintext
session in an encrypted store), and so is every record that is not sealed.

The store's retention ledger (``dsh-session.retention``) is never sealed: it holds no
content (ids, rules, times, sizes), so a cleanup job without keys may write it and every
reader reads it; only a mark's note is sealed, alone (:mod:`.encryption.ledger`).

It passes on the wrapped backend's capabilities (:mod:`..capabilities`), each method
sealing or opening on the way, and only those: its record is the wrapped one's
(:class:`~..capabilities.Wrapper`), so over a backend that cannot delete, rewrite or read
some lines cheaply the store takes its way without (refuses, or loads the session), as
it does in the clear. What it does not pass on, on purpose: a native search (an index
would hold the plaintext; ``search`` loads, opens and scans each session instead) and
the asyncio twins (the store's worker thread runs the synchronous hooks, sealing
included).
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Collection, Hashable, Iterator, Sequence

import msgspec

from ..._schema.decode import decode_body
from ..._schema.header import SEALED_FORMAT_VERSION, SESSION_FORMAT_VERSION, SessionHeader
from ..._schema.registry import EventRegistry
from ...errors import EncryptionError
from ...events import Event
from ..base import (
    Backend,
    Deleted,
    LogNews,
    LogTail,
    SessionSummary,
    StoredLog,
    WriterLock,
    cannot_delete,
)
from ..base import stored_lines as _stored_lines
from ..capabilities import (
    Capabilities,
    capabilities_of,
    lines_of_types_of,
    lines_since_of,
    read_lines_of,
    summaries_of,
)
from ..rows import RowChanges
from .ledger import LEDGER_ID, open_lines, seal_notes
from .sealed_rows import SealedRows
from .sealing import Sealer, sealed_registry

__all__ = ["SealedBackend", "cannot_reseal", "plaintext_session"]



def plaintext_session(session_id: str) -> EncryptionError:
    """The error for a plaintext session found in an encrypted store."""
    return EncryptionError(
        f'session "{session_id}" is not encrypted (a plaintext log, format '
        f"v{SESSION_FORMAT_VERSION}), and this store was opened with keys: an encrypted "
        f"store refuses plaintext sessions. Read it without keys, or seal it in place "
        f"with this store's keys: store.rekey({session_id!r}), or dsh-session rekey "
        f"{session_id}",
        session_id=session_id,
    )


def cannot_reseal(backend: Backend, session_id: str) -> EncryptionError:
    """The error for a session to reseal in a backend that cannot rewrite one
    (:class:`~..capabilities.Rewritable`): nothing was changed."""
    return EncryptionError(
        f'the {backend.name} backend cannot rewrite a session in place, so session '
        f'"{session_id}" cannot be resealed there: copy it into a store that can',
        session_id=session_id)


class SealedBackend(SealedRows):
    """``inner``, its records sealed with ``sealer`` (see the module's docstring).

    The method of a capability ``inner`` lacks is not in this backend's record; called on
    the bare backend all the same, it refuses as ``inner`` would (:meth:`delete`,
    :meth:`delete_held`, :meth:`rewrite`) or reads as the store does without it.

    :param inner: the backend the sealed lines are stored in.
    :param sealer: the store's sealer (its keyring).
    """

    def __init__(self, inner: Backend, sealer: Sealer) -> None:
        self.inner = inner
        self.sealer = sealer
        self.name: str = inner.name
        #: What ``inner`` has: this backend has no more (a :class:`~..capabilities.
        #: Wrapper`), and its methods call ``inner``'s through it.
        self.inner_capabilities: Capabilities = capabilities_of(inner)
        #: Per session, how the batch of its last failed write was sealed.
        self._failed: dict[str, dict[int, tuple[bytes, bytes]]] = {}
        #: The retention ledger's last failed write: its lines, and how they went down.
        self._ledger_failed: tuple[bytes, Sequence[Event], bytes] | None = None

    # --- headers: marked on the way down, checked on the way up -------------------------

    @staticmethod
    def down(header: SessionHeader) -> SessionHeader:
        """The header as stored: marked sealed (the retention ledger's: as it is)."""
        if header.version == SEALED_FORMAT_VERSION or header.id == LEDGER_ID:
            return header
        return msgspec.structs.replace(header, version=SEALED_FORMAT_VERSION)

    @staticmethod
    def up(header: SessionHeader) -> SessionHeader:
        """The header as the store sees it: a sealed one as of the format it holds; any
        other as it is (:meth:`checked` refuses it where it would be read)."""
        if header.version == SEALED_FORMAT_VERSION:
            return msgspec.structs.replace(header, version=SESSION_FORMAT_VERSION)
        return header

    def checked(self, header: SessionHeader) -> SessionHeader:
        """:meth:`up`, refusing a plaintext session.

        :raises EncryptionError: the session is not sealed (and not the retention
            ledger, which is never sealed).
        """
        if header.version == SESSION_FORMAT_VERSION and header.id != LEDGER_ID:
            raise plaintext_session(header.id)
        return self.up(header)

    # --- loading ------------------------------------------------------------------------

    def _opened(self, stored: StoredLog | None, registry: EventRegistry) -> StoredLog | None:
        if stored is None:
            return None
        header = self.checked(stored.header)
        if header.version != SESSION_FORMAT_VERSION:  # another format: the store refuses
            return StoredLog(header, [], stored.torn, b"")
        plain = self.sealer.open_records(header.id, stored.events,
                                         lambda: _stored_lines(stored))
        body = b"\n".join(plain) + b"\n" if plain else b""
        return StoredLog(header, decode_body(registry, body), stored.torn, body)

    def _ledger(self, stored: StoredLog | None, registry: EventRegistry
                ) -> StoredLog | None:
        """The retention ledger as loaded in the clear; the records an earlier release
        sealed, opened."""
        if stored is None:
            return None
        header = self.up(stored.header)
        lines = _stored_lines(stored)
        plain = open_lines(self.sealer, lines)
        if plain == lines:
            return dataclasses.replace(stored, header=header)
        body = b"\n".join(plain) + b"\n" if plain else b""
        return StoredLog(header, decode_body(registry, body), stored.torn, body)

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        if session_id == LEDGER_ID:
            return self._ledger(self.inner.load_stored(session_id, registry), registry)
        return self._opened(self.inner.load_stored(session_id, sealed_registry(registry)),
                            registry)

    def load_live(self, session_id: str, cwd: str | None, registry: EventRegistry
                  ) -> StoredLog | None:
        if session_id == LEDGER_ID:
            return self._ledger(self.inner.load_live(session_id, cwd, registry), registry)
        return self._opened(
            self.inner.load_live(session_id, cwd, sealed_registry(registry)), registry)

    # --- writing ------------------------------------------------------------------------

    def append_batch(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                     materialized: bool) -> None:
        self._append(header, events, jsonl, materialized, None)

    def append_projected(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool,
                         changes: Sequence[RowChanges]) -> None:
        self._append(header, events, jsonl, materialized,
                     self.sealed_changes(header.id, changes))

    def _down(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
              materialized: bool, changes: Sequence[RowChanges] | None) -> None:
        """The inner backend's append (with the sealed rows' changes, when given)."""
        if changes is None:
            self.inner.append_batch(header, events, jsonl, materialized)
        else:
            self._projecting().append_projected(header, events, jsonl, materialized,
                                                changes)

    def _append(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                materialized: bool, changes: Sequence[RowChanges] | None) -> None:
        # A failed write is retried with the same events: they are sealed to the same
        # bytes again (Sealer.seal's ``again``), for a backend that published the failed
        # write (a JSONL first write) adopts it only when the retry's bytes begin with it.
        if header.id == LEDGER_ID:
            # A retry of a failed write stores the very bytes the failed one was to (a
            # note is sealed with a fresh nonce), as for a session's records below.
            failed, self._ledger_failed = self._ledger_failed, None
            if failed is not None and failed[0] == jsonl:
                plain, down = failed[1], failed[2]
            else:
                plain, down = seal_notes(self.sealer, events, jsonl, reseal=False)
            try:
                self._down(header, plain, down, materialized, changes)
            except BaseException:
                self._ledger_failed = (jsonl, plain, down)
                raise
            return
        again = self._failed.pop(header.id, None)
        sealed, lines = self.sealer.seal(header.id, events, jsonl, again)
        try:
            self._down(self.down(header), sealed, lines, materialized, changes)
        except BaseException:
            self._failed[header.id] = self.sealer.nonces(events, jsonl, sealed)
            raise

    def commit_repair(self, header: SessionHeader, torn: object | None,
                      closers: Sequence[Event], jsonl: bytes) -> None:
        if header.id == LEDGER_ID:
            plain, jsonl = seal_notes(self.sealer, closers, jsonl, reseal=False)
            self.inner.commit_repair(header, torn, plain, jsonl)
            return
        sealed, lines = self.sealer.seal(header.id, closers, jsonl)
        self.inner.commit_repair(self.down(header), torn, sealed, lines)

    def rewrite(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes) -> None:
        """Replace the session's records with ``events``, sealed now (under the current
        key), atomically where the wrapped backend rewrites (:class:`~.capabilities.
        Rewritable`). The retention ledger is rewritten in the clear, its notes sealed
        under the current key.

        :raises EncryptionError: the wrapped backend cannot rewrite a session.
        """
        rewritable = self.inner_capabilities.rewritable
        if rewritable is None:
            raise cannot_reseal(self.inner, header.id)
        if header.id == LEDGER_ID:
            plain, jsonl = seal_notes(self.sealer, events, jsonl, reseal=True)
            rewritable.rewrite(header, plain, jsonl)
            return
        sealed, lines = self.sealer.seal(header.id, events, jsonl)
        rewritable.rewrite(self.down(header), sealed, lines)

    # --- the rest of the protocol, passed on --------------------------------------------

    def list(self) -> builtins.list[SessionHeader]:
        return [self.up(h) for h in self.inner.list()]

    def acquire(self, header: SessionHeader) -> WriterLock:
        return self.inner.acquire(self.down(header))

    def location(self, header: SessionHeader) -> str:
        return self.inner.location(self.down(header))

    def check_id(self, session_id: str) -> None:
        self.inner.check_id(session_id)

    def close(self) -> None:
        self.inner.close()

    def exists(self) -> bool:
        return self.inner.exists()

    def store_identity(self) -> Hashable | None:
        return self.inner.store_identity()

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        deleted = self.inner_capabilities.deletable
        if deleted is None:
            raise cannot_delete(self.inner, session_id)
        gone = deleted.delete(session_id, dry_run=dry_run)
        if not dry_run:
            self.sealer.forget(session_id)
        if gone.header is None:
            return gone
        return dataclasses.replace(gone, header=self.up(gone.header))

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        held = self.inner_capabilities.held_deletable
        if held is None:
            raise cannot_delete(self.inner, session_id)
        gone = held.delete_held(session_id, lock)
        self.sealer.forget(session_id)
        if gone.header is None:
            return gone
        return dataclasses.replace(gone, header=self.up(gone.header))

    def scrub(self) -> str:
        """The wrapped backend's :class:`~..capabilities.Scrubbable` scrub (sealed or
        not, what a delete leaves is the wrapped backend's to clear)."""
        scrubbable = self.inner_capabilities.scrubbable
        if scrubbable is None:
            from ...errors import PersistenceError

            msg = f"the {self.inner.name} backend cannot scrub what its deletes leave"
            raise PersistenceError(msg, session_id="")
        return scrubbable.scrub()

    def summaries(self) -> builtins.list[SessionSummary]:
        return [self._summary(s) for s in self.inner.summaries()]

    def summaries_of(self, headers: Sequence[SessionHeader]
                     ) -> builtins.list[SessionSummary]:
        found = summaries_of(self.inner_capabilities, [self.down(h) for h in headers])
        return [self._summary(s) for s in found]

    def _summary(self, summary: SessionSummary) -> SessionSummary:
        return dataclasses.replace(summary, header=self.up(summary.header))

    # --- reading lines: each opened ------------------------------------------------------

    def _open(self, session_id: str, lines: builtins.list[bytes] | None
              ) -> builtins.list[bytes] | None:
        if lines is None:
            return None
        if session_id == LEDGER_ID:
            return open_lines(self.sealer, lines)
        return self.sealer.open_lines(session_id, lines)

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        tail = self.inner.tail_lines(session_id, count)
        if tail is None:
            return None
        return LogTail(self._open(session_id, tail.lines) or [], tail.position)

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        found = read_lines_of(self.inner_capabilities, session_id, after, limit)
        return self._open(session_id, found)

    def lines_of_types(self, session_id: str, types: Collection[str]
                       ) -> builtins.list[bytes] | None:
        found = lines_of_types_of(self.inner_capabilities, session_id, types)
        return self._open(session_id, found)

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        # The envelope (seq, type, time) the inner backend compares with ``last`` is
        # the sealed line's own.
        found = lines_since_of(self.inner_capabilities, self.down(header), last)
        return self._open(header.id, found)

    def follow_lines(self, session_id: str, position: object, *,
                     timeout: float | None = None) -> Iterator[LogNews]:
        for news in self.inner.follow_lines(session_id, position, timeout=timeout):
            yield dataclasses.replace(news, lines=self._open(session_id, news.lines) or [])
