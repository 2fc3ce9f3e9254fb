"""The session model: the Session and the SessionStore, and the rules every reader shares.

The Session (``session``, ``append_checks``, ``seed``), its surface (``surface``), its
derived history (``derive``) and request header (``request_header``), the builders
(``builders``, ``turn``, ``step``, ``code_dispatch``, ``tool_outcome``), the
SessionStore (``store``, ``store_args``), a read-only session (``readonly``), and the
rules over events every reader shares: crash repair (``repair``), unanswered calls
(``unanswered``), tool pairing (``tool_pairing``), a surface ``replace`` to a given
conversation (``resurface``).

It may import the rooms below it: ``_plugins``, ``_schema``, ``_errors`` and ``_base``
(and the public modules beside them); ``invariants`` stands beside it.
"""
