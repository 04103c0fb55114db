"""One search over transcripts, for people (the search boxes) and for the model (its recall tool).

The database does the matching and the ranking: FTS5 with the porter stemmer and bm25 on SQLite,
`to_tsvector('english', …)` over a GIN index on PostgreSQL. A query is natural language: each
word is a term of its own (a hit need not hold them all) and hits are ranked by how many of the
words they hold and how rare those words are. bm25 does exactly that; PostgreSQL's own ranking
knows nothing of rarity, so there each term's weight is its inverse document frequency over the
messages searched, counted from the same candidate rows.

Each message is found with its neighbours as context (search/context.py): words of the message
before or after it count too, lower than its own, and the hit still names the one message.

Scope is always one user's conversations (one of them, or all): every query joins the owner.
Every version of a message is searched (people look for what they wrote in an earlier one too);
a hit off the branch on screen says where it leaves the branch. The model searches only its own
branch (`search_branch`): the other versions are not what happened in its history.
"""

from __future__ import annotations

import math
from dataclasses import replace

from django.db import connection

from chat.branches import parent_of
from chat.models import UNSTARTED
from chat.search_index import MARK_CLOSE, MARK_OPEN
from chat.transcript import trees
from core.db import as_datetime
from search import files, semantic
from search.context import CONTEXT_WEIGHT, Key, Match, givers, in_context, pool
from search.query import Query, parse
from search.values import Hit, Scope

MAX_LIMIT = 50
# PostgreSQL: rows considered for ranking. Beyond this many messages holding some query word,
# the cheap ts_rank picks which are weighed.
CANDIDATES = 1000
# Messages read to rank with their context: this many per hit asked for (a message that may
# gain from a neighbour is read to check that it is that neighbour's, and in scope).
POOL_FACTOR = 3
# A message found through its neighbours only shows its first words.
HEAD_WORDS, HEAD_CHARS = 30, 400
# Never sent: not part of any conversation's history.
_HIDDEN = [status.value for status in UNSTARTED]


def search(
    user,
    text: str,
    *,
    conversation_id: int | None = None,
    limit: int = 10,
) -> list[Hit]:
    """People's search: the best `limit` messages of `user`'s conversations (or one of them)
    for `text`, every version included, those off the branch on screen marked."""
    hits = ranked(user, parse(text), Scope(conversation_id), limit=limit)
    forked = trees({hit.conversation_id for hit in hits}) if hits else {}
    return [
        replace(hit, fork=tree.fork_of(hit.seq))
        if (tree := forked.get(hit.conversation_id))
        else hit
        for hit in hits
    ]


def search_branch(
    user,
    text: str,
    conversation_id: int,
    end: int | None,
    *,
    limit: int,
    everywhere: bool = False,
) -> list[Hit]:
    """The model's search: one conversation's messages before `end` on the branch ending there
    (None: the whole branch on screen); `everywhere`: the user's other conversations too, each
    on the branch on screen."""
    query = parse(text)
    if query.empty:
        return []
    tree = trees([conversation_id]).get(conversation_id)
    high = None if end is None else end - 1
    off = tuple(tree.off_branch(end, high=high)) if tree else ()
    scope = Scope(conversation_id, end, off, others=everywhere)
    hits = ranked(user, query, scope, limit=limit)
    if not everywhere:
        return hits
    # Other versions in the other conversations are not what happened there either.
    elsewhere = {h.conversation_id for h in hits} - {conversation_id}
    forked = trees(elsewhere) if elsewhere else {}
    return [
        hit
        for hit in hits
        if (tree := forked.get(hit.conversation_id)) is None or tree.fork_of(hit.seq) is None
    ]


def ranked(user, query: Query, scope: Scope, *, limit: int) -> list[Hit]:
    """The one ranking people and the model search with: the lexical hits fused with the
    messages nearest in meaning (search/semantic.py; with EMBEDDINGS=none, the lexical hits)."""
    found = lexical(user, query, scope, limit=semantic.lexical_limit(limit))
    return files.named(user, semantic.hybrid(user, query, found, scope, limit=limit))


def lexical(
    user, query: Query, scope: Scope, *, limit: int, context_weight: float = CONTEXT_WEIGHT
) -> list[Hit]:
    """The full-text search: the best `limit` messages in `scope` for `query`, each scored by
    its own words and, `context_weight` of theirs, its neighbours' (search/context.py; 0: each
    message alone), best first. The function other rankings (embeddings) fuse with: a hit names
    its message by conversation and seq."""
    if query.empty or not user.is_authenticated:
        return []
    limit = max(1, min(int(limit), MAX_LIMIT))
    where, params = _where(user, scope)
    postgres = connection.vendor == "postgresql"
    matches = (_postgres_matches if postgres else _sqlite_matches)(query, where, params)
    if not matches:
        return []
    given = givers(matches)
    keys = pool(matches, given, limit * POOL_FACTOR, context_weight)
    rows = (_postgres_rows if postgres else _sqlite_rows)(query, where, params, keys, matches)
    own = {m.key: m.score for m in matches}
    scored = []
    for cid, title, seq, parent_seq, role, at, head, snippet in rows:
        key = (cid, seq)
        parent = parent_of(seq, parent_seq)
        score = in_context(key, parent, own.get(key, 0.0), given, context_weight)
        if score > 0:
            text = snippet if key in own and snippet else _head(head)
            scored.append((score, Hit(cid, title, seq, role, as_datetime(at), text, 0.0)))
    scored.sort(key=lambda pair: (-pair[0], -pair[1].conversation_id, -pair[1].seq))
    return [replace(hit, score=round(score, 4)) for score, hit in scored[:limit]]


def _where(user, scope: Scope) -> tuple[str, list]:
    hidden = ", ".join(["%s"] * len(_HIDDEN))
    where = f"c.owner_id = %s AND c.deleted_at IS NULL AND m.status NOT IN ({hidden})"
    params = [user.pk, *_HIDDEN]
    if scope.conversation_id is None:
        return where, params
    own, own_params = "m.conversation_id = %s", [int(scope.conversation_id)]
    if scope.before_seq is not None:
        own += " AND m.seq < %s"
        own_params.append(int(scope.before_seq))
    if scope.excluded:
        own += f" AND m.seq NOT IN ({', '.join(['%s'] * len(scope.excluded))})"
        own_params += [int(seq) for seq in scope.excluded]
    if scope.others:
        return f"{where} AND (m.conversation_id <> %s OR ({own}))", [
            *params,
            int(scope.conversation_id),
            *own_params,
        ]
    return f"{where} AND {own}", params + own_params


def _in_keys(keys: list[Key]) -> tuple[str, list]:
    """`(conversation, seq) IN (…)`, as both databases read it."""
    values = ", ".join(["(%s, %s)"] * len(keys))
    return f"(m.conversation_id, m.seq) IN (VALUES {values})", [v for key in keys for v in key]


def _head(text: str) -> str:
    """A message found through its neighbours only: its first words, nothing marked."""
    words = (text or "").split()
    return " ".join(words[:HEAD_WORDS]) + (" …" if len(words) > HEAD_WORDS else "")


_ROW = "m.conversation_id, c.title, m.seq, m.parent_seq, m.role, m.created_at"
_FROM = "FROM chat_message m JOIN chat_conversation c ON c.id = m.conversation_id"


# --- SQLite: FTS5 -------------------------------------------------------------------------------


def _fts5_match(query: Query) -> str:
    # Every term quoted: FTS5 syntax in what the user typed (AND, NEAR, *, ^) stays plain words.
    quoted = [_quote(t) for t in query.terms] + [_quote(" ".join(p)) for p in query.phrases]
    return " OR ".join(quoted)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _sqlite_matches(query: Query, where: str, params: list) -> list[Match]:
    sql = (
        "SELECT m.id, m.conversation_id, m.seq, m.parent_seq, bm25(chat_message_fts) AS rank "  # noqa: S608
        "FROM chat_message_fts "
        "JOIN chat_message m ON m.id = chat_message_fts.rowid "
        "JOIN chat_conversation c ON c.id = m.conversation_id "
        f"WHERE chat_message_fts MATCH %s AND {where} "  # the scope's SQL is ours
        "ORDER BY rank, m.id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_fts5_match(query), *params, CANDIDATES])
        # bm25 is negative, lower is better: flipped so every score reads "higher is better".
        return [Match(*row[:4], -row[4]) for row in cursor.fetchall()]


def _sqlite_rows(query, where, params, keys, matches) -> list[tuple]:
    in_keys, key_params = _in_keys(keys)
    pooled = set(keys)
    # The snippets of the matched ones, found by rowid (not by matching every row again).
    matched = [m.message_id for m in matches if m.key in pooled] or [0]
    matched_sql = ", ".join(["%s"] * len(matched))
    sql = (
        f"SELECT {_ROW}, substr(m.search_text, 1, %s), s.snippet {_FROM} "  # noqa: S608
        "LEFT JOIN (SELECT rowid, snippet(chat_message_fts, 0, %s, %s, '…', 24) AS snippet "
        "FROM chat_message_fts "
        f"WHERE chat_message_fts MATCH %s AND rowid IN ({matched_sql})) s ON s.rowid = m.id "
        f"WHERE {where} AND {in_keys}"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                HEAD_CHARS,
                MARK_OPEN,
                MARK_CLOSE,
                _fts5_match(query),
                *matched,
                *params,
                *key_params,
            ],
        )
        return cursor.fetchall()


# --- PostgreSQL: tsvector over a GIN index ------------------------------------------------------

_VECTOR = "to_tsvector('english', m.search_text)"  # the indexed expression, exactly


def _tsquery(query: Query) -> tuple[list[tuple[str, str]], str, list[str]]:
    parts = [("plainto_tsquery('english', %s)", t) for t in query.terms]
    parts += [("phraseto_tsquery('english', %s)", " ".join(p)) for p in query.phrases]
    any_part = "(" + " || ".join(sql for sql, _ in parts) + ")"
    return parts, any_part, [value for _, value in parts]


def _postgres_matches(query: Query, where: str, params: list) -> list[Match]:
    parts, any_part, any_params = _tsquery(query)
    flags = ", ".join(f"{_VECTOR} @@ {sql}" for sql, _ in parts)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) {_FROM} WHERE {where}", params)  # noqa: S608
        (total,) = cursor.fetchone()
        cursor.execute(
            "SELECT m.id, m.conversation_id, m.seq, m.parent_seq, "  # noqa: S608
            f"ts_rank({_VECTOR}, {any_part}), {flags} {_FROM} "
            f"WHERE {_VECTOR} @@ {any_part} AND {where} "
            "ORDER BY 5 DESC, m.id DESC LIMIT %s",
            [*any_params, *any_params, *any_params, *params, CANDIDATES],
        )
        candidates = cursor.fetchall()
    if not candidates:
        return []
    weights = _idf(total, [row[5:] for row in candidates])
    matches = []
    for pk, cid, seq, parent, rank, *held in candidates:
        idf = sum(w for w, on in zip(weights, held, strict=True) if on)
        matches.append(Match(pk, cid, seq, parent, idf + 0.1 * rank))
    return matches


def _postgres_rows(query, where, params, keys, matches) -> list[tuple]:
    _, any_part, any_params = _tsquery(query)
    in_keys, key_params = _in_keys(keys)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_ROW}, substr(m.search_text, 1, %s), "  # noqa: S608
            f"ts_headline('english', m.search_text, {any_part}, %s) {_FROM} "
            f"WHERE {where} AND {in_keys}",
            [HEAD_CHARS, *any_params, _HEADLINE, *params, *key_params],
        )
        return cursor.fetchall()


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
