"""Versions in a real browser: regenerate a reply and switch between its versions, edit a message
and send it again, and the branch on screen stays after a reload (the demo model answers)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, export, turn, wait_socket

pytestmark = pytest.mark.browser


def bubble(page, seq: int):
    return page.locator(f"#msg-{seq}")


def wait_complete(page, seq: int) -> None:
    expect(page.locator(f'#msg-{seq}[data-status="complete"]')).to_be_visible(timeout=TIMEOUT_MS)


def test_regenerate_then_switch_between_the_versions(chat, server):
    page = chat
    turn(page, "Tell me about otters, OTTER.")
    bubble(page, 2).get_by_role("button", name="Regenerate").click()
    wait_complete(page, 3)
    expect(bubble(page, 2)).to_have_count(0)  # the first version left the screen, not the record
    expect(bubble(page, 3).locator(".version-count")).to_have_text("2 / 2")

    bubble(page, 3).get_by_role("button", name="Previous version").click()
    expect(bubble(page, 2)).to_be_visible()
    expect(bubble(page, 3)).to_have_count(0)
    expect(bubble(page, 2).locator(".version-count")).to_have_text("1 / 2")
    expect(bubble(page, 2).get_by_role("button", name="Previous version")).to_be_disabled()

    page.reload()
    wait_socket(page)
    expect(bubble(page, 2)).to_be_visible()  # the branch chosen is kept
    expect(bubble(page, 3)).to_have_count(0)

    data = export(page, server)
    assert [(m["seq"], m["parent"], m["on_branch"]) for m in data["messages"]] == [
        (1, 0, True),
        (2, 1, True),
        (3, 1, False),
    ]


def send_edited(page, seq: int, text: str) -> None:
    """Edit the user's message `seq` in its bubble and send it as a new version."""
    mine = bubble(page, seq)
    mine.get_by_text("Edit", exact=True).click()
    mine.get_by_label(f"Edited message {seq}").fill(text)
    mine.get_by_role("button", name="Send as a new version").click()


def test_edit_a_message_and_send_it_again(chat):
    page = chat
    turn(page, "First, about falcons, FALCON.")
    turn(page, "Second, about herons, HERON.")
    send_edited(page, 3, "Second, about egrets instead, EGRET.")
    wait_complete(page, 6)
    expect(bubble(page, 3)).to_have_count(0)
    expect(bubble(page, 4)).to_have_count(0)
    expect(bubble(page, 5)).to_contain_text("EGRET")
    expect(bubble(page, 5).locator(".version-count")).to_have_text("2 / 2")

    bubble(page, 5).get_by_role("button", name="Previous version").click()
    expect(bubble(page, 3)).to_contain_text("HERON")
    expect(bubble(page, 4)).to_be_visible()
    expect(bubble(page, 5)).to_have_count(0)
    # The model's window follows the branch on screen.
    page.get_by_role("button", name="What the model sees").click()
    expect(page.locator("#model-view")).to_contain_text("HERON")
    expect(page.locator("#model-view")).not_to_contain_text("EGRET")


def test_a_search_hit_on_another_version_leads_to_its_switcher(chat, server):
    page = chat
    turn(page, "First, about ptarmigans, PTARMIGAN.")
    send_edited(page, 1, "First, about ospreys instead, OSPREY.")
    wait_complete(page, 4)

    page.goto(f"{server}/search/?q=ptarmigan")
    hit = page.locator(".search-hit").filter(has_text="#1 · You")
    expect(hit).to_contain_text("another version")
    hit.get_by_role("link").click()
    wait_socket(page)
    # The link opens the version on screen, whose switcher leads back to the hit.
    expect(bubble(page, 3).locator(".version-count")).to_have_text("2 / 2")
    bubble(page, 3).get_by_role("button", name="Previous version").click()
    expect(bubble(page, 1)).to_contain_text("PTARMIGAN")


def test_pinning_a_version_on_a_phone_keeps_its_switcher(chat, tmp_path):
    # The pin swaps the bubble whole; the switcher must come back with it, or the other
    # version is out of reach until a reload.
    page = chat
    page.set_viewport_size({"width": 390, "height": 844})
    turn(page, "Tell me about otters, OTTER.")
    bubble(page, 2).get_by_role("button", name="Regenerate").click()
    wait_complete(page, 3)

    bubble(page, 3).get_by_role("button", name="Pin").click()
    expect(bubble(page, 3).locator(".pin-toggle")).to_have_text("Unpin")
    expect(bubble(page, 3).locator(".version-count")).to_have_text("2 / 2")
    bubble(page, 3).scroll_into_view_if_needed()
    page.screenshot(path=tmp_path / "pinned-version-phone.png")

    bubble(page, 3).get_by_role("button", name="Previous version").click()
    expect(bubble(page, 2)).to_be_visible()
