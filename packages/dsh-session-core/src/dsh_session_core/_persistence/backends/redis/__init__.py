"""The Redis backend: one stream per session, on a server or a cluster shared by many hosts.

What a ``redis://`` (``rediss://``) URL names (``url``), whether it is a server or a
node of a Redis Cluster and where each command goes (``nodes``), the keys a session is
kept in and their names (``keys``), the server-side scripts that write them atomically
(``scripts``), the writer lease and its renewal (``lease``), the backend class and its
writes (``backend``), its reads and the ``XREAD`` follower (``reads``), its
projections' rows (``projections``), and what a forget rewrites of the server's
files (``scrub``).

It may import what ``backends`` may: the root of ``_persistence`` and the rooms below.
"""
