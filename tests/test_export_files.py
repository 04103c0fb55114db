"""Exports keep files (docs/files.md, "Export and import"): export.json holds each one as the
API's block with its bytes (an image and a PDF as base64, a text file as a plain-text source,
each named by "title"), in the messages and inside a tool result (the window names them by
their labels: the bytes are in the file once), in a fixed number of queries; export.md names
each by its label, never its bytes, and a hostile name stays text under a Markdown reader that
passes raw HTML."""

from __future__ import annotations

import base64
import json
import shutil

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from markdown_it import MarkdownIt

from chat import attachments
from chat.models import Conversation, Message
from tests import sample_files

pytestmark = pytest.mark.django_db

HOSTILE = "<img src=x onerror=alert(1)>`](javascript:alert(2))*.png"


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def sent(user, conversation, seq: int, files: list[tuple[str, bytes]], text: str = "Look") -> list:
    """A user message `seq` carrying `files`, as a send stores it, and an answer after it."""
    rows = [
        attachments.upload(user, conversation.pk, SimpleUploadedFile(name, data))
        for name, data in files
    ]
    content = [{"type": "text", "text": text}, *(attachments.block(a) for a in rows)]
    message = Message.objects.create(
        conversation=conversation, seq=seq, role="user", content=content
    )
    attachments.attach(rows, message.pk)
    Message.objects.create(
        conversation=conversation,
        seq=seq + 1,
        role="assistant",
        content=[{"type": "text", "text": "Seen."}],
    )
    return rows


def exported(client, conversation) -> dict:
    response = client.get(f"/conversations/{conversation.pk}/export.json")
    assert response.status_code == 200
    return json.loads(response.content)


def test_export_json_holds_each_file_as_the_apis_block(client, alice, conversation):
    image, pdf, text = sent(
        alice,
        conversation,
        1,
        [
            ("build-error.png", sample_files.image("PNG", (800, 600))),
            ("spec.pdf", sample_files.pdf(2)),
            ("notes.md", b"# Notes\nThe port is 8443.\n"),
        ],
    )
    client.force_login(alice)
    doc = exported(client, conversation)

    blocks = doc["messages"][0]["content"]
    assert blocks[0] == {"type": "text", "text": "Look"}
    with image.file.open("rb") as stored:
        png = stored.read()
    with pdf.file.open("rb") as stored:
        spec = stored.read()
    assert blocks[1:] == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(png).decode(),
            },
            "title": "build-error.png",
        },
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(spec).decode(),
            },
            "title": "spec.pdf",
        },
        {
            "type": "document",
            "source": {
                "type": "text",
                "media_type": "text/plain",
                "data": "# Notes\nThe port is 8443.\n",
            },
            "title": "notes.md",
        },
    ]
    # The window names them by their labels: their bytes are in the messages, once (no
    # reference to a row of this deployment's is left anywhere in the file).
    window = doc["window"]["messages"][0]["content"]
    assert [b["type"] for b in window] == ["text"] * 4
    assert window[1]["text"].startswith("[image: build-error.png, 800×600 px")
    assert json.dumps(doc).count(blocks[1]["source"]["data"]) == 1
    assert '"attachment"' not in json.dumps(doc)


def test_a_file_inside_a_tool_result_is_exported_as_its_block(client, alice, conversation):
    [image] = sent(alice, conversation, 1, [("chart.png", sample_files.image("PNG", (40, 30)))])
    reply = Message.objects.get(conversation=conversation, seq=2)
    reply.content = [
        {"type": "tool_use", "id": "toolu_1", "name": "read_attachment", "input": {"id": image.pk}},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": "Here it is."}, attachments.block(image)],
        },
        {"type": "text", "text": "Seen again."},
    ]
    reply.save()
    client.force_login(alice)
    result = exported(client, conversation)["messages"][1]["content"][1]
    assert result["content"][0] == {"type": "text", "text": "Here it is."}
    assert result["content"][1]["source"]["type"] == "base64"
    assert result["content"][1]["title"] == "chart.png"


def test_export_json_reads_every_file_in_one_query(client, alice, conversation):
    """As many queries for one file as for six, in three messages (the files' rows are read at
    once; their bytes come from storage)."""
    small = sample_files.image("PNG", (20, 20))
    sent(alice, conversation, 1, [("a.png", small)])
    longer = Conversation.objects.create(owner=alice, model="fake-model")
    for seq in (1, 3, 5):
        sent(alice, longer, seq, [("a.png", small), ("b.txt", b"b")])
    client.force_login(alice)
    counts = []
    for exported_one in (conversation, longer):
        with CaptureQueriesContext(connection) as queries:
            exported(client, exported_one)
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_export_md_names_each_file_and_stays_inert(client, alice, conversation):
    sent(
        alice,
        conversation,
        1,
        [(HOSTILE, sample_files.image("PNG", (800, 600))), ("spec.pdf", sample_files.pdf(2))],
    )
    client.force_login(alice)
    response = client.get(f"/conversations/{conversation.pk}/export.md")
    assert response.status_code == 200
    markdown = b"".join(response.streaming_content).decode()

    assert "image: <img src=x onerror=alert(1)>`](javascript:alert(2))*.png, 800×600 px" in markdown
    assert "PDF: spec.pdf, 2 pages, 6,000 tokens" in markdown
    assert "iVBOR" not in markdown and "JVBER" not in markdown  # no PNG, no PDF bytes
    rendered = MarkdownIt("commonmark", {"html": True}).render(markdown)
    assert "<img" not in rendered and "<a " not in rendered
    # Each label as code: its name shown as the text it is.
    assert "<code>image: &lt;img src=x onerror=alert(1)&gt;`](javascript:alert(2))*.png" in rendered
    assert "<code>PDF: spec.pdf, 2 pages, 6,000 tokens</code>" in rendered


def test_another_users_export_names_none_of_the_files(client, alice, bob, conversation):
    sent(alice, conversation, 1, [("secret.txt", b"the port is 8443")])
    client.force_login(bob)
    assert client.get(f"/conversations/{conversation.pk}/export.json").status_code == 404
    assert client.get(f"/conversations/{conversation.pk}/export.md").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_boundarys_files_go_out_and_come_back_named(client, alice, conversation):
    """A clearing's divider lists the files it took out of the window: export.json keeps that
    list, and the import gives it back by name, kind and message (the uploads it imports get
    new ids, so the divider names them without a link)."""
    from compaction.models import Compaction

    (image,) = sent(alice, conversation, 1, [("build-error.png", sample_files.image())])
    sent(alice, conversation, 3, [], text="And now?")
    cleared = [{"id": image.pk, "name": "build-error.png", "kind": "image", "seq": 1}]
    Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        kind="clear",
        status="committed",
        first_kept_seq=1,
        cleared_before_seq=3,
        pre_tokens=900,
        post_tokens=80,
        files=cleared,
    )
    client.force_login(alice)
    out = exported(client, conversation)
    assert out["compactions"][0]["files"] == cleared

    answer = client.post(
        "/conversations/import/",
        {"file": SimpleUploadedFile("export.json", json.dumps(out).encode())},
    )
    assert answer.status_code == 302
    copy = Conversation.objects.exclude(pk=conversation.pk).get(owner=alice)
    row = Compaction.objects.get(conversation=copy)
    assert row.files == [{"id": None, "name": "build-error.png", "kind": "image", "seq": 1}]
    assert row.cleared_what == "1 file"
    markdown = b"".join(client.get(f"/conversations/{copy.pk}/export.md").streaming_content)
    markdown = markdown.decode()
    assert "Cleared 1 file (auto)" in markdown
