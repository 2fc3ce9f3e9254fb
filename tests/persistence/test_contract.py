"""The persistence contract (spec plugins-persistence §8.2, scenarios 1-24) on every
built-in backend (the Redis one on a server and on a Redis Cluster): the testing kit's
:class:`BackendContract`, as a third-party backend runs it
(tests/test_third_party_backend.py)."""

from __future__ import annotations

import pytest

from dsh_session_core.testing import KINDS, BackendContract, BackendFactory

# Every kind, and the Redis backend on a Redis Cluster too.
pytestmark = pytest.mark.store_kinds(*KINDS, "redis-cluster")


class TestBuiltinBackends(BackendContract):
    """Each case once per kind of store (the kit's ``store_kind``). Every built-in
    backend keeps each line's key order (``keeps_line_order``, the default): SQLite and
    PostgreSQL keep the lines their columns would not give back."""

    @pytest.fixture
    def make_backend(self, backend_factory: BackendFactory) -> BackendFactory:
        return backend_factory
