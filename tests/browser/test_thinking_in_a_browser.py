"""Extended thinking on screen: a conversation on a model declared to think is switched to it in
its settings; the model's thinking streams into a folded "Thinking…" block above the reply;
opened while it streams, it stays open when the reply ends; a reload shows it folded above the
reply, opening to the reasoning (markdown, sanitised). On a desktop and a 390 px phone, light and
dark; axe-clean, with no CSP refusal."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from support.fake_anthropic import FakeAnthropic
from support.scripts import thinking_reply

from .conftest import TIMEOUT_MS, new_conversation, serve, signup, wait_socket
from .screens import SCREENS
from .test_accessibility_in_a_browser import Audit
from .test_csp_in_a_browser import Refusals

pytestmark = pytest.mark.browser

THOUGHT = ["The person asks about tides. ", "They follow the **moon** & the sun."]
WORDS = ["Tides", " rise", " and", " fall", " twice", " a", " day", " with", " the", " moon."]


class Thinker:
    """Every request answered with thinking, then words slow enough to watch them stream."""

    def plan(self, body: dict):
        script = thinking_reply(THOUGHT, WORDS)
        script.delay = 0.25
        return script


@pytest.fixture(scope="module")
def thinking_server():
    fake = FakeAnthropic(Thinker()).start()
    models = [{"id": "claude-thinker", "label": "Thinker", "thinking": True}]
    try:
        with serve(
            LLM_PROVIDER="anthropic",
            ANTHROPIC_BASE_URL=fake.url,
            ANTHROPIC_API_KEY="test-key",
            CHAT_MODELS=json.dumps(models),
            CHAT_MODEL="claude-thinker",
        ) as base:
            yield base, fake
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def thea(browser, thinking_server):
    context = browser.new_context()
    signup(context.new_page(), thinking_server[0], "thea")
    state = context.storage_state()
    context.close()
    return state


@pytest.mark.parametrize("name", list(SCREENS))
def test_thinking_streams_into_a_folded_block_above_the_reply(
    browser, thinking_server, thea, name, tmp_path
):
    base, fake = thinking_server
    context = browser.new_context(storage_state=thea, **SCREENS[name])
    context.set_default_timeout(TIMEOUT_MS)
    refusals = Refusals(context)
    page = context.new_page()
    page.goto(f"{base}/")
    new_conversation(page)

    # The switch, where the conversation's settings are.
    page.locator(".conversation-menu > summary").click()
    switch = page.locator("#thinking-on")
    switch.scroll_into_view_if_needed()
    expect(switch).to_be_in_viewport()
    switch.check()
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Settings saved.")).to_be_visible()
    wait_socket(page)  # the page came back from the form: a send before its socket opens is lost

    page.fill("#message-input", "Why are there tides?")
    page.press("#message-input", "Enter")
    streaming = page.locator('#msg-2[data-status="streaming"] .streaming-thinking')
    expect(streaming).to_be_visible()
    expect(streaming).to_be_in_viewport()
    expect(streaming.locator("summary")).to_have_text("Thinking…")
    assert streaming.get_attribute("open") is None  # folded while it streams
    streaming.locator("summary").click()  # opened by the person as it streams
    expect(streaming.locator(".thinking-text")).to_contain_text("the **moon** & the sun.")
    expect(streaming.locator(".thinking-text")).to_be_in_viewport()
    page.screenshot(path=tmp_path / f"thinking-streaming-{name}.png")

    reply = page.locator('#msg-2[data-status="complete"]')
    expect(reply).to_be_visible()
    for when in ("ended", "reloaded"):
        block = reply.locator("details.thinking")
        expect(block).to_have_count(1)
        expect(block).to_be_in_viewport()
        said = reply.locator(".text.markdown > p").last
        expect(said).to_have_text("Tides rise and fall twice a day with the moon.")
        assert block.bounding_box()["y"] < said.bounding_box()["y"], when  # above the reply
        if when == "ended":  # still open, as the person left it (static/js/thinking.js)
            assert block.get_attribute("open") is not None
        else:  # a page read afresh shows it folded
            assert block.get_attribute("open") is None
            block.locator("summary").click()
        expect(block.locator(".thinking-text")).to_contain_text("They follow the moon & the sun.")
        expect(block.locator(".thinking-text strong")).to_have_text("moon")  # markdown, sanitised
        page.screenshot(path=tmp_path / f"thinking-{when}-{name}.png")
        if when == "ended":
            page.reload()
            reply = page.locator('#msg-2[data-status="complete"]')
    audit = Audit()
    audit(page, name)
    audit.assert_clean()
    refusals.assert_none(page)
    assert not fake.invalid, fake.invalid
    context.close()
