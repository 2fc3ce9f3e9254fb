"""The error hierarchy, by concern; :mod:`dsh_session_core.errors` re-exports every class.
"""
