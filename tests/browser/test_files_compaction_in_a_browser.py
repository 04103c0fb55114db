"""Files through compaction, in a real browser (a desktop and a 390 px phone, light and dark):
screenshots sent to the demo model fill a small window, the auto-compaction clears the older
ones (a divider that counts them and links each file), and when it fills up again a summary
folds them, its divider listing the files it folded; the lists fit the screen and nothing is
refused by the CSP."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests import sample_files

from .conftest import TIMEOUT_MS, new_conversation, signup, wait_replies
from .screens import SCREENS
from .test_csp_in_a_browser import Refusals
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


@pytest.mark.parametrize("screen", list(SCREENS))
def test_cleared_then_folded_files_are_counted_and_listed_on_their_dividers(
    browser, small_window_server, screen
):
    context = browser.new_context(**SCREENS[screen])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    page = context.new_page()
    try:
        signup(page, small_window_server, f"fiona-{screen}")
        new_conversation(page)
        shots = []
        cleared = page.locator('#transcript .divider[data-kind="clear"]')
        folded = page.locator('#transcript .divider[data-kind="summary"]')
        # Screenshots until the window, cleared once, fills up again and is folded (the demo's
        # replies are the same every run: so are the turns this takes).
        for n in range(1, 9):
            shot = upload(page, small_window_server, f"screen-{n}.png", sample_files.image())
            shots.append(shot)
            send_with(page, f"Screenshot {n}: is the header aligned?", shot)
            wait_replies(page, n)
            if folded.count():
                break
        first_fold = folded.first  # a turn may end before its compaction: another may follow
        expect(first_fold).to_be_attached()
        first_clear = cleared.first
        title = first_clear.locator(".divider-title")
        expect(title).to_have_text(re.compile(r"Cleared \d+ files?$"))
        first_clear.locator("summary").click()
        link = first_clear.locator(".divider-files a").first
        expect(link).to_have_text("screen-1.png")
        assert link.get_attribute("href") == f"/attachments/{shots[0]['id']}/"

        expect(first_fold.locator("summary")).to_contain_text("folded")
        first_fold.locator("summary").click()
        expect(first_fold.locator(".divider-files")).to_contain_text("screen-")
        # The lists fit the screen (a long name wraps), and no script or style was refused.
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        refusals.assert_none(page)
    finally:
        context.close()
