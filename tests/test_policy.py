"""When compaction fires: the auto threshold, the before-send overflow rule, pausing on failure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from compaction.policy import (
    Budget,
    auto_paused_until,
    needs_auto_compaction,
)

BUDGET = Budget(total=10_000, auto_at=0.6, keep_share=0.25, reserve=1_000)


def test_it_derives_threshold_and_keep_tokens_from_the_budget():
    assert BUDGET.threshold == 6_000
    assert BUDGET.keep_tokens == 2_500


def test_it_uses_the_documented_defaults():
    budget = Budget(total=200_000)
    assert (budget.auto_at, budget.keep_share, budget.reserve) == (0.6, 0.25, 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"total": 0},
        {"total": 1_000, "auto_at": 0},
        {"total": 1_000, "auto_at": 1.5},
        {"total": 1_000, "keep_share": 0},
        {"total": 1_000, "auto_at": 0.5, "keep_share": 0.5},
        {"total": 1_000, "reserve": -1},
    ],
)
def test_it_refuses_a_budget_that_cannot_work(kwargs):
    with pytest.raises(ValueError):
        Budget(**kwargs)


def test_it_fires_at_the_threshold_and_not_below():
    assert not needs_auto_compaction(5_999, BUDGET, last_post_tokens=None)
    assert needs_auto_compaction(6_000, BUDGET, last_post_tokens=None)
    assert needs_auto_compaction(9_000, BUDGET, last_post_tokens=None)


def test_it_fires_again_after_a_compaction_that_got_under_the_threshold():
    assert needs_auto_compaction(6_000, BUDGET, last_post_tokens=3_000)


def test_it_does_not_fire_again_next_turn_when_the_last_compaction_could_not_get_under():
    # The kept last turn alone was 7_000 tokens: compacting again after one more small turn
    # would achieve nothing.
    assert not needs_auto_compaction(7_200, BUDGET, last_post_tokens=7_000)
    assert not needs_auto_compaction(7_999, BUDGET, last_post_tokens=7_000)


def test_it_fires_again_once_the_window_has_grown_by_a_tenth_of_the_budget():
    assert needs_auto_compaction(8_000, BUDGET, last_post_tokens=7_000)
    assert needs_auto_compaction(6_000, BUDGET, last_post_tokens=6_000 - 1)


def test_it_compacts_before_send_only_when_the_request_would_not_fit():
    # 8_000 + 1_000 + reserve 1_000 = 10_000: exactly fits.
    assert BUDGET.fits(8_000, 1_000)
    assert not BUDGET.fits(8_000, 1_001)
    assert not BUDGET.fits(9_500)


def test_it_counts_the_reply_reserve_before_send():
    no_reserve = Budget(total=10_000, reserve=0)
    assert no_reserve.fits(9_500, 500)
    assert not BUDGET.fits(9_500, 500)


FAILED_AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PAUSE = timedelta(minutes=15)


def test_it_does_not_pause_before_the_failure_limit():
    assert auto_paused_until(2, FAILED_AT, limit=3, pause=PAUSE) is None
    assert auto_paused_until(0, None, limit=3, pause=PAUSE) is None


def test_it_pauses_after_repeated_failures():
    assert auto_paused_until(3, FAILED_AT, limit=3, pause=PAUSE) == FAILED_AT + PAUSE
    assert auto_paused_until(7, FAILED_AT, limit=3, pause=PAUSE) == FAILED_AT + PAUSE


def test_it_reports_no_pause_once_it_is_over_when_given_now():
    during = FAILED_AT + timedelta(minutes=5)
    after = FAILED_AT + PAUSE
    assert auto_paused_until(3, FAILED_AT, limit=3, pause=PAUSE, now=during) == FAILED_AT + PAUSE
    assert auto_paused_until(3, FAILED_AT, limit=3, pause=PAUSE, now=after) is None


def test_it_never_pauses_when_the_limit_is_disabled():
    assert auto_paused_until(50, FAILED_AT, limit=0, pause=PAUSE) is None
