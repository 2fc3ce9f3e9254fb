"""The example plugin's members of the merge-extensible unions: one of each kind.

Each is a msgspec Struct tagged on its union's tag field, declared through the
``register_union_members`` hook (see plugin.py). With this plugin installed, a strict
append accepts payloads holding them; without it, those payloads load opaquely and
``dsh-session validate --strict`` names them.
"""

from __future__ import annotations

from msgspec import Struct


class _Member(Struct, frozen=True, kw_only=True, rename="camel", gc=False,
              forbid_unknown_fields=True):
    pass


class StickerBlock(_Member, tag_field="type", tag="example-sticker", frozen=True):
    """A sticker the user sent, by name."""

    name: str


class ProgressChunk(_Member, tag_field="type", tag="example-progress", frozen=True):
    """How far a long tool run has got, streamed while the model waits."""

    percent: int


class ScheduleTrigger(_Member, tag_field="kind", tag="example-schedule", frozen=True):
    """A scheduled run started the turn."""

    cron: str


class BudgetReason(_Member, tag_field="kind", tag="example-budget", frozen=True):
    """The turn ended because its token budget ran out."""

    spent: int


class WebhookSource(_Member, tag_field="kind", tag="example-webhook", frozen=True):
    """The message came in through a webhook."""

    url: str
