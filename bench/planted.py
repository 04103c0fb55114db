"""Planted conversations for the recall benchmarks by meaning (bench/recall_semantic.py,
bench/recall_elsewhere.py): statements among distractors, the questions asked about them, and
the rankings computed here rather than by the app (plain BM25, the built-in model's cosines).

Every message reads "Name: text" between two speakers, as an imported chat has it. The
distractors are chatter built from the questions' own words, in another context: the
competition a question's words meet in a long chat.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter

from bench.paraphrases import PAIRS
from bench.recall import KINDS, NAMES, make_fact

# Literal questions too (bench/recall.py's facts: ports, owners, error codes, decisions, paths,
# asked in their own words), so the fusion's weight is not tuned to paraphrases alone.
_rng = random.Random(30)
LITERAL = [make_fact(kind, thing, _rng) for kind in KINDS for thing in _rng.sample(NAMES, 8)]
# Asked by the exact identifier too, which only the words can tell apart (a static model reads
# "E4312" and "E4313" alike).
BY_IDENTIFIER = {
    "number": "Which staging server listens on port {answer}?",
    "error": "Which nightly job crashed with error {answer}?",
    "path": "Which agent reads {answer}?",
}
# Every planted statement, by index: the paraphrased ones first, then the literal ones.
STATEMENTS = [statement for statement, _ in PAIRS] + [f.statement for f in LITERAL]
GROUPS = ("paraphrased", "literal", "identifier")
# The fusion's semantic weights tried beside the app's (search/fusion.py's WEIGHT).
WEIGHTS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)

SPEAKERS = ("Caroline", "Melanie")
CHATTER = (
    "honestly|anyway|you know|to be fair|funny enough|by the way|oh and|also|right|well"
).split("|")
NOUNS = (
    "meeting office weekend neighbour schedule coffee weather bus train email party movie "
    "show game news phone shop market street park morning evening plan list idea"
).split()
ADJECTIVES = "odd nice busy quiet long short strange great slow early late fine".split()


def distractor(rng: random.Random, words: list[str]) -> str:
    """A sentence of chatter holding one or two of `words` (a question's own words), in another
    context."""
    picked = rng.sample(words, min(len(words), rng.randint(1, 2))) if words else []
    parts = [rng.choice(CHATTER), "the", rng.choice(NOUNS), "was", rng.choice(ADJECTIVES)]
    for word in picked:
        parts += [rng.choice(("and the", "with some", "about the", "like a")), word]
    parts += ["at the", rng.choice(NOUNS)]
    return " ".join(parts).capitalize() + "."


def conversation_texts(
    rng: random.Random, size: int, noise: float = 1.0, planted: dict[int, str] | None = None
) -> tuple[list[str], dict[int, int]]:
    """The messages (index = seq - 1), and the seq of each planted statement by its key;
    `planted`: the statements to plant by key (None: every one of STATEMENTS, by index);
    `noise` of the distractors hold some question's words."""
    if planted is None:
        planted = dict(enumerate(STATEMENTS))
    question_words = [
        sorted({w for w in re.findall(r"[a-z]+", q.lower()) if len(w) > 3}) for _, q in PAIRS
    ]
    texts = [
        distractor(rng, rng.choice(question_words) if rng.random() < noise else [])
        for _ in range(size)
    ]
    places = sorted(rng.sample(range(size), len(planted)))
    order = list(planted)
    rng.shuffle(order)
    seqs: dict[int, int] = {}
    for key, place in zip(order, places, strict=True):
        texts[place] = planted[key]
        seqs[key] = place + 1
    return [f"{SPEAKERS[n % 2]}: {text}" for n, text in enumerate(texts)], seqs


def questions() -> list[tuple[int, str, str]]:
    """What is asked: (statement index, question template with "{a}" for its speaker, group)."""
    asked = [(i, template, "paraphrased") for i, (_, template) in enumerate(PAIRS)]
    for i, fact in enumerate(LITERAL, start=len(PAIRS)):
        asked.append((i, fact.question.replace("{", "{{").replace("}", "}}"), "literal"))
        if fact.kind in BY_IDENTIFIER:
            asked.append((i, BY_IDENTIFIER[fact.kind].format(answer=fact.answer), "identifier"))
    return asked


def store(user, texts: list[str]):
    """A conversation of `user` holding `texts` as its messages (seq 1, 2, …), written straight
    to the database: only the search is measured."""
    from chat.models import Conversation, Message
    from chat.search_index import searchable_text

    conversation = Conversation.objects.create(owner=user, model="demo")
    rows = []
    for seq, text in enumerate(texts, start=1):
        content = [{"type": "text", "text": text}]
        rows.append(
            Message(
                conversation=conversation,
                seq=seq,
                role="user" if seq % 2 else "assistant",
                content=content,
                search_text=searchable_text(content),
            )
        )
    Message.objects.bulk_create(rows, batch_size=500)
    return conversation


def bm25_rank(texts: list[str], query: str, k1: float = 1.2, b: float = 0.75) -> list[int]:
    """Plain BM25 over single messages (no stemming, no context): the 1-based positions in
    `texts` holding a query word, best first."""
    from search.query import STOP_WORDS

    def tokens(text: str) -> list[str]:
        return [w for w in re.findall(r"\w+", text.lower()) if w not in STOP_WORDS]

    docs = [Counter(tokens(t)) for t in texts]
    lengths = [sum(d.values()) for d in docs]
    average = sum(lengths) / len(docs)
    terms = set(tokens(query))
    holding = {t: sum(1 for d in docs if t in d) for t in terms}
    scores = []
    for i, doc in enumerate(docs):
        score = 0.0
        for term in terms:
            tf = doc.get(term, 0)
            if tf:
                idf = math.log(1 + (len(docs) - holding[term] + 0.5) / (holding[term] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[i] / average))
        scores.append(score)
    return [i + 1 for i in sorted(range(len(docs)), key=lambda i: -scores[i]) if scores[i] > 0]


def semantic_rank(embedder, matrix, lowered: list[str], question: str, drop: bool = True):
    """The built-in model alone: the 1-based positions in `lowered` (the messages' texts, lower
    case; `matrix` their vectors) by cosine with the question, best first, and the cosines. With
    `drop`, the words a large share of the messages hold are left out of the query, as the
    app's search does (search/fusion.py)."""
    import numpy as np

    from search import fusion
    from search.query import parse

    words = list(parse(question).terms)
    if drop:
        holding = {w: sum(1 for t in lowered if re.search(rf"\b{w}\b", t)) for w in words}
        words = fusion.drop_frequent(words, holding, len(lowered))
    cosines = matrix @ embedder.embed([" ".join(words)])[0]
    return [int(i) + 1 for i in np.argsort(-cosines)], cosines


def table(results: dict[tuple[str, str], list[tuple[bool, bool, bool]]]) -> dict:
    """Prints top 1 / 5 / 10 per ranking (rows) and group of questions (columns); returns each
    cell's top-10 share by (group, ranking)."""
    print(f"{'top 1 / 5 / 10':22} " + " ".join(f"{group:>18}" for group in GROUPS))
    share = {}
    for name in dict.fromkeys(name for _, name in results):
        cells = []
        for group in GROUPS:
            rows = results[(group, name)]
            top1, top5, top10 = (sum(r[k] for r in rows) / len(rows) for k in (0, 1, 2))
            share[(group, name)] = top10
            cells.append(f"{top1:4.0%} / {top5:4.0%} / {top10:4.0%}")
        print(f"{name:22} " + " ".join(f"{cell:>18}" for cell in cells))
    return share
