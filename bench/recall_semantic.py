"""Recall of paraphrased questions: lexical, semantic and hybrid search side by side.

Run by hand (`make bench-recall-semantic`, or `.venv/bin/python bench/recall_semantic.py`); not
a test. The statements of bench/paraphrases.py (46, each answered by a question that shares no
content word with it) and bench/planted.py's literal facts are planted in one long conversation
between two speakers, every message "Name: text" as an imported chat has it, among distractors
built from the questions' own words. Then each question is asked these ways and the share whose
statement is first, in the top 5 and in the top 10 is printed:

  bm25                  plain BM25 over single messages (k1 1.2, b 0.75, no stemming), computed
                        here;
  lexical (no context)  the app's full-text search over single messages (search.messages.lexical
                        with context weight 0: the database's index, stemmed);
  lexical               the app's search with EMBEDDINGS=none: each message with its neighbours
                        as context (search/context.py);
  semantic              the built-in model alone: cosine of the query (less the conversation's
                        frequent words; "all words": with them) with each message's stored vector;
  hybrid                the app's search with EMBEDDINGS=builtin (search.messages.ranked: the
                        lexical hits with context fused with the nearest by meaning);
  hybrid@w              the same fusion with another semantic weight w (the tuning of
                        fusion.WEIGHT).

Then bench/recall_elsewhere.py asks the same questions about a user's other conversations, as
the model does with scope "all", and checks that another user's identical statements are never
returned.

`--backfill N` instead times the `embed_messages` command over N generated messages in a fresh
SQLite database, and reports its peak memory.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness.inprocess import setup_django  # noqa: E402
from bench.paraphrases import PAIRS, shared_words  # noqa: E402
from bench.planted import (  # noqa: E402
    GROUPS,
    SPEAKERS,
    WEIGHTS,
    bm25_rank,
    conversation_texts,
    questions,
    semantic_rank,
    store,
    table,
)
from bench.recall_elsewhere import measure_elsewhere  # noqa: E402

TARGET_GAIN = 0.15  # hybrid over plain BM25, top-10: what search by meaning must add


# --- the run ------------------------------------------------------------------------------------


def measure(args, user) -> dict[tuple[str, str], list[tuple[bool, bool, bool]]]:
    from django.conf import settings

    from chat import vectors
    from chat.models import MessageVector
    from providers import embeddings
    from search import fusion, semantic
    from search.messages import lexical, search
    from search.query import parse
    from search.values import Scope

    for statement, question in PAIRS:
        shared = shared_words(statement, question.format(a=SPEAKERS[0]), SPEAKERS)
        assert not shared, f"{question!r} shares {shared} with its statement"
    rng = random.Random(args.seed)
    texts, planted = conversation_texts(rng, args.messages, args.noise)
    conversation = store(user, texts)
    embedder = embeddings.embedder()
    started = time.perf_counter()
    sum(vectors.embed_batches(embedder))
    print(f"{len(texts):,} messages embedded in {time.perf_counter() - started:.2f} s")
    stored = MessageVector.objects.filter(message__conversation=conversation).order_by(
        "message__seq"
    )
    matrix = vectors.unpack([bytes(v) for v in stored.values_list("vector", flat=True)], 256)
    lowered = [t.lower() for t in texts]
    results: dict[tuple[str, str], list[tuple[bool, bool, bool]]] = {}
    spent = {"lexical": 0.0, "hybrid": 0.0}

    def note(name: str, ranked: list[int], seq: int) -> None:
        found = (seq in ranked[:1], seq in ranked[:5], seq in ranked[:10])
        results.setdefault((group, name), []).append(found)

    asked = questions()
    for i, template, group in asked:  # noqa: B007 - `note` reads the group
        question, seq = template.format(a=SPEAKERS[(planted[i] - 1) % 2]), planted[i]
        note("bm25", bm25_rank(texts, question), seq)
        alone = lexical(user, parse(question), Scope(conversation.pk), limit=10, context_weight=0)
        note("lexical (no context)", [h.seq for h in alone], seq)
        settings.EMBEDDINGS = "none"
        started = time.perf_counter()
        search(user, question, conversation_id=conversation.pk)
        spent["lexical"] += time.perf_counter() - started
        found = search(user, question, conversation_id=conversation.pk, limit=30)
        note("lexical", [h.seq for h in found], seq)
        note(
            "semantic (all words)",
            semantic_rank(embedder, matrix, lowered, question, False)[0],
            seq,
        )
        ranked, cosines = semantic_rank(embedder, matrix, lowered, question)
        note("semantic", ranked, seq)
        settings.EMBEDDINGS = "builtin"
        started = time.perf_counter()
        hybrid = search(user, question, conversation_id=conversation.pk)
        spent["hybrid"] += time.perf_counter() - started
        note("hybrid", [h.seq for h in hybrid], seq)
        nearest = [s for s in ranked[:30] if cosines[s - 1] >= semantic.MIN_COSINE]
        lexical_scores = {h.seq: h.score for h in found}
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


def report(results: dict[tuple[str, str], list[tuple[bool, bool, bool]]]) -> int:
    counts = {group: len(results[(group, "bm25")]) for group in GROUPS}
    print(
        f"{counts['paraphrased']} paraphrased questions (no content word shared with the "
        f"answer), {counts['literal']} literal ones (bench/recall.py's facts), "
        f"{counts['identifier']} asking by the exact identifier (port, error code, path)\n"
    )
    share = table(results)
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
        if args.backfill:
            return backfill(args)
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
        failed = report(measure(args, user))
        return measure_elsewhere(args) or failed
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
