"""Confirmations and refusals where the person is looking, on a desktop and a 390 px phone, light
and dark: a refused import says why beside the Import button and the conversation they were on
stays (a reload posts nothing again); an accepted one opens its conversation with "Imported 2
conversations." above the message box, and that conversation's settings say "Settings saved."
there too, each in the page's live region. axe-core clean, no CSP refusal."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.test_import import chatgpt_conversation

from . import screens
from .conftest import reach_list, turn, wait_socket
from .screens import in_view
from .test_accessibility_in_a_browser import Audit

pytestmark = pytest.mark.browser

screen = screens.screen  # the fixture: each test runs on every screen


def choose(page, name: str, content: bytes):
    """The sidebar's import form with a file chosen, brought into view as a person reaches it
    (on a phone the list is a drawer behind ☰)."""
    reach_list(page)
    form = page.locator(".import-form")
    in_view(page, form)
    form.locator("input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "application/json", "buffer": content}]
    )
    return form


def said(page, text: str) -> None:
    """The notice above the message box says `text`, in view, inside the live region."""
    notice = page.locator(".live-notices[role=status] #notice")
    expect(notice).to_contain_text(text)
    expect(notice).to_be_in_viewport(ratio=1)


def test_a_refused_import_stays_on_the_page_and_an_accepted_one_says_how_many(
    screen, server, tmp_path
):
    page, refusals, name = screen
    turn(page, "The lighthouse log for Tuesday, please. " * 6)
    here = page.url
    listed = page.locator(".sidebar-row").count()

    form = choose(page, "conversations.json", b'{"messages": [{"role": "user", ')
    form.get_by_role("button", name="Import", exact=True).click()
    reason = page.locator(".import-form #import-result[role=alert]")
    expect(reason).to_contain_text("Nothing was imported:")
    assert "JSON" in reason.inner_text()
    expect(reason).to_be_in_viewport(ratio=1)
    assert page.url == here
    expect(page.locator("#transcript .message.assistant")).to_have_count(1)  # still there
    expect(form.get_by_role("button", name="Import", exact=True)).to_be_enabled()  # try again
    page.screenshot(path=tmp_path / f"import-refused-{name}.png")
    page.reload()  # a GET of the conversation: nothing is posted again
    wait_socket(page)
    assert page.url == here
    expect(page.locator(".sidebar-row")).to_have_count(listed)

    both = [
        chatgpt_conversation(f"{title} {name}", [("user", ["hi"]), ("assistant", ["hello"])])
        for title in ("Ferry times", "Tide tables")
    ]
    form = choose(page, "conversations.json", json.dumps(both).encode())
    form.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_url(lambda url: url != here and re.search(r"/conversations/\d+/$", url))
    wait_socket(page)
    expect(page.locator("#title-input")).to_have_value(f"Imported: Ferry times {name}")
    said(page, "Imported 2 conversations.")
    page.screenshot(path=tmp_path / f"imported-{name}.png")

    page.locator("details.conversation-menu > summary").click()
    page.fill("textarea[name=system_prompt]", "Answer like a ferry timetable.")
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_load_state()
    wait_socket(page)
    said(page, "Settings saved.")
    page.screenshot(path=tmp_path / f"saved-{name}.png")

    audit = Audit()
    audit(page, f"notices-{name}")
    audit.assert_clean()
    refusals.assert_none(page)
    print("screenshots in", tmp_path)
