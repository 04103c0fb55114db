"""What a person triggers answers where they are looking, on a desktop
and on a phone, in light and dark, with nothing refused by the Content-Security-Policy:

- the header's search in a long conversation scrolled to its end: the results in view, focused;
- "Compact now" with nothing to compact: the notice in view;
- a draft to review: in view with the focus on it, and a notice that it waits, in view however
  the page is scrolled and after a reload, that leads back to it;
- a search hit or a panel link opened: its top below the sticky header, whole if it fits;
- the page opens on the newest messages with the composer at the bottom of the screen, under a
  compact header; on a phone the context panel is a drawer one tap away.

"In view" is measured against the room the sticky header and composer leave, not merely the
viewport: an element under the header is not seen.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from .conftest import new_context, new_conversation, review_mode, signup, turn, wait_socket
from .screens import SCREENS, Screen, page_on, reach_panel

pytestmark = pytest.mark.browser

PHONE_HEADER_MAX = 100

LINE = "The harbour log for the week: wind, swell, the relief boat and the lamp oil order."
# Long enough that three turns make a span worth compacting in the test budget, short of the
# auto threshold.
FILLER = " ".join(
    ["The shorebird survey counts every wader on the estuary at low tide, twice a month."] * 12
)
# A message taller than the room between the header and the composer, on either screen.
TALL = "\n".join(
    f"Line {n} of the TALLHIT inventory: one more crate of lamp oil." for n in range(50)
)


@pytest.fixture(scope="module")
def account(browser, fast_server):
    """A user with a long conversation: a compaction (its divider far above the end), a tall
    message, and enough turns after it to fill several screens."""
    context = new_context(browser)
    page = context.new_page()
    signup(page, fast_server, "reader")
    new_conversation(page)
    for n in range(3):
        turn(page, f"Survey note {n}. {FILLER}")
    page.click("#compact-now")
    expect(page.locator('#transcript .divider[data-trigger="manual"]')).to_have_count(1)
    turn(page, TALL)
    for n in range(8):
        turn(page, f"Turn {n}: {LINE}")
    state = context.storage_state()
    long_url = page.url
    context.close()
    return {"state": state, "long": long_url}


@pytest.fixture(params=list(SCREENS))
def seen(request, browser, account, tmp_path):
    """A page on the chosen screen and colour scheme; every CSP refusal in it fails the test.
    `seen.shot(name)` saves a screenshot next to the test's temporary files."""
    with page_on(browser, account["state"], request.param, tmp_path, Seen) as view:
        yield view


class Seen(Screen):
    def reach_panel(self) -> None:
        reach_panel(self.page, tap=self.phone)

    def room(self, selector: str) -> dict:
        """Where `selector` can be seen: below the sticky header and above the sticky composer,
        unless it is part of one of them (they stay on screen)."""
        return self.page.evaluate(
            """s => { const el = document.querySelector(s);
                const header = document.querySelector('.chat-header');
                const composer = document.querySelector('.composer-area');
                const sticky = header.contains(el) || composer.contains(el);
                return {top: sticky ? 0 : header.getBoundingClientRect().bottom,
                        bottom: sticky ? innerHeight : composer.getBoundingClientRect().top}; }""",
            selector,
        )

    def box(self, selector: str) -> dict:
        return self.page.eval_on_selector(
            selector,
            "e => { const b = e.getBoundingClientRect(); return {top: b.top,"
            " bottom: b.bottom, height: b.height, x: b.x + b.width / 2}; }",
        )

    def assert_seen(self, selector: str, timeout: float = 5.0) -> None:
        """On screen and not under anything: whole between the header and the composer (from
        its top, if it is taller than that room), and the element itself at its top. Retried
        for a moment, as `expect` does: a drawer may still be sliding away."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._seen(selector)
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                self.page.wait_for_timeout(100)

    def _seen(self, selector: str) -> None:
        box, room = self.box(selector), self.room(selector)
        assert box["top"] >= room["top"] - 1, (selector, "under the header or above", box, room)
        if box["height"] <= room["bottom"] - room["top"]:
            assert box["bottom"] <= room["bottom"] + 1, (selector, "below the view", box, room)
        else:
            assert box["top"] < room["bottom"], (selector, "below the view", box, room)
        on_top = self.page.evaluate(
            "([s, x, y]) => { const at = document.elementFromPoint(x, y);"
            " const el = document.querySelector(s);"
            " return !!at && (el.contains(at) || at.contains(el)); }",
            [selector, box["x"], box["top"] + 4],
        )
        assert on_top, (selector, "covered by something else")

    def assert_at_the_end(self) -> None:
        """The page sits at the end of a long conversation (as it opens)."""
        assert self.page.evaluate("scrollY") > 500
        expect(self.page.locator("#transcript .message").last).to_be_in_viewport()


def _new_conversation_at(seen: Seen, fast_server: str) -> None:
    seen.open(f"{fast_server}/")
    new_conversation(seen.page)


# --- 1. results, notices and drafts in view ---------------------------------------------------


def test_the_header_search_answers_in_view(seen, account):
    page = seen.page
    seen.open(account["long"])
    seen.assert_at_the_end()
    page.fill("#search-conversation", "harbour")
    page.press("#search-conversation", "Enter")
    heading = page.locator("#conversation-results .search-count")
    expect(heading).to_contain_text("best match")
    expect(page.locator("#conversation-results .search-hit").first).to_be_in_viewport()
    seen.assert_seen("#conversation-results .search-hit")
    expect(heading).to_be_in_viewport()
    expect(heading).to_be_focused()
    seen.shot("search-results")
    # Esc puts them away and gives the box back.
    page.keyboard.press("Escape")
    expect(page.locator("#conversation-results .search-hit")).to_have_count(0)
    expect(page.locator("#search-conversation")).to_be_focused()
    # A click elsewhere puts them away too, as a drop-down's would: they cover the transcript.
    page.press("#search-conversation", "Enter")
    expect(heading).to_be_focused()
    page.locator("#transcript .message").last.click()
    expect(page.locator("#conversation-results .search-hit")).to_have_count(0)


def test_compact_now_with_nothing_to_compact_says_so_in_view(seen, fast_server):
    page = seen.page
    _new_conversation_at(seen, fast_server)
    turn(page, f"Only one turn so far. {LINE}")
    seen.reach_panel()
    page.locator("#compact-now").click()
    notice = page.locator("#notice")
    expect(notice).to_contain_text("Nothing to compact yet")
    expect(notice).to_be_in_viewport()
    seen.assert_seen("#notice")
    seen.shot("nothing-to-compact")


def test_a_draft_to_review_shows_in_view_and_waits_where_it_is_seen(seen, fast_server):
    page = seen.page
    _new_conversation_at(seen, fast_server)
    review_mode(page)
    for n in range(3):
        turn(page, f"Review note {n}. {FILLER}")
    for n in range(4):
        turn(page, f"Short turn {n}: {LINE}")
    seen.assert_at_the_end()
    seen.reach_panel()
    page.locator("#compact-now").click()

    heading = page.locator("#review h2")
    expect(heading).to_be_visible()
    seen.assert_seen("#review h2")
    expect(heading).to_be_focused()
    expect(page.locator("#review textarea[name=summary]")).to_be_in_viewport()
    waiting = page.locator("#review-waiting")
    expect(waiting).to_contain_text("A summary draft is waiting for your review")
    seen.assert_seen("#review-waiting")
    seen.shot("draft")

    # Read elsewhere: the notice stays in view, and leads back to the draft.
    page.evaluate("window.scrollTo(0, 0)")
    expect(waiting).to_be_in_viewport()
    seen.assert_seen("#review-waiting")
    seen.shot("draft-waiting-scrolled-away")
    seen.tap("#review-waiting a")
    expect(heading).to_be_focused()
    seen.assert_seen("#review h2")

    # After a reload too.
    page.reload()
    wait_socket(page)
    expect(waiting).to_be_visible()
    seen.assert_seen("#review-waiting")

    # Approved: nothing waits any more.
    page.locator("#review").get_by_role("button", name="Approve").click()
    expect(page.locator("#transcript .divider.committed")).to_have_count(1)
    expect(waiting).to_be_hidden()
    expect(page.locator("#review")).to_be_hidden()


def test_an_opened_hit_lands_below_the_header(seen, account):
    page = seen.page
    seen.open(account["long"])
    page.fill("#search-conversation", "TALLHIT")
    page.press("#search-conversation", "Enter")
    hit = page.locator("#conversation-results .search-hit a").filter(has_text="You").first
    expect(hit).to_be_visible()
    seq = re.search(r"#msg-(\d+)$", hit.get_attribute("href")).group(1)
    hit.click()
    page.wait_for_url(f"**#msg-{seq}")
    wait_socket(page)
    target = f"#msg-{seq}"
    expect(page.locator(target)).to_contain_text("TALLHIT")
    seen.assert_seen(target)
    seen.shot("hit-opened")

    # A short one (the reply under it) is shown whole.
    short = f"#msg-{int(seq) + 1}"
    page.goto(f"{account['long'].split('?')[0]}?at={int(seq) + 1}{short}")
    wait_socket(page)
    seen.assert_seen(short)


def test_a_panel_link_lands_on_its_divider_below_the_header(seen, account):
    page = seen.page
    seen.open(account["long"])
    seen.assert_at_the_end()
    seen.reach_panel()
    link = page.locator('#context .boundaries a[href^="#compaction-"]').first
    divider = "#" + link.get_attribute("href").lstrip("#")
    seen.tap('#context .boundaries a[href^="#compaction-"]')
    if seen.phone:  # the drawer closed to show it
        expect(page.locator("#context")).not_to_be_in_viewport()
    expect(page.locator(f"{divider} > summary")).to_be_in_viewport()
    seen.assert_seen(f"{divider} > summary")
    expect(page.locator(divider)).to_have_attribute("open", "")
    seen.shot("divider-opened")


# --- 4. the page opens on the conversation, the panel one tap away -----------------------------


def test_the_page_opens_on_the_newest_messages_with_the_composer_at_the_bottom(seen, account):
    page = seen.page
    seen.open(account["long"])
    seen.assert_at_the_end()
    last = "#transcript .message:last-child"
    seen.assert_seen(last)
    composer = seen.box(".composer-area")
    height = page.evaluate("innerHeight")
    assert height - 2 <= composer["bottom"] <= height + 1, (composer, height)
    expect(page.locator("#message-input")).to_be_in_viewport()
    header = seen.box(".chat-header")["height"]
    seen.shot("opened")

    context = page.locator("#context")
    if not seen.phone:
        expect(context).to_be_in_viewport()  # beside the transcript
        return
    assert header <= PHONE_HEADER_MAX, f"the header is {header}px tall on a phone"
    expect(context).not_to_be_in_viewport()
    toggle = page.locator("#show-panel")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    seen.tap("#show-panel")
    expect(context).to_be_in_viewport()
    expect(page.locator("#context .meter")).to_be_in_viewport()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    seen.shot("panel-open")
    seen.tap("#hide-panel")
    expect(context).not_to_be_in_viewport()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()
    # The conversation is where it was.
    seen.assert_seen(last)
