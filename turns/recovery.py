"""Recovery: nothing a dying process leaves is stuck.

A streaming reply or running compaction whose heartbeat is older than TURN_STALE_SECONDS was cut
off by a dying process: whichever process looks first closes it (its periodic sweep, or the next
claim or Stop in that conversation), the reply as interrupted with the text saved so far, the
compaction as failed. A queue with nothing running behind it is started by the sweep. Stop is
durable state on the reply row, so the process running it sees it even if the nudge over the
channel layer is lost.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from chat.models import Conversation, Message, stale_before
from chat.search_index import searchable_text
from chat.snapshot import Snapshot
from compaction import boundaries
from compaction.models import Compaction
from providers.blocks import without_empty_text
from providers.tokens import estimate_content

STOPPED_BY_SERVER = "The server stopped before this reply finished."


def request_stop(user, conversation_id, seq: int | None = None) -> tuple[Message, ...]:
    """Mark the streaming reply stopped (the process running it sees this even if the nudge over
    the channel layer is lost). A reply whose process died is closed here and now; returns it."""
    conversation_id = Conversation.objects.owned(user, conversation_id).pk
    recovered = close_stale(stale_before(), conversation_id)
    streaming = Message.objects.filter(
        conversation_id=conversation_id, status=Message.Status.STREAMING
    )
    if seq is not None:
        streaming = streaming.filter(seq=seq)
    streaming.update(stop_requested=True)
    return recovered


def close_stale(cutoff: datetime, conversation_id: int | None = None) -> tuple[Message, ...]:
    """Close replies left streaming by a process that died: interrupted, with their saved text."""
    rows = Message.objects.filter(status=Message.Status.STREAMING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )
    if conversation_id is not None:
        rows = rows.filter(conversation_id=conversation_id)
    closed = []
    for row in rows:
        row.content = without_empty_text(row.content)
        row.status, row.error = Message.Status.INTERRUPTED, STOPPED_BY_SERVER
        row.tokens = estimate_content(row.content) if row.content else 0
        if Message.objects.filter(pk=row.pk, status=Message.Status.STREAMING).update(
            status=row.status,
            error=row.error,
            content=row.content,
            search_text=searchable_text(row.content),
            tokens=row.tokens,
            updated_at=timezone.now(),
        ):
            closed.append(row)
    return tuple(closed)


def recover(conversation: Conversation, seen: Snapshot) -> tuple[Message, ...]:
    """Inside a claim: close this conversation's stale reply or compaction, if any (the state
    read under its lock then says nothing runs)."""
    cutoff = stale_before()
    recovered: tuple[Message, ...] = ()
    if seen.streaming_id and _is_stale(seen.streaming_heartbeat, cutoff):
        recovered = close_stale(cutoff, conversation.pk)
        seen.streaming_id = None
    if seen.running_id and _is_stale(seen.running_heartbeat, cutoff):
        boundaries.close_stale(cutoff, conversation.pk)
        seen.running_id = None
    return recovered


def _is_stale(heartbeat: datetime | None, cutoff: datetime) -> bool:
    return heartbeat is None or heartbeat < cutoff


def orphaned_queues(grace_seconds: float) -> list[int]:
    """Conversations with a queued reply and nothing running: the process that would have
    started it died between two steps. Only queues older than `grace_seconds`, so a queue whose
    own process is about to claim it is left to that process. A deactivated owner's queues wait
    for the account to be active again (turns/places.py), not asked about every heartbeat."""
    streaming = Message.objects.filter(
        conversation=OuterRef("conversation"), status=Message.Status.STREAMING
    )
    running = Compaction.objects.filter(
        conversation=OuterRef("conversation"), status=Compaction.Status.RUNNING
    )
    return list(
        Message.objects.filter(
            status=Message.Status.QUEUED,
            created_at__lt=timezone.now() - timedelta(seconds=grace_seconds),
            conversation__deleted_at__isnull=True,
            conversation__owner__is_active=True,
        )
        .exclude(Exists(streaming))
        .exclude(Exists(running))
        .order_by()  # not by seq, the model's ordering: DISTINCT would keep one per message
        .values_list("conversation_id", flat=True)
        .distinct()
    )
