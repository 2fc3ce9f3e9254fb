"""dsh-session plugin ``compact``: compaction of a surface range into a summary: the
compact/* events, the lock, the tool-pairing rule, transcript rendering, token
estimation and the pluggable summarizer.
"""

from __future__ import annotations

__all__: list[str] = []
