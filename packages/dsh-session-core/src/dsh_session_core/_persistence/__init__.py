"""Persistence: durable stores and the backends behind them.

This root holds what the rooms below it share: the backend protocol, the only way in to
storage (``base``), a backend's optional capabilities (``capabilities``), the URL rules
(``urls``), the lock files (``file_locks``), how a stored session is listed
(``listing``), searching a store (``search``), the asyncio side of a store (``aio``),
and copying between two stores (``copy``). Its rooms, lowest first: ``backends``
(memory, JSONL, SQL, SQLite, PostgreSQL), ``encryption``, ``projections`` (reserved),
``retention`` and ``store`` (DurableStore, the coordinator, the write path); ``opening``
(:func:`~.opening.open_store`) stands above them all.

The root may import the rooms below ``_persistence``: ``_search``, ``_logformat``,
``_model``, ``_plugins``, ``_schema``, ``_errors`` and ``_base``; each room of it, the
root and the rooms before it (tests/meta/test_layers.py).
"""
