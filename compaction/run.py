"""Running a compaction: claim its row, summarise, close the row with its numbers.

Opening happens inside a transaction the caller holds on the conversation (the turn engine's
claim, or a user's "compact now"), so a compaction and a reply never start together. Running is
one model call (or the rule-based brief), then a conditional write: a row that stopped being
`running` meanwhile (recovered as stale by another process) is not overwritten.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

import providers
from chat import db
from chat.clean import scrubbed
from chat.models import USAGE_COLUMNS, Conversation, Message, Pin
from providers.values import Request, Usage
from tools import registry

from . import summarise as brief
from .clearing import Clearing, cleared, plan
from .cut import choose_cut
from .entries import Entry
from .loading import WindowState, head_tokens, load_window
from .models import Compaction
from .policy import Budget, auto_paused_until, must_compact_before_send
from .tokens import CHARS_PER_TOKEN, estimate_content, window_total

INTERRUPTED = "Interrupted: the server stopped while it ran."
# A draft set aside because the window filled up before it was reviewed (open_locked).
SUPERSEDED = "Superseded: the window was full before the draft was reviewed."
# Opens the error of a compaction whose summary would not have made the window smaller: not a
# fault, and the user is told what to do instead (see `nothing_to_gain`).
NOT_ENOUGH = "Not enough to fold away yet"
# The API keeps a cached prefix five minutes after its last use; a minute's margin covers the
# summary call's own start and clocks that differ between processes.
CACHE_WARM_FOR = timedelta(minutes=4)


class CompactionRefused(Exception):
    """The compaction did not start; `reason` says why, for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
    # provider's prompt cache: the summary request can read it (`summary_over_prefix`).
    cache_warm: bool = False

    @property
    def conversation_id(self) -> int:
        return self.conversation.pk


def open_locked(
    conversation: Conversation,
    state: WindowState,
    *,
    trigger: str,
    instructions: str = "",
    before_reply: bool = False,
    incoming: int = 0,
    warm: bool | None = None,
) -> Opened:
    """Claim the conversation for one compaction. The caller holds the conversation's row lock.
    `incoming`: tokens the next request adds on top of the window (a turn's steps so far);
    `warm`: whether its prefix is in the prompt cache (None: judge by its latest reply)."""
    if before_reply:
        # The window no longer fits: a draft still waiting for review cannot hold up the request.
        # It stays in admin, marked, and this compaction commits directly.
        Compaction.objects.filter(
            conversation_id=conversation.pk, status=Compaction.Status.DRAFT
        ).update(
            status=Compaction.Status.DISCARDED,
            error=SUPERSEDED,
            updated_at=timezone.now(),
        )
    open_one = (
        Compaction.objects.filter(
            conversation_id=conversation.pk,
            status__in=[Compaction.Status.RUNNING, Compaction.Status.DRAFT],
        )
        .only("status")
        .first()
    )
    if open_one is not None:
        if open_one.status == Compaction.Status.DRAFT:
            raise CompactionRefused(
                "A draft summary is waiting for your review first: approve, regenerate or "
                "discard it in the review box above the transcript, then compact again."
            )
        raise CompactionRefused("A compaction is already running for this conversation.")
    if trigger == Compaction.Trigger.AUTO:
        clearing = plan(state.entries, state.budget.keep_tokens, settings.TOOL_CLEAR_MIN_CHARS)
        if clearing is not None and _clearing_is_enough(state, clearing, before_reply, incoming):
            return Opened(_clear(conversation, state, clearing), conversation, state, [])
    cut = choose_cut(state.entries, state.budget.keep_tokens, state.later_versions())
    if cut is None:
        raise CompactionRefused(
            "Nothing to compact yet: the window holds only the latest turn, which is always "
            "kept verbatim. Keep chatting; once earlier turns build up, Compact now can fold "
            "them into a summary."
        )
    try:
        with transaction.atomic():
            row = Compaction.objects.create(
                conversation=conversation,
                trigger=trigger,
                instructions=instructions.strip(),
                first_kept_seq=cut,
                pre_tokens=state.tokens,
                heartbeat_at=timezone.now(),
                # Results cleared before stay cleared in the tail this one keeps.
                cleared_before_seq=state.boundary.cleared_before_seq if state.boundary else None,
            )
    except IntegrityError:
        raise CompactionRefused("A compaction is already running for this conversation.") from None
    older = [e for e in state.entries if e.seq < cut]
    if warm is None:
        warm = cache_is_warm(_last_request_at(conversation.pk), timezone.now())
    return Opened(row, conversation, state, older, before_reply, warm)


def _last_request_at(conversation_id: int) -> datetime | None:
    """When the conversation's latest reply finished: its prefix was cached then."""
    return (
        Message.objects.filter(conversation_id=conversation_id, input_tokens__isnull=False)
        .order_by("-seq")
        .values_list("updated_at", flat=True)
        .first()
    )


def cache_is_warm(last_request_at: datetime | None, now: datetime) -> bool:
    return last_request_at is not None and now - last_request_at < CACHE_WARM_FOR


def _clearing_is_enough(
    state: WindowState, clearing: Clearing, before_reply: bool, incoming: int
) -> bool:
    after = state.tokens - clearing.saved
    if before_reply:
        return not must_compact_before_send(after, incoming, state.budget)
    return after < state.budget.threshold


def _clear(conversation: Conversation, state: WindowState, clearing: Clearing) -> Compaction:
    """Commit a clearing at once: no model call, nothing to review. The window keeps its cut
    and summary; only the old results become placeholders."""
    entries = cleared(state.entries, clearing.before_seq, settings.TOOL_CLEAR_MIN_CHARS)
    boundary = state.boundary
    row = Compaction.objects.create(
        conversation=conversation,
        trigger=Compaction.Trigger.AUTO,
        kind=Compaction.Kind.CLEAR,
        status=Compaction.Status.COMMITTED,
        first_kept_seq=boundary.first_kept_seq if boundary else 1,
        summary=boundary.summary if boundary else "",
        cleared_before_seq=clearing.before_seq,
        cleared_count=clearing.count,
        pre_tokens=state.tokens,
        post_tokens=window_total(state.head_tokens, entries, None),
        summariser="",
    )
    _count_auto_outcome(conversation.pk, failed=False)
    return row


def open_mid_turn(conversation_id: int, reply_seq: int, incoming: int) -> Opened:
    """Mid-turn, the steps so far (`incoming` tokens) leave no room for the next: compact the
    window the reply answers, committing directly, as the check before a request does."""
    with transaction.atomic():
        conversation = Conversation.objects.locked(conversation_id)
        state = load_window(conversation, before_seq=reply_seq)
        return open_locked(
            conversation,
            state,
            trigger=Compaction.Trigger.AUTO,
            before_reply=True,
            incoming=incoming,
            warm=True,  # the turn's previous step has just read and written the prefix
        )


async def run(opened: Opened) -> Compaction:
    """Summarise and close the row: committed, a draft to review, or failed. Never left running."""
    row, conversation = opened.row, opened.conversation
    if row.status != Compaction.Status.RUNNING:
        return row  # a clearing: committed when it was opened
    started = time.monotonic()
    try:
        client = providers.client_for(conversation.model)
        result = await summarise(
            client,
            conversation.model,
            opened.older,
            opened.state.summary,
            row.instructions,
            max_tokens=settings.SUMMARY_MAX_TOKENS,
            max_chars=fallback_chars(opened.state.budget, sum(e.tokens for e in opened.older)),
            over_prefix=await summary_over_prefix(opened, client.capabilities(conversation.model)),
        )
        review = conversation.review_compactions and not opened.before_reply
        duration_ms = int((time.monotonic() - started) * 1000)
        return await db.run(close, opened, result, duration_ms, review=review)
    except BaseException as exc:
        # Cancelled (Stop, shutdown) or crashed: release the conversation at once.
        await asyncio.shield(db.run(mark_failed, row.pk, f"{type(exc).__name__}: {exc}"))
        raise


async def summary_over_prefix(opened: Opened, capabilities) -> Request | None:
    """The summary request over the conversation's cached prefix, when it pays: the prefix is
    still cached (else re-sending the whole window costs more than the part that leaves it),
    and the window with the request fits the model's context. None: the separate transcript."""
    if not (settings.SUMMARY_READS_CACHE and capabilities.supports_caching and opened.cache_warm):
        return None
    state, conversation = opened.state, opened.conversation
    window = state.window()
    messages = brief.build_prefix_request(
        window.messages, opened.older, bool(state.summary), opened.row.instructions
    )
    asked = estimate_content(messages[-1]["content"])  # with the message it joins: on the safe side
    if state.tokens + asked + settings.SUMMARY_MAX_TOKENS > capabilities.context_window:
        return None
    box = await registry.offered(capabilities, conversation.disabled_tools)
    return Request(
        model=conversation.model,
        system=state.system,
        messages=messages,
        max_tokens=settings.SUMMARY_MAX_TOKENS,
        tools=box.definitions if box else (),
        cache_head=window.head,  # the same marks as the chat requests: their prefix is read
    )


async def summarise(
    client,
    model: str,
    entries: list[Entry],
    previous_summary: str | None,
    instructions: str = "",
    *,
    max_tokens: int = 4096,
    max_chars: int = 6000,
    over_prefix: Request | None = None,
) -> brief.SummaryResult:
    """The summary from the model, falling back to rules on any fault. Never empty.

    Asked over the conversation's prefix when `over_prefix` is given; if what comes back holds
    no usable summary (the model went on with the conversation, or called a tool), asked again
    over a separate transcript. A provider fault falls back to rules at once."""
    capabilities = client.capabilities(model)
    if not capabilities.can_summarise:
        # An offline stand-in cannot summarise; rules are the honest answer, not a failure.
        return brief.by_rules(entries, previous_summary, instructions, max_chars=max_chars)
    system, messages = brief.build_summary_request(entries, previous_summary, instructions)
    separate = Request(
        model=model,
        system=system,
        messages=messages,
        max_tokens=max_tokens,
        # The summariser's instructions are the same every time; the transcript never is.
        cache_head=0 if capabilities.supports_caching else None,
        cache_latest=False,
    )
    spent = Usage()
    for request in (over_prefix, separate):
        if request is None:
            continue
        try:
            final = await providers.complete(client, request)
        except Exception as exc:  # provider faults of any kind fall back, never lose the turn
            reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            return brief.by_rules(
                entries,
                previous_summary,
                instructions,
                max_chars=max_chars,
                error=f"model summary call failed: {reason}",
                usage=spent.as_dict(),
            )
        spent = spent.plus(final.usage)
        result = brief.from_output(
            final.text,
            final.stop_reason,
            spent.as_dict() or {},
            entries,
            previous_summary,
            instructions,
            max_chars=max_chars,
        )
        if result.summariser == "model":
            return result
    return result


def fallback_chars(budget: Budget, replaced_tokens: int) -> int:
    """Size of a rule-based summary: well under what it replaces and a small share of the
    budget, so that falling back shrinks the window (a compaction that would not is refused)."""
    tokens = min(int(replaced_tokens * 0.7), int(budget.total * 0.15))
    return max(int(tokens * CHARS_PER_TOKEN), 600)


def post_tokens(state: WindowState, summary: str, cut: int) -> int:
    """The window's size once a boundary with `summary` at `cut` is in force."""
    kept = [e for e in state.entries if e.seq >= cut]
    pinned = state.pinned_before_cut + [e for e in state.entries if e.seq < cut and e.pinned]
    return head_tokens(state.system, summary, pinned) + sum(e.tokens for e in kept)


def unpin_abandoned(conversation_id: int, state: WindowState, first_kept: int) -> None:
    """A boundary at `first_kept` folds the branch before it for good: pins on other versions
    there (off the branch, so never shown again, nor unpinnable) must not ride in the window."""
    low = state.boundary.first_kept_seq if state.boundary else 1
    kept = {e.seq for e in state.entries}
    Pin.objects.filter(
        conversation_id=conversation_id, message__seq__gte=low, message__seq__lt=first_kept
    ).exclude(message__seq__in=kept).delete()


def close(opened: Opened, result: brief.SummaryResult, duration_ms: int, *, review: bool):
    row = opened.row
    row.summary = scrubbed(result.summary)  # model output: stored and shown, never refused
    row.raw_output = scrubbed(result.raw_output)
    row.summariser = result.summariser
    row.usage = result.usage or None
    row.error = result.error
    row.duration_ms = duration_ms
    row.post_tokens = post_tokens(opened.state, result.summary, row.first_kept_seq)
    if not result.summary.strip():
        row.status = Compaction.Status.FAILED
        row.error = row.error or "The summary was empty."
    elif row.post_tokens >= row.pre_tokens:
        row.status = Compaction.Status.FAILED
        row.error = (
            f"{NOT_ENOUGH}: the window holds {row.pre_tokens:,} tokens, and a summary of its "
            f"earlier messages with the recent ones kept verbatim would take "
            f"{row.post_tokens:,}, so nothing changed. Keep chatting: once more has built up "
            "before the latest turns, Compact now will make the window smaller (and "
            "auto-compaction does it by itself as the window fills up)."
        )
    else:
        row.status = Compaction.Status.DRAFT if review else Compaction.Status.COMMITTED
    fields = [
        "summary",
        "raw_output",
        "summariser",
        *USAGE_COLUMNS,
        "error",
        "duration_ms",
        "post_tokens",
        "status",
    ]
    with transaction.atomic():
        written = Compaction.objects.filter(pk=row.pk, status=Compaction.Status.RUNNING).update(
            updated_at=timezone.now(), **{f: getattr(row, f) for f in fields}
        )
        if not written:
            return Compaction.objects.get(pk=row.pk)  # recovered as stale meanwhile
        if row.usage:
            Conversation.objects.add_spent(opened.conversation_id, row.usage)
        if row.status == Compaction.Status.COMMITTED:
            unpin_abandoned(opened.conversation_id, opened.state, row.first_kept_seq)
        if row.trigger == Compaction.Trigger.AUTO:
            _count_auto_outcome(opened.conversation_id, row.status == Compaction.Status.FAILED)
    return row


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


def nothing_to_gain(row: Compaction) -> bool:
    """The compaction failed only because there was too little to fold away yet."""
    return row.status == Compaction.Status.FAILED and row.error.startswith(NOT_ENOUGH)


def mark_failed(compaction_id: int, error: str) -> None:
    Compaction.objects.filter(pk=compaction_id, status=Compaction.Status.RUNNING).update(
        status=Compaction.Status.FAILED, error=error[:2000], updated_at=timezone.now()
    )


# --- liveness ------------------------------------------------------------------------------------


def stale_before() -> datetime:
    """Replies and compactions not touched since then belong to a process that died."""
    return timezone.now() - timedelta(seconds=settings.TURN_STALE_SECONDS)


def stale(cutoff: datetime, conversation_id: int | None = None):
    """Running compactions whose process stopped touching them: it died."""
    rows = Compaction.objects.filter(status=Compaction.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )
    return rows if conversation_id is None else rows.filter(conversation_id=conversation_id)


def close_stale(cutoff: datetime, conversation_id: int | None = None) -> list[int]:
    """Fail compactions cut off by a dying process; returns their conversations."""
    found = list(stale(cutoff, conversation_id).values_list("pk", "conversation_id"))
    if found:
        Compaction.objects.filter(
            pk__in=[pk for pk, _ in found], status=Compaction.Status.RUNNING
        ).update(status=Compaction.Status.FAILED, error=INTERRUPTED, updated_at=timezone.now())
    return sorted({conversation for _, conversation in found})


def touch(compaction_ids: list[int]) -> None:
    Compaction.objects.filter(pk__in=compaction_ids, status=Compaction.Status.RUNNING).update(
        heartbeat_at=timezone.now()
    )
