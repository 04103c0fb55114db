"""The rule every claim of a queued reply follows (turns/places.py): it starts only when its
conversation is free and its owner is under REPLIES_AT_ONCE; other users' replies do not count.
The same against two server processes: tests/test_queued_replies_wait_for_a_place.py."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from chat.models import Conversation, Message
from turns import places, recovery, transitions
from turns.claiming import claim_next

pytestmark = pytest.mark.django_db
User = get_user_model()


@pytest.fixture(autouse=True)
def one_at_once(settings):
    settings.REPLIES_AT_ONCE = 1


def streaming_reply(owner) -> Message:
    other = Conversation.objects.create(owner=owner, model="fake-model")
    Message.objects.create(conversation=other, seq=1, role="user", content=[])
    # Alive: its heartbeat is fresh (one without is a dead process's, which any sweep closes).
    return Message.objects.create(
        conversation=other,
        seq=2,
        parent_seq=1,
        role="assistant",
        content=[],
        status="streaming",
        heartbeat_at=timezone.now(),
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


def test_a_shut_account_s_queued_reply_stays_queued_until_it_is_active_again(alice, conversation):
    # Shut by a query (a script, a sign-on hook): no signal, so each claim reads the account.
    queued_message(conversation)
    User.objects.filter(pk=alice.pk).update(is_active=False)

    claim = claim_next(conversation.pk)
    assert claim.step is None and claim.waiting is None
    assert places.claim_if_free(conversation, lambda: pytest.fail("claimed")) == (
        None,
        None,
        False,
    )
    assert recovery.orphaned_queues(grace_seconds=0) == []
    assert Message.objects.get(conversation=conversation, seq=2).status == "queued"

    User.objects.filter(pk=alice.pk).update(is_active=True)
    assert recovery.orphaned_queues(grace_seconds=0) == [conversation.pk]
    assert isinstance(claim_next(conversation.pk).step, transitions.Turn)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_the_waiting_line_shows_and_goes_when_the_message_is_taken_back(alice, conversation):
    from asgiref.sync import sync_to_async

    from tests.conftest import socket_for
    from turns import engine

    await sync_to_async(streaming_reply)(alice)
    await sync_to_async(queued_message)(conversation)
    ws = socket_for(alice, conversation.pk)
    assert (await ws.connect())[0]
    engine.kick(conversation.pk)  # as the sweep does
    waiting = await ws.receive_from(timeout=3)
    assert 'id="progress"' in waiting and "Waiting: 1 of your replies" in waiting

    await ws.send_json_to({"action": "cancel", "message": 1})
    frames = [await ws.receive_from(timeout=3) for _ in range(2)]
    assert any('id="progress"' in f and "hidden" in f and "Waiting" not in f for f in frames)
    await ws.disconnect()
