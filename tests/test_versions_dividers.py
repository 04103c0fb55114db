"""Dividers across versions: a boundary marks a point in the transcript (before the first message
it keeps), so its divider stays there whichever version of that message is on screen, after a
reload and in the branch a tab is sent, and the context panel's link always finds it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chat import transcript
from chat.models import Conversation
from compaction.models import Compaction
from tests.conftest import frame, receive_until, shows, socket_for
from tests.test_versions import page_of, turn
from tests.transcripts import add_turns, committed_boundary


def layout(page: transcript.Page) -> list[int | str]:
    """The page as it reads: message seqs, and "|<id>" where a divider sits."""
    return [
        item.message.seq if item.kind == "message" else f"|{item.compaction.pk}"
        for item in page.items
    ]


def test_a_divider_sits_above_the_first_message_at_or_after_its_point():
    assert transcript.divider_place([1, 2, 5, 6], 3) == 5  # 3 was edited as 5
    assert transcript.divider_place([1, 2, 3, 4], 3) == 3
    assert transcript.divider_place([1, 2, 3, 4], 1) == 1
    assert transcript.divider_place([1, 2], 3) is None  # after them all


async def _three_turns_compacted(alice, conversation, fake_llm):
    """Three turns (1 to 6) over the socket, then a boundary keeping from message 3."""
    for text in ["One.", "Two.", "Three."]:
        fake_llm.enqueue([text])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    for i, text in enumerate(["first", "second", "third"]):
        await turn(ws, conversation, text, 2 * i + 2)
    boundary = await sync_to_async(committed_boundary)(conversation, 3)
    return ws, f"|{boundary.pk}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channel_layer")
async def test_a_divider_survives_every_version_operation(alice, conversation, fake_llm):
    ws, divider = await _three_turns_compacted(alice, conversation, fake_llm)
    assert layout(await page_of(conversation.pk)) == [1, 2, divider, 3, 4, 5, 6]

    # The first message kept, edited: its new version (7) still comes after the boundary.
    fake_llm.enqueue(["Two, again."])
    await ws.send_to(text_data=frame(action="edit", message=3, text="second, better"))
    frames = await receive_until(ws, shows(8, "complete"))
    # The tab is sent the branch down to message 2 with the divider below it, then the new
    # version appended after it.
    joined = "".join(frames)
    shown_branch = joined.split('hx-swap-oob="innerHTML:#transcript"')[1]
    assert shown_branch.index(f'id="compaction-{divider[1:]}"') < shown_branch.index(
        'beforeend:#transcript"'
    )
    assert layout(await page_of(conversation.pk)) == [1, 2, divider, 7, 8]

    # Back to the original, and forth again.
    for to, expected in [(3, [1, 2, divider, 3, 4, 5, 6]), (7, [1, 2, divider, 7, 8])]:
        await ws.send_to(text_data=frame(action="switch", message=7 if to == 3 else 3, to=to))
        frames = await receive_until(ws, lambda f: 'innerHTML:#transcript"' in f)
        assert f'id="compaction-{divider[1:]}"' in frames[-1]
        assert layout(await page_of(conversation.pk)) == expected

    # The reply after the divider asked again.
    fake_llm.enqueue(["Two, once more."])
    await ws.send_to(text_data=frame(action="reply_again", message=8))
    await receive_until(ws, shows(9, "complete"))
    assert layout(await page_of(conversation.pk)) == [1, 2, divider, 7, 9]
    await ws.disconnect()


@pytest.mark.django_db
def test_older_pages_hold_each_divider_once(conversation):
    # 1 to 20, message 11 edited as 21 (after 10) with its reply 22; boundaries at 11 and 5.
    add_turns(conversation, 10)
    add_turns(conversation, 1, start=21)
    conversation.messages.filter(seq=21).update(parent_seq=10)
    at_5 = committed_boundary(conversation, 5)
    at_11 = committed_boundary(conversation, 11)
    pages = [transcript.page(conversation, before=None, limit=3)]
    while pages[-1].oldest_seq is not None:
        pages.append(transcript.page(conversation, before=pages[-1].oldest_seq, limit=3))
    whole = [x for p in reversed(pages) for x in layout(p)]
    assert whole == [1, 2, 3, 4, f"|{at_5.pk}", 5, 6, 7, 8, 9, 10, f"|{at_11.pk}", 21, 22]


@pytest.mark.django_db
def test_an_undone_boundary_past_the_branch_on_screen_sits_at_its_end(conversation):
    # 1 to 8, message 5 edited as 7 (after 4) with its reply 8, and a boundary at 7, undone;
    # then version 5 switched back to: its branch, 1 to 6, ends before the boundary's point.
    add_turns(conversation, 4)  # 1 to 8
    conversation.messages.filter(seq=7).update(parent_seq=4)
    undone = committed_boundary(conversation, 7)
    Compaction.objects.filter(pk=undone.pk).update(status=Compaction.Status.UNDONE)
    Conversation.objects.filter(pk=conversation.pk).update(leaf_seq=6)
    conversation.refresh_from_db()
    page = transcript.page(conversation, before=None, limit=50)
    assert layout(page) == [1, 2, 3, 4, 5, 6, f"|{undone.pk}"]
