"""Reserved: materialized views kept beside the log.

Read models the next performance work adds; nothing stands here yet.

It may import ``encryption``, ``backends``, the root of ``_persistence`` and the rooms
below it; ``retention`` and ``store`` stand above it.
"""
