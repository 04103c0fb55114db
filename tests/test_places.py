"""The rule every claim of a queued reply follows (turns/places.py): it starts only when its
conversation is free and its owner is under REPLIES_AT_ONCE; other users' replies do not count.
The same against two server processes: tests/test_queued_replies_wait_for_a_place.py."""

from __future__ import annotations

import pytest

from chat.models import Conversation, Message
from turns import transitions
from turns.claiming import claim_next

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_at_once(settings):
    settings.REPLIES_AT_ONCE = 1


def streaming_reply(owner) -> Message:
    other = Conversation.objects.create(owner=owner, model="fake-model")
    Message.objects.create(conversation=other, seq=1, role="user", content=[])
    return Message.objects.create(
        conversation=other, seq=2, parent_seq=1, role="assistant", content=[], status="streaming"
    )


def queued_message(conversation) -> None:
    """A message and its queued reply, with nothing running (as a compaction leaves them)."""
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        content=[{"type": "text", "text": "Waiting here."}],
    )
    Message.objects.create(
        conversation=conversation,
        seq=2,
        parent_seq=1,
        role="assistant",
        content=[],
        status="queued",
    )


def test_a_queued_reply_waits_while_its_owner_is_at_the_limit(alice, conversation):
    running = streaming_reply(alice)
    queued_message(conversation)

    claim = claim_next(conversation.pk)
    assert claim.step is None and claim.waiting == (alice.pk, 1)
    assert Message.objects.get(conversation=conversation, seq=2).status == "queued"

    Message.objects.filter(pk=running.pk).update(status="complete")
    claim = claim_next(conversation.pk)
    assert isinstance(claim.step, transitions.Turn) and claim.waiting is None


def test_other_users_replies_do_not_count(alice, bob, conversation):
    streaming_reply(bob)
    queued_message(conversation)
    assert isinstance(claim_next(conversation.pk).step, transitions.Turn)
