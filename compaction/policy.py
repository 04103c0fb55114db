"""When to compact: pure decisions over token counts and failure history.

The caller supplies the numbers (the window's tokens from the last reply's usage plus the
estimated delta, the budget from settings, the failure count from the conversation); nothing here
reads the database or settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

# After a compaction that could not get the window under the threshold (the kept last turn alone
# is too big), wait for this share of the budget of new growth before trying again, so a long
# turn does not trigger a compaction on every following turn.
REGROWTH_SHARE = 0.10

# What a conversation may choose for itself (its settings), as shares of its budget: compacting
# before 30% would fold away a window that is still small, after 90% would leave too little room
# for the reply and the summary; the kept tail stays at least 10 points under the threshold, so
# a compaction always frees room before the next one fires.
AUTO_AT_RANGE = (0.30, 0.90)
MIN_KEEP_SHARE = 0.05
KEEP_GAP = 0.10


@dataclass(frozen=True)
class Budget:
    total: int  # the model's context window, in tokens
    auto_at: float = 0.6  # auto-compaction fires at this share of `total`
    keep_share: float = 0.25  # share of `total` kept verbatim as the tail
    reserve: int = 0  # tokens reserved for the reply (the request's max_tokens)

    def __post_init__(self) -> None:
        # Fail loudly on settings that would make compaction loop or never fire.
        if self.total <= 0:
            raise ValueError(f"budget total must be positive, got {self.total}")
        if not 0 < self.auto_at <= 1:
            raise ValueError(f"auto_at must be in (0, 1], got {self.auto_at}")
        if not 0 < self.keep_share < self.auto_at:
            raise ValueError(
                f"keep_share must be in (0, auto_at={self.auto_at}), got {self.keep_share}: "
                "a tail as big as the threshold would re-trigger compaction at once"
            )
        if self.reserve < 0:
            raise ValueError(f"reserve must not be negative, got {self.reserve}")

    def fits(self, window_tokens: int, incoming_tokens: int = 0) -> bool:
        """Whether a request fits: the window, what it adds (a new message, a turn's steps so
        far) and room for the reply. The one test every request passes before it is sent."""
        return window_tokens + incoming_tokens + self.reserve <= self.total

    @property
    def threshold(self) -> int:
        return int(self.total * self.auto_at)

    @property
    def keep_tokens(self) -> int:
        return int(self.total * self.keep_share)

    @property
    def regrowth(self) -> int:
        return max(1, math.ceil(self.total * REGROWTH_SHARE))


def shares_problem(
    auto_at: float | None, keep_share: float | None, *, default_auto: float, default_keep: float
) -> str | None:
    """What is wrong with a conversation's choice of when to compact (`auto_at`) and how much to
    keep verbatim (`keep_share`), shares of the budget, None for the default; None if nothing."""
    low, high = AUTO_AT_RANGE
    if auto_at is not None and not low <= auto_at <= high:
        return f"Compact at must be between {_pct(low)} and {_pct(high)} of the budget."
    if keep_share is None and auto_at is None:
        return None
    auto = default_auto if auto_at is None else auto_at
    keep = default_keep if keep_share is None else keep_share
    most = round(auto - KEEP_GAP, 4)
    if keep_share is not None and keep < MIN_KEEP_SHARE:
        return f"Keep verbatim must be at least {_pct(MIN_KEEP_SHARE)} of the budget."
    if keep > most:
        which = "" if keep_share is not None else " (the default)"
        return (
            f"Keeping {_pct(keep)}{which} verbatim leaves too little between it and compacting "
            f"at {_pct(auto)}: keep at most {_pct(most)} ({KEEP_GAP * 100:.0f} points under), "
            "or compact later."
        )
    return None


def shares(
    auto_at: float | None, keep_share: float | None, *, default_auto: float, default_keep: float
) -> tuple[float, float]:
    """The shares a conversation compacts at and keeps: its own choices, else the defaults (the
    environment's, read as they are now, so changing them moves every conversation that never
    chose). A choice checked against a default that has moved since may sit too close to it:
    the kept tail gives way (shrinks, never grows), never the threshold."""
    auto = default_auto if auto_at is None else auto_at
    keep = default_keep if keep_share is None else keep_share
    most = round(auto - KEEP_GAP, 4)
    if (auto_at is not None or keep_share is not None) and keep > most:
        # Ten points under when there is room for it, else half the threshold: always a
        # tail the budget accepts (0 < keep < auto).
        keep = min(keep, max(most, auto / 2))
    return auto, keep


def _pct(share: float) -> str:
    return f"{share * 100:.4g}%"


def needs_auto_compaction(window_tokens: int, budget: Budget, last_post_tokens: int | None) -> bool:
    """Whether the window has crossed the auto threshold (checked after a reply).

    `last_post_tokens` is the window size right after the previous compaction (None if there was
    none). If that compaction could not get under the threshold, compacting again next turn would
    achieve nothing, so wait until the window has grown by REGROWTH_SHARE of the budget.
    """
    if window_tokens < budget.threshold:
        return False
    if last_post_tokens is not None and last_post_tokens >= budget.threshold:
        return window_tokens >= last_post_tokens + budget.regrowth
    return True


def auto_compaction_due(
    window_tokens: int,
    budget: Budget,
    last_post_tokens: int | None,
    *,
    draft_waiting: bool,
    paused_until: datetime | None,
    now: datetime,
) -> bool:
    """After a complete reply: whether to compact now. Not while a draft waits for the user's
    review (knocking again would set it aside), nor while auto-compaction rests after failures;
    otherwise when the window has crossed the threshold (`needs_auto_compaction`)."""
    if draft_waiting or (paused_until is not None and paused_until > now):
        return False
    return needs_auto_compaction(window_tokens, budget, last_post_tokens)


def auto_paused_until(
    failures: int,
    last_failure_at: datetime | None,
    *,
    limit: int,
    pause: timedelta,
    now: datetime | None = None,
) -> datetime | None:
    """When auto-compaction may run again after `limit` consecutive failures, or None if not paused.

    Repeated failures usually mean the provider is down or the summary prompt does not fit; a
    pause stops every turn from paying for another doomed call. `limit <= 0` disables pausing.
    Pass `now` to get None once the pause is over.
    """
    if limit <= 0 or failures < limit or last_failure_at is None:
        return None
    until = last_failure_at + pause
    if now is not None and now >= until:
        return None
    return until
