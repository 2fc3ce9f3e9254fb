"""The JSONL backend: one append-only file per session, byte-compatible with the reference's.

The backend class (``backend``), its compact (zstd) variant (``zstd``), its writer
(``write``), writer lock (``lock``), append descriptors and log ends (``ends``), deletes
(``delete``), durable-end mark (``endmark``), search scan (``scan``), header cache
(``header_cache``), projection sidecar (``sidecar``, its database file
``sidecar_file``), file layout (``paths``), store folder (``buckets``) and system calls
(``files``).

It may import what ``backends`` may: the root of ``_persistence`` and the rooms below.
"""
