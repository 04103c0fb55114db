"""On screen: switching back to a version shows the reply that was on screen
under it; a queued message offers only Cancel; the title shows it can be edited and Rename with
no change says so; nothing is refused by the Content-Security-Policy on the way (the first send
in a new conversation included); both exports download, and the Markdown marks the pin. On a
desktop and a phone, light and dark."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from . import screens
from .conftest import send, turn, wait_replies
from .screens import in_view
from .test_csp_in_a_browser import FILLER
from .test_versions_in_a_browser import bubble, send_edited, wait_complete

pytestmark = pytest.mark.browser
screen = screens.screen  # the fixture: each test runs on every screen


def test_switching_back_to_a_version_shows_the_reply_on_screen_before(screen, tmp_path):
    page, refusals, name = screen
    turn(page, "Tell me about otters, OTTER.")
    refusals.assert_none(page)  # the first send in a new conversation
    bubble(page, 2).get_by_role("button", name="Regenerate").click()
    wait_complete(page, 3)
    bubble(page, 3).get_by_role("button", name="Previous version").click()
    expect(bubble(page, 2).locator(".version-count")).to_have_text("1 / 2")  # reply 1 chosen

    send_edited(page, 1, "Tell me about beavers instead, BEAVER.")
    wait_complete(page, 5)
    expect(bubble(page, 4).locator(".version-count")).to_have_text("2 / 2")
    bubble(page, 4).get_by_role("button", name="Previous version").click()

    # Back at message 1: its reply is the one that was on screen, 1 / 2, not the newest.
    reply = bubble(page, 2)
    expect(reply).to_be_visible()
    expect(bubble(page, 3)).to_have_count(0)
    in_view(page, reply.locator(".version-count"))
    expect(reply.locator(".version-count")).to_have_text("1 / 2")
    page.screenshot(path=tmp_path / f"version-back-{name}.png")
    refusals.assert_none(page)


def test_a_queued_message_offers_only_cancel(screen, tmp_path):
    page, refusals, name = screen
    send(page, "HERON: a long one, for a reply to queue behind. " + FILLER)
    expect(page.locator('#transcript .message[data-status="streaming"]')).to_have_count(1)
    send(page, "EGRET: queued behind it.")
    queued = page.locator("#msg-3")
    expect(queued.locator(".badge.queued")).to_be_visible()
    in_view(page, queued)
    expect(queued.get_by_role("button", name="Cancel")).to_be_visible()
    for action in (".pin-toggle", ".edit-message"):
        expect(queued.locator(action)).to_be_hidden()
    page.screenshot(path=tmp_path / f"queued-{name}.png")
    # Once it is sent, what applies to a sent message comes back.
    wait_replies(page, 2)
    expect(queued.locator(".badge.queued")).to_have_count(0)
    expect(queued.locator(".pin-toggle")).to_be_visible()
    expect(queued.get_by_text("Edit", exact=True)).to_be_visible()
    refusals.assert_none(page)


def test_the_title_looks_editable_and_rename_without_a_change_says_so(screen, tmp_path):
    page, refusals, name = screen
    turn(page, "KINGFISHER: a message, so the conversation has a title.")
    title = page.locator("#title-input")
    in_view(page, title)
    before = title.input_value()
    expect(page.locator(".rename-button")).to_contain_text("✎")
    title.hover()
    assert title.evaluate("el => getComputedStyle(el).borderBottomStyle") == "dashed"
    title.focus()
    expect(title).to_be_focused()
    url = page.url
    page.locator(".rename-button").click()
    status = page.locator("#rename-status")
    expect(status).to_have_text("Unchanged")
    expect(status).to_be_in_viewport()
    expect(title).not_to_be_focused()
    assert page.url == url and title.input_value() == before
    page.screenshot(path=tmp_path / f"rename-{name}.png")
    refusals.assert_none(page)


def test_both_exports_download_and_markdown_marks_the_pin(screen, tmp_path):
    page, refusals, name = screen
    turn(page, "PELICAN: keep this one word for word.")
    page.locator("#msg-1 .pin-toggle").click()
    expect(page.locator("#msg-1 .pin-toggle")).to_have_text("Unpin")
    url = page.url
    files = {}
    for label in ("Export JSON", "Export Markdown"):
        menu = page.locator(".conversation-menu")
        if menu.get_attribute("open") is None:
            menu.locator("summary").click()
        link = menu.get_by_role("link", name=label)
        in_view(page, link)
        # A download, not a page of raw text in place of the chat (export.json opened in the tab).
        with page.expect_download() as download:
            link.click()
        files[label] = download.value.path().read_text()
        assert page.url == url
    pins = [m["seq"] for m in json.loads(files["Export JSON"])["messages"] if m["pinned"]]
    assert pins == [1], pins
    headings = [h for h in files["Export Markdown"].splitlines() if h.startswith("### ")]
    assert "pinned" in headings[0] and "#1" in headings[0], headings
    assert "pinned" not in headings[1], headings
    page.screenshot(path=tmp_path / f"exports-{name}.png")
    refusals.assert_none(page)
