"""Accessibility, measured by axe-core in a real browser: every page of the app and the admin
pages an admin uses, in the states a user meets them (empty, with messages, a divider opened, a
draft waiting for review, the model view, the menu opened, search results), in light and dark
mode, with no violation of impact "serious" or "critical".

axe-core comes from package.json (pinned in package-lock.json; `make test-browser` runs
`npm ci` when node_modules is missing or stale). It is injected with `page.evaluate`, which
runs through the DevTools protocol and so is not subject to the page's Content-Security-Policy
(no inline scripts are allowed). That keeps the policy in force while auditing, so each page is
measured exactly as users get it; a context with `bypass_csp=True` would audit a page whose
scripts (htmx among them) run under looser rules than in production.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import (
    ROOT,
    new_context,
    new_conversation,
    replies,
    send,
    server_with_admin,
    signup,
    turn,
    wait_replies,
    wait_socket,
)

pytestmark = pytest.mark.browser

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
ADMIN = ("ada", "a-long-admin-password-3")
BLOCKING = {"serious", "critical"}
PARAGRAPH = (
    "The lighthouse keeper logs the weather every four hours: wind, swell, visibility and the "
    "barometer. The relief boat comes on Thursdays unless the swell is over two metres, and the "
    "keeper orders lamp oil, bread and batteries a week ahead."
)


def long_message(n: int, tag: str) -> str:
    return f"{tag} Turn {n}. " + " ".join([PARAGRAPH] * 4)


@pytest.fixture(scope="module")
def a11y_server():
    """A server of its own with an admin in its database (the admin pages are audited too)."""
    with server_with_admin("browser-tests-a11y-", *ADMIN) as base:
        yield base


class Audit:
    """Runs axe on a page in light and dark mode; keeps every serious or critical violation."""

    def __init__(self) -> None:
        if not AXE.exists():
            pytest.fail(f"axe-core is not installed ({AXE}): run `npm ci` (make test-browser does)")
        self.source = AXE.read_text()
        self.violations: list[str] = []
        self.audited: list[str] = []

    def __call__(self, page, name: str) -> None:
        page.wait_for_load_state()
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            # Colours that change with the scheme may ease in (the admin's links do): measure the
            # colours they end on. Endless animations (the typing dots, spinners) are not waited.
            page.evaluate(
                "() => Promise.all(document.getAnimations()"
                ".filter(a => a instanceof CSSTransition).map(a => a.finished.catch(() => null)))"
            )
            if not page.evaluate("() => typeof window.axe === 'object'"):
                page.evaluate(self.source)
            result = page.evaluate(
                "() => axe.run(document, {resultTypes: ['violations']})"
                ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
                " nodes: v.nodes.map(n => ({target: n.target, summary: n.failureSummary}))})))"
            )
            for v in result:
                if v["impact"] not in BLOCKING:
                    continue
                lines = [f"[{name}, {scheme}] {v['id']} ({v['impact']}): {v['help']}"]
                for node in v["nodes"]:
                    summary = " ".join((node["summary"] or "").split())
                    lines.append(f"    {node['target']}: {summary[:300]}")
                self.violations.append("\n".join(lines))
        page.emulate_media(color_scheme="light")
        self.audited.append(name)

    def assert_clean(self) -> None:
        assert not self.violations, (
            f"{len(self.violations)} serious or critical axe violations:\n"
            + "\n".join(self.violations)
        )


@pytest.fixture
def audit():
    return Audit()


def test_every_page_of_the_chat_passes_axe(browser, a11y_server, audit):
    base = a11y_server
    context = new_context(browser)
    page = context.new_page()
    try:
        page.goto(f"{base}/accounts/login/")
        audit(page, "login")
        page.goto(f"{base}/accounts/signup/")
        audit(page, "sign-up")

        signup(page, base, "ida")
        expect(page.get_by_role("heading", name="Start a conversation")).to_be_visible()
        audit(page, "home, no conversations")

        # A conversation in review mode: messages, a stopped reply, a tool call, then a draft.
        new_conversation(page)
        page.locator("details.conversation-menu > summary").click()
        expect(page.locator(".tools-switches .tools-form")).to_be_visible()
        audit(page, "conversation menu opened")
        page.check("input[name=review_compactions]")
        page.get_by_role("button", name="Save settings").click()
        page.wait_for_load_state()
        wait_socket(page)
        audit(page, "a new conversation")

        turn(page, long_message(1, "Harbour notes: the pelican key is in the blue box."))
        turn(page, long_message(2, "The relief boat brings oil."))
        send(page, long_message(3, "Keep this short, I will stop you."))
        expect(page.locator('#transcript .message[data-status="streaming"]')).to_have_count(1)
        page.keyboard.press("Escape")
        expect(replies(page, "interrupted")).to_have_count(1)
        turn(page, "Which box holds the osprey key today?")
        audit(page, "a conversation with messages")

        done = replies(page).count()
        send(page, "Tell me about the relief boat once more.")
        expect(page.locator('#transcript .message[data-status="streaming"]')).to_have_count(1)
        audit(page, "a reply streaming")
        wait_replies(page, done + 1)

        last = page.locator("#transcript .message.assistant").last
        last.get_by_role("button", name="Regenerate").click()
        expect(page.locator("#transcript .versions .version-count")).to_have_text("2 / 2")
        expect(replies(page, "streaming")).to_have_count(0)
        page.locator("#transcript .message.user").last.get_by_text("Edit", exact=True).click()
        audit(page, "versions: a reply asked again, a message opened for editing")

        page.fill("#search-conversation", "pelican")
        page.press("#search-conversation", "Enter")
        expect(page.locator("#conversation-results .search-hit").first).to_be_visible()
        page.fill("#search-all", "relief")
        page.press("#search-all", "Enter")
        expect(page.locator("#sidebar-results .search-hit").first).to_be_visible()
        audit(page, "search results in the header and the sidebar")

        page.click("#compact-now")
        expect(page.locator("#review textarea[name=summary]")).to_be_visible()
        audit(page, "a draft summary waiting for review")

        page.locator("#review").get_by_role("button", name="Approve").click()
        divider = page.locator("#transcript .divider.committed")
        expect(divider).to_have_count(1)
        divider.locator("summary").click()
        expect(divider.locator(".summary")).to_be_visible()
        audit(page, "a compaction divider, opened")

        page.click("#show-model-view")
        expect(page.locator("#model-view .window-message").first).to_be_visible()
        audit(page, "what the model sees")
        page.click("#show-everything")

        # The server's own render of it all, and the narrow layout (panels stacked).
        page.reload()
        wait_socket(page)
        audit(page, "the conversation, reloaded")
        page.set_viewport_size({"width": 800, "height": 900})
        audit(page, "the conversation at 800px")
        page.set_viewport_size({"width": 1280, "height": 860})

        page.goto(f"{base}/search/?q=pelican")
        expect(page.locator(".search-hit").first).to_be_visible()
        audit(page, "search page")
        page.goto(f"{base}/search/?q=nothingmatchesthis")
        audit(page, "search page, no hits")
    finally:
        context.close()
    audit.assert_clean()


def test_the_admin_pages_pass_axe(browser, a11y_server, audit):
    base = a11y_server
    # Something for the admin to list: a conversation with a compaction.
    user = new_context(browser)
    try:
        chat = user.new_page()
        signup(chat, base, "otto")
        new_conversation(chat)
        turn(chat, long_message(1, "GODWIT: a message for the admin to list."))
        turn(chat, long_message(2, "KNOT: and one more."))
        chat.click("#compact-now")
        expect(chat.locator("#transcript .divider.committed")).to_have_count(1)
    finally:
        user.close()

    context = new_context(browser)
    page = context.new_page()
    try:
        page.goto(f"{base}/admin/")
        audit(page, "admin login")
        page.fill("#id_username", ADMIN[0])
        page.fill("#id_password", ADMIN[1])
        page.click("input[type=submit]")
        expect(page.locator("#site-name")).to_be_visible()
        audit(page, "admin index")
        for model in ("chat/conversation", "compaction/compaction"):
            page.goto(f"{base}/admin/{model}/")
            rows = page.locator("#result_list tbody tr")
            expect(rows.first).to_be_visible()
            audit(page, f"admin {model} list")
            rows.first.locator("th a").click()
            expect(page.locator("#content-main form").first).to_be_visible()
            audit(page, f"admin {model} form")
    finally:
        context.close()
    audit.assert_clean()


LONG_TITLE = (
    "Harbour maintenance for the spring season: the slipway, the fuel berth, the pontoon "
    "chains, the lighthouse lamp and every mooring buoy from the breakwater to the fish quay"
)
# Everything in the header that is not the title: none of it may cover any part of it.
HEADER_CONTROLS = (
    ".chat-header button, .chat-header summary, .chat-header select, .chat-header a,"
    " .chat-header input:not(#title-input), .chat-header .model-name, .chat-header .demo-badge"
)


def test_the_header_keeps_a_long_title_readable(browser, a11y_server):
    base = a11y_server
    context = new_context(browser)
    page = context.new_page()
    try:
        signup(page, base, "hal")
        new_conversation(page)
        page.fill("#title-input", LONG_TITLE)
        page.get_by_role("button", name="Rename").click()
        page.wait_for_load_state()
        wait_socket(page)
        title = page.locator("#title-input")
        expect(title).to_have_value(LONG_TITLE)
        # The full title on hover, and for screen readers as the page's heading.
        expect(title).to_have_attribute("title", LONG_TITLE)
        expect(page.get_by_role("heading", level=1)).to_have_text(LONG_TITLE)
        for width in (1280, 800):
            page.set_viewport_size({"width": width, "height": 860})
            title.scroll_into_view_if_needed()
            layout = page.evaluate(
                """selector => {
                    const box = el => el.getBoundingClientRect();
                    const title = document.getElementById('title-input');
                    const t = box(title);
                    const covered = [...document.querySelectorAll(selector)]
                        .filter(el => el.getClientRects().length)
                        .map(el => [el.outerHTML.slice(0, 80), box(el)])
                        .filter(([, b]) => b.left < t.right - 0.5 && t.left < b.right - 0.5
                                           && b.top < t.bottom - 0.5 && t.top < b.bottom - 0.5)
                        .map(([html]) => html);
                    const centre = document.elementFromPoint(t.left + t.width / 2,
                                                             t.top + t.height / 2);
                    const style = getComputedStyle(title);
                    return {covered, width: t.width, left: t.left, right: t.right,
                            onTop: centre === title, viewport: innerWidth,
                            ellipsis: style.textOverflow,
                            clipped: title.scrollWidth > title.clientWidth};
                }""",
                HEADER_CONTROLS,
            )
            assert not layout["covered"], (width, layout)
            assert layout["onTop"], (width, layout)
            assert layout["width"] >= 200, (width, layout)
            assert 0 <= layout["left"] and layout["right"] <= layout["viewport"], (width, layout)
            # Longer than its box: it ends in an ellipsis (and the title attribute has it all).
            assert layout["clipped"] and layout["ellipsis"] == "ellipsis", (width, layout)
            # Every action is on screen, none pushed out of the header.
            for control in page.locator(".chat-actions > *").all():
                expect(control).to_be_in_viewport()
    finally:
        context.close()
