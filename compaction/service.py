"""Where compaction meets storage: load the window, run a compaction, review, undo.

The decisions (where to cut, what to send, when to fire) are pure functions in the sibling
modules; this module only reads and writes rows around them. It never calls back into the chat
views or consumer: callers broadcast whatever it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from chat.models import Conversation, Message, Pin

from .cut import choose_cut
from .entries import Entry
from .models import Compaction
from .policy import Budget, auto_paused_until, must_compact_before_send, needs_auto_compaction
from .summarise import summarise
from .tokens import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD,
    default_budget,
    estimate_content,
    estimate_text,
    usage_input_total,
    window_total,
)
from .window import Window, assemble, summary_pair

log = logging.getLogger(__name__)

# A compaction still "running" after this long was cut off by a dying process.
STALE_RUNNING_AFTER = timedelta(minutes=10)


class CompactionRefused(Exception):
    """The compaction did not start; `reason` says why, for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class WindowState:
    window: Window
    tokens: int
    budget: Budget
    boundary: Compaction | None
    entries: list[Entry]  # the transcript messages the window carries verbatim
    pinned_before_cut: list[Entry]
    head_tokens: int  # estimate for the system prompt, summary pair and pins


def budget_for(conversation: Conversation) -> Budget:
    provider = "demo" if conversation.model == "demo" else "anthropic"
    total = settings.CONTEXT_BUDGET_TOKENS or default_budget(conversation.model, provider)
    return Budget(
        total=total,
        auto_at=settings.AUTO_COMPACT_AT,
        keep_share=settings.KEEP_TAIL_SHARE,
        # Room for the reply: the configured maximum, but never most of a small budget.
        reserve=min(settings.CHAT_MAX_TOKENS, total // 10),
    )


def latest_boundary(conversation: Conversation) -> Compaction | None:
    return (
        Compaction.objects.filter(conversation=conversation, status=Compaction.Status.COMMITTED)
        .order_by("-id")
        .first()
    )


def head_tokens(system: str, summary: str | None, pinned: list[Entry]) -> int:
    head = estimate_text(system)
    if summary:
        head += sum(estimate_content(m["content"]) for m in summary_pair(summary, pinned))
    return head


def load_window(conversation: Conversation) -> WindowState:
    """The window the next request would carry, and its size. A fixed number of queries.

    Only the messages after the latest boundary are loaded, so the work is bounded by the window,
    not by the length of the conversation.
    """
    boundary = latest_boundary(conversation)
    first_kept = boundary.first_kept_seq if boundary else 1
    rows = list(
        conversation.messages.filter(seq__gte=first_kept)
        .exclude(status=Message.Status.STREAMING)
        .order_by("seq")
    )
    pinned_ids = set(
        Pin.objects.filter(conversation=conversation).values_list("message__seq", flat=True)
    )
    entries = [row.to_entry(pinned=row.seq in pinned_ids) for row in rows]
    pinned_before_cut = []
    if boundary and any(seq < first_kept for seq in pinned_ids):
        pinned_before_cut = [
            row.to_entry(pinned=True)
            for row in conversation.messages.filter(
                seq__in=[s for s in pinned_ids if s < first_kept]
            ).order_by("seq")
        ]
    summary = boundary.summary if boundary else None
    window = assemble(conversation.system_prompt, summary, entries, pinned_before_cut)
    head = head_tokens(conversation.system_prompt, summary, pinned_before_cut)
    return WindowState(
        window=window,
        tokens=window_total(head, entries, _anchor(rows, boundary, head)),
        budget=budget_for(conversation),
        boundary=boundary,
        entries=entries,
        pinned_before_cut=pinned_before_cut,
        head_tokens=head,
    )


def _anchor(
    rows: list[Message], boundary: Compaction | None, head_now: int
) -> tuple[int, int, int] | None:
    """The latest reply whose reported usage describes the current window's prefix."""
    boundary_id = boundary.pk if boundary else None
    for row in reversed(rows):
        if (
            row.role == Message.Role.ASSISTANT
            and row.usage
            and row.window_boundary_id == boundary_id
        ):
            # The reply re-enters the next request as a message: its output plus framing.
            output = int(row.usage.get("output_tokens") or 0) + MESSAGE_OVERHEAD
            reported = usage_input_total(row.usage) + output
            if reported:
                head_then = head_now if row.window_head_tokens is None else row.window_head_tokens
                return row.seq, reported, head_then
    return None


# --- running a compaction -------------------------------------------------------------------


def _open(conversation_id: int, trigger: str, instructions: str, *, supersede_draft: bool):
    """Claim the conversation for one compaction and pick the cut. Refuses if one is open."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        Compaction.objects.filter(
            conversation=conversation,
            status=Compaction.Status.RUNNING,
            updated_at__lt=timezone.now() - STALE_RUNNING_AFTER,
        ).update(status=Compaction.Status.FAILED, error="Interrupted: the server stopped.")
        if supersede_draft:
            # The window no longer fits: a draft still waiting for review cannot hold up the
            # request. It stays in admin, marked, and this compaction commits directly.
            Compaction.objects.filter(
                conversation=conversation, status=Compaction.Status.DRAFT
            ).update(
                status=Compaction.Status.DISCARDED,
                error="Superseded: the window was full before the draft was reviewed.",
                updated_at=timezone.now(),
            )
        open_one = Compaction.objects.filter(
            conversation=conversation,
            status__in=[Compaction.Status.RUNNING, Compaction.Status.DRAFT],
        ).first()
        if open_one is not None:
            if open_one.status == Compaction.Status.DRAFT:
                raise CompactionRefused("A draft summary is waiting for your review first.")
            raise CompactionRefused("A compaction is already running for this conversation.")
        state = load_window(conversation)
        cut = choose_cut(state.entries, state.budget.keep_tokens)
        if cut is None:
            raise CompactionRefused(
                "Nothing to compact yet: the window holds only the latest turn."
            )
        try:
            with transaction.atomic():
                row = Compaction.objects.create(
                    conversation=conversation,
                    trigger=trigger,
                    instructions=instructions.strip(),
                    first_kept_seq=cut,
                    pre_tokens=state.tokens,
                )
        except IntegrityError:
            raise CompactionRefused(
                "A compaction is already running for this conversation."
            ) from None
    older = [e for e in state.entries if e.seq < cut]
    previous = state.boundary.summary if state.boundary else None
    return conversation, row, state, older, previous


def _post_tokens(conversation: Conversation, state: WindowState, summary: str, cut: int) -> int:
    kept = [e for e in state.entries if e.seq >= cut]
    pinned = state.pinned_before_cut + [e for e in state.entries if e.seq < cut and e.pinned]
    return head_tokens(conversation.system_prompt, summary, pinned) + sum(e.tokens for e in kept)


def _close(
    row: Compaction,
    conversation: Conversation,
    state: WindowState,
    result,
    started,
    *,
    review: bool,
) -> Compaction:
    row.summary = result.summary
    row.raw_output = result.raw_output
    row.summariser = result.summariser
    row.usage = result.usage or None
    row.error = result.error
    row.duration_ms = int((time.monotonic() - started) * 1000)
    row.post_tokens = _post_tokens(conversation, state, result.summary, row.first_kept_seq)
    if not result.summary.strip():
        row.status = Compaction.Status.FAILED
        row.error = row.error or "The summary was empty."
    elif row.post_tokens >= row.pre_tokens:
        row.status = Compaction.Status.FAILED
        row.error = (
            f"The summary ({row.post_tokens} tokens with the kept tail) would not make the "
            f"window smaller than {row.pre_tokens}; nothing was committed."
        )
    else:
        row.status = Compaction.Status.DRAFT if review else Compaction.Status.COMMITTED
    row.save()
    return row


def fallback_chars(budget: Budget, replaced_tokens: int) -> int:
    """Size of a rule-based summary: well under what it replaces and a small share of the
    budget, so that falling back shrinks the window (a compaction that would not is refused)."""
    tokens = min(int(replaced_tokens * 0.7), int(budget.total * 0.15))
    return max(int(tokens * CHARS_PER_TOKEN), 600)


async def compact(
    conversation_id: int,
    *,
    trigger: str,
    client,
    instructions: str = "",
    allow_review: bool = True,
) -> Compaction:
    """Summarise the older part of the window and write a boundary (or a draft to review).

    Raises `CompactionRefused` when it cannot start. A failed summary never produces an empty
    boundary: the summariser falls back to rules, and a row that still fails is marked failed.
    """
    from asgiref.sync import sync_to_async

    opening = asyncio.ensure_future(
        sync_to_async(_open)(
            conversation_id, trigger, instructions, supersede_draft=not allow_review
        )
    )
    try:
        conversation, row, state, older, previous = await asyncio.shield(opening)
    except asyncio.CancelledError:
        # Cancelled while the row was being claimed: it may still be written, so wait for it
        # and release it, or the conversation could not compact again until it went stale.
        with contextlib.suppress(Exception):
            _, claimed, *_ = await opening
            await sync_to_async(_mark_failed)(claimed.pk, "Cancelled before it started.")
        raise
    started = time.monotonic()
    try:
        result = await summarise(
            client,
            older,
            previous,
            row.instructions,
            max_tokens=settings.SUMMARY_MAX_TOKENS,
            max_chars=fallback_chars(state.budget, sum(e.tokens for e in older)),
        )
        review = allow_review and conversation.review_compactions
        return await sync_to_async(_close)(row, conversation, state, result, started, review=review)
    except BaseException as exc:
        # Cancelled or crashed: release the conversation so the next compaction can run.
        await sync_to_async(_mark_failed)(row.pk, f"{type(exc).__name__}: {exc}")
        raise


def _mark_failed(compaction_id: int, error: str) -> None:
    Compaction.objects.filter(pk=compaction_id, status=Compaction.Status.RUNNING).update(
        status=Compaction.Status.FAILED, error=error[:2000], updated_at=timezone.now()
    )


# --- policy --------------------------------------------------------------------------------


def auto_pause(conversation: Conversation) -> timezone.datetime | None:
    """Until when auto-compaction rests after repeated failures (None: it does not)."""
    limit = settings.COMPACT_FAILURE_LIMIT
    recent = list(
        Compaction.objects.filter(conversation=conversation, trigger=Compaction.Trigger.AUTO)
        .exclude(status__in=[Compaction.Status.RUNNING, Compaction.Status.DRAFT])
        .order_by("-id")
        .values("status", "error", "updated_at")[:limit]
    )
    failures = 0
    for item in recent:
        if item["status"] != Compaction.Status.FAILED:
            break
        failures += 1
    last_failure_at = recent[0]["updated_at"] if failures else None
    return auto_paused_until(
        failures,
        last_failure_at,
        limit=limit,
        pause=timedelta(minutes=settings.COMPACT_PAUSE_MINUTES),
    )


def wants_auto_compaction(conversation: Conversation, state: WindowState | None = None) -> bool:
    """After a reply: has the window passed the auto threshold? `state` saves reloading it."""
    if Compaction.objects.filter(
        conversation=conversation, status__in=[Compaction.Status.RUNNING, Compaction.Status.DRAFT]
    ).exists():
        return False  # one is running, or a draft waits for the user: do not knock again
    state = state or load_window(conversation)
    paused = auto_pause(conversation)
    if paused and paused > timezone.now():
        return False
    last_post = state.boundary.post_tokens if state.boundary else None
    return needs_auto_compaction(state.tokens, state.budget, last_post)


def must_compact_first(state: WindowState) -> bool:
    """Before a request: would the window (whose last message is the new one) overflow?"""
    return must_compact_before_send(state.tokens, 0, state.budget)


# --- review and undo -----------------------------------------------------------------------


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


def _settle(draft: Compaction, status: str, **fields) -> Compaction:
    """Move a draft on, only if it is still a draft: a full window may have superseded it."""
    changed = Compaction.objects.filter(pk=draft.pk, status=Compaction.Status.DRAFT).update(
        status=status, updated_at=timezone.now(), **fields
    )
    if not changed:
        raise CompactionRefused("That summary is no longer waiting for review.")
    draft.refresh_from_db()
    return draft


def approve_draft(user, conversation_id, compaction_id, summary) -> Compaction:
    draft = _draft(user, conversation_id, compaction_id)
    summary = str(summary or "").strip()
    if not summary:
        raise CompactionRefused("An approved summary cannot be empty.")
    edited = summary != draft.summary.strip()
    post_tokens = draft.post_tokens
    if edited:
        state = load_window(draft.conversation)
        post_tokens = _post_tokens(draft.conversation, state, summary, draft.first_kept_seq)
        if post_tokens >= state.tokens:
            raise CompactionRefused(
                f"With this summary the window would hold {post_tokens:,} tokens, not fewer "
                f"than the {state.tokens:,} it holds now. Shorten the summary."
            )
    return _settle(
        draft,
        Compaction.Status.COMMITTED,
        summary=summary,
        edited=edited,
        post_tokens=post_tokens,
    )


def discard_draft(user, conversation_id, compaction_id) -> Compaction:
    draft = _draft(user, conversation_id, compaction_id)
    return _settle(draft, Compaction.Status.DISCARDED)


def undo_latest(user, conversation_id) -> Compaction:
    with transaction.atomic():
        conversation = Conversation.objects.owned_by(user).locked(conversation_id)
        if conversation is None:
            raise CompactionRefused("There is no compaction to undo.")
        if Compaction.objects.filter(
            conversation=conversation,
            status__in=[Compaction.Status.RUNNING, Compaction.Status.DRAFT],
        ).exists():
            # A draft revises the summary being undone: undoing under it would bring it back.
            raise CompactionRefused("Finish or discard the compaction in progress first.")
        boundary = latest_boundary(conversation)
        if boundary is None:
            raise CompactionRefused("There is no compaction to undo.")
        boundary.status = Compaction.Status.UNDONE
        boundary.save(update_fields=["status", "updated_at"])
    return boundary
