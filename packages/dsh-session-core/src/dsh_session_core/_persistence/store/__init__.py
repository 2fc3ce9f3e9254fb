"""The durable store: DurableStore and its parts, the coordinator, and the write path.

DurableStore (``durable``) and its parts: its ground (``base``), its reads (``reads``),
its deletes and retention (``retention``); the coordinator that writes behind the
plugin bus (``coordinator``), and the write path it goes through (``write_path``).

It may import every other room of ``_persistence`` (``retention``, ``projections``,
``encryption``, ``backends``), its root and the rooms below it; ``opening`` stands
above it.
"""
