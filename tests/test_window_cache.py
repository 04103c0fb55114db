"""The window's rows are cached per conversation: a turn reads only what is new, and whatever
changes the window (a new message from another process, a boundary, a pin, a cancel, a reply
ending) is seen at the next read."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from chat.models import Message, Pin
from chat.window_loading import load_window
from compaction.models import Compaction
from tests.transcripts import add_turns, text_block

pytestmark = pytest.mark.django_db(transaction=True)  # the cache fills on commit


@pytest.fixture
def reads():
    """How many rows each read of a window brought back, as the database answered the
    statement, not as the code kept them: the statement is run again, as it was sent, on a
    cursor of its own, and its rows counted. (The latest message always comes back: it carries
    the state.)"""
    sizes: list[int] = []
    counting = False

    def record(execute, sql, params, many, context):
        nonlocal counting
        result = execute(sql, params, many, context)
        if not counting and isinstance(params, dict) and "after" in params:
            counting = True  # the statement run again comes through here too
            try:
                with context["connection"].cursor() as cursor:
                    cursor.execute(sql, params)
                    sizes.append(len(cursor.fetchall()))
            finally:
                counting = False
        return result

    with connection.execute_wrapper(record):
        yield sizes


def seqs(conversation) -> list[int]:
    return [e.seq for e in load_window(conversation).entries]


def test_a_second_read_fetches_only_the_new_rows(conversation, reads):
    add_turns(conversation, 200)
    assert len(seqs(conversation)) == 400
    add_turns(conversation, 1)  # as another process would have written them
    assert seqs(conversation)[-2:] == [401, 402]
    assert reads == [400, 2]  # the whole window, then only the two rows after it


def test_what_is_read_does_not_grow_with_the_window(conversation, reads):
    add_turns(conversation, 5)
    seqs(conversation)
    add_turns(conversation, 1)
    seqs(conversation)
    short = reads[-1]
    add_turns(conversation, 500)
    seqs(conversation)
    add_turns(conversation, 1)
    seqs(conversation)
    assert reads[-1] == short == 2


def test_a_new_boundary_reads_the_window_whole_again(conversation):
    add_turns(conversation, 10)
    assert seqs(conversation)[0] == 1
    Compaction.objects.create(
        conversation=conversation, trigger="auto", status="committed", first_kept_seq=15
    )
    assert seqs(conversation) == list(range(15, 21))


def test_a_pin_reaches_the_window_through_the_cache(conversation):
    add_turns(conversation, 10)
    Compaction.objects.create(
        conversation=conversation, trigger="auto", status="committed", first_kept_seq=15
    )
    assert load_window(conversation).pinned_before_cut == []
    Pin.objects.create(message=conversation.messages.get(seq=3), conversation=conversation)
    assert [e.seq for e in load_window(conversation).pinned_before_cut] == [3]
    Pin.objects.filter(message__seq=3).delete()
    assert load_window(conversation).pinned_before_cut == []


def test_a_queued_message_is_in_no_window_but_its_own_replys(conversation):
    add_turns(conversation, 2)
    Message.objects.create(conversation=conversation, seq=5, role="user", content=text_block("x"))
    Message.objects.create(conversation=conversation, seq=6, role="assistant", status="queued")
    assert seqs(conversation)[-1] == 4  # it can still be cancelled
    assert load_window(conversation, before_seq=6).entries[-1].seq == 5
    Message.objects.filter(seq__in=[5, 6]).update(status="cancelled")
    assert seqs(conversation)[-1] == 4
    assert load_window(conversation, before_seq=6).entries[-1].seq == 4


def test_a_reply_read_while_it_streamed_is_read_again_once_it_ends(conversation):
    add_turns(conversation, 2)
    Message.objects.create(conversation=conversation, seq=5, role="user", content=text_block("q"))
    Message.objects.create(
        conversation=conversation,
        seq=6,
        role="assistant",
        status="streaming",
        heartbeat_at=timezone.now(),
    )
    assert seqs(conversation)[-1] == 5
    Message.objects.filter(seq=6).update(status="complete", content=text_block("Done."), tokens=6)
    state = load_window(conversation)
    assert state.entries[-1].seq == 6 and state.entries[-1].text == "Done."
