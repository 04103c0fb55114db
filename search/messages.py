"""One search over transcripts, for people (the search boxes) and for the model (its recall tool).

The database does the matching and the ranking: FTS5 with the porter stemmer and bm25 on SQLite,
`to_tsvector('english', …)` over a GIN index on PostgreSQL. A query is natural language: each
word is a term of its own (a hit need not hold them all) and hits are ranked by how many of the
words they hold and how rare those words are. bm25 does exactly that; PostgreSQL's own ranking
knows nothing of rarity, so there each term's weight is its inverse document frequency over the
messages searched, counted from the same candidate rows.

Scope is always one user's conversations (one of them, or all): every query joins the owner.
Every version of a message is searched (people look for what they wrote in an earlier one too);
a hit off the branch on screen says so, and where the branch leads to it. The model searches
only its own branch (`branch_end`): the other versions are not what happened in its history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime

from django.db import connection

from chat.transcript import trees
from compaction.snapshot import as_datetime

from .text import MARK_CLOSE, MARK_OPEN, Query, parse

MAX_LIMIT = 50
# PostgreSQL: rows considered for ranking. Beyond this many messages holding some query word,
# the cheap ts_rank picks which are weighed.
CANDIDATES = 1000
_HIDDEN = ("queued", "cancelled")  # never sent: not part of any conversation's history


@dataclass(frozen=True)
class Hit:
    conversation_id: int
    conversation_title: str
    seq: int
    role: str
    created_at: datetime
    snippet: str  # matched words between MARK_OPEN and MARK_CLOSE
    score: float  # higher is better; comparable within one search only
    # Another version, off the branch on screen: the branch's message whose ‹ › switcher
    # leads to it (None: the hit is on the branch).
    switch_at: int | None = None

    @property
    def shown_seq(self) -> int:
        """The message on the page to go to for this hit."""
        return self.seq if self.switch_at is None else self.switch_at


def search(
    user,
    text: str,
    *,
    conversation_id: int | None = None,
    before_seq: int | None = None,
    branch_end: int | None = None,
    limit: int = 10,
) -> list[Hit]:
    """The best `limit` messages of `user`'s conversations (or one of them, before `before_seq`,
    and only on the branch ending at `branch_end` when given) for `text`."""
    query = parse(text)
    if query.empty or not user.is_authenticated:
        return []
    limit = max(1, min(int(limit), MAX_LIMIT))
    scope, params = _scope(user, conversation_id, before_seq)
    only_branch = conversation_id is not None and branch_end is not None
    if only_branch and (tree := trees([int(conversation_id)]).get(int(conversation_id))):
        off = tree.off_branch(int(branch_end))
        if off:
            scope += f" AND m.seq NOT IN ({', '.join(['%s'] * len(off))})"
            params += off
    if connection.vendor == "postgresql":
        hits = _postgres(query, scope, params, limit)
    else:
        hits = _sqlite(query, scope, params, limit)
    return hits if only_branch else _placed(hits)


def _placed(hits: list[Hit]) -> list[Hit]:
    """Hits on other versions marked with where the branch on screen leads to them."""
    forked = trees({hit.conversation_id for hit in hits}) if hits else {}
    placed = []
    for hit in hits:
        tree = forked.get(hit.conversation_id)
        at = tree.reached_from(hit.seq) if tree else hit.seq
        placed.append(hit if at == hit.seq else replace(hit, switch_at=at))
    return placed


def _scope(user, conversation_id: int | None, before_seq: int | None) -> tuple[str, list]:
    where = "c.owner_id = %s AND c.deleted_at IS NULL AND m.status NOT IN (%s, %s)"
    params = [user.pk, *_HIDDEN]
    if conversation_id is not None:
        where += " AND m.conversation_id = %s"
        params.append(int(conversation_id))
        if before_seq is not None:
            where += " AND m.seq < %s"
            params.append(int(before_seq))
    return where, params


# --- SQLite: FTS5 -------------------------------------------------------------------------------


def _fts5_match(query: Query) -> str:
    # Every term quoted: FTS5 syntax in what the user typed (AND, NEAR, *, ^) stays plain words.
    quoted = [_quote(t) for t in query.terms] + [_quote(" ".join(p)) for p in query.phrases]
    return " OR ".join(quoted)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _sqlite(query: Query, scope: str, params: list, limit: int) -> list[Hit]:
    sql = (
        "SELECT m.conversation_id, c.title, m.seq, m.role, m.created_at, "  # noqa: S608
        "snippet(chat_message_fts, 0, %s, %s, '…', 24), bm25(chat_message_fts) AS rank "
        "FROM chat_message_fts "
        "JOIN chat_message m ON m.id = chat_message_fts.rowid "
        "JOIN chat_conversation c ON c.id = m.conversation_id "
        f"WHERE chat_message_fts MATCH %s AND {scope} "  # the scope's SQL is ours
        "ORDER BY rank, m.id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [MARK_OPEN, MARK_CLOSE, _fts5_match(query), *params, limit])
        rows = cursor.fetchall()
    # bm25 is negative, lower is better: flipped so every score reads "higher is better".
    return [
        Hit(cid, title, seq, role, as_datetime(at), snippet, round(-rank, 4))
        for cid, title, seq, role, at, snippet, rank in rows
    ]


# --- PostgreSQL: tsvector over a GIN index ------------------------------------------------------

_VECTOR = "to_tsvector('english', m.search_text)"  # the indexed expression, exactly


def _postgres(query: Query, scope: str, params: list, limit: int) -> list[Hit]:
    parts = [("plainto_tsquery('english', %s)", t) for t in query.terms]
    parts += [("phraseto_tsquery('english', %s)", " ".join(p)) for p in query.phrases]
    any_part = "(" + " || ".join(sql for sql, _ in parts) + ")"
    any_params = [value for _, value in parts]
    flags = ", ".join(f"{_VECTOR} @@ {sql}" for sql, _ in parts)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM chat_message m "  # noqa: S608 - scope is ours
            f"JOIN chat_conversation c ON c.id = m.conversation_id WHERE {scope}",
            params,
        )
        (total,) = cursor.fetchone()
        cursor.execute(
            f"SELECT m.id, ts_rank({_VECTOR}, {any_part}), {flags} "  # noqa: S608
            "FROM chat_message m JOIN chat_conversation c ON c.id = m.conversation_id "
            f"WHERE {_VECTOR} @@ {any_part} AND {scope} "
            "ORDER BY 2 DESC, m.id DESC LIMIT %s",
            [*any_params, *any_params, *any_params, *params, CANDIDATES],
        )
        candidates = cursor.fetchall()
        if not candidates:
            return []
        weights = _idf(total, [row[2:] for row in candidates])
        scored = sorted(
            (
                (
                    sum(w for w, hit in zip(weights, row[2:], strict=True) if hit) + 0.1 * row[1],
                    row[0],
                )
                for row in candidates
            ),
            key=lambda pair: (-pair[0], -pair[1]),
        )[:limit]
        cursor.execute(
            "SELECT m.id, m.conversation_id, c.title, m.seq, m.role, m.created_at, "  # noqa: S608
            f"ts_headline('english', m.search_text, {any_part}, %s) "
            "FROM chat_message m JOIN chat_conversation c ON c.id = m.conversation_id "
            "WHERE m.id = ANY(%s)",
            [*any_params, _HEADLINE, [pk for _, pk in scored]],
        )
        found = {row[0]: row[1:] for row in cursor.fetchall()}
    return [
        Hit(*found[pk][:4], as_datetime(found[pk][4]), found[pk][5], round(score, 4))
        for score, pk in scored
    ]


# Whole-sentence headlines (not fragments, which keep only the matched words of a short text).
# PostgreSQL's parser drops what looks like an HTML tag from a headline; the text is escaped
# when it becomes HTML either way.
_HEADLINE = f"StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, MaxWords=35, MinWords=15"


def _idf(total: int, flags: list[tuple[bool, ...]]) -> list[float]:
    """bm25's inverse document frequency per term: a word few messages hold weighs more."""
    weights = []
    for i in range(len(flags[0])):
        holding = sum(1 for row in flags if row[i])
        weights.append(math.log(1 + (total - holding + 0.5) / (holding + 0.5)))
    return weights
