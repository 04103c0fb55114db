"""Messages' vectors: float16 rows written after the messages settle, by the engine's background
task or the backfill command, never by the turn itself."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command

from chat import vectors
from chat.models import Conversation, Message, MessageVector
from providers import embeddings
from support.fake_embeddings import ConceptEmbedder
from tests.test_per_turn_cost import compacted_conversation, one_turn

pytestmark = pytest.mark.django_db(transaction=True)

CONCEPTS = {"pets": "dog pet puppy", "art": "painting art abstracts", "turns": "turn more"}


@pytest.fixture
def embedder(fresh_runtime):
    fake = ConceptEmbedder(CONCEPTS)
    embeddings.register(fake)
    return fake


def add(conversation, *texts, status="complete"):
    for seq, text in enumerate(texts, start=conversation.messages.count() + 1):
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            status=status,
            content=[{"type": "text", "text": text}],
        )


def stored(conversation) -> dict[int, np.ndarray]:
    rows = MessageVector.objects.filter(message__conversation=conversation)
    return {
        row.message.seq: vectors.unpack([bytes(row.vector)], row.dimension)[0]
        for row in rows.select_related("message")
    }


async def test_settled_messages_get_float16_vectors_and_unsent_ones_wait(alice, embedder):
    conversation = await Conversation.objects.acreate(owner=alice, model="fake-model")
    await sync_to_async(add)(conversation, "my dog", "a painting")
    await sync_to_async(add)(conversation, "queued", status="queued")
    await sync_to_async(add)(conversation, "still streaming", status="streaming")
    embedded, floor = await vectors.embed_round()
    assert embedded == 2
    queued = await Message.objects.aget(status="queued")
    assert floor == queued.pk - 1  # the next round looks from the oldest unsettled message on
    rows = [row async for row in MessageVector.objects.order_by("message_id")]
    assert [(r.model, r.dimension, len(r.vector)) for r in rows] == [("fake-concepts", 3, 6)] * 2
    found = await sync_to_async(stored)(conversation)
    assert found[1].tolist() == [1, 0, 0] and found[2].tolist() == [0, 1, 0]
    assert (await vectors.embed_round(floor))[0] == 0  # nothing left: nothing embedded again
    await Message.objects.filter(status="streaming").aupdate(status="complete")
    # Settled later (or left by a dead process): found above the floor.
    assert await vectors.embed_round(floor) == (1, queued.pk - 1)
    await Message.objects.filter(status="queued").aupdate(status="cancelled")
    assert await vectors.embed_round(floor) == (
        0,
        await Message.objects.order_by("-pk").values_list("pk", flat=True).afirst(),
    )


async def test_a_vector_of_another_model_is_made_again(alice, embedder):
    conversation = await Conversation.objects.acreate(owner=alice, model="fake-model")
    await sync_to_async(add)(conversation, "my dog")
    await vectors.embed_round()
    embeddings.register(ConceptEmbedder({"a": "dog", "b": "cat", "c": "x", "d": "y"}, "other"))
    assert (await vectors.embed_round())[0] == 1
    row = await MessageVector.objects.aget()
    assert (row.model, row.dimension) == ("other", 4)


@pytest.mark.usefixtures("channel_layer")
async def test_a_plain_turn_runs_no_query_for_vectors_and_is_embedded_after(
    alice, settings, fake_llm, fresh_runtime
):
    fresh_runtime.background = False  # the count is the turn's own
    settings.CONTEXT_BUDGET_TOKENS = 50_000
    conversation = await sync_to_async(compacted_conversation)(alice, 10)
    await one_turn(alice, conversation, fake_llm)  # the first fills the process's caches
    without, _ = await one_turn(alice, conversation, fake_llm)
    embeddings.register(ConceptEmbedder(CONCEPTS))
    with_embedder, _ = await one_turn(alice, conversation, fake_llm)
    assert len(with_embedder) == len(without)
    assert not [q.sql for q in with_embedder if "messagevector" in q.sql]
    # After the turns committed: every message, the turns' own included.
    assert (await vectors.embed_round())[0] == await Message.objects.acount() == 26


@pytest.mark.usefixtures("channel_layer")
async def test_the_engine_embeds_what_settled_in_the_background(
    alice, settings, fake_llm, embedder
):
    settings.TURN_HEARTBEAT_SECONDS = 1
    conversation = await sync_to_async(compacted_conversation)(alice, 5)
    await one_turn(alice, conversation, fake_llm)
    async with asyncio.timeout(10):
        while await MessageVector.objects.acount() < 12:
            await asyncio.sleep(0.05)
    reply = await Message.objects.filter(role="assistant").order_by("-seq").afirst()
    assert reply.status == "complete"
    assert await MessageVector.objects.filter(message=reply, model="fake-concepts").aexists()


def test_embed_messages_backfills_in_batches_with_a_progress_bar(alice, embedder):
    conversation = Conversation.objects.create(owner=alice, model="fake-model")
    add(conversation, "my dog", "a painting", "puppy", "art", "pet")
    out, err = io.StringIO(), io.StringIO()
    call_command("embed_messages", batch=2, stdout=out, stderr=err)
    assert MessageVector.objects.count() == 5
    assert [len(batch) for batch in embedder.asked] == [2, 2, 1]
    bars = err.getvalue().split("\r")[1:]
    assert bars[0].startswith("[" + "#" * 12 + "." * 18 + "] 2/5 messages")
    assert bars[-1].startswith("[" + "#" * 30 + "] 5/5 messages")
    assert "Embedded 5 messages with fake-concepts" in out.getvalue()
    call_command("embed_messages", stdout=out, stderr=io.StringIO())
    assert "Embedded 0 messages" in out.getvalue()


def test_embed_messages_needs_a_model(settings, fresh_runtime):
    settings.EMBEDDINGS = "none"
    with pytest.raises(CommandError, match="EMBEDDINGS is none"):
        call_command("embed_messages")


async def test_an_import_is_embedded_once_it_has_committed(alice, embedder):
    from django.utils import timezone

    from chat.models import Import

    run = await Import.objects.acreate(owner=alice, heartbeat_at=timezone.now())
    staged = await Conversation.objects.acreate(
        owner=alice, model="fake-model", importing=run, deleted_at=timezone.now()
    )
    await sync_to_async(add)(staged, "my dog", "a painting", "a puppy")
    # Staged: not embedded, and the next round's floor stays below it.
    assert await vectors.embed_round() == (0, await first_id(staged) - 1)
    # The import commits: its conversation shows, and its messages are embedded at last.
    await Conversation.objects.filter(pk=staged.pk).aupdate(importing=None, deleted_at=None)
    floor = await first_id(staged) - 1
    assert (await vectors.embed_round(floor))[0] == 3


async def first_id(conversation) -> int:
    return await conversation.messages.order_by("pk").values_list("pk", flat=True).afirst()
