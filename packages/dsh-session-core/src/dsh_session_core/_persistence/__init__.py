"""Persistence: durable stores and the backends behind them.

``base`` is the backend protocol (the only way the rest of the package reaches storage),
``coordinator`` the write-behind orchestration every backend shares, ``store`` the
durable store and ``open_store``; one module per backend (``jsonl``, ``sqlite``,
``postgres``, ``memory``; the SQL ones split into ``*_schema``, ``*_index``, ``*_reads``
beside the class) and what backends share (``paths``, ``rows``, ``repair``, and
``sql_index``, the search-index engine of both SQL backends); ``copy`` moves sessions
between any two stores.
"""
