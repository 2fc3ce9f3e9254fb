"""Encryption at rest: the sealing backend wrapper, the sealed boxes, the keys, rekeying.

The backend wrapper (``sealed``), its projection rows sealed (``sealed_rows``), sealing a
log line (``sealing``), the keys (``keyring``), the retention ledger's sealed notes
(``ledger``), and resealing a store under its current key (``rekey``).

It may import ``projections``, ``backends``, the root of ``_persistence`` and the rooms
below it.
"""
