"""Boundary storage: the writes to the compaction rows themselves.

A compaction row is claimed `running`, then closed once: committed (a boundary in force), a
draft for review, or failed. Every close is conditional on the row still being `running`, so a
row recovered as stale by another process meanwhile is never overwritten. What a compaction does
to its conversation (the running totals, pins, the auto-compaction counters) is the domain's, in
the same transactions (chat/compactions.py).
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from compaction.brief import SummaryResult
from compaction.key_facts import Tally
from compaction.models import Compaction
from core.clean import scrubbed
from providers.usage_columns import COLUMNS

INTERRUPTED = "Interrupted: the server stopped while it ran."
# A draft set aside because the window filled up before it was reviewed.
SUPERSEDED = "Superseded: the window was full before the draft was reviewed."
# Opens the error of a compaction whose summary would not have made the window smaller: not a
# fault, and the user is told what to do instead (see `nothing_to_gain`).
NOT_ENOUGH = "Not enough to fold away yet"


def outcome(
    row: Compaction,
    result: SummaryResult,
    post_tokens: int,
    facts: Tally,
    *,
    review: bool,
    model: str = "",
) -> None:
    """Fill `row` (not saved) with what the summariser returned, the key facts it kept and
    lost (`facts`), and what became of it; `model`: the one asked for the summary, recorded
    as its writer when the summary is its own (not the rule-based brief)."""
    row.summary = scrubbed(result.summary)  # model output: stored and shown, never refused
    row.facts_total, row.facts_kept = facts.total, facts.kept
    row.facts_lost = [scrubbed(fact) for fact in facts.lost]
    row.raw_output = scrubbed(result.raw_output)
    row.summariser = result.summariser
    row.summary_model = model if result.summariser == "model" else ""
    row.usage = result.usage
    row.error = result.error
    row.post_tokens = post_tokens
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


_CLOSED_FIELDS = [
    "summary",
    "raw_output",
    "summariser",
    "summary_model",
    "facts_total",
    "facts_kept",
    "facts_lost",
    *COLUMNS,
    "error",
    "duration_ms",
    "post_tokens",
    "status",
]


def close(row: Compaction) -> bool:
    """Write the row's outcome if it is still running; False: it was recovered meanwhile."""
    return bool(
        Compaction.objects.filter(pk=row.pk, status=Compaction.Status.RUNNING).update(
            updated_at=timezone.now(), **{f: getattr(row, f) for f in _CLOSED_FIELDS}
        )
    )


def nothing_to_gain(row: Compaction) -> bool:
    """The compaction failed only because there was too little to fold away yet."""
    return row.status == Compaction.Status.FAILED and row.error.startswith(NOT_ENOUGH)


def mark_failed(compaction_id: int, error: str) -> None:
    Compaction.objects.filter(pk=compaction_id, status=Compaction.Status.RUNNING).update(
        status=Compaction.Status.FAILED, error=error[:2000], updated_at=timezone.now()
    )


def set_drafts_aside(conversation_id: int) -> None:
    """The window no longer fits: a draft still waiting for review cannot hold up the request.
    It stays in the admin, marked, and the compaction opened now commits directly."""
    Compaction.objects.filter(
        conversation_id=conversation_id, status=Compaction.Status.DRAFT
    ).update(status=Compaction.Status.DISCARDED, error=SUPERSEDED, updated_at=timezone.now())


def latest(conversation_id: int, *fields: str) -> Compaction | None:
    """The boundary in force for the conversation: its newest committed compaction, if any
    (only `fields` of it, when named: a summary is long)."""
    rows = Compaction.objects.filter(
        conversation_id=conversation_id, status=Compaction.Status.COMMITTED
    ).order_by("-id")
    return (rows.only(*fields) if fields else rows).first()


def open_one(conversation_id: int) -> Compaction | None:
    """The conversation's compaction running or waiting for review, if any (one at most)."""
    return (
        Compaction.objects.filter(
            conversation_id=conversation_id,
            status__in=[Compaction.Status.RUNNING, Compaction.Status.DRAFT],
        )
        .only("status")
        .first()
    )


def superseded_a_draft(row: Compaction) -> bool:
    """Whether committing `row` set a waiting draft aside: the draft is the compaction just
    before it, since only one is ever open at a time."""
    if row.status != Compaction.Status.COMMITTED:
        return False
    before = (
        Compaction.objects.filter(conversation_id=row.conversation_id, pk__lt=row.pk)
        .order_by("-pk")
        .values_list("status", "error")
        .first()
    )
    return before == (Compaction.Status.DISCARDED, SUPERSEDED)


# --- liveness ------------------------------------------------------------------------------------


def close_stale(cutoff: datetime, conversation_id: int | None = None) -> list[int]:
    """Fail compactions cut off by a dying process (not touched since `cutoff`); returns their
    conversations."""
    rows = Compaction.objects.filter(status=Compaction.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )
    if conversation_id is not None:
        rows = rows.filter(conversation_id=conversation_id)
    found = list(rows.values_list("pk", "conversation_id"))
    if found:
        Compaction.objects.filter(
            pk__in=[pk for pk, _ in found], status=Compaction.Status.RUNNING
        ).update(status=Compaction.Status.FAILED, error=INTERRUPTED, updated_at=timezone.now())
    return sorted({conversation for _, conversation in found})


def touch(compaction_ids: list[int]) -> None:
    """The heartbeat of the compactions this process runs."""
    Compaction.objects.filter(pk__in=compaction_ids, status=Compaction.Status.RUNNING).update(
        heartbeat_at=timezone.now()
    )
