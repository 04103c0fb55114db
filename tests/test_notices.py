"""Notices say what the user can do, and go away when what they were about is settled."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async

from compaction import boundaries
from compaction.models import Compaction
from support.waiting import settle
from tests.conftest import frame, receive_until, socket_for
from tests.transcripts import add_turns
from turns import compacting

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

WAITING = "A draft summary is waiting for your review first"


def the_notice(frame_text: str) -> tuple[str, str, bool] | None:
    """(level, text, hidden) of the #notice a frame swaps in, if it holds one."""
    match = re.search(r'<div id="notice" class="notice (\w+)"([^>]*)>(.*?)</div>', frame_text, re.S)
    if match is None:
        return None
    return match.group(1), match.group(3).strip(), " hidden" in match.group(2)


async def test_compact_now_on_a_short_conversation_says_there_is_not_enough_yet(
    alice, conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 2_000
    await sync_to_async(add_turns)(conversation, 2, words=10)
    # Any summary of so little is no smaller than what it would replace.
    fake_llm.enqueue(["<summary>" + "A long brief. " * 200 + "</summary>"])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: 'id="notice"' in f)
    await settle(conversation.pk)
    level, text, hidden = the_notice(frames[-1])
    assert level == "info" and not hidden  # nothing went wrong: there is just too little
    assert text.startswith("Not enough to fold away yet: the window holds")
    assert "nothing changed. Keep chatting" in text
    assert "Compaction failed" not in text and "would not make" not in text
    row = await Compaction.objects.aget(conversation=conversation)
    assert row.status == "failed" and boundaries.nothing_to_gain(
        row
    )  # the admin sees the same words
    await ws.disconnect()


async def test_nothing_at_all_to_fold_says_what_to_do(alice, conversation, fake_llm):
    await sync_to_async(add_turns)(conversation, 1)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: "Nothing to compact yet" in f)
    assert "Keep chatting" in the_notice(frames[-1])[1]
    await ws.disconnect()


async def test_the_waiting_draft_notice_goes_once_the_draft_is_approved(
    alice, long_conversation, fake_llm
):
    long_conversation.review_compactions = True
    await long_conversation.asave()
    fake_llm.enqueue(["<summary>Model draft.</summary>"])
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    await receive_until(ws, lambda f: 'name="summary"' in f)
    await settle(long_conversation.pk)
    # Asking again while the draft waits: the notice says so and what to do about it.
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: WAITING in f)
    assert "approve, regenerate or discard it" in the_notice(frames[-1])[1]
    draft = await Compaction.objects.aget(conversation=long_conversation)
    await ws.send_to(
        text_data=frame(action="approve", compaction=str(draft.pk), summary="Model draft.")
    )
    frames = await receive_until(ws, lambda f: "Compacted (manual)" in f)
    level, text, hidden = the_notice(frames[-1])
    assert WAITING not in text and not hidden
    assert (level, text) == (
        "info",
        "Summary approved: the model now sees it in place of the messages before "
        f"#{draft.first_kept_seq}.",
    )
    assert re.search(r'<section id="review" class="review" hx-swap-oob="true" hidden>', frames[-1])
    await ws.disconnect()


async def test_the_waiting_draft_notice_goes_once_the_draft_is_discarded(
    alice, long_conversation, fake_llm
):
    long_conversation.review_compactions = True
    await long_conversation.asave()
    fake_llm.enqueue(["<summary>Model draft.</summary>"])
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    await receive_until(ws, lambda f: 'name="summary"' in f)
    await settle(long_conversation.pk)
    await ws.send_to(text_data=frame(action="compact"))
    await receive_until(ws, lambda f: WAITING in f)
    draft = await Compaction.objects.aget(conversation=long_conversation)
    await ws.send_to(text_data=frame(action="discard", compaction=str(draft.pk)))
    frames = await receive_until(ws, lambda f: 'id="notice"' in f)
    level, text, _ = the_notice(frames[-1])
    assert (level, text) == ("info", "Draft summary discarded; the window is unchanged.")
    await ws.disconnect()


async def test_a_draft_set_aside_by_a_full_window_says_so(alice, long_conversation):
    draft = await Compaction.objects.acreate(
        conversation=long_conversation,
        trigger="auto",
        status="discarded",
        error=boundaries.SUPERSEDED,
        first_kept_seq=9,
    )
    committed = await Compaction.objects.acreate(
        conversation=long_conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=11,
        summary="Brief.",
        pre_tokens=1_900,
        post_tokens=700,
    )
    assert draft.pk < committed.pk
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await compacting.settled(committed)
    frames = await receive_until(ws, lambda f: "Compacted (auto)" in f)
    level, text, _ = the_notice(frames[-1])
    assert level == "info" and "The draft summary that waited for your review was set aside" in text
    # An ordinary commit leaves the notice alone.
    later = await Compaction.objects.acreate(
        conversation=long_conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=13,
        summary="Brief 2.",
    )
    await compacting.settled(later)
    frames = await receive_until(ws, lambda f: "Compacted (auto)" in f)
    assert the_notice(frames[-1]) is None
    await ws.disconnect()


async def test_undo_goes_back_one_compaction_at_a_time_and_says_what_the_model_sees_again(
    alice, long_conversation
):
    """Newest first, each undo offered while a boundary is in force; each notice says what that
    undo gave back (not what the notice before it said)."""
    await Compaction.objects.acreate(
        conversation=long_conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=5,
        summary="Brief.",
    )
    await Compaction.objects.acreate(
        conversation=long_conversation,
        trigger="manual",
        status="committed",
        first_kept_seq=11,
        summary="Brief 2.",
    )
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="undo"))
    frames = await receive_until(ws, lambda f: 'id="notice"' in f)
    level, text, _ = the_notice(frames[-1])
    assert level == "info"
    assert text == (
        "Compaction undone: the model sees the messages from #5 to before #11 word for word again."
    )
    assert 'id="undo-compaction"' in frames[-1]  # the one before it is in force: undo it too
    await ws.send_to(text_data=frame(action="undo"))
    frames = await receive_until(ws, lambda f: 'id="notice"' in f)
    assert the_notice(frames[-1])[1] == (
        "Compaction undone: the model sees the messages from #1 to before #5 word for word again."
    )
    assert 'id="undo-compaction"' not in frames[-1]  # none left in force
    await ws.disconnect()
