"""What a retention policy says: :class:`RetentionPolicy`, and durations and sizes.

:class:`RetentionPolicy` is checked when it is made, read from a mapping or a TOML file
(a team checks one in); durations (``30d``) and sizes (``10G``) are the two kinds of
value a person writes in one. The planner that applies it is :mod:`.retention.plan`;
running it on a store is :mod:`.retention.run`.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["GROUPINGS", "RetentionPolicy", "parse_duration", "parse_size"]

#: The groupings ``per`` names without a prefix: the header's cwd, the whole label a
#: plugin gives (``label_session``), and the two named labels the ADK adapter gives
#: (``session_labels``). Any other named label is ``label:NAME``.
GROUPINGS: Final = ("cwd", "label", "app", "user")

#: Seconds per unit of a duration.
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

#: Bytes per unit of a size: powers of 1024, as ``du -h`` and ``docker`` print them.
_SIZES: Final = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_DURATION_HINT: Final = "a duration is a number and a unit (s, m, h, d, w): 30d, 12h, 1d12h"
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]+")

#: The keys of a policy file's table, and the field each one sets.
_KEYS: Final = {"older_than": "older_than", "keep_latest": "keep_latest", "per": "per",
                "max_size": "max_total_bytes", "max_total_bytes": "max_total_bytes",
                "archive": "archive_to", "archive_to": "archive_to", "cwd": "cwd",
                "name": "name"}


def parse_duration(text: str) -> datetime.timedelta:
    """A duration as a person writes it: ``30d``, ``12h``, ``90m``, ``2w``, ``45s``, or
    several, ``1d12h``.

    :raises ValueError: anything else, saying what a duration is.
    """
    parts = re.findall(r"(\d+)([smhdw])", text) if isinstance(text, str) else []
    if not parts or "".join(n + u for n, u in parts) != text:
        msg = f"not a duration: {text!r} ({_DURATION_HINT})"
        raise ValueError(msg)
    try:
        return datetime.timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in parts))
    except OverflowError:
        # Raised while the OverflowError is handled: it is the error's __context__,
        # which tells this refusal from the others (`dsh-session prune` says it its way).
        msg = f"the duration {text} is longer than any date can be"
        raise ValueError(msg) from None


def parse_size(text: str) -> int:
    """A size in bytes as a person writes it: ``500M``, ``10G``, ``1.5T``, ``4096``
    (powers of 1024; ``GB``, ``GiB`` and lower case are the same).

    :raises ValueError: anything else.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*",
                         text.upper() if isinstance(text, str) else "")
    if found is None:
        msg = f"not a size: {text!r} (a number and a unit, K, M, G or T: 500M, 10G, 1.5T)"
        raise ValueError(msg)
    return int(float(found[1]) * _SIZES[found[2]])


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """Which sessions of a store go, given to ``DurableStore.prune`` (docs/retention.md).

    The rules, in this order: a session outside ``cwd`` is not looked at; a session
    marked retained (``store.retain``), one lists hide (a plugin's bookkeeping), one a
    live writer holds, and one whose age cannot be told stay; the ``keep_latest``
    newest of each group (``per``) stay; then every other session older than
    ``older_than`` goes; then, while the sessions left occupy more than
    ``max_total_bytes``, the oldest that may go goes.

    :ivar older_than: a session idle for longer goes (``None``: age alone removes
        nothing).
    :ivar keep_latest: how many of the newest sessions of each group are kept whatever
        their age and size (``None``: none is kept for being new). Alone, it removes
        every other session.
    :ivar per: what makes a group for ``keep_latest``: ``"cwd"``, ``"label"``,
        ``"app"``, ``"user"`` or ``"label:NAME"`` (a plugin's named label); several
        make a group of each combination; ``()`` is one group, the whole store.
    :ivar max_total_bytes: the size the sessions may occupy together (``None``: no
        quota).
    :ivar archive_to: a store URL each session is copied into (and checked there)
        before it is removed, typically ``jsonl+zstd:///path``; ``None``: none.
    :ivar cwd: only the sessions whose header's cwd is exactly this one.
    :ivar name: a name for the audit records (a policy file's name by default).
    :raises ValueError: a value that makes no sense, saying which and why.
    """

    older_than: datetime.timedelta | None = None
    keep_latest: int | None = None
    per: tuple[str, ...] = ()
    max_total_bytes: int | None = None
    archive_to: str | None = None
    cwd: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.older_than is not None and (
                not isinstance(self.older_than, datetime.timedelta)
                or self.older_than < datetime.timedelta(0)):
            msg = f"older_than takes a duration (0 or more), got {self.older_than!r}"
            raise ValueError(msg)
        for field in ("keep_latest", "max_total_bytes"):
            value = getattr(self, field)
            if value is not None and (type(value) is not int or value < 0):
                msg = f"{field} takes a whole number (0 or more), got {value!r}"
                raise ValueError(msg)
        per: object = self.per  # as given: a caller without a type checker gives anything
        if isinstance(per, str) or not isinstance(per, tuple | list):
            msg = f"per takes a tuple of groupings, e.g. ('user',), got {per!r}"
            raise ValueError(msg)
        object.__setattr__(self, "per", tuple(per))
        for grouping in self.per:
            _check_grouping(grouping)
        if len(set(self.per)) != len(self.per):
            msg = f"per names a grouping twice: {self.per!r}"
            raise ValueError(msg)
        if self.per and self.keep_latest is None:
            msg = "per groups sessions for keep_latest: give keep_latest too"
            raise ValueError(msg)
        if self.older_than is None and self.keep_latest is None \
                and self.max_total_bytes is None:
            msg = ("a retention policy needs a rule: older_than, keep_latest or "
                   "max_total_bytes (without one it would remove nothing)")
            raise ValueError(msg)
        for field in ("archive_to", "cwd"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value):
                msg = f"{field} takes a non-empty string, got {value!r}"
                raise ValueError(msg)
        name: object = self.name
        if not isinstance(name, str):
            msg = f"name takes a string, got {name!r}"
            raise ValueError(msg)

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, name: str = "") -> RetentionPolicy:
        """A policy from a policy file's table: ``older_than = "30d"``, ``keep_latest =
        5``, ``per = ["user"]``, ``max_size = "10G"`` (or ``max_total_bytes``, a number),
        ``archive = "jsonl+zstd:///srv/archive"``, ``cwd``, ``name``.

        :raises ValueError: an unknown key or a bad value, naming it.
        """
        fields: dict[str, Any] = {"name": name}
        for key, value in table.items():
            field = _KEYS.get(key)
            if field is None:
                msg = (f"unknown retention policy key {key!r}; the keys are "
                       f"{', '.join(sorted(_KEYS))}")
                raise ValueError(msg)
            if key == "older_than":
                value = parse_duration(value)
            elif key == "max_size":
                value = parse_size(value)
            elif key == "per":
                value = (value,) if isinstance(value, str) else value
                if not isinstance(value, list | tuple):
                    msg = f"per takes a list of groupings, got {value!r}"
                    raise ValueError(msg)
                value = tuple(value)
            fields[field] = value
        return cls(**fields)

    @classmethod
    def from_toml(cls, path: str) -> RetentionPolicy:
        """A policy from a TOML file: its ``[retention]`` table, or its top level when
        it has none (keys as :meth:`from_mapping`); named for the file.

        :raises OSError: the file cannot be read.
        :raises ValueError: it is no TOML, or a key or value is bad.
        """
        import os
        import tomllib

        with open(path, "rb") as f:
            try:
                document = tomllib.load(f)
            except tomllib.TOMLDecodeError as exc:
                msg = f"{path} is no TOML: {exc}"
                raise ValueError(msg) from None
        table = document.get("retention", document)
        if not isinstance(table, dict):
            msg = f"{path}: [retention] must be a table"
            raise ValueError(msg)
        return cls.from_mapping(table, name=os.path.basename(path))

    def describe(self) -> str:
        """The policy as one line, for people and the audit records."""
        parts = []
        if self.older_than is not None:
            parts.append(f"older than {_duration_text(self.older_than)}")
        if self.keep_latest is not None:
            per = f" per {'+'.join(self.per)}" if self.per else ""
            parts.append(f"keep latest {self.keep_latest}{per}")
        if self.max_total_bytes is not None:
            parts.append(f"max {self.max_total_bytes:,} bytes")
        if self.cwd is not None:
            parts.append(f"in {self.cwd}")
        if self.archive_to is not None:
            parts.append(f"archive to {self.archive_to}")
        text = ", ".join(parts)
        return f"{self.name}: {text}" if self.name else text


def _check_grouping(grouping: object) -> None:
    if isinstance(grouping, str):
        if grouping in GROUPINGS:
            return
        if grouping.startswith("label:") and _NAME.fullmatch(grouping[6:]):
            return
    msg = (f"unknown grouping {grouping!r}: per takes {', '.join(GROUPINGS)} or "
           f"label:NAME (a named label a plugin gives)")
    raise ValueError(msg)


def _duration_text(value: datetime.timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
