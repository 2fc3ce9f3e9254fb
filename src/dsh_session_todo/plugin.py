"""The ``todo`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only."""

from __future__ import annotations
