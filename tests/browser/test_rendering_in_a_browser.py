"""What a person sees of the transcript's seams, on a desktop and a
phone, light and dark: a compaction's divider that stays where the boundary is whatever version
of the message after it is on screen, and its panel link that finds it; a person's code block, a
tool's result with its Copy button clear of the text, and "What the model sees" with its summary
and each tool call with its result. Each check scrolls the thing into view as a person would and
reads what is on screen there; no Content-Security-Policy refusal is allowed along the way.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, conversation_id, new_context, new_conversation, turn, wait_socket
from .screens import SCREENS, reach_panel
from .test_chat_in_a_browser import compact_now
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

# Long enough that three turns make a span worth compacting, well under the auto threshold.
FILLER = " ".join(
    ["The harbour survey logs every vessel at the north pier, its crew and its cargo."] * 10
)
# Its first line runs under where a Copy button sits, on a desktop and on a phone.
CODE = (
    "for boat in harbour:  # every vessel at the north pier, its crew and its cargo\n"
    "    if boat.docked:\n        log(boat)"
)
TYPED = f"The blue submarine loop, as I wrote it:\n\n```python\n{CODE}\n```\n  indented note"


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, user_state, tmp_path):
    """A page of the session's user on one screen and colour scheme; its CSP refusals are
    collected, and none may have happened by the end of the test."""
    context = browser.new_context(**SCREENS[request.param], storage_state=user_state)
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    page = context.new_page()
    yield page
    refusals.assert_none(page)
    print("screenshots in", tmp_path)
    context.close()


def shot(page, where: Path, name: str) -> None:
    page.screenshot(path=str(where / f"{name}.png"))


def on_screen(locator) -> None:
    """Scrolled to the middle of the view as a person would, `locator` is in the viewport and
    nothing (a sticky header, the composer) covers its middle."""
    locator.evaluate("el => el.scrollIntoView({block: 'center'})")
    expect(locator).to_be_in_viewport()
    covered = locator.evaluate(
        """el => { const r = el.getBoundingClientRect();
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            if (hit && el.contains(hit)) return null;
            return hit ? hit.outerHTML.slice(0, 80) : 'nothing'; }"""
    )
    assert not covered, f"covered by {covered}"


def settled(page) -> None:
    expect(page.locator('#transcript .message[data-status="streaming"]')).to_have_count(0)
    expect(page.locator('#transcript .message[data-status="queued"]')).to_have_count(0)


# --- 2. a divider through versions -------------------------------------------------------------


@pytest.fixture(scope="module")
def compacted(browser, server, user_state):
    """A conversation of three turns, compacted: its URL, the divider's id and the message
    before the boundary and the first kept one."""
    context = new_context(browser, storage_state=user_state)
    page = context.new_page()
    page.goto(f"{server}/")
    new_conversation(page)
    for n in range(3):
        turn(page, f"Turn {n}. {FILLER}")
    compact_now(page)
    divider = page.locator("#transcript .divider")
    expect(divider).to_have_count(1)
    ids = divider.evaluate(
        "d => [d.id, d.previousElementSibling.dataset.seq, d.nextElementSibling.dataset.seq]"
    )
    url = f"{server}/conversations/{conversation_id(page)}/"
    context.close()
    return url, ids[0], int(ids[1]), int(ids[2])


def divider_between(page, divider_id: str, before: int, after: int) -> None:
    """The divider is there once, right between messages `before` and `after`, and on screen."""
    divider = page.locator(f"#transcript #{divider_id}")
    expect(divider).to_have_count(1)
    around = divider.evaluate(
        "d => [d.previousElementSibling && d.previousElementSibling.id,"
        " d.nextElementSibling && d.nextElementSibling.id]"
    )
    assert around == [f"msg-{before}", f"msg-{after}"], around
    on_screen(divider.locator("summary"))


def below(page, divider_id: str) -> int:
    """The message right below the divider (a version of the first one kept)."""
    return int(page.locator(f"#{divider_id} + .message.user").get_attribute("data-seq"))


def newest_seq(page, role: str) -> int:
    return page.evaluate(
        "r => Math.max(...[...document.querySelectorAll('#transcript .message.' + r)]"
        ".map(m => +m.dataset.seq))",
        role,
    )


def test_a_divider_stays_through_versions_and_its_panel_link_finds_it(screen, compacted, tmp_path):
    page = screen
    url, divider_id, before, first = compacted
    page.goto(url)
    wait_socket(page)
    # The first message kept, or the version of it an earlier screen's test left on screen.
    shown = below(page, divider_id)
    assert shown >= first
    divider_between(page, divider_id, before, shown)

    # The first message kept, edited: the new version follows the boundary just as it did.
    kept = page.locator(f"#msg-{shown}")
    kept.scroll_into_view_if_needed()
    kept.locator(".edit-message > summary").click()
    kept.locator("textarea").fill("Edited: the survey moves to the south pier.")
    kept.get_by_role("button", name="Send as a new version").click()
    page.wait_for_function(
        "n => [...document.querySelectorAll('#transcript .message.user')]"
        ".some(m => +m.dataset.seq > n)",
        arg=shown,
    )
    settled(page)
    edited = newest_seq(page, "user")
    divider_between(page, divider_id, before, edited)
    shot(page, tmp_path, "divider-after-edit")

    # Back to the version before, and forth again.
    page.locator(f"#msg-{edited}").get_by_role("button", name="Previous version").click()
    expect(page.locator(f"#msg-{edited}")).to_have_count(0)
    shown = below(page, divider_id)
    assert first <= shown < edited
    divider_between(page, divider_id, before, shown)
    page.locator(f"#msg-{shown}").get_by_role("button", name="Next version").click()
    expect(page.locator(f"#msg-{shown}")).to_have_count(0)
    page.wait_for_selector(f"#msg-{edited}")
    divider_between(page, divider_id, before, edited)

    # The reply after it asked again.
    reply = newest_seq(page, "assistant")
    page.locator(f"#msg-{reply}").get_by_role("button", name="Regenerate").click()
    page.wait_for_function(
        "n => [...document.querySelectorAll('#transcript .message.assistant')]"
        ".some(m => +m.dataset.seq > n && m.dataset.status === 'complete')",
        arg=reply,
    )
    settled(page)
    divider_between(page, divider_id, before, edited)

    # After a reload, the panel's link leads to it.
    page.reload()
    wait_socket(page)
    divider_between(page, divider_id, before, edited)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    reach_panel(page)
    page.locator(f'#context a[href="#{divider_id}"]').click()
    expect(page.locator(f"#{divider_id}")).to_be_in_viewport()
    shot(page, tmp_path, "divider-from-panel-link")


# --- 5. rendering ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(browser, server, user_state):
    """A conversation holding a person's code block, a compaction, and search_history calls
    (the demo model searches when nothing in its window answers a question, then, when no hit
    says where the submarine is parked, every conversation): its URL."""
    context = new_context(browser, storage_state=user_state)
    page = context.new_page()
    page.goto(f"{server}/")
    new_conversation(page)
    turn(page, TYPED)
    turn(page, f"Turn 2. {FILLER}")
    turn(page, f"Turn 3. {FILLER}")
    compact_now(page)
    expect(page.locator("#transcript .divider")).to_have_count(1)
    turn(page, "Where did we park the blue submarine?")
    expect(page.locator('#transcript .tool-call[data-tool="search_history"]')).to_have_count(2)
    url = f"{server}/conversations/{conversation_id(page)}/"
    context.close()
    return url


def copy_buttons_clear_of_text(page, scope) -> None:
    """No Copy button in `scope` overlaps a character of the code it copies."""
    overlaps = scope.evaluate(
        """el => [...el.querySelectorAll('pre > .copy')].flatMap(button => {
            const b = button.getBoundingClientRect();
            const walker = document.createTreeWalker(button.parentElement, NodeFilter.SHOW_TEXT);
            const hits = [];
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                if (button.contains(node) || !node.textContent.trim()) continue;
                const range = document.createRange();
                range.selectNodeContents(node);
                for (const r of range.getClientRects()) {
                    const across = r.right > b.left && r.left < b.right;
                    if (across && r.bottom > b.top && r.top < b.bottom)
                        hits.push(node.textContent.slice(0, 40));
                }
            }
            return hits;
        })"""
    )
    assert not overlaps, f"a Copy button covers {overlaps}"


def test_code_tool_results_and_the_model_view_render_as_read(screen, rendered, tmp_path):
    page = screen
    page.goto(rendered)
    wait_socket(page)

    # A person's fenced code is a code block, indentation kept; the text around it as typed.
    typed = page.locator("#transcript .message.user").first
    code = typed.locator("pre code")
    on_screen(typed.locator("pre"))
    assert code.inner_text().rstrip("\n") == CODE
    assert "```" not in typed.locator(".text").inner_text()
    expect(typed.locator(".text p").last).to_have_text("  indented note")
    copy_buttons_clear_of_text(page, typed)
    shot(page, tmp_path, "typed-code")

    # A tool's result: its markdown rendered, not shown as markers; Copy buttons clear of text.
    call = page.locator('#transcript .tool-call[data-tool="search_history"]').first
    call.locator("summary").evaluate("s => s.scrollIntoView({block: 'center'})")
    call.locator("summary").click()
    result = call.locator(".tool-result")
    on_screen(result)
    assert "**" not in result.inner_text()
    expect(result.locator("strong").first).to_have_text("blue", ignore_case=True)
    copy_buttons_clear_of_text(page, call)
    shot(page, tmp_path, "tool-result")

    # What the model sees: the summary a labelled block without its tags; the call one block
    # with its result, not "no result" and a separate tool bubble.
    page.click("#show-model-view")
    view = page.locator("#model-view")
    # In, and settled: the page keeps the reader's place then (static/js/place.js), and only
    # after that does a person scroll to what they look for.
    expect(view.locator(".model-view-head")).to_be_visible()
    expect(view).not_to_have_class(re.compile(r"\bhtmx-settling\b"))
    summary = view.locator(".window-message").first.locator(".window-summary")
    on_screen(summary.locator(".tool-label"))
    expect(summary.locator(".tool-label")).to_have_text("Summary of the earlier turns")
    assert "<summary>" not in view.inner_text() and "</summary>" not in view.inner_text()
    shot(page, tmp_path, "model-view-summary")
    expect(view.locator(".tool-call")).to_have_count(2)
    calls = view.locator(".tool-call").first
    expect(calls).to_have_attribute("data-tool", "search_history")
    on_screen(calls.locator("summary"))
    expect(calls.locator(".tool-state")).not_to_contain_text("no result")
    calls.locator("summary").click()
    on_screen(calls.locator(".tool-result"))
    assert "**" not in calls.locator(".tool-result").inner_text()
    results_alone = view.locator(".window-message.user .tool-call")
    expect(results_alone).to_have_count(0)
    shot(page, tmp_path, "model-view-tool-call")
