"""The PostgreSQL backend: one database shared by many hosts.

The backend class, its writer and its lease (``backend``), its schema and statements
(``schema``), opening and migrating a database (``open``), its reads (``reads``), the
tail and NOTIFY follower (``follow``), its deletes (``delete``), its search index
(``index``) and its asyncio methods (``aio``).

It may import ``backends/sql`` and what ``backends`` may: the root of ``_persistence``
and the rooms below.
"""
