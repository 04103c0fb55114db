"""The user's compaction actions: compact now, review a draft (approve, discard, regenerate),
undo the latest boundary.

Each validates and writes in one transaction (through `chat.db.run`), then broadcasts the
outcome to every tab of the conversation. "Compact now" and "regenerate" only claim the row and
return it: the turn engine runs the summary, so a compaction and a reply never overlap.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from chat import broadcast, clean, db, fragments, limits
from chat.errors import ActionError
from chat.models import Conversation, Message

from . import run
from .loading import load_panel, load_window
from .models import Compaction, Review
from .run import CompactionRefused, Opened


async def compact_now(user, conversation_id, instructions) -> Opened:
    await _count(user)
    opened = await db.run(
        _open_for_user, user, conversation_id, Compaction.Trigger.MANUAL, instructions
    )
    await broadcast.html(opened.conversation_id, fragments.progress("Compacting (manual)…"))
    return opened


async def regenerate(user, conversation_id, compaction_id, instructions) -> Opened:
    """Throw the draft away and write a new one, steered by new instructions."""
    await _count(user)
    opened = await db.run(
        _open_for_user, user, conversation_id, None, instructions, discard=compaction_id
    )
    await broadcast.html(
        opened.conversation_id, fragments.progress(f"Compacting ({opened.row.trigger})…")
    )
    return opened


async def _count(user) -> None:
    """Each asks the model for a summary: limited per user (auto-compaction is not counted)."""
    try:
        await db.run(limits.hit, limits.COMPACTIONS, user.pk)
    except limits.Limited as exc:
        raise CompactionRefused(exc.reason) from None


async def approve(user, conversation_id, compaction_id, summary) -> None:
    row = await db.run(_approve, user, conversation_id, compaction_id, summary)
    # Replaces any notice about the draft ("waiting for your review") in every tab. "Before
    # #N", not "messages 1 to N-1": with versions, not every number below N is on the branch.
    await broadcast_outcome(
        row,
        note="Summary approved: the model now sees it in place of the messages before "
        f"#{row.first_kept_seq}.",
    )


async def discard(user, conversation_id, compaction_id) -> None:
    await broadcast_outcome(await db.run(_discard, user, conversation_id, compaction_id))


async def undo(user, conversation_id) -> None:
    await broadcast_outcome(await db.run(_undo, user, conversation_id))


async def broadcast_outcome(row: Compaction, *, note: str = "") -> None:
    """Show every tab what a compaction changed: divider, review box, notice, context panel.
    `note` replaces the notice (the outcome of a review says what became of the draft)."""
    panel, conversation, superseded = await db.run(_panel_of, row)
    if not note and run.nothing_to_gain(row):
        note = row.error  # says what to do instead; not a fault
    elif not note and superseded:
        note = (
            "The draft summary that waited for your review was set aside: the window filled "
            "up before it was reviewed, so this compaction was committed without review."
        )
    await broadcast.html(
        row.conversation_id, fragments.compaction_outcome(row, panel, conversation, note=note)
    )


def _panel_of(row: Compaction):
    conversation = Conversation.objects.get(pk=row.conversation_id)
    panel = load_panel(conversation, load_window(conversation))
    return panel, conversation, _superseded_a_draft(row)


def _superseded_a_draft(row: Compaction) -> bool:
    """Whether committing `row` set a waiting draft aside (run.open_locked): the draft is the
    compaction just before it, since only one is ever open at a time."""
    if row.status != Compaction.Status.COMMITTED:
        return False
    before = (
        Compaction.objects.filter(conversation_id=row.conversation_id, pk__lt=row.pk)
        .order_by("-pk")
        .values_list("status", "error")
        .first()
    )
    return before == (Compaction.Status.DISCARDED, run.SUPERSEDED)


def _clean_instructions(instructions) -> str:
    try:
        return clean.clean(instructions, clean.INSTRUCTIONS)
    except ActionError as exc:
        raise CompactionRefused(exc.reason) from None


def _open_for_user(user, conversation_id, trigger, instructions, *, discard=None) -> Opened:
    with transaction.atomic():
        conversation = _locked(user, conversation_id)
        # A compaction cut off by a dying process is released now (a reply cut off that way is
        # the sweep's: until then this is refused as "wait for the reply").
        run.close_stale(run.stale_before(), conversation.pk)
        if Message.objects.filter(
            conversation=conversation, status=Message.Status.STREAMING
        ).exists():
            raise CompactionRefused("Wait for the reply to finish, then compact.")
        if discard is not None:
            discarded = _settle(_draft(user, conversation_id, discard), Compaction.Status.DISCARDED)
            _record(discarded, Review.Action.REGENERATED, user)
            trigger = discarded.trigger
        return run.open_locked(
            conversation,
            load_window(conversation),
            trigger=trigger,
            instructions=_clean_instructions(instructions),
        )


def _locked(user, conversation_id) -> Conversation:
    try:
        conversation = Conversation.objects.owned_by(user).locked(int(conversation_id))
    except (TypeError, ValueError):
        conversation = None
    if conversation is None:
        raise CompactionRefused("That conversation does not exist.")
    return conversation


def _draft(user, conversation_id, compaction_id) -> Compaction:
    """A draft of this user's conversation, and of the conversation the request came from."""
    try:
        return Compaction.objects.select_related("conversation").get(
            pk=int(compaction_id),
            conversation_id=int(conversation_id),
            status=Compaction.Status.DRAFT,
            conversation__owner=user,
            conversation__deleted_at__isnull=True,
        )
    except (Compaction.DoesNotExist, TypeError, ValueError):
        raise CompactionRefused("That summary is no longer waiting for review.") from None


def _record(row: Compaction, action: str, user) -> None:
    Review.objects.create(compaction=row, action=action, user=user)


def _settle(draft: Compaction, status: str, **fields) -> Compaction:
    """Move a draft on, only if it is still a draft: a full window may have superseded it."""
    changed = Compaction.objects.filter(pk=draft.pk, status=Compaction.Status.DRAFT).update(
        status=status, updated_at=timezone.now(), **fields
    )
    if not changed:
        raise CompactionRefused("That summary is no longer waiting for review.")
    draft.refresh_from_db()
    return draft


def _approve(user, conversation_id, compaction_id, summary) -> Compaction:
    draft = _draft(user, conversation_id, compaction_id)
    try:
        summary = clean.clean(summary, clean.SUMMARY)
    except ActionError as exc:
        raise CompactionRefused(exc.reason) from None
    if not summary:
        raise CompactionRefused("An approved summary cannot be empty.")
    edited = summary != draft.summary.strip()
    post_tokens = draft.post_tokens
    state = load_window(draft.conversation)  # versions wait while a draft does: still its branch
    if edited:
        post_tokens = run.post_tokens(state, summary, draft.first_kept_seq)
        if post_tokens >= state.tokens:
            raise CompactionRefused(
                f"With this summary the window would hold {post_tokens:,} tokens, not fewer "
                f"than the {state.tokens:,} it holds now. Shorten the summary."
            )
    with transaction.atomic():
        approved = _settle(
            draft,
            Compaction.Status.COMMITTED,
            summary=summary,
            edited=edited,
            post_tokens=post_tokens,
        )
        run.unpin_abandoned(draft.conversation_id, state, approved.first_kept_seq)
        _record(approved, Review.Action.EDITED if edited else Review.Action.APPROVED, user)
    return approved


def _discard(user, conversation_id, compaction_id) -> Compaction:
    with transaction.atomic():
        draft = _settle(_draft(user, conversation_id, compaction_id), Compaction.Status.DISCARDED)
        _record(draft, Review.Action.DISCARDED, user)
    return draft


def _undo(user, conversation_id) -> Compaction:
    with transaction.atomic():
        conversation = _locked(user, conversation_id)
        if Compaction.objects.filter(
            conversation=conversation,
            status__in=[Compaction.Status.RUNNING, Compaction.Status.DRAFT],
        ).exists():
            # A draft revises the summary being undone: undoing under it would bring it back.
            raise CompactionRefused("Finish or discard the compaction in progress first.")
        boundary = (
            Compaction.objects.filter(conversation=conversation, status=Compaction.Status.COMMITTED)
            .order_by("-id")
            .first()
        )
        if boundary is None:
            raise CompactionRefused("There is no compaction to undo.")
        boundary.status = Compaction.Status.UNDONE
        boundary.save(update_fields=["status", "updated_at"])
        _record(boundary, Review.Action.UNDONE, user)
    return boundary
