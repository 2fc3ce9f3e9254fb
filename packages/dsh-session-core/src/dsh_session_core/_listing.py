"""How a stored session is listed: whether lists hide it, and the label shown for it,
as the installed plugins say (the ``hide_session`` and ``label_session`` hooks; core hides
its retention ledger), and its named labels (``session_labels``: retention's groups). The
public functions here are what ``dsh-session ls``, ``show`` and the viewer ask, so that
none of them knows a plugin's sessions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from ._names import RETENTION_LEDGER_ID

if TYPE_CHECKING:
    from ._header import SessionHeader
    from ._persistence.base import Backend
    from ._plugins import PluginManager
    from ._registry import EventRegistry
    from .events import Event

__all__ = ["is_hidden", "label_of", "named_labels", "stored_label"]


def _manager(plugins: PluginManager | None) -> PluginManager:
    if plugins is not None:
        return plugins
    from ._plugins import create_plugin_manager

    return create_plugin_manager()


def is_hidden(header: SessionHeader, *, plugins: PluginManager | None = None) -> bool:
    """Whether lists leave this session out unless asked for every one (a plugin's
    ``hide_session`` says so). Reads nothing but the header.

    :param plugins: the plugin manager to ask (default: the installed plugins, loaded
        for this call: pass one when asking for many sessions).
    """
    if header.id == RETENTION_LEDGER_ID:  # core's own bookkeeping: the retention ledger
        return True
    return bool(_manager(plugins).hook.hide_session(header=header))


def label_of(header: SessionHeader, first_events: Callable[[int], Sequence[Event]], *,
             plugins: PluginManager | None = None) -> str | None:
    """The label a plugin gives this session (``label_session``), or ``None``.

    :param first_events: reads the session's first ``n`` events (called only by a plugin
        that needs them).
    :param plugins: as for :func:`is_hidden`.
    """
    pm = _manager(plugins)
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
    pm = _manager(plugins)
    if not pm.hook.session_labels.get_hookimpls():
        return {}
    first_events = _first_events(backend, header, registry)
    merged: dict[str, str] = {}
    for answer in pm.hook.session_labels(header=header, first_events=first_events):
        if isinstance(answer, Mapping):
            for name, value in answer.items():
                if isinstance(name, str) and isinstance(value, str):
                    merged.setdefault(name, value)
    return merged


def _first_events(backend: Backend, header: SessionHeader, registry: EventRegistry
                  ) -> Callable[[int], Sequence[Event]]:
    from ._decode import decode_lines
    from ._persistence.capabilities import read_lines_of

    read: dict[int, Sequence[Event]] = {}

    def first_events(count: int) -> Sequence[Event]:  # two plugins asking read it once
        if count not in read:
            lines = read_lines_of(backend, header.id, -1, max(count, 0))
            read[count] = [] if lines is None else decode_lines(registry, lines)
        return read[count]

    return first_events


def stored_label(backend: Backend, header: SessionHeader, registry: EventRegistry, *,
                 plugins: PluginManager | None = None) -> str | None:
    """:func:`label_of` a session stored in ``backend``: its first events are read (only
    those: a JSONL log's first lines, a database's first keys) and decoded with
    ``registry`` when a plugin asks for them."""
    return label_of(header, _first_events(backend, header, registry), plugins=plugins)
