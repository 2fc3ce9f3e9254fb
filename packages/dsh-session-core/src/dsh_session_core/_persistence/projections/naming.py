"""The names plugins give stored sessions, read from their summary rows.

What a ``name_session`` hook reads of a stored session (:class:`SessionProjections`: its
projections' views, or nothing when the reader cannot read them), and the names of one
stored session or of many (:func:`stored_name`, :func:`stored_names`): what
``dsh-session ls``, the name lookup of the read model and ``search`` ask. The hook's
answer is read by :func:`~..listing.name_of`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from ..listing import SessionName, manager_of, name_of

if TYPE_CHECKING:
    from ..._plugins.manager import PluginManager
    from ..._schema.header import SessionHeader
    from ..._schema.registry import EventRegistry
    from ..base import Backend
    from .read import ProjectionView

__all__ = ["SessionProjections", "stored_name", "stored_names"]


class SessionProjections:
    """What a ``name_session`` hook's ``projection`` reads of a stored session: the view
    of one of its projections (:class:`~.projections.read.ProjectionView`: its summary
    row, its rows by key), or ``None`` when the reader cannot read it: an encrypted
    session read without keys, a record whose key is not in the keyring, one that does
    not read, a projection no installed plugin declares. So one session never takes a
    listing down, and a plugin never gets a sealed box as a row.

    :ivar problem: why a projection was not read, once one was not (else ``None``).
    """

    def __init__(self, backend: Backend, header: SessionHeader,
                 registry: EventRegistry) -> None:
        self._backend = backend
        self._header = header
        self._registry = registry
        self._read: dict[str, ProjectionView[Any] | None] = {}
        self.problem: Exception | None = None

    def __call__(self, name: str) -> ProjectionView[Any] | None:
        import msgspec

        from ..._schema.header import SEALED_FORMAT_VERSION
        from ...errors import EncryptedSessionError, EncryptionError, LogFormatError
        from ..capabilities import capabilities_of
        from .read import open_view

        if name in self._read:
            return self._read[name]
        if self._header.version == SEALED_FORMAT_VERSION:  # listed by a store without keys
            self.problem = EncryptedSessionError(self._header.id)
            return None
        projection = next((p for p in self._registry.projections if p.name == name), None)
        view = None
        if projection is not None:
            try:
                opened = open_view(capabilities_of(self._backend), self._registry,
                                   projection, self._header.id)
                view = None if opened is None else cast("ProjectionView[Any]",
                                                        _SafeView(opened))
            except (EncryptionError, LogFormatError, msgspec.DecodeError,
                    msgspec.ValidationError) as exc:
                self.problem = exc
        self._read[name] = view
        return view


class _SafeView:
    """A :class:`~.projections.read.ProjectionView` whose ``summary`` and ``get`` give
    ``None`` on a row that does not read (its key gone, damaged)."""

    __slots__ = ("_view",)

    def __init__(self, view: ProjectionView[Any]) -> None:
        self._view = view

    def summary(self) -> Any:
        return self._guard(self._view.summary)

    def get(self, key: str) -> Any:
        return self._guard(lambda: self._view.get(key))

    def rows(self, **query: Any) -> list[tuple[str, Any]]:
        found = self._guard(lambda: self._view.rows(**query))
        return [] if found is None else list(found)

    @staticmethod
    def _guard(read: Callable[[], Any]) -> Any:
        import msgspec

        from ...errors import EncryptionError, LogFormatError

        try:
            return read()
        except (EncryptionError, LogFormatError, msgspec.DecodeError,
                msgspec.ValidationError):
            return None


def stored_name(backend: Backend, header: SessionHeader, registry: EventRegistry, *,
                plugins: PluginManager | None = None) -> SessionName | None:
    """:func:`name_of` a session stored in ``backend``: its projections are read (their
    summary rows, sealed on an encrypted store: opened only with keys) when a plugin
    asks for them."""
    return name_of(header, SessionProjections(backend, header, registry), plugins=plugins)


def stored_names(backend: Backend, headers: Iterable[SessionHeader],
                 registry: EventRegistry, *, plugins: PluginManager | None = None
                 ) -> dict[str, SessionName]:
    """The names of the sessions of ``headers`` that a plugin names, by session id
    (nothing is read when no plugin names sessions)."""
    pm = manager_of(plugins)
    if not pm.hook.name_session.get_hookimpls():
        return {}
    named: dict[str, SessionName] = {}
    for header in headers:
        found = stored_name(backend, header, registry, plugins=pm)
        if found is not None:
            named[header.id] = found
    return named
