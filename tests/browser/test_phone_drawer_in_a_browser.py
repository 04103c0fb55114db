"""The conversation list on a phone, and targets big enough to hit, on a desktop and on a 390 px
phone, in light and dark, with nothing refused by the Content-Security-Policy and axe clean:

- on a phone the list (New conversation, Import, search, the list to its end) is a drawer behind
  ☰ in the header: out of view until ☰ opens it, with the focus inside; Esc, Close, a tap
  outside and choosing a conversation close it, the focus back on ☰; on a desktop it is beside
  the transcript, as it always was;
- the page opens on the newest message, not ~11 screens of sidebar away;
- every control in the header, the bubbles, the composer and the list is at least 24 × 24 CSS px
  (WCAG 2.2, 2.5.8), the message controls larger on a touch screen; "Regenerate" stays on one line.
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from .conftest import new_context, new_conversation, signup, turn, wait_replies, wait_socket
from .screens import SCREENS, page_on
from .test_accessibility_in_a_browser import Audit

pytestmark = pytest.mark.browser

MIN_TARGET = 24  # WCAG 2.2, 2.5.8 (minimum), CSS px
TOUCH_TARGET = 32  # the message controls on a touch screen
OTHERS = 20  # enough rows that the list is longer than a phone's screen
LINE = "The harbour log for the week: wind, swell, the relief boat and the lamp oil order."
CODE = "The lamp oil order, as sent:\n\n```\noil: 40 litres\nwicks: 12\n```"

# What a person can hit: links, buttons, menus' toggles and form fields, not hidden ones (the
# attach input is visually hidden: its label is the target) nor a link inside a message's prose
# (2.5.8's inline exception).
CONTROLS = """sel => [...document.querySelectorAll(sel)].filter(e => {
    if (e.closest('.markdown') && e.matches('a') && !e.closest('pre')) return false;
    const r = e.getBoundingClientRect();
    // Not inside a closed menu (its contents keep a layout box) nor hidden.
    return r.width > 2 && r.height > 2 && e.checkVisibility({visibilityProperty: true});
  }).map(e => { const r = e.getBoundingClientRect();
    return {what: (e.id ? '#' + e.id + ' ' : '') + e.tagName.toLowerCase() + '.' + e.className + ' '
                  + (e.getAttribute('aria-label') || e.textContent.trim()).slice(0, 30),
            width: Math.round(r.width * 10) / 10, height: Math.round(r.height * 10) / 10}; })"""
TARGETS = "button, a, summary, select, input:not([type=hidden]), textarea, label.attach"


@pytest.fixture(scope="module")
def account(browser, fast_server):
    """A user with many conversations (the list is longer than a phone's screen) and a long one
    opened last: several screens of turns, a reply in two versions, a code block to copy."""
    context = new_context(browser)
    page = context.new_page()
    signup(page, fast_server, "walker")
    new_conversation(page)
    others = [urlparse(page.url).path]
    create = page.get_attribute("#new-conversation-form", "action")
    token = page.input_value("#new-conversation-form input[name=csrfmiddlewaretoken]")
    for _ in range(OTHERS):
        answer = page.request.post(
            fast_server + create,
            form={"csrfmiddlewaretoken": token},
            headers={"Referer": fast_server + "/"},
        )
        assert answer.ok, answer.status
        others.append(urlparse(answer.url).path)
    new_conversation(page)
    for n in range(6):
        turn(page, f"Turn {n}: {LINE}")
    turn(page, CODE)
    page.locator("#transcript .message.assistant .reply-again").last.click()
    expect(page.locator("#transcript .versions")).to_have_count(1)
    wait_replies(page, 7)
    expect(page.locator('#transcript .message[data-status="streaming"]')).to_have_count(0)
    state = context.storage_state()
    long_url = page.url
    context.close()
    return {"state": state, "long": long_url, "other": others[0]}


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, account, tmp_path):
    """A page on the chosen screen and scheme; every CSP refusal in it fails the test."""
    with page_on(browser, account["state"], request.param, tmp_path) as on:
        on.open(account["long"])
        yield on.page, on.phone
        on.shot("end")


def tap(page, phone: bool, selector: str) -> None:
    locator = page.locator(selector)
    locator.tap() if phone else locator.click()


def drawer_closed(page) -> None:
    expect(page.locator(".sidebar")).not_to_be_in_viewport()
    expect(page.locator("#show-sidebar")).to_have_attribute("aria-expanded", "false")


def open_drawer(page) -> None:
    toggle = page.locator("#show-sidebar")
    toggle.tap()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.locator(".sidebar .new-conversation")).to_be_in_viewport()
    # The focus goes into the drawer (its Close), where the keyboard can go on through the list.
    expect(page.locator("#hide-sidebar")).to_be_focused()
    page.wait_for_function("() => !document.getAnimations().length")  # slid all the way in


def test_the_list_is_a_drawer_behind_a_menu_button_on_a_phone(screen, account):
    page, phone = screen
    # The page opens on the newest message, whatever the screen.
    expect(page.locator("#transcript .message").last).to_be_in_viewport()
    current = page.locator(".sidebar .sidebar-row.current > a")
    if not phone:
        # Nothing changes on a desktop: the list beside the transcript, no ☰.
        expect(page.locator("#show-sidebar")).to_be_hidden()
        expect(page.locator(".sidebar .new-conversation")).to_be_in_viewport()
        expect(current).to_be_in_viewport()
        # Narrowed to a phone's width, the list leaves at once: it does not slide over the
        # header as it goes (it slides only as ☰ and Close move it).
        page.set_viewport_size({"width": 800, "height": 860})
        assert page.evaluate("document.getElementById('sidebar').getAnimations().length") == 0
        # The context panel leaves as the list does, at once (drawer.js marks it as it opens).
        assert page.evaluate("document.getElementById('side-panel').getAnimations().length") == 0
        expect(page.locator("#side-panel")).to_be_hidden()
        drawer_closed(page)
        return

    drawer_closed(page)
    open_drawer(page)
    for part in (".import-form", "#search-all", ".sidebar-row.current > a"):
        expect(page.locator(f".sidebar {part}")).to_be_in_viewport()
    # The list scrolls inside the drawer, to its very end.
    last = page.locator(".sidebar .archived-link")
    expect(last).not_to_be_in_viewport()
    last.scroll_into_view_if_needed()
    expect(last).to_be_in_viewport()
    expect(page.locator("#show-sidebar")).to_have_attribute("aria-expanded", "true")

    # The keyboard stays in the open drawer: back from its first control to its last, and on
    # from there to the first again; the page under it is out of reach.
    page.locator("#hide-sidebar").focus()
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.closest('#sidebar') !== null")
    expect(page.locator("#hide-sidebar")).not_to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("#hide-sidebar")).to_be_focused()
    assert page.evaluate("document.getElementById('main').inert")

    page.keyboard.press("Escape")
    drawer_closed(page)
    expect(page.locator("#show-sidebar")).to_be_focused()
    assert not page.evaluate("document.getElementById('main').inert")
    # The transcript under it did not move.
    expect(page.locator("#transcript .message").last).to_be_in_viewport()

    open_drawer(page)
    page.locator("#hide-sidebar").tap()
    drawer_closed(page)
    expect(page.locator("#show-sidebar")).to_be_focused()

    open_drawer(page)
    page.touchscreen.tap(380, 600)  # the strip of page beside the drawer
    drawer_closed(page)

    # Choosing a conversation closes the drawer and opens it, on its newest message.
    open_drawer(page)
    other = page.locator(f'.sidebar .sidebar-row > a[href="{account["other"]}"]')
    other.scroll_into_view_if_needed()
    other.tap()
    expect(page.locator("#show-sidebar")).to_have_attribute("aria-expanded", "false")
    page.wait_for_url(f"**{account['other']}")
    wait_socket(page)
    drawer_closed(page)


def smaller(controls: list[dict], size: int) -> list[dict]:
    return [c for c in controls if min(c["width"], c["height"]) < size - 0.5]


def test_every_control_is_big_enough_to_hit(screen, tmp_path):
    page, phone = screen
    areas = ".chat-header, #transcript .message, .composer-area, .sidebar"
    sel = ", ".join(f"{a} :is({TARGETS})" for a in areas.split(", "))
    controls = page.evaluate(CONTROLS, sel)
    page.screenshot(path=str(tmp_path / "transcript.png"))
    if phone:  # the list's controls, in its drawer
        open_drawer(page)
        controls += page.evaluate(CONTROLS, f".sidebar :is({TARGETS})")
        page.screenshot(path=str(tmp_path / "drawer.png"))
    names = " ".join(c["what"] for c in controls)
    # The ones that were too small before, all measured.
    wanted = ["version-previous", "pin-toggle", "Edit", "copy", "reply-again", "Log out"]
    for name in wanted + (["show-sidebar"] if phone else []):
        assert name in names, (name, names)
    small = smaller(controls, MIN_TARGET)
    assert not small, "smaller than 24 × 24 px:\n" + "\n".join(map(str, small))

    touch = page.evaluate("matchMedia('(pointer: coarse)').matches")
    assert touch == phone
    if touch:
        meta = page.evaluate(
            CONTROLS,
            f"#transcript .message .meta :is({TARGETS}), #transcript .edit-message > summary,"
            " #transcript pre > .copy",
        )
        cramped = smaller(meta, TOUCH_TARGET)
        assert not cramped, "too small for a finger:\n" + "\n".join(map(str, cramped))

    # "Regenerate" is never wrapped onto a row under its reply's cost.
    rows = page.evaluate(
        """() => [...document.querySelectorAll('#transcript .message.assistant')].map(m => {
             const again = m.querySelector('.reply-again'), spend = m.querySelector('.turn-spend');
             return {again: again.getBoundingClientRect().top,
                     spend: spend.getBoundingClientRect().bottom}; })"""
    )
    under = [r for r in rows if r["again"] >= r["spend"] - 1]
    assert rows and not under, under


def test_the_drawer_passes_axe(screen):
    page, phone = screen
    audit = Audit()
    audit(page, "conversation")
    if phone:
        open_drawer(page)
        audit(page, "drawer open")
    audit.assert_clean()


def test_the_home_page_has_the_same_drawer(screen, account, fast_server, tmp_path):
    """The home's composer first, on a phone as on a desktop; its list behind the same ☰."""
    page, phone = screen
    page.goto(f"{fast_server}/")
    message = page.locator("#home-composer #message-input")
    expect(page.get_by_role("heading", name="Start a conversation")).to_be_in_viewport()
    expect(message).to_be_in_viewport(ratio=1)
    expect(message).to_be_focused()
    audit = Audit()
    if not phone:
        expect(page.locator("#show-sidebar")).to_be_hidden()
        expect(page.locator(".sidebar .sidebar-row > a").first).to_be_in_viewport()
        audit(page, "home")
        audit.assert_clean()
        return

    drawer_closed(page)
    open_drawer(page)
    for part in (".import-form", "#search-all", ".sidebar-row > a"):
        expect(page.locator(f".sidebar {part}").first).to_be_in_viewport()
    page.screenshot(path=str(tmp_path / "home-drawer.png"))
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.closest('#sidebar') !== null")
    page.keyboard.press("Escape")
    drawer_closed(page)
    expect(page.locator("#show-sidebar")).to_be_focused()
    expect(message).to_be_in_viewport(ratio=1)

    open_drawer(page)
    audit(page, "home, drawer open")
    audit.assert_clean()
    # Its list leads on, as on a conversation's page.
    other = page.locator(f'.sidebar .sidebar-row > a[href="{account["other"]}"]')
    other.scroll_into_view_if_needed()
    other.tap()
    page.wait_for_url(f"**{account['other']}")
    wait_socket(page)
    drawer_closed(page)


def test_the_search_page_opens_on_its_results_with_the_list_behind_the_same_menu(
    screen, fast_server
):
    page, phone = screen
    page.goto(f"{fast_server}/search/?q=harbour")
    expect(page.locator(".search-count")).to_contain_text("harbour")
    expect(page.locator(".search-hit").first).to_be_in_viewport(ratio=1)
    if not phone:
        expect(page.locator("#show-sidebar")).to_be_hidden()
        expect(page.locator(".sidebar .new-conversation")).to_be_in_viewport()
        return
    drawer_closed(page)
    open_drawer(page)
    expect(page.locator(".sidebar .sidebar-row > a").first).to_be_in_viewport()
    page.keyboard.press("Escape")
    drawer_closed(page)
    expect(page.locator("#show-sidebar")).to_be_focused()
