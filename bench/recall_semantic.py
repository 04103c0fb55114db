"""Recall of paraphrased questions: lexical, semantic and hybrid search side by side.

Run by hand (`make bench-recall-semantic`, or `.venv/bin/python bench/recall_semantic.py`); not
a test. The statements of bench/paraphrases.py (46, each answered by a question that shares no
content word with it) are planted in one long conversation between two speakers, every message
"Name: text" as an imported chat has it, among distractors built from the questions' own words.
Then each question is asked five ways and the share whose statement is in the top 5 and top 10
is printed:

  bm25       plain BM25 over single messages (k1 1.2, b 0.75, no stemming), computed here;
  lexical    the app's search with EMBEDDINGS=none (the database's full-text index);
  semantic   the built-in model alone: cosine of the query (less the conversation's frequent
             words) with each message's stored vector;
  hybrid     the app's search with EMBEDDINGS=builtin (search/semantic.py, search/fusion.py);
  hybrid@w   the same fusion with another semantic weight w (the tuning of fusion.WEIGHT).

`--backfill N` instead times the `embed_messages` command over N generated messages in a fresh
SQLite database, and reports its peak memory.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness.inprocess import setup_django  # noqa: E402
from bench.paraphrases import PAIRS, shared_words  # noqa: E402
from bench.recall import KINDS, NAMES, make_fact  # noqa: E402

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

SPEAKERS = ("Caroline", "Melanie")
TARGET_GAIN = 0.15  # hybrid over plain BM25, top-10 (issue 31)
WEIGHTS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
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
    context: the competition a question's words meet in a long chat."""
    picked = rng.sample(words, min(len(words), rng.randint(1, 2))) if words else []
    parts = [rng.choice(CHATTER), "the", rng.choice(NOUNS), "was", rng.choice(ADJECTIVES)]
    for word in picked:
        parts += [rng.choice(("and the", "with some", "about the", "like a")), word]
    parts += ["at the", rng.choice(NOUNS)]
    return " ".join(parts).capitalize() + "."


def conversation_texts(
    rng: random.Random, size: int, noise: float = 1.0
) -> tuple[list[str], dict[int, str]]:
    """The messages (index = seq - 1), and per pair index the seq of its statement; `noise` of
    the distractors hold some question's words."""
    question_words = [
        sorted({w for w in re.findall(r"[a-z]+", q.lower()) if len(w) > 3}) for _, q in PAIRS
    ]
    texts = [
        distractor(rng, rng.choice(question_words) if rng.random() < noise else [])
        for _ in range(size)
    ]
    statements = [statement for statement, _ in PAIRS] + [f.statement for f in LITERAL]
    places = sorted(rng.sample(range(size), len(statements)))
    order = list(range(len(statements)))
    rng.shuffle(order)
    planted: dict[int, int] = {}
    for i, place in zip(order, places, strict=True):
        texts[place] = statements[i]
        planted[i] = place + 1
    return [f"{SPEAKERS[n % 2]}: {text}" for n, text in enumerate(texts)], planted


# --- plain BM25 over single messages ------------------------------------------------------------


def bm25_rank(texts: list[str], query: str, k1: float = 1.2, b: float = 0.75) -> list[int]:
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


# --- the run ------------------------------------------------------------------------------------


def measure(args) -> dict[tuple[str, str], list[tuple[bool, bool, bool]]]:
    import numpy as np
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from chat import vectors
    from chat.models import Conversation, Message, MessageVector
    from chat.search_index import searchable_text
    from providers import embeddings
    from search import fusion, semantic
    from search.messages import search
    from search.query import parse

    for statement, question in PAIRS:
        shared = shared_words(statement, question.format(a=SPEAKERS[0]), SPEAKERS)
        assert not shared, f"{question!r} shares {shared} with its statement"
    rng = random.Random(args.seed)
    texts, planted = conversation_texts(rng, args.messages, args.noise)
    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    conversation = Conversation.objects.create(owner=user, model="demo")
    rows = []
    for seq, text in enumerate(texts, start=1):
        content = [{"type": "text", "text": text}]
        role = "user" if seq % 2 else "assistant"
        rows.append(
            Message(
                conversation=conversation,
                seq=seq,
                role=role,
                content=content,
                search_text=searchable_text(content),
            )
        )
    Message.objects.bulk_create(rows, batch_size=500)
    embedder = embeddings.embedder()
    started = time.perf_counter()
    sum(vectors.embed_batches(embedder))
    print(f"{len(texts):,} messages embedded in {time.perf_counter() - started:.2f} s")
    stored = MessageVector.objects.filter(message__conversation=conversation).order_by(
        "message__seq"
    )
    matrix = vectors.unpack([bytes(v) for v in stored.values_list("vector", flat=True)], 256)
    lowered = [t.lower() for t in texts]

    def semantic_rank(question: str, drop: bool = True) -> tuple[list[int], np.ndarray]:
        words = list(parse(question).terms)
        if drop:
            holding = {w: sum(1 for t in lowered if re.search(rf"\b{w}\b", t)) for w in words}
            words = fusion.drop_frequent(words, holding, len(texts))
        cosines = matrix @ embedder.embed([" ".join(words)])[0]
        return [int(i) + 1 for i in np.argsort(-cosines)], cosines

    results: dict[tuple[str, str], list[tuple[bool, bool, bool]]] = {}
    spent = {"lexical": 0.0, "hybrid": 0.0}

    def note(name: str, ranked: list[int], seq: int) -> None:
        found = (seq in ranked[:1], seq in ranked[:5], seq in ranked[:10])
        results.setdefault((group, name), []).append(found)

    asked = [(i, template, "paraphrased") for i, (_, template) in enumerate(PAIRS)]
    for i, fact in enumerate(LITERAL, start=len(PAIRS)):
        asked.append((i, fact.question.replace("{", "{{").replace("}", "}}"), "literal"))
        if fact.kind in BY_IDENTIFIER:
            asked.append((i, BY_IDENTIFIER[fact.kind].format(answer=fact.answer), "identifier"))
    for i, template, group in asked:  # noqa: B007 - `note` reads the group
        question, seq = template.format(a=SPEAKERS[(planted[i] - 1) % 2]), planted[i]
        note("bm25", bm25_rank(texts, question), seq)
        settings.EMBEDDINGS = "none"
        started = time.perf_counter()
        search(user, question, conversation_id=conversation.pk)
        spent["lexical"] += time.perf_counter() - started
        lexical = search(user, question, conversation_id=conversation.pk, limit=30)
        note("lexical", [h.seq for h in lexical], seq)
        note("semantic (all words)", semantic_rank(question, drop=False)[0], seq)
        ranked, cosines = semantic_rank(question)
        note("semantic", ranked, seq)
        settings.EMBEDDINGS = "builtin"
        started = time.perf_counter()
        hybrid = search(user, question, conversation_id=conversation.pk)
        spent["hybrid"] += time.perf_counter() - started
        note("hybrid", [h.seq for h in hybrid], seq)
        nearest = [s for s in ranked[:30] if cosines[s - 1] >= semantic.MIN_COSINE]
        lexical_scores = {h.seq: h.score for h in lexical}
        semantic_scores = {s: float(cosines[s - 1]) for s in {*lexical_scores, *nearest}}
        for weight in WEIGHTS:
            fused = fusion.fuse(lexical_scores, semantic_scores, weight)
            note(f"hybrid@{weight}", [s for s, _ in fused], seq)
    print(
        "one search (10 hits) takes "
        + ", ".join(
            f"{name} {seconds / len(asked) * 1000:.1f} ms" for name, seconds in spent.items()
        )
        + " on average"
    )
    return results


GROUPS = ("paraphrased", "literal", "identifier")


def report(results: dict[tuple[str, str], list[tuple[bool, bool, bool]]]) -> int:
    counts = {group: len(results[(group, "bm25")]) for group in GROUPS}
    print(
        f"{counts['paraphrased']} paraphrased questions (no content word shared with the "
        f"answer), {counts['literal']} literal ones (bench/recall.py's facts), "
        f"{counts['identifier']} asking by the exact identifier (port, error code, path)\n"
    )
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
    gain = share[("paraphrased", "hybrid")] - share[("paraphrased", "bm25")]
    verdict = "PASS" if gain >= TARGET_GAIN else "FAIL"
    print(
        f"\n[{verdict}] hybrid's top 10 on paraphrased questions: {gain * 100:+.0f} points over "
        "plain BM25 (target +15)"
    )
    return 0 if gain >= TARGET_GAIN else 1


def backfill(args) -> int:
    """`embed_messages` over N generated messages: its time and peak memory (a child process,
    so the generator's memory is not counted)."""
    from django.contrib.auth import get_user_model

    from chat import vectors
    from chat.models import Conversation, Message
    from providers import embeddings

    rng = random.Random(args.seed)
    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    per = 1000
    for c in range(math.ceil(args.backfill / per)):
        conversation = Conversation.objects.create(owner=user, model="demo")
        count = min(per, args.backfill - c * per)
        texts, _ = conversation_texts(rng, max(count, len(PAIRS)))
        Message.objects.bulk_create(
            [
                Message(
                    conversation=conversation,
                    seq=seq,
                    role="user" if seq % 2 else "assistant",
                    content=[{"type": "text", "text": text}],
                    search_text=text,
                )
                for seq, text in enumerate(texts[:count], start=1)
            ],
            batch_size=1000,
        )
    started = time.perf_counter()
    # As deployed: without debug, which keeps every statement run (here, the vectors' bytes).
    production = {"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": "bench-only-" + uuid.uuid4().hex}
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "embed_messages"],
        cwd=ROOT,
        check=True,
        env={**os.environ, **production},
    )
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"embed_messages: {args.backfill:,} messages in {seconds:.1f} s, peak memory {peak:.0f} MB"
    )
    # What each server process's background round costs once everything is embedded: the one
    # query that finds nothing pending, over every message (a full round, once a minute) and
    # above the floor (every other round).
    embedder = embeddings.embedder()
    for name, floor in (("full", lambda: 0), ("above the floor", vectors.floor_now)):
        started = time.perf_counter()
        assert vectors.pending(embedder.name, after=floor()) == []
        ms = (time.perf_counter() - started) * 1000
        print(f"a background round with nothing pending, {name}: {ms:.1f} ms")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=2000, help="conversation length (default 2000)")
    p.add_argument("--seed", type=int, default=31)
    p.add_argument(
        "--noise",
        type=float,
        default=0.25,
        help="share of distractors holding some question's words (default 0.25)",
    )
    p.add_argument("--backfill", type=int, default=0, help="time embed_messages over N messages")
    args = p.parse_args(argv)
    env = {"EMBEDDINGS": "builtin", "LLM_PROVIDER": "demo"}
    _, tmp = setup_django(env, os.environ.get("DATABASE_URL", ""), prefix="recall-semantic-")
    try:
        return backfill(args) if args.backfill else report(measure(args))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
