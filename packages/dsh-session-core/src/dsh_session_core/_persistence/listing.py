"""How a stored session is listed: hidden or not, its label, its name, its named labels.

Whether lists hide it, and the label shown for it, as the installed plugins say (the
``hide_session`` and ``label_session`` hooks; core hides its retention ledger), the name
a person types for it and whether it is deleted in its framework's eyes
(``name_session``, from summary rows: :class:`SessionName`; read from a store by
``projections/naming.py``), and its named labels (``session_labels``: retention's
groups). The public functions here are
what ``dsh-session ls``, ``show`` and the viewer ask, so that none of them knows a
plugin's sessions.

The hooks get what the reader can read, or nothing (:class:`StoredEvents`): a session
it cannot read (encrypted and listed without keys, a key not in the keyring, a damaged
record) is listed by its header, and never takes the listing down."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._base.names import RETENTION_LEDGER_ID

if TYPE_CHECKING:
    from .._errors.base import DshSessionError
    from .._plugins.manager import PluginManager
    from .._schema.header import SessionHeader
    from .._schema.registry import EventRegistry
    from ..events import Event
    from .base import Backend

__all__ = [
    "SessionName",
    "StoredEvents",
    "is_hidden",
    "label_of",
    "labels_of",
    "manager_of",
    "name_of",
    "named_labels",
    "stored_label",
]


def manager_of(plugins: PluginManager | None) -> PluginManager:
    """``plugins``, or the installed plugins, loaded for this call."""
    if plugins is not None:
        return plugins
    from .._plugins.manager import create_plugin_manager

    return create_plugin_manager()


def is_hidden(header: SessionHeader, *, plugins: PluginManager | None = None) -> bool:
    """Whether lists leave this session out unless asked for every one (a plugin's
    ``hide_session`` says so). Reads nothing but the header.

    :param plugins: the plugin manager to ask (default: the installed plugins, loaded
        for this call: pass one when asking for many sessions).
    """
    if header.id == RETENTION_LEDGER_ID:  # core's own bookkeeping: the retention ledger
        return True
    return bool(manager_of(plugins).hook.hide_session(header=header))


def label_of(header: SessionHeader, first_events: Callable[[int], Sequence[Event]], *,
             plugins: PluginManager | None = None) -> str | None:
    """The label a plugin gives this session (``label_session``), or ``None``.

    :param first_events: reads the session's first ``n`` events (called only by a plugin
        that needs them).
    :param plugins: as for :func:`is_hidden`.
    """
    pm = manager_of(plugins)
    if not pm.hook.label_session.get_hookimpls():
        return None
    read: dict[int, Sequence[Event]] = {}

    def once(count: int) -> Sequence[Event]:  # two plugins asking read the log once
        if count not in read:
            read[count] = first_events(count)
        return read[count]

    label = pm.hook.label_session(header=header, first_events=once)
    return cast("str | None", label) if isinstance(label, str) and label else None


def named_labels(backend: Backend, header: SessionHeader, registry: EventRegistry, *,
                 plugins: PluginManager | None = None) -> dict[str, str]:
    """The named labels the plugins give a stored session (``session_labels``: the ADK
    adapter's ``app`` and ``user``), merged, the first plugin's value for a name
    winning; its first events are read as :func:`stored_label` reads them."""
    return labels_of(header, StoredEvents(backend, header, registry), plugins=plugins)


def labels_of(header: SessionHeader, first_events: Callable[[int], Sequence[Event]], *,
              plugins: PluginManager | None = None) -> dict[str, str]:
    """:func:`named_labels`, its first events read by ``first_events``."""
    pm = manager_of(plugins)
    if not pm.hook.session_labels.get_hookimpls():
        return {}
    merged: dict[str, str] = {}
    for answer in pm.hook.session_labels(header=header, first_events=first_events):
        if isinstance(answer, Mapping):
            for name, value in answer.items():
                if isinstance(name, str) and isinstance(value, str):
                    merged.setdefault(name, value)
    return merged


class StoredEvents:
    """What a listing hook's ``first_events`` reads of a stored session: its first
    ``n`` events, read once per ``n`` and decoded, or none at all when the reader
    cannot read them, so that a plugin never gets a sealed box as a payload and one
    session never takes a listing down: an encrypted session listed without keys
    (nothing of it is read), a record whose key is not in the keyring (a
    crypto-shredded session), one that fails its authentication, or one that does
    not read (a damaged log).

    :ivar problem: why nothing was read, once a hook asked (``None`` until then, and
        when the session read).
    """

    def __init__(self, backend: Backend, header: SessionHeader,
                 registry: EventRegistry) -> None:
        self._backend = backend
        self._header = header
        self._registry = registry
        self._read: dict[int, Sequence[Event]] = {}
        self.problem: DshSessionError | None = None

    def __call__(self, count: int) -> Sequence[Event]:
        from .._schema.decode import decode_lines
        from .._schema.header import SEALED_FORMAT_VERSION
        from ..errors import EncryptedSessionError, EncryptionError, LogFormatError
        from .capabilities import read_lines_of

        if self.problem is not None:
            return []
        if self._header.version == SEALED_FORMAT_VERSION:  # listed by a store without keys
            self.problem = EncryptedSessionError(self._header.id)
            return []
        if count not in self._read:  # two plugins asking read the log once
            try:
                lines = read_lines_of(self._backend, self._header.id, -1, max(count, 0))
                found = [] if lines is None else decode_lines(self._registry, lines)
            except (EncryptionError, LogFormatError) as exc:
                self.problem = exc
                return []
            self._read[count] = found
        return self._read[count]


def stored_label(backend: Backend, header: SessionHeader, registry: EventRegistry, *,
                 plugins: PluginManager | None = None) -> str | None:
    """:func:`label_of` a session stored in ``backend``: its first events are read (only
    those: a JSONL log's first lines, a database's first keys) and decoded with
    ``registry`` when a plugin asks for them."""
    return label_of(header, StoredEvents(backend, header, registry), plugins=plugins)


# --- names --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class SessionName:
    """The name a person knows a stored session by, when its id says nothing (the ADK
    adapter's ``app/user/session``), as a plugin's ``name_session`` gives it: the
    command line's ``show``, ``tail``, ``rm``, ``search`` and ``view`` take it for the
    id, listings and hits print it.

    :ivar name: the name, as typed on the command line.
    :ivar deleted: the framework deleted the session (its log stays): ``ls`` marks it,
        and hides it unless ``--all``.
    """

    name: str
    deleted: bool = False


def name_of(header: SessionHeader, projection: Callable[[str], Any], *,
            plugins: PluginManager | None = None) -> SessionName | None:
    """The name a plugin gives this session (``name_session``), or ``None``.

    :param projection: reads one of the session's projections by name (called only by a
        plugin that needs it).
    :param plugins: as for :func:`is_hidden`.
    """
    pm = manager_of(plugins)
    if not pm.hook.name_session.get_hookimpls():
        return None
    found = pm.hook.name_session(header=header, projection=projection)
    if isinstance(found, SessionName) and isinstance(found.name, str) and found.name:
        return found
    return None
