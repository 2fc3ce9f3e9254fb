"""The SQLite backend: one database file, its schema, locks, reads and search index.
"""
