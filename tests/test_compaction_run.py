"""Compaction against the database: boundaries, fallbacks, concurrency, review and undo."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction

from chat import compactions
from chat import compactions as actions
from chat.models import Conversation, Pin
from chat.snapshot import read_snapshot
from chat.window_loading import load_window, state_of
from compaction.assembly import SUMMARY_INTRO
from compaction.models import Compaction
from core import db, runtime
from core.errors import ActionError
from providers import registry
from support.fake_model import FakeClient
from support.messages_api import system_text
from tests.transcripts import add_turns, snapshot
from turns import compacting
from turns.tasks import hold

pytestmark = pytest.mark.django_db(transaction=True)


def text(value: str) -> dict:
    return {"type": "text", "text": value}


GOOD = (
    "<analysis>private reasoning that must not reach the window</analysis>\n"
    "<summary>\n## Primary request and intent\nBuild a TOML parser.\n</summary>"
)


@pytest.fixture(autouse=True)
def small_budget(settings):
    # Small enough to compact after a few turns, large enough for one summary request to hold
    # what a compaction folds away (a larger span is folded in parts: tests/test_summary_parts.py).
    settings.CONTEXT_BUDGET_TOKENS = 3_000
    settings.KEEP_TAIL_SHARE = 0.25


def window_of(conversation):
    return load_window(conversation)


def _open(conversation_id, trigger, instructions, before_reply):
    with transaction.atomic():
        conversation = Conversation.objects.locked(conversation_id)
        state = read_snapshot(conversation_id)
        return compactions.open_locked(
            conversation,
            state_of(conversation, state),
            state.later_versions(),
            trigger=trigger,
            instructions=instructions,
            before_reply=before_reply,
        )


async def compact(conversation, client, *, trigger="manual", instructions="", before_reply=False):
    """Open and run one compaction with `client` answering (registered for every model, as a
    provider is), as the engine does (a cancel while it is being opened releases it)."""
    opened = await hold(db.run(_open, conversation.pk, trigger, instructions, before_reply))
    registry.register(client)
    return await compacting.run(opened)


class Broken(FakeClient):
    """A model client that fails in a way no provider fault handling catches."""

    def capabilities(self, model):
        raise RuntimeError("disk on fire")


async def test_it_commits_a_boundary_and_leaves_the_transcript_untouched(conversation):
    await sync_to_async(add_turns)(conversation, 8)
    before = await sync_to_async(snapshot)(conversation)
    pre = (await sync_to_async(window_of)(conversation)).tokens
    client = FakeClient()
    client.enqueue([GOOD])
    row = await compact(conversation, client)
    assert row.status == "committed" and row.summariser == "model"
    assert row.pre_tokens == pre and 0 < row.post_tokens < row.pre_tokens
    assert row.first_kept_seq > 1 and row.duration_ms >= 0 and row.usage
    assert await sync_to_async(snapshot)(conversation) == before
    state = await sync_to_async(window_of)(conversation)
    head = state.window().messages[0]["content"][0]["text"]
    assert head.startswith(SUMMARY_INTRO) and "Build a TOML parser." in head
    assert "private reasoning" not in str(state.window().messages)
    assert state.window().messages[1]["role"] == "assistant"
    assert (
        state.window()
        .messages[2]["content"][0]["text"]
        .startswith(f"Question {row.first_kept_seq}")
    )
    assert state.tokens == row.post_tokens


async def test_the_second_compaction_revises_the_first_summary(conversation):
    await sync_to_async(add_turns)(conversation, 8)
    client = FakeClient()
    client.enqueue([GOOD])
    await compact(conversation, client)
    await sync_to_async(add_turns)(conversation, 4)
    client.enqueue(["<summary>\n## Primary request and intent\nRevised brief.\n</summary>"])
    second = await compact(conversation, client)
    request = str(client.calls[-1].messages)
    assert "<previous_summary>" in request and "Build a TOML parser." in request
    assert second.summary.strip().endswith("Revised brief.")


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (lambda c: c.enqueue_error("The model is overloaded (529).", status=529), "overloaded"),
        (lambda c: c.enqueue([""]), "empty"),
        (lambda c: c.enqueue(["Sure! Here is a summary without any tags."]), "tags"),
    ],
)
async def test_a_failed_model_summary_falls_back_to_rules_never_to_empty(
    conversation, script, reason
):
    await sync_to_async(add_turns)(conversation, 8)
    client = FakeClient()
    script(client)
    row = await compact(conversation, client)
    assert row.status == "committed"
    assert row.summariser == "rules"
    assert reason in row.error.lower()
    assert row.summary.strip()
    # The rule-based brief keeps the user's messages, the latest summarised one at least.
    assert f"Question {row.first_kept_seq - 2}:" in row.summary


async def test_a_crash_leaves_no_boundary_and_releases_the_conversation(conversation):
    await sync_to_async(add_turns)(conversation, 8)
    with pytest.raises(RuntimeError):
        await compact(conversation, Broken())
    row = await Compaction.objects.aget(conversation=conversation)
    assert row.status == "failed" and "disk on fire" in row.error
    assert (await sync_to_async(load_window)(conversation)).boundary is None
    assert (await compact(conversation, FakeClient())).status == "committed"


async def test_two_compact_now_at_once_produce_one_boundary(conversation):
    await sync_to_async(add_turns)(conversation, 8)
    client = FakeClient(delay=0.05)
    client.enqueue(["<summary>", "one", "</summary>"])
    client.enqueue(["<summary>", "two", "</summary>"])
    results = await asyncio.gather(
        compact(conversation, client), compact(conversation, client), return_exceptions=True
    )
    refused = [r for r in results if isinstance(r, ActionError)]
    done = [r for r in results if isinstance(r, Compaction)]
    assert len(done) == 1 and len(refused) == 1
    assert "already running" in refused[0].reason
    assert await Compaction.objects.filter(conversation=conversation).acount() == 1


async def test_nothing_to_compact_is_refused_with_a_reason(conversation):
    await sync_to_async(add_turns)(conversation, 1)
    with pytest.raises(ActionError, match="Nothing to compact"):
        await compact(conversation, FakeClient())
    assert await Compaction.objects.acount() == 0


async def test_a_pinned_message_survives_compaction_verbatim(conversation):
    await sync_to_async(add_turns)(conversation, 8)
    first = await conversation.messages.aget(seq=1)
    await Pin.objects.acreate(message=first, conversation=conversation)
    client = FakeClient()
    client.enqueue([GOOD])
    row = await compact(conversation, client)
    assert row.first_kept_seq > 1
    head = (await sync_to_async(window_of)(conversation)).window().messages[0]["content"][0]["text"]
    assert first.content[0]["text"] in head


async def test_review_mode_makes_a_draft_that_only_approval_commits(conversation, alice):
    conversation.review_compactions = True
    await conversation.asave()
    await sync_to_async(add_turns)(conversation, 8)
    client = FakeClient()
    client.enqueue([GOOD])
    draft = await compact(conversation, client)
    assert draft.status == "draft"
    assert (await sync_to_async(window_of)(conversation)).boundary is None
    with pytest.raises(ActionError, match="review"):
        await compact(conversation, client)
    approved = await db.run(actions.approve, alice, conversation.pk, draft.pk, "My own brief.")
    assert approved.status == "committed" and approved.edited
    head = (await sync_to_async(window_of)(conversation)).window().messages[0]["content"][0]["text"]
    assert "My own brief." in head


async def test_a_discarded_draft_changes_nothing(conversation, alice):
    conversation.review_compactions = True
    await conversation.asave()
    await sync_to_async(add_turns)(conversation, 8)
    draft = await compact(conversation, FakeClient())
    await db.run(actions.discard, alice, conversation.pk, draft.pk)
    assert (await sync_to_async(window_of)(conversation)).boundary is None
    with pytest.raises(ActionError):
        await db.run(actions.approve, alice, conversation.pk, draft.pk, "late")


async def test_undo_restores_the_previous_window(conversation, alice):
    await sync_to_async(add_turns)(conversation, 8)
    before = (await sync_to_async(window_of)(conversation)).window()
    client = FakeClient()
    client.enqueue([GOOD])
    row = await compact(conversation, client)
    undone = await db.run(actions.undo, alice, conversation.pk)
    assert undone.pk == row.pk and undone.status == "undone"
    assert (await sync_to_async(window_of)(conversation)).window() == before
    with pytest.raises(ActionError, match="no compaction to undo"):
        await db.run(actions.undo, alice, conversation.pk)


def test_bob_cannot_approve_or_undo_alices_compactions(conversation, bob):
    row = Compaction.objects.create(
        conversation=conversation, trigger="manual", status="draft", first_kept_seq=3
    )
    with pytest.raises(ActionError):
        actions.approve(bob, conversation.pk, row.pk, "mine now")
    with pytest.raises(ActionError):
        actions.undo(bob, conversation.pk)


async def test_repeated_auto_failures_pause_auto_compaction_and_a_success_clears_it(
    conversation, settings
):
    settings.COMPACT_FAILURE_LIMIT = 3
    await sync_to_async(add_turns)(conversation, 8)
    broken = FakeClient()
    for attempt in range(3):
        # A summary bigger than what it replaces cannot be committed: a failure.
        broken.enqueue_text("<summary>" + "padding " * 4000 + "</summary>")
        row = await compact(conversation, broken, trigger="auto")
        assert row.status == "failed"
        await conversation.arefresh_from_db()
        assert conversation.auto_compact_failures == attempt + 1
    assert conversation.auto_compact_paused_until is not None
    good = FakeClient()
    good.enqueue([GOOD])
    assert (await compact(conversation, good, trigger="auto")).status == "committed"
    await conversation.arefresh_from_db()
    assert conversation.auto_compact_failures == 0
    assert conversation.auto_compact_paused_until is None


async def test_a_full_window_supersedes_a_draft_waiting_for_review(conversation):
    conversation.review_compactions = True
    await conversation.asave()
    await sync_to_async(add_turns)(conversation, 8)
    draft = await compact(conversation, FakeClient())
    assert draft.status == "draft"
    await sync_to_async(add_turns)(conversation, 4)
    forced = await compact(conversation, FakeClient(), trigger="auto", before_reply=True)
    await draft.arefresh_from_db()
    assert forced.status == "committed"
    assert draft.status == "discarded" and "window was full" in draft.error


async def test_cancelling_a_compaction_never_leaves_it_running(conversation, alice):
    await sync_to_async(add_turns)(conversation, 8)

    # Cancelled while the row is being claimed: the claim lands, and is released.
    async def claiming():
        await asyncio.sleep(0)  # under way (on PostgreSQL, on a database thread)
        return await compacting.compact_now(alice, conversation.pk, "")

    task = asyncio.ensure_future(hold(claiming()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Cancelled while it runs.
    task = asyncio.ensure_future(compact(conversation, FakeClient(delay=0.2)))
    while not await Compaction.objects.filter(status="running").aexists():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    statuses = [c.status async for c in Compaction.objects.filter(conversation=conversation)]
    assert "running" not in statuses
    assert (await compact(conversation, FakeClient())).status == "committed"


def test_a_draft_is_only_reviewed_from_its_own_conversation(conversation, alice):
    from chat.models import Conversation

    other = Conversation.objects.create(owner=alice, model="fake-model")
    draft = Compaction.objects.create(
        conversation=conversation, trigger="manual", status="draft", first_kept_seq=3
    )
    with pytest.raises(ActionError):
        actions.approve(alice, other.pk, draft.pk, "from the wrong tab")
    with pytest.raises(ActionError):
        actions.discard(alice, other.pk, draft.pk)
    draft.refresh_from_db()
    assert draft.status == "draft"


def test_undo_waits_for_an_open_draft(conversation, alice):
    add_turns(conversation, 8)
    Compaction.objects.create(
        conversation=conversation, trigger="auto", status="committed", first_kept_seq=5
    )
    Compaction.objects.create(
        conversation=conversation, trigger="manual", status="draft", first_kept_seq=9
    )
    with pytest.raises(ActionError, match="in progress"):
        actions.undo(alice, conversation.pk)


def test_an_edited_summary_that_would_not_shrink_the_window_is_refused(
    conversation, alice, settings
):
    settings.MAX_SUMMARY_CHARS = 50_000  # within the limit: refused for its size in tokens
    add_turns(conversation, 8)
    draft = Compaction.objects.create(
        conversation=conversation,
        trigger="manual",
        status="draft",
        first_kept_seq=13,
        summary="short",
    )
    with pytest.raises(ActionError, match="Shorten the summary"):
        actions.approve(alice, conversation.pk, draft.pk, "x " * 20_000)
    draft.refresh_from_db()
    assert draft.status == "draft"


def test_pinning_an_old_message_moves_the_count_even_with_an_anchor(conversation):
    from chat.models import Message

    add_turns(conversation, 6)
    boundary = Compaction.objects.create(
        conversation=conversation,
        trigger="auto",
        status="committed",
        first_kept_seq=9,
        summary="Brief.",
    )
    before = load_window(conversation)
    Message.objects.filter(conversation=conversation, seq=12).update(
        input_tokens=before.tokens,
        output_tokens=50,
        window_boundary_id=boundary.pk,
        window_head_tokens=before.head_tokens,
    )
    runtime.reset()  # the app never rewrites a final row; this test just did
    anchored = load_window(conversation).tokens
    Pin.objects.create(message=Message.objects.get(seq=1), conversation=conversation)
    pinned = load_window(conversation)
    assert pinned.head_tokens > before.head_tokens
    assert pinned.tokens == anchored + pinned.head_tokens - before.head_tokens


async def test_the_summary_request_reaches_an_anthropic_server_structured(
    conversation, fake_anthropic
):
    from compaction.prompt import SECTIONS

    await sync_to_async(add_turns)(conversation, 8)
    fake_anthropic.enqueue_reply(["<analysis>notes</analysis><summary>Served brief.</summary>"])
    row = await compact(conversation, registry.client_for("claude-test"))
    assert (row.summariser, row.summary) == ("model", "Served brief.")
    sent = fake_anthropic.requests[-1]
    body = sent["messages"][0]["content"]
    text = body if isinstance(body, str) else body[0]["text"]
    assert "running brief" in system_text(sent)
    assert "<transcript>" in text and "</transcript>" in text
    assert all(f"## {name}" in text for name in SECTIONS)
    assert "<analysis>" not in row.summary


async def test_a_compaction_never_folds_away_a_message_still_queued(conversation):
    from chat.models import Message

    await sync_to_async(add_turns)(conversation, 8)
    queued = "QUEUED-MESSAGE " * 200  # big: the tail alone would not hold it
    await Message.objects.acreate(
        conversation=conversation, seq=17, role="user", content=[text(queued)]
    )
    await Message.objects.acreate(
        conversation=conversation, seq=18, role="assistant", status="queued"
    )
    client = FakeClient()
    client.enqueue([GOOD])
    row = await compact(conversation, client)
    assert row.status == "committed" and row.first_kept_seq < 17
    assert "QUEUED-MESSAGE" not in str(client.calls[-1].messages)
