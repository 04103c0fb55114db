"""Search in a real browser: the header's box searches this conversation, the sidebar's all of
them; a hit opens its message, scrolled into view and marked."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import conversation_id, new_conversation, turn

pytestmark = pytest.mark.browser


def test_search_a_conversation_and_all_of_them_then_jump_to_the_hit(chat, server):
    turn(chat, "Remember the harbour code is PELICAN-42 for the night shift.")
    turn(chat, "Also the ferry leaves at noon.")
    first = conversation_id(chat)
    new_conversation(chat)
    turn(chat, "Unrelated: the pelican exhibit opens in June.")

    # This conversation only (the demo model's reply may quote the word too), matches marked.
    second = conversation_id(chat)
    chat.fill("#search-conversation", "pelican")
    chat.press("#search-conversation", "Enter")
    hits = chat.locator("#conversation-results .search-hit")
    expect(hits.first).to_be_visible()
    hrefs = [a.get_attribute("href") for a in hits.locator("a").all()]
    assert hrefs and all(h.startswith(f"/conversations/{second}/?at=") for h in hrefs), hrefs
    expect(hits.first.locator("mark").first).to_have_text("pelican", ignore_case=True)

    # Everywhere, from the sidebar: both conversations, titles shown.
    chat.fill("#search-all", "pelican code night shift")
    chat.press("#search-all", "Enter")
    hits = chat.locator("#sidebar-results .search-hit")
    expect(hits.first).to_contain_text("PELICAN-42")  # more words match: ranked first
    assert hits.count() >= 2

    # Jump: the hit's conversation opens on that message, in view and marked.
    hits.first.locator("a").click()
    chat.wait_for_url(f"**/conversations/{first}/?at=1#msg-1")
    target = chat.locator("#msg-1")
    expect(target).to_be_in_viewport()
    assert chat.evaluate("() => document.querySelector(':target').id") == "msg-1"


def test_a_tool_call_shows_as_a_block_with_its_input_and_result(chat):
    # Nothing in the window matches: the demo model searches the history with its recall tool,
    # and finding nothing in this conversation, every conversation of the user's.
    turn(chat, "Where did we park the blue submarine?")
    calls = chat.locator('#transcript .message.assistant .tool-call[data-tool="search_history"]')
    expect(calls).to_have_count(2)
    calls.last.locator("summary").click()
    expect(calls.last.locator("pre").first).to_contain_text('"all"')
    call = calls.first
    expect(call).to_have_class(re.compile(r"\bdone\b"))
    expect(call.locator(".tool-state")).to_contain_text("ms")
    call.locator("summary").click()
    expect(call.locator("pre").first).to_contain_text('"query"')
    expect(call.locator(".tool-result")).to_be_visible()
    # Found in another conversation of the user's (an earlier test may have said the words), or
    # nowhere: either way the answer says where it looked.
    expect(chat.locator("#transcript .message.assistant").last).to_contain_text(
        re.compile(r"I searched (our earlier messages|your other conversations)")
    )
