"""Opening a compaction is planned at once from the window, on plain values (no database): old
tool results are cleared when that alone is enough, and only for an automatic compaction; else
the window is cut at a safe point and the messages before the cut are what the summary folds."""

from __future__ import annotations

from compaction import clearing
from compaction.entries import Entry
from compaction.models import Compaction
from compaction.planning import plan_compaction
from compaction.policy import Budget
from compaction.window_state import WindowState
from providers.tokens import estimate_content

BIG = "log line with details\n" * 150  # 3,300 characters: about 1,100 estimated tokens
MIN_CHARS = 2000


def said(seq: int, role: str, value: str) -> Entry:
    content = [{"type": "text", "text": value}]
    return Entry(seq, role, content, estimate_content(content))


def tool_turn(seq: int, call_id: str) -> list[Entry]:
    reply = [
        {"type": "tool_use", "id": call_id, "name": "grep_logs", "input": {"q": "error"}},
        {"type": "tool_result", "tool_use_id": call_id, "content": BIG},
        {"type": "text", "text": f"Read the logs ({call_id})."},
    ]
    return [
        said(seq, "user", f"check the logs {seq}"),
        Entry(seq + 1, "assistant", reply, estimate_content(reply)),
    ]


def window(entries: list[Entry], total: int, boundary: Compaction | None = None) -> WindowState:
    return WindowState(
        system="You help.",
        summary=(boundary.summary or None) if boundary else None,
        entries=entries,
        pinned_before_cut=[],
        boundary=boundary,
        budget=Budget(total=total, auto_at=0.6, keep_share=0.25),
        head_tokens=50,
        anchor=None,
    )


# Three turns with a big tool result each, then a short one: clearing the older results (of the
# turns before the kept tail) takes the window well under the threshold.
TOOL_TURNS = (
    tool_turn(1, "a")
    + tool_turn(3, "b")
    + tool_turn(5, "c")
    + [
        said(7, "user", "and now?"),
        said(8, "assistant", "All clear."),
    ]
)
# One result to clear, but a long answer beside it that only a summary can fold.
LONG_ANSWER = tool_turn(1, "a") + [
    said(3, "user", "explain"),
    said(4, "assistant", BIG * 2),
    said(5, "user", "thanks"),
    said(6, "assistant", "Welcome."),
]


def test_an_automatic_compaction_clears_old_tool_results_when_that_is_enough():
    state = window(TOOL_TURNS, total=5_000)
    plan = plan_compaction(state, set(), may_clear=True, min_chars=MIN_CHARS)
    assert plan.clearing == clearing.plan(TOOL_TURNS, 1_250, MIN_CHARS)
    assert plan.clearing.count == 2  # a and b; c is in the kept tail
    assert (plan.first_kept, plan.cleared_before_seq) == (1, 5)  # the window keeps its start
    assert plan.pre_tokens == state.tokens
    assert plan.post_tokens == state.tokens - plan.clearing.saved < state.budget.threshold
    assert plan.older == [] and plan.summary == ""


def test_a_compaction_a_person_asked_for_summarises_what_comes_before_the_cut():
    state = window(TOOL_TURNS, total=5_000)
    plan = plan_compaction(state, set(), may_clear=False, min_chars=MIN_CHARS)
    assert plan.clearing is None and plan.post_tokens is None
    assert plan.first_kept == 5
    assert [e.seq for e in plan.older] == [1, 2, 3, 4]
    assert (plan.pre_tokens, plan.cleared_before_seq) == (state.tokens, None)


def test_the_tail_never_starts_at_a_message_with_an_older_version():
    state = window(TOOL_TURNS, total=5_000)
    plan = plan_compaction(state, {5}, may_clear=False, min_chars=MIN_CHARS)
    assert plan.first_kept == 7 and [e.seq for e in plan.older] == [1, 2, 3, 4, 5, 6]


def test_clearing_that_leaves_the_window_over_the_threshold_gives_way_to_a_summary():
    state = window(LONG_ANSWER, total=3_000)
    plan = plan_compaction(state, set(), may_clear=True, min_chars=MIN_CHARS)
    assert plan.clearing is None
    assert plan.first_kept == 5 and [e.seq for e in plan.older] == [1, 2, 3, 4]


def test_before_a_reply_clearing_is_enough_when_the_request_then_fits_the_budget():
    state = window(LONG_ANSWER, total=3_000)
    fits = plan_compaction(state, set(), may_clear=True, before_reply=True, min_chars=MIN_CHARS)
    assert fits.clearing is not None
    assert state.budget.threshold <= fits.post_tokens <= state.budget.total
    # The turn's steps so far leave no room for the next with only the results cleared.
    steps = state.budget.total - fits.post_tokens + 1
    full = plan_compaction(
        state, set(), may_clear=True, before_reply=True, incoming=steps, min_chars=MIN_CHARS
    )
    assert full.clearing is None and full.first_kept == 5


def test_a_later_boundary_keeps_what_the_one_in_force_cleared_and_summarised():
    boundary = Compaction(first_kept_seq=1, summary="Earlier brief.", cleared_before_seq=3)
    cleared = plan_compaction(
        window(TOOL_TURNS, 5_000, boundary), set(), may_clear=True, min_chars=MIN_CHARS
    )
    assert (cleared.summary, cleared.cleared_before_seq) == ("Earlier brief.", 5)
    summarised = plan_compaction(
        window(TOOL_TURNS, 5_000, boundary), set(), may_clear=False, min_chars=MIN_CHARS
    )
    assert (summarised.summary, summarised.cleared_before_seq) == ("", 3)


def test_nothing_is_planned_when_the_window_holds_only_the_latest_turn():
    state = window([said(1, "user", "hello"), said(2, "assistant", "Hi.")], total=5_000)
    assert plan_compaction(state, set(), may_clear=True, min_chars=MIN_CHARS) is None
    assert plan_compaction(state, set(), may_clear=False, min_chars=MIN_CHARS) is None
