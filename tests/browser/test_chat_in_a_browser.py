"""What a user sees in a real browser: streaming, Stop, dividers, the meter, the model view,
review mode, undo and a second tab. Each test asserts on the page the user looks at.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import (
    export,
    new_context,
    new_conversation,
    record_stream,
    recorded_stream,
    replies,
    review_mode,
    send,
    signup,
    tokens,
    turn,
    wait_meter_changes,
    wait_replies,
    wait_socket,
)

pytestmark = pytest.mark.browser

SUMMARY_INTRO = "This conversation continues from an earlier part"

# About 430 estimated tokens each (the demo model replies with ~95): six turns of these cross
# the auto threshold of the 5,000-token test budget, and two make a span worth summarising.
PARAGRAPH = (
    "We are planning the product launch for the new reading lamp. The deadline is the "
    "fourteenth of March and marketing needs the copy, the photos and the price sheet a week "
    "before that. Please keep track of who owns what: Dana writes the copy, Ravi shoots the "
    "photos, and Mei prepares the price sheet with the regional variations. Remember the budget "
    "is capped and every change needs sign-off from finance before it is final."
)


def long_message(n: int, tag: str = "") -> str:
    """A long message; `tag` leads it, so summaries (which shorten messages) can keep it."""
    return f"{tag} Turn {n}. " + " ".join([PARAGRAPH] * 3)


def threshold(page) -> int:
    text = page.locator("#context .meter-figures").inner_text()
    return int(re.search(r"auto-compacts at ([\d,]+)", text).group(1).replace(",", ""))


def compact_now(page, instructions: str = "") -> None:
    page.fill("#compact-form input[name=instructions]", instructions)
    page.click("#compact-now")


def divider_numbers(divider) -> tuple[int, int]:
    pre = int(divider.locator(".pre").inner_text().replace(",", ""))
    post = int(divider.locator(".post").inner_text().replace(",", ""))
    return pre, post


def watch_meter_peak(page) -> None:
    """Record, in the page, the highest figure the meter shows. The reply that crosses the
    threshold shows its figure for only a moment: the compaction it starts can replace it
    within milliseconds, too soon for polling to see."""
    page.evaluate(
        """() => {
            const read = () => {
                const el = document.getElementById('window-tokens');
                if (el) window.__meterPeak = Math.max(window.__meterPeak || 0, +el.dataset.tokens);
            };
            read();
            new MutationObserver(read).observe(document.body,
                {childList: true, subtree: true, attributes: true});
        }"""
    )


def run_until_auto_compaction(page, *, max_turns: int = 10) -> int:
    """Send long turns until an auto divider appears; return the meter's peak before it."""
    watch_meter_peak(page)
    peak = tokens(page)
    limit = threshold(page)
    for n in range(1, max_turns + 1):
        before = tokens(page)
        count = replies(page).count()
        send(page, long_message(n))
        wait_replies(page, count + 1)
        wait_meter_changes(page, before)
        peak = max(peak, page.evaluate("window.__meterPeak"))
        if peak >= limit:
            # The reply is saved and the meter is over the threshold: the compaction follows,
            # off the critical path, and its divider arrives without a reload.
            page.wait_for_selector('#transcript .divider[data-trigger="auto"]')
            return peak
    pytest.fail(f"no auto-compaction after {max_turns} turns; meter peaked at {peak}/{limit}")


def test_signup_send_and_watch_the_reply_stream(page, server):
    signup(page, server)
    new_conversation(page)
    record_stream(page, 2)
    # Not a question: asked one its window cannot answer, the demo first searches the history
    # (a second step, its own test), and this one watches a single stream grow.
    send(page, "Hello there, tell me about yourself.")
    expect(page.locator("#msg-1")).to_contain_text("Hello there, tell me about yourself.")
    expect(page.locator("#msg-2")).to_have_attribute("data-status", "complete")

    seen = recorded_stream(page)
    lengths = [n for status, n in seen if status == "streaming" and n > 0]
    assert len(set(lengths)) >= 2, f"the reply did not grow while streaming: {seen}"
    assert lengths == sorted(lengths), f"the streaming text shrank: {seen}"
    assert seen[-1][0] == "complete", seen
    assert "demo model" in page.locator("#msg-2").inner_text()
    expect(page.locator("#msg-2 .typing")).to_have_count(0)
    expect(page.locator("#stop-button")).to_be_hidden()


def test_stop_mid_reply_leaves_a_partial_interrupted_bubble(chat):
    page = chat
    send(page, "Tell me everything about lighthouses and the keepers who lived in them ZEBRA")
    page.wait_for_function(
        "() => { const t = document.querySelector("
        "'.message.assistant[data-status=\"streaming\"] .text');"
        " return t && t.innerText.trim().length > 0; }"
    )
    expect(page.locator("#stop-button")).to_be_visible()
    page.click("#stop-button")

    bubble = page.locator("#msg-2")
    expect(bubble).to_have_attribute("data-status", "interrupted")
    expect(bubble.locator(".badge.interrupted")).to_be_visible()
    expect(bubble.locator(".badge.interrupted")).to_have_text("interrupted")
    text = bubble.locator(".text").inner_text().strip()
    assert text, "the interrupted bubble lost the words that had arrived"
    # The full reply would echo the message, ending in ZEBRA; a stopped one does not get there.
    assert "ZEBRA" not in text, f"Stop did not stop the reply: {text!r}"
    expect(page.locator("#stop-button")).to_be_hidden()

    send(page, "Never mind, a short answer please.")
    expect(page.locator("#msg-4")).to_have_attribute("data-status", "complete")
    expect(page.locator("#msg-4")).to_contain_text("a short answer please")
    expect(page.locator("#msg-2")).to_have_attribute("data-status", "interrupted")


def test_auto_compaction_shows_a_divider_and_the_meter_drops(chat):
    page = chat
    peak = run_until_auto_compaction(page)
    divider = page.locator('#transcript .divider[data-trigger="auto"]')
    expect(divider).to_have_count(1)
    expect(divider.locator(".divider-title")).to_have_text("Compacted (auto)")
    pre, post = divider_numbers(divider)
    assert 0 < post < pre, (pre, post)
    # The meter is swapped right after the divider: it drops below the peak and the threshold.
    page.wait_for_function(
        "peak => +document.getElementById('window-tokens').dataset.tokens < peak", arg=peak
    )
    assert tokens(page) < threshold(page)
    expect(page.locator("#context .boundaries li")).to_have_count(1)

    marks = page.evaluate(
        """() => {
            const divider = document.querySelector('#transcript .divider[data-trigger="auto"]');
            return [...document.querySelectorAll('#transcript .message[data-seq]')].map(m => ({
                seq: +m.dataset.seq,
                above: !!(m.compareDocumentPosition(divider) & Node.DOCUMENT_POSITION_FOLLOWING),
                outside: m.classList.contains('outside-window'),
            }));
        }"""
    )
    above = [m for m in marks if m["above"]]
    below = [m for m in marks if not m["above"]]
    assert above and below, marks
    assert all(m["outside"] for m in above), f"messages above the divider not marked: {marks}"
    assert not any(m["outside"] for m in below), f"kept messages marked outside: {marks}"
    expect(page.locator("#transcript .message.outside-window .outside-label").first).to_be_visible()


def test_compact_now_with_instructions_adds_a_manual_divider(chat, server):
    page = chat
    turn(page, long_message(1, "BLUEBIRD: the deadline is Friday the ninth."))
    turn(page, long_message(2, "CORMORANT: the budget is four thousand euros."))
    turn(page, long_message(3, "DIPPER: who is reviewing the draft?"))
    before = tokens(page)
    compact_now(page, "focus on the deadline")

    divider = page.locator('#transcript .divider[data-trigger="manual"]')
    expect(divider).to_have_count(1)
    expect(divider.locator(".divider-title")).to_have_text("Compacted (manual)")
    pre, post = divider_numbers(divider)
    assert 0 < post < pre
    page.wait_for_function(
        "b => +document.getElementById('window-tokens').dataset.tokens < b", arg=before
    )
    summary = divider.locator(".summary")
    expect(summary).to_be_hidden()
    divider.locator("summary").click()
    expect(summary).to_be_visible()
    expect(summary.locator(".instructions")).to_have_text("Instructions: focus on the deadline")
    text = summary.inner_text()
    compactions = export(page, server)["compactions"]
    assert [(c["trigger"], c["status"]) for c in compactions] == [("manual", "committed")]
    # Messages 1-4 were summarised: both user messages among them must survive in the summary.
    assert compactions[0]["first_kept_seq"] == 5, compactions
    for tag in ("BLUEBIRD", "CORMORANT"):
        assert tag in text, f"the summary lost the user message {tag}: {text[:1500]}"


def test_model_view_hides_compacted_messages_and_shows_the_summary_pair(chat, server):
    page = chat
    # No question marks: the demo model would quote a matching earlier line in its reply.
    turn(page, long_message(1, "Early detail that will be compacted: the code word is PELICAN."))
    turn(page, long_message(2, "A second early message about the venue, the old library."))
    turn(page, long_message(3, "The latest message, OSPREY: the event starts at seven."))
    compact_now(page)
    expect(page.locator('#transcript .divider[data-trigger="manual"]')).to_have_count(1)
    window = export(page, server)["window"]
    assert SUMMARY_INTRO in str(window["messages"][0]["content"])

    page.click("#show-model-view")
    shown = page.locator("#model-view .window-message")
    expect(shown).to_have_count(len(window["messages"]))
    expect(page.locator("#model-view")).to_be_visible()
    expect(page.locator("#transcript")).to_be_hidden()
    expect(page.locator("#show-model-view")).to_have_attribute("aria-pressed", "true")
    expect(shown.first).to_contain_text(SUMMARY_INTRO)
    expect(shown.first.locator(".badge")).to_have_text("summary")
    texts = shown.all_inner_texts()
    # The early message reaches the model only through the summary, never as its own message.
    assert not any("PELICAN" in t for t in texts[1:]), texts
    assert any("OSPREY" in t for t in texts[2:]), texts

    page.click("#show-everything")
    expect(page.locator("#transcript")).to_be_visible()
    expect(page.locator("#model-view")).to_be_hidden()
    expect(page.locator("#show-everything")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#msg-1")).to_contain_text("PELICAN")
    expect(page.locator("#msg-1")).to_have_class(re.compile(r"\boutside-window\b"))


def test_review_mode_edit_approve_then_undo(chat, server):
    page = chat
    review_mode(page)
    menu = page.locator("details.conversation-menu > summary")
    menu.click()
    expect(page.locator("input[name=review_compactions]")).to_be_checked()
    menu.click()

    turn(page, long_message(1, "Review mode, first message: the venue is the harbour hall."))
    turn(page, long_message(2, "Review mode, second message: catering is sorted."))
    turn(page, long_message(3, "Review mode, third message: what is left to do?"))
    before = tokens(page)
    compact_now(page)
    draft = page.locator("#review textarea[name=summary]")
    expect(draft).to_be_visible()
    assert draft.input_value().strip(), "the draft summary is empty"
    # Nothing changes for the model while the draft waits.
    expect(page.locator("#transcript .divider")).to_have_count(0)
    assert [c["status"] for c in export(page, server)["compactions"]] == ["draft"]
    assert tokens(page) == before

    draft.fill("EDITED-MARKER-123: the venue is the harbour hall and catering is sorted.")
    page.locator("#review").get_by_role("button", name="Approve").click()
    divider = page.locator("#transcript .divider.committed")
    expect(divider).to_have_count(1)
    expect(page.locator("#review")).to_be_hidden()
    expect(divider.locator("summary")).to_contain_text("edited")
    page.wait_for_function(
        "b => +document.getElementById('window-tokens').dataset.tokens < b", arg=before
    )

    data = export(page, server)
    first = str(data["window"]["messages"][0]["content"])
    assert SUMMARY_INTRO in first and "EDITED-MARKER-123" in first, first[:500]
    assert [c["status"] for c in data["compactions"]] == ["committed"]

    page.click("#undo-compaction")
    expect(page.locator("#transcript .divider.undone")).to_have_count(1)
    expect(page.locator("#transcript .divider.undone summary")).to_contain_text("undone")
    expect(page.locator("#undo-compaction")).to_have_count(0)
    expect(page.locator("#transcript .message.outside-window")).to_have_count(0)
    data = export(page, server)
    assert SUMMARY_INTRO not in str(data["window"]["messages"][0]["content"])
    assert [c["status"] for c in data["compactions"]] == ["undone"]
    assert tokens(page) == before


def test_a_second_tab_sees_the_reply_stream(chat, user_context):
    first = chat
    second = user_context.new_page()
    second.goto(first.url)
    wait_socket(second)
    record_stream(second, 2)

    send(first, "Hello from the first tab, HERON.")
    expect(second.locator("#msg-1")).to_contain_text("HERON")
    expect(second.locator("#msg-2")).to_have_attribute("data-status", "complete")
    expect(second.locator("#msg-2")).to_contain_text("HERON")
    seen = recorded_stream(second)
    lengths = [n for status, n in seen if status == "streaming" and n > 0]
    assert len(set(lengths)) >= 2, f"the second tab did not see the reply stream: {seen}"
    assert second.locator("#msg-2").inner_text() == first.locator("#msg-2").inner_text()
    expect(second.locator("#window-tokens")).to_have_attribute(
        "data-tokens", first.get_attribute("#window-tokens", "data-tokens")
    )


def test_screenshot_for_the_readme(browser, server, tmp_path):
    """The README's five pictures, taken into a scratch folder; into the folder
    README_SCREENSHOTS names when it is set (`make screenshots`: the repository's screenshots/)."""
    out = Path(os.environ.get("README_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    shots = [
        out / "chat.png",
        out / "chat-mobile.png",
        out / "model-view.png",
        out / "versions.png",
        out / "drawer-mobile.png",
    ]
    for shot in shots:
        shot.unlink(missing_ok=True)
    context = new_context(browser)
    try:
        page = context.new_page()
        page.set_viewport_size({"width": 1400, "height": 900})
        # A user of its own, so the sidebar shows a stable name and only these conversations.
        signup(page, server, "alice")
        for title in ["Reading list", "Trip to Lisbon"]:
            new_conversation(page)
            page.fill("input[name=title]", title)
            page.get_by_role("button", name="Rename").click()
            page.wait_for_load_state()
        page.locator("#sidebar-conversations .sidebar-row summary").first.click()
        page.get_by_role("button", name="Pin “Trip to Lisbon”").click()
        expect(page.locator("#sidebar-conversations .sidebar-row > a").first).to_have_text(
            "Trip to Lisbon"
        )
        new_conversation(page)
        page.fill("input[name=title]", "Launch planning")
        page.get_by_role("button", name="Rename").click()
        page.wait_for_load_state()
        wait_socket(page)
        run_until_auto_compaction(page)
        page.wait_for_selector("#progress", state="hidden")
        turn(page, long_message(7, "One more thing: the photos are late."))
        # Short turns from here on: the kept tail (and the picture) is made of them.
        turn(page, "And remind me: who owns the price sheet?")
        compact_now(page, "focus on the deadline and the owners")
        manual = page.locator('#transcript .divider[data-trigger="manual"]')
        expect(manual).to_have_count(1)
        turn(page, "Thanks. Can Ravi deliver the photos by Friday?")
        turn(page, "Good. Let us keep the fourteenth of March as the deadline.")
        # The later turns may fill the window again: at least one auto divider, maybe more.
        expect(page.locator('#transcript .divider[data-trigger="auto"]').first).to_be_visible()

        # Desktop: the manual divider a third of the way down, the newest turn below it.
        page.evaluate(
            "document.querySelector('#transcript .divider[data-trigger=\"manual\"]')"
            ".scrollIntoView({block: 'center'})"
        )
        page.screenshot(path=shots[0])
        # A phone opening the same conversation: the newest turns and the composer, the panel
        # one tap away behind "Context".
        phone = browser.new_context(
            storage_state=context.storage_state(),
            viewport={"width": 390, "height": 844},
            is_mobile=True,
            has_touch=True,
        )
        try:
            on_phone = phone.new_page()
            on_phone.goto(page.url)
            wait_socket(on_phone)
            expect(on_phone.locator("#composer")).to_be_in_viewport()
            on_phone.screenshot(path=shots[1])
            # The conversation list, in its drawer behind ☰, slid all the way in.
            on_phone.locator("#show-sidebar").tap()
            expect(on_phone.locator("#sidebar .sidebar-row.current")).to_be_in_viewport()
            on_phone.wait_for_function("() => !document.getAnimations().length")
            on_phone.screenshot(path=shots[4])
        finally:
            phone.close()
        page.click("#show-model-view")
        expect(page.locator("#model-view .window-message").first).to_contain_text(SUMMARY_INTRO)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=shots[2])

        # Versions: the last reply asked again, "‹ 2 / 2 ›" on it; the sidebar's groups.
        page.click("#show-everything")
        page.locator("#transcript .message.assistant").last.get_by_role(
            "button", name="Regenerate"
        ).click()
        expect(page.locator("#transcript .version-count")).to_have_text("2 / 2")
        expect(page.locator('#transcript .message[data-status="streaming"]')).to_have_count(0)
        page.locator("#transcript .message.user").last.get_by_text("Edit", exact=True).click()
        page.locator("#transcript .message.user").last.scroll_into_view_if_needed()
        page.screenshot(path=shots[3])
    finally:
        context.close()
    for shot in shots:
        assert shot.exists() and shot.stat().st_size > 20_000, shot
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot
