"""Search by meaning, fused with the lexical hits: what `search.messages` returns when an
embedder is configured (EMBEDDINGS; with "none" its hits are returned as they are).

The query (its words less the scope's frequent ones) is embedded once; the scope's stored
vectors (chat/vectors.py) are read in one query and scored with numpy (cosines: the vectors are
unit length), and the best of them join the lexical hits as candidates. Each candidate gets
both scores (0 lexical for one the words did not find), fused by search/fusion.py, each side
weighted by how sure it is of its best. The scope is the lexical search's: one user's
conversations (one of them, or all), nothing deleted or unsent, before a point and off other
branches for the model. `by_meaning` is the semantic side alone (the benchmarks' column).

Each message has its own vector, not one of it with its neighbours (as the lexical side reads
them, search/context.py): on BEAM's chats (bench/beam.py) a neighbour-window vector, summed at
search time from the stored ones, helped the model alone but never the fusion, so nothing is
re-embedded when a next message arrives.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from django.db import connection
from django.db.models import Count, Q

from chat.models import UNSTARTED, Message, MessageVector
from chat.vectors import unpack
from providers import embeddings
from search import fusion
from search.query import Query
from search.values import Hit

# Semantic candidates beside the lexical hits, and lexical hits asked for, per hit wanted.
WIDEN = 3
# A message this far from the query (cosine) is not offered on meaning alone.
MIN_COSINE = 0.2
# The frequent words are counted over the scope's latest this many messages.
SAMPLE = 2000
SNIPPET_CHARS = 200


UNAVAILABLE = (
    "Search by meaning is unavailable right now (its server does not answer): these results "
    "match the words."
)


def unavailable_notice() -> str:
    """What a search says while its embeddings server is down, else ""."""
    return UNAVAILABLE if embeddings.unavailable() else ""


def lexical_limit(limit: int) -> int:
    """How many lexical hits to ask for: more than shown when they are to be fused."""
    return limit if embeddings.embedder() is None else limit * WIDEN


def hybrid(user, query: Query, lexical: Sequence, scope, *, limit: int):
    """The best `limit` of the lexical hits (`search.messages.Hit`) and the scope's messages
    nearest in meaning, by fused score."""
    embedder = embeddings.embedder()
    if embedder is None:
        return list(lexical[:limit])
    messages = _messages(user, scope)
    cosines = _cosines(embedder, messages, query)
    if cosines is None:  # its server is down: the words alone (`embeddings.unavailable()`)
        return list(lexical[:limit])
    keys, scores = cosines
    lexical_scores = {(hit.conversation_id, hit.seq): hit.score for hit in lexical}
    order = np.argsort(-scores)
    nearest = [keys[i] for i in order[: limit * WIDEN] if scores[i] >= MIN_COSINE]
    # A lexical hit with no vector yet (settled since the last round) scores the scope's worst.
    worst = float(scores.min()) if len(scores) else 0.0
    position = {key: i for i, key in enumerate(keys)}
    semantic_scores = {
        key: float(scores[position[key]]) if key in position else worst
        for key in (*lexical_scores, *nearest)
    }
    # Each side counts as much as it is sure, over its own candidates.
    weight = fusion.weight_by_sureness(
        fusion.sureness(list(lexical_scores.values())),
        fusion.sureness([float(scores[i]) for i in order[: limit * WIDEN]]),
    )
    ranked = fusion.fuse(lexical_scores, semantic_scores, weight)[:limit]
    return _as_hits(messages, lexical, ranked)


def by_meaning(user, query: Query, scope, *, limit: int) -> list[Hit]:
    """Search by meaning alone: the `limit` messages of the scope nearest the query (what the
    benchmarks set beside the lexical and the fused rankings); [] with no embedder."""
    embedder = embeddings.embedder()
    if embedder is None or query.empty:
        return []
    messages = _messages(user, scope)
    cosines = _cosines(embedder, messages, query)
    if cosines is None:
        return []
    keys, scores = cosines
    ranked = [(keys[i], float(scores[i])) for i in np.argsort(-scores)[:limit]]
    return _as_hits(messages, [], ranked)


def _cosines(embedder, messages, query: Query):
    """The scope's messages (keys: conversation id, seq) and each one's cosine with the query
    (its words less the scope's frequent ones), or None when the embedder cannot answer."""
    words = list(dict.fromkeys([*query.terms, *(w for p in query.phrases for w in p)]))
    vector = embeddings.query_vector(embedder, " ".join(_meaningful(messages, words)))
    if vector is None:
        return None
    rows = list(
        MessageVector.objects.filter(model=embedder.name, message__in=messages).values_list(
            "message__conversation_id", "message__seq", "dimension", "vector"
        )
    )
    keys = [(row[0], row[1]) for row in rows]
    scores = np.zeros(len(rows), dtype=np.float32)
    if rows and np.any(vector):
        scores = unpack([bytes(row[3]) for row in rows], rows[0][2]) @ vector
    return keys, scores


def _as_hits(messages, lexical: Sequence, ranked: list[tuple[tuple[int, int], float]]):
    """`ranked` (key, score) as hits: the lexical hit's where there is one (its snippet marks
    the words), else the message's opening words."""
    found = {(hit.conversation_id, hit.seq): hit for hit in lexical}
    missing = [key for key, _ in ranked if key not in found]
    found.update(_hits(messages, missing))
    return [replace(found[key], score=round(score, 4)) for key, score in ranked if key in found]


def _messages(user, scope):
    """The messages a `search.messages.Scope` names, as the lexical search reads it: one user's,
    nothing deleted or unsent; in its conversation only those before `before_seq` and not
    `excluded`; with `others`, the user's other conversations whole as well."""
    messages = Message.objects.filter(
        conversation__owner_id=user.pk, conversation__deleted_at__isnull=True
    ).exclude(status__in=UNSTARTED)
    if scope.conversation_id is None:
        return messages
    here = Q(conversation_id=int(scope.conversation_id))
    if scope.before_seq is not None:
        here &= Q(seq__lt=int(scope.before_seq))
    if scope.excluded:
        here &= ~Q(seq__in=list(scope.excluded))
    if scope.others:
        here |= ~Q(conversation_id=int(scope.conversation_id))
    return messages.filter(here)


def _meaningful(scope, words: list[str]) -> list[str]:
    """The query's words less those a large share of the scope's latest messages hold, counted
    in one query."""
    if len(words) < 2:
        return words
    sample = Message.objects.filter(pk__in=scope.order_by("-pk").values("pk")[:SAMPLE])
    # Whole words ("car" is not in "Caroline"): PostgreSQL's regular expressions mark a word's
    # edges \m and \M, SQLite's (Python's, through Django) \b. The plain substring test first,
    # so the regular expression runs only on the few messages that hold the letters.
    edge = ("\\m", "\\M") if connection.vendor == "postgresql" else ("\\b", "\\b")
    counts = sample.aggregate(
        total=Count("pk"),
        **{
            f"w{i}": Count(
                "pk",
                filter=Q(search_text__icontains=w)
                & Q(search_text__iregex=edge[0] + re.escape(w) + edge[1]),
            )
            for i, w in enumerate(words)
        },
    )
    holding = {word: counts[f"w{i}"] for i, word in enumerate(words)}
    return fusion.drop_frequent(words, holding, counts["total"])


def _hits(scope, keys: list[tuple[int, int]]) -> dict:
    """Hits for messages found by meaning alone: their opening words as the snippet."""
    if not keys:
        return {}
    wanted = Q()
    for conversation_id, seq in keys:
        wanted |= Q(conversation_id=conversation_id, seq=seq)
    rows = scope.filter(wanted).values_list(
        "conversation_id", "conversation__title", "seq", "role", "created_at", "search_text"
    )
    return {
        (cid, seq): Hit(cid, title, seq, role, at, _opening(text), 0.0)
        for cid, title, seq, role, at, text in rows
    }


def _opening(text: str) -> str:
    words = " ".join(text.split())
    return words if len(words) <= SNIPPET_CHARS else words[:SNIPPET_CHARS].rsplit(" ", 1)[0] + "…"
