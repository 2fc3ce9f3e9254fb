"""The persistence contract (spec plugins-persistence §8.2, scenarios 1-24) on every
built-in backend: the testing kit's :class:`BackendContract`, as a third-party backend
runs it (tests/test_third_party_backend.py)."""

from __future__ import annotations

import pytest

from dsh_session_core.testing import BackendContract, BackendFactory


class TestBuiltinBackends(BackendContract):
    """Each case once per kind of store (the kit's ``store_kind``)."""

    @pytest.fixture
    def make_backend(self, backend_factory: BackendFactory) -> BackendFactory:
        return backend_factory

    @pytest.fixture
    def keeps_line_order(self, store_kind: str) -> bool:
        # SQLite (as the reference's) and PostgreSQL keep columns, not the log lines.
        return store_kind not in ("sqlite", "postgresql")
