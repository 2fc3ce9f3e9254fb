"""Forgetting from a durable store: a session's content removed for good, everywhere.

:meth:`~StoreForget.forget` one session, :meth:`~StoreForget.forget_all` every session
of some named labels (a person: an ADK user's sessions and state), with their asyncio
twins. What a forget does is :mod:`.retention.forget`'s (docs/erasing.md); this is the
store's side: its methods, and the store it opens on an archive to forget there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from .base import StoreBase

if TYPE_CHECKING:
    from ..base import Backend
    from ..retention.forget import Forgotten
    from .durable import DurableStore

__all__ = ["StoreForget", "selected"]


def selected(store: DurableStore, labels: Mapping[str, str] | None, ids: Sequence[str],
             archives: Sequence[str] = ()) -> list[str]:
    """What :meth:`StoreForget.forget_all` forgets: ``ids`` (as given, first), then the
    sessions of ``labels`` in the store and in its archives (those the ledger names,
    and ``archives``), sorted."""
    from ..backends.url_backends import backend_for
    from ..retention.forget import archives_of, matching

    chosen = list(dict.fromkeys(ids))
    if labels is None:
        return chosen
    found = set(matching(store, labels))
    for url in dict.fromkeys([*archives, *archives_of(store, None)]):
        try:
            backend = backend_for(url, create=False, plugins=lambda: store.plugin_manager)
        except Exception:  # reported by the forget, which opens it again
            continue
        with store._archive_store(backend) as archive:
            found.update(matching(archive, labels))
    return chosen + sorted(found - set(chosen))


class StoreForget(StoreBase):
    """The forgetting part of :class:`~.durable.DurableStore` (see the module's
    docstring)."""

    def forget(self, session_id: str, *, archives: Sequence[str] = (),
               rule: str = "forget") -> Forgotten:
        """Remove a session's content for good (docs/erasing.md): its log, projection
        rows and summaries and search index entries (the backend's delete, under the
        session's writer lock), its copies in the archives ``prune --archive`` put it
        in (the ledger names them) and in ``archives``; then what the deletes left is
        made unreadable (the backend's scrub: SQLite vacuumed with its freed pages
        zeroed and its write-ahead log truncated, a JSONL store's projection sidecar
        the same and its header cache rewritten, PostgreSQL's tables vacuumed, a Redis
        server's append-only file rewritten and its snapshot saved anew); with a
        keyring given ``drop=``, the session's keys are dropped (crypto-shredding).
        The retention ledger records that a forget happened (``retention/forgotten``:
        a digest of the id, never the id), and every earlier record naming the session
        (its never-prune mark and note, its removal records) is taken out of it.

        A session marked never to be pruned is forgotten all the same (its mark goes).
        Forks are other sessions: forget them by their ids.

        :param archives: archive URLs to forget it in, beside those the ledger names.
        :param rule: the door the record names (``forget``; ``dsh-session forget``
            says ``forget-cli``, an integration its own).
        :returns: what was done, and what could not be (:attr:`Forgotten.left
            <dsh_session_core.Forgotten.left>`: check it).
        :raises SessionLockedError: a writer holds the session (nothing is removed), or
            another prune, rm, retain or forget writes the ledger.
        :raises SessionNotStoredError: neither the store nor an archive holds it.
        :raises ValueError: the retention ledger's id.
        """
        [done] = self._forget([session_id], archives, rule)
        return done

    def forget_all(self, labels: Mapping[str, str] | None = None, *,
                   ids: Sequence[str] = (), archives: Sequence[str] = (),
                   rule: str = "forget") -> list[Forgotten]:
        """:meth:`forget` several sessions at once (what the deletes left is scrubbed
        once): ``ids``, and every session whose named labels hold every pair of
        ``labels`` (the ``session_labels`` hook: the ADK adapter names each session's
        and each user's state's ``app`` and ``user``; the key ``label`` is the label a
        plugin shows, as ``prune --per label`` reads it), in the store and in the
        archives the ledger names (and ``archives``). A person's data:
        ``store.forget_all({"app": "weather", "user": "ada"})``.

        :returns: one :class:`~dsh_session_core.Forgotten` per session, by id (none:
            nothing matched).
        :raises ValueError: an empty ``labels``.
        :raises SessionLockedError: a writer holds one of them (nothing is removed).
        :raises SessionNotStoredError: one of ``ids`` that no store holds (nothing is
            removed).
        """
        chosen = selected(cast("DurableStore", self), labels, ids, archives)
        return self._forget(chosen, archives, rule) if chosen else []

    def _forget(self, ids: Sequence[str], archives: Sequence[str], rule: str
                ) -> list[Forgotten]:
        from ..retention.forget import forget

        return forget(cast("DurableStore", self), ids, rule=rule, archives=archives,
                      archive_store=self._archive_store)

    def _archive_store(self, backend: Backend) -> DurableStore:
        """A store on an archive's backend (it closes the backend), with plugins of its
        own (a plugin manager registers one store's persistence)."""
        from ..encryption.sealed import SealedBackend

        own = self.backend
        if isinstance(own, SealedBackend) and not isinstance(backend, SealedBackend):
            backend = SealedBackend(backend, own.sealer)
        made = cast("DurableStore", type(self)(backend))  # (DurableStore: its mixin)
        return made

    async def aforget(self, session_id: str, *, archives: Sequence[str] = (),
                      rule: str = "forget") -> Forgotten:
        """:meth:`forget` for asyncio hosts, in the store's worker thread."""
        done: Forgotten = await self._worker().run(self.forget, session_id,
                                                   archives=archives, rule=rule)
        return done

    async def aforget_all(self, labels: Mapping[str, str] | None = None, *,
                          ids: Sequence[str] = (), archives: Sequence[str] = (),
                          rule: str = "forget") -> list[Forgotten]:
        """:meth:`forget_all` for asyncio hosts, in the store's worker thread."""
        done: list[Forgotten] = await self._worker().run(
            self.forget_all, labels, ids=ids, archives=archives, rule=rule)
        return done
