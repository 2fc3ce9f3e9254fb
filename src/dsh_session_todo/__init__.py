"""dsh-session plugin ``todo``: the agent's todo list: the todo/write event, its validation
and fold.
"""

from __future__ import annotations

__all__: list[str] = []
