"""An import writes in batches yet shows all or nothing: its conversations are staged, out of
every view of its owner's until it ends; a file found bad after many batches leaves nothing; an
import whose process died is cleared by the next one. Also: a message too large for
PostgreSQL's tsvector imports and is searchable by its start, and 100,000 messages import."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.imports import importing
from chat.imports.history import Said
from chat.imports.schema import Imported
from chat.models import Conversation, Import, Message
from chat.search_index import INDEXED_CHARS
from tests.test_import import chatgpt_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def upload(client, payload):
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return client.post("/conversations/import/", {"file": SimpleUploadedFile("x.json", raw)})


def turns(n: int, word: str = "plain") -> list[dict]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{word} message {i}"}
        for i in range(n)
    ]


def inserts(queries) -> int:
    """Batches of messages written (an executemany is logged as "500 times: INSERT ...")."""
    return sum('INSERT INTO "chat_message"' in q["sql"] for q in queries)


def test_a_file_bad_at_its_end_leaves_nothing_of_the_batches_written_before(client, alice):
    client.force_login(alice)
    messages = turns(4 * importing.BATCH_MESSAGES) + [{"role": "user", "content": 42}]
    with CaptureQueriesContext(connection) as queries:
        response = upload(client, {"title": "Half", "messages": messages})
    assert response.status_code == 400 and "message 2001" in response.content.decode()
    assert inserts(queries.captured_queries) == 4  # four batches were written, then deleted
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert not Import.objects.exists()


def test_a_chatgpt_file_bad_in_its_last_conversation_leaves_none(client, alice):
    client.force_login(alice)
    good = [
        chatgpt_conversation(f"Good {n}", [("user", [f"q{n} " * 300]), ("assistant", ["a"])])
        for n in range(600)
    ]
    bad = chatgpt_conversation("Bad", [("user", ["hi"])])
    bad["mapping"]["n0"]["parent"] = 7
    with CaptureQueriesContext(connection) as queries:
        response = upload(client, [*good, bad])
    assert response.status_code == 400 and "conversation 601" in response.content.decode()
    assert inserts(queries.captured_queries) >= 2
    assert not Conversation.objects.exists() and not Message.objects.exists()


def staged(alice, word: str) -> tuple[Import, importing.Staging]:
    """An import halfway: begun, one conversation written in a batch, not finished."""
    run = importing.begin(alice)
    staging = importing.Staging(run, alice)
    item = Imported(title=f"Staged {word}")
    conversation = staging.conversation(item)
    for role in ("user", "assistant"):
        staging.message(conversation, Said(role, [{"type": "text", "text": f"{word} here"}]))
    staging.flush()
    return run, staging


def test_staged_conversations_are_seen_nowhere_until_the_import_ends(client, alice):
    client.force_login(alice)
    run, staging = staged(alice, "zebra")
    pk = staging.first
    assert Message.objects.filter(conversation_id=pk).count() == 2  # written, but staged

    def seen() -> dict:
        return {
            "home": "Staged zebra" in client.get("/", follow=True).content.decode(),
            "sidebar": "Staged zebra"
            in client.get("/sidebar/", HTTP_HX_REQUEST="true").content.decode(),
            "search": "Staged zebra" in client.get("/search/?q=zebra").content.decode(),
            "page": client.get(f"/conversations/{pk}/").status_code == 200,
            "export": client.get(f"/conversations/{pk}/export.json").status_code == 200,
        }

    assert not any(seen().values()), seen()
    restore = client.post(f"/conversations/{pk}/restore/")
    assert restore.status_code in (302, 400, 404)
    assert Conversation.objects.get(pk=pk).deleted_at is not None  # an undo does not show it
    importing.finish(run, staging)
    assert all(seen().values()), seen()
    assert not Import.objects.exists()


def test_a_second_import_while_one_runs_is_refused_and_the_first_goes_on(client, alice):
    client.force_login(alice)
    run, staging = staged(alice, "first")
    response = upload(client, {"messages": turns(2)})
    assert response.status_code == 429
    assert "still running" in response.content.decode()
    importing.finish(run, staging)
    assert Conversation.objects.filter(owner=alice).count() == 1
    assert upload(client, {"messages": turns(2)}).status_code == 302


def test_an_import_left_by_a_dead_process_is_cleared_by_the_next(client, alice, bob):
    run, staging = staged(alice, "orphan")
    Import.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - importing.STALE_AFTER - timezone.timedelta(seconds=1)
    )
    client.force_login(bob)
    assert upload(client, {"messages": turns(2)}).status_code == 302
    assert not Conversation.objects.filter(owner=alice).exists()
    assert not Message.objects.filter(conversation__owner=alice).exists()
    assert not Import.objects.exists()
    # Had its process only been slow, its next batch stops it, and it clears nothing of bob's.
    late = staging.conversation(Imported(title="late"))
    staging.message(late, Said("user", [{"type": "text", "text": "x"}]))
    with pytest.raises(importing.ActionError, match="stopped for too long"):
        staging.flush()
    assert Conversation.objects.filter(owner=bob).count() == 1


def test_a_message_too_large_for_a_tsvector_imports_and_is_found_by_its_start(client, alice):
    """1.5 MB of distinct words: PostgreSQL refused it whole ("string is too long for
    tsvector"); only the first INDEXED_CHARS characters are indexed now."""
    words = " ".join(f"w{n:07d}x" for n in range(170_000))
    assert len(words) > 1_500_000
    client.force_login(alice)
    response = upload(client, {"messages": [{"role": "user", "content": f"aardvark {words}"}]})
    assert response.status_code == 302
    message = Message.objects.get(conversation__owner=alice)
    assert len(message.text) > 1_500_000 and len(message.search_text) == INDEXED_CHARS
    search = f"/conversations/{message.conversation_id}/search.json?q="
    assert len(client.get(search + "aardvark").json()["hits"]) == 1
    assert client.get(search + "w0169999x").json()["hits"] == []  # past the cap


def test_a_hundred_thousand_messages_import_as_one_conversation(client, alice):
    client.force_login(alice)
    response = upload(client, {"title": "Long", "messages": turns(100_000)})
    assert response.status_code == 302
    conversation = Conversation.objects.get(owner=alice)
    assert conversation.title == "Imported: Long" and conversation.deleted_at is None
    assert conversation.messages.count() == 100_000
    assert conversation.messages.order_by("-seq").first().text == "plain message 99999"


@pytest.mark.usefixtures("channel_layer")
async def test_a_staged_conversation_takes_no_socket_until_the_import_ends(alice):
    from asgiref.sync import sync_to_async

    from tests.conftest import socket_for

    run, staging = await sync_to_async(staged)(alice, "socket")
    ws = socket_for(alice, staging.first)
    connected, _ = await ws.connect()
    assert not connected
    await sync_to_async(importing.finish)(run, staging)
    ws = socket_for(alice, staging.first)
    connected, _ = await ws.connect()
    assert connected
    await ws.disconnect()


def test_more_conversations_than_allowed_are_refused_as_they_are_read(client, alice, settings):
    settings.IMPORT_MAX_CONVERSATIONS = 3
    client.force_login(alice)
    five = [chatgpt_conversation(f"C{n}", [("user", ["hi"])]) for n in range(5)]
    response = upload(client, five)
    assert response.status_code == 400 and "more than 3 conversations" in response.content.decode()
    assert not Conversation.objects.exists() and not Import.objects.exists()
    assert upload(client, five[:3]).status_code == 302
