"""What a person does to compaction, as transactions: compact now, review a draft (approve it,
edited or not, discard it, or regenerate it with new instructions), undo the latest boundary.

Each validates and writes in one transaction, scoped to the user, and returns the row it
settled; the turn engine runs the summary a compact-now or regenerate opens, and tells the tabs
(chat/turns/compacting.py). Every review leaves a `Review` row: the audit trail admins read.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from chat.compactions import Opened, open_locked, unpin_abandoned
from chat.models import Conversation, stale_before
from chat.state import read_state
from chat.window import load_window, state_of
from compaction import boundaries, key_facts
from compaction.models import Compaction, Review
from compaction.state import post_tokens
from core.clean import INSTRUCTIONS, SUMMARY, clean, number
from core.errors import ActionError

NO_LONGER_WAITING = "That summary is no longer waiting for review."


def open_for_user(user, conversation_id, instructions, *, discard=None) -> Opened:
    """Compact now; with `discard` (a draft's id), regenerate that draft: it is discarded and
    the new one keeps its trigger."""
    instructions = clean(instructions, INSTRUCTIONS)
    with transaction.atomic():
        conversation = Conversation.objects.owned(user, conversation_id, lock=True)
        # A compaction cut off by a dying process is released now (a reply cut off that way is
        # the sweep's: until then this is refused as "wait for the reply").
        boundaries.close_stale(stale_before(), conversation.pk)
        trigger = Compaction.Trigger.MANUAL
        if discard is not None:
            discarded = _settle(_draft(user, conversation.pk, discard), Compaction.Status.DISCARDED)
            _record(discarded, Review.Action.REGENERATED, user)
            trigger = discarded.trigger
        state = read_state(conversation.pk)
        if state.streaming_id:
            # Rolls the discard back too: the draft stays for when the reply has finished.
            raise ActionError("Wait for the reply to finish, then compact.")
        return open_locked(
            conversation,
            state_of(conversation, state),
            state.later_versions(),
            trigger=trigger,
            instructions=instructions,
        )


def approve(user, conversation_id, compaction_id, summary) -> Compaction:
    draft = _draft(user, conversation_id, compaction_id)
    summary = clean(summary, SUMMARY)
    if not summary:
        raise ActionError("An approved summary cannot be empty.")
    edited = summary != draft.summary.strip()
    tokens = draft.post_tokens
    state = load_window(draft.conversation)  # versions wait while a draft does: still its branch
    facts = {}
    if edited:
        # What the edited summary keeps of what it replaces, counted again.
        older = [e for e in state.entries if e.seq < draft.first_kept_seq]
        tally = key_facts.tally(older, state.summary, summary)
        facts = {
            "facts_total": tally.total,
            "facts_kept": tally.kept,
            "facts_lost": list(tally.lost),
        }
        tokens = post_tokens(state, summary, draft.first_kept_seq)
        if tokens >= state.tokens:
            raise ActionError(
                f"With this summary the window would hold {tokens:,} tokens, not fewer "
                f"than the {state.tokens:,} it holds now. Shorten the summary."
            )
    with transaction.atomic():
        approved = _settle(
            draft,
            Compaction.Status.COMMITTED,
            summary=summary,
            edited=edited,
            post_tokens=tokens,
            **facts,
        )
        unpin_abandoned(draft.conversation_id, state, approved.first_kept_seq)
        _record(approved, Review.Action.EDITED if edited else Review.Action.APPROVED, user)
    return approved


def discard(user, conversation_id, compaction_id) -> Compaction:
    with transaction.atomic():
        draft = _settle(_draft(user, conversation_id, compaction_id), Compaction.Status.DISCARDED)
        _record(draft, Review.Action.DISCARDED, user)
    return draft


def undo(user, conversation_id) -> Compaction:
    with transaction.atomic():
        conversation = Conversation.objects.owned(user, conversation_id, lock=True)
        if boundaries.open_one(conversation.pk) is not None:
            # A draft revises the summary being undone: undoing under it would bring it back.
            raise ActionError("Finish or discard the compaction in progress first.")
        boundary = boundaries.latest(conversation.pk)
        if boundary is None:
            raise ActionError("There is no compaction to undo.")
        boundary.status = Compaction.Status.UNDONE
        boundary.save(update_fields=["status", "updated_at"])
        _record(boundary, Review.Action.UNDONE, user)
    return boundary


def _draft(user, conversation_id, compaction_id) -> Compaction:
    """A draft of this user's conversation, and of the conversation the request came from."""
    found = (
        Compaction.objects.select_related("conversation")
        .filter(
            pk=number(compaction_id),
            conversation_id=number(conversation_id),
            conversation__in=Conversation.objects.owned_by(user),
            status=Compaction.Status.DRAFT,
        )
        .first()
    )
    if found is None:
        raise ActionError(NO_LONGER_WAITING)
    return found


def _record(row: Compaction, action: str, user) -> None:
    Review.objects.create(compaction=row, action=action, user=user)


def _settle(draft: Compaction, status: str, **fields) -> Compaction:
    """Move a draft on, only if it is still a draft: a full window may have superseded it."""
    changed = Compaction.objects.filter(pk=draft.pk, status=Compaction.Status.DRAFT).update(
        status=status, updated_at=timezone.now(), **fields
    )
    if not changed:
        raise ActionError(NO_LONGER_WAITING)
    draft.refresh_from_db()
    return draft
