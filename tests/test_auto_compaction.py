"""Auto-compaction runs after the reply is saved, when the window crossed the threshold."""

from __future__ import annotations

import json

import pytest

from chat.models import Message
from compaction.models import Compaction
from support.waiting import settle
from tests.conftest import receive_until, socket_for

REPLY_DONE = lambda f: 'hx-swap-oob="outerHTML"' in f and "message assistant" in f  # noqa: E731

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


async def test_it_fires_after_the_reply_when_crossed_and_not_again_next_turn(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 1_000  # auto at 600, tail 250
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    history = []  # (turn, window tokens before the turn's compaction check, compactions after)
    for turn in range(1, 13):
        fake_llm.enqueue([f"Reply {turn}: " + "noted " * 25])
        await ws.send_to(
            text_data=json.dumps({"action": "send", "message": f"Turn {turn} " + "word " * 40})
        )
        await receive_until(ws, REPLY_DONE)
        await settle(conversation.pk)
        history.append((turn, await Compaction.objects.filter(conversation=conversation).acount()))
    await ws.disconnect()
    rows = [r async for r in Compaction.objects.filter(conversation=conversation).order_by("id")]
    assert rows, "the window crossed the threshold but nothing compacted"
    threshold = 600
    for row in rows:
        assert row.trigger == "auto" and row.status == "committed", row.error
        assert row.pre_tokens >= threshold > row.post_tokens
        # Written after the reply it followed was saved complete (off the critical path).
        reply = await Message.objects.filter(
            conversation=conversation, role="assistant", created_at__lt=row.created_at
        ).alatest("seq")
        assert reply.status == "complete" and reply.updated_at <= row.created_at
    # Never two compactions on consecutive turns: the window must grow back past the threshold.
    counts = [count for _, count in history]
    steps = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    assert all(step <= 1 for step in steps)
    fired_on = [i for i, step in enumerate(steps) if step]
    assert all(b - a > 1 for a, b in zip(fired_on, fired_on[1:], strict=False))


async def test_the_divider_and_meter_reach_the_browser_without_a_reload(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 600
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    frames = []
    for turn in range(6):
        await ws.send_to(
            text_data=json.dumps({"action": "send", "message": f"Turn {turn} " + "word " * 40})
        )
        frames += await receive_until(ws, REPLY_DONE)
        await settle(conversation.pk)
        while not await ws.receive_nothing(timeout=0.05):
            frames.append(await ws.receive_from())
    await ws.disconnect()
    divider = next(f for f in frames if "Compacted (auto)" in f)
    assert 'class="pre"' in divider and 'class="post"' in divider
    assert 'id="context"' in divider  # the meter is re-rendered with the divider
