"""Clearing old tool results: when the window passes the threshold, big results of older turns
become placeholders in the window (the transcript keeps them), as a boundary of its own kind;
a summary is written only if that is not enough."""

from __future__ import annotations

import json

import pytest

from chat.models import Message
from compaction.clearing import CLEARED_PREFIX, clear_entry, plan
from compaction.entries import Entry
from compaction.models import Compaction
from providers.tokens import estimate_content
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for

BIG = "log line with details\n" * 150  # 3,300 characters: about 1,100 estimated tokens


def tool_turn(seq: int, call_id: str, result: str, *, pinned: bool = False) -> list[Entry]:
    reply = [
        {"type": "tool_use", "id": call_id, "name": "grep_logs", "input": {"q": "error"}},
        {"type": "tool_result", "tool_use_id": call_id, "content": result},
        {"type": "text", "text": f"Read the logs ({call_id})."},
    ]
    return [
        Entry(seq, "user", [{"type": "text", "text": f"check the logs {seq}"}], 5),
        Entry(seq + 1, "assistant", reply, estimate_content(reply), pinned),
    ]


def test_a_big_result_becomes_a_placeholder_naming_the_tool_and_how_to_read_it():
    _, reply = tool_turn(1, "t1", BIG)
    after = clear_entry(reply, 2000)
    result = after.content[1]
    assert result["tool_use_id"] == "t1" and result["content"].startswith(CLEARED_PREFIX)
    assert "grep_logs" in result["content"] and f"{len(BIG):,} characters" in result["content"]
    assert "read_messages(from_seq=2, to_seq=2)" in result["content"]
    assert after.content[0] == reply.content[0] and after.content[2] == reply.content[2]
    assert after.tokens < reply.tokens
    assert clear_entry(after, 2000) is after  # already cleared: nothing more to do
    _, small = tool_turn(1, "t2", "short")
    assert clear_entry(small, 2000) is small


def test_only_results_outside_the_kept_tail_and_not_pinned_are_planned():
    entries = (
        tool_turn(1, "a", BIG)
        + tool_turn(3, "b", BIG, pinned=True)
        + tool_turn(5, "c", BIG)
        + tool_turn(7, "d", BIG)
    )
    clearing = plan(entries, keep_tokens=1500, min_chars=2000)
    assert clearing.before_seq == 7  # the last turn is the kept tail
    assert clearing.count == 2  # a and c; b is pinned, d is in the tail
    assert clearing.saved > 2000
    assert plan(entries[:2], keep_tokens=1500, min_chars=2000) is None  # nothing to cut


# --- through a turn --------------------------------------------------------------------------


async def plant(conversation, turns: int):
    for entry in [e for i in range(turns) for e in tool_turn(1 + 2 * i, f"toolu_{i}", BIG)]:
        await Message.objects.acreate(
            conversation=conversation,
            seq=entry.seq,
            role=entry.role,
            content=entry.content,
            tokens=entry.tokens,
        )


async def turn(user, conversation, text: str, reply_seq: int) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": text}))
    frames = await receive_until(ws, shows(reply_seq, "complete"), timeout=15)
    await settle(conversation.pk)
    frames += await _drain(ws)
    await ws.disconnect()
    return frames


async def _drain(ws) -> list[str]:
    frames = []
    while not await ws.receive_nothing(timeout=0.3):
        frames.append(await ws.receive_from())
    return frames


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_old_results_are_cleared_before_anything_is_summarised(
    alice, conversation, fake_anthropic, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 6000  # threshold 3,600; tail 1,500
    await plant(conversation, 4)  # about 4,500 tokens of tool results
    # The server's count of the window (the fake's default is a token figure of 10).
    fake_anthropic.enqueue_reply(["Noted."], usage={"input_tokens": 4600, "output_tokens": 2})
    frames = await turn(alice, conversation, "anything new?", 10)

    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.kind, row.status, row.trigger) == ("clear", "committed", "auto")
    assert row.cleared_count >= 3 and row.post_tokens < row.pre_tokens
    assert row.first_kept_seq == 1 and row.summary == ""  # no summary: the cut did not move
    assert len(fake_anthropic.requests) == 1  # no summary request was made
    page = "".join(frames)
    assert f"Cleared {row.cleared_count} tool results" in page
    assert f"beforebegin:#msg-{row.cleared_before_seq}" in page

    fake_anthropic.enqueue_reply(["Sure."], usage={"input_tokens": 1500, "output_tokens": 2})
    await turn(alice, conversation, "and now?", 12)
    messages = fake_anthropic.requests[-1]["messages"]
    assert fake_anthropic.invalid == []
    assert "<summary>" not in json.dumps(messages)  # no summary pair at the head
    results = [
        b["content"] for m in messages for b in m["content"] if b.get("type") == "tool_result"
    ]
    cleared = [r for r in results if r.startswith(CLEARED_PREFIX)]
    assert len(cleared) == row.cleared_count and len(results) == 4
    # The transcript keeps every result whole.
    first = await Message.objects.aget(conversation=conversation, seq=2)
    assert first.content[1]["content"] == BIG


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_when_clearing_is_not_enough_a_summary_follows_and_keeps_them_cleared(
    alice, conversation, fake_anthropic, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 6000
    await plant(conversation, 4)
    fake_anthropic.enqueue_reply(["Noted."], usage={"input_tokens": 4600, "output_tokens": 2})
    await turn(alice, conversation, "anything new?", 10)
    clear = await Compaction.objects.aget(conversation=conversation)
    # Long messages without tools: clearing has nothing left to take, so a summary is written.
    words = " ".join(f"w{i}" for i in range(1800))
    fake_anthropic.enqueue_reply(["ok"], usage={"input_tokens": 5200, "output_tokens": 2})
    fake_anthropic.enqueue_reply(["<summary>## Primary request and intent\nLogs.</summary>"])
    await turn(alice, conversation, f"a long note: {words}", 12)
    rows = [r async for r in Compaction.objects.filter(conversation=conversation).order_by("id")]
    assert [r.kind for r in rows] == ["clear", "summary"]
    summary = rows[-1]
    assert summary.status == "committed"
    assert summary.cleared_before_seq == clear.cleared_before_seq
    assert fake_anthropic.invalid == []
