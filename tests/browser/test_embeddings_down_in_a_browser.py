"""With the embeddings server down, a person's search still answers, by words, and says so where
they are looking: under the search box, on a desktop and on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from support.servers import free_port

from .conftest import TIMEOUT_MS, new_conversation, serve, signup, turn
from .screens import SCREENS

pytestmark = pytest.mark.browser


def test_search_answers_by_words_and_says_why_when_embeddings_are_down(browser, tmp_path):
    down = f"http://127.0.0.1:{free_port()}/v1/embeddings"  # nothing listens there
    with serve(EMBEDDINGS=down, EMBEDDINGS_MODEL="m") as base:
        for name in ("desktop-light", "phone-light"):
            context = browser.new_context(**SCREENS[name])
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            signup(page, base, f"walker-{name}")
            new_conversation(page)
            turn(page, "The ferry leaves the harbour at nine.")
            page.fill("#search-conversation", "ferry")
            page.press("#search-conversation", "Enter")
            notice = page.locator("#conversation-results .search-notice")
            expect(notice).to_contain_text("Search by meaning is unavailable right now")
            expect(notice).to_be_in_viewport()
            hit = page.locator("#conversation-results .search-hit").first
            expect(hit).to_contain_text("ferry")
            expect(hit).to_be_in_viewport()
            page.screenshot(path=str(tmp_path / f"{name}.png"))
            context.close()
