"""The SQLite backend: one database file, its schema, locks, reads and search index.

The backend class (``backend``), its tables and statements (``schema``), opening and
migrating a database (``open``), its reads that never write (``reads``), its writer
locks (``lock``) and its search index's statements (``index``).

It may import ``backends/sql`` and what ``backends`` may: the root of ``_persistence``
and the rooms below.
"""
