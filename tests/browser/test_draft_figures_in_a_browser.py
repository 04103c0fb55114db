"""A draft waiting for review shows what it would do: the window before → after, kept N of M
key facts and the ones it does not state; edited, the figures follow the text in the box (the
walk of issue 37: the Redis URL added by hand counts as kept before approval). On a desktop and a
390 px phone, with no CSP refusal."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, new_conversation, review_mode, turn
from .screens import SCREENS, in_view, reach_panel
from .test_chat_in_a_browser import PARAGRAPH, compact_now
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

URL = "redis://10.4.2.17:6379/3"
SAID = [
    f"Our broker is Redis 7.2 at {URL} for the job queue. " + PARAGRAPH,
    "The runbook lives at /srv/runbooks/queue-recovery.md and the invoice is INV-20931. "
    + PARAGRAPH,
    "Does this look right? " + PARAGRAPH,
]


def kept(figures) -> tuple[int, int]:
    text = figures.locator(".draft-facts").inner_text()
    found = re.fullmatch(r"kept (\d+) of (\d+) key facts?", text)
    assert found, text
    return int(found[1]), int(found[2])


@pytest.mark.parametrize("screen", ["desktop-light", "phone-light", "phone-dark"])
def test_the_waiting_draft_shows_its_figures_and_they_follow_an_edit(
    browser, server, user_state, screen, tmp_path
):
    context = browser.new_context(storage_state=user_state, **SCREENS[screen])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    try:
        page = context.new_page()
        page.goto(f"{server}/")
        new_conversation(page)
        review_mode(page)
        for text in SAID:
            turn(page, text)
        reach_panel(page)
        compact_now(page)
        draft = page.locator("#review textarea[name=summary]")
        expect(draft).to_be_visible()

        figures = page.locator("#review #draft-figures")
        in_view(page, figures)
        pre = int(figures.locator(".pre").inner_text().replace(",", ""))
        post = int(figures.locator(".post").inner_text().replace(",", ""))
        assert 0 < post < pre, (pre, post)
        first_kept, total = kept(figures)
        # The rule-based draft states every fact: the URL, the path, the invoice, Redis 7.2;
        # nothing the demo said about its window, no question.
        assert first_kept == total >= 4, figures.inner_text()
        page.screenshot(path=tmp_path / f"draft-figures-{screen}.png")

        # Cut down to one fact: the others are listed as not stated, and the window is smaller.
        draft.fill("The runbook: /srv/runbooks/queue-recovery.md.")
        expect(figures.locator(".draft-facts")).to_have_text(f"kept 1 of {total} key facts")
        lost = figures.locator(".facts-lost li")
        expect(lost.filter(has_text=URL)).to_have_count(1)
        expect(lost.filter(has_text="INV-20931")).to_have_count(1)
        assert int(figures.locator(".post").inner_text().replace(",", "")) < post

        # The URL added back as Markdown would escape and break it: kept again.
        draft.press("End")
        draft.type("\nBroker: `redis://10.4.2.17:\n6379/3`")
        expect(figures.locator(".draft-facts")).to_have_text(f"kept 2 of {total} key facts")
        expect(lost.filter(has_text=URL)).to_have_count(0)
        in_view(page, figures)
        page.screenshot(path=tmp_path / f"draft-figures-edited-{screen}.png")
        print(f"screenshots: {tmp_path}/draft-figures-*-{screen}.png")

        # Approved, the divider records the same count.
        page.locator("#review").get_by_role("button", name="Approve").click()
        divider = page.locator("#transcript .divider.committed")
        expect(divider.locator(".divider-facts")).to_have_text(f"kept 2 of {total} key facts")
        refusals.assert_none(page)
    finally:
        context.close()
