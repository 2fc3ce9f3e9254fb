"""Projections: keyed rows folded from the log, kept beside it (docs/projections.md).

The fold run over events (``fold``), the changes each flush writes with its batch
(``keep``), and the reads that trust stored rows only where their mark matches the log
(``read``). A plugin's declaration is ``_schema/projections.py``; what a backend stores,
``_persistence/rows.py``.

It may import ``backends``, the root of ``_persistence`` and the rooms below it;
``encryption`` (a rekey rebuilds the rows it reseals), ``retention`` and ``store`` stand
above it.
"""
