"""Recall with neighbours as context: facts whose subject is named only by the message before.

Run by hand (`.venv/bin/python bench/neighbours.py`); not a test.

A conversation of filler turns holds facts stated the way people talk: the user names the
subject ("About the heron nightly job from yesterday."), the next message states the fact
without naming it again ("It crashed with error E4821: certificate chain too long."), and
same-shaped facts about other subjects are the distractors. Each fact is asked about later ("What
error did the heron nightly job crash with?"): is the message stating it among the search's 5
and 10 best hits, scored on its own words only (context weight 0: plain full-text search over
single messages, as search once ranked) and with its neighbours as context (the app's weight)?
The messages are written straight to the database (no turns): only the search is measured.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness.inprocess import setup_django  # noqa: E402
from bench.recall import NAMES, filler  # noqa: E402

# (what names the subject, what states the fact without naming it, the question asked later)
SHAPES = (
    (
        "Let's sort out the {t} staging server today.",
        "It listens on port {n} now.",
        "Which port does the {t} staging server listen on?",
    ),
    (
        "About the {t} nightly job from yesterday.",
        "It crashed with error E{n}: certificate chain too long.",
        "What error did the {t} nightly job crash with?",
    ),
    (
        "The {t} release checklist needs an owner.",
        "Priya Raman takes it from this sprint on, ticket {n}.",
        "Who owns the {t} release checklist?",
    ),
    (
        "Now the {t} audit log.",
        "We decided it moves to PostgreSQL {n}, not MySQL.",
        "Which database did we decide on for the {t} audit log?",
    ),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--facts", type=int, default=40, help="facts planted (default 40)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", ""),
        help="database (default: $DATABASE_URL, else a fresh temporary SQLite file)",
    )
    return p.parse_args(argv)


def plant(conversation, rng: random.Random, count: int) -> list[tuple[str, int]]:
    """The conversation's messages; each fact's question and the seq of the message stating it."""
    from chat.models import Message

    seq, facts = 0, []

    def put(text: str, role: str) -> int:
        nonlocal seq
        seq += 1
        content = [{"type": "text", "text": text}]
        Message.objects.create(conversation=conversation, seq=seq, role=role, content=content)
        return seq

    for i, thing in enumerate(rng.sample(NAMES, count)):
        for _ in range(rng.randint(2, 4)):
            put(filler(rng, seq), "user")
            put("Noted. " + filler(rng, seq), "assistant")
        names, states, question = SHAPES[i % len(SHAPES)]
        put(names.format(t=thing), "user")
        stated = put(states.format(n=rng.randint(100, 99999)), "assistant")
        facts.append((question.format(t=thing), stated))
    return facts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _, tmp = setup_django({}, args.database_url, prefix="neighbours-")
    try:
        from django.contrib.auth import get_user_model

        from chat.models import Conversation
        from search.context import CONTEXT_WEIGHT
        from search.messages import lexical
        from search.query import parse
        from search.values import Scope

        user = get_user_model().objects.create_user(
            f"neighbours-{uuid.uuid4().hex[:8]}", password=uuid.uuid4().hex
        )
        conversation = Conversation.objects.create(owner=user, model="demo")
        facts = plant(conversation, random.Random(args.seed), args.facts)
        messages = conversation.messages.count()
        print(f"{messages} messages, {len(facts)} facts named by the message before")
        print(f"{'scored on':34} {'top 5':>6} {'top 10':>6}")
        for label, weight in (
            ("its own words (single messages)", 0.0),
            (f"with its neighbours at {CONTEXT_WEIGHT:g}", CONTEXT_WEIGHT),
        ):
            top5 = top10 = 0
            for question, stated in facts:
                hits = lexical(
                    user, parse(question), Scope(conversation.pk), limit=10, context_weight=weight
                )
                seqs = [h.seq for h in hits]
                top5 += stated in seqs[:5]
                top10 += stated in seqs
            print(f"{label:34} {top5 / len(facts):6.0%} {top10 / len(facts):6.0%}")
        return 0
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
