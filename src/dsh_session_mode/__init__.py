"""dsh-session plugin ``mode``: session modes: the mode/set event, its fold, mode
configuration and validation.
"""

from __future__ import annotations

__all__: list[str] = []
