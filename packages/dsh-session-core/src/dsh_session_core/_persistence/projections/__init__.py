"""Reserved: materialized views kept beside the log (read models the next performance work
adds).
"""
