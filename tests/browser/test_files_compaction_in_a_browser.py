"""Files through compaction, in a real browser: screenshots sent to the demo model fill a small
window, the auto-compaction clears the older ones (a divider that counts them and links each
file), and the next compaction (auto, or "Compact now" when the window is not due yet) folds
them into a summary whose divider lists the files it folded."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests import sample_files

from .conftest import new_context, new_conversation, signup, wait_replies
from .test_files_window_in_a_browser import upload

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def small_window_server():
    # Three 640-token screenshots pass the threshold of a 3,000-token window (1,800); clearing
    # the older two is enough to get under it.
    from .conftest import serve

    with serve(CONTEXT_BUDGET_TOKENS="3000", DEMO_WORD_DELAY_MS="0") as base:
        yield base


def send_with(page, text: str, attachment: dict) -> None:
    # The send frame the composer's attach button sends (docs/files.md).
    frame = {"action": "send", "message": text, "attachments": [attachment["id"]]}
    page.evaluate(
        "frame => document.getElementById('chat-root')['htmx-internal-data']"
        ".webSocket.socket.send(frame)",
        json.dumps(frame),
    )


def test_cleared_then_folded_files_are_counted_and_listed_on_their_dividers(
    browser, small_window_server
):
    context = new_context(browser)
    page = context.new_page()
    try:
        signup(page, small_window_server, "fiona")
        new_conversation(page)
        shots = []
        dividers = page.locator("#transcript .divider")
        for n in range(1, 6):
            shot = upload(page, small_window_server, f"screen-{n}.png", sample_files.image())
            shots.append(shot)
            send_with(page, f"Screenshot {n}: is the header aligned?", shot)
            wait_replies(page, n)
            if dividers.count():
                break
        cleared = page.locator('#transcript .divider[data-kind="clear"]').first
        expect(cleared.locator(".divider-title")).to_have_text(re.compile(r"Cleared \d+ files?$"))
        cleared.locator("summary").click()
        first = cleared.locator(".divider-files a").first
        expect(first).to_have_text("screen-1.png")
        assert first.get_attribute("href") == f"/attachments/{shots[0]['id']}/"

        if not page.locator('#transcript .divider[data-kind="summary"]').count():
            page.click("#compact-now")
        folded = page.locator('#transcript .divider[data-kind="summary"]')
        expect(folded).to_have_count(1)
        expect(folded.locator("summary")).to_contain_text("folded")
        folded.locator("summary").click()
        expect(folded.locator(".divider-files")).to_contain_text("screen-1.png")
    finally:
        context.close()
