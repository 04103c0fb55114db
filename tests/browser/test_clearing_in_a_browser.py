"""Clearing old tool results, in a real browser: the demo model's searches fill a small window,
and the auto-compaction that follows clears their results instead of summarising: a divider of
its own kind, and the model view shows placeholders where the results were."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import new_context, new_conversation, signup, tokens, turn

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def small_window_server():
    # Search results of a few hundred characters count as big here, and a 3,000-token window
    # passes its threshold (1,800) after a handful of searching turns, each with two searches
    # (this conversation, then every one): room for a turn's own results in the kept tail.
    from .conftest import serve

    with serve(
        CONTEXT_BUDGET_TOKENS="3000", TOOL_CLEAR_MIN_CHARS="200", DEMO_WORD_DELAY_MS="0"
    ) as base:
        yield base


def test_old_tool_results_are_cleared_with_a_divider_of_their_own(browser, small_window_server):
    context = new_context(browser)
    page = context.new_page()
    try:
        signup(page, small_window_server, "clara")
        new_conversation(page)
        turn(
            page,
            "Harbour notes: the pelican key is in the blue box, the osprey key in the red box.",
        )
        # Keys the notes do not place: the demo searches every time (it answers the pelican's
        # from its window). The divider lands a moment after the reply that made it due: once the
        # meter shows the window past the threshold (60% of 3,000), wait for it and send no more
        # (a turn queued behind the clearing could pass the threshold again and be summarised).
        dividers = page.locator("#transcript .divider")
        for bird in ("heron", "ibis", "heron", "ibis", "heron", "ibis"):
            turn(page, f"Which box holds the {bird} key today?")
            if tokens(page) >= 1800 or dividers.count():
                break
        expect(dividers).to_have_count(1)
        divider = page.locator('#transcript .divider[data-kind="clear"]').first
        expect(divider).to_be_visible()
        expect(divider.locator(".divider-title")).to_contain_text("Cleared")
        expect(divider.locator(".divider-title")).to_contain_text("tool result")
        assert page.locator('#transcript .divider[data-kind="summary"]').count() == 0
        # The transcript still shows every result whole; the model sees placeholders.
        page.click("#show-model-view")
        expect(page.locator("#model-view")).to_contain_text("Tool result cleared from the window")
    finally:
        context.close()
