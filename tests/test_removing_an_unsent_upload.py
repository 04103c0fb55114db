"""A chip's × (docs/files.md): POST /attachments/<id>/delete/ removes the owner's upload while it
waits to be sent, its file with it; one sent already stays with its message (a 400 that says
so); another user's, or an unknown id, is a 404 and nothing changes."""

from __future__ import annotations

import shutil

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from chat import attachments
from chat.models import Attachment, Message
from tests.sample_files import stored_files

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


@pytest.fixture
def unsent(alice, conversation) -> Attachment:
    return attachments.upload(alice, conversation.pk, SimpleUploadedFile("notes.txt", b"kept?"))


def remove(client, attachment_id):
    return client.post(f"/attachments/{attachment_id}/delete/")


def test_the_owner_removes_an_unsent_upload_and_its_file(client, alice, unsent):
    client.force_login(alice)
    assert len(stored_files()) == 1
    assert remove(client, unsent.pk).status_code == 204
    assert not Attachment.objects.exists()
    assert stored_files() == []  # gone with the row, once the deletion committed
    assert client.get(f"/attachments/{unsent.pk}/").status_code == 404
    assert remove(client, unsent.pk).status_code == 404  # removed twice: nothing there


def test_a_sent_upload_stays_with_its_message(client, alice, conversation, unsent):
    message = Message.objects.create(conversation=conversation, seq=1, role="user", content=[])
    attachments.attach([unsent], message.pk)
    client.force_login(alice)
    answer = remove(client, unsent.pk)
    assert answer.status_code == 400
    assert "was sent with a message" in answer.json()["error"]
    assert Attachment.objects.filter(pk=unsent.pk).exists() and len(stored_files()) == 1


def test_another_users_upload_or_an_unknown_id_is_a_404(client, bob, unsent):
    client.force_login(bob)
    assert remove(client, unsent.pk).status_code == 404
    assert remove(client, 999999).status_code == 404
    assert Attachment.objects.filter(pk=unsent.pk).exists() and len(stored_files()) == 1


def test_removing_needs_a_login_a_post_and_the_csrf_token(client, alice, unsent):
    anonymous = Client().post(f"/attachments/{unsent.pk}/delete/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    client.force_login(alice)
    assert client.get(f"/attachments/{unsent.pk}/delete/").status_code == 405
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(alice)
    assert remove(guarded, unsent.pk).status_code == 403
    assert Attachment.objects.filter(pk=unsent.pk).exists()
