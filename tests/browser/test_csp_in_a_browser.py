"""The Content-Security-Policy in a real browser: every page, the admin's included, loads and
works with nothing refused. Chromium reports each refusal as a `securitypolicyviolation` event
and a console message; both are collected from before the first script of every document runs.
The chat's websocket (connect-src), htmx's swaps (no eval, no inline <style>), the meter (drawn
without style attributes) and the delete confirmation (no onsubmit attribute) are exercised."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from .conftest import (
    conversation_id,
    new_context,
    new_conversation,
    server_with_admin,
    signup,
    tokens,
    turn,
    wait_socket,
)

pytestmark = pytest.mark.browser

ADMIN = ("root", "a-long-admin-password-7")
# Long enough that two turns make a span worth compacting in the test budget.
FILLER = " ".join(
    ["The shorebird survey counts every wader on the estuary at low tide, twice a month."] * 12
)

# Runs in every document before its own scripts: a refusal that happens while the page loads
# is recorded too. The binding carries it out of the page, so navigations lose nothing.
LISTEN = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => {
    const v = {page: location.pathname, directive: e.violatedDirective, blocked: e.blockedURI,
               source: e.sourceFile, line: e.lineNumber, sample: e.sample};
    window.__csp.push(v);
    if (window.__cspReport) window.__cspReport(v);
});
"""


class Refusals:
    """Every CSP refusal (and uncaught script error) seen in one browser context."""

    def __init__(self, context):
        self.events: list[dict] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        context.expose_binding("__cspReport", lambda source, v: self.events.append(v))
        context.add_init_script(LISTEN)
        context.on("page", self.watch)

    def watch(self, page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: {error}"))

    def _console(self, message) -> None:
        text = message.text
        if "Content Security Policy" in text or "Content-Security-Policy" in text:
            self.console.append(text)

    def assert_none(self, page) -> None:
        page.wait_for_load_state()
        # Events still on their way out of the page through the binding are in __csp.
        in_page = page.evaluate("window.__csp || []")
        assert not self.events and not in_page, self.events or in_page
        assert not self.console, self.console
        assert not self.errors, self.errors


@pytest.fixture(scope="module")
def admin_server():
    """A server of its own with a superuser in its database (the admin is part of the test)."""
    with server_with_admin("browser-tests-csp-", *ADMIN) as base:
        yield base


@pytest.fixture
def watched(browser):
    context = new_context(browser)
    refusals = Refusals(context)
    yield context, refusals
    context.close()


def meter_matches_its_figures(page) -> None:
    """Each segment is as wide as its share says, though no style attribute sets it."""
    shares = page.evaluate(
        """() => {
            const meter = document.querySelector('#context .meter');
            const inner = meter.clientWidth;
            return [...meter.querySelectorAll('.seg')].map(
                s => [parseFloat(s.getAttribute('width')), 100 * s.getBoundingClientRect().width
                      / inner]);
        }"""
    )
    assert len(shares) == 4, shares
    assert sum(want for want, _ in shares) > 0, shares
    if sum(want for want, _ in shares) <= 100:
        for want, got in shares:
            assert abs(want - got) < 1, shares
    mark = page.locator("#context .threshold-mark line")
    box = mark.bounding_box()
    meter = page.locator("#context .meter").bounding_box()
    assert box and meter["x"] < box["x"] < meter["x"] + meter["width"], (box, meter)


def test_every_page_and_the_chat_work_under_the_policy(watched, admin_server):
    context, refusals = watched
    base = admin_server
    page = context.new_page()

    page.goto(f"{base}/accounts/login/")
    refusals.assert_none(page)
    # Django's CSRF failure page styles itself with the nonce (a login form left open while
    # the cookie went away).
    context.clear_cookies()
    page.fill("#id_username", "nobody")
    page.fill("#id_password", "not-a-password")
    page.click("button[type=submit]")
    expect(page.get_by_text("CSRF verification failed")).to_be_visible()
    refusals.assert_none(page)

    signup(page, base)  # the sign-up page, then home
    expect(page.get_by_role("heading", name="Start a conversation")).to_be_visible()
    refusals.assert_none(page)

    # The websocket opens and carries a whole turn: connect-src allows it.
    new_conversation(page)
    wait_socket(page)
    turn(page, "PLOVER: the first message, sent over the websocket under the policy. " + FILLER)
    turn(page, "SANDPIPER: a second one, so there is something to compact. " + FILLER)
    turn(page, "TURNSTONE: and a third. " + FILLER)
    meter_matches_its_figures(page)
    refusals.assert_none(page)

    before = tokens(page)
    page.fill("#compact-form input[name=instructions]", "keep the bird names")
    page.click("#compact-now")
    divider = page.locator('#transcript .divider[data-trigger="manual"]')
    expect(divider).to_have_count(1)
    page.wait_for_function(
        "b => +document.getElementById('window-tokens').dataset.tokens < b", arg=before
    )
    divider.locator("summary").click()
    expect(divider.locator(".summary")).to_be_visible()
    page.locator("#context .boundaries a").first.click()
    meter_matches_its_figures(page)

    # htmx's requests and swaps: the menu's tools, the model view, both search boxes.
    page.click(".conversation-menu summary")
    expect(page.locator(".tools-switches .tools-form")).to_be_visible()
    page.click("#show-model-view")
    expect(page.locator("#model-view .window-message").first).to_be_visible()
    page.click("#show-everything")
    page.fill("#search-conversation", "plover")
    page.press("#search-conversation", "Enter")
    expect(page.locator("#conversation-results .search-hit").first).to_be_visible()
    page.fill("#search-all", "sandpiper")
    page.press("#search-all", "Enter")
    expect(page.locator("#sidebar-results .search-hit").first).to_be_visible()
    refusals.assert_none(page)

    # The page as the server renders it, with the messages, the divider and the panel.
    page.reload()
    wait_socket(page)
    expect(page.locator("#transcript .divider")).to_have_count(1)
    page.locator("#transcript .divider summary").click()
    meter_matches_its_figures(page)
    page.goto(f"{base}/search/?q=turnstone")
    expect(page.locator(".search-hit").first).to_be_visible()
    refusals.assert_none(page)

    # Delete asks first (chat.js, not an onsubmit attribute): "no" keeps the conversation.
    page.go_back()
    wait_socket(page)
    pk = conversation_id(page)
    asked: list[str] = []

    def answer(accept: bool):
        def handle(dialog):
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return handle

    page.once("dialog", answer(False))
    page.click(".conversation-menu summary")
    page.click("form[data-confirm] button[type=submit]")
    assert asked == ["Delete this conversation?"]
    # A submit that went ahead would be a navigation by now, and the conversation gone. This
    # wait is the point (that nothing happens): no event would say that nothing was sent.
    page.wait_for_timeout(300)
    assert urlparse(page.url).path == f"/conversations/{pk}/", page.url
    assert page.request.get(f"{base}/conversations/{pk}/export.json").ok

    page.once("dialog", answer(True))
    page.click("form[data-confirm] button[type=submit]")
    page.wait_for_url(lambda url: f"/conversations/{pk}/" not in url)
    assert asked == ["Delete this conversation?"] * 2
    expect(page.locator(f"#conversation-link-{pk}")).to_have_count(0)
    assert page.request.get(f"{base}/conversations/{pk}/export.json").status == 404
    refusals.assert_none(page)


def test_the_admin_works_under_the_policy(watched, admin_server, browser):
    # Something for the admin to list: a conversation with a compaction.
    user = new_context(browser)
    try:
        chat = user.new_page()
        signup(chat, admin_server)
        new_conversation(chat)
        turn(chat, "GODWIT: a message for the admin to list. " + FILLER)
        turn(chat, "KNOT: and one more. " + FILLER)
        chat.click("#compact-now")
        expect(chat.locator("#transcript .divider")).to_have_count(1)
        expect(chat.locator("#transcript .divider")).to_have_class(re.compile(r"\bcommitted\b"))
    finally:
        user.close()

    context, refusals = watched
    page = context.new_page()
    page.goto(f"{admin_server}/admin/")
    page.fill("#id_username", ADMIN[0])
    page.fill("#id_password", ADMIN[1])
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    expect(page.locator("#content-main")).to_contain_text("Conversations")
    refusals.assert_none(page)

    for model in ("chat/conversation", "compaction/compaction"):
        page.goto(f"{admin_server}/admin/{model}/")
        rows = page.locator("#result_list tbody tr")
        expect(rows.first).to_be_visible()
        # The filters' toggle and the select-all box run the admin's own scripts.
        page.locator("#changelist-filter details summary").first.click()
        toggle = page.locator("#action-toggle")
        if toggle.count():
            toggle.check()
            expect(page.locator(".action-counter")).to_contain_text("1 of 1")
        refusals.assert_none(page)

        rows.first.locator("th a").click()
        expect(page.locator("#content-main form, #content-main fieldset").first).to_be_visible()
        refusals.assert_none(page)

    # The sidebar's filter box and the theme toggle are scripts too.
    page.fill("#nav-filter", "compa")
    page.locator("button.theme-toggle").first.click()
    refusals.assert_none(page)
