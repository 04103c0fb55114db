"""The screens the in-view browser tests look at: a desktop and a 390 px phone, each in light and
dark, with every CSP refusal in the console collected (tests/browser/test_csp_in_a_browser.py)."""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest

from .conftest import TIMEOUT_MS, new_context, new_conversation, wait_socket
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


class Screen:
    """A page on one of SCREENS: a tap on a phone (a touch screen), a click on a desktop, and
    screenshots named for the screen next to the test's temporary files."""

    def __init__(self, page, name: str, tmp_path):
        self.page, self.name, self.tmp_path = page, name, tmp_path

    @property
    def phone(self) -> bool:
        return is_phone(self.name)

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.tmp_path / f"{self.name}-{name}.png"))

    def open(self, url: str) -> None:
        self.page.goto(url)
        if self.page.locator("#chat-root").count():  # a conversation's page (not the home)
            wait_socket(self.page)

    def tap(self, selector: str) -> None:
        locator = self.page.locator(selector)
        locator.tap() if self.phone else locator.click()


@contextmanager
def page_on(browser, storage_state, name: str, tmp_path, kind: type[Screen] = Screen):
    """A page of the signed-in user on screen `name`, as a `kind`; every CSP refusal in it
    fails the test when the block ends."""
    settings = {k: v for k, v in SCREENS[name].items() if k != "viewport"}
    context = new_context(browser, storage_state=storage_state, **settings)
    refusals = Refusals(context)
    page = context.new_page()
    page.set_viewport_size(SCREENS[name]["viewport"])
    yield kind(page, name, tmp_path)
    refusals.assert_none(page)
    context.close()


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
