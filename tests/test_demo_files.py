"""The offline demo model describes the files it received (docs/files.md): each one's name, kind,
size and token cost, and for a text file or a PDF the line that best matches the question;
asked about a file cleared from its window, it calls read_attachment and describes the file
that comes back. Through the real turn path (the consumer, the engine, the tool), with the
request resolved as a real model gets it."""

from __future__ import annotations

import base64
import json
import shutil

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.models import Message
from compaction.models import Compaction
from providers import registry
from providers.demo import DemoClient, compose
from providers.tokens import estimate_text
from support.waiting import settle
from tests import sample_files
from tests.conftest import receive_until, shows, socket_for
from tests.test_read_attachment import sent
from tests.test_tools import reply, turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

NOTES = b"# Deploy notes\nThe cache warms at midnight.\nThe staging proxy listens on port 8443.\n"


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


@pytest.fixture
def demo():
    registry.register(DemoClient())


async def test_it_describes_each_file_and_the_line_that_best_matches_the_question(
    alice, conversation, demo
):
    upload = sync_to_async(attachments.upload)
    notes = await upload(alice, conversation.pk, SimpleUploadedFile("notes.md", NOTES))
    picture = sample_files.image("PNG", (200, 150))
    image = await upload(alice, conversation.pk, SimpleUploadedFile("build-error.png", picture))
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    question = "Which port does the proxy listen on?"
    frame = {"action": "send", "message": question, "attachments": [notes.pk, image.pk]}
    await ws.send_to(text_data=json.dumps(frame))
    await receive_until(ws, shows(2, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()

    answer = (await reply(conversation, 2)).content[-1]["text"]
    # Its files counted as the app counts them (a base64 image is not text): the window's
    # size it reports is the system prompt's and the stored message's estimates.
    message = await Message.objects.aget(conversation=conversation, seq=1)
    window = estimate_text(conversation.system_prompt) + message.tokens
    assert f"My window holds 1 message (about {window} tokens)" in answer
    assert f"You said: “{question}”" in answer  # the typed words, not the files' lines
    assert (
        f"- notes.md: a text file, {len(NOTES)} bytes, about {notes.tokens} tokens; the line "
        "that best matches your question: “The staging proxy listens on port 8443.”"
    ) in answer
    assert (
        f"- build-error.png: an image, 200×150 px, {image.bytes} bytes, about {image.tokens} tokens"
    ) in answer


def test_it_reads_a_pdfs_words_for_the_line_that_best_matches():
    pdf = sample_files.pdf_with_text(
        [["The turbine manual, chapter one."], ["Torque the flange bolts to 85 Nm in a star."]]
    )
    document = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(pdf).decode(),
        },
        "title": "manual.pdf",
    }
    question = {"type": "text", "text": "What torque do the flange bolts take?"}
    text, call = compose("", [{"role": "user", "content": [question, document]}])
    assert call is None
    assert "- manual.pdf: a PDF of 2 pages" in text and "about 6,000 tokens" in text
    assert "“Torque the flange bolts to 85 Nm in a star.”" in text


async def test_asked_about_a_cleared_file_it_reads_it_again_with_read_attachment(
    alice, conversation, demo
):
    notes = await sync_to_async(sent)(alice, conversation, 1, "notes.md", NOTES)
    # Folded: the summary names the file as a cleared line does; the window holds no notes.md.
    cleared = (
        f"[text: notes.md (#1), {notes.tokens} tokens, cleared: read_attachment brings it back]"
    )
    await Compaction.objects.acreate(
        conversation=conversation, trigger="manual", status="committed", first_kept_seq=3,
        summary=f"The user sent deploy notes.\n{cleared}", pre_tokens=100, post_tokens=50,
        summariser="rules",
    )  # fmt: skip
    await turn(alice, conversation, "Which port does the proxy in notes.md listen on?", 4)

    saved = await reply(conversation, 4)
    call, result = saved.content[1], saved.content[2]
    assert call["name"] == "read_attachment" and call["input"] == {"seq": 1, "name": "notes.md"}
    assert "is_error" not in result and result["content"][1]["attachment"]["id"] == notes.pk
    answer = saved.content[-1]["text"]
    assert answer.startswith("I read it again with read_attachment:")
    assert "“The staging proxy listens on port 8443.”" in answer


def test_it_does_not_read_again_a_file_still_in_its_window():
    line = "[text: notes.md (#1), 30 tokens, cleared: read_attachment brings it back]"
    given_back = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": NOTES.decode()},
        "title": "notes.md",
    }
    window = [
        {"role": "user", "content": [{"type": "text", "text": line}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Ok."}]},
        {"role": "user", "content": [{"type": "text", "text": "Here it is again."}, given_back]},
        {"role": "assistant", "content": [{"type": "text", "text": "Ok."}]},
        {"role": "user", "content": "Which port does the proxy in notes.md listen on?"},
    ]
    text, call = compose("", window, can_search=True, can_read=True)
    assert call is None and "The staging proxy listens on port 8443." in text
    text, call = compose("", [window[0], window[1], window[-1]], can_search=True, can_read=True)
    assert call.name == "read_attachment" and call.input == {"seq": 1, "name": "notes.md"}


def test_when_the_file_cannot_be_read_again_it_says_why():
    asked = {"role": "user", "content": "What did notes.md say?"}
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_attachment", "input": {"seq": 1}}
    error = "No file of this conversation matches #1 (not found)."
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": error, "is_error": True}
    calling = {"role": "assistant", "content": [call]}
    text, again = compose("", [asked, calling, {"role": "user", "content": [result]}])
    assert again is None and text == f"I could not read the file again: {error}"
