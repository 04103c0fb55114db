"""The keyboard, the composer and the reader's place (issue 39), on a desktop and on a 390 px
phone, in light and dark, each checked by what is in the viewport: the first Tab does not scroll
the transcript away, so Tab-Enter-type-send shows the message and its reply; a reader scrolled up
stays where they are while a reply arrives, and "Newest ↓" takes them back; switching between
"Everything" and "What the model sees" keeps the message in view; the message box grows with its
text up to half the screen; the edit box sends with Enter; `?` lists the shortcuts, Esc closes the
list, and the shortcuts work. Nothing is refused by the Content-Security-Policy, and axe-core
finds nothing serious with the new controls on screen."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from . import screens
from .conftest import new_context, new_conversation, signup, turn, wait_replies, wait_socket
from .screens import SCREENS
from .test_accessibility_in_a_browser import Audit

pytestmark = pytest.mark.browser

LINE = "The harbour log for the week: wind, swell, the relief boat and the lamp oil order."
FILLER = " ".join(
    ["The shorebird survey counts every wader on the estuary at low tide, twice a month."] * 12
)


@pytest.fixture(scope="module")
def account(browser, fast_server):
    """A user with a long conversation: a compaction (its summary heads the model's view) and
    turns after it that fill several screens."""
    context = new_context(browser)
    page = context.new_page()
    signup(page, fast_server, "keyboarder")
    new_conversation(page)
    for n in range(3):
        turn(page, f"Survey note {n}. {FILLER}")
    page.click("#compact-now")
    expect(page.locator('#transcript .divider[data-trigger="manual"]')).to_have_count(1)
    for n in range(10):
        turn(page, f"Turn {n}: {LINE}")
    state = context.storage_state()
    url = page.url
    context.close()
    return {"state": state, "long": url}


class Screen(screens.Screen):
    def seen(self, locator) -> bool:
        """Some of it between the sticky header and the sticky composer."""
        return locator.evaluate(
            """el => { const b = el.getBoundingClientRect();
                const top = document.querySelector('.chat-header').getBoundingClientRect().bottom;
                const bottom = document.querySelector('.composer-area').getBoundingClientRect().top;
                return b.height > 0 && b.bottom > top + 4 && b.top < bottom - 4; }"""
        )

    def assert_seen(self, locator, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.seen(locator):
            assert time.monotonic() < deadline, (self.name, "not in view", locator)
            self.page.wait_for_timeout(100)

    def scroll_y(self) -> float:
        return self.page.evaluate("scrollY")


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, account, tmp_path):
    """A page of the user on one screen and colour scheme; every CSP refusal in it fails."""
    with screens.page_on(browser, account["state"], request.param, tmp_path, Screen) as screen:
        yield screen


def user_bubble(page, text: str):
    return page.locator("#transcript .message.user", has_text=text)


def conversation_to_send_in(screen, fast_server: str) -> None:
    """A conversation of its own, several screens long, for a test that sends in it."""
    screen.open(f"{fast_server}/")
    new_conversation(screen.page)
    for n in range(12):
        turn(screen.page, f"Log turn {n}: {LINE} {LINE}")


def top(locator) -> float:
    return locator.evaluate("el => el.getBoundingClientRect().top")


def test_tab_enter_type_send_shows_the_message_and_its_reply(screen, fast_server):
    page = screen.page
    conversation_to_send_in(screen, fast_server)
    page.reload()
    wait_socket(page)
    last = page.locator("#transcript .message").last
    screen.assert_seen(last)

    page.keyboard.press("Tab")
    expect(page.locator("a.skip-link")).to_be_focused()
    screen.assert_seen(last)  # the skip link showed without scrolling the page to its top
    page.keyboard.press("Enter")
    expect(page.locator("#message-input")).to_be_focused()
    page.keyboard.type("Tab note: where is the relief boat today?")
    page.keyboard.press("Enter")
    wait_replies(page, 13)

    screen.assert_seen(user_bubble(page, "Tab note"))
    screen.assert_seen(page.locator("#transcript .message.assistant").last)
    screen.shot("after-send")


def test_scrolled_up_a_reply_leaves_the_view_and_newest_goes_back(screen, fast_server):
    page = screen.page
    conversation_to_send_in(screen, fast_server)
    newest = page.locator("#to-newest")
    expect(newest).to_be_hidden()  # at the end, nothing to go back to
    reading = user_bubble(page, "Log turn 6:")
    reading.evaluate("el => el.scrollIntoView({block: 'center'})")
    page.mouse.wheel(0, -1)  # as a person scrolls: the page hears it
    expect(newest).to_be_visible()
    box = newest.bounding_box()
    assert box["width"] >= 24 and box["height"] >= 24, box
    page.wait_for_timeout(200)
    before = top(reading)

    page.fill("#message-input", "Scrolled note: how far is the lighthouse?")
    page.press("#message-input", "Enter")
    wait_replies(page, 13)
    page.wait_for_timeout(300)  # any follow-up scroll would have happened
    # The message being read stays where it was (the page may shift under it as messages above
    # change height, as the browser keeps the view in place); the new one is below, unseen.
    assert abs(top(reading) - before) < 2, (before, top(reading))
    assert not screen.seen(user_bubble(page, "Scrolled note"))
    expect(page.locator("#newest-status")).to_have_text("New messages below. Newest goes to them.")
    expect(newest).to_be_visible()
    screen.shot("scrolled-up")

    # From the keyboard: back from the message box (past the file picker) to the button.
    page.focus("#message-input")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")
    expect(newest).to_be_focused()
    page.keyboard.press("Enter")
    screen.assert_seen(page.locator("#transcript .message.assistant").last)
    expect(newest).to_be_hidden()
    expect(page.locator("#transcript .message").last).to_be_focused()
    expect(page.locator("#newest-status")).to_be_empty()  # said again at the next arrival


def test_newest_is_clean_for_axe_and_works_by_tap(screen, account):
    page = screen.page
    screen.open(account["long"])
    page.mouse.wheel(0, -1500)
    expect(page.locator("#to-newest")).to_be_visible()
    audit = Audit()
    audit(page, "newest")
    audit.assert_clean()
    page.emulate_media(color_scheme=SCREENS[screen.name]["color_scheme"])
    screen.tap("#to-newest")
    screen.assert_seen(page.locator("#transcript .message").last)


def test_switching_views_keeps_the_message_in_view(screen, account):
    page = screen.page
    screen.open(account["long"])
    mine = user_bubble(page, "Turn 4:")
    mine.evaluate("el => el.scrollIntoView({block: 'center'})")
    screen.assert_seen(mine)
    assert screen.scroll_y() > 1000

    screen.tap("#show-model-view")
    view = page.locator("#model-view")
    expect(view).to_be_visible()
    in_model_view = view.locator(".window-message.user", has_text="Turn 4:")
    expect(in_model_view).to_have_count(1)
    screen.assert_seen(in_model_view)
    screen.shot("model-view")

    screen.tap("#show-everything")
    expect(page.locator("#transcript")).to_be_visible()
    screen.assert_seen(mine)
    assert screen.scroll_y() > 1000


def test_the_composer_grows_to_half_the_screen_then_scrolls(screen, account):
    page = screen.page
    screen.open(account["long"])
    box = page.locator("#message-input")
    line_height = box.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)")

    box.fill("\n".join(f"Line {n} of the packing list." for n in range(1, 9)))
    shown = box.evaluate("el => ({client: el.clientHeight, scroll: el.scrollHeight})")
    assert shown["client"] >= 8 * line_height, (shown, line_height)
    assert shown["scroll"] <= shown["client"] + 1, shown  # all eight lines, no scrolling
    screen.assert_seen(page.locator("#transcript .message").last)  # the newest not covered
    screen.shot("eight-lines")

    box.fill("\n".join(f"Line {n} of the long packing list." for n in range(1, 61)))
    half = page.evaluate("innerHeight / 2")
    height = box.evaluate("el => el.getBoundingClientRect().height")
    assert half - 2 * line_height <= height <= half + 1, (height, half)
    assert box.evaluate("el => el.scrollHeight > el.clientHeight")
    screen.shot("sixty-lines")

    box.fill("")
    assert box.evaluate("el => el.getBoundingClientRect().height") < 4 * line_height


def test_the_edit_box_sends_with_enter(screen, fast_server):
    page = screen.page
    screen.open(f"{fast_server}/")
    new_conversation(page)
    turn(page, "About kestrels, KESTREL.")
    mine = page.locator("#msg-1")
    mine.get_by_text("Edit", exact=True).click()
    field = mine.get_by_label("Edited message 1")
    field.fill("About merlins instead, MERLIN.")
    field.press("Shift+Enter")
    field.type("A second line.")
    field.press("Enter")
    expect(page.locator("#transcript .message.user").first).to_contain_text("MERLIN", timeout=5000)
    expect(page.locator("#transcript .message.user").first).to_contain_text("A second line.")
    expect(page.locator("#transcript .message.user .version-count").first).to_have_text("2 / 2")


def test_question_mark_lists_the_shortcuts_and_they_work(screen, account):
    page = screen.page
    screen.open(account["long"])
    last = page.locator("#transcript .message").last
    help_list = page.locator("#keys-help")

    page.keyboard.press("?")
    expect(help_list).to_be_visible()
    expect(help_list).to_be_in_viewport(ratio=1)
    expect(help_list).to_contain_text("Keyboard shortcuts")
    screen.shot("shortcuts")
    audit = Audit()
    audit(page, "shortcuts")
    audit.assert_clean()
    page.emulate_media(color_scheme=SCREENS[screen.name]["color_scheme"])
    page.keyboard.press("Escape")
    expect(help_list).to_be_hidden()
    screen.assert_seen(last)

    page.keyboard.press("/")
    expect(page.locator("#search-conversation")).to_be_focused()
    page.keyboard.press("Shift+Escape")
    expect(page.locator("#message-input")).to_be_focused()
    page.keyboard.type("Is ? a question?")  # typed, not a shortcut, in a text field
    expect(help_list).to_be_hidden()
    expect(page.locator("#message-input")).to_have_value("Is ? a question?")
    page.fill("#message-input", "")
    if not screen.phone:  # on a phone the sidebar's search is out of sight
        page.keyboard.press("Control+k")
        expect(page.locator("#search-all")).to_be_focused()

    url = page.url
    page.keyboard.press("Control+Shift+O")
    page.wait_for_url(lambda u: u != url and "/conversations/" in u)
    wait_socket(page)
    expect(page.locator("#transcript .message")).to_have_count(0)
