"""``python -m dsh_session_core`` runs the ``dsh-session`` command."""

from __future__ import annotations

from ._cli.main import main

main()
