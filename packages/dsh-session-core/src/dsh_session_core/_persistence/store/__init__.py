"""The durable store: DurableStore and its parts (reads, retention), the coordinator that
writes behind the plugin bus, and the write path.
"""
