"""The schema room: the registry of event types, the vocabulary's unions, strict checking,
the header, encoding and decoding log lines, the catalog, and how each core event
becomes an LLM message.
"""
