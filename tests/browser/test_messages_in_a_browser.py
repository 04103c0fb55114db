"""A message's time and Copy, and the other conversation an answer names, as a person sees them
on a desktop and on a 390 px phone, light and dark: the time in the reader's own zone with the
full date on focus, Copy putting the message's Markdown on the clipboard and saying so, the link
to the conversation the demo found its answer in. axe-core clean, no CSP refusal."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, export, new_conversation, turn
from .screens import SCREENS, in_view, is_phone, on_new_conversation
from .test_accessibility_in_a_browser import Audit
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

ZONE = "Pacific/Auckland"  # far from UTC: a time left in UTC shows another hour
ASKED = "Say **hello** in `code`, please."


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, user_state, server):
    """(a page on a new conversation, its refusals, the screen's name), in a zone of its own,
    allowed to use the clipboard as a person's browser is once they click Copy."""
    context = browser.new_context(
        storage_state=user_state, timezone_id=ZONE, locale="en-GB", **SCREENS[request.param]
    )
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    yield *on_new_conversation(context, server), request.param
    context.close()


def local(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00")).astimezone(ZoneInfo(ZONE))


def test_each_message_says_when_it_was_sent_and_copies_its_markdown(screen, server, tmp_path):
    page, refusals, name = screen
    turn(page, ASKED)
    user = page.locator("#transcript .message.user").last
    reply = page.locator("#transcript .message.assistant").last

    # The time, in the reader's zone, in view beside the reply they just read.
    when = reply.locator("time.sent-at")
    in_view(page, when)
    moment = local(when.get_attribute("datetime"))
    expect(when).to_have_text(re.compile(rf"\b{moment:%H:%M}$"))
    title = when.get_attribute("title")
    assert str(moment.year) in title and str(moment.day) in title, title
    # Reached by keyboard (Tab from the message's role), its full date shown beside it.
    reply.locator(".role").evaluate("el => { el.tabIndex = -1; el.focus(); }")
    page.keyboard.press("Tab")
    expect(when).to_be_focused()
    shown = when.evaluate("el => getComputedStyle(el, '::after').content")
    assert shown == f'"{title}"', shown
    page.screenshot(path=tmp_path / f"time-focused-{name}.png")
    # The user's, at the right of a phone, shows its date within the page too.
    user.locator("time.sent-at").focus()
    width = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=tmp_path / f"user-time-focused-{name}.png")

    # Copy: the reply's Markdown as stored, not its HTML; said on the button and to a reader.
    stored = [m for m in export(page, server)["messages"] if m["role"] == "assistant"][-1]
    text = "\n\n".join(b["text"] for b in stored["content"] if b["type"] == "text")
    copy = reply.get_by_role("button", name="Copy", exact=True)
    in_view(page, copy)
    box = copy.bounding_box()
    assert box["width"] >= 24 and box["height"] >= 24, box
    copy.tap() if is_phone(name) else copy.click()
    expect(reply.locator(".copy-message")).to_have_text("Copied")
    expect(page.locator("#copy-status")).to_have_text("Message copied as Markdown.")
    assert page.evaluate("navigator.clipboard.readText()") == text
    page.screenshot(path=tmp_path / f"copied-{name}.png")

    user.locator(".copy-message").click()
    assert page.evaluate("navigator.clipboard.readText()") == ASKED  # what was typed, stars too
    # Every bubble has both, streamed in live or not.
    assert page.locator("#transcript .message time.sent-at").count() == 2
    assert page.locator("#transcript .message .copy-message").count() == 2

    audit = Audit()
    audit(page, f"messages-{name}")
    audit.assert_clean()
    refusals.assert_none(page)
    print("screenshots in", tmp_path)


@pytest.mark.parametrize("name", ["desktop-light", "phone-dark"])
def test_the_conversation_an_answer_found_is_a_link_to_its_message(
    browser, user_state, server, name, tmp_path
):
    context = browser.new_context(storage_state=user_state, **SCREENS[name])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    try:
        page = context.new_page()
        page.goto(f"{server}/")
        new_conversation(page)
        word = name.split("-")[0]  # each screen's conversation its own pet
        turn(page, f"My {word} heron is called Percival.")
        there = page.url
        page.goto(f"{server}/")
        new_conversation(page)
        turn(page, f"What is my {word} heron called?")

        link = page.locator("#transcript .message.assistant").last.locator(".text > p a").first
        in_view(page, link)
        expect(link).to_contain_text("“My")
        href = link.get_attribute("href")
        assert re.fullmatch(r"/conversations/\d+/\?at=1#msg-1", href), href
        assert there.endswith(href.split("?")[0])
        # The search's result, opened, names the conversation too: a link to its page.
        searched = page.locator("#transcript .message.assistant").last.locator(
            'details.tool-call[data-tool="search_history"]'
        )
        searched.last.locator("summary").click()
        named = searched.last.locator(f'.tool-result a[href="{href.split("?")[0]}"]').first
        in_view(page, named)
        expect(named).to_contain_text(f"“My {word} heron")
        page.screenshot(path=tmp_path / f"link-{name}.png")
        link.scroll_into_view_if_needed()
        link.click()
        page.wait_for_url(re.compile(r".*/conversations/\d+/\?at=1"))
        expect(page.locator("#msg-1")).to_contain_text(f"My {word} heron is called Percival.")
        expect(page.locator("#msg-1")).to_be_in_viewport()
        refusals.assert_none(page)
    finally:
        context.close()
