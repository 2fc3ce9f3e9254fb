"""An encrypted store's backend (``SealedBackend``) has the capabilities of the backend
it wraps, and no other (``Wrapper`` in ``_persistence/capabilities.py``): what the
wrapped one lacks is absent from its record too, so the store never calls a method of
the wrapper that could only refuse. A native search and the asyncio twins are never
passed on (an index would hold plaintext; sealing runs in the worker thread)."""

from __future__ import annotations

import dataclasses

from crypt_support import KEYS

from dsh_session_core import Capabilities
from dsh_session_core._persistence.encryption.sealed import SealedBackend
from dsh_session_core._persistence.encryption.sealing import Sealer
from dsh_session_core._persistence.opening import backend_for

#: What a sealed backend never passes on.
NOT_PASSED = {"searchable", "async_append", "async_list", "async_tail", "async_follow",
              "async_close"}


def _present(caps: Capabilities) -> set[str]:
    found = set()
    for field in dataclasses.fields(caps):
        value = getattr(caps, field.name)
        if field.name != "backend" and value is not None:
            assert value is caps.backend, field.name  # the backend, typed
            found.add(field.name)
    return found


def test_a_sealed_backend_has_what_the_store_kind_has(store_url: str) -> None:
    # Each kind of the testing kit's (memory among them, which cannot read lines by
    # type nor summarize some sessions only: the wrapper's methods for them are left out).
    inner = backend_for(store_url)
    sealed = SealedBackend(inner, Sealer(KEYS))
    try:
        own = _present(Capabilities.of(inner))
        assert own  # every built-in backend has some
        assert _present(Capabilities.of(sealed)) == own - NOT_PASSED
    finally:
        sealed.close()

