"""Recall of questions about other conversations, asked with the model's scope "all".

Run by bench/recall_semantic.py, after its own table (one run prints both). A fresh user has
three conversations of `--messages / 2` messages each: the one the questions are asked from holds
distractors only; the second holds half of the planted statements (the paraphrased ones and the
literal ones of bench/planted.py), the third the other half. Another user holds every statement,
word for word, in a conversation of their own. Each question is asked from the first
conversation as the model asks it with scope "all" (`search_branch(..., everywhere=True)`), with
EMBEDDINGS=none (lexical with neighbours as context) and builtin (hybrid), beside plain BM25 and
the built-in model alone over the user's three conversations; then: is the statement's message
(its conversation and seq) in the top 5 and top 10? And no hit may be another user's.
"""

from __future__ import annotations

import random
import time
import uuid

from bench.planted import (
    GROUPS,
    SPEAKERS,
    STATEMENTS,
    WEIGHTS,
    bm25_rank,
    conversation_texts,
    questions,
    semantic_rank,
    store,
    table,
)


def measure_elsewhere(args) -> int:
    """Prints the table of questions about other conversations and the check that no hit is
    another user's; 1 if one was."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from chat import vectors
    from chat.models import MessageVector
    from providers import embeddings
    from search import fusion, semantic
    from search.messages import search_branch

    rng = random.Random(args.seed + 1)
    users = get_user_model().objects
    user = users.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    stranger = users.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    size = args.messages // 2
    distractors, _ = conversation_texts(rng, size, args.noise, planted={})
    here = store(user, distractors)
    where: dict[int, tuple[int, int]] = {}  # statement index -> (conversation, seq)
    everything: list[tuple[tuple[int, int], str]] = []  # the user's messages, with their keys
    for half in (0, 1):
        planted = {i: s for i, s in enumerate(STATEMENTS) if i % 2 == half}
        texts, seqs = conversation_texts(rng, size, args.noise, planted=planted)
        other = store(user, texts)
        where.update({i: (other.pk, seq) for i, seq in seqs.items()})
        everything += [((other.pk, seq), text) for seq, text in enumerate(texts, start=1)]
    everything += [((here.pk, seq), text) for seq, text in enumerate(distractors, start=1)]
    theirs = store(stranger, conversation_texts(rng, size, args.noise)[0])
    embedder = embeddings.embedder()
    sum(vectors.embed_batches(embedder))
    stored = {
        (cid, seq): bytes(vector)
        for cid, seq, vector in MessageVector.objects.filter(
            model=embedder.name, message__conversation__owner=user
        ).values_list("message__conversation_id", "message__seq", "vector")
    }
    keys = [key for key, _ in everything]
    position = {key: n for n, key in enumerate(keys)}
    matrix = vectors.unpack([stored[key] for key in keys], 256)
    lowered = [text.lower() for _, text in everything]
    results: dict[tuple[str, str], list[tuple[bool, bool, bool]]] = {}
    mine = {here.pk, *(cid for cid, _ in where.values())}
    hits = leaks = 0
    spent = {"lexical": 0.0, "hybrid": 0.0}
    for i, template, group in questions():
        answer = where[i]
        question = template.format(a=SPEAKERS[(answer[1] - 1) % 2])
        nearest, cosines = semantic_rank(embedder, matrix, lowered, question)
        rankings = {
            "bm25": [keys[n - 1] for n in bm25_rank([t for _, t in everything], question)],
            "semantic": [keys[n - 1] for n in nearest],
        }
        for name, setting in (("lexical", "none"), ("hybrid", "builtin")):
            settings.EMBEDDINGS = setting
            started = time.perf_counter()
            found = search_branch(user, question, here.pk, None, limit=10, everywhere=True)
            spent[name] += time.perf_counter() - started
            rankings[name] = [(h.conversation_id, h.seq) for h in found]
            hits += len(found)
            leaks += sum(1 for h in found if h.conversation_id not in mine)
        # The fusion's other weights, over the candidates the app's hybrid search fuses.
        settings.EMBEDDINGS = "none"
        wide = search_branch(user, question, here.pk, None, limit=30, everywhere=True)
        leaks += sum(1 for h in wide if h.conversation_id not in mine)
        hits += len(wide)
        lexical_scores = {(h.conversation_id, h.seq): h.score for h in wide}
        near = [keys[n - 1] for n in nearest[:30] if cosines[n - 1] >= semantic.MIN_COSINE]
        semantic_scores = {k: float(cosines[position[k]]) for k in {*lexical_scores, *near}}
        for weight in WEIGHTS:
            fused = fusion.fuse(lexical_scores, semantic_scores, weight)
            rankings[f"hybrid@{weight}"] = [key for key, _ in fused]
        for name in ("bm25", "lexical", "semantic", "hybrid", *(f"hybrid@{w}" for w in WEIGHTS)):
            ranked = rankings[name]
            found_at = (answer in ranked[:1], answer in ranked[:5], answer in ranked[:10])
            results.setdefault((group, name), []).append(found_at)
    counts = {group: len(results[(group, "bm25")]) for group in GROUPS}
    asked = sum(counts.values())
    print(
        "\nQuestions about the user's other conversations, asked from one that does not hold "
        f'the answers, scope "all" ({counts["paraphrased"]} paraphrased, {counts["literal"]} '
        f"literal, {counts['identifier']} by identifier; 3 conversations of {size:,} messages; "
        "one search (10 hits) takes "
        + ", ".join(f"{name} {seconds / asked * 1000:.1f} ms" for name, seconds in spent.items())
        + " on average)\n"
    )
    table(results)
    verdict = "PASS" if leaks == 0 else "FAIL"
    print(
        f"\n[{verdict}] another user's identical statements returned: {leaks} of {hits} hits "
        f"(their conversation {theirs.pk} never in scope)"
    )
    return 1 if leaks else 0
