"""A person sets when their conversation compacts in its settings, on a desktop and on a 390 px
phone: the meter's auto-compaction marker moves to the share chosen, the figures under it say the
new threshold, and a share out of bounds is refused with why, the marker staying put."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, new_conversation, wait_socket
from .screens import SCREENS, is_phone, reach_panel

pytestmark = pytest.mark.browser


@pytest.fixture(params=["desktop-light", "phone-dark"])
def screen(request, browser, user_state, server):
    # No sliding drawer: the screenshots show it where it stops.
    context = browser.new_context(
        storage_state=user_state, reduced_motion="reduce", **SCREENS[request.param]
    )
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{server}/")
    new_conversation(page)
    yield page, request.param
    context.close()


def marker_share(page) -> float:
    """Where the marker is drawn, as a share of the meter's width (measured on screen)."""
    reach_panel(page)
    meter = page.locator("#context-figures .meter")
    expect(meter).to_be_in_viewport()
    # A vertical line has no width: Playwright calls it hidden, the browser still places it.
    return meter.evaluate(
        """bar => {
            const b = bar.getBoundingClientRect();
            const l = bar.querySelector('.threshold-mark line').getBoundingClientRect();
            return (l.left + l.width / 2 - b.left) / b.width;
        }"""
    )


def open_settings(page):
    page.locator(".conversation-menu summary").click()
    controls = page.locator(".compaction-controls")
    expect(controls).to_be_visible()
    return controls


def test_the_marker_moves_to_the_share_chosen_in_the_settings(screen, tmp_path):
    page, name = screen
    assert marker_share(page) == pytest.approx(0.6, abs=0.01)  # the default: AUTO_COMPACT_AT
    expect(page.locator(".meter-figures")).to_contain_text("auto-compacts at 3,000")
    if is_phone(name):
        page.locator("#hide-panel").click()

    controls = open_settings(page)
    field = controls.get_by_label("Compact at")
    expect(field).to_have_attribute("placeholder", "60")
    field.fill("40")
    controls.get_by_label("Keep verbatim").fill("8")
    controls.scroll_into_view_if_needed()
    page.screenshot(path=tmp_path / f"controls-{name}.png")
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_load_state()
    wait_socket(page)
    # Said above the message box, in view (the page opens scrolled to the newest messages).
    expect(page.locator("#notice")).to_contain_text("Settings saved.")
    expect(page.locator("#notice")).to_be_in_viewport()

    assert marker_share(page) == pytest.approx(0.4, abs=0.01)
    expect(page.locator(".meter-figures")).to_contain_text("auto-compacts at 2,000")
    page.screenshot(path=tmp_path / f"marker-{name}.png")
    if is_phone(name):
        page.locator("#hide-panel").click()

    # Out of bounds, past what the browser's own check stops: the server says why, nothing moves.
    controls = open_settings(page)
    expect(controls.get_by_label("Compact at")).to_have_value("40")
    controls.get_by_label("Keep verbatim").fill("35")
    controls.get_by_label("Keep verbatim").evaluate("el => el.removeAttribute('max')")
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_load_state()
    wait_socket(page)
    expect(page.locator("#notice.error")).to_contain_text("keep at most 30%")
    expect(page.locator("#notice")).to_be_in_viewport()
    assert marker_share(page) == pytest.approx(0.4, abs=0.01)
    page.screenshot(path=tmp_path / f"refused-{name}.png")
