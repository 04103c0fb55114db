"""Compaction never fails for size: a conversation of any length, or a message of any size,
compacts through summary requests that each fit the budget, and the reply follows.

Through the real turn engine over a websocket. On SQLite, every connection takes no more bound
values than a stock SQLite build (32,766; the build here allows more), so a query binding one
value per message fails here as it would there; PostgreSQL refuses more than 65,535 by itself.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.db.backends.signals import connection_created

from chat.models import Message
from compaction.models import Compaction
from compaction.prompt import SYSTEM_PROMPT
from providers.tokens import estimate_content, estimate_request
from support.messages_api import system_text
from support.waiting import settle
from tests.conftest import frame, receive_until, socket_for
from tests.transcripts import add_turns, text_block

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

STOCK_SQLITE_VARIABLES = 32_766
BRIEF = "<analysis>notes</analysis><summary>## Primary request and intent\nFolded.</summary>"


def _stock_limit(connection, **kwargs) -> None:
    if connection.vendor == "sqlite":
        connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, STOCK_SQLITE_VARIABLES)


@pytest.fixture(autouse=True)
def stock_sqlite():
    connection_created.connect(_stock_limit)
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            _stock_limit(connection)
    yield
    connection_created.disconnect(_stock_limit)


def reply_done(seq: int):
    pattern = re.compile(rf'<article id="msg-{seq}"[^>]*data-status="complete"')
    return lambda f: pattern.search(f) is not None


def summary_requests(calls) -> list:
    return [c for c in calls if c.system == SYSTEM_PROMPT]


def add_many(conversation, turns: int) -> None:
    """`turns` short turns, written in batches (one statement may bind only so many values)."""
    for start in range(0, turns, 2_000):
        add_turns(conversation, min(2_000, turns - start), words=0, start=2 * start + 1)


async def test_a_100k_message_conversation_compacts_then_replies(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 200_000
    await sync_to_async(add_many)(conversation, 50_000)  # 100,000 messages, ~900k tokens
    for _ in range(40):  # every answer is a usable brief; the reply takes the next one
        fake_llm.enqueue([BRIEF])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "And now?"}))
    await receive_until(ws, reply_done(100_002), timeout=60)
    await settle(conversation.pk, timeout=60)
    await ws.disconnect()
    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.status, row.summariser, row.trigger) == ("committed", "model", "auto"), row.error
    asked = summary_requests(fake_llm.calls)
    assert len(asked) >= 2, "a span this long is folded in parts"
    for call in asked:
        assert estimate_request(call.system, call.messages) + call.max_tokens <= 200_000
    reply = await Message.objects.aget(conversation=conversation, seq=100_002)
    assert reply.status == "complete" and reply.window_boundary_id == row.pk
    # The reply's request carried the brief and the kept tail, within the budget.
    chat = fake_llm.calls[-1]
    assert chat.system == "Be brief." and "Folded." in str(chat.messages[0])
    assert estimate_request(chat.system, chat.messages) <= 200_000


async def test_a_5_mb_message_is_summarised_through_requests_that_each_fit_the_budget(
    alice, conversation, fake_anthropic, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 4_000
    huge = text_block("START of the log\n" + "line of a very long log\n" * 220_000 + "END")
    await Message.objects.acreate(
        conversation=conversation, seq=1, role="user", content=huge, tokens=estimate_content(huge)
    )
    answer = text_block("That log is long.")
    await Message.objects.acreate(
        conversation=conversation,
        seq=2,
        role="assistant",
        content=answer,
        tokens=estimate_content(answer),
    )
    await sync_to_async(add_turns)(conversation, 3, words=20)
    for _ in range(12):
        fake_anthropic.enqueue_reply([BRIEF])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "What did it say?"}))
    await receive_until(ws, reply_done(10), timeout=90)
    await settle(conversation.pk, timeout=90)
    await ws.disconnect()
    assert fake_anthropic.invalid == []
    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.status, row.summariser) == ("committed", "model"), row.error
    asked = [r for r in fake_anthropic.requests if system_text(r) == SYSTEM_PROMPT]
    assert asked
    for request in asked:
        size = estimate_request(system_text(request), request["messages"])
        assert size + request["max_tokens"] <= 4_000
    folded = "\n".join(r["messages"][0]["content"][0]["text"] for r in asked)
    assert "START of the log" in folded and "long log\nEND" in folded  # its head and its tail
    assert "read_messages(from_seq=1, to_seq=1)" in folded
    for request in fake_anthropic.requests:  # and the reply's own request
        assert estimate_request(system_text(request), request["messages"]) <= 4_000


async def test_a_fold_in_parts_shows_its_progress_in_every_tab(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 4_000
    await sync_to_async(add_turns)(conversation, 12, words=150)  # ~12k tokens to fold
    for _ in range(20):
        fake_llm.enqueue([BRIEF])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: "Compacted (manual)" in f, timeout=20)
    await settle(conversation.pk)
    await ws.disconnect()
    count = len(summary_requests(fake_llm.calls))
    assert count >= 3
    shown = [
        int(m.group(1))
        for f in frames
        for m in [re.search(r"summarising part (\d+) of (\d+)", f)]
        if m and int(m.group(2)) == count and 'id="progress"' in f
    ]
    assert shown == list(range(1, count + 1))
