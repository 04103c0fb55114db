"""A whole conversation from the keyboard alone (Tab, Shift+Tab, Enter, Escape): the skip link
to the message box, sending and stopping, the menu, a pin, the view toggle, compacting and
opening the divider, and loading older messages; each control shows where the focus is. What a
screen reader is told is checked on the way: the transcript is a log, a streaming reply is
aria-busy, and that a reply started is said once in the page's status region."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import new_context, replies, serve, signup, wait_replies, wait_socket

pytestmark = pytest.mark.browser

PARAGRAPH = (
    "The ferry timetable changes in April: the first boat leaves at seven, the last at nine, "
    "and on Sundays there are only four crossings. Bicycles travel free, cars must be booked "
    "a day ahead, and the café on board takes cards only."
)


def long_message(n: int) -> str:
    return f"Ferry notes, part {n}. " + " ".join([PARAGRAPH] * 4)


@pytest.fixture(scope="module")
def small_pages_server():
    # Pages of four messages, so three turns and a divider need "Load older messages" twice.
    with serve(PAGE_MESSAGES="4") as base:
        yield base


def focused(page) -> str:
    return page.evaluate(
        "() => { const el = document.activeElement;"
        " return el ? el.outerHTML.slice(0, 160) : 'nothing'; }"
    )


def tab_to(page, selector: str, *, back: bool = False, limit: int = 150) -> None:
    """Press Tab (or Shift+Tab) until the focus is on `selector`."""
    key = "Shift+Tab" if back else "Tab"
    for _ in range(limit):
        page.keyboard.press(key)
        if page.evaluate("s => !!document.activeElement?.matches(s)", selector):
            return
    raise AssertionError(f"{key} x{limit} never reached {selector}; focus is on {focused(page)}")


def assert_focus_ring(page) -> None:
    """The focused control shows a ring (the app's :focus-visible outline)."""
    style, width = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, parseFloat(s.outlineWidth)]; }"
    )
    assert style != "none" and width >= 2, (style, width, focused(page))


def type_and_send(page, text: str) -> None:
    page.keyboard.insert_text(text)
    page.keyboard.press("Enter")


def test_a_whole_conversation_from_the_keyboard(browser, small_pages_server):
    base = small_pages_server
    context = new_context(browser)
    page = context.new_page()
    try:
        signup(page, base, "kit")  # the forms are filled for us; from here on, keys only

        # The empty home page: Tab to "+ New conversation", Enter.
        tab_to(page, "button.new-conversation")
        assert_focus_ring(page)
        page.keyboard.press("Enter")
        page.wait_for_url("**/conversations/*/")
        wait_socket(page)

        # The first Tab shows the skip link; Enter puts the focus in the message box.
        page.keyboard.press("Tab")
        skip = page.locator(".skip-link")
        expect(skip).to_be_focused()
        expect(skip).to_be_in_viewport()
        page.keyboard.press("Enter")
        composer = page.locator("#message-input")
        expect(composer).to_be_focused()
        assert_focus_ring(page)

        # Shift+Enter is a new line, Enter sends.
        page.keyboard.insert_text("Line one")
        page.keyboard.press("Shift+Enter")
        page.keyboard.insert_text("line two")
        expect(composer).to_have_value("Line one\nline two")
        page.keyboard.press("Control+A")
        page.keyboard.press("Delete")

        transcript = page.locator("#transcript")
        expect(transcript).to_have_attribute("role", "log")
        expect(transcript).to_have_attribute("aria-relevant", "additions")
        for n in (1, 2, 3):
            type_and_send(page, long_message(n))
            wait_replies(page, n)
            expect(composer).to_be_focused()
            expect(composer).to_have_value("")

        # Esc stops a streaming reply; meanwhile the bubble is busy and the status says so once.
        type_and_send(page, "Tell me the whole timetable again, slowly.")
        streaming = page.locator('#transcript .message[data-status="streaming"]')
        expect(streaming).to_have_count(1)
        expect(streaming).to_have_attribute("aria-busy", "true")
        status = page.locator(".live-notices[role=status] #reply-status")
        expect(status).to_have_text(re.compile("replying.*Escape"))
        page.keyboard.press("Escape")
        expect(replies(page, "interrupted")).to_have_count(1)
        expect(status).to_have_text("")
        expect(page.locator("#transcript .message[aria-busy]")).to_have_count(0)

        # The menu: back up to it, open it, step in, and Esc closes it onto its toggle.
        tab_to(page, "details.conversation-menu > summary", back=True)
        assert_focus_ring(page)
        page.keyboard.press("Enter")
        menu = page.locator("details.conversation-menu")
        expect(menu).to_have_attribute("open", "")
        page.keyboard.press("Tab")
        assert page.evaluate("() => !!document.activeElement.closest('.menu-body')"), focused(page)
        page.keyboard.press("Escape")
        expect(menu).not_to_have_attribute("open", "")
        expect(page.locator("details.conversation-menu > summary")).to_be_focused()

        # A pin: the focus stays on the button when the message is drawn again.
        tab_to(page, "#pin-1")
        assert_focus_ring(page)
        page.keyboard.press("Enter")
        expect(page.locator("#msg-1")).to_have_class(re.compile(r"\bpinned\b"))
        expect(page.locator("#pin-1")).to_be_focused()
        expect(page.locator("#pin-1")).to_have_text("Unpin")

        # The view toggle, both ways.
        tab_to(page, "#show-model-view", back=True)
        page.keyboard.press("Enter")
        expect(page.locator("#model-view .window-message").first).to_be_visible()
        expect(page.locator("#show-model-view")).to_have_attribute("aria-pressed", "true")
        expect(transcript).to_be_hidden()
        page.keyboard.press("Shift+Tab")
        expect(page.locator("#show-everything")).to_be_focused()
        page.keyboard.press("Enter")
        expect(transcript).to_be_visible()
        expect(page.locator("#show-everything")).to_have_attribute("aria-pressed", "true")

        # Compact now, with instructions typed in; then open the divider and read its summary.
        tab_to(page, "#compact-form input[name=instructions]")
        page.keyboard.insert_text("keep the timetable")
        page.keyboard.press("Tab")
        expect(page.locator("#compact-now")).to_be_focused()
        page.keyboard.press("Enter")
        divider = page.locator("#transcript .divider.committed")
        expect(divider).to_have_count(1)
        tab_to(page, "#transcript .divider > summary", back=True)
        assert_focus_ring(page)
        page.keyboard.press("Enter")
        expect(divider.locator(".summary")).to_be_visible()
        page.keyboard.press("Tab")
        expect(divider.locator(".summary")).to_be_focused()  # a long one scrolls by keys

        # Older messages, a page at a time: the focus stays on the button, then goes to the
        # oldest message once there is nothing older.
        page.reload()
        wait_socket(page)
        expect(page.locator("#msg-1")).to_have_count(0)
        tab_to(page, "#load-older")
        for _ in range(10):
            page.keyboard.press("Enter")
            page.wait_for_function(
                "() => !document.querySelector('.htmx-request')"
                " && document.activeElement !== document.body"
            )
            if not page.locator("#load-older").count():
                break
            expect(page.locator("#load-older")).to_be_focused()
        expect(page.locator("#msg-1")).to_be_focused()
        assert_focus_ring(page)
    finally:
        context.close()
