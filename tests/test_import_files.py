"""Importing an export.json gives its files back (docs/files.md, "Export and import"): each
image and document block holding its file is decoded, checked as an upload is (its content
decides, metadata stripped), kept as an upload of the new conversation and its message, and the
message holds the block naming it, which the next request turns into the API's block again. The
limits hold (the size of a file, the storage of a person), bar the files a message may carry:
history is imported as it was sent. A file that cannot be given back refuses the import with its
reason, and nothing is left: no row, no stored file."""

from __future__ import annotations

import base64
import html
import json
import shutil
import tracemalloc
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile

from chat.file_blocks import for_request
from chat.imports import importing
from chat.models import Attachment, Conversation, Message
from chat.window_loading import load_window
from support.messages_api import invalid_request
from tests import sample_files
from tests.test_import_fuzz import REASON

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def stored_files() -> list[Path]:
    return [p for p in Path(storages["attachments"].location).rglob("*") if p.is_file()]


def base64_block(kind: str, media_type: str, data: bytes, title: str | None) -> dict:
    source = {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}
    return {"type": kind, "source": source} | ({"title": title} if title else {})


def text_document(data: str, title: str) -> dict:
    source = {"type": "text", "media_type": "text/plain", "data": data}
    return {"type": "document", "source": source, "title": title}


def export(*contents: list) -> bytes:
    """An export of user messages with `contents`, each answered."""
    messages = []
    for content in contents:
        messages.append({"role": "user", "content": content})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "Seen."}]})
    return json.dumps({"title": "Files", "messages": messages}).encode()


def imported(client, raw: bytes):
    return client.post("/conversations/import/", {"file": SimpleUploadedFile("export.json", raw)})


def test_an_import_gives_the_files_back_as_uploads_of_its_messages(client, alice):
    photo = sample_files.photo_with_gps((2000, 1000))
    pdf = sample_files.pdf(2)
    raw = export(
        [
            {"type": "text", "text": "What do these say?"},
            base64_block("image", "image/jpeg", photo, "IMG_1.jpg"),
            base64_block("document", "application/pdf", pdf, "spec.pdf"),
        ],
        [{"type": "text", "text": "And this?"}, text_document("The port is 8443.\n", "notes.md")],
    )
    client.force_login(alice)
    assert imported(client, raw).status_code == 302

    copy = Conversation.objects.get(owner=alice)
    first, third = (Message.objects.get(conversation=copy, seq=seq) for seq in (1, 3))
    image, document, text = Attachment.objects.filter(conversation=copy).order_by("pk")
    assert [(a.name, a.media_type, a.message_id) for a in (image, document, text)] == [
        ("IMG_1.jpg", "image/jpeg", first.pk),
        ("spec.pdf", "application/pdf", first.pk),
        ("notes.md", "text/plain", third.pk),
    ]
    # Checked as an upload: the photo scaled to the API's 1,568 px and stripped of its GPS.
    assert (image.width, image.height, image.tokens) == (1568, 784, 1600)
    with image.file.open("rb") as kept:
        assert b"PhoneMaker" not in kept.read()
    assert (document.pages, document.tokens) == (2, 6000)
    assert text.text == "The port is 8443.\n"
    # The messages name their uploads, as a send leaves them; the bytes are in storage only.
    assert [b.get("attachment", {}).get("id") for b in first.content] == [
        None,
        image.pk,
        document.pk,
    ]
    assert third.content[1]["attachment"]["name"] == "notes.md"
    assert first.tokens > image.tokens + document.tokens
    assert "source" not in json.dumps([first.content, third.content])
    assert len(stored_files()) == 3

    # The next request carries them as the API's blocks again.
    request = for_request(load_window(copy).window().messages, alice.pk)
    assert invalid_request({"messages": request}) == ""
    kinds = [(b["type"], b.get("source", {}).get("type")) for b in request[0]["content"]]
    assert kinds == [("text", None), ("text", None), ("image", "base64"), ("document", "base64")]


def test_an_imported_files_words_are_found_by_search(client, alice):
    raw = export(
        [{"type": "text", "text": "Read this."}, text_document("The flange bolts: 8443.", "a.md")]
    )
    client.force_login(alice)
    assert imported(client, raw).status_code == 302
    copy = Conversation.objects.get(owner=alice)
    hits = client.get(f"/conversations/{copy.pk}/search.json", {"q": "flange bolts"}).json()
    by_seq = {h["seq"]: h for h in hits["hits"]}
    assert by_seq[1]["file"] == "a.md" and "**flange**" in by_seq[1]["snippet"]


def test_a_file_in_a_tool_result_comes_back_too(client, alice):
    png = sample_files.image("PNG", (40, 30))
    messages = [
        {"role": "user", "content": "Show me the chart again."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "read_attachment", "input": {}},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "chart.png"},
                        base64_block("image", "image/png", png, "chart.png"),
                    ],
                },
                {"type": "text", "text": "Here."},
            ],
        },
    ]
    client.force_login(alice)
    raw = json.dumps({"messages": messages}).encode()
    assert imported(client, raw).status_code == 302
    reply = Message.objects.get(conversation__owner=alice, seq=2)
    inner = reply.content[1]["content"][1]
    chart = Attachment.objects.get(owner=alice)
    assert inner == {"type": "image", "attachment": inner["attachment"]}
    assert (inner["attachment"]["id"], chart.message_id) == (chart.pk, reply.pk)


def test_a_file_in_a_reply_is_not_imported(client, alice):
    """The API takes files from the user and in tool results, never in a reply's own words."""
    png = base64_block("image", "image/png", sample_files.image("PNG", (40, 30)), "a.png")
    messages = [
        {"role": "user", "content": "Draw me one."},
        {"role": "assistant", "content": [{"type": "text", "text": "Here."}, png]},
    ]
    client.force_login(alice)
    assert imported(client, json.dumps({"messages": messages}).encode()).status_code == 302
    reply = Message.objects.get(conversation__owner=alice, seq=2)
    assert reply.content[1] == {
        "type": "text",
        "text": "[a file in an assistant message, not imported]",
    }
    assert not Attachment.objects.exists() and stored_files() == []


def test_history_is_not_held_to_the_files_a_message_may_carry(client, alice, settings):
    """ATTACHMENTS_PER_MESSAGE bounds what waits for the next message: an imported message
    keeps the files it was sent with."""
    settings.ATTACHMENTS_PER_MESSAGE = 2
    texts = [text_document(f"file {i}", f"{i}.txt") for i in range(3)]
    client.force_login(alice)
    assert imported(client, export([{"type": "text", "text": "three"}, *texts])).status_code == 302
    message = Message.objects.get(conversation__owner=alice, seq=1)
    assert Attachment.objects.filter(message=message).count() == 3


GOOD = text_document("kept until the refusal", "first.txt")
REFUSED = {
    "not base64": (
        lambda: {"type": "image", "source": {"type": "base64", "data": "not base64!"}},
        "The file in message 3, block 2 is not valid base64",
    ),
    "a damaged PDF": (
        lambda: base64_block("document", "application/pdf", b"%PDF-1.4 broken", "x.pdf"),
        "The file in message 3, block 2 is refused: “x.pdf” looks like a PDF but cannot be "
        "read: it is damaged",
    ),
    "an SVG": (
        lambda: text_document('<svg xmlns="http://www.w3.org/2000/svg"/>', "logo.svg"),
        "is an SVG image",
    ),
    "a damaged PNG": (
        lambda: base64_block("image", "image/png", b"\x89PNG\r\n\x1a\nrest", "a.png"),
        "“a.png” looks like a PNG image but cannot be read: it is damaged",
    ),
    "no data": (
        lambda: {"type": "document", "source": {"type": "base64", "data": 7}},
        "The file in message 3, block 2 has no data",
    ),
    "over the size of a file": (
        lambda: text_document("x" * 2_000, "big.txt"),
        "(ATTACHMENT_MAX_BYTES)",
    ),
    "over the size of a file, before decoding": (
        lambda: base64_block("image", "image/png", b"x" * 3_000, "big.png"),
        "The file in message 3, block 2 is over 0.0 MB",
    ),
    "over the storage of a person": (
        lambda: text_document("y" * 900, "full.txt"),
        "(ATTACHMENT_STORAGE_PER_USER)",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_file_that_cannot_be_given_back_refuses_the_import_leaving_nothing(
    client, alice, settings, monkeypatch, case
):
    settings.ATTACHMENT_MAX_BYTES = 1_000
    settings.ATTACHMENT_STORAGE_PER_USER = 500 if "storage" in case else 10_000
    bad, reason = REFUSED[case]
    # A good file in the first message is stored, and its message written with it (batches of
    # two messages), before the bad one is read: they go too.
    monkeypatch.setattr(importing, "BATCH_MESSAGES", 2)
    raw = export([{"type": "text", "text": "a"}, GOOD], [{"type": "text", "text": "b"}, bad()])
    client.force_login(alice)
    response = imported(client, raw)
    assert response.status_code == 400
    said = html.unescape(REASON.search(response.content.decode()).group(1))
    assert reason in said
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert not Attachment.objects.exists() and stored_files() == []


def test_an_import_of_many_files_holds_one_messages_files_at_a_time(alice, settings):
    """Twenty messages with a 1 MB text file each, uploaded as a file that size is (to disk,
    read in chunks): the import's peak of memory (Python's allocations, tracemalloc) stays
    near one file's few copies (its JSON string, its bytes, its check: about 5 MB measured),
    well below the files' total, which a reader holding them all would need twice over."""
    settings.ATTACHMENT_STORAGE_PER_USER = 50_000_000
    size, count = 1_000_000, 20
    raw = export(
        *(
            [{"type": "text", "text": str(i)}, text_document(f"{i} " + "z" * size, f"{i}.txt")]
            for i in range(count)
        )
    )
    upload = TemporaryUploadedFile("export.json", "application/json", len(raw), None)
    upload.write(raw)
    upload.seek(0)
    del raw
    tracemalloc.start()
    try:
        importing.import_upload(alice, upload)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        upload.close()
    assert Attachment.objects.filter(message__isnull=False).count() == count
    assert peak < size * count / 2, f"peak {peak / 1e6:.1f} MB"
