"""One search over transcripts, for people (the search boxes) and for the model (its recall tool).

The database does the matching and the ranking: FTS5 with the porter stemmer and bm25 on SQLite,
`to_tsvector('english', …)` over a GIN index on PostgreSQL. A query is natural language: each
word is a term of its own (a hit need not hold them all) and hits are ranked by how many of the
words they hold and how rare those words are. bm25 does exactly that; PostgreSQL's own ranking
knows nothing of rarity, so there each term's weight is its inverse document frequency over the
messages searched, counted from the same candidate rows.

Scope is always one user's conversations (one of them, or all): every query joins the owner.
Every version of a message is searched (people look for what they wrote in an earlier one too);
a hit off the branch on screen says where it leaves the branch. The model searches only its own
branch (`search_branch`): the other versions are not what happened in its history.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from django.db import connection

from chat.branches import Fork
from chat.models import UNSTARTED
from chat.search_index import MARK_CLOSE, MARK_OPEN
from chat.transcript import trees
from core.db import as_datetime
from search import semantic
from search.query import Query, parse

MAX_LIMIT = 50
# PostgreSQL: rows considered for ranking. Beyond this many messages holding some query word,
# the cheap ts_rank picks which are weighed.
CANDIDATES = 1000
# Never sent: not part of any conversation's history.
_HIDDEN = [status.value for status in UNSTARTED]


@dataclass(frozen=True)
class Hit:
    conversation_id: int
    conversation_title: str
    seq: int
    role: str
    created_at: datetime
    snippet: str  # matched words between MARK_OPEN and MARK_CLOSE
    score: float  # higher is better; comparable within one search only
    # Another version, off the branch on screen: where it leaves the branch (None: on it).
    fork: Fork | None = None

    @property
    def shown_seq(self) -> int:
        """The message on the page to go to for this hit."""
        return self.seq if self.fork is None else self.fork.shown


def search(
    user,
    text: str,
    *,
    conversation_id: int | None = None,
    limit: int = 10,
) -> list[Hit]:
    """People's search: the best `limit` messages of `user`'s conversations (or one of them)
    for `text`, every version included, those off the branch on screen marked."""
    hits = _search(user, parse(text), conversation_id, limit=limit)
    forked = trees({hit.conversation_id for hit in hits}) if hits else {}
    return [
        replace(hit, fork=tree.fork_of(hit.seq))
        if (tree := forked.get(hit.conversation_id))
        else hit
        for hit in hits
    ]


def search_branch(
    user, text: str, conversation_id: int, end: int | None, *, limit: int
) -> list[Hit]:
    """The model's search: one conversation's messages before `end` on the branch ending there
    (None: the whole branch on screen)."""
    query = parse(text)
    if query.empty:
        return []
    tree = trees([conversation_id]).get(conversation_id)
    high = None if end is None else end - 1
    off = tree.off_branch(end, high=high) if tree else []
    return _search(user, query, conversation_id, before_seq=end, excluded=off, limit=limit)


def _search(
    user,
    query: Query,
    conversation_id: int | None,
    *,
    before_seq: int | None = None,
    excluded: Sequence[int] = (),
    limit: int,
) -> list[Hit]:
    if query.empty or not user.is_authenticated:
        return []
    limit = max(1, min(int(limit), MAX_LIMIT))
    scope, params = _scope(user, conversation_id, before_seq)
    if excluded:
        scope += f" AND m.seq NOT IN ({', '.join(['%s'] * len(excluded))})"
        params += excluded
    lexical = _postgres if connection.vendor == "postgresql" else _sqlite
    hits = lexical(query, scope, params, semantic.lexical_limit(limit))
    return semantic.hybrid(
        user,
        query,
        hits,
        conversation_id=conversation_id,
        before_seq=before_seq,
        excluded=excluded,
        limit=limit,
    )


def _scope(user, conversation_id: int | None, before_seq: int | None) -> tuple[str, list]:
    hidden = ", ".join(["%s"] * len(_HIDDEN))
    where = f"c.owner_id = %s AND c.deleted_at IS NULL AND m.status NOT IN ({hidden})"
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
