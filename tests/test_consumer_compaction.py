"""'Compact now', review and undo over the websocket."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from compaction.models import Compaction
from support.waiting import settle
from tests.conftest import frame, receive_until, socket_for
from tests.transcripts import add_turns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


async def test_compact_now_with_instructions_adds_a_manual_divider(
    alice, long_conversation, fake_llm
):
    fake_llm.enqueue(["<analysis>x</analysis><summary>Deadline is Friday.</summary>"])
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact", instructions="focus on the deadline"))
    frames = await receive_until(ws, lambda f: "Compacted (manual)" in f)
    assert any("Compacting (manual)" in f for f in frames)  # progress shows while it runs
    await settle(long_conversation.pk)
    row = await Compaction.objects.aget(conversation=long_conversation)
    assert (row.trigger, row.status, row.instructions) == (
        "manual",
        "committed",
        "focus on the deadline",
    )
    assert "focus on the deadline" in str(fake_llm.calls[-1].messages)
    assert f"beforebegin:#msg-{row.first_kept_seq}" in frames[-1]
    await ws.disconnect()


async def test_two_compact_now_at_once_make_one_boundary_and_say_so(
    alice, long_conversation, fake_llm
):
    fake_llm.delay = 0.05
    fake_llm.enqueue(["<summary>", "one", "</summary>"])
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: "already running" in f)
    await settle(long_conversation.pk)
    assert await Compaction.objects.filter(conversation=long_conversation).acount() == 1
    assert frames
    await ws.disconnect()


async def test_compacting_a_short_conversation_explains_why_not(alice, conversation, fake_llm):
    await sync_to_async(add_turns)(conversation, 1)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    await receive_until(ws, lambda f: "Nothing to compact yet" in f)
    await settle(conversation.pk)
    await ws.disconnect()


async def test_review_then_approve_an_edit_then_undo(alice, long_conversation, fake_llm):
    long_conversation.review_compactions = True
    await long_conversation.asave()
    fake_llm.enqueue(["<summary>Model draft.</summary>"])
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    frames = await receive_until(ws, lambda f: 'name="summary"' in f)
    assert "Model draft." in frames[-1]
    draft = await Compaction.objects.aget(conversation=long_conversation)
    assert draft.status == "draft"
    await ws.send_to(
        text_data=frame(action="approve", compaction=str(draft.pk), summary="Edited by me.")
    )
    await receive_until(ws, lambda f: "Compacted (manual)" in f)
    await draft.arefresh_from_db()
    assert (draft.status, draft.edited, draft.summary) == ("committed", True, "Edited by me.")
    await ws.send_to(text_data=frame(action="undo"))
    await receive_until(ws, lambda f: 'class="divider undone"' in f)
    await draft.arefresh_from_db()
    assert draft.status == "undone"
    await ws.disconnect()


async def test_a_draft_can_be_regenerated_with_new_instructions(
    alice, long_conversation, fake_llm, settings
):
    settings.CONTEXT_BUDGET_TOKENS = 3_000  # each draft in one summary request
    long_conversation.review_compactions = True
    await long_conversation.asave()
    fake_llm.enqueue(["<summary>First draft.</summary>"])
    fake_llm.enqueue(["<summary>Second draft about the API.</summary>"])
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="compact"))
    await receive_until(ws, lambda f: "First draft." in f)
    await settle(long_conversation.pk)
    first = await Compaction.objects.aget(conversation=long_conversation)
    await ws.send_to(
        text_data=frame(action="regenerate", compaction=str(first.pk), instructions="the API")
    )
    await receive_until(ws, lambda f: "Second draft about the API." in f)
    await settle(long_conversation.pk)
    statuses = [c.status async for c in Compaction.objects.order_by("id")]
    assert statuses == ["discarded", "draft"]
    assert "the API" in str(fake_llm.calls[-1].messages)
    await ws.disconnect()


async def test_approving_someone_elses_or_a_stale_draft_is_refused(alice, long_conversation):
    ws = socket_for(alice, long_conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame(action="approve", compaction="999", summary="x"))
    assert "no longer waiting for review" in await ws.receive_from()
    await ws.send_to(text_data=frame(action="approve", compaction="not-a-number", summary="x"))
    assert "no longer waiting for review" in await ws.receive_from()
    await ws.disconnect()
