"""One compaction planned: what opening it does, decided at once from the window as it is.

Old tool results and files are cleared when that alone is enough (only for an automatic
compaction); else the window is cut at a safe point and what comes before the cut is folded
into a summary. The plan says what to clear, where the kept tail starts, what the summary folds
(and its files) and the figures its boundary records; chat/compactions.py writes it in the
transaction that holds the conversation's lock, and the summariser's call comes after.

A pure function over plain values: nothing here reads the database or settings.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from compaction import clearing, files
from compaction.clearing import Clearing
from compaction.cut import choose_cut
from compaction.entries import Entry
from compaction.window_state import WindowState, window_total


@dataclass(frozen=True)
class Plan:
    """What one compaction does, decided before anything is written. With `clearing`, old tool
    results become placeholders and the boundary is committed at once (no model call, nothing
    to review); without, the messages before `first_kept` (`older`) are summarised."""

    first_kept: int  # the boundary's first kept message: the cut, or a clearing's window's own
    pre_tokens: int  # the window's size before
    cleared_before_seq: int | None  # results in messages before this one are cleared
    older: list[Entry] = field(default_factory=list, hash=False)  # what the summary folds
    clearing: Clearing | None = None
    summary: str = ""  # a clearing's boundary keeps the summary in force
    post_tokens: int | None = None  # a clearing's window after; a summary's is known once written
    # The files it takes out of the window: a clearing's, or those the summary folds.
    files: list[dict] = field(default_factory=list, hash=False)


def plan_compaction(
    state: WindowState,
    later_versions: Collection[int],
    *,
    may_clear: bool,
    before_reply: bool = False,
    incoming: int = 0,
    min_chars: int,
) -> Plan | None:
    """The compaction of the window `state`, or None when nothing can be cut (the window holds
    only the latest turn). `may_clear`: clearing old tool results (at least `min_chars` long) is
    tried first, and planned if it is enough: before a reply (`before_reply`) when the request
    then fits the budget with the `incoming` tokens it adds, else when the window gets under the
    threshold. `later_versions`: messages with an older version, where the tail never starts."""
    if may_clear:
        found = clearing.plan(state.entries, state.budget.keep_tokens, min_chars)
        if found is not None and _clearing_is_enough(state, found, before_reply, incoming):
            return _cleared(state, found, min_chars)
    cut = choose_cut(state.entries, state.budget.keep_tokens, later_versions)
    if cut is None:
        return None
    older = [e for e in state.entries if e.seq < cut]
    return Plan(
        first_kept=cut,
        pre_tokens=state.tokens,
        # Results cleared before stay cleared in the tail this one keeps.
        cleared_before_seq=state.boundary.cleared_before_seq if state.boundary else None,
        older=older,
        files=files.folded(older),
    )


def _clearing_is_enough(
    state: WindowState, found: Clearing, before_reply: bool, incoming: int
) -> bool:
    after = state.tokens - found.saved
    if before_reply:
        return state.budget.fits(after, incoming)
    return after < state.budget.threshold


def _cleared(state: WindowState, found: Clearing, min_chars: int) -> Plan:
    """A clearing: the window keeps its cut and summary; only the old results become
    placeholders."""
    entries = clearing.cleared(state.entries, found.before_seq, min_chars)
    return Plan(
        first_kept=state.first_kept,
        pre_tokens=state.tokens,
        cleared_before_seq=found.before_seq,
        clearing=found,
        summary=state.summary or "",
        post_tokens=window_total(state.head_tokens, entries, None),
        files=list(found.files),
    )
