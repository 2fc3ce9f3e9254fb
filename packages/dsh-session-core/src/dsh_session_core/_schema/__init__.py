"""The schema room: what an event is, and how it is read, written and checked.

The registry of event types (``registry``), the vocabulary's unions (``unions``), strict
checking (``strict``, ``validate``), the header (``header``), encoding and decoding log
lines (``codec``, ``decode``), the catalog and the vocabulary reference (``catalog``,
``vocabulary_doc``), how each core event becomes an LLM message (``event_messages``),
the retention ledger's event types (``retention_events``), and how a message names a
seq (``seq_text``).

It may import the rooms below it: ``_errors`` and ``_base`` (and the public modules
beside them); ``events`` stands beside it.
"""
