"""What both SQL backends share: rows to log lines, kept lines, the search-index engine.

The row shape and the loads (``rows``), a row's log line (``row_lines``), what an index
row is (``search_index``), and the one search-index engine (``index``), run on each
database's statements.

It may import what ``backends`` may: the root of ``_persistence`` and the rooms below.
"""
