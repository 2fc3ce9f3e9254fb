"""Log bytes the spec prints, shared by the tests that check a writer against them.

The values are the spec's (plugins-persistence.md §9.2), not anything this
implementation produced.
"""

from __future__ import annotations

__all__ = ["ONE_TURN_LOG", "S1_HEADER"]

#: The header of ``meta('s1', '/work')``: 72 bytes with its newline.
S1_HEADER = b'{"type":"session","version":0,"id":"s1","createdAt":1000,"cwd":"/work"}\n'

#: §9.2: the complete one-turn file for ``meta('s1', '/work')`` (671 bytes).
ONE_TURN_LOG = S1_HEADER + (
    b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message",'
    b'"source":{"kind":"user"}}}}\n'
    b'{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"hi"}],'
    b'"source":{"kind":"user"}},"surfaceOp":"append"}\n'
    b'{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}\n'
    b'{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"content":'
    b'[{"type":"text","text":"hello"}]},"surfaceOp":"append"}\n'
    b'{"type":"step/end","seq":4,"time":5,"data":{"turn":1,"step":1}}\n'
    b'{"type":"turn/end","seq":5,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}\n'
)
