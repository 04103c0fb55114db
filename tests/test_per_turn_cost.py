"""Per-turn work must not grow with the length of the conversation: count queries, not time."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat import actions, render, turns
from compaction import service
from compaction.models import Compaction
from tests.transcripts import add_turns

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fake_llm", "channel_layer")]


def one_turn_queries(user, conversation) -> int:
    """The database work of one whole turn: what the consumer's send does, then the real turn.

    `async_to_sync` from this thread runs the turn's database calls back on this thread, so the
    capture sees every query `chat.turns.run_turn` makes.
    """
    with CaptureQueriesContext(connection) as queries:
        message, reply = actions.append_user_message(
            user, conversation.pk, "One more question?", model="fake-model"
        )
        render.appended_message(message)
        async_to_sync(turns.run_turn)(conversation.pk, reply)
    reply.refresh_from_db()
    assert (reply.seq, reply.status) == (message.seq + 1, "complete")
    return len(queries)


def compacted_conversation(alice, conversation_model, turns: int):
    conversation = conversation_model.objects.create(owner=alice, model="fake-model")
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


def test_a_turn_costs_the_same_queries_at_turn_10_and_turn_300(alice, settings):
    from chat.models import Conversation

    settings.CONTEXT_BUDGET_TOKENS = 50_000
    short = compacted_conversation(alice, Conversation, 10)
    long = compacted_conversation(alice, Conversation, 300)
    counts = one_turn_queries(alice, short), one_turn_queries(alice, long)
    assert counts[0] == counts[1]
    assert counts[0] > 15  # the whole turn was counted, not just the append


def test_the_window_loads_only_messages_after_the_boundary(alice, settings):
    from chat.models import Conversation

    long = compacted_conversation(alice, Conversation, 300)
    state = service.load_window(long)
    assert [e.seq for e in state.entries] == list(range(595, 601))


def test_the_chat_page_renders_a_fixed_slice_of_a_long_history(alice, client, settings):
    from chat.models import Conversation

    settings.PAGE_MESSAGES = 20
    short = compacted_conversation(alice, Conversation, 15)
    long = compacted_conversation(alice, Conversation, 300)
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
