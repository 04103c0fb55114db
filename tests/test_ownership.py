"""Alice owns her conversation; bob can neither read, export, change nor open a socket to it."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from chat.models import Conversation, Message
from tests.conftest import socket_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def message(conversation):
    return Message.objects.create(
        conversation=conversation, seq=1, role="user", content=[{"type": "text", "text": "secret"}]
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/conversations/{id}/"),
        ("get", "/conversations/{id}/export.json"),
        ("get", "/conversations/{id}/messages/?before=5"),
        ("get", "/conversations/{id}/context/"),
        ("get", "/conversations/{id}/window/"),
        ("post", "/conversations/{id}/rename/"),
        ("post", "/conversations/{id}/settings/"),
        ("post", "/conversations/{id}/delete/"),
        ("post", "/conversations/{id}/attachments/"),
    ],
)
def test_bob_gets_a_404_for_alices_conversation(client, bob, conversation, message, method, path):
    client.force_login(bob)
    response = getattr(client, method)(path.format(id=conversation.pk), {"title": "pwned"})
    assert response.status_code == 404
    assert b"secret" not in response.content
    conversation.refresh_from_db()
    assert conversation.title != "pwned" and conversation.deleted_at is None


def test_bob_cannot_pin_alices_message(client, bob, message):
    client.force_login(bob)
    assert client.post(f"/messages/{message.pk}/pin/", {"pinned": "1"}).status_code == 404
    assert not hasattr(Message.objects.get(pk=message.pk), "pin")


def test_anonymous_visitors_are_sent_to_log_in(client, conversation):
    response = client.get(f"/conversations/{conversation.pk}/export.json")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_unknown_ids_are_404_not_500(client, alice):
    client.force_login(alice)
    assert client.get("/conversations/999999/").status_code == 404
    assert client.get("/conversations/999999/export.json").status_code == 404
    assert client.post("/messages/999999/pin/").status_code == 404


def test_a_deleted_conversation_is_gone_for_its_owner_but_its_rows_stay(
    client, alice, conversation, message
):
    client.force_login(alice)
    assert client.post(f"/conversations/{conversation.pk}/delete/").status_code == 302
    assert client.get(f"/conversations/{conversation.pk}/").status_code == 404
    assert Message.objects.filter(pk=message.pk).exists()  # the transcript is append-only


async def test_bob_cannot_open_a_socket_to_alices_conversation(bob, conversation):
    ws = socket_for(bob, conversation.pk)
    connected, _ = await ws.connect()
    assert not connected


async def test_an_anonymous_socket_is_refused(conversation):
    ws = socket_for(AnonymousUser(), conversation.pk)
    connected, _ = await ws.connect()
    assert not connected


async def test_a_socket_from_a_foreign_origin_is_refused(alice, conversation):
    from config.asgi import application

    ws = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"https://evil.example"), (b"host", b"localhost")],
    )
    connected, _ = await ws.connect()
    assert not connected


async def test_the_owner_connects_through_the_full_stack_with_her_session(
    alice, conversation, client
):
    from asgiref.sync import sync_to_async

    from config.asgi import application

    await sync_to_async(client.force_login)(alice)
    cookie = client.cookies["sessionid"].value
    ws = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
            (b"cookie", f"sessionid={cookie}".encode()),
        ],
    )
    connected, _ = await ws.connect()
    assert connected
    await ws.disconnect()


def test_the_sidebar_lists_only_my_conversations(client, alice, bob, conversation):
    Conversation.objects.create(owner=bob, model="m", title="Bob's private plans")
    client.force_login(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Bob&#x27;s private plans" not in page and "Bob's private plans" not in page
