"""A divider says how many key facts its summary kept, and opened, lists the ones it lost:
shown for a boundary imported with its facts, on a desktop and a 390 px
phone, in light and dark, with no CSP refusal."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS
from .screens import SCREENS, import_file, in_view
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

LOST = ["the import fails with E4471", 'banner must read "closed for stocktaking"']


def said(seq: int, role: str, value: str) -> dict:
    return {"seq": seq, "role": role, "content": [{"type": "text", "text": value}]}


def document() -> dict:
    """An export of four messages, the first two folded into a summary that kept one fact of
    three (as export.json writes a boundary's facts)."""
    return {
        "title": "Heron launch",
        "compactions": [
            {
                "id": 1,
                "trigger": "auto",
                "kind": "summary",
                "status": "committed",
                "first_kept_seq": 3,
                "summary": "## Primary request and intent\nThe heron server listens on port 41234.",
                "summariser": "model",
                "facts": {"total": 3, "kept": 1, "lost": LOST},
            }
        ],
        "messages": [
            said(1, "user", "The heron server listens on port 41234; the import fails with E4471."),
            said(2, "assistant", 'Noted. The banner must read "closed for stocktaking".'),
            said(3, "user", "What is left to do?"),
            said(4, "assistant", "The banner and the import."),
        ],
    }


@pytest.mark.parametrize("screen", list(SCREENS))
def test_the_divider_says_what_its_summary_kept_and_lists_what_it_lost(
    browser, server, user_state, screen, tmp_path
):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document()))
    context = browser.new_context(storage_state=user_state, **SCREENS[screen])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    try:
        page = context.new_page()
        import_file(page, server, path)

        divider = page.locator("#transcript .divider")
        in_view(page, divider)
        expect(divider.locator(".divider-facts")).to_have_text("kept 1 of 3 key facts")
        lost = divider.locator(".facts-lost li")
        expect(lost.first).to_be_hidden()  # one click away
        divider.locator("summary").first.click()
        expect(lost).to_have_text(LOST)
        in_view(page, lost.last)
        page.screenshot(path=tmp_path / f"key-facts-{screen}.png")
        print(f"screenshot: {tmp_path}/key-facts-{screen}.png")
        refusals.assert_none(page)
    finally:
        context.close()
