"""A round trip loses nothing: a conversation made through the real paths (sends, one with an
image, a PDF and a text file, a turn with a tool call, versions by regenerate and edit, a switch
back, pins, three compactions with one undone) is exported, imported and exported again, and the
two exports hold the same messages, files, branches, pins, boundaries and dates (ids aside). The
copy's meter is right at once, its title says it is an import, and a ChatGPT conversation keeps
its own dates."""

from __future__ import annotations

import copy
import html
import json
import shutil
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile

from chat import attachments, transcript
from chat.models import Attachment, Conversation, Message
from chat.sidebar import TODAY
from chat.window_loading import load_window
from compaction.models import Compaction
from support.waiting import settle
from tests import sample_files
from tests.conftest import frame, receive_until, shows, socket_for
from tests.test_import import chatgpt_conversation
from tests.test_import_fuzz import OWN, REASON

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

WORDS = " ".join(f"word{i}" for i in range(120))  # about 300 tokens a message
FILE_TOKENS = 80 + 3_000 + 13  # the image (300 x 200 px / 750), the PDF's page, the text file


@pytest.fixture(autouse=True)
def small_budget(settings):
    # The whole transcript is over the budget; the window, compacted, is well under it.
    settings.CONTEXT_BUDGET_TOKENS = 3_000
    settings.AUTO_COMPACT_AT = 0.95
    settings.KEEP_TAIL_SHARE = 0.25


def summary(n: int) -> list[str]:
    return [f"<summary>\n## Primary request and intent\nSummary number {n}.\n</summary>"]


async def until(ws, predicate) -> None:
    await receive_until(ws, predicate, timeout=15)


@pytest.fixture(autouse=True)
def empty_storage():
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)
    yield
    shutil.rmtree(storages["attachments"].location, ignore_errors=True)


FILES = [
    ("build-error.png", sample_files.image("PNG", (300, 200))),
    ("spec.pdf", sample_files.pdf(1)),
    ("notes.md", "# Notes\nThe port is 8443, “not 443”.\n".encode()),
]


def uploads(user, conversation) -> list[int]:
    return [
        attachments.upload(user, conversation.pk, SimpleUploadedFile(name, data)).pk
        for name, data in FILES
    ]


async def send(
    ws, conversation, fake, text: str, reply_seq: int, reply: str = "", files=()
) -> None:
    if reply:
        fake.enqueue_reply([reply])
    sent = frame(action="send", message=f"{text} {WORDS}", attachments=list(files))
    await ws.send_to(text_data=sent)
    await until(ws, shows(reply_seq, "complete"))
    await settle(conversation.pk)


async def compact(ws, conversation, fake, n: int) -> None:
    fake.enqueue_reply(summary(n))
    before = await Compaction.objects.filter(status="committed").acount()
    await ws.send_to(text_data=frame(action="compact"))
    await until(ws, lambda f: 'class="divider committed' in f)
    await settle(conversation.pk)
    assert await Compaction.objects.filter(status="committed").acount() == before + 1


async def pin(client, conversation, seq: int) -> None:
    message = await Message.objects.aget(conversation=conversation, seq=seq)
    response = await sync_to_async(client.post)(f"/messages/{message.pk}/pin/", {"pinned": "1"})
    assert response.status_code == 200


async def build(client, alice, conversation, fake) -> None:
    """The conversation, through the socket and the pin view, as a person makes it: its first
    message, pinned, carries the files, so they ride in every window too."""
    files = await sync_to_async(uploads)(alice, conversation)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await send(ws, conversation, fake, "Plan a trip", 2, f"Lisbon. {WORDS}", files)
    fake.enqueue_tool_calls(["Let me look."], [("toolu_1", "search_history", {"query": "trip"})])
    fake.enqueue_reply([f"Found it. {WORDS}"])
    await send(ws, conversation, fake, "What did I plan?", 4)
    await compact(ws, conversation, fake, 1)  # folds 1-2
    await send(ws, conversation, fake, "And the hotel?", 6, f"Alfama. {WORDS}")
    await send(ws, conversation, fake, "And the food?", 8, f"Bacalhau. {WORDS}")
    await compact(ws, conversation, fake, 2)
    await ws.send_to(text_data=frame(action="undo"))
    await until(ws, lambda f: 'class="divider undone' in f)
    await settle(conversation.pk)
    await compact(ws, conversation, fake, 3)
    await send(ws, conversation, fake, "And the weather?", 10, f"Sunny. {WORDS}")
    # Versions: the reply asked again (11), the question edited (12, answered by 13), then the
    # first question shown again: its branch ends at its newest reply, 11 ("2 / 2").
    fake.enqueue_reply([f"Warm. {WORDS}"])
    await ws.send_to(text_data=frame(action="reply_again", message=10))
    await until(ws, shows(11, "complete"))
    await settle(conversation.pk)
    fake.enqueue_reply([f"Cold at night. {WORDS}"])
    await ws.send_to(text_data=frame(action="edit", message=9, text=f"And at night? {WORDS}"))
    await until(ws, shows(13, "complete"))
    await settle(conversation.pk)
    await ws.send_to(text_data=frame(action="switch", message=12, to=9))
    await until(ws, lambda f: 'innerHTML:#transcript"' in f)
    await ws.disconnect()
    await pin(client, conversation, 1)  # before the boundary: carried in the window's head
    await pin(client, conversation, 9)


def exported(client, conversation_id: int) -> dict:
    response = client.get(f"/conversations/{conversation_id}/export.json")
    assert response.status_code == 200
    return json.loads(
        b"".join(response.streaming_content) if response.streaming else response.content
    )


def comparable(doc: dict) -> dict:
    """An export with its ids aside: a message names its boundary by its place in the list."""
    place = {c["id"]: i for i, c in enumerate(doc["compactions"])}
    return {
        "created_at": doc["created_at"],
        "updated_at": doc["updated_at"],
        "system_prompt": doc["system_prompt"],
        "branch_end": doc["branch_end"],
        "compactions": [
            {k: v for k, v in c.items() if k not in ("id", "imported")}
            # The files a boundary lists, but their uploads' ids (new ones on import).
            | {"files": [{**f, "id": None} for f in c.get("files", [])]}
            for c in doc["compactions"]
        ],
        "messages": [
            {k: v for k, v in m.items() if k != "usage"}
            | {"window_boundary": place.get(m["window_boundary"])}
            for m in doc["messages"]
        ],
        "window": doc["window"],
    }


def shown(conversation: Conversation) -> list[tuple]:
    """What the page shows: the messages and dividers in order, with the versions' places."""
    page = transcript.page(conversation, before=None, limit=100)
    return [
        ("message", i.message.seq, i.versions and (i.versions.index, i.versions.count), i.pinned)
        if i.kind == "message"
        else ("divider", i.compaction.status, i.compaction.first_kept_seq)
        for i in page.items
    ]


async def test_export_import_export_gives_the_same_conversation(
    client, alice, conversation, fake_anthropic, settings
):
    # The files (a PDF page alone is 3,000 tokens) ride in every window: the budget grows by
    # what they cost, and the rest of the conversation is over it and compacted as before.
    settings.CONTEXT_BUDGET_TOKENS = 3_000 + FILE_TOKENS
    await sync_to_async(client.force_login)(alice)
    await build(client, alice, conversation, fake_anthropic)
    first = await sync_to_async(exported)(client, conversation.pk)
    # The conversation is what the test means it to be.
    assert len(first["messages"]) == 13 and first["branch_end"] == 11
    assert [c["status"] for c in first["compactions"]] == ["committed", "undone", "committed"]
    assert [m["seq"] for m in first["messages"] if m["pinned"]] == [1, 9]
    # Each boundary counted the key facts its summary kept ("Summary number 1." keeps none).
    facts = first["compactions"][0]["facts"]
    assert facts["total"] > 0 and facts["kept"] + len(facts["lost"]) == facts["total"]
    # Each summary names the model that wrote it (the import keeps it: compared below).
    written = {c["summary_model"] for c in first["compactions"] if c["summariser"] == "model"}
    assert written == {conversation.model}
    assert any(b["type"] == "tool_use" for b in first["messages"][3]["content"])
    assert sum(m["tokens"] for m in first["messages"]) > 3_000 + FILE_TOKENS  # over, whole
    files = first["messages"][0]["content"][1:]
    assert [(b["type"], b["source"]["type"], b["title"]) for b in files] == [
        ("image", "base64", "build-error.png"),
        ("document", "base64", "spec.pdf"),
        ("document", "text", "notes.md"),
    ]
    assert files[2]["source"]["data"] == FILES[2][1].decode()

    upload = SimpleUploadedFile("export.json", json.dumps(first).encode())
    response = await sync_to_async(client.post)("/conversations/import/", {"file": upload})
    assert response.status_code == 302, response.content.decode()[:500]
    copy = await Conversation.objects.exclude(pk=conversation.pk).aget(owner=alice)
    again = await sync_to_async(exported)(client, copy.pk)

    assert comparable(again) == comparable(first)  # the files' bytes, names and places too
    copied = [a async for a in Attachment.objects.filter(conversation=copy).order_by("pk")]
    message = await Message.objects.aget(conversation=copy, seq=1)
    assert [(a.name, a.message_id) for a in copied] == [(n, message.pk) for n, _ in FILES]
    assert sum(a.tokens for a in copied) == FILE_TOKENS
    assert [b["attachment"]["id"] for b in message.content[1:]] == [a.pk for a in copied]
    assert again["title"] == f"Imported: {first['title']}"
    assert all(c["imported"] for c in again["compactions"])
    original = await Conversation.objects.aget(pk=conversation.pk)
    assert await sync_to_async(shown)(copy) == await sync_to_async(shown)(original)

    # The meter reads the window the copy's next request carries, at once, as the original's.
    window = await sync_to_async(load_window)(copy)
    assert window.tokens == first["window"]["tokens"] < 3_000 + FILE_TOKENS
    page = (await sync_to_async(client.get)(f"/conversations/{copy.pk}/")).content.decode()
    assert f'data-tokens="{first["window"]["tokens"]}"' in page
    assert f"Imported: {first['title']}" in page
    assert page.count('<span class="badge">imported</span>') == 3  # on each divider


def test_a_chatgpt_conversation_keeps_its_own_dates(client, alice):
    old = chatgpt_conversation("Old chat", [("user", ["hi"]), ("assistant", ["hello"])])
    old |= {"create_time": 1_700_000_000.5, "update_time": 1_700_000_100}
    client.force_login(alice)
    raw = json.dumps([old]).encode()
    response = client.post(
        "/conversations/import/", {"file": SimpleUploadedFile("conversations.json", raw)}
    )
    assert response.status_code == 302
    copy = Conversation.objects.get(owner=alice)
    assert copy.created_at == datetime.fromtimestamp(1_700_000_000.5, UTC)
    assert copy.updated_at == datetime.fromtimestamp(1_700_000_100, UTC)
    assert [m.created_at for m in copy.messages.order_by("seq")] == [
        datetime.fromtimestamp(1_700_000_000, UTC),
        datetime.fromtimestamp(1_700_000_001, UTC),
    ]
    sidebar = client.get("/sidebar/", HTTP_HX_REQUEST="true").content.decode()
    assert "Imported: Old chat" in sidebar
    assert TODAY not in sidebar  # under its own day (older), not today's


# --- what the new fields refuse ------------------------------------------------------------------


def changed(change) -> bytes:
    doc = copy.deepcopy(OWN)
    change(doc)
    return json.dumps(doc).encode()


def compaction_like(doc, **fields) -> dict:
    return {**doc["compactions"][0], "id": 8, **fields}


REFUSED = {
    "a malformed date": (
        lambda d: d["messages"][0].update(created_at="2024-02-30T10:00:00"),
        "Message 1's created_at is '2024-02-30T10:00:00'; it must be a date",
    ),
    "a boundary naming a message not in the file": (
        lambda d: d["compactions"][0].update(first_kept_seq=9),
        "A compaction names message #9, and the file holds 3 messages",
    ),
    "a boundary out of order": (
        lambda d: d["compactions"].append(
            compaction_like(d, first_kept_seq=1, created_at="2024-05-01T13:00:00+00:00")
        ),
        "Compaction 2 keeps messages from #1, before #2",
    ),
    "a boundary dated before the one listed before it": (
        lambda d: d["compactions"].append(
            compaction_like(d, created_at="2024-05-01T11:00:00+00:00")
        ),
        "Compaction 2 is dated before the one listed before it",
    ),
    "two compactions with one id": (
        lambda d: d["compactions"].append({**d["compactions"][0]}),
        "Compaction 2 has the id 7 of another one",
    ),
    "a committed summary that is empty": (
        lambda d: d["compactions"][0].update(summary=" "),
        "Compaction 1 is committed with an empty summary",
    ),
    "a window sent under a compaction the file does not list": (
        lambda d: d["messages"][1].update(window_boundary=8),
        "Message 2's window_boundary is 8: the file lists no compaction with that id",
    ),
    "a parent listed after its message": (
        lambda d: d["messages"][1].update(parent=3),
        "Message 2's parent is 3; it must be the seq of a message listed before it",
    ),
    "a branch ending past the file": (
        lambda d: d.update(branch_end=4),
        "The branch_end is 4; it must be the seq of a message in the file (1 to 3)",
    ),
    "a pin that is not true or false": (
        lambda d: d["messages"][0].update(pinned="yes"),
        "Message 1's pinned is a string; it must be true or false",
    ),
    "facts that do not add up": (
        lambda d: d["compactions"][0].update(facts={"total": 3, "kept": 1, "lost": ["port 1"]}),
        '"lost" must list the others, one string each',
    ),
    "compactions that are not a list": (
        lambda d: (d.update(compactions={"id": 7}), d["messages"][1].pop("window_boundary")),
        '"compactions" is an object; it must be a list of compactions',
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_bad_version_pin_boundary_or_date_is_a_400_with_its_reason(client, alice, case):
    change, reason = REFUSED[case]
    client.force_login(alice)
    response = upload_raw(client, changed(change))
    assert response.status_code == 400
    assert reason in html.unescape(REASON.search(response.content.decode()).group(1))
    assert not Conversation.objects.exists() and not Compaction.objects.exists()


def test_a_chatgpt_date_that_is_not_seconds_is_a_400(client, alice):
    bad = chatgpt_conversation("Old", [("user", ["hi"])]) | {"create_time": "yesterday"}
    client.force_login(alice)
    response = upload_raw(client, json.dumps([bad]).encode())
    assert response.status_code == 400
    assert "The create_time of conversation 1 is 'yesterday'" in html.unescape(
        response.content.decode()
    )


def test_an_export_listing_its_compactions_last_keeps_them_and_its_pins(client, alice):
    """Exports written before compactions came first (and hand-made files) still import whole:
    only `window_boundary`, which names a compaction, needs it listed before."""
    doc = copy.deepcopy(OWN)
    doc["messages"][1].pop("window_boundary")
    doc = {k: v for k, v in doc.items() if k != "compactions"} | {"compactions": doc["compactions"]}
    client.force_login(alice)
    assert upload_raw(client, json.dumps(doc).encode()).status_code == 302
    copy_ = Conversation.objects.get(owner=alice)
    boundary = Compaction.objects.get(conversation=copy_)
    assert (boundary.status, boundary.first_kept_seq, boundary.imported) == ("committed", 2, True)
    assert boundary.created_at == datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert [m.seq for m in copy_.messages.filter(pin__isnull=False)] == [1]
    assert (copy_.created_at, copy_.updated_at) == (
        datetime(2024, 5, 1, 12, tzinfo=UTC),
        datetime(2024, 5, 2, 12, tzinfo=UTC),
    )


def upload_raw(client, raw: bytes):
    return client.post("/conversations/import/", {"file": SimpleUploadedFile("x.json", raw)})


def test_a_pin_on_a_version_folded_away_off_the_branch_is_not_restored(client, alice):
    """As a compaction unpins those (they would ride in every window, out of reach): the app
    never exports one, a hand-made file may hold one."""
    doc = copy.deepcopy(OWN)
    doc["messages"][1].update(pinned=True)  # the reply to message 1, left off the branch:
    doc["messages"][2].update(parent=1)  # message 3 follows message 1, not 2
    doc["compactions"][0].update(first_kept_seq=3)  # and the boundary folds 1 and 2 away
    client.force_login(alice)
    assert upload_raw(client, json.dumps(doc).encode()).status_code == 302
    copy_ = Conversation.objects.get(owner=alice)
    assert [m.seq for m in copy_.messages.filter(pin__isnull=False)] == [1]
    assert load_window(copy_).window().messages[0]["content"][0]["text"].count("Plan a trip")
