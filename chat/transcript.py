"""What the chat page shows: a slice of the transcript with dividers where boundaries fall."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Max, Min, Q

from chat.branches import Tree, Versions, parent_of, versions
from chat.models import FORKS, UNSTARTED, Conversation, Message, Pin
from compaction import boundaries
from compaction.models import Compaction
from compaction.window_state import first_kept

# The boundaries the chat page shows as dividers: in force, or in force once and undone.
SHOWN_BOUNDARIES = [Compaction.Status.COMMITTED, Compaction.Status.UNDONE]


@dataclass
class Item:
    kind: str  # "message" or "divider"
    message: Message | None = None
    compaction: Compaction | None = None
    pinned: bool = False
    outside_window: bool = False
    queued: bool = False  # a user message waiting for the reply in progress (cancellable)
    versions: Versions | None = None  # "‹ 2 / 3 ›", when it has more than one


@dataclass
class Page:
    items: list[Item]
    oldest_seq: int | None  # None: nothing older to load
    first_kept_seq: int


def first_kept_seq(conversation: Conversation) -> int:
    return first_kept(boundaries.latest(conversation.pk, "first_kept_seq"))


def current_branch(conversation: Conversation) -> set[int]:
    """Every seq on the branch on screen, from the first message (one query over the whole
    conversation: for exports, the admin and pinning a message from before the boundary, never
    for a turn)."""
    pairs = conversation.messages.values_list("seq", "parent_seq")
    return set(Tree.of(pairs, conversation.leaf_seq).branch())


def trees(conversation_ids: Iterable[int]) -> dict[int, Tree]:
    """Of these conversations (the caller's own: nothing here checks the owner), those with
    versions, as `Tree`s: one query over a small index when none has any, two more when some
    do, reading only their messages after the first fork."""
    forked = dict(
        Message.objects.filter(FORKS, conversation_id__in=list(conversation_ids))
        .order_by()
        .values("conversation_id")
        .annotate(base=Min("parent_seq"))
        .values_list("conversation_id", "base")
    )
    if not forked:
        return {}
    after_base = Q()
    for conversation_id, base in forked.items():
        after_base |= Q(conversation_id=conversation_id, seq__gt=base)
    rows = Message.objects.filter(after_base).values_list(
        "conversation_id", "seq", "parent_seq", "conversation__leaf_seq"
    )
    pairs: dict[int, list[tuple[int, int | None]]] = {c: [] for c in forked}
    leaves: dict[int, int | None] = {}
    for conversation_id, seq, parent, leaf in rows:
        pairs[conversation_id].append((seq, parent))
        leaves[conversation_id] = leaf
    # Boundaries only move forward: the latest committed one keeps from the highest seq.
    first_kept = dict(
        Compaction.objects.filter(conversation_id__in=forked, status=Compaction.Status.COMMITTED)
        .order_by()
        .values("conversation_id")
        .annotate(first=Max("first_kept_seq"))
        .values_list("conversation_id", "first")
    )
    return {
        c: Tree.of(pairs[c], leaves.get(c), base=forked[c], first_kept=first_kept.get(c, 1))
        for c in forked
    }


def page(
    conversation: Conversation,
    *,
    before: int | None,
    limit: int,
    reaching: int | None = None,
    leaf: int | None = None,
    first_kept: int | None = None,
) -> Page:
    """The newest `limit` messages of the branch on screen (or the one ending at `leaf`), before
    message `before` (or the newest overall), with the dividers among them. Fixed query count,
    plus one per fork crossed. `reaching`: enough newer messages to include that seq too (a
    search hit to jump to), up to SEARCH_JUMP_MESSAGES. `first_kept`: where the window starts,
    when the caller has read it."""
    if reaching is not None and before is None:
        limit = _reaching(conversation, reaching, limit)
    end = conversation.leaf_seq if leaf is None else leaf
    messages, has_older = _branch_slice(conversation.messages.all(), before, end, limit)
    kept_from = first_kept_seq(conversation) if first_kept is None else first_kept
    if not messages:
        return Page(items=[], oldest_seq=None, first_kept_seq=kept_from)
    dividers = _dividers(conversation, messages, newest=before is None)
    return Page(
        items=_items(conversation, messages, dividers, kept_from),
        oldest_seq=messages[0].seq if has_older else None,
        first_kept_seq=kept_from,
    )


def _reaching(conversation: Conversation, seq: int, limit: int) -> int:
    """How many of the newest messages to show so that message `seq` is among them: at least
    `limit`, at most SEARCH_JUMP_MESSAGES."""
    newest = conversation.messages.order_by("-seq").values_list("seq", flat=True).first() or 0
    return max(limit, min(newest - seq + 3, settings.SEARCH_JUMP_MESSAGES))


def _dividers(
    conversation: Conversation, messages: list[Message], *, newest: bool
) -> dict[int | None, list[Compaction]]:
    """The boundaries shown among a slice of a branch, by the seq of the message each divider
    sits above (None: after them all), in the order they were made.

    A boundary is a point in the transcript, not a message: its divider sits before the first
    message of the branch at or after the seq it names, whichever version of it is on screen.
    This slice holds the points after the message before its first one; the `newest` slice
    also those after its last message (a version that ends before an undone boundary)."""
    floor, high = messages[0].parent, messages[-1].seq
    kind = Compaction.Kind
    summary = Q(kind=kind.SUMMARY, first_kept_seq__gt=floor)
    clear = Q(kind=kind.CLEAR, cleared_before_seq__gt=floor)
    if not newest:
        summary &= Q(first_kept_seq__lte=high)
        clear &= Q(cleared_before_seq__lte=high)
    rows = Compaction.objects.filter(
        summary | clear, conversation=conversation, status__in=SHOWN_BOUNDARIES
    )
    placed: dict[int | None, list[Compaction]] = {}
    seqs = [m.seq for m in messages]
    for row in sorted(rows, key=lambda r: (r.divider_seq, r.pk)):
        placed.setdefault(divider_place(seqs, row.divider_seq), []).append(row)
    return placed


def _items(
    conversation: Conversation,
    messages: list[Message],
    dividers: dict[int | None, list[Compaction]],
    kept_from: int,
) -> list[Item]:
    """The slice as the page shows it: each message with its pin, its versions and whether it
    waits, and the dividers in their places."""
    pinned = set(
        Pin.objects.filter(message__in=[m.pk for m in messages]).values_list(
            "message_id", flat=True
        )
    )
    found = _versions(conversation, [m for m in messages if m.seq >= kept_from], kept_from)
    # A reply that has not started (queued) or never will (cancelled) has nothing to show; the
    # message it answers says "queued" instead.
    waiting = {m.parent for m in messages if m.status == Message.Status.QUEUED}
    items: list[Item] = []
    for message in messages:
        for row in dividers.get(message.seq, []):
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
                versions=found.get(message.seq),
            )
        )
    items += [Item(kind="divider", compaction=row) for row in dividers.get(None, [])]
    return items


def divider_place(seqs: list[int], divider_seq: int) -> int | None:
    """The message a boundary's divider sits above, of a branch's `seqs` (ascending, as a
    branch always is): the first at or after the boundary's point; None: after them all."""
    i = bisect_left(seqs, divider_seq)
    return seqs[i] if i < len(seqs) else None


def item_of(message: Message, pinned: bool) -> Item:
    """One message as the transcript shows it, on its own (its bubble after a pin changed):
    with its versions, and "queued" while the reply it waits for has not started."""
    conversation = message.conversation
    kept_from = first_kept_seq(conversation)
    shown = [message] if message.seq >= kept_from else []
    waiting = (
        message.role == Message.Role.USER
        and conversation.messages.filter(
            Q(parent_seq=message.seq) | Q(parent_seq__isnull=True, seq=message.seq + 1),
            status=Message.Status.QUEUED,
        ).exists()
    )
    return Item(
        kind="message",
        message=message,
        pinned=pinned,
        outside_window=message.seq < kept_from,
        queued=waiting,
        versions=_versions(conversation, shown, kept_from).get(message.seq),
    )


def _branch_slice(rows, before: int | None, leaf: int | None, limit: int):
    """The last `limit` messages of the branch ending at `leaf` (None: the newest message)
    that come before message `before` (walked from its parent), oldest first; and whether
    older ones exist. Other versions between them are skipped, and after a fork the next read
    starts at the parent wanted, so an abandoned branch costs a query, not a scan."""
    picked: list[Message] = []
    wanted = before if before is not None else leaf  # None: whatever is newest
    skip = before is not None  # `before` is read for its parent, not shown again
    while len(picked) <= limit and (wanted is None or wanted >= 1):
        need = limit + 1 - len(picked) + skip
        query = rows if wanted is None else rows.filter(seq__lte=wanted)
        chunk = list(query.order_by("-seq")[:need])
        for message in chunk:
            if wanted is not None and message.seq > wanted:
                continue  # another version, off this branch
            if wanted is not None and message.seq < wanted:
                return picked[:limit][::-1], False  # what it follows is missing: it ends here
            if skip:
                skip = False
            else:
                picked.append(message)
            wanted = message.parent
            if len(picked) > limit or wanted < 1:
                break
        if len(chunk) < need:
            break  # nothing older was left to read
    return picked[:limit][::-1], len(picked) > limit


def _versions(
    conversation: Conversation, shown: list[Message], kept_from: int
) -> dict[int, Versions]:
    """The versions of the messages shown after the boundary (one query, bounded by them);
    versions before it are compacted, out of reach."""
    if not shown:
        return {}
    parents = {m.parent for m in shown}
    rows = (
        conversation.messages.filter(seq__gte=max(kept_from, min(parents) + 1))
        .filter(
            Q(parent_seq__in=parents) | Q(parent_seq__isnull=True, seq__in=[p + 1 for p in parents])
        )
        .exclude(status__in=UNSTARTED)
        .values_list("seq", "parent_seq", "role")
    )
    return versions(
        ((seq, parent_of(seq, parent), role) for seq, parent, role in rows),
        ((m.seq, m.parent, m.role) for m in shown),
    )
