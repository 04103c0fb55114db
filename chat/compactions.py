"""Compacting a conversation, as transactions on the domain: open a compaction as its plan says
(compaction/planning.py: clear old tool results at once, or claim a summary), close it with
what the summariser returned, what a boundary does to its conversation (the running totals,
abandoned pins, the auto-compaction counters), and what a person does to compaction: compact
now, review a draft (approve it, edited or not, discard it, or regenerate it with new
instructions), undo the latest boundary.

Opening happens inside a transaction that holds the conversation's row lock (the turn's claim,
or a user's "compact now"), so a compaction and a reply never start together. The summariser's
call between opening and closing, and telling the tabs, are the turn engine's
(turns/compacting.py). A person's action validates and writes in one transaction, scoped to the
user, and returns the row it settled; every review leaves a `Review` row: the audit trail
admins read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from chat.figures import Panel, load_panel
from chat.models import Conversation, Message, Pin, stale_before
from chat.snapshot import read_snapshot
from chat.window_loading import load_window, state_of
from compaction import boundaries, key_facts, summariser
from compaction.brief import SummaryResult
from compaction.entries import Entry
from compaction.models import Compaction, Review
from compaction.planning import Plan, plan_compaction
from compaction.policy import auto_compaction_due, auto_paused_until
from compaction.window_state import WindowState, post_tokens
from core.clean import number
from core.errors import ActionError
from providers.prices import cost

DRAFT_WAITING = (
    "A draft summary is waiting for your review first: approve, regenerate or discard it in the "
    "review box under the newest message, then compact again."
)
ALREADY_RUNNING = "A compaction is already running for this conversation."
NOTHING_TO_CUT = (
    "Nothing to compact yet: the window holds only the latest turn, which is always kept "
    "verbatim. Keep chatting; once earlier turns build up, Compact now can fold them into a "
    "summary."
)


@dataclass(frozen=True)
class Opened:
    """A compaction claimed and ready to run, with everything it needs."""

    row: Compaction
    conversation: Conversation
    state: WindowState
    older: list[Entry]
    # Opened by the pre-send check: the queued reply it makes room for runs after it.
    before_reply: bool = False
    # The conversation's last request was recent enough that its prefix is still in the
    # provider's prompt cache: the summary request can read it.
    cache_warm: bool = False
    # Regenerating a draft: the summary of the draft it replaces, to say if the new one is the
    # same (None: not a regeneration).
    regenerates: str | None = None

    @property
    def conversation_id(self) -> int:
        return self.conversation.pk


def auto_due(conversation: Conversation, window: WindowState, *, draft_waiting: bool) -> bool:
    """Whether the conversation's window, as a reply left it, calls for an auto-compaction."""
    return auto_compaction_due(
        window.tokens,
        window.budget,
        window.boundary.post_tokens if window.boundary else None,
        draft_waiting=draft_waiting,
        paused_until=conversation.auto_compact_paused_until,
        now=timezone.now(),
    )


def open_locked(
    conversation: Conversation,
    state: WindowState,
    later_versions: set[int],
    *,
    trigger: str,
    instructions: str = "",
    before_reply: bool = False,
    incoming: int = 0,
    warm: bool | None = None,
) -> Opened:
    """Claim the conversation for one compaction; the caller holds the conversation's row lock.
    `later_versions`: messages with an older version after the boundary (the tail never starts
    at one); `incoming`: tokens the next request adds on top of the window (a turn's steps so
    far); `warm`: whether its prefix is in the prompt cache (None: judge by its latest reply).
    The window's plan (what to clear, where to cut, what to fold) is written here once.
    ActionError if none can open."""
    if before_reply:
        boundaries.set_drafts_aside(conversation.pk)
    waiting = boundaries.open_one(conversation.pk)
    if waiting is not None:
        if waiting.status == Compaction.Status.DRAFT:
            raise ActionError(DRAFT_WAITING)
        raise ActionError(ALREADY_RUNNING)
    plan = plan_compaction(
        state,
        later_versions,
        may_clear=trigger == Compaction.Trigger.AUTO,
        before_reply=before_reply,
        incoming=incoming,
        min_chars=settings.TOOL_CLEAR_MIN_CHARS,
    )
    if plan is None:
        raise ActionError(NOTHING_TO_CUT)
    if plan.clearing is not None:
        return Opened(_clear(conversation, plan), conversation, state, [])
    row = _claim(conversation, plan, trigger, instructions)
    if warm is None:
        warm = summariser.cache_is_warm(_last_request_at(conversation.pk), timezone.now())
    return Opened(row, conversation, state, plan.older, before_reply, warm)


def _claim(conversation: Conversation, plan: Plan, trigger: str, instructions: str) -> Compaction:
    """The running row of a summary. The database refuses a second open one of a conversation
    (one racing this): inside a savepoint, so the caller's transaction goes on to say so."""
    try:
        with transaction.atomic():
            return Compaction.objects.create(
                conversation=conversation,
                trigger=trigger,
                instructions=instructions.strip(),
                first_kept_seq=plan.first_kept,
                pre_tokens=plan.pre_tokens,
                heartbeat_at=timezone.now(),
                cleared_before_seq=plan.cleared_before_seq,
                files=plan.files,
            )
    except IntegrityError:
        raise ActionError(ALREADY_RUNNING) from None


def _last_request_at(conversation_id: int) -> datetime | None:
    """When the conversation's latest reply finished: its prefix was cached then."""
    return (
        Message.objects.filter(conversation_id=conversation_id, input_tokens__isnull=False)
        .order_by("-seq")
        .values_list("updated_at", flat=True)
        .first()
    )


def _clear(conversation: Conversation, plan: Plan) -> Compaction:
    """Commit a clearing at once: no model call, nothing to review."""
    row = Compaction.objects.create(
        conversation=conversation,
        trigger=Compaction.Trigger.AUTO,
        kind=Compaction.Kind.CLEAR,
        status=Compaction.Status.COMMITTED,
        first_kept_seq=plan.first_kept,
        summary=plan.summary,
        cleared_before_seq=plan.cleared_before_seq,
        cleared_count=plan.clearing.count,
        files=plan.files,
        pre_tokens=plan.pre_tokens,
        post_tokens=plan.post_tokens,
        summariser="",
    )
    _count_auto_outcome(conversation.pk, failed=False)
    return row


def open_mid_turn(conversation_id: int, reply_seq: int, incoming: int) -> Opened:
    """Mid-turn, the steps so far (`incoming` tokens) leave no room for the next: compact the
    window the reply answers, committing directly, as the check before a request does."""
    with transaction.atomic():
        conversation = Conversation.objects.locked(conversation_id)
        state = read_snapshot(conversation.pk)
        return open_locked(
            conversation,
            state_of(conversation, state, before_seq=reply_seq),
            state.later_versions(),
            trigger=Compaction.Trigger.AUTO,
            before_reply=True,
            incoming=incoming,
            warm=True,  # the turn's previous step has just read and written the prefix
        )


def close(
    opened: Opened, result: SummaryResult, duration_ms: int, *, review: bool, model: str = ""
) -> Compaction:
    """Close the row with what the summariser returned (committed, a draft to review, or
    failed), written by `model` when it is the model's, with what it does to the conversation,
    in one transaction."""
    row = opened.row
    boundaries.outcome(
        row,
        result,
        post_tokens(opened.state, result.summary, row.first_kept_seq),
        key_facts.tally(opened.older, opened.state.summary, result.summary),
        review=review,
        model=model,
    )
    row.duration_ms = duration_ms
    with transaction.atomic():
        # Under the conversation's lock, as a pin is made (chat/conversations.set_pinned): no
        # pin on a version this boundary folds away can slip in after its unpinning.
        Conversation.objects.locked(opened.conversation_id)
        if not boundaries.close(row):
            return Compaction.objects.get(pk=row.pk)  # recovered as stale meanwhile
        # The running totals are priced at the conversation's model: a summary another model
        # wrote adds its own cost instead (the price its divider shows: `render.tags.cost`).
        writer = row.summary_model
        other = bool(writer) and writer != opened.conversation.model
        Conversation.objects.add_spent(
            opened.conversation_id,
            row.usage,
            other_model_cost=(cost(row.usage, writer) or 0.0) if other else None,
        )
        if row.status == Compaction.Status.COMMITTED:
            unpin_abandoned(opened.conversation_id, opened.state, row.first_kept_seq)
        if row.trigger == Compaction.Trigger.AUTO:
            _count_auto_outcome(opened.conversation_id, row.status == Compaction.Status.FAILED)
    return row


def unpin_abandoned(conversation_id: int, state: WindowState, first_kept: int) -> None:
    """A boundary at `first_kept` folds the branch before it for good: pins on other versions
    there (off the branch, so never shown again, nor unpinnable) must not ride in the window.
    The pins in the span are read and the branch's messages told apart here: a query naming
    the branch's messages would bind one value per message (an imported conversation's tens of
    thousands are more than a database takes in one statement). Pins are few: people make them."""
    kept = {e.seq for e in state.entries}
    pins = Pin.objects.filter(
        conversation_id=conversation_id,
        message__seq__gte=state.first_kept,
        message__seq__lt=first_kept,
    ).values_list("pk", "message__seq")
    abandoned = [pk for pk, seq in pins if seq not in kept]
    if abandoned:
        Pin.objects.filter(pk__in=abandoned).delete()


def _count_auto_outcome(conversation_id: int, failed: bool) -> None:
    """Repeated failures usually mean the provider is down or the summary does not fit: after
    COMPACT_FAILURE_LIMIT in a row, auto-compaction rests for COMPACT_PAUSE_MINUTES. Kept on
    the conversation row, which every turn loads anyway."""
    conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
    failures = conversation.auto_compact_failures + 1 if failed else 0
    Conversation.objects.filter(pk=conversation_id).update(
        auto_compact_failures=failures,
        auto_compact_paused_until=auto_paused_until(
            failures,
            timezone.now(),
            limit=settings.COMPACT_FAILURE_LIMIT,
            pause=timedelta(minutes=settings.COMPACT_PAUSE_MINUTES),
        ),
    )


def after_outcome(row: Compaction) -> tuple[Panel, Conversation, bool]:
    """What a tab needs once a compaction settled: the context panel now, the conversation, and
    whether it set a waiting draft aside."""
    conversation = Conversation.objects.get(pk=row.conversation_id)
    panel = load_panel(conversation)
    return panel, conversation, boundaries.superseded_a_draft(row)


# --- what a person does to compaction -------------------------------------------------------------

NO_LONGER_WAITING = "That summary is no longer waiting for review."


def open_for_user(user, conversation_id, instructions, *, discard=None) -> Opened:
    """Compact now, steered by `instructions` (cleaned by the caller); with `discard` (a draft's
    id), regenerate that draft: it is discarded and the new one keeps its trigger."""
    with transaction.atomic():
        conversation = Conversation.objects.owned(user, conversation_id, lock=True)
        # A compaction cut off by a dying process is released now (a reply cut off that way is
        # the sweep's: until then this is refused as "wait for the reply").
        boundaries.close_stale(stale_before(), conversation.pk)
        trigger, regenerates = Compaction.Trigger.MANUAL, None
        if discard is not None:
            discarded = _settle(_draft(user, conversation.pk, discard), Compaction.Status.DISCARDED)
            _record(discarded, Review.Action.REGENERATED, user)
            trigger, regenerates = discarded.trigger, discarded.summary
        state = read_snapshot(conversation.pk)
        if state.streaming_id:
            # Rolls the discard back too: the draft stays for when the reply has finished.
            raise ActionError("Wait for the reply to finish, then compact.")
        opened = open_locked(
            conversation,
            state_of(conversation, state),
            state.later_versions(),
            trigger=trigger,
            instructions=instructions,
        )
        return replace(opened, regenerates=regenerates)


@dataclass(frozen=True)
class DraftFigures:
    """What a draft's summary, as the person has it now, would do: the window before and after,
    and the key facts of what it replaces that it states (compaction/key_facts.py)."""

    pre_tokens: int
    post_tokens: int
    facts: key_facts.Tally
    # The window now: a summary that would not make it smaller cannot be approved.
    window_tokens: int

    @property
    def grows(self) -> bool:
        return self.post_tokens >= self.window_tokens


def _figures(draft: Compaction, state: WindowState, summary: str) -> DraftFigures:
    """The figures of `draft` with `summary` in place of the one it was written with, counted
    as a boundary counts them (chat/compactions.close): one measure, before and after an edit."""
    older = [e for e in state.entries if e.seq < draft.first_kept_seq]
    return DraftFigures(
        pre_tokens=draft.pre_tokens,
        post_tokens=post_tokens(state, summary, draft.first_kept_seq),
        facts=key_facts.tally(older, state.summary, summary),
        window_tokens=state.tokens,
    )


def draft_figures(user, conversation_id, compaction_id, summary: str) -> DraftFigures:
    """The figures of the user's waiting draft with `summary` (cleaned by the caller) as the
    person is editing it; ActionError if it is no longer waiting."""
    draft = _draft(user, conversation_id, compaction_id)
    return _figures(draft, load_window(draft.conversation), summary)


def approve(user, conversation_id, compaction_id, summary: str) -> Compaction:
    """Commit a draft with `summary` (cleaned by the caller), edited or as it was written."""
    draft = _draft(user, conversation_id, compaction_id)
    if not summary:
        raise ActionError("An approved summary cannot be empty.")
    edited = summary != draft.summary.strip()
    state = load_window(draft.conversation)  # versions wait while a draft does: still its branch
    fields = {}
    if edited:
        # What the edited summary keeps of what it replaces, counted again.
        figures = _figures(draft, state, summary)
        if figures.grows:
            raise ActionError(
                f"With this summary the window would hold {figures.post_tokens:,} tokens, not "
                f"fewer than the {figures.window_tokens:,} it holds now. Shorten the summary."
            )
        fields = {
            "facts_total": figures.facts.total,
            "facts_kept": figures.facts.kept,
            "facts_lost": list(figures.facts.lost),
            "post_tokens": figures.post_tokens,
        }
    with transaction.atomic():
        approved = _settle(
            draft, Compaction.Status.COMMITTED, summary=summary, edited=edited, **fields
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
