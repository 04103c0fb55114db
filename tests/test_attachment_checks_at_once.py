"""Files checked at once: a process checks at most ATTACHMENT_CHECKS_AT_ONCE uploads at a time
(an image is decoded whole to be checked), the next waits for a place, and one that waits too
long is refused with a 503 that says why, keeping nothing."""

from __future__ import annotations

import shutil
import threading

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.models import Attachment
from core import runtime
from tests import sample_files
from tests.sample_files import stored_files

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def post(client, conversation):
    upload = SimpleUploadedFile("photo.png", sample_files.image("PNG", (640, 480)))
    return client.post(f"/conversations/{conversation.pk}/attachments/", {"file": upload})


def test_an_upload_waits_for_a_place_and_is_refused_if_none_comes(
    client, alice, conversation, settings, monkeypatch
):
    settings.ATTACHMENT_CHECKS_AT_ONCE = 1
    monkeypatch.setattr(attachments, "CHECK_WAIT_SECONDS", 0.2)
    client.force_login(alice)
    places = runtime.current().slots("file checks", 1)
    assert places.acquire(timeout=1)  # another upload is being checked
    try:
        answer = post(client, conversation)
    finally:
        places.release()
    assert answer.status_code == 503
    assert "checking other files right now" in answer.json()["error"]
    assert not Attachment.objects.exists()
    assert answer["Retry-After"] == "5"
    assert stored_files() == []

    # A place that comes free in time: the upload waited for it and was kept.
    assert places.acquire(timeout=1)
    threading.Timer(0.05, places.release).start()
    assert post(client, conversation).status_code == 201
    assert Attachment.objects.count() == 1
