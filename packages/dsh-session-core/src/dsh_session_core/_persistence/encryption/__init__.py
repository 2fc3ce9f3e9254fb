"""Encryption at rest: the sealing backend wrapper, the sealed boxes, the keys, rekeying.

The backend wrapper (``sealed``), sealing a log line (``sealing``), the keys
(``keyring``), the retention ledger's sealed notes (``ledger``), and resealing a store
under its current key (``rekey``).

It may import ``backends``, the root of ``_persistence`` and the rooms below it.
"""
