"""The backends: memory, JSONL (a file per session), SQL (what SQLite and PostgreSQL
share), SQLite, PostgreSQL, and the URL table that picks one.
"""
