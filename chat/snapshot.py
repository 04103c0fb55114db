"""A conversation's state, read in one statement: its latest boundary, its queue (what streams,
what runs, what waits), and the rows its window carries. One value answers what every decision
about the conversation asks: where the window's verbatim part starts (`first_kept`), the branch
on screen (`branch`), whether anything runs (`busy`), whether a draft waits (`has_draft`).

This runs on every turn (under the conversation's lock, in the claim), so it is written for
speed:

- one hand-written statement: building the same through the ORM cost a hundred times more than
  running it;
- the rows a window carries are cached per conversation on the runtime. A transcript row that
  is final never changes (the transcript is append-only), so a later read fetches only the rows
  after the cached ones. A new boundary or a change of pins reads the window whole again, and
  rows that can still change (a reply streaming or queued, a message that can still be
  cancelled) are never cached. Other processes' writes are seen: they are rows after the cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import NamedTuple

from django.db import connection, transaction

from chat.branches import newest_end, on_branch, parent_of, versions
from chat.models import FINAL, UNSTARTED, Message
from compaction.entries import Entry
from compaction.models import Compaction
from compaction.window_state import first_kept
from core import runtime
from core.db import as_datetime


class Row(NamedTuple):
    """What the window needs of a transcript row, as a plain tuple, with its `Entry` (built
    once: a cached row serves many turns)."""

    seq: int
    parent: int  # the message it follows on its branch (chat.branches)
    role: str
    status: str
    window_tokens: int | None
    window_boundary_id: int | None
    window_head_tokens: int | None
    pin_id: int | None
    entry: Entry


@dataclass(eq=False)
class Snapshot:
    """What a claim decides on, and the window's candidate rows, oldest first: every row from
    the boundary on (every version) and the pinned ones before it."""

    rows: list[Row]
    last_seq: int = 0
    boundary: Compaction | None = None
    streaming_id: int | None = None
    streaming_heartbeat: datetime | None = None
    running_id: int | None = None
    running_heartbeat: datetime | None = None
    next_queued_id: int | None = None
    next_queued_seq: int | None = None
    has_draft: bool = False

    @property
    def busy(self) -> bool:
        """A reply streams or a compaction runs (in any process)."""
        return bool(self.streaming_id or self.running_id)

    @property
    def first_kept(self) -> int:
        """The first message the window carries verbatim."""
        return first_kept(self.boundary)

    @cached_property
    def parents(self) -> dict[int, int]:
        """seq -> the message it follows, for every row from the boundary on."""
        kept = self.first_kept
        return {r.seq: r.parent for r in self.rows if r.seq >= kept}

    def branch(self, leaf: int | None = None) -> list[int]:
        """The seqs of the branch ending at `leaf` (None: the newest row), oldest first, from
        the boundary on."""
        end = max(self.parents, default=0) if leaf is None else leaf
        return on_branch(self.parents, end, self.first_kept)

    def newest_end(self, start: int) -> int:
        """Where the branch through `start` ends, down its newest versions."""
        return newest_end(self.parents, start)

    def row(self, seq: int) -> Row | None:
        return next((r for r in self.rows if r.seq == seq), None)

    def version_rows(self) -> list[tuple[int, int, str]]:
        """(seq, parent, role) of the rows that count as versions, as the page counts them for
        its ‹ › switchers: after the boundary (before it they are compacted, out of reach), and
        neither a reply still queued nor a message taken back."""
        kept = self.first_kept
        return [
            (r.seq, r.parent, r.role)
            for r in self.rows
            if r.seq >= kept and r.status not in UNSTARTED
        ]

    def later_versions(self) -> set[int]:
        """Messages after the boundary with an older version there: a cut avoids starting the
        tail at one (compaction/cut.py)."""
        rows = self.version_rows()
        return {seq for seq, place in versions(rows, rows).items() if place.previous is not None}


# The CTE `s` is the conversation's state (one row of scalar subqueries, each on an index). The
# rows are the window's: a range scan from the boundary (and past what is cached), and the
# pinned ones before the boundary through the pin table. With `rows` false only the latest
# message comes back, carrying the state.
_SQL = """
WITH b AS (
    SELECT id, first_kept_seq, post_tokens, summary, cleared_before_seq FROM compaction_compaction
    WHERE conversation_id = %(c)s AND status = 'committed' ORDER BY id DESC LIMIT 1
), s AS (
    SELECT
        (SELECT seq FROM chat_message WHERE conversation_id = %(c)s
            ORDER BY seq DESC LIMIT 1) AS last_seq,
        (SELECT id FROM b) AS boundary_id,
        COALESCE((SELECT first_kept_seq FROM b), 1) AS first_kept,
        (SELECT post_tokens FROM b) AS post_tokens,
        (SELECT summary FROM b) AS summary,
        (SELECT cleared_before_seq FROM b) AS cleared_before,
        (SELECT id FROM chat_message WHERE conversation_id = %(c)s
            AND status = 'streaming') AS streaming_id,
        (SELECT heartbeat_at FROM chat_message WHERE conversation_id = %(c)s
            AND status = 'streaming') AS streaming_heartbeat,
        (SELECT id FROM compaction_compaction WHERE conversation_id = %(c)s
            AND status = 'running') AS running_id,
        (SELECT heartbeat_at FROM compaction_compaction WHERE conversation_id = %(c)s
            AND status = 'running') AS running_heartbeat,
        (SELECT id FROM chat_message WHERE conversation_id = %(c)s AND status = 'queued'
            ORDER BY seq LIMIT 1) AS queued_id,
        (SELECT seq FROM chat_message WHERE conversation_id = %(c)s AND status = 'queued'
            ORDER BY seq LIMIT 1) AS queued_seq,
        CASE WHEN EXISTS (SELECT 1 FROM compaction_compaction WHERE conversation_id = %(c)s
            AND status = 'draft') THEN 1 ELSE 0 END AS has_draft,
        (SELECT COUNT(*) FROM chat_pin WHERE conversation_id = %(c)s) AS pin_count,
        (SELECT MAX(id) FROM chat_pin WHERE conversation_id = %(c)s) AS pin_max
)
SELECT m.seq, m.parent_seq, m.role, m.status, m.content, m.tokens, m.window_tokens,
       m.window_boundary_id, m.window_head_tokens, p.id,
       s.last_seq, s.boundary_id, s.first_kept, s.post_tokens,
       CASE WHEN m.seq = s.last_seq THEN s.summary END, s.cleared_before,
       s.streaming_id, s.streaming_heartbeat, s.running_id, s.running_heartbeat,
       s.queued_id, s.queued_seq, s.has_draft, s.pin_count, s.pin_max
FROM s
JOIN chat_message m ON m.conversation_id = %(c)s
    AND (m.seq = s.last_seq OR (%(rows)s AND m.seq >= s.first_kept AND m.seq > %(after)s))
LEFT JOIN chat_pin p ON p.message_id = m.id
UNION ALL
SELECT m.seq, m.parent_seq, m.role, m.status, m.content, m.tokens, m.window_tokens,
       m.window_boundary_id, m.window_head_tokens, p.id,
       s.last_seq, s.boundary_id, s.first_kept, s.post_tokens, NULL, s.cleared_before,
       s.streaming_id, s.streaming_heartbeat, s.running_id, s.running_heartbeat,
       s.queued_id, s.queued_seq, s.has_draft, s.pin_count, s.pin_max
FROM s
JOIN chat_pin p ON p.conversation_id = %(c)s
JOIN chat_message m ON m.id = p.message_id AND m.seq < s.first_kept
    AND %(rows)s AND %(after)s = 0
ORDER BY 1
"""
_WIDTH = 10  # the message columns, before the state's


@dataclass(frozen=True)
class _Cached:
    shape: tuple  # (boundary id, pin count, newest pin id): any change reads the window whole
    upto: int  # every row up to this seq is in `rows`, and final
    rows: tuple[Row, ...]


def read_snapshot(conversation_id: int, *, with_rows: bool = True) -> Snapshot:
    """The conversation's state (`with_rows` false: without the window's rows, for a decision
    that needs only the queue). No row at all is an empty conversation: nothing can run in it
    and no boundary exists."""
    cache = runtime.current().windows
    cached = cache.get(conversation_id) if with_rows else None
    found = _read(conversation_id, with_rows, cached.upto if cached else 0)
    if not found:
        return Snapshot(rows=[])
    latest = next(r for r in found if r[0] == r[_WIDTH])  # the one carrying the summary
    (last_seq, boundary_id, first_kept, post_tokens, summary, cleared_before, *queue) = latest[
        _WIDTH:
    ]
    shape = (boundary_id, *latest[-2:])
    rows: list[Row] = []
    if with_rows:
        if cached is not None and cached.shape != shape:
            found, cached = _read(conversation_id, True, 0), None  # a new boundary or pins
        after = cached.upto if cached else 0
        # The latest message always comes back (it carries the state), cached or not.
        kept = list(cached.rows if cached else ())
        rows = kept + [_row(r) for r in found if r[0] > after]
        item = _Cached(shape, *_final_prefix(rows, len(kept)))
        # Kept once this transaction has committed: a row written in it (a reply just closed)
        # is not final until then, and a rollback must not leave it cached.
        transaction.on_commit(lambda: cache.put(conversation_id, item))
    boundary = None
    if boundary_id is not None:
        boundary = Compaction(
            pk=boundary_id,
            conversation_id=conversation_id,
            status=Compaction.Status.COMMITTED,
            first_kept_seq=first_kept,
            summary=summary or "",
            post_tokens=post_tokens,
            cleared_before_seq=cleared_before,
        )
    streaming_id, streaming_at, running_id, running_at, queued_id, queued_seq, draft = queue[:7]
    return Snapshot(
        rows=rows,
        last_seq=last_seq,
        boundary=boundary,
        streaming_id=streaming_id,
        streaming_heartbeat=as_datetime(streaming_at),
        running_id=running_id,
        running_heartbeat=as_datetime(running_at),
        next_queued_id=queued_id,
        next_queued_seq=queued_seq,
        has_draft=bool(draft),
    )


def _read(conversation_id: int, with_rows: bool, after: int) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(_SQL, {"c": conversation_id, "rows": with_rows, "after": after})
        return cursor.fetchall()


def _row(found: tuple) -> Row:
    seq, parent, role, status, content, tokens, window_tokens, boundary_id, head, pin = found[
        :_WIDTH
    ]
    entry = Entry(seq, role, _json(content), tokens, pinned=pin is not None)
    return Row(
        seq, parent_of(seq, parent), role, status, window_tokens, boundary_id, head, pin, entry
    )


def _final_prefix(rows: list[Row], known: int) -> tuple[int, tuple[Row, ...]]:
    """The rows that can be kept: the longest run, oldest first, of rows no write will change
    (the first `known` are, from the cache). A user's message is final only once its reply is
    (until then it can still be cancelled)."""
    upto = known
    for i, row in enumerate(rows[known:], start=known):
        if row.status not in FINAL:
            break
        if row.role == Message.Role.USER and row.status != Message.Status.CANCELLED:
            reply = rows[i + 1] if i + 1 < len(rows) else None
            if reply is None or reply.status not in FINAL:
                break
        upto = i + 1
    kept = tuple(rows[:upto])
    return (kept[-1].seq if kept else 0), kept


def _json(value):
    # JSON columns arrive as text on both backends (Django has psycopg leave jsonb as text).
    return json.loads(value) if isinstance(value, str) else value
