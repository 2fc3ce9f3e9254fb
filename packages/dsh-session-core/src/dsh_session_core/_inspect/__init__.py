"""The read model: what a session, a log file or a store holds.

What a session, a log file or a store holds, read without writing anything and without
taking a lock (listing, SOURCE resolution, timelines, wire shapes). Its public door is
:mod:`dsh_session_core.inspect`; the CLI and the viewer are views over it. Imports
nothing at import time: the CLI's start must stay fast."""
