"""Every message says when it was sent (the hour, the full date in its title, reachable by
keyboard) and has Copy for its Markdown as stored: on the page, and on a reply streamed live."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime

import pytest

from chat.models import Message
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

MARKDOWN = "Run `make test` **first**; then:\n\n- ship it\n- <script>alert(1)</script> & tell"


def send(text: str) -> str:
    return json.dumps({"action": "send", "message": text, "HEADERS": {"HX-Request": "true"}})


def bubble(page: str, seq: int) -> str:
    match = re.search(rf'<article id="msg-{seq}".*?</article>', page, re.S)
    assert match, f"no bubble #{seq}"
    return match.group(0)


def sent_at(bubble_html: str) -> tuple[str, str, str]:
    """(datetime, title, text) of a bubble's time, which is focusable."""
    match = re.search(
        r'<time class="sent-at" datetime="([^"]+)" title="([^"]+)" tabindex="0">([^<]+)</time>',
        bubble_html,
    )
    assert match, bubble_html[:600]
    return match.group(1), match.group(2), match.group(3)


def copied(bubble_html: str) -> str | None:
    """What the bubble's Copy puts on the clipboard (its source, unescaped), if it has Copy."""
    if ">Copy</button>" not in bubble_html:
        return None
    match = re.search(r'<template class="message-source">(.*?)</template>', bubble_html, re.S)
    assert match, "Copy without its source"
    return html.unescape(match.group(1))


def test_each_message_on_the_page_shows_when_it_was_sent_and_copies_its_markdown(
    client, alice, conversation
):
    when = datetime(2026, 3, 4, 9, 5, 30, tzinfo=UTC)
    Message.objects.create(
        conversation=conversation, seq=1, role="user", content=[{"type": "text", "text": "Hi *"}]
    )
    Message.objects.create(
        conversation=conversation,
        seq=2,
        role="assistant",
        content=[{"type": "text", "text": MARKDOWN}],
    )
    Message.objects.filter(conversation=conversation).update(created_at=when)
    client.force_login(alice)

    page = client.get(f"/conversations/{conversation.pk}/").content.decode()

    for seq in (1, 2):
        moment, title, shown = sent_at(bubble(page, seq))
        assert moment == "2026-03-04T09:05:30Z"
        assert title == "Wednesday 4 March 2026, 09:05 UTC"
        assert shown == "09:05"
    assert copied(bubble(page, 1)) == "Hi *"
    # The Markdown as stored, not the HTML shown; inert in the page (escaped, in a template).
    assert copied(bubble(page, 2)) == MARKDOWN
    assert "<script>alert(1)" not in page


async def test_a_reply_streamed_live_gets_its_time_and_then_its_copy(alice, conversation, fake_llm):
    fake_llm.enqueue(["Use ", "`pip install`", " **now**."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("How do I *install* it?"))
    frames = await receive_until(ws, shows(2, "complete"))
    await settle(conversation.pk)
    await ws.disconnect()

    streaming = next(f for f in frames if shows(2, "streaming")(f))
    user, reply = [m async for m in Message.objects.filter(conversation=conversation)]
    moment, _, _ = sent_at(bubble(streaming, 2))
    assert moment == reply.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert copied(bubble(streaming, 2)) is None  # no text to copy until it is done
    assert copied(bubble(streaming, 1)) == "How do I *install* it?"

    done = bubble(frames[-1], 2)
    assert sent_at(done)[0] == moment
    assert copied(done) == reply.text == "Use `pip install` **now**."
