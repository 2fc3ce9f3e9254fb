"""The JSONL backend: one append-only file per session, byte-compatible with the
reference's, and its compact (zstd) variant.
"""
