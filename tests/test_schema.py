"""The message table's indexes, as the migrations leave them on either database."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from chat.models import Conversation, Message

pytestmark = pytest.mark.django_db


def message_indexes() -> list[dict]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "chat_message")
    return [c for c in found.values() if c["index"] or c["unique"]]


def test_no_index_on_the_conversation_alone_the_unique_one_serves_its_lookups():
    indexes = message_indexes()
    # The partial unique index on conversation_id (one streaming reply) is the only one on it
    # alone; every lookup by conversation uses the (conversation, seq) one.
    alone = [c for c in indexes if c["columns"] == ["conversation_id"]]
    assert len(alone) == 1 and alone[0]["unique"]
    assert any(c["unique"] and c["columns"] == ["conversation_id", "seq"] for c in indexes)


def test_a_conversation_still_streams_one_reply_at_most(alice):
    conversation = Conversation.objects.create(owner=alice)
    streaming = {"conversation": conversation, "role": "assistant", "content": []}
    Message.objects.create(seq=2, status=Message.Status.STREAMING, **streaming)
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(seq=4, status=Message.Status.STREAMING, **streaming)
    Message.objects.create(seq=6, status=Message.Status.COMPLETE, **streaming)
