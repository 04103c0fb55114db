"""Sending while a reply streams, in a real browser: nothing typed is lost. A message sent during
a reply is queued and answered next, in order; the composer keeps its text until the server has
it; a queued message can be cancelled; Stop ends the reply and lets the queue go on; and two tabs
share one queue.

Message n of a conversation is bubble #msg-(2n-1) and its reply #msg-2n: a queued message has
its reply's number kept for it, even when it is cancelled and that reply never shows.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import (
    TIMEOUT_MS,
    RestartableServer,
    export,
    message_ids,
    new_context,
    new_conversation,
    signup,
    wait_socket,
)

pytestmark = pytest.mark.browser

# Slower words than the session server's, so there is time to queue, cancel and stop while a
# reply streams. The opener's reply (its echo ends in ALBATROSS) takes about 2.5 s; a short
# message's reply about 1.3 s.
WORD_DELAY_MS = "60"
OPENER = (
    "Tell me everything about lighthouses, the keepers who lived in them, the storms they "
    "watched and the ships they saved, ALBATROSS"
)
SECOND = "Second, about the harbour, BITTERN."
THIRD = "Third, about the tides, CURLEW."


# --- a server, a user, a tab ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def queue_server():
    """A server of its own (own SQLite file, own port) with slower words; the session's server,
    and so the other browser tests, keep theirs."""
    with tempfile.TemporaryDirectory(prefix="browser-tests-queue-") as tmp:
        srv = RestartableServer(Path(tmp))
        srv.env["DEMO_WORD_DELAY_MS"] = WORD_DELAY_MS
        srv.migrate()
        srv.start()
        try:
            yield srv.base
        finally:
            srv.stop()
            text = srv.log.read_text(errors="replace") if srv.log.exists() else ""
            if "Traceback" in text or "ERROR" in text:
                print("\n--- queue server log had errors ---\n" + text[-6000:])


@pytest.fixture(scope="module")
def quinn_state(browser, queue_server):
    context = new_context(browser)
    signup(context.new_page(), queue_server, "quinn")
    state = context.storage_state()
    context.close()
    return state


@pytest.fixture
def quinn(browser, quinn_state):
    """Quinn's browser: one context, so a second page is a second tab of the same login."""
    context = new_context(browser, storage_state=quinn_state)
    yield context
    context.close()


def open_new_conversation(page, base: str) -> None:
    page.goto(f"{base}/")
    new_conversation(page)


@pytest.fixture
def tab(quinn, queue_server):
    """A tab on a brand-new conversation of Quinn's."""
    page = quinn.new_page()
    open_new_conversation(page, queue_server)
    return page


class SlowLink:
    """The page's websocket, relayed through Playwright: the server's frames can be held back,
    as on a slow link, and then delivered in the order they came."""

    def __init__(self, page):
        self.page = page
        self.holding = False
        self.held: list[str] = []
        self._to_page = None
        page.route_web_socket(re.compile(r"/ws/conversations/\d+/$"), self._route)

    def _route(self, ws) -> None:
        self._to_page = ws
        server = ws.connect_to_server()

        def from_server(message) -> None:
            if self.holding:
                self.held.append(message)
            else:
                ws.send(message)

        server.on_message(from_server)
        ws.on_message(server.send)

    def hold(self) -> None:
        self.holding = True

    def release(self) -> None:
        self.holding = False
        while self.held:
            self._to_page.send(self.held.pop(0))

    def wait_held(self, marker: str) -> None:
        """Wait until the server has sent a frame containing `marker` (and it is held)."""
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while not any(marker in frame for frame in self.held):
            assert time.monotonic() < deadline, f"the server never sent {marker!r}: {self.held}"
            self.page.wait_for_timeout(20)  # lets Playwright deliver the relayed frames


@pytest.fixture
def slow_tab(quinn, queue_server):
    """A tab on a new conversation whose websocket runs through a `SlowLink`."""
    page = quinn.new_page()
    link = SlowLink(page)
    open_new_conversation(page, queue_server)
    return page, link


# --- what a user does and sees -------------------------------------------------------------------


def type_and_send(page, text: str, seq: int):
    """Type a message and press Enter; wait until the server has taken it (its bubble #msg-<seq>
    shows it and the composer is empty again). Returns the bubble."""
    box = page.locator("#message-input")
    box.fill(text)
    box.press("Enter")
    bubble = page.locator(f"#msg-{seq}")
    expect(bubble.locator(".text")).to_have_text(text)
    expect(box).to_have_value("")
    return bubble


def wait_streaming(page, seq: int) -> None:
    """Wait until reply #msg-<seq> streams and its first words have arrived."""
    page.wait_for_function(
        'seq => { const t = document.querySelector(`#msg-${seq}[data-status="streaming"] .text`);'
        " return t && t.innerText.trim().length > 0; }",
        arg=seq,
    )


def wait_settled(page, seq: int) -> str:
    """Wait until reply #msg-<seq> has shown and stopped streaming; return its final status."""
    selector = f'#msg-{seq}[data-status]:not([data-status="streaming"])'
    page.wait_for_selector(selector)
    return page.get_attribute(f"#msg-{seq}", "data-status")


def expect_queued(bubble) -> None:
    expect(bubble.locator(".badge.queued")).to_be_visible()
    expect(bubble.locator(".badge.queued")).to_have_text("queued")
    cancel = bubble.locator("form.cancel-queued").get_by_role("button", name="Cancel")
    expect(cancel).to_be_visible()


def expect_not_queued(bubble) -> None:
    expect(bubble.locator(".badge.queued")).to_have_count(0)
    expect(bubble.locator("form.cancel-queued")).to_have_count(0)


def record_replies(page) -> None:
    """Record, in the page, every status each reply bubble shows, in the order they show; and
    whether two replies ever streamed at once."""
    page.evaluate(
        """() => {
            window.__replies = [];
            window.__overlap = false;
            const seen = {};
            const look = () => {
                let streaming = 0;
                for (const m of document.querySelectorAll('#transcript .message.assistant')) {
                    if (m.dataset.status === 'streaming') streaming++;
                    if (seen[m.id] !== m.dataset.status) {
                        seen[m.id] = m.dataset.status;
                        window.__replies.push(`${m.id} ${m.dataset.status}`);
                    }
                }
                if (streaming > 1) window.__overlap = true;
            };
            look();
            new MutationObserver(look).observe(document.body,
                {childList: true, subtree: true, attributes: true});
        }"""
    )


def recorded_replies(page) -> list[str]:
    assert not page.evaluate("window.__overlap"), "two replies streamed at once"
    return page.evaluate("window.__replies")


def struck_through(bubble) -> bool:
    line = bubble.locator(".text").evaluate("el => getComputedStyle(el).textDecorationLine")
    return "line-through" in line


# --- 1. queued, then answered in order -----------------------------------------------------------


def test_a_message_sent_while_a_reply_streams_is_queued(tab, quinn):
    page = tab
    type_and_send(page, OPENER, 1)
    wait_streaming(page, 2)

    second = type_and_send(page, SECOND, 3)
    expect_queued(second)
    expect(page.locator("#msg-2")).to_have_attribute("data-status", "streaming")
    expect(page.locator("#msg-4")).to_have_count(0)
    # A tab opened now shows the queue as it stands, from the server.
    other = quinn.new_page()
    other.goto(page.url)
    expect_queued(other.locator("#msg-3"))
    expect(other.locator("#msg-4")).to_have_count(0)
    other.close()

    # Its reply starts when the first one ends: from then on it is an ordinary sent message.
    wait_streaming(page, 4)
    expect(page.locator("#msg-2")).to_have_attribute("data-status", "complete")
    expect_not_queued(second)


def test_queued_messages_are_answered_in_order_after_the_current_reply(tab, queue_server):
    page = tab
    record_replies(page)
    type_and_send(page, OPENER, 1)
    wait_streaming(page, 2)
    expect_queued(type_and_send(page, SECOND, 3))
    expect_queued(type_and_send(page, THIRD, 5))

    assert wait_settled(page, 6) == "complete"
    assert recorded_replies(page) == [
        "msg-2 streaming",
        "msg-2 complete",
        "msg-4 streaming",
        "msg-4 complete",
        "msg-6 streaming",
        "msg-6 complete",
    ]
    # Each reply answers its own message, with the turns before it in its window.
    expect(page.locator("#msg-2")).to_contain_text("ALBATROSS")
    expect(page.locator("#msg-4")).to_contain_text(f"You said: “{SECOND}”")
    expect(page.locator("#msg-4")).to_contain_text("My window holds 3 messages")
    expect(page.locator("#msg-6")).to_contain_text(f"You said: “{THIRD}”")
    expect(page.locator("#msg-6")).to_contain_text("My window holds 5 messages")
    expect(page.locator("#transcript .badge.queued")).to_have_count(0)
    expect(page.locator("#transcript form.cancel-queued")).to_have_count(0)
    expect(page.locator("#stop-button")).to_be_hidden()
    ids = message_ids(page)
    assert sorted(ids) == [f"msg-{n}" for n in range(1, 7)], f"bubbles lost or doubled: {ids}"
    saved = [(m["seq"], m["status"]) for m in export(page, queue_server)["messages"]]
    assert saved == [(n, "complete") for n in range(1, 7)], saved


def test_a_queued_messages_reply_shows_right_under_it(tab):
    page = tab
    type_and_send(page, OPENER, 1)
    wait_streaming(page, 2)
    expect_queued(type_and_send(page, SECOND, 3))
    expect_queued(type_and_send(page, THIRD, 5))
    wait_streaming(page, 4)
    # Message, its reply, the next message: the order a reload shows, by number.
    assert message_ids(page) == ["msg-1", "msg-2", "msg-3", "msg-4", "msg-5"]


# --- 2. the composer -----------------------------------------------------------------------------


def test_the_composer_is_cleared_only_once_the_server_has_accepted_the_message(slow_tab):
    page, link = slow_tab
    box = page.locator("#message-input")
    link.hold()
    box.fill(OPENER)
    box.press("Enter")
    # The server has stored it and said so, but the page has not heard yet: the text stays.
    link.wait_held('id="send-accepted"')
    expect(box).to_have_value(OPENER)
    expect(page.locator("#composer")).to_have_class(re.compile(r"\bsending\b"))
    expect(page.locator("#transcript .message")).to_have_count(0)

    link.release()
    expect(page.locator("#msg-1 .text")).to_have_text(OPENER)
    expect(box).to_have_value("")
    expect(page.locator("#composer")).not_to_have_class(re.compile(r"\bsending\b"))


def test_text_typed_while_the_server_has_not_answered_is_kept(slow_tab):
    page, link = slow_tab
    box = page.locator("#message-input")
    link.hold()
    box.fill(OPENER)
    box.press("Enter")
    link.wait_held('id="send-accepted"')
    box.press("End")
    box.press_sequentially(" and one more thing")
    link.release()
    expect(page.locator("#msg-1 .text")).to_have_text(OPENER)
    # Only what was sent is cleared: the words typed since stay for the next message.
    expect(box).to_have_value(OPENER + " and one more thing")


def test_a_double_enter_sends_the_message_once(slow_tab, queue_server):
    page, link = slow_tab
    page.evaluate(
        "window.__sent = [];"
        " document.addEventListener('htmx:wsAfterSend', e => window.__sent.push(e.detail.message))"
    )
    box = page.locator("#message-input")
    link.hold()
    box.fill(SECOND)
    box.press("Enter")
    link.wait_held('id="send-accepted"')
    box.press("Enter")  # the text is still there: the first Enter has not been answered yet
    sent = [json.loads(m)["action"] for m in page.evaluate("window.__sent")]
    assert sent == ["send"], sent

    link.release()
    expect(page.locator("#msg-1 .text")).to_have_text(SECOND)
    expect(box).to_have_value("")
    assert wait_settled(page, 2) == "complete"
    expect(page.locator("#transcript .message.user")).to_have_count(1)
    saved = [(m["seq"], m["role"]) for m in export(page, queue_server)["messages"]]
    assert saved == [(1, "user"), (2, "assistant")], saved


def test_another_actions_refusal_does_not_leave_a_sent_message_in_the_composer(slow_tab):
    page, link = slow_tab
    box = page.locator("#message-input")
    link.hold()
    page.click("#compact-now")  # a new conversation has nothing to compact: refused
    box.fill(SECOND)
    box.press("Enter")
    link.wait_held('id="send-accepted"')
    link.release()  # in order: the refusal, then the acceptance
    expect(page.locator("#msg-1 .text")).to_have_text(SECOND)
    assert box.input_value() == "", "the composer kept a message the server had accepted"


def _too_long(box) -> tuple[str, str]:
    # The textarea holds at most the server's limit; without that guard (a page served under a
    # higher limit, or a browser that ignores maxlength) the server refuses one over it.
    limit = int(box.get_attribute("maxlength"))
    box.evaluate("el => el.removeAttribute('maxlength')")
    return "lighthouse " * (limit // 11) + "x" * (limit % 11 + 1), f"the limit is {limit:,}"


REFUSALS = {
    # Enter on blank text does nothing; the Send button sends it, and the server says why not.
    "blank": lambda box: ("   ", "Type a message first: an empty message cannot be sent."),
    "over the length limit": _too_long,
    # Under the length limit, but more tokens than this server's whole budget of 5,000.
    "over the token budget": lambda box: (
        "The keeper climbed the stairs again. " * 500,
        "over this model's budget of 5,000",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_refused_message_stays_in_the_composer_with_a_notice(tab, case):
    page = tab
    box = page.locator("#message-input")
    text, reason = REFUSALS[case](box)
    box.fill(text)
    page.locator("#composer button.send").click()

    notice = page.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_have_class(re.compile(r"\bnotice\b.*\berror\b"))
    expect(notice).to_contain_text(reason)
    assert box.input_value() == text, "the refused message was taken out of the composer"
    expect(page.locator("#composer")).not_to_have_class(re.compile(r"\bsending\b"))
    expect(page.locator("#transcript .message")).to_have_count(0)

    # The composer is not stuck: fixed, the message goes and the notice goes away.
    type_and_send(page, "A shorter message, WHIMBREL.", 1)
    expect(notice).to_be_hidden()


# --- 3. Cancel -----------------------------------------------------------------------------------


def test_a_cancelled_queued_message_is_never_sent_and_the_next_one_still_runs(tab):
    page = tab
    record_replies(page)
    type_and_send(page, OPENER, 1)
    wait_streaming(page, 2)
    second = type_and_send(page, SECOND, 3)
    third = type_and_send(page, THIRD, 5)
    expect_queued(third)

    second.get_by_role("button", name="Cancel").click()
    expect(second).to_have_class(re.compile(r"\bcancelled\b"))
    expect(second.locator(".badge.cancelled")).to_have_text("cancelled, not sent")
    assert struck_through(second), "the cancelled message is not struck through"
    expect_not_queued(second)
    expect_queued(third)
    expect(page.locator("#msg-2")).to_have_attribute("data-status", "streaming")

    assert wait_settled(page, 6) == "complete"
    # The cancelled message's reply never appeared, not even for a moment.
    assert recorded_replies(page) == [
        "msg-2 streaming",
        "msg-2 complete",
        "msg-6 streaming",
        "msg-6 complete",
    ]
    reply = page.locator("#msg-6")
    expect(reply).to_contain_text(f"You said: “{THIRD}”")
    # The model never saw it: its window is the first turn and the third message.
    expect(reply).to_contain_text("My window holds 3 messages")
    expect(reply).not_to_contain_text("BITTERN")

    page.reload()
    wait_socket(page)
    assert message_ids(page) == ["msg-1", "msg-2", "msg-3", "msg-5", "msg-6"]
    expect(second.locator(".badge.cancelled")).to_have_text("cancelled, not sent")
    assert struck_through(second)
    expect_not_queued(second)


# --- 4. Stop -------------------------------------------------------------------------------------


def _stop(page, how: str) -> None:
    if how == "Stop button":
        page.click("#stop-button")
    else:
        page.keyboard.press("Escape")


@pytest.mark.parametrize("how", ["Stop button", "Escape"])
def test_stop_ends_the_streaming_reply_and_the_queued_message_runs_next(tab, how):
    page = tab
    record_replies(page)
    type_and_send(page, OPENER, 1)
    wait_streaming(page, 2)
    expect_queued(type_and_send(page, SECOND, 3))
    expect(page.locator("#stop-button")).to_be_visible()

    _stop(page, how)
    stopped = page.locator("#msg-2")
    expect(stopped).to_have_attribute("data-status", "interrupted")
    expect(stopped.locator(".badge.interrupted")).to_have_text("interrupted")
    # The full reply would echo the opener up to ALBATROSS; a stopped one does not get there.
    assert "ALBATROSS" not in stopped.locator(".text").inner_text()

    assert wait_settled(page, 4) == "complete"
    assert recorded_replies(page) == [
        "msg-2 streaming",
        "msg-2 interrupted",
        "msg-4 streaming",
        "msg-4 complete",
    ]
    expect(page.locator("#msg-4")).to_contain_text(f"You said: “{SECOND}”")
    expect_not_queued(page.locator("#msg-3"))
    expect(page.locator("#stop-button")).to_be_hidden()


def test_a_second_stop_aimed_at_the_same_reply_does_not_stop_the_queued_one(slow_tab):
    """On a slow link the reply keeps streaming on screen after Stop, so the user presses it
    again; meanwhile the server has stopped that reply and started the queued one."""
    page, link = slow_tab
    type_and_send(page, OPENER, 1)
    wait_streaming(page, 2)
    expect_queued(type_and_send(page, SECOND, 3))

    link.hold()
    page.click("#stop-button")
    link.wait_held('id="msg-4"')  # the server has stopped reply 2 and started reply 4
    expect(page.locator("#msg-2")).to_have_attribute("data-status", "streaming")
    page.click("#stop-button")  # aimed at reply 2, the one the user sees streaming
    link.release()

    expect(page.locator("#msg-2")).to_have_attribute("data-status", "interrupted")
    assert wait_settled(page, 4) == "complete", "the queued message's reply was stopped too"


# --- 5. two tabs ---------------------------------------------------------------------------------


def test_a_message_sent_from_a_second_tab_is_queued_and_both_tabs_see_it_run(tab, quinn):
    first = tab
    second = quinn.new_page()
    second.goto(first.url)
    wait_socket(second)
    for page in (first, second):
        record_replies(page)

    type_and_send(first, OPENER, 1)
    wait_streaming(second, 2)
    # The first tab has a draft of its own going.
    draft = "A draft in the first tab, not sent yet"
    first.locator("#message-input").fill(draft)

    type_and_send(second, SECOND, 3)
    for page in (first, second):
        expect(page.locator("#msg-3 .text")).to_have_text(SECOND)
        expect_queued(page.locator("#msg-3"))
        expect(page.locator("#msg-2")).to_have_attribute("data-status", "streaming")
    # The other tab's message being accepted does not touch this tab's composer.
    expect(first.locator("#message-input")).to_have_value(draft)

    for page in (first, second):
        assert wait_settled(page, 4) == "complete"
        assert recorded_replies(page) == [
            "msg-2 streaming",
            "msg-2 complete",
            "msg-4 streaming",
            "msg-4 complete",
        ]
        expect(page.locator("#msg-4")).to_contain_text(f"You said: “{SECOND}”")
        expect_not_queued(page.locator("#msg-3"))
        assert message_ids(page) == ["msg-1", "msg-2", "msg-3", "msg-4"]
    assert first.locator("#msg-4").inner_text() == second.locator("#msg-4").inner_text()
    expect(first.locator("#message-input")).to_have_value(draft)
