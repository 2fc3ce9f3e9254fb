"""Persistence: durable stores and the backends behind them.

``base`` is the backend protocol (the only way the rest of the package reaches storage),
``coordinator`` the write-behind orchestration every backend shares, ``store`` the
durable store and ``open_store``; one module per backend (``jsonl``, ``sqlite``,
``postgres``, ``memory``) and what backends share (``paths``, ``rows``, ``repair``);
``copy`` moves sessions between any two stores.
"""
