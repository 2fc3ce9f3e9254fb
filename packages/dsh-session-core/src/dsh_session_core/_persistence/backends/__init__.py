"""The backends: memory, JSONL, SQL (what SQLite and PostgreSQL share), SQLite, PostgreSQL.

The in-memory backend (``memory``), the JSONL backend and its compact variant
(``jsonl/``: a file per session), what the SQL backends share (``sql/``), SQLite
(``sqlite/``), PostgreSQL (``postgres/``), and the URL table that picks one
(``url_backends``).

It may import the root of ``_persistence`` and the rooms below it (``_search``,
``_logformat``, ``_model``, ``_plugins``, ``_schema``, ``_errors``, ``_base``); never
encryption, retention or the store.
"""
