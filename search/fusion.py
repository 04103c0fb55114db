"""Combining the lexical and the semantic scores of one search: plain functions over plain values.

Each list's scores are min-max normalised over the candidates (the best 1, the worst 0), so
bm25's unbounded scores and cosines in [-1, 1] weigh alike, and summed, the semantic side's
share set per search by how sure each side is (`sureness`, `weight_by_sureness`): on that same
scale, how far below a side's best its tenth falls. A side whose first ten are as good as each
other (search by meaning finding a dozen messages on the query's topic alike, the words of a
long vague question matching everything a little) cannot tell which message is meant, and gives
way to the one that can. `WEIGHT` is the share when both are as sure. A fixed share let an
unsure side reorder a sure one: on a public benchmark of two-person chats the fixed fusion
ranked below lexical search alone, and on BEAM's chats (bench/beam.py) the sureness adds a
point across conversations with no loss in one (bench/RESULTS.md). A min-max sum beat
reciprocal-rank fusion, and z-scores over the scope, in offline measurements.
`WEIGHT` was tuned on bench/recall_semantic.py (bench/RESULTS.md): 0.6 finds the most
paraphrased questions' answers of the weights that still put every literal question's answer
first (by its words or by an exact identifier, a port, an error code: a static model reads
"E4312" and "E4313" alike).

Before a query is embedded, the words half or more of the searched messages hold (a speaker's
name in an imported two-person chat, every message of theirs and the other's mentions) are
dropped: a static model averages its words, and one word that many messages hold would pull the
query towards all of them alike. Below half, a word still says what the question is about (a
project's name a fifth of a long chat holds); dropping words a fifth held lost 2 points of
BEAM's recall in a conversation and none of the planted benchmark's.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

WEIGHT = 0.6  # the semantic share of the fused score when both sides are as sure
# How far down a ranking its sureness looks: as deep as the hits people and the model read.
DEPTH = 10
# A word held by at least this share of the searched messages is left out of the query's vector.
FREQUENT_SHARE = 0.5


def min_max[K: Hashable](scores: Mapping[K, float]) -> dict[K, float]:
    """Scores rescaled to [0, 1]; all equal: all 1 (each is as good as the best)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def sureness(scores: Sequence[float], depth: int = DEPTH) -> float:
    """How sure one side's ranking is of its best, min-max over `scores` (its own candidates:
    the lexical hits; by meaning, the scope's nearest, which need not be the set `fuse` rescales
    that side over): how far below the best its `depth`-th falls. 1: the best stands alone
    (the rest are as bad as the worst candidate); 0: the first `depth` are as good as each
    other, and the ranking cannot tell which of them is meant. One candidate alone (the one
    message holding an identifier) is as sure as a ranking can be."""
    ranked = sorted(scores, reverse=True)
    if len(ranked) == 1:
        return 1.0
    if not ranked or ranked[0] <= ranked[-1]:
        return 0.0
    return (ranked[0] - ranked[min(depth, len(ranked)) - 1]) / (ranked[0] - ranked[-1])


def weight_by_sureness(lexical: float, semantic: float, weight: float = WEIGHT) -> float:
    """The semantic share of one search's fused score: `weight`, each side's share scaled by
    how sure it is (`sureness`); both unsure: `weight` as it is."""
    sure = weight * semantic + (1 - weight) * lexical
    return weight if sure <= 0 else weight * semantic / sure


def fuse[K: Hashable](
    lexical: Mapping[K, float], semantic: Mapping[K, float], weight: float = WEIGHT
) -> list[tuple[K, float]]:
    """Every candidate of either list with its fused score, best first, `weight` the semantic
    share. A candidate missing from one list scores 0 there (the worst of that list's
    candidates)."""
    lex, sem = min_max(lexical), min_max(semantic)
    fused = {
        key: (1 - weight) * lex.get(key, 0.0) + weight * sem.get(key, 0.0) for key in (*lex, *sem)
    }
    return sorted(fused.items(), key=lambda item: -item[1])


def drop_frequent(
    words: Sequence[str], holding: Mapping[str, int], total: int, share: float = FREQUENT_SHARE
) -> list[str]:
    """The query's words less those at least `share` of `total` messages hold (`holding`: how
    many hold each word). If every word is that frequent, they are all kept: they are the
    query."""
    if total <= 0:
        return list(words)
    kept = [word for word in words if holding.get(word, 0) / total < share]
    return kept or list(words)
