"""The session model: the Session, its surface, its derived history and request header, the
builders, the SessionStore, and the rules over events that every reader shares (repair,
unanswered calls, tool pairing).
"""
