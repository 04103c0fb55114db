"""On screen: the meter moves while a reply streams and when a pin changes
the window; the chart has axes and a legend; a model with no price says "cost unknown"; the
admin's compaction list fits 1,400 px. On a desktop and a phone, light and dark."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from . import screens
from .conftest import new_conversation, server_with_admin, signup, tokens, turn, wait_replies
from .screens import in_view, leave_panel, reach_panel
from .test_csp_in_a_browser import FILLER

pytestmark = pytest.mark.browser
screen = screens.screen  # the fixture: each test runs on every screen

ADMIN = ("root", "a-long-admin-password-8")

# Every text #window-tokens shows while a reply streams, in order.
RECORD_METER = """() => {
    window.__meter = [];
    const look = () => {
        const el = document.getElementById('window-tokens');
        const streaming = !!document.querySelector('#transcript .message[data-status="streaming"]');
        const text = el ? el.textContent : '';
        const last = window.__meter[window.__meter.length - 1];
        if (streaming && (!last || last !== text)) window.__meter.push(text);
    };
    new MutationObserver(look).observe(document.body,
        {childList: true, subtree: true, characterData: true});
}"""


def test_the_meter_moves_while_a_reply_streams_and_the_chart_explains_itself(screen, tmp_path):
    page, refusals, name = screen
    turn(page, "HERON: a first message, so the chart has a turn. " + FILLER)
    before = tokens(page)
    page.evaluate(RECORD_METER)
    page.fill("#message-input", "EGRET: a long one, for a long reply. " + FILLER)
    page.press("#message-input", "Enter")
    streaming = page.locator('#transcript .message[data-status="streaming"]')
    expect(streaming).to_have_count(1)
    figures = page.locator("#context .meter-figures")
    reach_panel(page)
    in_view(page, figures)
    expect(figures).to_contain_text("≈")  # the estimate, while the reply streams
    expect(page.locator("#meter-reply")).to_be_in_viewport()
    page.screenshot(path=tmp_path / f"meter-streaming-{name}.png")
    wait_replies(page, 2)
    page.wait_for_function(
        "b => +document.getElementById('window-tokens').dataset.tokens !== b", arg=before
    )
    seen = page.evaluate("window.__meter")
    estimates = [int(t.strip("≈").split()[0].replace(",", "")) for t in seen if "≈" in t]
    assert len(estimates) >= 2 and estimates == sorted(estimates), seen
    assert estimates[-1] > before, (seen, before)
    # The real figure replaces the estimate when the reply ends.
    expect(page.locator("#window-tokens")).not_to_contain_text("≈")

    # The chart: axes labelled, a legend naming each line, all on screen.
    chart = page.locator("#context .chart")
    in_view(page, chart)
    for label in ("turn", "tokens"):
        expect(chart.locator("text.axis-label", has_text=label)).to_be_in_viewport()
    legend = page.locator("#context .chart-legend li")
    expect(legend).to_have_count(3)
    expect(legend.nth(0)).to_have_text("Window after each turn")
    expect(legend.nth(1)).to_contain_text("Budget (5,000)")
    expect(legend.nth(2)).to_contain_text("Auto-compaction (3,000)")
    in_view(page, legend.nth(2))
    # The demo model has no price: its cost is said to be unknown, not left out.
    spend = page.locator("#context #spend")
    in_view(page, spend)
    expect(spend).to_contain_text("This conversation: cost unknown")
    page.screenshot(path=tmp_path / f"chart-{name}.png")
    refusals.assert_none(page)


def test_pinning_a_compacted_message_moves_the_meter(screen, tmp_path):
    page, refusals, name = screen
    turn(page, "PLOVER: the message to pin later. " + FILLER)
    turn(page, "SANDPIPER: a second one. " + FILLER)
    turn(page, "TURNSTONE: a third. " + FILLER)
    before = tokens(page)
    reach_panel(page)
    page.click("#compact-now")
    expect(page.locator("#transcript .divider")).to_have_count(1)
    page.wait_for_function(
        "b => +document.getElementById('window-tokens').dataset.tokens < b", arg=before
    )
    compacted = tokens(page)
    shown = page.locator("#window-tokens").inner_text()
    expect(page.locator("#msg-1 .outside-label")).to_be_visible()
    page.locator("#msg-1 .pin-toggle").click()
    expect(page.locator("#msg-1 .pin-toggle")).to_have_text("Unpin")
    # Pinned, it is in every window word for word: labelled so, not as left out.
    expect(page.locator("#msg-1 .in-window-label")).to_be_visible()
    expect(page.locator("#msg-1 .outside-label")).to_be_hidden()
    # Message 1 rides in the window again: the meter says so at once, without a reply.
    page.wait_for_function(
        "c => +document.getElementById('window-tokens').dataset.tokens > c", arg=compacted
    )
    figures = page.locator("#context .meter-figures")
    reach_panel(page)
    in_view(page, figures)
    expect(page.locator("#window-tokens")).not_to_have_text(shown)
    page.screenshot(path=tmp_path / f"pinned-{name}.png")
    leave_panel(page)
    page.locator("#msg-1 .pin-toggle").click()
    page.wait_for_function(
        "c => +document.getElementById('window-tokens').dataset.tokens === c", arg=compacted
    )
    expect(page.locator("#msg-1 .outside-label")).to_be_visible()
    expect(page.locator("#msg-1 .in-window-label")).to_be_hidden()
    refusals.assert_none(page)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_admin_compaction_list_fits_1400_px(browser, scheme, tmp_path):
    with server_with_admin("browser-tests-admin-fit-", *ADMIN) as base:
        user = browser.new_context(viewport={"width": 1280, "height": 860})
        chat = user.new_page()
        signup(chat, base)
        new_conversation(chat)
        turn(chat, "A conversation with a long title to see it cut, GODWIT. " + FILLER)
        turn(chat, "KNOT: and one more. " + FILLER)
        chat.click("#compact-now")
        expect(chat.locator("#transcript .divider")).to_have_count(1)
        user.close()

        context = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme=scheme)
        page = context.new_page()
        page.goto(f"{base}/admin/")
        page.fill("#id_username", ADMIN[0])
        page.fill("#id_password", ADMIN[1])
        page.click("input[type=submit]")
        page.goto(f"{base}/admin/compaction/compaction/")
        table = page.locator("#result_list")
        expect(table.locator("tbody tr").first).to_be_visible()
        page.screenshot(path=tmp_path / f"admin-compactions-{scheme}.png")
        fits = page.evaluate(
            """() => {
                const box = document.querySelector('#changelist .results');
                const heads = [...document.querySelectorAll('#result_list thead th')].map(th => {
                    const r = th.getBoundingClientRect();
                    return [th.textContent.trim(), r.left >= 0 && r.right <= innerWidth];
                });
                return {scroll: box.scrollWidth, client: box.clientWidth, heads};
            }"""
        )
        assert fits["scroll"] <= fits["client"], fits
        assert all(inside for _, inside in fits["heads"]), fits
        page.locator("#result_list tbody tr th a").first.click()
        expect(page.locator(".fieldBox.field-raw_output_shown")).to_contain_text(
            "rule-based summary, no model output"
        )
        context.close()
