"""The session header: immutable metadata kept beside the log, never in it.

In a JSONL log it is line 1: ``{"type":"session","version":0,"id":...,"createdAt":...}``
then ``cwd``, ``parentSession`` and ``seedLength`` when defined.
"""

from __future__ import annotations

from typing import Final

from msgspec import UNSET, Struct, UnsetType

from ..vocabulary import Number

__all__ = ["SEALED_FORMAT_VERSION", "SESSION_FORMAT_VERSION", "SessionHeader"]

#: Stamped into every header. Pre-release shape changes do not bump it; a backend
#: refuses any other version on load and never migrates.
SESSION_FORMAT_VERSION: Final = 0
#: The version an encrypted session's header is stored with (its records are sealed:
#: docs/encryption.md). Negative, so that no version of the reference format is ever
#: taken for it; every reader that checks the version (the reference's, this library's
#: without keys) refuses such a log instead of reading ciphertext as data.
SEALED_FORMAT_VERSION: Final = -1


class SessionHeader(
    Struct, frozen=True, gc=False, kw_only=True, rename="camel", tag_field="type", tag="session"
):
    """Who a session is: id, creation time, and where it came from.

    :ivar version: the format version (absent only in some hand-written reference logs).
    :ivar id: the session id.
    :ivar created_at: creation time, epoch milliseconds.
    :ivar cwd: the absolute working directory the session belongs to, if any.
    :ivar parent_session: the session this one was forked from, if any.
    :ivar seed_length: how many events were seeded (forks and reloads).
    """

    version: int | UnsetType = UNSET
    id: str
    created_at: Number
    cwd: str | UnsetType = UNSET
    parent_session: str | UnsetType = UNSET
    seed_length: int | UnsetType = UNSET
