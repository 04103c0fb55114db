"""What the chat page shows: a slice of the transcript with dividers where boundaries fall."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q

from compaction.models import Compaction

from .models import Conversation, Message, Pin

SHOWN_BOUNDARIES = [Compaction.Status.COMMITTED, Compaction.Status.UNDONE]
UNSTARTED = (Message.Status.QUEUED, Message.Status.CANCELLED)


@dataclass
class Item:
    kind: str  # "message" or "divider"
    message: Message | None = None
    compaction: Compaction | None = None
    pinned: bool = False
    outside_window: bool = False
    queued: bool = False  # a user message waiting for the reply in progress (cancellable)


@dataclass
class Page:
    items: list[Item]
    oldest_seq: int | None  # None: nothing older to load
    first_kept_seq: int


def first_kept_seq(conversation: Conversation) -> int:
    boundary = (
        Compaction.objects.filter(conversation=conversation, status=Compaction.Status.COMMITTED)
        .order_by("-id")
        .only("first_kept_seq")
        .first()
    )
    return boundary.first_kept_seq if boundary else 1


def page(
    conversation: Conversation, *, before: int | None, limit: int, reaching: int | None = None
) -> Page:
    """The newest `limit` messages before `before` (or the newest overall). Fixed query count.
    `reaching`: enough newer messages to include that seq too (a search hit to jump to), up to
    SEARCH_JUMP_MESSAGES."""
    rows = conversation.messages.all()
    if reaching is not None and before is None:
        newest = rows.order_by("-seq").values_list("seq", flat=True).first() or 0
        limit = max(limit, min(newest - reaching + 3, settings.SEARCH_JUMP_MESSAGES))
    if before is not None:
        rows = rows.filter(seq__lt=before)
    messages = list(reversed(rows.order_by("-seq")[: limit + 1]))
    has_older = len(messages) > limit
    messages = messages[-limit:] if has_older else messages
    if not messages:
        return Page(items=[], oldest_seq=None, first_kept_seq=first_kept_seq(conversation))
    low, high = messages[0].seq, messages[-1].seq
    pinned = set(
        Pin.objects.filter(message__in=[m.pk for m in messages]).values_list(
            "message_id", flat=True
        )
    )
    boundaries: dict[int, list[Compaction]] = {}
    kind = Compaction.Kind
    for row in Compaction.objects.filter(
        Q(kind=kind.SUMMARY, first_kept_seq__gte=low, first_kept_seq__lte=high)
        | Q(kind=kind.CLEAR, cleared_before_seq__gte=low, cleared_before_seq__lte=high),
        conversation=conversation,
        status__in=SHOWN_BOUNDARIES,
    ).order_by("id"):
        boundaries.setdefault(row.divider_seq, []).append(row)
    kept_from = first_kept_seq(conversation)
    # A reply that has not started (queued) or never will (cancelled) has nothing to show; the
    # message it answers says "queued" instead.
    waiting = {m.seq - 1 for m in messages if m.status == Message.Status.QUEUED}
    items: list[Item] = []
    for message in messages:
        for row in boundaries.get(message.seq, []):
            items.append(Item(kind="divider", compaction=row))
        if message.role == Message.Role.ASSISTANT and message.status in UNSTARTED:
            continue
        items.append(
            Item(
                kind="message",
                message=message,
                pinned=message.pk in pinned,
                outside_window=message.seq < kept_from,
                queued=message.seq in waiting,
            )
        )
    return Page(items=items, oldest_seq=low if has_older else None, first_kept_seq=kept_from)
