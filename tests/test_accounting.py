"""Accounting that servers cannot fool, and no request over the budget, ever."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from chat.models import Message
from chat.window_loading import load_window
from compaction.models import Compaction
from providers.tokens import estimate_request
from support.fake_model import OMIT
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for
from tests.transcripts import add_turns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

REPLY_DONE = lambda f: 'hx-swap-oob="outerHTML"' in f and "message assistant" in f  # noqa: E731


def send(text: str) -> str:
    return json.dumps({"action": "send", "message": text})


async def talk(user, conversation, messages: list[str]) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    frames = []
    for text in messages:
        await ws.send_to(text_data=send(text))
        frames += await receive_until(ws, REPLY_DONE)
        await settle(conversation.pk)
    await ws.disconnect()
    return frames


async def test_a_server_reporting_zero_usage_falls_back_to_the_estimate_and_compaction_fires(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 1_000  # auto at 600
    for _ in range(30):  # summary requests take from the same queue (and fall back to rules)
        fake_llm.enqueue(["Noted: " + "fact " * 25], usage={"input_tokens": 0, "output_tokens": 0})
    await talk(alice, conversation, [f"Turn {n} " + "word " * 40 for n in range(12)])
    replies = [m async for m in Message.objects.filter(conversation=conversation, role="assistant")]
    assert [(r.status, r.usage) for r in replies] == [("complete", None)] * len(replies)
    # Zero is "unknown", never a figure: the window was estimated, crossed 600, and compacted.
    rows = [c async for c in Compaction.objects.filter(conversation=conversation)]
    assert rows and all(c.status == "committed" and c.pre_tokens >= 600 for c in rows)
    state = await sync_to_async(load_window)(conversation)
    assert state.anchor is None and state.tokens > 100


async def test_a_reply_without_any_usage_still_completes(alice, conversation, fake_llm):
    fake_llm.enqueue(["All ", "of ", "it."], usage=OMIT)
    await talk(alice, conversation, ["hello"])
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert (reply.status, reply.text, reply.usage, reply.error) == (
        "complete",
        "All of it.",
        None,
        "",
    )
    assert reply.tokens > 0  # the estimate stands in for the missing figure


async def test_a_stream_without_usage_from_a_real_sdk_request_completes(
    alice, conversation, fake_anthropic
):
    fake_anthropic.enqueue_without_usage(["Every ", "word ", "arrived."])
    frames = await talk(alice, conversation, ["hello"])
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert (reply.status, reply.text, reply.usage) == ("complete", "Every word arrived.", None)
    assert "Every word arrived." in frames[-1]


async def test_a_gateway_answering_a_stream_with_one_json_message_is_answered(
    alice, conversation, fake_anthropic
):
    fake_anthropic.enqueue_json(["Whole ", "message."], usage={"input_tokens": 30})
    await talk(alice, conversation, ["hello"])
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert (reply.status, reply.text) == ("complete", "Whole message.")
    assert reply.usage.input_tokens == 30


async def test_a_message_too_big_for_any_window_is_refused_with_both_sizes(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 2_000
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("x" * 20_000))
    notice = await receive_until(ws, lambda f: 'id="notice"' in f)
    assert "budget of 2,000" in notice[-1] and "6,671 tokens" in notice[-1]
    assert await Message.objects.filter(conversation=conversation).acount() == 0
    assert fake_llm.calls == []
    await ws.disconnect()


async def test_a_request_that_cannot_fit_even_after_compacting_is_refused_not_sent(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 2_000  # reserve 200
    await sync_to_async(add_turns)(conversation, 2)
    # The summary alone fills most of the budget and nothing is left to fold away.
    await Compaction.objects.acreate(
        conversation=conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=5,
        summary="brief " * 700,
        pre_tokens=3_000,
        post_tokens=1_400,
    )
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("question " * 250))
    frames = await receive_until(ws, shows(6, "error"))
    await settle(conversation.pk)
    reply = await Message.objects.aget(conversation=conversation, seq=6)
    assert reply.status == "error" and "budget of 2,000" in reply.error
    assert "Not sent" in frames[-1]
    assert fake_llm.calls == []  # no request over the budget ever leaves
    # The message is kept, and the conversation goes on.
    assert (await Message.objects.aget(conversation=conversation, seq=5)).text.startswith(
        "question"
    )
    await ws.disconnect()


async def test_no_request_sent_is_ever_over_the_budget(alice, conversation, fake_llm, settings):
    settings.CONTEXT_BUDGET_TOKENS = 1_500
    sizes = [40, 300, 20, 500, 60, 400, 10, 350, 80, 450, 30, 380]
    for _ in sizes:
        fake_llm.enqueue(["Reply " + "text " * 60])
    await talk(alice, conversation, [f"Ask {n}: " + "word " * n for n in sizes])
    chats = [c for c in fake_llm.calls if "running brief" not in c.system]
    assert len(chats) == len(sizes)
    for call in chats:
        assert estimate_request(call.system, call.messages) + call.max_tokens <= 1_500
    assert await Compaction.objects.filter(conversation=conversation, status="committed").aexists()
