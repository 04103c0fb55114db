"""A home that starts a chat: `/` is an empty composer with the model picker; sending from it
creates the conversation on the model picked and hands the message to the new conversation's
page, which sends it over its socket once; a message that cannot be sent is refused with the
reason, its text kept, and nothing created."""

from __future__ import annotations

import re

import pytest

from chat.models import Conversation
from tests.test_models_picker import two_models  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

COMPOSER = re.compile(r'<form id="composer"[^>]*>')
TEXTAREA = re.compile(r'<textarea name="message" id="message-input"[^>]*>([^<]*)</textarea>')


def test_home_is_an_empty_composer_even_with_conversations(client, alice, conversation):
    client.force_login(alice)
    response = client.get("/")
    assert response.status_code == 200  # not a redirect to the latest conversation
    page = response.content.decode()
    assert 'id="home-composer"' in page
    assert TEXTAREA.search(page).group(1) == ""
    assert f'id="conversation-link-{conversation.pk}"' in page  # the others, in the sidebar


def test_the_home_composer_offers_the_models(client, alice, two_models):  # noqa: F811
    client.force_login(alice)
    page = client.get("/").content.decode()
    form = page[page.index('id="home-composer"') :]
    assert '<select name="model" id="home-model"' in form


def test_the_first_send_creates_the_conversation_and_its_page_sends_the_message_once(
    client,
    alice,
    two_models,  # noqa: F811
):
    client.force_login(alice)
    response = client.post("/conversations/", {"model": "small-model", "message": " Hi there "})
    conversation = Conversation.objects.get(owner=alice)
    assert conversation.model == "small-model"
    assert response["Location"] == f"/conversations/{conversation.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert "data-send-first" in COMPOSER.search(page).group(0)
    assert TEXTAREA.search(page).group(1) == "Hi there"
    again = client.get(response["Location"]).content.decode()  # a reload sends nothing more
    assert "data-send-first" not in COMPOSER.search(again).group(0)
    assert TEXTAREA.search(again).group(1) == ""


def test_the_message_waits_only_for_its_own_conversation(client, alice, conversation):
    client.force_login(alice)
    client.post("/conversations/", {"message": "For the new one"})
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "data-send-first" not in COMPOSER.search(page).group(0)
    assert "For the new one" not in page


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("x" * 20_001, "That message is 20,001 characters; the limit is 20,000."),
        ("   ", "That message is empty; type something first."),
    ],
)
def test_a_message_that_cannot_be_sent_is_refused_with_its_text_kept(
    client, alice, message, reason
):
    client.force_login(alice)
    response = client.post("/conversations/", {"message": message})
    assert response.status_code == 400
    page = response.content.decode()
    assert f"Not sent: {reason}" in page
    assert TEXTAREA.search(page).group(1) == message
    assert not Conversation.objects.filter(owner=alice).exists()


def test_a_model_not_offered_is_refused_beside_the_composer(client, alice, two_models):  # noqa: F811
    client.force_login(alice)
    response = client.post("/conversations/", {"model": "nope", "message": "Hello"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Not sent: " in page and "No conversation was created" not in page
    assert TEXTAREA.search(page).group(1) == "Hello"
    assert not Conversation.objects.filter(owner=alice).exists()
