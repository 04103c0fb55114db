"""The sidebar in a real browser: pin, archive, delete and undo from each row's menu (by mouse
and by keyboard), deleting the open conversation, and "Load more" when scrolled to, all under
the Content-Security-Policy with nothing refused."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from .conftest import ROOT, new_context, signup

pytestmark = pytest.mark.browser


@pytest.fixture
def user_page(browser, server):
    """A page of a user of its own (the list holds only what the test makes), with every CSP
    refusal and script error collected."""
    context = new_context(browser)
    problems: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "console",
        lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
    )
    signup(page, server)
    page.problems = problems
    yield page
    context.close()


def _make(page, base: str, title: str) -> int:
    """A conversation named `title`, made over HTTP as the page's user (its cookies)."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": token, "Referer": base + "/"}
    made = page.request.post(f"{base}/conversations/", headers=headers, max_redirects=0)
    assert made.status == 302, made.status
    pk = int(re.search(r"/conversations/(\d+)/", made.headers["location"]).group(1))
    renamed = page.request.post(
        f"{base}/conversations/{pk}/rename/", form={"title": title}, headers=headers
    )
    assert renamed.ok, renamed.status
    return pk


AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # package.json, as the a11y tests


def _axe(page, state: str) -> list[str]:
    """axe-core's serious and critical violations inside the sidebar, light and dark."""
    if not AXE.exists():
        pytest.fail(f"axe-core is not installed ({AXE}): run `npm ci` (make test-browser does)")
    found = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        if not page.evaluate("() => typeof window.axe === 'object'"):
            page.evaluate(AXE.read_text())  # through DevTools: the page's CSP stays in force
        violations = page.evaluate(
            "() => axe.run('.sidebar', {resultTypes: ['violations']}).then(r => r.violations"
            ".filter(v => ['serious', 'critical'].includes(v.impact))"
            ".map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', ')))"
        )
        found += [f"[{state}, {scheme}] {v}" for v in violations]
    page.emulate_media(color_scheme="light")
    return found


def _titles(page) -> list[str]:
    return page.locator("#sidebar-conversations .sidebar-row > a").all_inner_texts()


def _headings(page) -> list[str]:
    # As written in the page (the style shows them in capitals).
    return page.locator("#sidebar-conversations .group-heading").all_text_contents()


def test_pin_archive_delete_and_undo_from_the_sidebar(user_page, server):
    page = user_page
    alpha = _make(page, server, "Alpha")
    bravo = _make(page, server, "Bravo")
    charlie = _make(page, server, "Charlie")
    page.goto(f"{server}/conversations/{charlie}/")
    assert _titles(page) == ["Charlie", "Bravo", "Alpha"]
    assert _headings(page) == ["Today"]

    # Pin by keyboard: the row's menu button, Enter, Tab to "Pin", Enter.
    page.locator(f"#sidebar-row-{alpha} summary").focus()
    page.keyboard.press("Enter")
    pin = page.get_by_role("button", name="Pin “Alpha”")
    expect(pin).to_be_visible()
    page.keyboard.press("Tab")
    expect(pin).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#sidebar-notice")).to_contain_text("Pinned “Alpha”.")
    expect(page.locator("#sidebar-conversations .sidebar-row > a").first).to_have_text("Alpha")
    assert _headings(page) == ["Pinned", "Today"]
    # The focus stays with the row it acted on.
    # (Its menu button, a <summary> named "Actions for “Alpha”", is a disclosure triangle to
    # Chromium's accessibility tree, not a "button" role Playwright can look up by name.)
    expect(page.locator(f"#sidebar-row-{alpha} summary")).to_be_focused()

    # Esc closes a menu.
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Unpin “Alpha”")).to_be_visible()
    violations = _axe(page, "a menu open, a notice")
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Unpin “Alpha”")).to_be_hidden()

    # Archive by mouse: out of the list, into the archived one, and back.
    page.locator(f"#sidebar-row-{bravo} summary").click()
    page.get_by_role("button", name="Archive “Bravo”").click()
    expect(page.locator(f"#sidebar-row-{bravo}")).to_have_count(0)
    expect(page.locator("#sidebar-notice")).to_contain_text("Archived “Bravo”")
    assert urlparse(page.url).path == f"/conversations/{charlie}/"
    page.get_by_role("link", name="Archived conversations").click()
    expect(page.locator(f"#sidebar-row-{bravo}")).to_be_visible()
    assert _titles(page) == ["Bravo"]
    violations += _axe(page, "the archived list")
    page.locator(f"#sidebar-row-{bravo} summary").click()
    page.get_by_role("button", name="Unarchive “Bravo”").click()
    expect(page.locator("#sidebar-conversations")).to_contain_text("No archived conversations.")
    page.get_by_role("link", name="All conversations").click()
    expect(page.locator(f"#sidebar-row-{bravo}")).to_be_visible()
    assert _titles(page) == ["Alpha", "Charlie", "Bravo"]

    # Delete another conversation: the page stays; Undo brings it back where it was.
    page.locator(f"#sidebar-row-{bravo} summary").click()
    page.get_by_role("button", name="Delete “Bravo”").click()
    expect(page.locator(f"#sidebar-row-{bravo}")).to_have_count(0)
    notice = page.locator("#sidebar-notice")
    expect(notice).to_contain_text("Deleted “Bravo”.")
    assert urlparse(page.url).path == f"/conversations/{charlie}/"
    undo = page.get_by_role("button", name="Undo deleting “Bravo”")
    violations += _axe(page, "a delete to undo")
    expect(undo).to_be_focused()  # the row is gone: the focus waits on its Undo
    undo.click()
    expect(notice).to_contain_text("Restored “Bravo”.")
    assert _titles(page) == ["Alpha", "Charlie", "Bravo"]
    # A report without an Undo goes away by itself.
    expect(notice).to_be_empty(timeout=12_000)

    # Delete the open conversation: home, with the Undo, which opens it again.
    page.locator(f"#sidebar-row-{charlie} summary").click()
    page.get_by_role("button", name="Delete “Charlie”").click()
    page.wait_for_url(lambda url: f"/conversations/{charlie}/" not in url)
    expect(page.locator("#sidebar-notice")).to_contain_text("Deleted “Charlie”.")
    assert "Charlie" not in _titles(page)
    page.get_by_role("button", name="Undo deleting “Charlie”").click()
    page.wait_for_url(f"**/conversations/{charlie}/")
    expect(page.locator(f"#sidebar-row-{charlie}")).to_have_class(re.compile(r"\bcurrent\b"))

    # The Undo does not wait forever on the page: about ten seconds.
    page.locator(f"#sidebar-row-{bravo} summary").click()
    page.get_by_role("button", name="Delete “Bravo”").click()
    expect(page.locator("#sidebar-notice")).to_contain_text("Deleted “Bravo”.")
    # The page puts the focus on the Undo once the list is drawn: only then take it away.
    expect(page.get_by_role("button", name="Undo deleting “Bravo”")).to_be_focused()
    page.mouse.move(900, 500)
    page.locator("#message-input").focus()
    expect(page.locator("#sidebar-notice")).to_be_empty(timeout=15_000)
    assert page.request.get(f"{server}/conversations/{bravo}/").status == 404
    assert not page.problems, page.problems
    assert not violations, "\n".join(violations)


def test_load_more_when_scrolled_to_or_pressed(user_page, server):
    page = user_page
    made = [_make(page, server, f"Topic {i:02}") for i in range(57)]
    page.goto(f"{server}/conversations/{made[-1]}/")
    rows = page.locator("#sidebar-conversations .sidebar-row")
    expect(rows).to_have_count(50)
    # Scrolled to inside the sidebar: the next page comes by itself.
    page.locator(".load-more-conversations").scroll_into_view_if_needed()
    expect(rows).to_have_count(57)
    expect(page.locator(".load-more-conversations")).to_have_count(0)
    titles = _titles(page)
    assert titles == [f"Topic {i:02}" for i in reversed(range(57))]
    assert _headings(page) == ["Today"]  # one heading, not one per page

    # After an action the list keeps every row it showed.
    page.locator(f"#sidebar-row-{made[0]} summary").click()
    page.get_by_role("button", name="Pin “Topic 00”").click()
    expect(page.locator("#sidebar-notice")).to_contain_text("Pinned “Topic 00”.")
    expect(rows).to_have_count(57)
    assert _titles(page)[0] == "Topic 00"

    # By keyboard: Tab from the last row reaches "Load more" (which loads as it comes into
    # view), and the focus goes on to the first row it added, not back to the top.
    for i in range(3):
        _make(page, server, f"Extra {i}")
    page.goto(f"{server}/conversations/{made[-1]}/")
    expect(rows).to_have_count(50)
    last = rows.nth(49)
    last.locator("summary").focus()
    page.keyboard.press("Tab")
    expect(rows).to_have_count(60)
    first_added = rows.nth(50).locator("a")
    expect(first_added).to_be_focused()
    assert not page.problems, page.problems
