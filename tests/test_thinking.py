"""Extended thinking through the real consumer, the real SDK and the fake server: a conversation
on a model declared to think asks for it, its thinking streams into a folded block, is stored with
its signature, goes back unchanged with its tool results (the fake refuses it otherwise), and is
left out of later turns' requests; the meter counts it while it is in the window."""

from __future__ import annotations

import json

import pytest

from chat.models import Message
from support.messages_api import signature_of
from support.scripts import Script, thinking_reply
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

THOUGHT = ["The user greets me. ", "I should <greet> back & briefly."]
SIGNED = {
    "type": "thinking",
    "thinking": "".join(THOUGHT),
    "signature": signature_of("".join(THOUGHT)),
}


@pytest.fixture
def thinker(settings, conversation):
    """alice's conversation, on a model declared to think, with thinking on (2,048 tokens)."""
    settings.CHAT_MODELS = [
        {"id": "fake-model", "label": "Fake", "context": None, "thinking": True}
    ]
    settings.CHAT_MODEL = "fake-model"
    conversation.thinking_budget = 2048
    conversation.save()
    return conversation


async def turn(user, conversation, text: str, reply_seq: int) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": text}))
    frames = await receive_until(ws, shows(reply_seq, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()
    return frames


async def test_thinking_streams_into_its_folded_block_and_is_stored_signed(
    alice, thinker, fake_anthropic
):
    fake_anthropic.push(thinking_reply(THOUGHT, ["Hello", " there."]))
    frames = await turn(alice, thinker, "Hi!", 2)

    (request,) = fake_anthropic.requests
    assert request["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert request["max_tokens"] > 2048 and "temperature" not in request
    streamed = "".join(frames)
    # Its own stream, into the reply's thinking block, escaped as any model output.
    assert 'hx-swap-oob="beforeend:#msg-2-thinking"' in streamed
    assert "I should &lt;greet&gt; back &amp; briefly." in streamed
    reply = await Message.objects.aget(conversation=thinker, seq=2)
    assert reply.content == [SIGNED, {"type": "text", "text": "Hello there."}]
    final = frames[-1]
    assert '<details class="thinking"><summary>Thinking</summary>' in final
    assert final.index("thinking-text") < final.index("Hello there.")  # above the reply
    assert SIGNED["signature"] not in final and "<greet>" not in final
    assert fake_anthropic.invalid == []


async def test_a_tool_step_sends_its_thinking_back_unchanged_and_a_later_turn_leaves_it_out(
    alice, thinker, fake_anthropic
):
    call = ("toolu_1", "search_history", {"query": "greeting"})
    fake_anthropic.push(thinking_reply(THOUGHT, ["Looking."], calls=[call]))
    fake_anthropic.push(thinking_reply(["Found nothing."], ["Hello."]))
    await turn(alice, thinker, "Hi!", 2)

    assert fake_anthropic.invalid == []  # the fake checked the signature and the order
    first, second = fake_anthropic.requests
    assistant, results = second["messages"][-2:]
    assert assistant["content"][0] == SIGNED  # first, whole, unchanged
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    assert results["content"][0]["tool_use_id"] == "toolu_1"
    assert second["thinking"] == first["thinking"]
    reply = await Message.objects.aget(conversation=thinker, seq=2)
    kinds = [b["type"] for b in reply.content]
    assert kinds == ["thinking", "text", "tool_use", "tool_result", "thinking", "text"]

    fake_anthropic.enqueue_reply(["Bye."])
    await turn(alice, thinker, "Thanks!", 4)
    third = fake_anthropic.requests[-1]
    sent = [b["type"] for m in third["messages"] for b in m["content"]]
    assert "thinking" not in sent  # the earlier turn's thinking: the API strips it anyway
    assert sent.count("tool_use") == 1 and sent.count("tool_result") == 1
    assert fake_anthropic.invalid == []


async def test_redacted_thinking_goes_back_whole_with_its_tool_results_and_shows_nothing_of_it(
    alice, thinker, fake_anthropic
):
    # Encrypted reasoning (the safety systems redacted it): opaque data to carry back as it came.
    call = ("toolu_1", "search_history", {"query": "greeting"})
    fake_anthropic.push(thinking_reply(THOUGHT, ["Looking."], calls=[call], redacted="EnC0ded=="))
    fake_anthropic.push(thinking_reply(["Found nothing."], ["Hello."]))
    frames = await turn(alice, thinker, "Hi!", 2)

    assert fake_anthropic.invalid == []
    assistant = fake_anthropic.requests[1]["messages"][-2]
    assert assistant["content"][:2] == [{"type": "redacted_thinking", "data": "EnC0ded=="}, SIGNED]
    reply = await Message.objects.aget(conversation=thinker, seq=2)
    assert reply.content[0] == {"type": "redacted_thinking", "data": "EnC0ded=="}
    final = frames[-1]
    assert "EnC0ded==" not in final and "redacted" in final.lower()


async def test_the_meter_counts_thinking_while_it_is_in_the_window(alice, thinker, fake_anthropic):
    long_thought = ["step " * 400]  # some 500 tokens of thinking
    fake_anthropic.push(thinking_reply(long_thought, ["Short."]))
    await turn(alice, thinker, "Hi!", 2)
    reply = await Message.objects.aget(conversation=thinker, seq=2)
    # Billed as output, but no later request carries an ended turn's thinking: neither the
    # reply's stored estimate nor the window after it counts the reasoning.
    assert reply.tokens < len("step " * 400) // 8
    assert reply.output_tokens == 1 + len(long_thought)
    assert reply.window_tokens < reply.input_tokens + reply.output_tokens


async def test_a_conversation_without_thinking_asks_for_none(alice, thinker, fake_anthropic):
    thinker.thinking_budget = None
    await thinker.asave()
    fake_anthropic.enqueue_reply(["Hi."])
    await turn(alice, thinker, "Hi!", 2)
    assert "thinking" not in fake_anthropic.requests[0]


async def test_a_whole_json_answer_keeps_its_thinking(alice, thinker, fake_anthropic):
    # A gateway that answers the streaming request with one whole message (LiteLLM does).
    fake_anthropic.push(Script("json", ["Hello."], thinking=THOUGHT))
    frames = await turn(alice, thinker, "Hi!", 2)
    reply = await Message.objects.aget(conversation=thinker, seq=2)
    assert reply.content == [SIGNED, {"type": "text", "text": "Hello."}]
    assert '<details class="thinking">' in frames[-1]


async def test_a_reply_cut_off_keeps_the_thinking_it_showed(alice, thinker, fake_anthropic):
    fake_anthropic.push(Script("drop", ["Cut ", "off"], thinking=THOUGHT))
    ws = socket_for(alice, thinker.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "Hi!"}))
    frames = await receive_until(ws, shows(2, "error"), timeout=15)
    await settle(thinker.pk)
    await ws.disconnect()
    reply = await Message.objects.aget(conversation=thinker, seq=2)
    # Unsigned (the API never signed it): shown, and never sent, as no later turn sends thinking.
    thinking = {"type": "thinking", "thinking": SIGNED["thinking"], "signature": ""}
    assert reply.content == [thinking, {"type": "text", "text": "Cut off"}]
    assert '<details class="thinking">' in frames[-1]
