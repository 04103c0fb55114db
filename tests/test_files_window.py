"""Files in the window, in plain sight (docs/files.md): the meter's Files segment is the files the
request carried, as estimated, and follows the usage the server reports as the text does; the
model view shows each file where the model gets it; a turn's queries do not grow with the files
earlier turns sent."""

from __future__ import annotations

import base64
import json
import re
import shutil

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient

from chat import attachments
from chat.models import Attachment, Message
from compaction.assembly import Window
from providers.tokens import estimate_content
from render import window_view
from support.queries import all_queries
from support.waiting import settle
from tests import sample_files
from tests.conftest import receive_until, shows, socket_for
from tests.transcripts import text_block

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

FILE_LINE = re.compile(r'<p class="window-file"><a href="/attachments/(\d+)/"[^>]*>([^<]*)</a>')
LEGEND = re.compile(r'<span class="swatch seg-(\w+)"></span>[^<]*<span class="num">([\d,]+)</span>')


@pytest.fixture(autouse=True)
def empty_storage(fresh_runtime):
    # The periodic sweep is process-wide work, not a turn's: kept out of the query counts.
    fresh_runtime.background = False
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


def uploaded(user, conversation, name: str, data: bytes) -> Attachment:
    return attachments.upload(user, conversation.pk, SimpleUploadedFile(name, data))


@pytest.fixture
def three_files(alice, conversation):
    return [
        uploaded(alice, conversation, "build-error.png", sample_files.image("PNG", (800, 600))),
        uploaded(alice, conversation, "spec.pdf", sample_files.pdf(2)),
        uploaded(alice, conversation, "notes<b>.md", b"# Notes\nThe port is 8443.\n"),
    ]


async def send(user, conversation, message: str, files: list[Attachment] = ()) -> None:
    """Send through the real consumer and wait for the reply and what follows it."""
    seq = await Message.objects.filter(conversation=conversation).acount() + 2
    ws = socket_for(user, conversation.pk)
    await ws.connect()
    frame = {"action": "send", "message": message, "attachments": [f.pk for f in files]}
    await ws.send_to(text_data=json.dumps(frame))
    await receive_until(ws, shows(seq, "complete"), timeout=15)
    await settle(conversation.pk)
    await ws.disconnect()


async def page(user, url: str) -> tuple[int, str]:
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get(url)
    return response.status_code, response.content.decode()


async def meter(user, conversation) -> tuple[dict[str, int], int]:
    """The context panel's segments (from its legend) and the window's total."""
    _, html = await page(user, f"/conversations/{conversation.pk}/context/")
    segments = {key: int(value.replace(",", "")) for key, value in LEGEND.findall(html)}
    total = int(re.search(r'id="window-tokens" data-tokens="(\d+)"', html)[1])
    return segments, total


def carried(request: dict, uploads: list[Attachment]) -> list[Attachment]:
    """The uploads whose API blocks the request carried: an image by its bytes, a document by
    its title."""
    found = []
    for message in request["messages"]:
        for block in message["content"]:
            if block["type"] == "image":
                data = base64.b64decode(block["source"]["data"])
                found += [u for u in uploads if stored(u) == data]
            elif block["type"] == "document":
                found += [u for u in uploads if u.name == block["title"]]
    return found


def stored(upload: Attachment) -> bytes:
    with upload.file.open("rb") as f:
        return f.read()


def without_reserve(segments: dict[str, int]) -> int:
    return sum(v for k, v in segments.items() if k != "reserve")


async def test_the_files_segment_is_the_files_the_request_carried(
    alice, conversation, fake_anthropic, three_files
):
    # No usage reported: the window is all estimates, so the segment is the uploads' own.
    fake_anthropic.enqueue_without_usage(["Seen."])
    await send(alice, conversation, "What do these say?", three_files)

    sent = await sync_to_async(carried)(fake_anthropic.requests[-1], three_files)
    assert sorted(u.pk for u in sent) == sorted(u.pk for u in three_files)
    segments, total = await meter(alice, conversation)
    assert segments["files"] == sum(u.tokens for u in sent) > 0
    assert without_reserve(segments) == total  # the parts still make the whole


async def test_a_conversation_without_files_has_no_files_segment(
    alice, conversation, fake_anthropic
):
    fake_anthropic.enqueue_without_usage(["Hello."])
    await send(alice, conversation, "Hi")
    segments, total = await meter(alice, conversation)
    assert "files" not in segments
    assert list(segments) == ["system", "summary", "history", "reserve"]
    assert without_reserve(segments) == total


@pytest.mark.parametrize("reported", [20_000, 1_000])
async def test_the_files_segment_follows_the_usage_the_server_reports(
    alice, conversation, fake_anthropic, three_files, settings, reported
):
    """The server counts the request as one number: the messages' share of it is split between
    their files and their text as their estimates were, over or under."""
    settings.CONTEXT_BUDGET_TOKENS = 200_000
    fake_anthropic.enqueue_reply(["Seen."], usage={"input_tokens": reported, "output_tokens": 3})
    await send(alice, conversation, "What do these say?", three_files)

    segments, total = await meter(alice, conversation)
    assert total == reported + 3 + 4  # the usage, and the reply's framing as it re-enters
    assert without_reserve(segments) == total
    estimated = sum([m.tokens async for m in Message.objects.filter(conversation=conversation)])
    files = sum(u.tokens for u in three_files)
    kept = segments["history"] + segments["files"]
    assert segments["files"] == pytest.approx(kept * files / estimated, abs=1)
    # Corrected, not the estimate: up with a larger count, down with a smaller.
    assert (segments["files"] > files) == (kept > estimated)


async def test_the_model_view_shows_each_file_where_the_model_gets_it(
    alice, bob, conversation, fake_anthropic, three_files
):
    image, pdf, text = three_files
    fake_anthropic.enqueue_without_usage(["Seen."])
    await send(alice, conversation, "What do these say?", [text, image])

    status, html = await page(alice, f"/conversations/{conversation.pk}/window/")
    assert status == 200
    lines = FILE_LINE.findall(html)
    assert lines == [
        (str(text.pk), f"text: notes&lt;b&gt;.md, {text.tokens:,} tokens"),
        (str(image.pk), f"image: build-error.png, 800×600 px, {image.tokens:,} tokens"),
    ]
    # In its message's place: after the words it came with, before the reply.
    assert html.index("What do these say?") < html.index("window-file") < html.index("Seen.")
    assert "notes<b>" not in html
    assert str(pdf.pk) not in [pk for pk, _ in lines]  # never sent: not in the window
    assert (await page(bob, f"/conversations/{conversation.pk}/window/"))[0] == 404
    assert (await page(bob, f"/attachments/{image.pk}/"))[0] == 404


def read_back(conversation, upload: Attachment) -> None:
    """A turn whose tool result gives a file back, as `read_attachment` stores it."""
    start = conversation.messages.count() + 1
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_attachment", "input": {"id": 1}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "Here it is."}, attachments.block(upload)],
    }
    reply = [*text_block("Looking again."), call, result, *text_block("It says 8443.")]
    question = text_block("What did the notes say?")
    for seq, role, content in [(start, "user", question), (start + 1, "assistant", reply)]:
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            role=role,
            content=content,
            tokens=estimate_content(content),
        )
    conversation.leaf_seq = start + 1
    conversation.save(update_fields=["leaf_seq"])


async def test_a_file_a_tool_result_gives_back_counts_and_shows_in_that_result(
    alice, conversation, fake_anthropic, three_files
):
    image, _, text = three_files
    fake_anthropic.enqueue_without_usage(["Seen."])
    await send(alice, conversation, "Look.", [image])
    await sync_to_async(read_back)(conversation, text)

    segments, _ = await meter(alice, conversation)
    assert segments["files"] == image.tokens + text.tokens
    _, html = await page(alice, f"/conversations/{conversation.pk}/window/")
    after_call = html[html.index('data-tool="read_attachment"') :]
    assert f'href="/attachments/{text.pk}/"' in after_call
    assert after_call.index(f"/attachments/{text.pk}/") < after_call.index("It says 8443.")


async def test_a_turns_queries_do_not_grow_with_earlier_turns_that_sent_files(
    alice, conversation, fake_anthropic, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 200_000
    counts = []
    for earlier in (1, 4):
        while await Message.objects.filter(conversation=conversation).acount() < 2 * earlier:
            picture = sample_files.image("PNG", (400 + earlier, 300))
            upload = await sync_to_async(uploaded)(alice, conversation, "shot.png", picture)
            fake_anthropic.enqueue_without_usage(["Seen."])
            await send(alice, conversation, "And this one?", [upload])
        fake_anthropic.enqueue_without_usage(["Noted."])
        with all_queries() as seen:
            await send(alice, conversation, "Anything else?")
        counts.append(len(seen))
        segments, _ = await meter(alice, conversation)
        assert segments["files"] > 0
    assert counts[0] == counts[1], counts


def test_a_file_block_no_upload_backs_is_named_without_a_link():
    """An old row or an import may hold a block whose id is not an upload's: named, no link."""
    meta = {"id": "12", "name": "old.png", "media_type": "image/png", "tokens": 40}
    message = {"role": "user", "content": [{"type": "image", "attachment": meta}]}
    window = Window(system="", messages=[message])
    [shown] = window_view.window_messages(window)
    assert '<p class="window-file">image: old.png, 40 tokens</p>' in shown.html
    assert "href" not in shown.html
