"""Thinking is private to its turn: the window of later turns (what the model view shows, what a
summary over the cached prefix reads) leaves it out, compaction never summarises it (the
transcript a summariser reads, the rule-based brief), and the page still shows it, folded."""

from __future__ import annotations

import json

import pytest

from chat.models import Conversation, Message
from chat.window_loading import load_window
from compaction.brief import rule_based_summary
from compaction.entries import Entry
from compaction.prompt import render_transcript
from support.messages_api import signature_of

pytestmark = pytest.mark.django_db

SECRET = "Private musing: the launch code is 0000."
THOUGHT = {"type": "thinking", "thinking": SECRET, "signature": signature_of(SECRET)}
REDACTED = {"type": "redacted_thinking", "data": "EncryptedBlob=="}
REPLY = [REDACTED, THOUGHT, {"type": "text", "text": "The deploy runs at noon."}]


@pytest.fixture
def thought(alice):
    conversation = Conversation.objects.create(owner=alice, model="fake-model")
    Message.objects.create(conversation=conversation, seq=1, role="user", content="When?")
    Message.objects.create(conversation=conversation, seq=2, role="assistant", content=REPLY)
    Message.objects.create(conversation=conversation, seq=3, role="user", content="Thanks.")
    return conversation


def test_the_window_of_later_turns_leaves_thinking_out(thought):
    messages = load_window(thought).window().messages
    assert [b["type"] for b in messages[1]["content"]] == ["text"]
    assert SECRET not in str(messages) and "EncryptedBlob" not in str(messages)


def test_the_model_view_shows_no_thinking_and_the_page_shows_it_folded(client, alice, thought):
    client.force_login(alice)
    view = client.get(f"/conversations/{thought.pk}/window/").content.decode()
    assert "The deploy runs at noon." in view and SECRET not in view
    page = client.get(f"/conversations/{thought.pk}/").content.decode()
    assert '<details class="thinking"><summary>Thinking</summary>' in page and SECRET in page
    assert '<details class="thinking redacted">' in page
    assert THOUGHT["signature"] not in page and "EncryptedBlob" not in page


def test_compaction_never_summarises_thinking():
    entries = [
        Entry(1, "user", [{"type": "text", "text": "When?"}]),
        Entry(2, "assistant", REPLY),
    ]
    assert SECRET not in render_transcript(entries)
    brief = rule_based_summary(entries, None)
    assert "noon" in brief and SECRET not in brief and "0000" not in brief


def test_an_export_keeps_thinking_and_its_import_keeps_it_too(client, alice, thought):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(alice)
    exported = client.get(f"/conversations/{thought.pk}/export.json").content
    assert json.loads(exported)["messages"][1]["content"] == REPLY
    client.post("/conversations/import/", {"file": SimpleUploadedFile("x.json", exported)})
    copy = Conversation.objects.exclude(pk=thought.pk).get(owner=alice)
    assert Message.objects.get(conversation=copy, seq=2).content == REPLY
    # Kept, and still never sent: the copy's window leaves it out as the original's does.
    assert SECRET not in str(load_window(copy).window().messages)
    markdown = client.get(f"/conversations/{thought.pk}/export.md")
    markdown = b"".join(markdown.streaming_content).decode()
    assert "noon" in markdown and SECRET not in markdown  # what was said, not what was thought
