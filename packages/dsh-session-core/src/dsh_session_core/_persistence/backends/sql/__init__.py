"""What both SQL backends share: rows to log lines, the kept lines, and the search-index
engine.
"""
