"""Uploads not yet sent wait in the composer as chips, through a reload (the page renders them;
static/js/files.js adds and removes them live): the owner's, of this conversation, unsent only,
in the order they were uploaded; the message box is then not required (files may go alone)."""

from __future__ import annotations

import re
import shutil

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.models import Conversation, Message
from render.tags import kilobytes

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def chips(html: str) -> list[str]:
    return re.findall(r'<li class="chip" data-id="(\d+)"', html)


def test_the_owners_unsent_uploads_show_as_chips_in_order(client, alice, bob, conversation):
    def upload(user, conversation, name, data=b"some text"):
        return attachments.upload(user, conversation.pk, SimpleUploadedFile(name, data))

    first = upload(alice, conversation, "first.txt", b"x" * 4321)
    sent = upload(alice, conversation, "sent.txt")
    second = upload(alice, conversation, "<i>second.txt")
    message = Message.objects.create(conversation=conversation, seq=1, role="user", content=[])
    attachments.attach([sent], message.pk)
    elsewhere = Conversation.objects.create(owner=alice, model="fake-model")
    upload(alice, elsewhere, "elsewhere.txt")
    theirs = Conversation.objects.create(owner=bob, model="fake-model")
    upload(bob, theirs, "bobs.txt")

    client.force_login(alice)
    html = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert chips(html) == [str(first.pk), str(second.pk)]
    assert "4 kB · 1,441 tokens" in html  # 4,321 characters at 3 a token
    assert "&lt;i&gt;second.txt" in html and "<i>second" not in html
    box = re.search(r'<textarea name="message"[^>]*>', html).group(0)
    assert " required" not in box  # files may go alone

    empty = Conversation.objects.create(owner=alice, model="fake-model")
    html = client.get(f"/conversations/{empty.pk}/").content.decode()
    assert chips(html) == [] and 'id="chips"' in html
    assert " required" in re.search(r'<textarea name="message"[^>]*>', html).group(0)


def test_sizes_are_said_in_decimal_kilobytes_and_megabytes():
    assert [kilobytes(n) for n in (1, 499, 48_210, 999_499, 1_000_000, 31_234_567)] == [
        "1 kB",
        "1 kB",
        "48 kB",
        "999 kB",
        "1.0 MB",
        "31.2 MB",
    ]
