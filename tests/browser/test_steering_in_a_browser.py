"""Instructions that steer, as a person sees them: "Compact now" with "Keep every port, path and
name" in review mode shows the draft and, in the notice above it, what the instructions got;
Regenerate with the same instructions says the draft is the same and why."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import review_mode, turn

pytestmark = pytest.mark.browser

ASKED = "Keep every port, path and name"
FACTS = (
    "I'm Dana Whitfield from Northwind Freight. The API gateway listens on port 8443, the "
    "broker is Redis 7.2 at redis://10.4.2.17:6379/3 and the runbook lives at "
    "/srv/ops/runbooks/redis-failover.md. "
)
FILLER = "We are planning the launch and every change needs sign-off from finance first. " * 12


def test_the_notice_says_what_the_instructions_got_and_why_a_draft_is_the_same(chat):
    page = chat
    review_mode(page)

    turn(page, FACTS + FILLER)
    turn(page, "Invoice INV-2026-0417 from Acme Hosting is still unpaid. " + FILLER)
    turn(page, "What is left to do? " + FILLER)
    page.fill("#compact-form input[name=instructions]", ASKED)
    page.click("#compact-now")
    draft = page.locator("#review textarea[name=summary]")
    expect(draft).to_be_visible()
    notice = page.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("ports, paths and names of the messages it replaces")
    for fact in ("8443", "redis://10.4.2.17:6379/3", "/srv/ops/runbooks/redis-failover.md"):
        assert fact in draft.input_value(), draft.input_value()
    first = draft.input_value()

    review = page.locator("#review")
    review.locator("input[name=instructions]").fill(ASKED)
    review.get_by_role("button", name="Regenerate").click()
    expect(notice).to_contain_text("The new draft is the same as the one before.")
    expect(draft).to_be_visible()
    assert draft.input_value() == first
