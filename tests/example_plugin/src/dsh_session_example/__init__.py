"""An example third-party dsh-session plugin: a surface event type (``example/note``,
a note the model sees) and a log-only one (``example/ping``)."""

from __future__ import annotations

from .events import ExampleNote, ExampleNoteData, ExamplePing, ExamplePingData

__all__ = ["ExampleNote", "ExampleNoteData", "ExamplePing", "ExamplePingData"]
