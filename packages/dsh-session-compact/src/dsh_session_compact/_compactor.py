"""The basic compaction backend (spec §3): when to compact, what to keep, and the
automatic pass a harness runs before each step.

:class:`Compactor` holds a validated :class:`BasicCompactConfig`, a token estimator and
the summarizer wiring; the work itself is :func:`compact_region`. The decision loop of
:meth:`Compactor.compact_if_needed` is written once, as a generator that yields the
ranges to compact, and driven by a synchronous and an asynchronous caller.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Mapping
from typing import Any

import pluggy

from dsh_session_core import Message, Session, is_tool_pairing_balanced

from ._config import BasicCompactConfig, resolve_config
from ._region import CompactionResult, acompact_region, compact_region
from ._summarizer import Summarizer
from ._tokens import TokenEstimator
from .errors import CompactionPressureError
from .events import ShadowedRange

__all__ = ["Compactor", "acompact_if_needed", "compact_if_needed"]

_log = logging.getLogger("dsh_session_compact")

# Yields a range to compact, receives the result of compacting it; returns the last
# result (or None when nothing was needed).
_Plan = Generator[ShadowedRange, CompactionResult, "CompactionResult | None"]


class Compactor:
    """Compacts sessions under one policy.

    A harness calls :meth:`auto_compact` (or :meth:`aauto_compact`) before each step,
    after ``turn/start`` and before ``step/start``; or :meth:`compact_if_needed` to
    handle errors itself; or :meth:`compact_region` to compact a chosen range.

    :param config: the policy, or its raw form with the reference's camelCase keys.
    :param summarizer: the default summarizer; wins over the hook.
    :param plugin_manager: where to find a ``compact_summarize`` implementation when
        no summarizer is given (usually ``store.plugin_manager``).
    :param estimator: token estimation; by default :class:`TokenEstimator` with the
        config's ``chars_per_token``.
    :raises CompactConfigError: the raw config breaks a rule.
    """

    __slots__ = ("config", "estimator", "plugin_manager", "summarizer")

    def __init__(
        self,
        config: BasicCompactConfig | Mapping[str, Any],
        *,
        summarizer: Summarizer | None = None,
        plugin_manager: pluggy.PluginManager | None = None,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self.config = config if isinstance(config, BasicCompactConfig) else resolve_config(config)
        self.summarizer = summarizer
        self.plugin_manager = plugin_manager
        self.estimator = (
            estimator if estimator is not None else TokenEstimator(self.config.chars_per_token)
        )

    def __repr__(self) -> str:
        return f"Compactor({self.config!r})"

    # --- measuring -----------------------------------------------------------------------

    @property
    def threshold(self) -> int:
        """The estimated request size at which compaction is needed."""
        return self.config.threshold

    def estimate_pressure(
        self, session: Session, system_prompt: str = "", session_prefix: Iterable[Message] = ()
    ) -> int:
        """The estimated tokens of the next request: the prefix messages, the derived
        history and the system prompt."""
        messages = [*session_prefix, *session.derive_messages()]
        return self.estimator.estimate_tokens(messages, system_prompt)

    def compactable_range(self, session: Session) -> ShadowedRange | None:
        """The head-anchored range to compact, or ``None`` when nothing can be.

        The newest nodes worth ``retain_tokens`` are kept; the cut before them moves
        toward the head until it splits no tool call from its result. The range always
        starts at the head, so an earlier checkpoint there is summarized again (there
        is at most one automatic checkpoint). Retention ignores turns: a long open turn
        compacts its own closed steps.
        """
        nodes = session.surface.seqs
        if not nodes:
            return None
        events = session.events
        keep = len(nodes)
        kept = 0
        for index in range(len(nodes) - 1, -1, -1):
            kept += self.estimator.estimate_event_tokens(events[nodes[index]])
            keep = index
            if kept >= self.config.retain_tokens:
                break
        while keep > 0 and not is_tool_pairing_balanced(nodes, events, nodes[keep]):
            keep -= 1
        if keep == 0:  # everything fits the budget, or only an open tail step remains
            return None
        return ShadowedRange(start=nodes[0], end=nodes[keep - 1])

    # --- compacting a chosen range -------------------------------------------------------

    def _region_args(self, model: str, summarizer: Summarizer | None) -> dict[str, Any]:
        return {
            "model": self.config.summarization_model or model,
            "max_tokens": self.config.max_tokens,
            "summarizer": summarizer if summarizer is not None else self.summarizer,
            "plugin_manager": self.plugin_manager,
            "estimator": self.estimator,
        }

    def compact_region(
        self,
        session: Session,
        start: int,
        end: int,
        *,
        model: str = "",
        summarizer: Summarizer | None = None,
        signal: object = None,
    ) -> CompactionResult:
        """:func:`~dsh_session_compact.compact_region` under this policy: the
        summarization model is ``summarization_model``, else ``model`` (the agent's),
        and the generation cap is ``max_tokens``.

        :param model: the caller's model, used when the config names none.
        :param summarizer: overrides the compactor's summarizer and the hook.
        :param signal: passed to the summarizer untouched.
        """
        return compact_region(
            session, start, end, signal=signal, **self._region_args(model, summarizer)
        )

    async def acompact_region(
        self,
        session: Session,
        start: int,
        end: int,
        *,
        model: str = "",
        summarizer: Summarizer | None = None,
        signal: object = None,
    ) -> CompactionResult:
        """:meth:`compact_region` for asyncio (awaits an async summarizer)."""
        return await acompact_region(
            session, start, end, signal=signal, **self._region_args(model, summarizer)
        )

    # --- compacting when needed ----------------------------------------------------------

    def _plan(self, session: Session, system_prompt: str, prefix: tuple[Message, ...]) -> _Plan:
        """The §3.3 loop: while the pressure is at or above the threshold, compact the
        compactable range, at most ``compaction_retries + 1`` times."""
        threshold = self.threshold
        result: CompactionResult | None = None
        for _attempt in range(self.config.compaction_retries + 1):
            if self.estimate_pressure(session, system_prompt, prefix) < threshold:
                return result
            found = self.compactable_range(session)
            if found is None:
                if result is None:
                    return None
                break
            result = yield found
        pressure = self.estimate_pressure(session, system_prompt, prefix)
        if pressure < threshold:
            return result
        raise CompactionPressureError(
            attempts=self.config.compaction_retries + 1, pressure=pressure, threshold=threshold
        )

    def compact_if_needed(
        self,
        session: Session,
        *,
        system_prompt: str = "",
        session_prefix: Iterable[Message] = (),
        model: str = "",
        summarizer: Summarizer | None = None,
        signal: object = None,
    ) -> CompactionResult | None:
        """Compact when the estimated request reaches the threshold.

        :param system_prompt: the full system prompt of the next request.
        :param session_prefix: messages sent before the session's history.
        :param model: the caller's model, used when the config names none.
        :param summarizer: overrides the compactor's summarizer and the hook.
        :param signal: passed to the summarizer untouched.
        :returns: the last compaction, or ``None`` when none was needed or possible.
        :raises CompactionPressureError: every allowed compaction ran and the pressure
            is still at or above the threshold.
        :raises CompactError: a compaction failed (see :func:`compact_region`).
        """
        plan = self._plan(session, system_prompt, tuple(session_prefix))
        try:
            found = next(plan)
            while True:
                done = self.compact_region(
                    session, found.start, found.end,
                    model=model, summarizer=summarizer, signal=signal,
                )
                found = plan.send(done)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the plan's return value

    async def acompact_if_needed(
        self,
        session: Session,
        *,
        system_prompt: str = "",
        session_prefix: Iterable[Message] = (),
        model: str = "",
        summarizer: Summarizer | None = None,
        signal: object = None,
    ) -> CompactionResult | None:
        """:meth:`compact_if_needed` for asyncio (awaits an async summarizer)."""
        plan = self._plan(session, system_prompt, tuple(session_prefix))
        try:
            found = next(plan)
            while True:
                done = await self.acompact_region(
                    session, found.start, found.end,
                    model=model, summarizer=summarizer, signal=signal,
                )
                found = plan.send(done)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the plan's return value

    # --- the automatic pass --------------------------------------------------------------

    def _report(
        self,
        result: CompactionResult | None,
        session: Session,
        system_prompt: str,
        prefix: tuple[Message, ...],
    ) -> None:
        if result is None:
            return
        after = self.estimate_pressure(session, system_prompt, prefix)
        _log.info(
            "compaction: shadowed %d surface nodes (seqs %d-%d, ~%d tokens) → %d estimated "
            "tokens after compaction",
            len(result.shadowed_seqs), result.shadowed_range.start, result.shadowed_range.end,
            result.shadowed_token_count, after,
        )

    def auto_compact(
        self,
        session: Session,
        *,
        system_prompt: str = "",
        session_prefix: Iterable[Message] = (),
        model: str = "",
        summarizer: Summarizer | None = None,
        signal: object = None,
    ) -> CompactionResult | None:
        """The automatic pass, run before every step; does nothing unless ``auto``.

        Calls :meth:`compact_if_needed`, logs a compaction at INFO on the
        ``dsh_session_compact`` logger, and logs any failure at WARNING instead of
        raising it: the step then proceeds with the full history.
        """
        if not self.config.auto:
            return None
        prefix = tuple(session_prefix)
        try:
            result = self.compact_if_needed(
                session, system_prompt=system_prompt, session_prefix=prefix,
                model=model, summarizer=summarizer, signal=signal,
            )
        except Exception as exc:  # the step goes on with the full history
            _log.warning("compaction failed: %s; proceeding with full history", exc)
            return None
        self._report(result, session, system_prompt, prefix)
        return result

    async def aauto_compact(
        self,
        session: Session,
        *,
        system_prompt: str = "",
        session_prefix: Iterable[Message] = (),
        model: str = "",
        summarizer: Summarizer | None = None,
        signal: object = None,
    ) -> CompactionResult | None:
        """:meth:`auto_compact` for asyncio. Cancellation is not swallowed."""
        if not self.config.auto:
            return None
        prefix = tuple(session_prefix)
        try:
            result = await self.acompact_if_needed(
                session, system_prompt=system_prompt, session_prefix=prefix,
                model=model, summarizer=summarizer, signal=signal,
            )
        except Exception as exc:  # the step goes on with the full history
            _log.warning("compaction failed: %s; proceeding with full history", exc)
            return None
        self._report(result, session, system_prompt, prefix)
        return result


def compact_if_needed(
    session: Session,
    *,
    config: BasicCompactConfig | Mapping[str, Any],
    system_prompt: str = "",
    session_prefix: Iterable[Message] = (),
    model: str = "",
    summarizer: Summarizer | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
    signal: object = None,
) -> CompactionResult | None:
    """``Compactor(config, ...).compact_if_needed(session, ...)``, for one-off calls.

    :raises CompactConfigError: the raw config breaks a rule.
    """
    compactor = Compactor(config, summarizer=summarizer, plugin_manager=plugin_manager)
    return compactor.compact_if_needed(
        session, system_prompt=system_prompt, session_prefix=session_prefix, model=model,
        signal=signal,
    )


async def acompact_if_needed(
    session: Session,
    *,
    config: BasicCompactConfig | Mapping[str, Any],
    system_prompt: str = "",
    session_prefix: Iterable[Message] = (),
    model: str = "",
    summarizer: Summarizer | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
    signal: object = None,
) -> CompactionResult | None:
    """:func:`compact_if_needed` for asyncio (awaits an async summarizer)."""
    compactor = Compactor(config, summarizer=summarizer, plugin_manager=plugin_manager)
    return await compactor.acompact_if_needed(
        session, system_prompt=system_prompt, session_prefix=session_prefix, model=model,
        signal=signal,
    )
