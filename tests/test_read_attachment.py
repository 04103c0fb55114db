"""read_attachment (docs/files.md): the model asks for a file of the user's again, by its message
number and/or name as the cleared line names it, or by its id, from any conversation of theirs;
the next request carries it inside the tool result as the API's block (a page range of a long
PDF as a PDF of those pages), and the fake server finds it valid. Another user's file, or none,
is a tool error saying it is not found."""

from __future__ import annotations

import base64
import io
import json
import shutil

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from pypdf import PdfReader

from chat import attachments
from chat.models import Conversation, Message
from support.waiting import settle
from tests import sample_files
from tests.conftest import receive_until, shows, socket_for
from tools import recall
from tools.values import Context, ToolError

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def sent(user, conversation, seq: int, name: str, data: bytes):
    """A file sent with the user's message #seq (and its reply #seq+1), as a send stores it."""
    upload = attachments.upload(user, conversation.pk, SimpleUploadedFile(name, data))
    content = [{"type": "text", "text": f"Here is {name}."}, attachments.block(upload)]
    message = Message.objects.create(
        conversation=conversation, seq=seq, parent_seq=seq - 1 or None, role="user",
        content=content,
    )  # fmt: skip
    Message.objects.create(
        conversation=conversation, seq=seq + 1, parent_seq=seq, role="assistant",
        content=[{"type": "text", "text": "Got it."}],
    )  # fmt: skip
    attachments.attach([upload], message.pk)
    return upload


async def turn(user, conversation, text: str, reply_seq: int) -> Message:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": text}))
    await receive_until(ws, shows(reply_seq, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()
    return await Message.objects.aget(conversation=conversation, seq=reply_seq)


def asks(fake_anthropic, arguments: dict) -> None:
    fake_anthropic.enqueue_tool_calls([], [("toolu_1", "read_attachment", arguments)])
    fake_anthropic.enqueue_reply(["Seen again."])


def given_back(fake_anthropic) -> dict:
    """The tool result the request after the call carried."""
    (result,) = fake_anthropic.requests[1]["messages"][-1]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    return result


async def test_an_image_comes_back_inside_the_tool_result_named_as_the_cleared_line_names_it(
    alice, conversation, fake_anthropic
):
    png = sample_files.image("PNG", (800, 600))
    image = await sync_to_async(sent)(alice, conversation, 1, "build-error.png", png)
    asks(fake_anthropic, {"seq": 1, "name": "build-error.png"})
    reply = await turn(alice, conversation, "What did the screenshot say?", 4)

    assert fake_anthropic.invalid == []
    result = given_back(fake_anthropic)
    assert "is_error" not in result
    line, label, picture = result["content"]
    assert "build-error.png" in line["text"] and f"attachment_id {image.pk}" in line["text"]
    assert label["type"] == "text" and "800×600" in label["text"]
    assert picture["type"] == "image" and picture["source"]["media_type"] == "image/png"
    with image.file.open("rb") as stored:
        assert base64.b64decode(picture["source"]["data"]) == stored.read()
    # Stored as the reference, never the bytes, and counted by the file's estimate.
    stored_result = reply.content[1]
    assert stored_result["content"][1] == {"type": "image", "attachment": attachments.block(
        image)["attachment"]}  # fmt: skip
    assert reply.status == "complete" and reply.content[-1]["text"] == "Seen again."


async def test_a_page_range_of_a_long_pdf_sends_a_pdf_of_those_pages(
    alice, conversation, fake_anthropic
):
    pdf = await sync_to_async(sent)(alice, conversation, 1, "spec.pdf", sample_files.pdf(5))
    asks(fake_anthropic, {"attachment_id": pdf.pk, "from_page": 2, "to_page": 3})
    reply = await turn(alice, conversation, "What do pages 2 and 3 say?", 4)

    assert fake_anthropic.invalid == []
    line, document = given_back(fake_anthropic)["content"]
    assert "pages 2–3 of 5" in line["text"]
    assert document["type"] == "document" and document["title"] == "spec.pdf"
    pages = PdfReader(io.BytesIO(base64.b64decode(document["source"]["data"]))).pages
    assert len(pages) == 2
    meta = reply.content[1]["content"][1]["attachment"]
    assert meta["range"] == [2, 3] and meta["tokens"] == pdf.tokens * 2 // 5


async def test_a_file_of_another_conversation_of_theirs_comes_back_by_its_id(
    alice, conversation, fake_anthropic
):
    other = await Conversation.objects.acreate(owner=alice, title="Logs")
    notes = await sync_to_async(sent)(alice, other, 1, "notes.md", b"The port is 8443.\n")
    asks(fake_anthropic, {"attachment_id": notes.pk})
    await turn(alice, conversation, "What port did my notes say?", 2)

    assert fake_anthropic.invalid == []
    line, document = given_back(fake_anthropic)["content"]
    assert f"of conversation {other.pk}" in line["text"]
    assert document["source"] == {
        "type": "text", "media_type": "text/plain", "data": "The port is 8443.\n"
    }  # fmt: skip


@pytest.mark.parametrize("by", ["id", "seq", "name"])
async def test_another_users_file_is_not_found(alice, bob, conversation, fake_anthropic, by):
    bobs = await Conversation.objects.acreate(owner=bob, title="Bob's")
    secret = await sync_to_async(sent)(bob, bobs, 1, "secret.png", sample_files.image())
    arguments = {
        "id": {"attachment_id": secret.pk},
        "seq": {"seq": 1, "conversation_id": bobs.pk},
        "name": {"name": "secret.png"},
    }[by]
    asks(fake_anthropic, arguments)
    await turn(alice, conversation, "Show me the secret", 2)

    result = given_back(fake_anthropic)
    assert result["is_error"] is True
    assert isinstance(result["content"], str) and "no" in result["content"].lower()
    assert "secret.png" not in result["content"] or by == "name"  # only what the model said
    assert fake_anthropic.invalid == []


@pytest.mark.parametrize(
    "arguments, says",
    [
        ({}, "Name the file"),
        ({"seq": 1, "name": "nope.png"}, "No file of this conversation matches #1 and 'nope.png'"),
        ({"name": "same.md"}, "Several files of this conversation match 'same.md'"),
        ({"seq": 1, "from_page": 2}, "is not a PDF"),
        ({"attachment_id": "x"}, "attachment_id must be a whole number"),
        ({"attachment_id": 10**9}, "not found"),
    ],
)
def test_a_request_that_names_no_one_file_is_a_tool_error_saying_why(
    alice, conversation, arguments, says
):
    sent(alice, conversation, 1, "same.md", b"one\n")
    sent(alice, conversation, 3, "same.md", b"two\n")
    with pytest.raises(ToolError, match=says.replace("(", r"\(").replace(")", r"\)")):
        recall.read_attachment(Context(alice.pk, conversation.pk, 5), arguments)
