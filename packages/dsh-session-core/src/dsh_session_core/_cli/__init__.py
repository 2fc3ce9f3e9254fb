"""The ``dsh-session`` command line: one module per command group, and what they share.

``main`` parses and dispatches; ``support`` holds failures and exit codes, ``source`` how
a SOURCE (a log file or a session id in a store) is read, ``term`` terminal output. The
commands reach stores only through the public :class:`~dsh_session_core.Backend` methods.
"""
