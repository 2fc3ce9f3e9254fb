"""The JSONL log format read without a store: the log file, compact frames, the durable
end, the tail, reading a file into a session, checking it.
"""
