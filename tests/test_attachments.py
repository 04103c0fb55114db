"""The uploads' contract (docs/files.md): POST /conversations/<id>/attachments/ answers 201 with
the file's description, or a 400 (413: too large) with a reason, and keeps nothing then;
GET /attachments/<id>/ serves the file to its owner only, never as a page. Their files go when
their rows go: swept unsent after a day, or with a conversation deleted past its undo window."""

from __future__ import annotations

import math
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.test import Client
from django.utils import timezone

from chat import attachments
from chat.models import Attachment, Conversation, Message
from providers.tokens import estimate_text
from tests import sample_files
from tests.sample_files import stored_files
from turns import engine

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    """Each test starts with no stored files (a flushed database leaves its rows' files)."""
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def post(client, conversation, name: str, data: bytes, content_type="application/octet-stream"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile(name, data, content_type=content_type)
    return client.post(f"/conversations/{conversation.pk}/attachments/", {"file": upload})


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def test_an_image_is_kept_and_described(as_alice, conversation):
    answer = post(as_alice, conversation, "screenshot.png", sample_files.image("PNG", (800, 600)))
    assert answer.status_code == 201
    body = answer.json()
    row = Attachment.objects.get()
    assert body == {
        "id": row.pk,
        "name": "screenshot.png",
        "media_type": "image/png",
        "bytes": row.file.size,
        "tokens": math.ceil(800 * 600 / 750),
    }
    assert row.owner == conversation.owner and row.conversation == conversation
    assert row.message is None  # not sent yet
    assert [p.stat().st_size for p in stored_files()] == [body["bytes"]]
    # Stored under a random name in the owner's folder, never the uploaded name.
    assert "screenshot" not in row.file.name and row.file.name.startswith(f"{row.owner_id}/")


def test_a_pdf_costs_its_pages_and_a_text_file_its_text(as_alice, conversation):
    document = post(as_alice, conversation, "report.pdf", sample_files.pdf(pages=4)).json()
    assert document["media_type"] == "application/pdf"
    assert document["tokens"] == 4 * 3000
    notes = "# Notes\n\n| a | b |\n| 1 | 2 |\n" * 20
    text = post(as_alice, conversation, "notes.md", notes.encode()).json()
    assert text["media_type"] == "text/plain" and text["tokens"] == estimate_text(notes)
    assert len(stored_files()) == 2


def test_a_file_the_conversations_model_could_never_be_sent_is_refused_at_upload(
    as_alice, conversation, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 2_000  # the offline demo's window: a PDF page is 3,000
    answer = post(as_alice, conversation, "report.pdf", sample_files.pdf(pages=1))
    assert answer.status_code == 400
    reason = answer.json()["error"]
    assert "“report.pdf” is about 3,000 tokens" in reason and "window of 2,000" in reason
    assert not Attachment.objects.exists() and stored_files() == []
    # An image fits, and is kept.
    image = post(as_alice, conversation, "shot.png", sample_files.image("PNG", (800, 600)))
    assert image.status_code == 201


@pytest.mark.parametrize("size", [120_000, 400_000])  # checked as uploaded; refused unread
def test_a_file_too_large_is_a_413_that_names_the_limit(as_alice, conversation, settings, size):
    settings.ATTACHMENT_MAX_BYTES = 100_000
    answer = post(as_alice, conversation, "big.txt", b"a" * size)
    assert answer.status_code == 413
    assert "the limit is 0.1 MB a file (ATTACHMENT_MAX_BYTES)" in answer.json()["error"]
    assert not Attachment.objects.exists() and stored_files() == []


def test_files_per_message_and_storage_per_user_refusals_name_their_limits(
    as_alice, alice, conversation, settings
):
    settings.ATTACHMENTS_PER_MESSAGE = 2
    for n in range(2):
        assert post(as_alice, conversation, f"{n}.txt", b"x" * 100).status_code == 201
    third = post(as_alice, conversation, "2.txt", b"x" * 100)
    assert third.status_code == 400
    assert "the limit is 2 files a message (ATTACHMENTS_PER_MESSAGE)" in third.json()["error"]

    settings.ATTACHMENTS_PER_MESSAGE = 10
    settings.ATTACHMENT_STORAGE_PER_USER = 250  # 200 bytes kept: 100 more do not fit
    other = Conversation.objects.create(owner=alice, model="fake-model")
    full = post(as_alice, other, "more.txt", b"y" * 100)
    assert full.status_code == 400
    assert "(ATTACHMENT_STORAGE_PER_USER)" in full.json()["error"]
    assert Attachment.objects.count() == 2 and len(stored_files()) == 2


def test_a_form_without_a_file_is_a_400(as_alice, conversation):
    answer = as_alice.post(f"/conversations/{conversation.pk}/attachments/", {"other": "x"})
    assert answer.status_code == 400 and "Choose a file" in answer.json()["error"]


def test_an_upload_needs_a_login_and_the_csrf_token(alice, conversation):
    url = f"/conversations/{conversation.pk}/attachments/"
    assert Client().post(url).status_code == 302  # to the login page
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(alice)
    assert guarded.post(url, {"file": b"x"}).status_code == 403
    assert not Attachment.objects.exists()


@pytest.fixture
def kept(as_alice, conversation) -> Attachment:
    answer = post(as_alice, conversation, "secret.txt", b"alice's secret")
    return Attachment.objects.get(pk=answer.json()["id"])


def test_another_user_gets_a_404_on_every_route(client, bob, conversation, kept):
    client.force_login(bob)
    upload = post(client, conversation, "mine.txt", b"bob's")
    assert upload.status_code == 404
    read = client.get(f"/attachments/{kept.pk}/")
    assert read.status_code == 404 and b"secret" not in read.content
    assert Attachment.objects.count() == 1 and len(stored_files()) == 1


def test_unknown_ids_are_404s_and_anonymous_visitors_log_in(as_alice, kept):
    assert as_alice.get("/attachments/999999/").status_code == 404
    assert as_alice.post("/conversations/999999/attachments/").status_code == 404
    response = Client().get(f"/attachments/{kept.pk}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_deleted_conversations_files_are_gone_for_their_owner(as_alice, conversation, kept):
    assert as_alice.post(f"/conversations/{conversation.pk}/delete/").status_code == 302
    assert as_alice.get(f"/attachments/{kept.pk}/").status_code == 404
    assert post(as_alice, conversation, "late.txt", b"x").status_code == 404


def served(client, attachment_id):
    response = client.get(f"/attachments/{attachment_id}/")
    assert response.status_code == 200
    return response, b"".join(response.streaming_content)


def test_an_image_is_served_as_itself_with_its_name(as_alice, conversation):
    answer = post(as_alice, conversation, "chart.webp", sample_files.image("WEBP")).json()
    response, body = served(as_alice, answer["id"])
    assert response["Content-Type"] == "image/webp"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"] == 'inline; filename="chart.webp"'
    assert body == Path(stored_files()[0]).read_bytes()


def test_text_is_served_as_plain_text_never_as_a_page(as_alice, conversation):
    page = b"<html><body><script>alert(1)</script></body></html>"
    answer = post(as_alice, conversation, "page.html", page, content_type="text/html")
    assert answer.status_code == 201 and answer.json()["media_type"] == "text/plain"
    response, body = served(as_alice, answer.json()["id"])
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert body == page


def test_a_name_is_cleaned_and_encoded_safely_in_the_header(as_alice, conversation):
    # A Windows path, a tab, and a right-to-left override that would show "txt.png" backwards.
    name = "C:\\Users\\me\\ré sumé;\tx\u202egnp.txt"
    answer = post(as_alice, conversation, name, b"plain words")
    assert answer.json()["name"] == "ré sumé;xgnp.txt"
    response, _ = served(as_alice, answer.json()["id"])
    disposition = response["Content-Disposition"]
    assert "\r" not in disposition and "\n" not in disposition
    assert disposition == "inline; filename*=utf-8''r%C3%A9%20sum%C3%A9%3Bxgnp.txt"


def test_an_svg_is_refused_by_its_name_or_its_content(as_alice, conversation):
    svg = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>'
    for name in ("logo.svg", "logo.txt"):
        answer = post(as_alice, conversation, name, svg)
        assert answer.status_code == 400 and "SVG" in answer.json()["error"]
    assert stored_files() == []


# --- Sweeping --------------------------------------------------------------------------------


def age(attachment: Attachment, **delta) -> None:
    Attachment.objects.filter(pk=attachment.pk).update(
        created_at=timezone.now() - timedelta(**delta)
    )


def test_an_upload_never_sent_is_swept_after_a_day_with_its_file(kept, conversation):
    sent = Attachment.objects.create(
        owner=kept.owner,
        conversation=conversation,
        name="sent.txt",
        media_type="text/plain",
        bytes=1,
        tokens=1,
        file=f"{kept.owner_id}/sent",
        message=Message.objects.create(conversation=conversation, seq=1, role="user", content=[]),
    )
    age(sent, hours=48)
    age(kept, hours=23)
    assert attachments.sweep() == 0  # a day not yet passed; a sent one stays
    age(kept, hours=25)
    assert attachments.sweep() == 1
    assert list(Attachment.objects.all()) == [sent] and stored_files() == []


def test_files_go_with_their_conversation_once_its_undo_window_has_passed(
    as_alice, conversation, kept, settings
):
    as_alice.post(f"/conversations/{conversation.pk}/delete/")
    assert attachments.sweep() == 0 and len(stored_files()) == 1  # undo is still possible
    as_alice.post(f"/conversations/{conversation.pk}/restore/")
    assert as_alice.get(f"/attachments/{kept.pk}/").status_code == 200  # back with it
    as_alice.post(f"/conversations/{conversation.pk}/delete/")
    Conversation.objects.filter(pk=conversation.pk).update(
        deleted_at=timezone.now() - timedelta(seconds=settings.UNDO_DELETE_SECONDS + 1)
    )
    assert attachments.sweep() == 1
    assert not Attachment.objects.exists() and stored_files() == []


def test_a_cascade_takes_the_files_too(kept, conversation):
    Conversation.objects.filter(pk=conversation.pk).delete()  # as an import rolled back does
    assert stored_files() == []


async def test_the_engines_periodic_sweep_sweeps_them(kept):
    await Attachment.objects.filter(pk=kept.pk).aupdate(
        created_at=timezone.now() - timedelta(days=2)
    )
    await engine.sweep()
    assert not await Attachment.objects.aexists() and stored_files() == []
