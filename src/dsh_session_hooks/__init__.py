"""dsh-session plugin ``hooks``: hook bridge provenance: the hook/* events, the decision
rule, matchers, the Claude and Codex output decoders and the most-restrictive merge.
"""

from __future__ import annotations

__all__: list[str] = []
