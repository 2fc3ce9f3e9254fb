"""Checking a seed: the events a Session starts from (a reloaded or forked log).

A seed is checked as the reference checks one: seqs contiguous from 0, JSON data, and a
surface op on every event of a surface type. A reloaded log has a hundred thousand
events, so the checks run over whole lists at C speed.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from msgspec import UNSET

from .._schema.decode import decode_wire
from .._schema.registry import EventRegistry
from ..errors import SeedError
from ..events import Event, OpaqueEvent

__all__ = ["check_seed"]

_seq_of = operator.attrgetter("seq")


def check_seed(
    registry: EventRegistry, seed: Iterable[Event | Mapping[str, Any]]
) -> tuple[list[Event], list[int]]:
    """Check a seed as the reference does; return its events and the indices of the
    events that may sit on the surface (so the first fold skips the rest).

    The checks run over whole lists at C speed (``map``/``compress``), since a reloaded
    log has a hundred thousand events; the first failing event is then reported.
    """
    items = list(seed)
    types = list(map(type, items))  # once: both checks below read it
    if all(issubclass(t, Event) for t in set(types)):
        events: list[Event] = items  # type: ignore[assignment]  # checked just above
    else:
        events = _events_of(registry, items)
        types = list(map(type, events))
    n = len(events)
    first_gap = n
    if list(map(_seq_of, events)) != list(range(n)):
        first_gap = next(i for i, ev in enumerate(events) if ev.seq != i)
    candidates = frozenset(r.event for r in registry if r.surface) | {OpaqueEvent}
    hint = list(itertools.compress(range(n), map(candidates.__contains__, types)))
    surface_types = registry.surface_types
    first_bare = n
    for i in hint:
        if i >= first_gap:
            break
        ev = events[i]
        if type(ev) is OpaqueEvent:
            if ev.seq.__class__ is not int:  # a JSON 1.0 or true is not seq 1
                first_gap = i
                break
            if ev.type in surface_types and ev.surface_op is UNSET:
                first_bare = i
                break
        elif ev.surface_op is UNSET:  # type: ignore[attr-defined]
            first_bare = i
            break
    if first_gap < n and first_gap <= first_bare:
        ev = events[first_gap]
        from .._schema.seq_text import event_seq

        raise _seed_gap(first_gap, event_seq(ev), ev.type)
    if first_bare < n:
        raise _seed_no_op(events[first_bare], first_bare)
    return events, hint


def _events_of(registry: EventRegistry, items: list[Any]) -> list[Event]:
    """Seed items given in their wire shape, as events (checked as JSON first)."""
    events: list[Event] = []
    for i, item in enumerate(items):
        if isinstance(item, Event):
            events.append(item)
            continue
        try:
            events.append(decode_wire(registry, item))
        except ValueError:
            etype = item.get("type") if isinstance(item, Mapping) else None
            seq = item.get("seq") if isinstance(item, Mapping) else None
            if seq != i:
                raise _seed_gap(i, seq, str(etype)) from None
            msg = f'seed event "{etype}" (seq {seq}) carries non-JSON-serializable data'
            raise SeedError(msg, index=i, event_type=str(etype)) from None
    return events


def _seed_gap(index: int, seq: object, event_type: str) -> SeedError:
    from .._schema.seq_text import seq_mismatch

    msg = (
        f"seed event at index {index} has seq {seq_mismatch(seq, index)}; seed must be "
        f"contiguous from 0"
    )
    return SeedError(msg, index=index, event_type=event_type)


def _seed_no_op(ev: Event, index: int) -> SeedError:
    msg = (
        f'seed event "{ev.type}" (seq {ev.seq}) is surface-eligible but carries no '
        f"surfaceOp marker"
    )
    return SeedError(msg, index=index, event_type=ev.type)
