"""The screens the in-view browser tests look at: a desktop and a 390 px phone, each in light and
dark, with every CSP refusal in the console collected (tests/browser/test_csp_in_a_browser.py)."""

from __future__ import annotations

import re

import pytest

from .conftest import TIMEOUT_MS, new_conversation
from .test_csp_in_a_browser import Refusals

SCREENS = {
    "desktop-light": {"viewport": {"width": 1280, "height": 860}, "color_scheme": "light"},
    "desktop-dark": {"viewport": {"width": 1280, "height": 860}, "color_scheme": "dark"},
    "phone-light": {
        "viewport": {"width": 390, "height": 844},
        "color_scheme": "light",
        "is_mobile": True,
        "has_touch": True,
    },
    "phone-dark": {
        "viewport": {"width": 390, "height": 844},
        "color_scheme": "dark",
        "is_mobile": True,
        "has_touch": True,
    },
}


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, user_state, server):
    """(a page on a new conversation of the session's user on this screen, its refusals, the
    screen's name)."""
    context = browser.new_context(storage_state=user_state, **SCREENS[request.param])
    yield *on_new_conversation(context, server), request.param
    context.close()


def on_new_conversation(context, server: str):
    """(a page of `context` on a new conversation of its user, the context's refusals)."""
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    page = context.new_page()
    page.goto(f"{server}/")
    new_conversation(page)
    return page, refusals


def is_phone(name: str) -> bool:
    return name.startswith("phone")


def reach_panel(page, tap: bool = False) -> None:
    """Bring the context panel on screen the way a person would: one tap (or click) on
    "Context" on a narrow screen, where it is a drawer; else it is beside the transcript."""
    from playwright.sync_api import expect

    toggle = page.locator("#show-panel")
    if toggle.count() and toggle.is_visible() and toggle.get_attribute("aria-expanded") != "true":
        toggle.tap() if tap else toggle.click()
        expect(page.locator("#compact-now")).to_be_in_viewport()


def leave_panel(page) -> None:
    """Close the context panel's drawer, where there is one open, to reach the transcript."""
    close = page.locator("#hide-panel")
    if close.count() and close.is_visible():
        close.click()


def import_file(page, server: str, path) -> None:
    """Import a file as a person does, from the home page's form, and wait for its conversation."""
    from .conftest import reach_list, wait_socket

    page.goto(f"{server}/")
    reach_list(page)
    form = page.locator(".import-form")
    form.locator("input[type=file]").set_input_files(path)
    form.get_by_role("button", name="Import", exact=True).click()
    # The imported conversation's page (a refused import stays on the page, saying why).
    page.wait_for_url(re.compile(r".*/conversations/\d+/$"))
    wait_socket(page)


def in_view(page, locator) -> None:
    """Scrolled to where a person would look for it, and inside the viewport."""
    from playwright.sync_api import expect

    locator.scroll_into_view_if_needed()
    expect(locator).to_be_in_viewport()
