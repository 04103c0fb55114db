"""Deleting an account from the settings page, after confirming with the password, leaves nothing
of the person's: every model Django knows is walked, and no row of any of them refers to the
user or to anything of theirs (conversations, messages, compactions, files, imports); their stored
files are gone, the search index finds none of their words, and no session signs them in. Another
person's things stay whole. A wrong password deletes nothing and says why."""

from __future__ import annotations

import shutil

import pytest
from django.apps import apps
from django.contrib.auth import SESSION_KEY, get_user_model
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.utils import timezone

from chat import attachments
from chat.models import Attachment, Conversation, Import, Message, MessageVector, Pin, Preferences
from compaction.models import Compaction, Review
from tests import sample_files
from tests.transcripts import add_turns, text_block
from web.models import UserSession
from web.session_store import SessionStore

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def everything_of(user, word: str) -> Conversation:
    """A conversation with turns, a sent file, a pin, a vector, a committed boundary reviewed by
    its owner, and a deleted one; the person's preferences and an import under way."""
    conversation = Conversation.objects.create(owner=user, model="fake-model", title=word)
    add_turns(conversation, 3)
    Message.objects.create(conversation=conversation, seq=7, role="user", content=text_block(word))
    first = conversation.messages.get(seq=1)
    upload = SimpleUploadedFile(f"{word}.png", sample_files.image("PNG", (40, 30)))
    attachment = attachments.upload(user, conversation.pk, upload)
    Attachment.objects.filter(pk=attachment.pk).update(message=first)
    attachments.upload(user, conversation.pk, SimpleUploadedFile("unsent.md", b"# not sent"))
    Pin.objects.create(message=first, conversation=conversation)
    MessageVector.objects.create(message=first, model="m", dimension=2, vector=b"\x00" * 4)
    boundary = Compaction.objects.create(
        conversation=conversation, trigger="manual", status="committed", first_kept_seq=3
    )
    Review.objects.create(compaction=boundary, action="approved", user=user)
    gone = Conversation.objects.create(owner=user, model="fake-model", deleted_at=timezone.now())
    add_turns(gone, 1)
    Preferences.objects.create(user=user, theme="dark", system_prompt="Be kind.")
    Import.objects.create(owner=user, heartbeat_at=timezone.now())
    return conversation


def ids_of(user) -> dict:
    """The ids of every row that is the person's, by model."""
    conversations = Conversation.objects.filter(owner=user)
    compactions = Compaction.objects.filter(conversation__in=conversations)
    return {
        get_user_model(): {user.pk},
        Conversation: set(conversations.values_list("pk", flat=True)),
        Message: set(
            Message.objects.filter(conversation__in=conversations).values_list("pk", flat=True)
        ),
        Compaction: set(compactions.values_list("pk", flat=True)),
        Review: set(Review.objects.filter(compaction__in=compactions).values_list("pk", flat=True)),
        Attachment: set(Attachment.objects.filter(owner=user).values_list("pk", flat=True)),
        Import: set(Import.objects.filter(owner=user).values_list("pk", flat=True)),
    }


def left_behind(ids: dict) -> list[str]:
    """Every row, in every model Django knows (their many-to-many tables too), that is one of
    these or refers to one of them."""
    found = []
    for model in apps.get_models(include_auto_created=True):
        if model in ids and model.objects.filter(pk__in=ids[model]).exists():
            found.append(f"{model.__name__} rows themselves")
        for field in model._meta.concrete_fields:
            target = field.related_model if field.is_relation else None
            if target in ids:
                rows = model.objects.filter(**{f"{field.attname}__in": ids[target]})
                if rows.exists():
                    found.append(f"{model.__name__}.{field.name} -> {target.__name__}")
    return found


def signed_in(user_id: int) -> int:
    """Sessions signing the user in, read from their signed data (not the user column)."""
    decoded = (SessionStore().decode(s.session_data) for s in UserSession.objects.iterator())
    return sum(data.get(SESSION_KEY) == str(user_id) for data in decoded)


def indexed(word: str) -> int:
    """How many messages the full-text search finds `word` in: SQLite's FTS5 index is a table of
    its own (kept by triggers), PostgreSQL's is an index over the message rows."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT count(*) FROM chat_message_fts WHERE chat_message_fts MATCH %s", [word]
            )
        else:
            cursor.execute(
                "SELECT count(*) FROM chat_message WHERE "
                "to_tsvector('english', search_text) @@ plainto_tsquery('english', %s)",
                [word],
            )
        return cursor.fetchone()[0]


def test_deleting_the_account_leaves_nothing_of_the_persons(alice, bob):
    everything_of(alice, "zanzibar")
    everything_of(bob, "quokka")
    here, elsewhere, bobs = Client(), Client(), Client()
    for client, user in ((here, alice), (elsewhere, alice), (bobs, bob)):
        client.force_login(user)
    files = list(Attachment.objects.filter(owner=alice).values_list("file", flat=True))
    kept_files = list(Attachment.objects.filter(owner=bob).values_list("file", flat=True))
    storage = storages["attachments"]
    assert len(files) == 2 and all(storage.exists(name) for name in files)
    mine, theirs = ids_of(alice), ids_of(bob)
    assert indexed("zanzibar") == 1 and signed_in(alice.pk) == 2

    response = here.post("/settings/delete/", {"password": "alice-password-1"})

    assert response.status_code == 302 and response.url == "/accounts/login/"
    assert left_behind(mine) == []
    assert not any(storage.exists(name) for name in files)
    assert indexed("zanzibar") == 0
    assert signed_in(alice.pk) == 0
    assert elsewhere.get("/settings/").status_code == 302
    login = here.get("/accounts/login/").content.decode()
    assert "Your account and everything in it were deleted." in login
    # Bob's things are all still there.
    assert ids_of(bob) == theirs
    assert all(storage.exists(name) for name in kept_files)
    assert indexed("quokka") == 1 and signed_in(bob.pk) == 1
    assert Preferences.objects.filter(user=bob).exists()
    assert bobs.get("/settings/").status_code == 200


def test_a_wrong_password_deletes_nothing_and_says_why(alice, conversation):
    client = Client()
    client.force_login(alice)
    response = client.post(
        "/settings/delete/", {"password": "nope"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Nothing was deleted: That is not your password." in html
    assert 'hx-swap-oob="innerHTML"' in html
    assert client.post("/settings/delete/", {}).status_code == 400
    assert get_user_model().objects.filter(pk=alice.pk).exists()
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert client.get("/settings/").status_code == 200
