"""Provider faults through the real SDK and a local SSE server: nothing the user sent is lost."""

from __future__ import annotations

import json

import pytest

from chat.models import Message
from support.messages_api import system_text
from support.servers import free_port
from support.waiting import settle
from tests.conftest import receive_until, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


async def run_turn(user, conversation, text: str) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": text}))
    frames = await receive_until(
        ws, lambda f: 'id="msg-2"' in f and 'hx-swap-oob="outerHTML"' in f, timeout=15
    )
    await settle(conversation.pk)
    await ws.disconnect()
    return frames


async def saved(conversation) -> tuple[Message, Message]:
    user, reply = [m async for m in Message.objects.filter(conversation=conversation)]
    return user, reply


async def test_a_streamed_reply_is_saved_with_the_api_usage(alice, conversation, fake_anthropic):
    # Spread out, so the first delta goes out before the stream ends (sent all at once, the
    # reply can end before the relay's first frame, and the final frame carries it all).
    fake_anthropic.enqueue_reply(
        ["Stream", "ed ", "reply"], usage={"input_tokens": 120, "output_tokens": 7}, delay=0.05
    )
    frames = await run_turn(alice, conversation, "hello over SSE")
    assert any("beforeend:#msg-2-text" in f for f in frames)  # streamed, coalesced
    assert "Streamed reply" in frames[-1]
    user, reply = await saved(conversation)
    assert (reply.status, reply.text) == ("complete", "Streamed reply")
    assert reply.usage.input_tokens == 120 and reply.usage.output_tokens == 7
    sent = fake_anthropic.requests[0]
    assert system_text(sent) == "Be brief."
    # The latest message is the moving prompt-cache breakpoint.
    text = {"type": "text", "text": "hello over SSE", "cache_control": {"type": "ephemeral"}}
    assert sent["messages"] == [{"role": "user", "content": [text]}]


async def test_an_overloaded_529_keeps_the_message_and_says_so(alice, conversation, fake_anthropic):
    fake_anthropic.enqueue_status(529, "overloaded_error", "Overloaded")
    frames = await run_turn(alice, conversation, "are you there?")
    user, reply = await saved(conversation)
    assert user.text == "are you there?"
    assert reply.status == "error" and "overloaded" in reply.error.lower()
    assert "overloaded" in frames[-1].lower()


async def test_an_error_event_mid_stream_keeps_the_partial_text(
    alice, conversation, fake_anthropic
):
    fake_anthropic.enqueue_stream_error(["Partial ", "answer"], error_type="overloaded_error")
    await run_turn(alice, conversation, "tell me")
    user, reply = await saved(conversation)
    assert user.text == "tell me"
    assert reply.status == "error"
    assert reply.text == "Partial answer"
    assert reply.error


async def test_a_dropped_connection_keeps_the_partial_text(alice, conversation, fake_anthropic):
    fake_anthropic.enqueue_drop(["Cut ", "off"])
    await run_turn(alice, conversation, "tell me")
    user, reply = await saved(conversation)
    assert reply.status == "error"
    assert reply.text.startswith("Cut")
    assert "connection" in reply.error.lower()


async def test_an_unreachable_server_is_a_readable_error(alice, conversation, settings):
    port = free_port()  # nothing listens there
    settings.LLM_PROVIDER = "anthropic"
    settings.ANTHROPIC_BASE_URL = f"http://127.0.0.1:{port}"
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.LLM_MAX_RETRIES = 0
    await run_turn(alice, conversation, "anyone?")
    user, reply = await saved(conversation)
    assert user.text == "anyone?"
    assert reply.status == "error" and f"127.0.0.1:{port}" in reply.error
