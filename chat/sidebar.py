"""The conversation sidebar: which of a user's conversations it lists, in what order, under which
headings, a page at a time.

Order: pinned conversations first, then everything by last activity (`updated_at`, newest
first), the id breaking ties. Pages are keyset pages: the next one starts after the last row
shown (its cursor), never at an offset, so a page costs the same whatever the number of
conversations and nothing doubles or goes missing when a conversation is added meanwhile.

The headings ("Today", "Yesterday", ...) are a plain function over plain values (`group`): it
knows nothing of the database, so its boundaries are tested with bare datetimes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from django.db.models import Q, QuerySet
from django.utils import timezone

from chat.models import Conversation

# Rows per page; what a click on "Load more" (or scrolling to it) adds.
PAGE_SIZE = 50
# After an action, the list is drawn again with as many rows as the page showed (so the rows
# the user scrolled to stay), up to this many.
MAX_SHOWN = 500

MAIN = "main"
ARCHIVED = "archived"
VIEWS = (MAIN, ARCHIVED)

PINNED = "Pinned"
TODAY = "Today"
YESTERDAY = "Yesterday"
WEEK = "Previous 7 days"
MONTH = "Previous 30 days"
OLDER = "Older"
ARCHIVE = "Archived"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class Cursor:
    """Where a page ends: the last row's place in the order. Written into the "Load more" URL
    as `p.<microseconds>.<id>` (pinned) or `u.<microseconds>.<id>`: exact integers, so the next
    page compares against the very timestamp stored, with nothing lost to rounding."""

    pinned: bool
    updated_at: datetime
    pk: int

    def encode(self) -> str:
        micros = (self.updated_at - _EPOCH) // _MICROSECOND
        return f"{'p' if self.pinned else 'u'}.{micros}.{self.pk}"

    @classmethod
    def decode(cls, value: str) -> Cursor:
        """Raises ValueError for anything `encode` did not write."""
        kind, micros, pk = value.split(".")
        if kind not in ("p", "u"):
            raise ValueError(f"not a sidebar cursor: {value!r}")
        try:
            return cls(kind == "p", _EPOCH + int(micros) * _MICROSECOND, int(pk))
        except OverflowError:
            raise ValueError(f"not a sidebar cursor: {value!r}") from None


@dataclass(frozen=True)
class Entry:
    """One row of the list, as plain values."""

    pk: int
    title: str
    updated_at: datetime
    pinned: bool = False

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.pinned, self.updated_at, self.pk)


@dataclass(frozen=True)
class Group:
    label: str
    entries: tuple[Entry, ...]
    # The previous page ended inside this group: its heading is already on screen.
    continued: bool = False


@dataclass(frozen=True)
class Page:
    view: str
    groups: tuple[Group, ...]
    next: str | None  # the cursor of the page after this one; None: this is the last page
    first: bool  # the list's first page (an empty first page says "no conversations")

    @property
    def empty(self) -> bool:
        return not self.groups


@dataclass(frozen=True)
class Notice:
    """What the sidebar says after an action, and how to take it back."""

    text: str
    pk: int | None = None  # the conversation it is about (the focus returns to its row)
    undo_url: str = ""  # POST here to undo it; "" offers no undo
    undo_fields: tuple[tuple[str, str], ...] = ()
    undo_label: str = ""  # the Undo button's name for screen readers ("Undo deleting “X”")
    # The undo is a plain form that opens the conversation again (it was the one open when it
    # was deleted); otherwise it only redraws the list.
    reopen: bool = False
    error: bool = False


def label(updated_at: datetime, today: date, tz: tzinfo, *, pinned: bool = False) -> str:
    """The heading a conversation last active at `updated_at` goes under, seen on `today` (a
    date in `tz`). Days are calendar days in `tz`, not 24-hour spans: something from 23:50
    yesterday is "Yesterday" at 00:10. A time in the future (another server's clock) is today."""
    if pinned:
        return PINNED
    age = (today - updated_at.astimezone(tz).date()).days
    if age <= 0:
        return TODAY
    if age == 1:
        return YESTERDAY
    if age <= 7:
        return WEEK
    if age <= 30:
        return MONTH
    return OLDER


def group(
    entries: Iterable[Entry],
    now: datetime,
    tz: tzinfo,
    *,
    after: Cursor | None = None,
    archived: bool = False,
) -> tuple[Group, ...]:
    """Consecutive entries under their headings, in the order given (the caller's order puts
    pinned ones first and each heading's rows together). `after` is where the previous page
    ended: a first group under the same heading continues it. Archived conversations are one
    list with one heading."""
    today = now.astimezone(tz).date()

    def label_of(pinned: bool, updated_at: datetime) -> str:
        return ARCHIVE if archived else label(updated_at, today, tz, pinned=pinned)

    previous = label_of(after.pinned, after.updated_at) if after else None
    groups: list[tuple[str, list[Entry]]] = []
    for entry in entries:
        heading = label_of(entry.pinned, entry.updated_at)
        if not groups or groups[-1][0] != heading:
            groups.append((heading, []))
        groups[-1][1].append(entry)
    return tuple(
        Group(heading, tuple(rows), continued=(i == 0 and heading == previous))
        for i, (heading, rows) in enumerate(groups)
    )


# --- the queries ---------------------------------------------------------------------------------


def page(
    user,
    *,
    view: str = MAIN,
    after: Cursor | None = None,
    size: int = PAGE_SIZE,
    now: datetime | None = None,
) -> Page:
    """One page of the user's list: at most two queries (pinned rows, then the others when the
    pinned ones do not fill it), whatever the number of conversations."""
    owned = Conversation.objects.owned_by(user)
    if view == ARCHIVED:
        rows, more = _after(owned.filter(archived_at__isnull=False), after, size)
        entries = [Entry(pk, title, updated) for pk, title, updated, _ in rows]
    else:
        entries, more = _main(owned.filter(archived_at__isnull=True), after, size)
    now = now or timezone.now()
    return Page(
        view=view,
        groups=group(
            entries,
            now,
            timezone.get_current_timezone(),
            after=after,
            archived=view == ARCHIVED,
        ),
        next=entries[-1].cursor.encode() if more and entries else None,
        first=after is None,
    )


def _main(listed: QuerySet, after: Cursor | None, size: int) -> tuple[list[Entry], bool]:
    # Two keyset walks one after the other: the pinned rows, then the rest. Each is an ordered
    # range scan of its list's partial index (chat/models.py) rather than a sort of everything
    # the user has by an expression ("pinned first") no index holds.
    entries: list[Entry] = []
    if after is None or after.pinned:
        rows, more = _after(listed.filter(pinned_at__isnull=False), after, size)
        entries = [Entry(pk, title, updated, pinned=True) for pk, title, updated, _ in rows]
        if more:
            return entries, True
        after = None  # the unpinned rows, from their first
    rows, more = _after(listed.filter(pinned_at__isnull=True), after, size - len(entries))
    entries += [Entry(pk, title, updated) for pk, title, updated, _ in rows]
    return entries, more


def _after(rows: QuerySet, after: Cursor | None, size: int) -> tuple[Sequence[tuple], bool]:
    """Up to `size` rows after the cursor, and whether there are more (one row more is asked
    for, so the last page knows it is the last without another query)."""
    if after is not None:
        # The `<=` alone is what lets the database seek to the cursor in the index; the OR
        # then drops the rows of the same instant already shown.
        rows = rows.filter(
            Q(updated_at__lt=after.updated_at) | Q(pk__lt=after.pk),
            updated_at__lte=after.updated_at,
        )
    found = list(
        rows.order_by("-updated_at", "-pk").values_list("pk", "title", "updated_at", "pinned_at")[
            : size + 1
        ]
    )
    return found[:size], len(found) > size


def shown(value: str | None) -> int:
    """How many rows to draw the list again with: as many as the page had (a figure the page
    sends), at least a page and at most MAX_SHOWN; anything unreadable is one page."""
    try:
        count = int(value or 0)
    except ValueError:
        return PAGE_SIZE
    return max(PAGE_SIZE, min(count, MAX_SHOWN))


def cursor(value: str | None) -> Cursor | None:
    """The `after` of a "Load more" request; raises ValueError for one the page did not write."""
    return Cursor.decode(value) if value else None


def view_of(value: str | None) -> str:
    return value if value in VIEWS else MAIN
