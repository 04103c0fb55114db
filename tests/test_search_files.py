"""Search finds text files and PDFs by their words (docs/files.md): a message sent with files is
indexed with each file's name and words, its first 100,000 characters as for messages, and a
hit whose matched words are in a file names it, in both search.json, the search page and the
model's search_history. Only the owner's: bob never finds alice's files."""

from __future__ import annotations

import json
import shutil

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.models import Conversation, Message
from chat.search_index import INDEXED_CHARS, searchable_text
from search.files import found_in
from search.messages import search
from support.waiting import settle
from tests import sample_files
from tests.conftest import receive_until, shows, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

MANUAL = [["The turbine manual, chapter one."], ["Torque the flange bolts to 85 Nm in a star."]]
NOTES = b"# Deploy notes\nThe staging proxy listens on port 8443.\n"


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


async def send(user, conversation, text: str, files: list, reply_seq: int) -> None:
    """Send `text` with `files` (name, bytes) through the consumer, the reply completed."""
    upload = sync_to_async(attachments.upload)
    ids = [(await upload(user, conversation.pk, SimpleUploadedFile(*file))).pk for file in files]
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    frame = {"action": "send", "message": text, "attachments": ids}
    await ws.send_to(text_data=json.dumps(frame))
    await receive_until(ws, shows(reply_seq, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()


@pytest.fixture
async def sent(alice, conversation, fake_anthropic):
    """Alice's message #1 with a PDF and a text file; #3 says something of its own."""
    fake_anthropic.enqueue_reply(["Read them."])
    manual = ("manual.pdf", sample_files.pdf_with_text(MANUAL))
    notes = ("notes.md", NOTES)
    await send(alice, conversation, "Two files for the rollout.", [manual, notes], 2)
    fake_anthropic.enqueue_reply(["Noted."])
    await send(alice, conversation, "The flange order went out on Monday.", [], 4)
    return conversation


async def test_a_pdf_and_a_text_file_are_found_by_their_words_the_hit_naming_the_file(
    async_client, alice, sent
):
    await async_client.aforce_login(alice)
    found = await async_client.get(f"/conversations/{sent.pk}/search.json", {"q": "flange bolts"})
    hits = found.json()["hits"]
    by_seq = {h["seq"]: h for h in hits}
    assert by_seq[1]["file"] == "manual.pdf" and "**flange**" in by_seq[1]["snippet"]
    assert "file" not in by_seq[3]  # its own words matched

    everywhere = (await async_client.get("/search.json", {"q": "proxy port 8443"})).json()
    (hit,) = [h for h in everywhere["hits"] if h["seq"] == 1]
    assert hit["file"] == "notes.md" and hit["conversation_id"] == sent.pk

    page = (await async_client.get("/search/", {"q": "staging proxy"})).content.decode()
    assert '<span class="hit-file">in notes.md</span>' in page
    assert f'href="/conversations/{sent.pk}/?at=1#msg-1"' in page


async def test_bob_never_finds_alices_files(async_client, alice, bob, sent):
    await async_client.aforce_login(bob)
    mine = await Conversation.objects.acreate(owner=bob, title="Bob's")
    await Message.objects.acreate(
        conversation=mine, seq=1, role="user", content=[{"type": "text", "text": "flange"}]
    )
    everywhere = (await async_client.get("/search.json", {"q": "flange bolts 8443"})).json()
    assert [(h["conversation_id"], h.get("file")) for h in everywhere["hits"]] == [(mine.pk, None)]
    page = (await async_client.get("/search/", {"q": "turbine"})).content.decode()
    assert "Nothing matches “turbine”" in page
    theirs = await async_client.get(f"/conversations/{sent.pk}/search.json", {"q": "flange"})
    assert theirs.status_code == 404


async def test_the_model_finds_a_files_words_with_search_history(
    alice, conversation, sent, fake_anthropic
):
    fake_anthropic.enqueue_tool_calls(
        [], [("toolu_1", "search_history", {"query": "flange bolts torque"})]
    )
    fake_anthropic.enqueue_reply(["85 Nm."])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "What torque?"}))
    await receive_until(ws, shows(6, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()

    (result,) = fake_anthropic.requests[-1]["messages"][-1]["content"]
    assert "#1 · user" in result["content"] and "· in manual.pdf" in result["content"]
    assert "**flange**" in result["content"].lower()
    assert fake_anthropic.invalid == []


def test_each_file_has_its_share_of_the_indexed_characters():
    content = [
        {"type": "text", "text": "Two logs."},
        {"type": "document", "attachment": {"id": 1, "name": "a.log"}},
        {"type": "document", "attachment": {"id": 2, "name": "b.log"}},
    ]
    uploads = {1: ("a.log", "alpha " * 40_000), 2: ("b.log", "omega " * 40_000)}
    text = searchable_text(content, uploads)
    assert len(text) <= INDEXED_CHARS
    assert text.startswith("Two logs.\na.log\na log\nalpha") and "\nb.log\nb log\nomega" in text
    assert searchable_text(content) == "Two logs."  # without their words, the message alone


def test_a_hit_names_the_file_a_matched_line_is_in():
    files = [("a.md", "a.md\nthe port is 8443"), ("b.md", "b.md\nthe host is heron")]
    assert found_in("the \ue000host\ue001 is heron", files) == "b.md"
    assert found_in("Two files.\nb.md\nthe \ue000host\ue001 is heron", files) == "b.md"
    assert found_in("my \ue000host\ue001 is down", files) == ""  # the message's own words
    assert found_in("the host is heron", files) == ""  # found by meaning: nothing matched


async def test_an_image_is_found_by_its_name(async_client, alice, conversation, fake_anthropic):
    fake_anthropic.enqueue_reply(["A screenshot."])
    await send(alice, conversation, "", [("build-error.png", sample_files.image())], 2)
    hits = await sync_to_async(search)(alice, "build error")
    assert (hits[0].seq, hits[0].file) == (1, "build-error.png")  # then its reply, by context


async def test_a_files_name_is_escaped_on_the_search_page(
    async_client, alice, conversation, fake_anthropic
):
    fake_anthropic.enqueue_reply(["Ok."])
    name = "<img src=x onerror=alert(1)>.md"
    await send(alice, conversation, "", [(name, b"The kestrel nests on the roof.\n")], 2)
    await async_client.aforce_login(alice)
    page = (await async_client.get("/search/", {"q": "kestrel nests"})).content.decode()
    assert "in &lt;img src=x onerror=alert(1)&gt;.md</span>" in page
    assert "<img src=x" not in page
