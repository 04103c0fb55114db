"""A home that starts a chat: `/` opens on an empty composer (with the model picker when there is
a choice); typing and Enter make the conversation, whose page sends the message over its socket:
the URL is the conversation's, the message and the streamed reply show, and the title the demo
makes from the key words reaches the sidebar. On a desktop and a 390 px phone, light and dark,
axe-clean, with no CSP refusal."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, wait_replies
from .screens import SCREENS
from .test_accessibility_in_a_browser import Audit
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

MESSAGE = "Which lighthouse keeper logs the weather, and how often does the lighthouse keeper log?"
FIRST_WORDS = "Which lighthouse keeper logs the weather, and how often does…"


def in_view(page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    return bool(box) and box["y"] >= 0 and box["y"] + box["height"] <= size["height"]


@pytest.fixture(scope="module")
def titled(browser):
    """Its own server with the model's titles on (the other tests' servers keep the first
    words), and a user signed up there: (base URL, the user's cookies)."""
    from .conftest import new_context, serve, signup

    with serve(GENERATED_TITLES="true") as base:
        context = new_context(browser)
        signup(context.new_page(), base, "tess")
        state = context.storage_state()
        context.close()
        yield base, state


@pytest.mark.parametrize("name", list(SCREENS))
def test_the_home_composer_starts_a_chat_on_enter(browser, titled, name):
    server, user_state = titled
    context = browser.new_context(storage_state=user_state, **SCREENS[name])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    page = context.new_page()
    try:
        page.goto(f"{server}/")
        composer = page.locator("#home-composer #message-input")
        expect(composer).to_be_visible()
        expect(composer).to_be_focused()  # type at once, no click first
        assert in_view(page, "#home-composer #message-input")
        audit = Audit()
        audit(page, f"home {name}")
        audit.assert_clean()

        composer.fill(MESSAGE)
        composer.press("Enter")
        page.wait_for_url(re.compile(r".*/conversations/\d+/$"))
        user = page.locator("#transcript .message.user")
        expect(user).to_have_count(1)
        expect(user.first).to_contain_text("how often does the lighthouse keeper log?")
        wait_replies(page, 1)
        expect(page.locator("#message-input")).to_have_value("")  # sent, not left waiting
        pk = int(page.get_attribute("#chat-root", "data-conversation"))
        link = page.locator(f"#conversation-link-{pk}")
        # The demo's title from the key words, after the first-words one.
        expect(link).to_have_text("Lighthouse keeper logs weather")
        expect(page.locator("#title-input")).to_have_value(link.text_content().strip())
        assert link.text_content().strip() != FIRST_WORDS
        assert in_view(page, "#transcript .message.assistant")
        page.reload()  # the message was sent once: a reload does not send it again
        wait_replies(page, 1)
        expect(page.locator("#transcript .message.user")).to_have_count(1)
        expect(page.locator("#message-input")).to_have_value("")
        refusals.assert_none(page)
    finally:
        context.close()


def test_a_first_message_the_model_cannot_take_stays_in_the_composer(user_context, server):
    """Refused at send (over the demo's window): the conversation's page says why, and the text
    is in its composer to be cut down, not lost between the two pages."""
    page = user_context.new_page()
    page.goto(f"{server}/")
    too_long = "The keeper's log, copied out in full. " + "wind swell barometer " * 700
    page.fill("#home-composer #message-input", too_long)
    page.press("#home-composer #message-input", "Enter")
    page.wait_for_url(re.compile(r".*/conversations/\d+/$"))
    expect(page.locator("#notice")).to_contain_text("over this model's budget")
    expect(page.locator("#message-input")).to_have_value(too_long.strip())
    expect(page.locator("#transcript .message.user")).to_have_count(0)
