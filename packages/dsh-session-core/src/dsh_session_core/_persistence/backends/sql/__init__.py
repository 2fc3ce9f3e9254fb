"""What both SQL backends share: rows to log lines, kept lines, the search-index engine,
the projections' tables.

The row shape and the loads (``rows``), a row's log line (``row_lines``), what an index
row is (``search_index``), the one search-index engine (``index``), run on each
database's statements, and the projections' rows read and a batch's changes checked
(``projection_rows``).

It may import what ``backends`` may: the root of ``_persistence`` and the rooms below.
"""
