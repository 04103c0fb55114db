"""An export imported through the sidebar comes back as it was: its dividers,
one reply per turn on screen (the abandoned version behind its switcher, "2 / 2"), its pin, a
meter within the budget at once, and a title that says it is an import; a ChatGPT tree with its
versions behind their switchers. On a desktop and on a 390 px phone, in light and dark, with no
CSP refusal."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.test_import_chatgpt_versions import TRIP

from .conftest import TIMEOUT_MS, export, new_context, new_conversation
from .screens import SCREENS, import_file, in_view, leave_panel, reach_panel
from .test_chat_in_a_browser import run_until_auto_compaction
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

BUDGET = 5_000  # the browser server's CONTEXT_BUDGET_TOKENS (conftest.SERVER_ENV)


@pytest.fixture(scope="module")
def exported(browser, server, user_state, tmp_path_factory) -> tuple[dict, object]:
    """A conversation made as a person makes it (long turns until it compacts by itself, a reply
    asked again, a pin), then its export.json, as a file to import."""
    context = new_context(browser, storage_state=user_state)
    try:
        page = context.new_page()
        page.goto(f"{server}/")
        new_conversation(page)
        run_until_auto_compaction(page)
        last = page.locator("#transcript .message.assistant").last
        seq = int(last.get_attribute("id").removeprefix("msg-"))
        last.get_by_role("button", name="Regenerate").click()
        again = page.locator(f'#msg-{seq + 1}[data-status="complete"]')
        expect(again).to_be_visible(timeout=TIMEOUT_MS)
        page.locator(f"#msg-{seq - 1}").get_by_role("button", name="Pin").click()
        expect(page.locator(f"#msg-{seq - 1} .pin-toggle")).to_have_text("Unpin")
        doc = export(page, server)
    finally:
        context.close()
    path = tmp_path_factory.mktemp("import") / "export.json"
    path.write_text(json.dumps(doc))
    return doc, path


@pytest.mark.parametrize("screen", list(SCREENS))
def test_an_imported_export_shows_what_it_held(
    browser, server, user_state, exported, screen, tmp_path
):
    doc, path = exported
    # The export holds what this test is about: versions, a pin, a boundary that makes the
    # window smaller than the transcript (without it the meter reads the whole branch).
    assert any(not m["on_branch"] for m in doc["messages"])
    assert any(m["pinned"] for m in doc["messages"])
    assert any(c["status"] == "committed" for c in doc["compactions"])
    on_branch = sum(m["tokens"] for m in doc["messages"] if m["on_branch"])
    assert on_branch > doc["window"]["tokens"] + 1_000

    context = browser.new_context(storage_state=user_state, **SCREENS[screen])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    try:
        page = context.new_page()
        import_file(page, server, path)

        title = f"Imported: {doc['title']}"  # first: a title cut short on screen keeps it
        expect(page.locator("#title-input")).to_have_value(title)
        in_view(page, page.locator("#title-input"))

        dividers = page.locator("#transcript .divider")
        expect(dividers).to_have_count(sum(c["status"] == "committed" for c in doc["compactions"]))
        in_view(page, dividers.first)
        expect(dividers.first.locator(".badge", has_text="imported")).to_be_visible()

        # One reply per turn: the version asked again is on screen, the first one behind the
        # switcher, never both in a row.
        roles = page.eval_on_selector_all(
            "#transcript .message", "els => els.map(e => e.classList.contains('assistant'))"
        )
        assert not any(a and b for a, b in zip(roles, roles[1:], strict=False)), roles
        branch = [m["seq"] for m in doc["messages"] if m["on_branch"]]
        ids = page.eval_on_selector_all(
            "#transcript .message", "els => els.map(e => +e.id.slice(4))"
        )
        assert ids == branch[-len(ids) :], (ids, branch)  # the branch on screen, and only it
        switcher = page.locator("#transcript .version-count")
        expect(switcher).to_have_text("2 / 2")
        in_view(page, switcher)

        pinned = next(m["seq"] for m in doc["messages"] if m["pinned"])
        in_view(page, page.locator(f"#msg-{pinned} .pinned-badge"))

        meter = page.locator("#window-tokens")
        expect(meter).to_have_attribute("data-tokens", str(doc["window"]["tokens"]))
        assert doc["window"]["tokens"] < BUDGET
        reach_panel(page)
        in_view(page, meter)
        shots = tmp_path
        page.screenshot(path=shots / f"{screen}-meter.png")
        leave_panel(page)
        in_view(page, switcher)
        page.screenshot(path=shots / f"{screen}-versions.png")
        in_view(page, dividers.first)
        page.screenshot(path=shots / f"{screen}-divider.png")
        refusals.assert_none(page)
        print("screenshots in", tmp_path)
    finally:
        context.close()


@pytest.mark.parametrize("screen", list(SCREENS))
def test_a_chatgpt_import_shows_its_versions(browser, server, user_state, screen, tmp_path):
    """ChatGPT's tree with a regenerated reply and an edited question: the branch the person
    last saw is on screen, each fork with its switcher, and the other versions a click away."""
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([TRIP]))
    context = browser.new_context(storage_state=user_state, **SCREENS[screen])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    try:
        page = context.new_page()
        import_file(page, server, path)
        transcript = page.locator("#transcript")
        expect(transcript.locator(".message")).to_have_count(4)
        expect(transcript).to_contain_text("Bacalhau.")
        expect(transcript).not_to_contain_text("Alfama.")
        expect(page.locator("#msg-2 .version-count")).to_have_text("1 / 2")
        edited = page.locator("#msg-5 .version-count")
        expect(edited).to_have_text("2 / 2")
        in_view(page, edited)
        page.screenshot(path=tmp_path / f"{screen}-chatgpt-versions.png")

        page.locator("#msg-5").get_by_role("button", name="Previous version").click()
        expect(page.locator("#msg-3 .version-count")).to_have_text("1 / 2")
        expect(transcript).to_contain_text("Alfama.")
        expect(transcript).not_to_contain_text("Bacalhau.")
        page.locator("#msg-2").get_by_role("button", name="Next version").click()
        expect(page.locator("#msg-7 .version-count")).to_have_text("2 / 2")
        expect(transcript.locator(".message")).to_have_count(2)
        in_view(page, page.locator("#msg-7"))
        page.screenshot(path=tmp_path / f"{screen}-chatgpt-other-reply.png")
        refusals.assert_none(page)
        print("screenshots in", tmp_path)
    finally:
        context.close()
