"""``dsh-session show``: a session's timeline, printed turn by turn.

A session's timeline (:func:`~.._inspect.timeline.build_timeline`, the read model's),
printed turn by turn, one line per item, by the read model's
:func:`~.._inspect.render.render_timeline`, or with ``--json`` as one JSON document
(texts cut to :data:`JSON_TEXT` characters). The session and whether its store marks it
never to be pruned are read together, from one opening of the store."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._inspect.render import render_timeline
from .._inspect.timeline import build_timeline
from .source import load_source, out_json, out_text, warn
from .support import EXIT_OK, plugin_manager, registry
from .term import Style, shorten, terminal_width

__all__ = ["run_show"]

#: Texts in ``--json`` are one line, cut to this many characters (``export`` has it all).
JSON_TEXT = 300


def _json_ready(doc: dict[str, Any]) -> dict[str, Any]:
    for block in doc["timeline"]:
        for item in block["items"]:
            item["text"] = shorten(item["text"], JSON_TEXT)
    return doc


def run_show(args: argparse.Namespace) -> int:
    reg = registry()
    doc = build_timeline(load_source(args, reg), reg, plugins=plugin_manager(),
                         raw=bool(getattr(args, "raw", False)))
    if args.json:
        out_json(_json_ready(doc))
        return EXIT_OK
    for warning in doc["warnings"]:
        warn(warning)
    out_text(render_timeline(doc, Style.for_stream(sys.stdout), terminal_width()))
    return EXIT_OK
