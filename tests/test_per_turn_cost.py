"""Per-turn work must not grow with the length of the conversation: count queries, not time."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import Conversation
from chat.window_loading import load_window
from compaction.models import Compaction
from support.queries import all_queries
from support.waiting import settle
from tests.conftest import receive_until, socket_for
from tests.transcripts import add_turns

FINISHED = re.compile(r'<article id="msg-\d+" class="message assistant[^>]*data-status="complete"')

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


@pytest.fixture(autouse=True)
def no_sweep(fresh_runtime):
    """The periodic heartbeat and sweep are process-wide work, not a turn's: keep them out of
    the count (they run a fixed few queries every TURN_HEARTBEAT_SECONDS, whatever the load)."""
    fresh_runtime.background = False


def compacted_conversation(alice, turns: int) -> Conversation:
    conversation = Conversation.objects.create(owner=alice, model="fake-model")
    add_turns(conversation, turns)
    last_seq = turns * 2
    # A boundary keeps the last few turns, as auto-compaction would have left it.
    Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=last_seq - 5,
        summary="## Primary request and intent\nA long conversation.",
        pre_tokens=10_000,
        post_tokens=500,
    )
    return conversation


async def one_turn(user, conversation, fake_llm):
    """Every query of one whole plain turn, from the send frame to the last broadcast, and how
    many of them ran before the provider was asked."""
    at_request = []
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    with all_queries() as seen:
        fake_llm.on_request = lambda request: at_request.append(len(seen))
        await ws.send_to(text_data=json.dumps({"action": "send", "message": "One more?"}))
        await receive_until(ws, FINISHED.search)
        await settle(conversation.pk)
    fake_llm.on_request = None
    await ws.disconnect()
    return list(seen), at_request[0]


async def test_a_plain_turn_costs_the_same_few_queries_at_turn_10_and_turn_1000(
    alice, settings, fake_llm
):
    settings.CONTEXT_BUDGET_TOKENS = 50_000
    short = await sync_to_async(compacted_conversation)(alice, 10)
    long = await sync_to_async(compacted_conversation)(alice, 1000)
    short_queries, _ = await one_turn(alice, short, fake_llm)
    long_queries, _ = await one_turn(alice, long, fake_llm)
    assert len(short_queries) == len(long_queries) <= 12, [q.sql for q in long_queries]


async def test_the_send_reaches_the_provider_after_four_queries_in_one_transaction(
    alice, settings, fake_llm
):
    """The send's count against its limit, the conversation's lock, the read the decision needs
    and the insert; on PostgreSQL also the lock that orders the user's replies at once."""
    settings.CONTEXT_BUDGET_TOKENS = 50_000
    long = await sync_to_async(compacted_conversation)(alice, 1000)
    queries, before_request = await one_turn(alice, long, fake_llm)
    critical = queries[:before_request]
    assert len(critical) <= 4 + (connection.vendor == "postgresql"), [q.sql for q in critical]
    assert all(q.in_transaction for q in critical)
    assert len({q.connection for q in critical}) == 1


def test_the_window_loads_only_messages_after_the_boundary(alice):
    long = compacted_conversation(alice, 300)
    state = load_window(long)
    assert [e.seq for e in state.entries] == list(range(595, 601))


def test_the_chat_page_renders_a_fixed_slice_of_a_long_history(alice, client, settings):
    settings.PAGE_MESSAGES = 20
    short = compacted_conversation(alice, 15)
    long = compacted_conversation(alice, 300)
    client.force_login(alice)
    counts = []
    for conversation in (short, long):
        with CaptureQueriesContext(connection) as queries:
            html = client.get(f"/conversations/{conversation.pk}/").content.decode()
        counts.append(len(queries))
        assert html.count('class="message ') == 20
        assert "Load older messages" in html
    assert counts[0] == counts[1]
    older = client.get(f"/conversations/{long.pk}/messages/?before=581").content.decode()
    assert older.count('class="message ') == 20 and 'id="msg-580"' in older


async def test_the_send_moves_the_conversation_up_its_list_and_the_close_leaves_it(
    alice, settings, fake_llm
):
    # updated_at orders the owner's list (and its indexes): the send moves it, the reply's close
    # (a write every turn) does not move it again.
    settings.CONTEXT_BUDGET_TOKENS = 50_000
    conversation = await sync_to_async(compacted_conversation)(alice, 10)
    before = (await Conversation.objects.aget(pk=conversation.pk)).updated_at
    await one_turn(alice, conversation, fake_llm)
    moved = (await Conversation.objects.aget(pk=conversation.pk)).updated_at
    message, reply = [m async for m in conversation.messages.order_by("-seq")[:2]][::-1]
    assert reply.status == "complete" and message.role == "user"
    assert before < moved <= message.created_at < reply.updated_at
