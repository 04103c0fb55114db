"""Editing a message with files (turns/versions.py): the edit box edits its text only; the new
version carries the same files, in their order (the same uploads, named by the same blocks),
and its request gives them to the model as the original's did."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.models import Attachment, Message
from support.waiting import settle
from tests import sample_files
from tests.conftest import frame, receive_until, shows, socket_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


@pytest.fixture
def uploads(alice, conversation) -> list[Attachment]:
    return [
        attachments.upload(alice, conversation.pk, SimpleUploadedFile(name, data))
        for name, data in [
            ("notes.md", b"# Notes\nport 8443\n"),
            ("chart.png", sample_files.image("PNG")),
        ]
    ]


async def test_the_new_version_keeps_the_files_and_the_model_gets_them(
    alice, conversation, fake_anthropic, uploads
):
    notes, image = uploads
    fake_anthropic.enqueue_reply(["First look."])
    fake_anthropic.enqueue_reply(["Second look."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    ids = [notes.pk, image.pk]
    await ws.send_to(
        text_data=json.dumps({"action": "send", "message": "What is this?", "attachments": ids})
    )
    await receive_until(ws, shows(2, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.send_to(text_data=frame(action="edit", message=1, text="What port is it?"))
    await receive_until(ws, shows(4, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()

    edited = await Message.objects.aget(conversation=conversation, seq=3)
    original = await Message.objects.aget(conversation=conversation, seq=1)
    assert edited.content[0] == {"type": "text", "text": "What port is it?"}
    assert edited.content[1:] == original.content[1:]
    assert [b["attachment"]["id"] for b in edited.content[1:]] == ids
    assert edited.tokens >= image.tokens + notes.tokens  # the files counted in the new version

    assert fake_anthropic.invalid == []
    sent = fake_anthropic.requests[1]["messages"]
    assert len(sent) == 1  # the edited message alone: the original is off the branch
    kinds = [(b["type"], b.get("source", {}).get("type")) for b in sent[0]["content"]]
    assert kinds == [("text", None), ("document", "text"), ("text", None), ("image", "base64")]
    assert sent[0]["content"][0]["text"] == "What port is it?"
    # The uploads are the original message's still: one row each, nothing copied.
    assert await Attachment.objects.acount() == 2
    # Search finds the new version by its files' words too, as it finds the original.
    assert "8443" in edited.search_text and "notes.md" in edited.search_text
