"""Files through compaction (docs/files.md), through the real consumer and the fake Anthropic
server: past the auto threshold the files of older turns are cleared from the window (a line
names each, and how to get it back), and the divider counts them; a summary that folds them
names each, and its divider lists them; a pinned file rides verbatim; the summary request
itself carries the files as the API's blocks; undoing a clearing gives the files back, and a
model (the offline demo) gets a cleared one back with read_attachment. The transcript keeps
every file."""

from __future__ import annotations

import base64
import json
import shutil

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments
from chat.conversations import set_pinned
from chat.figures import load_figures
from chat.models import Conversation, Message
from chat.window_loading import load_window
from compaction.files import CLEARED_NOTE
from compaction.models import Compaction
from providers import registry
from providers.demo import DemoClient
from support.waiting import settle
from tests import sample_files
from tests.conftest import frame, receive_until, shows, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

NOTES = "".join(f"line {i}: the staging port is 8443\n" for i in range(40))  # ~1,400 chars


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


@pytest.fixture(autouse=True)
def budget(settings):
    settings.CONTEXT_BUDGET_TOKENS = 20_000  # threshold 12,000; tail 5,000


@pytest.fixture
def uploads(alice, conversation):
    """The first turn's files (an image, a PDF, a text file) and the second turn's image."""

    def up(name, data):
        return attachments.upload(alice, conversation.pk, SimpleUploadedFile(name, data))

    return {
        "image": up("build-error.png", sample_files.image("PNG", (1200, 900))),
        "pdf": up("spec.pdf", sample_files.pdf(1)),
        "text": up("notes.txt", NOTES.encode()),
        "later": up("after-fix.png", sample_files.image("PNG", (1200, 900))),
    }


async def send(user, conversation, text, reply_seq, files=()) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    data = {"action": "send", "message": text, "attachments": [f.pk for f in files]}
    await ws.send_to(text_data=json.dumps(data))
    frames = await receive_until(ws, shows(reply_seq, "complete"), timeout=15)
    await settle(conversation.pk)
    frames += await drain(ws)
    await ws.disconnect()
    return frames


async def compact_now(user, conversation) -> list[str]:
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: "Compacted (manual)" in f, timeout=15)
    await settle(conversation.pk)
    frames += await drain(ws)
    await ws.disconnect()
    return frames


async def drain(ws) -> list[str]:
    frames = []
    while not await ws.receive_nothing(timeout=0.3):
        frames.append(await ws.receive_from())
    return frames


async def two_turns(
    alice, conversation, fake_anthropic, uploads, *, usage=None, reply="I see a stack trace."
) -> list[str]:
    """Turn one gives the image, the PDF and the text file; turn two the later image. `usage`:
    what the server says the second request weighed (past the threshold: an auto compaction)."""
    fake_anthropic.enqueue_reply([reply])
    first = [uploads["image"], uploads["pdf"], uploads["text"]]
    await send(alice, conversation, "Here is the error.", 2, first)
    fake_anthropic.enqueue_reply(["Fixed, it seems."], usage=usage)
    return await send(alice, conversation, "And after the fix?", 4, [uploads["later"]])


def file_blocks(request: dict) -> list[dict]:
    return [
        b
        for m in request["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") in ("image", "document")
    ]


def texts(request: dict) -> str:
    return "\n".join(b.get("text", "") for m in request["messages"] for b in m["content"])


def data_of(attachment) -> str:
    with attachment.file.open("rb") as stored:
        return base64.b64encode(stored.read()).decode("ascii")


async def test_past_the_threshold_old_files_are_cleared_and_the_divider_counts_them(
    alice, conversation, fake_anthropic, uploads
):
    frames = await two_turns(
        alice, conversation, fake_anthropic, uploads, usage={"input_tokens": 12_500}
    )
    before = fake_anthropic.requests[-1]
    assert len(file_blocks(before)) == 4  # every file, as the API's blocks

    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.kind, row.status, row.trigger) == ("clear", "committed", "auto")
    assert row.cleared_count == 0 and row.cleared_before_seq == 3
    assert [(f["name"], f["kind"], f["seq"]) for f in row.files] == [
        ("build-error.png", "image", 1),
        ("spec.pdf", "PDF", 1),
        ("notes.txt", "text", 1),
    ]
    assert len(fake_anthropic.requests) == 2  # no summary request: clearing was enough
    page = "".join(frames)
    assert "Cleared 3 files</span>" in page  # no tool results to count
    assert f'href="/attachments/{uploads["image"].pk}/"' in page  # the divider links each

    fake_anthropic.enqueue_reply(["Sure."])
    await send(alice, conversation, "What now?", 6)
    after = fake_anthropic.requests[-1]
    assert fake_anthropic.invalid == []
    # Only the later image is still sent; the others are lines naming them.
    assert [b["source"]["data"] for b in file_blocks(after)] == [data_of(uploads["later"])]
    first = after["messages"][0]["content"]
    lines = [b["text"] for b in first if CLEARED_NOTE in b.get("text", "")]
    assert lines == [
        f"[image: build-error.png (#1), 1,440 tokens, {CLEARED_NOTE}]",
        f"[PDF: spec.pdf (#1), 3,000 tokens, {CLEARED_NOTE}]",
        f"[text: notes.txt (#1), {uploads['text'].tokens:,} tokens, {CLEARED_NOTE}]",
    ]
    # The transcript keeps every file.
    message = await Message.objects.aget(conversation=conversation, seq=1)
    assert [b["type"] for b in message.content] == ["text", "image", "document", "document"]


async def test_undoing_the_clearing_gives_the_model_its_files_back(
    alice, conversation, fake_anthropic, uploads
):
    await two_turns(alice, conversation, fake_anthropic, uploads, usage={"input_tokens": 12_500})
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="undo"))
    await receive_until(ws, lambda f: "Compaction undone" in f)
    await ws.disconnect()

    fake_anthropic.enqueue_reply(["Sure."])
    await send(alice, conversation, "What now?", 6)
    after = fake_anthropic.requests[-1]
    assert fake_anthropic.invalid == []
    assert len(file_blocks(after)) == 4
    assert CLEARED_NOTE not in texts(after)


async def test_a_fold_over_the_prefix_sees_the_files_and_its_divider_lists_them(
    alice, conversation, fake_anthropic, uploads
):
    await two_turns(alice, conversation, fake_anthropic, uploads)
    fake_anthropic.enqueue_reply(["<summary>## Files and code\n- (#1) a stack trace</summary>"])
    frames = await compact_now(alice, conversation)

    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.kind, row.status, row.summariser) == ("summary", "committed", "model")
    asked = fake_anthropic.requests[-1]
    assert fake_anthropic.invalid == []  # the summary request is a valid request
    # Over the cached prefix: the files as the chat request carried them, the folded ones too.
    assert len(file_blocks(asked)) == 4
    assert "[Summary request from the chat application" in texts(asked)
    assert "[image: build-error.png, 1200×900 px, 1,440 tokens]" in texts(asked)
    assert [f["name"] for f in row.files] == ["build-error.png", "spec.pdf", "notes.txt"]
    page = "".join(frames)
    assert "folded 3 files" in page
    for name in ("image", "pdf", "text"):
        upload = uploads[name]
        assert f'<a href="/attachments/{upload.pk}/">{upload.name}</a>' in page

    fake_anthropic.enqueue_reply(["Sure."])
    await send(alice, conversation, "What now?", 6)
    after = fake_anthropic.requests[-1]
    assert fake_anthropic.invalid == []
    assert [b["source"]["data"] for b in file_blocks(after)] == [data_of(uploads["later"])]


async def test_the_rule_based_brief_names_each_folded_file_with_what_it_held(
    alice, conversation, fake_anthropic, uploads, settings
):
    settings.SUMMARY_READS_CACHE = False  # a separate transcript: each file written as its label
    await two_turns(alice, conversation, fake_anthropic, uploads)
    fake_anthropic.enqueue_status(400, "invalid_request_error", "no summaries today")
    frames = await compact_now(alice, conversation)

    asked = fake_anthropic.requests[-1]
    assert file_blocks(asked) == []
    assert "[image: build-error.png, 1200×900 px, 1,440 tokens]" in texts(asked)
    assert "[PDF: spec.pdf, 1 page, 3,000 tokens]" in texts(asked)

    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.status, row.summariser) == ("committed", "rules")
    image, pdf = uploads["image"], uploads["pdf"]
    assert (
        f"[image: build-error.png (#1), 1200×900 px, {image.bytes / 1000:.1f} kB, 1,440 tokens, "
        f"attachment_id {image.pk}: read_attachment brings it back]" in row.summary
    )
    assert f"[PDF: spec.pdf (#1), 1 page, {pdf.bytes} bytes, 3,000 tokens" in row.summary
    # A text file's first lines, as its block keeps them (chat/attachments.block).
    assert "first lines: line 0: the staging port is 8443 / line 1: the staging" in row.summary
    assert "folded 3 files" in "".join(frames)

    fake_anthropic.enqueue_reply(["Sure."])
    await send(alice, conversation, "What now?", 6)
    after = fake_anthropic.requests[-1]
    assert fake_anthropic.invalid == []
    assert "[image: build-error.png (#1), " in after["messages"][0]["content"][0]["text"]


async def test_files_cleared_before_are_still_named_when_their_span_is_folded(
    alice, conversation, fake_anthropic, uploads
):
    reply = "I see a stack trace. " + " ".join(f"detail{i}" for i in range(1000))
    await two_turns(
        alice, conversation, fake_anthropic, uploads, usage={"input_tokens": 12_500}, reply=reply
    )
    fake_anthropic.enqueue_status(400, "invalid_request_error", "no summaries today")
    frames = await compact_now(alice, conversation)

    rows = [r async for r in Compaction.objects.filter(conversation=conversation).order_by("id")]
    assert [(r.kind, r.status) for r in rows] == [("clear", "committed"), ("summary", "committed")]
    folded = rows[-1]
    assert [f["name"] for f in folded.files] == ["build-error.png", "spec.pdf", "notes.txt"]
    assert "[image: build-error.png (#1), 1200×900 px" in folded.summary
    assert "[PDF: spec.pdf (#1), 1 page" in folded.summary
    assert "folded 3 files" in "".join(frames)


async def test_a_pinned_file_rides_verbatim_through_the_fold(
    alice, conversation, fake_anthropic, uploads
):
    # A long first reply: with the first message pinned, it is what the summary folds.
    reply = "I see a stack trace. " + " ".join(f"detail{i}" for i in range(1000))
    await two_turns(alice, conversation, fake_anthropic, uploads, reply=reply)
    first = await Message.objects.aget(conversation=conversation, seq=1)
    await sync_to_async(set_pinned)(alice, first.pk, True)
    fake_anthropic.enqueue_reply(["<summary>## Current work\nA fix.</summary>"])
    await compact_now(alice, conversation)
    row = await Compaction.objects.aget(conversation=conversation)
    assert row.status == "committed" and row.first_kept_seq == 3
    assert row.files == []  # nothing folded: the pinned message keeps its files

    fake_anthropic.enqueue_reply(["Sure."])
    await send(alice, conversation, "What now?", 6)
    after = fake_anthropic.requests[-1]
    assert fake_anthropic.invalid == []
    head = after["messages"][0]["content"]
    assert "<summary>" in head[0]["text"]
    # In the summary message, after its text: the pinned message's files as the API's blocks.
    image = next(b for b in head if b.get("type") == "image")
    assert image["source"]["data"] == data_of(uploads["image"])
    assert [b.get("title") for b in head if b.get("type") == "document"] == [
        "spec.pdf",
        "notes.txt",
    ]
    # The model view shows them with the summary; the meter counts them as files, not as the
    # summary's words.
    from django.test import Client

    viewer = Client()
    await sync_to_async(viewer.force_login)(alice)
    page = await sync_to_async(viewer.get)(f"/conversations/{conversation.pk}/window/")
    view = page.content.decode()
    assert "Summary of the earlier turns" in view
    assert view.count('class="window-file"') == 4  # the three pinned, the later image kept
    conversation = await Conversation.objects.aget(pk=conversation.pk)
    state = await sync_to_async(load_window)(conversation)
    panel = await sync_to_async(load_figures)(conversation, state)
    pinned = sum(uploads[name].tokens for name in ("image", "pdf", "text"))
    assert panel.files_tokens == pinned + state.file_tokens
    assert panel.summary_tokens == state.head_tokens - panel.system_tokens - pinned


async def test_the_offline_demo_gets_a_cleared_file_back_with_read_attachment(
    alice, conversation, settings
):
    # The model is the offline demo: it reads the line clearing left and asks for the file.
    registry.register(DemoClient())
    settings.CONTEXT_BUDGET_TOKENS = 2_000  # threshold 1,200: two screenshots pass it

    def up(name):
        data = sample_files.image("PNG", (800, 600))
        return attachments.upload(alice, conversation.pk, SimpleUploadedFile(name, data))

    first, second = await sync_to_async(up)("build-error.png"), await sync_to_async(up)("b.png")
    await send(alice, conversation, "Here is the error.", 2, [first])
    await send(alice, conversation, "And after the fix?", 4, [second])
    row = await Compaction.objects.aget(conversation=conversation)
    assert (row.kind, [f["name"] for f in row.files]) == ("clear", ["build-error.png"])

    await send(alice, conversation, "What did build-error.png show?", 6)
    reply = await Message.objects.aget(conversation=conversation, seq=6)
    call, result = reply.content[1], reply.content[2]
    assert call["name"] == "read_attachment"
    assert call["input"] == {"seq": 1, "name": "build-error.png"}
    assert result["content"][1]["attachment"]["id"] == first.pk
    assert reply.content[-1]["text"].startswith("I read it again with read_attachment:")
