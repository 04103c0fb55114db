"""Export everything (/settings/export.json) and import takes it all back: the file holds every
conversation that has a message, each as its own export.json would; importing it, on another
account, creates every one of them, each exporting again exactly as its original did (versions,
branch on screen, pins, compactions, files and dates). A bad conversation in the file refuses the
whole file with its reason, creating nothing."""

from __future__ import annotations

import html
import json
import re

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from chat.models import Conversation
from tests.test_import import chatgpt_conversation
from tests.test_import_roundtrip import FILE_TOKENS, build, comparable, empty_storage, exported
from tests.transcripts import add_turns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

__all__ = ["empty_storage"]  # the round trip's fixture: each test starts with no stored files


@pytest.fixture(autouse=True)
def small_budget(settings):
    settings.CONTEXT_BUDGET_TOKENS = 3_000 + FILE_TOKENS
    settings.AUTO_COMPACT_AT = 0.95
    settings.KEEP_TAIL_SHARE = 0.25


def everything(client) -> list[dict]:
    response = client.get("/settings/export.json")
    assert response.status_code == 200
    return json.loads(b"".join(response.streaming_content))


def imported(client, doc) -> object:
    upload = SimpleUploadedFile("conversations.json", json.dumps(doc).encode())
    return client.post("/conversations/import/", {"file": upload})


async def test_every_conversation_comes_back_whole_on_another_account(
    client, alice, bob, conversation, fake_anthropic
):
    await sync_to_async(client.force_login)(alice)
    await build(client, alice, conversation, fake_anthropic)  # versions, pins, files, boundaries
    # No system prompt at all: it comes back without one (not with the deployment's).
    plain = await Conversation.objects.acreate(
        owner=alice, model="fake-model", title="Plain", system_prompt=""
    )
    await sync_to_async(add_turns)(plain, 2)
    await Conversation.objects.acreate(owner=alice, model="fake-model", title="Never used")
    doc = await sync_to_async(everything)(client)
    assert [c["id"] for c in doc] == [conversation.pk, plain.pk]
    for one in doc:
        assert one == await sync_to_async(exported)(client, one["id"])

    bobs = Client()
    await sync_to_async(bobs.force_login)(bob)
    response = await sync_to_async(imported)(bobs, doc)
    assert response.status_code == 302, response.content.decode()[:500]
    copies = [c async for c in Conversation.objects.filter(owner=bob).order_by("pk")]
    assert [c.title for c in copies] == [f"Imported: {c['title']}" for c in doc]
    for original, copy in zip(doc, copies, strict=True):
        again = await sync_to_async(exported)(bobs, copy.pk)
        assert comparable(again) == comparable(original)
    notice = (await sync_to_async(bobs.get)(response.url)).content.decode()
    assert "Imported 2 conversations." in notice


def test_a_bundle_may_mix_chatgpt_conversations_in(client, alice, conversation):
    client.force_login(alice)
    add_turns(conversation, 1)
    doc = everything(client) + [chatgpt_conversation("From ChatGPT", [("user", ["hi"])])]
    assert imported(client, doc).status_code == 302
    titles = set(Conversation.objects.filter(owner=alice).values_list("title", flat=True))
    assert {"Imported: From ChatGPT", f"Imported: {conversation.title}"} < titles


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda c: c.update(messages="none"), '"messages" is a string; it must be a list'),
        (lambda c: c["messages"][0].update(role="robot"), "Message 1 has role 'robot'"),
        (lambda c: c.update(compactions="x"), '"compactions" is a string; it must be a list'),
    ],
)
def test_a_bad_conversation_in_the_file_refuses_the_whole_file(
    client, alice, conversation, change, reason
):
    client.force_login(alice)
    add_turns(conversation, 1)
    second = Conversation.objects.create(owner=alice, model="fake-model")
    add_turns(second, 1)
    doc = everything(client)
    change(doc[1])
    before = Conversation.objects.count()
    response = imported(client, doc)
    assert response.status_code == 400
    said = html.unescape(response.content.decode())
    assert reason in said, re.findall(r"Nothing was imported: [^<]*", said)
    assert Conversation.objects.count() == before
