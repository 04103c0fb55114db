"""The settings page in a real browser, on a desktop and a 390 px phone, light and dark: reached
from the sidebar; each notice (a refusal with its reason, then "saved") shows in the viewport
where the person pressed the button, in a live region; the theme chosen repaints every page
(seen in the page's colours and a screenshot), whatever the system's scheme; a new conversation
starts with the defaults saved; deleting the account ends at the sign-in page. axe-core finds no
serious or critical violation, and the Content-Security-Policy refuses nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, new_conversation, signup
from .screens import SCREENS
from .test_accessibility_in_a_browser import Audit
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

PASSWORD = "a-long-browser-password-9"  # conftest.signup's
BACKGROUND = {"light": "rgb(247, 247, 248)", "dark": "rgb(20, 20, 23)"}  # app.css, dark.css


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, server):
    """A page signed in as a new user (the settings change are theirs alone) on this screen,
    its CSP refusals, and the screen's name."""
    context = browser.new_context(**SCREENS[request.param])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    page = context.new_page()
    signup(page, server)
    yield page, refusals, request.param
    context.close()


def background(page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def said(page, section: str, text: str) -> None:
    """The section's notice says `text`, in a live region, inside the viewport."""
    region = page.locator(f"#{section}-notice")
    expect(region).to_have_attribute("role", "status")
    # Checking a password takes a hash or two: seconds on a busy machine.
    expect(region).to_contain_text(text, timeout=TIMEOUT_MS)
    expect(region).to_be_in_viewport()


def test_every_setting_answers_in_view_and_the_theme_repaints_the_pages(screen, server, tmp_path):
    page, refusals, name = screen
    system = SCREENS[name]["color_scheme"]
    chosen = "dark" if system == "light" else "light"
    audit = Audit()

    # From the sidebar, where the account lives (or straight there if it is behind a menu).
    link = page.get_by_role("link", name="Settings")
    if link.is_visible():
        link.click()
    else:
        page.goto(f"{server}/settings/")
    expect(page.get_by_role("heading", name="Settings", exact=True)).to_be_visible()
    assert background(page) == BACKGROUND[system]
    audit(page, f"settings, {name}")
    page.emulate_media(color_scheme=system)

    # Defaults: a refusal with its reason, then saved; the form keeps what was typed.
    page.get_by_label("System prompt").fill("Answer like a lighthouse keeper.")
    # Each within the fields' own bounds (the browser lets it through), too close together.
    page.get_by_label("Compact at").fill("50")
    page.get_by_label("Keep verbatim").fill("45")
    page.get_by_role("button", name="Save defaults").click()
    said(page, "defaults", "Defaults not saved. Keeping 45%")
    page.get_by_label("Compact at").fill("70")
    page.get_by_label("Keep verbatim").fill("")
    page.get_by_role("button", name="Save defaults").click()
    said(page, "defaults", "Defaults saved")
    expect(page.get_by_label("System prompt")).to_have_value("Answer like a lighthouse keeper.")

    # Password: a wrong current one refused, then changed; this browser stays signed in.
    page.locator("#id_old_password").fill("not it")
    page.locator("#id_new_password1").fill("another-long-password-7")
    page.locator("#id_new_password2").fill("another-long-password-7")
    page.get_by_role("button", name="Change password").click()
    said(page, "password", "Password not changed")
    page.locator("#id_old_password").fill(PASSWORD)
    page.locator("#id_new_password1").fill("another-long-password-7")
    page.locator("#id_new_password2").fill("another-long-password-7")
    page.get_by_role("button", name="Change password").click()
    said(page, "password", "Password changed")

    # The theme against the system's scheme: this page, and every other, repaints.
    page.get_by_label({"dark": "Dark", "light": "Light"}[chosen], exact=True).check()
    page.get_by_role("button", name="Save theme").click()
    page.wait_for_url("**/settings/#theme")
    expect(page.get_by_role("button", name="Save theme")).to_be_in_viewport()
    said(page, "theme", f"Theme saved: {chosen}.")
    expect(page.locator("html")).to_have_attribute("data-theme", chosen)
    assert background(page) == BACKGROUND[chosen]
    page.screenshot(path=tmp_path / f"settings-theme-{chosen}-{name}.png")
    audit(page, f"settings, theme {chosen}, notices shown, {name}")
    page.emulate_media(color_scheme=system)

    # A new conversation starts with the defaults, drawn in the theme chosen.
    page.goto(f"{server}/")
    assert background(page) == BACKGROUND[chosen]
    new_conversation(page)  # on a phone, from the list's drawer
    assert background(page) == BACKGROUND[chosen]
    prompt = page.locator(".conversation-menu textarea[name=system_prompt]")
    expect(prompt).to_have_value("Answer like a lighthouse keeper.")
    expect(page.locator("#auto-compact-at")).to_have_value("70")
    page.screenshot(path=tmp_path / f"conversation-theme-{chosen}-{name}.png")

    # Back to the system's scheme.
    page.goto(f"{server}/settings/")
    page.get_by_label("Same as the system").check()
    page.get_by_role("button", name="Save theme").click()
    said(page, "theme", "Theme saved: same as the system.")
    assert background(page) == BACKGROUND[system]

    # Delete the account: the wrong password is refused in view, the right one signs out.
    page.get_by_label("Your password, to confirm").fill("not it")
    page.get_by_role("button", name="Delete my account and everything in it").click()
    said(page, "delete", "Nothing was deleted: That is not your password.")
    page.get_by_label("Your password, to confirm").fill("another-long-password-7")
    page.get_by_role("button", name="Delete my account and everything in it").click()
    page.wait_for_url("**/accounts/login/")
    expect(page.get_by_text("Your account and everything in it were deleted.")).to_be_in_viewport()

    audit.assert_clean()
    refusals.assert_none(page)
