"""The finishing touches, in a real browser: a dropped socket and its recovery, pinning across a
compaction, the keyboard, copy buttons on code, dark mode and a phone-sized screen.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from compaction.assembly import PINNED_HEADING

from .conftest import (
    export,
    message_ids,
    new_context,
    new_conversation,
    replies,
    send,
    signup,
    turn,
    wait_replies,
    wait_socket,
)

pytestmark = pytest.mark.browser

# Three turns of this give "Compact now" a span worth summarising while staying well under the
# auto threshold of the 5,000-token test budget.
FILLER = " ".join(
    [
        "The reading lamp launches on the fourteenth of March; Dana writes the copy, Ravi shoots "
        "the photos and Mei prepares the price sheet with its regional variations, and finance "
        "signs off every change to the capped budget before it is final."
    ]
    * 4
)
RECONNECT_SECONDS = 30


def _rgb(css: str) -> tuple[int, int, int]:
    r, g, b = (int(float(x)) for x in re.findall(r"[\d.]+", css)[:3])
    return r, g, b


def _socket_state(page) -> int | None:
    return page.evaluate(
        "() => { const el = document.getElementById('chat-root');"
        " const ws = el && el['htmx-internal-data'] && el['htmx-internal-data'].webSocket;"
        " return ws && ws.socket ? ws.socket.readyState : null; }"
    )


# --- 1. a dropped socket ------------------------------------------------------------------------


def _wait_reconnected(page) -> None:
    """Wait for the ws extension's own reconnect (full-jitter backoff: seconds, not minutes)."""
    page.wait_for_function(
        "() => { const el = document.getElementById('chat-root');"
        " const ws = el && el['htmx-internal-data'] && el['htmx-internal-data'].webSocket;"
        " return ws && ws.socket && ws.socket.readyState === 1; }",
        timeout=RECONNECT_SECONDS * 1000,
    )


def _mark_old_parts(page) -> None:
    """Tag the transcript and panel in place, to tell when a re-fetch has replaced them."""
    page.evaluate(
        "() => { for (const id of ['transcript', 'context'])"
        " document.getElementById(id).dataset.beforeDrop = '1'; }"
    )


def _wait_parts_refetched(page) -> None:
    page.wait_for_function(
        "() => ['transcript', 'context'].every(id => { const el = document.getElementById(id);"
        " return el && !el.dataset.beforeDrop; })"
    )


def _count_fetches(page) -> None:
    """Count, in the page, its fetches under way, each until its body has been read (or it
    failed). The app reads a re-fetched part, swaps it in and starts the next round if one is
    needed all in one task, so between tasks a count of 0 means its catching up is over."""
    page.evaluate(
        """() => {
            window.__fetching = 0;
            const fetch = window.fetch;
            window.fetch = function (...args) {
                window.__fetching++;
                let open = true;
                const done = () => { if (open) { open = false; window.__fetching--; } };
                return fetch.apply(this, args).then(response => {
                    if (!response.ok) done();
                    const text = response.text.bind(response);
                    response.text = () => text().finally(done);
                    return response;
                }, error => { done(); throw error; });
            };
        }"""
    )


def _drop_and_restore(srv, *pages) -> None:
    """Stop the server (every socket drops without a close frame), check the banner, start it
    on the same port again and wait until every page's socket has reconnected by itself."""
    srv.stop()
    for page in pages:
        # htmx:wsClose: the banner, with its Retry button, shows while the server is away.
        expect(page.locator("#connection")).to_be_visible(timeout=10_000)
        expect(page.locator("#connection")).to_contain_text("Connection lost")
        expect(page.locator("#retry")).to_be_visible()
        expect(page.locator("#retry")).to_have_text("Retry")
        assert _socket_state(page) != 1
    # Daphne takes a couple of seconds to start: the extension's first retries fail against the
    # closed port, so the recovery below comes from its backoff, not from one lucky attempt.
    srv.start()
    for page in pages:
        _wait_reconnected(page)
        expect(page.locator("#connection")).to_be_hidden()


def test_a_dropped_socket_shows_a_banner_and_reconnects_without_duplicate_bubbles(
    browser, restartable_server
):
    srv = restartable_server
    context = new_context(browser)
    try:
        page = context.new_page()
        signup(page, srv.base)
        new_conversation(page)
        turn(page, "First turn before the drop, about the harbour hall.")
        turn(page, "Second turn before the drop, about the catering.")
        expect(page.locator("#connection")).to_be_hidden()
        before_ids = message_ids(page)
        assert before_ids == ["msg-1", "msg-2", "msg-3", "msg-4"], before_ids
        _mark_old_parts(page)

        _drop_and_restore(srv, page)
        # After the drop the page fetches the transcript and the panel again: same bubbles,
        # none doubled, none lost.
        _wait_parts_refetched(page)
        expect(page.locator("#transcript .message")).to_have_count(len(before_ids))
        assert message_ids(page) == before_ids
        expect(replies(page)).to_have_count(2)

        # The socket works again: a new turn streams to completion, exactly once.
        send(page, "Third turn, after the reconnect: are you still there?")
        wait_replies(page, 3)
        expect(page.locator("#msg-6")).to_have_attribute("data-status", "complete")
        expect(page.locator("#msg-6")).to_contain_text("after the reconnect")
        ids = message_ids(page)
        assert len(set(ids)) == len(ids), f"duplicate bubbles after the reconnect: {ids}"
        assert ids == [f"msg-{n}" for n in range(1, 7)], ids
        expect(page.locator("#connection")).to_be_hidden()
        # And the server agrees: six messages, nothing sent twice by a queued frame.
        seqs = [m["seq"] for m in export(page, srv.base)["messages"]]
        assert seqs == [1, 2, 3, 4, 5, 6], seqs
    finally:
        context.close()
        if not srv.running():
            srv.start()  # the next test, and the fixture, expect a running server


def test_messages_that_arrive_while_the_transcript_is_refetched_are_kept(
    browser, restartable_server
):
    """After a drop the page re-fetches its transcript over HTTP while the socket delivers new
    messages. On a slow link the snapshot can land after them: it must not wipe them out."""
    srv = restartable_server
    context = new_context(browser)
    try:
        page = context.new_page()
        signup(page, srv.base)
        new_conversation(page)
        turn(page, "A first turn, before the drop.")
        other = context.new_page()
        other.goto(page.url)
        wait_socket(other)
        _mark_old_parts(page)
        _mark_old_parts(other)
        _count_fetches(page)

        # Hold this tab's transcript re-fetch after the server has answered it: a slow network.
        held = []

        def hold(route):
            if held:
                route.continue_()
            else:
                held.append((route, route.fetch()))

        page.route(re.compile(r"[?&]part=transcript"), hold)
        _drop_and_restore(srv, page, other)
        _wait_parts_refetched(other)
        deadline = time.monotonic() + 5
        while not held and time.monotonic() < deadline:
            page.wait_for_timeout(100)  # an app that no longer re-fetches over HTTP skips this

        # Meanwhile a turn from the other tab reaches this one over the socket.
        turn(other, "A second turn, sent from the other tab while the first was catching up.")
        expect(page.locator("#msg-4")).to_have_attribute("data-status", "complete")
        if held:
            route, response = held[0]
            route.fulfill(response=response)
            page.wait_for_function(
                "() => !document.getElementById('transcript').dataset.beforeDrop"
            )
        # Any further catch-up the app does (the bubbles that came while it fetched ask for
        # another round): over when no fetch is under way.
        page.wait_for_function("() => window.__fetching === 0")
        ids = message_ids(page)
        assert ids == ["msg-1", "msg-2", "msg-3", "msg-4"], f"bubbles lost or doubled: {ids}"
        expect(page.locator("#msg-4")).to_have_attribute("data-status", "complete")
    finally:
        context.close()
        if not srv.running():
            srv.start()


# --- 2. pinning -------------------------------------------------------------------------------


def test_pinning_a_message_keeps_it_verbatim_after_compaction(chat, server):
    page = chat
    # Two lines and a doubled space: a verbatim quote keeps them exactly.
    marker = "PIN-MARKER-4417: the launch code is\nTANGERINE  42, do not change it."
    # The rule-based summary keeps only a message's opening; the pinned quote carries it whole.
    ending = "END-OF-PINNED-9021"
    turn(page, f"{marker} {FILLER} {FILLER} {ending}")
    pin = page.locator("#msg-1 .pin-toggle")
    expect(pin).to_have_text("Pin")
    pin.click()
    expect(page.locator("#msg-1")).to_have_class(re.compile(r"\bpinned\b"))
    expect(page.locator("#msg-1 .pin-toggle")).to_have_text("Unpin")
    expect(page.locator("#msg-1 .pinned-badge")).to_be_visible()
    # Nothing is compacted yet: the pin alone adds no head message.
    first = export(page, server)["window"]["messages"][0]["content"][0]["text"]
    assert PINNED_HEADING not in first

    turn(page, "Second turn, about the photos. " + FILLER)
    turn(page, "Third turn, about the price sheet. " + FILLER)
    # A fourth, so what is folded clearly outweighs its summary (the brief's room is shared with
    # the facts it carries; three turns sit at the edge of worth compacting).
    turn(page, "Fourth turn, about the copy. " + FILLER)
    page.click("#compact-now")
    expect(page.locator('#transcript .divider[data-trigger="manual"]')).to_have_count(1)
    expect(page.locator("#msg-1")).to_have_class(re.compile(r"\boutside-window\b"))
    expect(page.locator("#msg-1")).to_have_class(re.compile(r"\bpinned\b"))

    data = export(page, server)
    assert data["compactions"][0]["first_kept_seq"] > 1, data["compactions"]
    head = data["window"]["messages"][0]["content"][0]["text"]
    assert PINNED_HEADING in head, head[:800]
    quoted = head.split(PINNED_HEADING, 1)[1]
    assert marker in quoted, f"the pinned message is not quoted verbatim: {quoted[:600]!r}"
    assert "(#1)" in quoted, quoted[:200]
    assert quoted.rstrip().endswith(ending), f"the pinned quote was shortened: {quoted[-300:]!r}"
    assert ending not in head.split(PINNED_HEADING, 1)[0], "the summary was not shortened"

    # The model view shows the same head, with the pinned text in it.
    page.click("#show-model-view")
    expect(page.locator("#model-view .window-message").first).to_contain_text("PIN-MARKER-4417")
    page.click("#show-everything")

    page.locator("#msg-1 .pin-toggle").click()
    expect(page.locator("#msg-1 .pin-toggle")).to_have_text("Pin")
    expect(page.locator("#msg-1")).not_to_have_class(re.compile(r"\bpinned\b"))
    expect(page.locator("#msg-1 .pinned-badge")).to_have_count(0)
    expect(page.locator("#msg-1")).to_have_class(re.compile(r"\boutside-window\b"))
    head = export(page, server)["window"]["messages"][0]["content"][0]["text"]
    assert PINNED_HEADING not in head, head[:800]
    assert ending not in head, "the unpinned message is still quoted in full"


# --- 3. the keyboard ----------------------------------------------------------------------------


def test_keyboard_enter_sends_shift_enter_adds_a_line_and_escape_stops(chat):
    page = chat
    box = page.locator("#message-input")
    box.click()
    page.keyboard.type("First line of the note")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line, then tell me about lighthouses and their keepers KESTREL")
    assert box.input_value() == (
        "First line of the note\nsecond line, then tell me about lighthouses and their keepers "
        "KESTREL"
    )
    expect(page.locator("#transcript .message")).to_have_count(0)

    # Had Shift+Enter sent the first line, message #1 would hold it alone.
    page.keyboard.press("Enter")
    user = page.locator("#msg-1")
    expect(user).to_be_visible()
    assert user.locator(".text").inner_text().splitlines()[:2] == [
        "First line of the note",
        "second line, then tell me about lighthouses and their keepers KESTREL",
    ]
    expect(box).to_have_value("")

    page.wait_for_function(
        "() => { const t = document.querySelector("
        "'#msg-2[data-status=\"streaming\"] .text');"
        " return t && t.innerText.trim().length > 0; }"
    )
    page.keyboard.press("Escape")
    reply = page.locator("#msg-2")
    expect(reply).to_have_attribute("data-status", "interrupted")
    expect(reply.locator(".badge.interrupted")).to_be_visible()
    # The full reply would echo the message up to KESTREL; a stopped one does not get there.
    assert "KESTREL" not in reply.locator(".text").inner_text()
    # Escape with nothing streaming does nothing, and Enter on an empty box sends nothing: a
    # message typed after them is the next one (the socket keeps the order frames are sent in).
    page.keyboard.press("Escape")
    box.click()
    page.keyboard.press("Enter")
    page.keyboard.type("PLOVER")
    page.keyboard.press("Enter")
    expect(page.locator("#msg-3")).to_contain_text("PLOVER")
    expect(page.locator("#transcript .message.user")).to_have_count(2)
    expect(reply).to_have_attribute("data-status", "interrupted")


# --- 4. copy buttons ----------------------------------------------------------------------------


def test_code_blocks_get_a_copy_button(chat, user_context, server):
    """The demo model never writes a code block of its own (it echoes the message on one line),
    so the code is the user's: a person's code fence is a code block, in the transcript and in
    "What the model sees"."""
    page = chat
    user_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    code = 'def launch(day):\n    return f"lamp ships on {day}"'
    send(page, f"Please review this function:\n\n```python\n{code}\n```\n")
    wait_replies(page, 1)
    expect(page.locator("#msg-1 pre code")).to_have_class(re.compile(r"language-python"))
    expect(page.locator("#msg-1 pre button.copy")).to_have_count(1)

    page.click("#show-model-view")
    pre = page.locator("#model-view .markdown pre").first
    expect(pre).to_be_visible()
    expect(pre.locator("code")).to_have_class(re.compile(r"language-python"))
    button = pre.locator("button.copy")
    expect(button).to_have_count(1)
    expect(button).to_have_text("Copy")
    button.click()
    expect(button).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()").rstrip("\n") == code
    expect(button).to_have_text("Copy", timeout=5_000)

    # Showing the view again swaps fresh content in: it gets its own, single, button.
    page.click("#show-everything")
    page.click("#show-model-view")
    page.wait_for_function(
        "() => document.querySelectorAll('#model-view .markdown pre').length > 0"
        " && [...document.querySelectorAll('#model-view .markdown pre')]"
        ".every(p => p.querySelectorAll('.copy').length === 1)"
    )


# --- 5. dark mode -------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_dark_mode_follows_the_system_setting(browser, server, user_state, scheme):
    context = new_context(browser, color_scheme=scheme, storage_state=user_state)
    try:
        page = context.new_page()
        page.goto(f"{server}/")
        background = _rgb(page.evaluate("getComputedStyle(document.body).backgroundColor"))
        text = _rgb(page.evaluate("getComputedStyle(document.body).color"))
        if scheme == "dark":
            assert sum(background) < 200, background
            assert sum(text) > 500, text
        else:
            assert sum(background) > 600, background
            assert sum(text) < 200, text
    finally:
        context.close()


# --- 6. a phone ---------------------------------------------------------------------------------

PHONE = {"width": 390, "height": 844}


def _page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_the_layout_works_on_a_phone(browser, server, user_state):
    context = new_context(browser, storage_state=user_state)
    try:
        page = context.new_page()
        page.set_viewport_size(PHONE)
        page.goto(f"{server}/")
        new_conversation(page)
        assert _page_width(page) <= PHONE["width"] + 1, "the page scrolls sideways"
        box = page.locator("#message-input")
        send_button = page.locator("#composer button.send")
        for element in (box, send_button):
            expect(element).to_be_visible()
            expect(element).to_be_in_viewport()
            bounds = element.bounding_box()
            assert bounds["x"] >= 0 and bounds["x"] + bounds["width"] <= PHONE["width"], bounds

        # Sent with the Send button, not the keyboard's Enter.
        box.click()
        box.fill("Hello from a phone, PUFFIN. Is the layout comfortable on a small screen?")
        send_button.click()
        expect(page.locator("#msg-1")).to_contain_text("PUFFIN")
        expect(box).to_have_value("")
        wait_replies(page, 1)
        expect(page.locator("#msg-2")).to_contain_text("PUFFIN")
        assert _page_width(page) <= PHONE["width"] + 1, "the page scrolls sideways"
        expect(send_button).to_be_in_viewport()
    finally:
        context.close()


def test_a_long_link_wraps_instead_of_widening_the_page_on_a_phone(chat):
    page = chat
    page.set_viewport_size(PHONE)
    link = "https://example.com/" + "a" * 120
    send(page, f"Here is the link, GANNET: {link}")
    wait_replies(page, 1)
    expect(page.locator("#msg-2")).to_contain_text("GANNET")
    width = _page_width(page)
    assert width <= PHONE["width"] + 1, f"the page is {width}px wide on a 390px screen"
