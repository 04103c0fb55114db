"""Sending files (docs/files.md): the websocket `send` frame's "attachments" (this conversation's
uploads not yet sent) go with the message, and the request to the model carries them as the API's
blocks in the order sent: an image as base64 (after a line naming it), a PDF as a base64
document, a text file as a plain-text document. A file is sent once, by its owner, into its own
conversation; anything else is refused and stores nothing."""

from __future__ import annotations

import base64
import json
import shutil

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.models import Attachment, Conversation, Message
from support.waiting import settle
from tests import sample_files
from tests.conftest import receive_until, shows, socket_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def uploaded(user, conversation, name: str, data: bytes) -> Attachment:
    return attachments.upload(user, conversation.pk, SimpleUploadedFile(name, data))


async def send(user, conversation, frame: dict, reply_seq: int | None) -> list[str]:
    """Send `frame`; the frames until its reply completes (or, when None, a short while)."""
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", **frame}))
    if reply_seq is None:
        frames = [await ws.receive_from(timeout=5)]
    else:
        frames = await receive_until(ws, shows(reply_seq, "complete"), timeout=15)
        await settle(conversation.pk)
    await ws.disconnect()
    return frames


@pytest.fixture
def three_files(alice, conversation):
    return [
        uploaded(alice, conversation, "build-error.png", sample_files.image("PNG", (800, 600))),
        uploaded(alice, conversation, "spec.pdf", sample_files.pdf(2)),
        uploaded(alice, conversation, "notes.md", b"# Notes\nThe port is 8443.\n"),
    ]


async def test_the_request_carries_the_files_as_the_apis_blocks_in_the_order_sent(
    alice, conversation, fake_anthropic, three_files
):
    image, pdf, text = three_files
    fake_anthropic.enqueue_reply(["Seen."])
    ids = [text.pk, image.pk, pdf.pk]  # the order the person chose, not the upload order
    await send(alice, conversation, {"message": "What do these say?", "attachments": ids}, 2)

    assert fake_anthropic.invalid == []
    blocks = fake_anthropic.requests[0]["messages"][-1]["content"]
    kinds = [(b["type"], b.get("source", {}).get("type")) for b in blocks]
    assert kinds == [
        ("text", None),
        ("document", "text"),
        ("text", None),  # the line naming the image
        ("image", "base64"),
        ("document", "base64"),
    ]
    assert blocks[0]["text"] == "What do these say?"
    assert blocks[1]["source"]["data"] == "# Notes\nThe port is 8443.\n"
    assert blocks[1]["title"] == "notes.md"
    assert "build-error.png" in blocks[2]["text"] and "800×600" in blocks[2]["text"]
    with image.file.open("rb") as stored:
        assert base64.b64decode(blocks[3]["source"]["data"]) == stored.read()
    assert blocks[3]["source"]["media_type"] == "image/png"
    assert blocks[4]["source"]["media_type"] == "application/pdf"
    assert blocks[4]["title"] == "spec.pdf"

    message = await Message.objects.aget(conversation=conversation, seq=1)
    assert [b["type"] for b in message.content] == ["text", "document", "image", "document"]
    assert [b["attachment"]["id"] for b in message.content[1:]] == ids
    assert message.tokens > image.tokens + pdf.tokens + text.tokens  # the files counted
    sent = Attachment.objects.filter(message=message)
    assert await sent.acount() == 3  # sent: no longer swept as unsent


async def test_a_message_may_be_files_alone_and_its_conversation_is_named_by_them(
    alice, conversation, fake_anthropic, three_files
):
    fake_anthropic.enqueue_reply(["A picture."])
    await send(alice, conversation, {"message": "", "attachments": [three_files[0].pk]}, 2)
    blocks = fake_anthropic.requests[0]["messages"][-1]["content"]
    assert [b["type"] for b in blocks] == ["text", "image"]
    assert fake_anthropic.invalid == []
    await conversation.arefresh_from_db()
    assert conversation.title == "build-error.png"  # named by its file


@pytest.mark.parametrize(
    "attachments_value, reason",
    [
        ("7", "not a list of upload ids"),
        ([{"id": 1}], "not a list of upload ids"),
        ([10**12], "not waiting to be sent here"),
        ([10**30], "not a list of upload ids"),  # past any column: refused, not an overflow
        (["99999999999999999999"], "not a list of upload ids"),
        (list(range(1, 30)), "the limit is"),
    ],
)
async def test_malformed_or_unknown_files_are_refused_and_nothing_is_stored(
    alice, conversation, fake_anthropic, attachments_value, reason
):
    frames = await send(
        alice, conversation, {"message": "hi", "attachments": attachments_value}, None
    )
    assert reason in "".join(frames)
    assert not await Message.objects.filter(conversation=conversation).aexists()
    assert fake_anthropic.requests == []


async def test_a_file_goes_once_and_only_from_its_own_conversation_and_owner(
    alice, bob, conversation, fake_anthropic, three_files
):
    image = three_files[0]
    fake_anthropic.enqueue_reply(["Once."])
    await send(alice, conversation, {"message": "one", "attachments": [image.pk]}, 2)
    again = await send(alice, conversation, {"message": "two", "attachments": [image.pk]}, None)
    assert "not waiting to be sent here" in "".join(again)

    other = await Conversation.objects.acreate(owner=alice, title="Other")
    waiting = three_files[1]  # unsent, but uploaded for the first conversation
    elsewhere = await send(alice, other, {"message": "x", "attachments": [waiting.pk]}, None)
    assert "not waiting to be sent here" in "".join(elsewhere)

    bobs = await Conversation.objects.acreate(owner=bob, title="Bob's")
    stolen = await send(bob, bobs, {"message": "x", "attachments": [waiting.pk]}, None)
    assert "not waiting to be sent here" in "".join(stolen)
    assert await Message.objects.filter(conversation__in=[other, bobs]).acount() == 0
    assert (await Attachment.objects.aget(pk=waiting.pk)).message_id is None
    assert len(fake_anthropic.requests) == 1


async def test_the_files_sent_cost_what_their_uploads_were_estimated_at(
    alice, conversation, fake_anthropic, three_files
):
    """The offline models count a request's files as the uploads were counted: by the image's
    pixels, the PDF's pages, the text's length (never the base64 as text)."""
    from providers.sent_files import as_references
    from providers.tokens import estimate_block

    fake_anthropic.enqueue_reply(["Counted."])
    await send(
        alice, conversation, {"message": "count", "attachments": [a.pk for a in three_files]}, 2
    )
    sent = [b for b in fake_anthropic.requests[0]["messages"][-1]["content"] if b["type"] != "text"]
    assert [estimate_block(b) for b in as_references(sent)] == [a.tokens for a in three_files]


def test_a_text_files_and_a_pdfs_block_keep_their_first_lines_an_images_none(alice, conversation):
    """What a bubble and the rule-based brief quote without reading storage."""
    pdf = uploaded(
        alice,
        conversation,
        "runbook.pdf",
        sample_files.pdf_with_text([["Runbook", "Restart the broker first.", "Then the API."]]),
    )
    text = uploaded(alice, conversation, "notes.md", b"\n\n# Notes\nport 8443\nhost a\nmore\n")
    image = uploaded(alice, conversation, "shot.png", sample_files.image())
    lines = [attachments.block(a)["attachment"].get("lines") for a in (pdf, text, image)]
    assert lines == [
        "Runbook\nRestart the broker first.\nThen the API.",
        "# Notes\nport 8443\nhost a",
        None,
    ]


async def test_files_that_fit_one_by_one_but_not_together_are_refused_at_send(
    alice, conversation, fake_anthropic, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 2_000  # each 1,440-token image fits; both do not
    shots = [
        await sync_to_async(uploaded)(
            alice, conversation, f"s{n}.png", sample_files.image("PNG", (1200, 900))
        )
        for n in range(2)
    ]
    frames = await send(
        alice, conversation, {"message": "", "attachments": [s.pk for s in shots]}, None
    )
    assert "Send fewer files at once." in "".join(frames)
    assert not await Message.objects.filter(conversation=conversation).aexists()
    assert await Attachment.objects.filter(message__isnull=True).acount() == 2  # still waiting


async def test_a_file_gone_from_storage_is_said_in_its_place_and_the_chat_goes_on(
    client, alice, conversation, fake_anthropic, three_files
):
    image = three_files[0]
    fake_anthropic.enqueue_reply(["Seen."])
    await send(alice, conversation, {"message": "Look", "attachments": [image.pk]}, 2)
    image.file.storage.delete(image.file.name)  # a restore without its media, a bucket's rule

    fake_anthropic.enqueue_reply(["Still here."])
    await send(alice, conversation, {"message": "And now?"}, 4)
    reply = await Message.objects.aget(conversation=conversation, seq=4)
    assert reply.status == "complete"
    sent = json.dumps(fake_anthropic.requests[-1]["messages"])
    assert "build-error.png" in sent and "could not be read from storage" in sent
    assert fake_anthropic.invalid == []
    await sync_to_async(client.force_login)(alice)
    answer = await sync_to_async(client.get)(f"/attachments/{image.pk}/")
    assert answer.status_code == 404


def test_a_pdfs_words_are_kept_without_nul_characters(alice, conversation):
    """pypdf may read a NUL glyph, which PostgreSQL's text columns refuse."""
    pdf = sample_files.pdf_with_text([["port\x00is 8443"]])
    kept = uploaded(alice, conversation, "odd.pdf", pdf)
    assert "\x00" not in kept.text and "8443" in kept.text


def test_a_file_block_whose_upload_is_gone_becomes_a_line_never_a_reference(alice, conversation):
    """However a row went (an edited database, a hand-made import), the request carries text in
    its place: the API refuses a stored reference."""
    from chat.file_blocks import for_request
    from support.messages_api import invalid_request

    image = uploaded(alice, conversation, "gone.png", sample_files.image())
    block = attachments.block(image)
    Attachment.objects.filter(pk=image.pk).delete()
    messages = [{"role": "user", "content": [{"type": "text", "text": "Look"}, block]}]
    sent = for_request(messages, alice.pk)
    assert sent[0]["content"][1] == {
        "type": "text",
        "text": "[image: gone.png, 800×600 px, 640 tokens: no longer stored]",
    }
    assert invalid_request({"messages": sent}) == ""
