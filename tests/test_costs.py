"""What a conversation costs: usage in columns, priced from the table per model (cache reads at
0.1x, writes at 1.25x), shown in the context panel, on dividers and in the admin."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured

from chat.figures import load_spent
from chat.models import Conversation, Message
from config.env import env_prices
from providers.prices import cost, price_of
from providers.values import Usage
from render.meter import spend_shown
from support.fake_model import OMIT
from support.waiting import settle
from tests.conftest import receive_until, socket_for
from tests.transcripts import committed_boundary

pytestmark = pytest.mark.django_db

USAGE = Usage(
    input_tokens=1_000,
    output_tokens=500,
    cache_read_input_tokens=10_000,
    cache_creation_input_tokens=2_000,
)
SUMMARY_CALL = Usage(input_tokens=3_000, output_tokens=400)


def test_the_longest_prefix_prices_a_model_and_unknown_models_cost_unknown(settings):
    settings.MODEL_PRICES = {"claude": [1, 2], "claude-sonnet": [3, 15]}
    assert price_of("claude-sonnet-5") == (3, 15)
    assert price_of("claude-other") == (1, 2)
    assert price_of("demo") is None and cost(USAGE, "demo") is None
    # 1,000 plain + 10,000 read at 0.1 + 2,000 written at 1.25 = 4,500 input-equivalent.
    assert cost(USAGE, "claude-sonnet-5") == pytest.approx(4_500 * 3e-6 + 500 * 15e-6)
    assert cost(None, "claude-sonnet-5") is None


@pytest.mark.parametrize("raw", ["nope", '{"claude": 3}', '{"claude": [1, -2]}', '{"c": [1]}'])
def test_a_malformed_price_table_stops_start_up(monkeypatch, raw):
    monkeypatch.setenv("MODEL_PRICES", raw)
    with pytest.raises(ImproperlyConfigured, match="MODEL_PRICES"):
        env_prices("MODEL_PRICES", {})


def test_usage_is_kept_in_columns_and_unknown_stays_unknown(conversation):
    reply = Message.objects.create(
        conversation=conversation, seq=2, role="assistant", usage=USAGE, content=[]
    )
    stored = Message.objects.values(
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"
    ).get(pk=reply.pk)
    assert stored == {
        "input_tokens": 1_000,
        "output_tokens": 500,
        "cache_read_tokens": 10_000,
        "cache_creation_tokens": 2_000,
    }
    assert Message.objects.get(pk=reply.pk).usage == USAGE
    unknown = Message.objects.create(conversation=conversation, seq=4, role="assistant", content=[])
    assert unknown.input_tokens is None and unknown.usage is None


def test_the_panel_shows_the_last_turn_and_the_conversation_in_all(client, alice, settings):
    settings.MODEL_PRICES = {"claude": [3, 15]}
    conversation = Conversation.objects.create(owner=alice, model="claude-x")
    for seq in (1, 3):
        text = [{"type": "text", "text": f"question {seq}"}]
        Message.objects.create(conversation=conversation, seq=seq, role="user", content=text)
    for seq in (2, 4):
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            role="assistant",
            usage=USAGE,
            model="claude-x-1",
            content=[{"type": "text", "text": f"answer {seq}"}],
        )
        Conversation.objects.add_spent(conversation.pk, USAGE)  # as the turn's close does
    Conversation.objects.add_spent(conversation.pk, SUMMARY_CALL)
    conversation.refresh_from_db()
    committed_boundary(
        conversation,
        3,
        trigger="auto",
        summary="Brief.",
        pre_tokens=9_000,
        post_tokens=2_500,
        usage=SUMMARY_CALL,
    )
    spent = load_spent(conversation)
    one_turn = 4_500 * 3e-6 + 500 * 15e-6
    assert spent.last.dollars == pytest.approx(one_turn)
    assert spent.last.cached_share == pytest.approx(10_000 / 13_000)
    assert spent.total.dollars == pytest.approx(2 * one_turn + 3_000 * 3e-6 + 400 * 15e-6)
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Last turn: $0.0210 · 77% of input from cache" in page
    assert "This conversation: $0.0570" in page
    # Each reply says what its turn was billed.
    assert page.count('<span class="turn-spend"') == 2
    assert "$0.0210 · 77% of input from cache</span>" in page
    # The divider: what the compaction saves every turn, and what its summary call cost.
    assert "saves 6,500 tokens a turn · summary cost $0.0150" in page


def test_a_model_with_no_price_says_its_cost_is_unknown(client, alice, settings):
    settings.MODEL_PRICES = {"claude": [3, 15]}
    conversation = Conversation.objects.create(owner=alice, model="local-llama")
    text = [{"type": "text", "text": "question"}]
    Message.objects.create(conversation=conversation, seq=1, role="user", content=text)
    Message.objects.create(
        conversation=conversation,
        seq=2,
        role="assistant",
        usage=USAGE,
        model="local-llama",
        content=[{"type": "text", "text": "answer"}],
    )
    Conversation.objects.add_spent(conversation.pk, USAGE)
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    # Where a cost would be, in the panel and on the reply: said to be unknown, never $0.
    assert "Last turn: cost unknown · 77% of input from cache" in page
    assert "This conversation: cost unknown" in page
    assert page.count('<span class="turn-spend"') == 1 and "$0" not in page


def test_the_admin_lists_what_each_conversation_and_each_user_cost(
    admin_client, alice, bob, settings
):
    settings.MODEL_PRICES = {"claude": [3, 15], "claude-haiku": [1, 5]}
    conversation = Conversation.objects.create(owner=alice, model="claude-x", title="Costly")
    Conversation.objects.add_spent(conversation.pk, USAGE)  # a reply
    Conversation.objects.add_spent(conversation.pk, SUMMARY_CALL)
    cheaper = Conversation.objects.create(owner=alice, model="claude-haiku-4", title="Cheap")
    Conversation.objects.add_spent(cheaper.pk, Usage(input_tokens=1_000, output_tokens=200))
    Conversation.objects.create(owner=alice, model="demo", title="Offline")
    Conversation.objects.create(owner=bob, model="demo", title="Offline too")
    page = admin_client.get("/admin/chat/conversation/").content.decode()
    assert "0.0360" in page  # 0.021 for the reply, 0.015 for the summary
    assert "0.0020" in page  # each priced for its own model
    assert f'href="?owner__id__exact={alice.pk}"' in page  # narrowed to one user
    users = admin_client.get("/admin/auth/user/").content.decode()
    assert '<td class="field-cost">0.0380</td>' in users  # alice: both priced conversations
    assert '<td class="field-cost">-</td>' in users  # bob: only the unpriced demo


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_the_figures_after_each_turn_show_its_cost_or_the_last_billed_one(
    alice, fake_llm, settings
):
    """The reply just closed is the latest billed turn, so its figures need no query for it; a
    turn the server reported no usage for shows the one before, as the page does."""
    settings.MODEL_PRICES = {"claude": [3, 15]}
    conversation = await Conversation.objects.acreate(owner=alice, model="claude-x")
    fake_llm.enqueue(["Billed."], USAGE)
    fake_llm.enqueue(["Not billed."], OMIT)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    shown = []
    for text in ("one", "two"):
        await ws.send_to(text_data=json.dumps({"action": "send", "message": text}))
        frames = await receive_until(ws, lambda f: 'id="context-figures"' in f)
        shown.append(frames[-1].split('class="spend-last">', 1)[1].split("<", 1)[0])
        await settle(conversation.pk)
    await ws.disconnect()
    assert shown == ["Last turn: $0.0210 · 77% of input from cache"] * 2
    spent = await sync_to_async(load_spent)(await Conversation.objects.aget(pk=conversation.pk))
    assert spend_shown(spent.last) == "$0.0210 · 77% of input from cache"
