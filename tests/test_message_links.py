"""The other conversation an answer names is a link to its page, made by the app from the id
its recall tools found: only the user's own conversations, never a link the model wrote to one
they did not name. Through the real consumer, with the real SDK against the fake server and with
the offline demo."""

from __future__ import annotations

import re

import pytest

from chat.models import Conversation, Message
from providers import registry
from providers.demo import DemoClient
from render.links import named_conversations
from tests.test_tools import plant, turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


def links(page: str) -> dict[str, str]:
    """Every link in a page: its text (tags inside dropped) → its address."""
    found = re.findall(r'<a href="([^"]*)"[^>]*>(.*?)</a>', page, re.S)
    return {re.sub(r"<[^>]+>", "", text): href.replace("&amp;", "&") for href, text in found}


def bubble(page: str, seq: int) -> str:
    return re.search(rf'<article id="msg-{seq}".*?</article>', page, re.S).group(0)


async def test_an_answer_naming_a_conversation_its_search_found_links_to_it(
    async_client, alice, bob, conversation, fake_anthropic
):
    trip = await Conversation.objects.acreate(owner=alice, model="fake-model", title="Trip")
    await plant(trip, "The ferry to Skye leaves at 07:40.", "Noted.")
    theirs = await Conversation.objects.acreate(owner=bob, model="fake-model", title="Bob's")
    fake_anthropic.enqueue_tool_calls(
        ["Let me look."],
        [("toolu_1", "search_history", {"query": "ferry", "scope": "all"})],
    )
    fake_anthropic.enqueue_reply(
        [
            f"In conversation {trip.pk} “Trip” you said it leaves at 07:40 ",
            f"([see]( /conversations/{trip.pk}/?at=1#msg-1 )). ",
            f"Not conversation {theirs.pk} “Bob's”, nor [this](/conversations/{theirs.pk}/), ",
            f'nor <a href="/conversations/{trip.pk}/">raw HTML</a>, ',
            f"nor `conversation {trip.pk} “Trip”` in code.",
        ]
    )
    await turn(alice, conversation, "When does my ferry leave?", 2)
    await async_client.aforce_login(alice)

    page = (await async_client.get(f"/conversations/{conversation.pk}/")).content.decode()

    shown = links(bubble(page, 2))
    trip_page = f"/conversations/{trip.pk}/"
    # The name in the answer, and the tool's result naming the same conversation.
    assert shown[f"conversation {trip.pk} “Trip”"] == trip_page
    assert shown["see"] == f"{trip_page}?at=1#msg-1"  # the model's link, made again by the app
    # Another user's conversation the tools never named: plain text, its link dropped.
    assert f"/conversations/{theirs.pk}/" not in shown.values()
    assert f"Not conversation {theirs.pk} “Bob's”, nor this, nor" in bubble(page, 2)
    assert "raw HTML" not in shown and "&lt;a href=" in bubble(page, 2)
    assert f"<code>conversation {trip.pk} “Trip”</code>" in bubble(page, 2)


async def test_the_demos_answer_from_another_conversation_links_to_its_message(
    async_client, alice, conversation
):
    registry.register(DemoClient())
    await plant(conversation, "The restart script is restart.sh.", "Noted.")
    home = await Conversation.objects.acreate(owner=alice, model="demo", title="Home")
    await plant(home, "My cat is called Miso and she sleeps on the router.", "Noted.")

    await turn(alice, conversation, "What is my cat called?", 4)
    await async_client.aforce_login(alice)
    page = (await async_client.get(f"/conversations/{conversation.pk}/")).content.decode()

    shown = links(bubble(page, 4))
    assert shown[f"conversation {home.pk} “Home”, message #1"] == (
        f"/conversations/{home.pk}/?at=1#msg-1"
    )
    # The search's result in the tool block names it too, as a link to its page.
    assert shown[f"conversation {home.pk} “Home”"] == f"/conversations/{home.pk}/"


def test_only_the_recall_tools_results_name_conversations():
    blocks = [
        {"type": "tool_use", "id": "a", "name": "search_history", "input": {}},
        {"type": "tool_use", "id": "b", "name": "read_messages", "input": {}},
        {"type": "tool_use", "id": "c", "name": "read_messages", "input": {}},
        {"type": "tool_use", "id": "d", "name": "fetch_page", "input": {}},  # an MCP tool
        {"type": "tool_result", "tool_use_id": "a", "content": "#3 · conversation 7 “A” · /x"},
        {
            "type": "tool_result",
            "tool_use_id": "b",
            "content": [{"type": "text", "text": ("Messages 1–2 of conversation 8:")}],
        },  # fmt: skip
        {
            "type": "tool_result",
            "tool_use_id": "c",
            "is_error": True,
            "content": "There is no conversation 9 of this user's to read.",
        },
        {"type": "tool_result", "tool_use_id": "d", "content": "conversation 10 “Evil”"},
        {"type": "text", "text": "conversation 11 “Said by the model”"},
    ]
    assert named_conversations(blocks) == {7, 8}
    assert named_conversations([]) == frozenset()


def test_a_message_with_no_recall_keeps_links_to_pages_out(conversation):
    reply = Message(
        conversation=conversation,
        seq=2,
        role="assistant",
        content=[{"type": "text", "text": f"See [it](/conversations/{conversation.pk}/)."}],
    )
    from render.bubbles import text_html

    assert "<a " not in text_html(reply) and "See it." in text_html(reply)
