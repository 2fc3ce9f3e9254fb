"""The JSONL log format, read without a store.

The log file and its one reader (``logfile``), compact frames (``frames``), the
durable end (``end``), the tail and following (``tail``), a range read by seq
(``ranges``), reading a file into a session (``read``), and checking a log (``check``).

It may import the rooms below it: ``_model``, ``_plugins``, ``_schema``, ``_errors``
and ``_base`` (and the public modules beside them); never a store or a backend.
"""
