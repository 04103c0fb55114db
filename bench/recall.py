"""Recall after compaction: are facts from the compacted part of a conversation still in reach?

Run by hand (`make bench-recall`, or `.venv/bin/python bench/recall.py`); not a test.

A long conversation is built through the real turn code (`turns.actions.send`, the engine's
steps, as in `bench/sawtooth.py`) with the offline demo model answering and a small budget, so
auto-compaction keeps folding the older turns into (rule-based) summaries. Early on, facts are
planted among filler messages: each is one user message stating something exact (a port, a
person, an error code, a decision, a path) about a named thing, with distractors of the same
kind about other things. Filler turns go on until at least `--compactions` compactions have
committed. Then, per fact, the question a user would ask about it is checked three ways:

  window   the exact answer (the number, the name, ...) is in the window the next request
           would carry: what a compacting chat without recall still "knows";
  brief    the exact answer is in the latest summary (the rule-based brief's facts carried
           through every compaction): what the brief alone still holds;
  top 5    the message stating it is among `search_history`'s 5 best hits for the question
           (the model's recall tool, the same search as the people's search box);
  top 10   among its 10 best;
  recall   the answer the demo model gives from `search_history`'s hits for the question (the
           best hit that holds what the question asks about) contains it: what the recall tool
           alone still holds;
  demo     the question is sent as a turn: the demo model answers from its window, or, when
           nothing there matches, calls `search_history` and quotes the best hit; does its
           reply contain the answer?

Prints the share per fact kind and overall, and exits 1 if the top-5 share is under 95%.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness.inprocess import run_turn, setup_django, without_background  # noqa: E402

TOP5_MIN = 0.95

FILLER_WORDS = (
    "model view template queryset migration index cache session request response middleware "
    "websocket consumer channel group token budget window summary boundary transcript message "
    "reply stream retry timeout latency database transaction lock row field form widget test "
    "fixture assertion coverage refactor function class method module import settings static "
    "partial fragment render layout sidebar header footer button label style color spacing"
).split()
NAMES = (
    "heron otter lynx marmot ibis puffin walrus badger civet dingo gecko jackal kestrel lemur "
    "mantis narwhal ocelot pangolin quail raven sable tapir urchin vole wombat yak zebu bison "
    "condor falcon gibbon hyena impala jaguar koala llama magpie newt osprey bobcat cougar "
    "egret ferret gazelle hornbill iguana jerboa kiwi loris mongoose numbat okapi pelican"
).split()
PEOPLE = (
    "Amara Okafor|Bjorn Lindqvist|Chiara Moretti|Dmitri Volkov|Esther Adeyemi|Farid Haddad|"
    "Greta Sorensen|Hiroshi Tanaka|Ines Carvalho|Jonas Weber|Keiko Yamada|Lucia Romero|"
    "Mateo Silva|Nadia Petrova|Oskar Nilsson|Priya Raman"
).split("|")


@dataclass(frozen=True)
class Fact:
    kind: str
    statement: str  # what the user says, planted in the transcript
    question: str  # what the user asks later
    answer: str  # the exact detail a good answer contains


def make_fact(kind: str, thing: str, rng: random.Random) -> Fact:
    if kind == "number":
        port = str(rng.randint(20000, 65000))
        return Fact(
            kind,
            f"For the record, the {thing} staging server listens on port {port} now.",
            f"Which port does the {thing} staging server listen on?",
            port,
        )
    if kind == "person":
        person = rng.choice(PEOPLE)
        return Fact(
            kind,
            f"Note that {person} owns the {thing} release checklist from this sprint on.",
            f"Who owns the {thing} release checklist?",
            person,
        )
    if kind == "error":
        code = f"E{rng.randint(1000, 9999)}"
        return Fact(
            kind,
            f"The {thing} nightly job crashed with error {code}: certificate chain too long.",
            f"What error did the {thing} nightly job crash with?",
            code,
        )
    if kind == "decision":
        version = f"PostgreSQL {rng.randint(12, 17)}.{rng.randint(1, 9)}"
        return Fact(
            kind,
            f"We decided the {thing} audit log moves to {version}, not MySQL.",
            f"Which database did we decide on for the {thing} audit log?",
            version,
        )
    path = f"/etc/{thing}/agent-{rng.randint(2, 99)}.toml"
    return Fact(
        kind,
        f"The {thing} agent reads its configuration from {path} on every start.",
        f"Where does the {thing} agent read its configuration from?",
        path,
    )


KINDS = ("number", "person", "error", "decision", "path")


def filler(rng: random.Random, n: int) -> str:
    """A statement about the work, not a question (the demo model would search for those)."""
    words = [rng.choice(FILLER_WORDS) for _ in range(rng.randint(25, 70))]
    return f"Turn {n}: " + " ".join(words).capitalize() + "."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--facts-per-kind", type=int, default=8, help="facts of each kind (default 8)")
    p.add_argument("--compactions", type=int, default=20, help="at least this many (default 20)")
    p.add_argument("--budget", type=int, default=3000, help="CONTEXT_BUDGET_TOKENS (default 3000)")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--max-turns", type=int, default=2000, help="give up after (default 2000)")
    p.add_argument(
        "--show", action="store_true", help="print the latest brief and the demo's wrong answers"
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", ""),
        help="database (default: $DATABASE_URL, else a fresh temporary SQLite file)",
    )
    return p.parse_args(argv)


def configure_django(args: argparse.Namespace) -> str | None:
    """Returns the temporary directory to delete afterwards, if one was made."""
    env = {
        "LLM_PROVIDER": "demo",
        "CHAT_MODEL": "demo",
        "DEMO_WORD_DELAY_MS": "0",
        "CONTEXT_BUDGET_TOKENS": str(args.budget),
    }
    args.database_url, tmp = setup_django(env, args.database_url, prefix="recall-")
    return tmp


async def say(user, conversation_id: int, text: str) -> int:
    """One turn through the real code, run to its end (and its compaction); the reply's seq."""
    claim = await run_turn(user, conversation_id, text)
    return claim.message.seq + 1


async def drive(args, user, conversation) -> dict:
    from asgiref.sync import sync_to_async

    from chat.models import Message
    from chat.window_loading import load_window
    from compaction.models import Compaction
    from providers.demo import SEARCH_LIMIT, quote_hits
    from search.messages import search
    from tools.recall import search_history
    from tools.values import Context
    from turns import engine

    without_background()
    rng = random.Random(args.seed)
    things = rng.sample(NAMES, len(KINDS) * args.facts_per_kind)
    facts = [
        make_fact(kind, things.pop(), rng) for kind in KINDS for _ in range(args.facts_per_kind)
    ]
    rng.shuffle(facts)
    committed = Compaction.objects.filter(conversation=conversation, status="committed")
    started = time.perf_counter()
    turns = 0
    # Facts early, two to four filler turns apart; then filler until enough compactions.
    planted_seq: dict[int, int] = {}
    for i, fact in enumerate(facts):
        for _ in range(rng.randint(2, 4)):
            turns += 1
            await say(user, conversation.pk, filler(rng, turns))
        turns += 1
        planted_seq[i] = (await say(user, conversation.pk, fact.statement)) - 1
    while await committed.acount() < args.compactions and turns < args.max_turns:
        turns += 1
        await say(user, conversation.pk, filler(rng, turns))
    build_seconds = time.perf_counter() - started
    compactions = await committed.acount()

    window = await sync_to_async(load_window)(conversation)
    window_text = str(window.window().as_request())
    latest = await committed.order_by("-pk").afirst()
    brief = latest.summary if latest else ""
    tool = Context(user.pk, conversation.pk)
    results = []
    for i, fact in enumerate(facts):
        in_window = fact.answer in window_text
        in_brief = fact.answer in brief
        found = await sync_to_async(search_history)(
            tool, {"query": fact.question, "limit": SEARCH_LIMIT}
        )
        in_recall = fact.answer in quote_hits(found, fact.question)
        hits = await sync_to_async(search)(
            user, fact.question, conversation_id=conversation.pk, limit=10
        )
        in_top5 = planted_seq[i] in {h.seq for h in hits[:5]}
        in_top10 = planted_seq[i] in {h.seq for h in hits}
        reply_seq = await say(user, conversation.pk, fact.question)
        reply = await Message.objects.aget(conversation=conversation, seq=reply_seq)
        used_tool = any(b.get("type") == "tool_use" for b in reply.content)
        # The reply's last words: the quote it answers with (after a search, the hit).
        final = next((b["text"] for b in reversed(reply.content) if b.get("type") == "text"), "")
        in_answer = fact.answer in final
        results.append(
            (fact, in_window, in_brief, in_top5, in_top10, in_recall, in_answer, used_tool, final)
        )
    await engine.shutdown()
    return {
        "turns": turns,
        "compactions": compactions,
        "build_seconds": build_seconds,
        "first_kept": window.first_kept,
        "brief": brief,
        "results": results,
    }


def report(args, outcome: dict) -> int:
    results = outcome["results"]
    print(
        f"{outcome['turns']} turns, {outcome['compactions']} compactions (budget "
        f"{args.budget:,} tokens), built in {outcome['build_seconds']:.0f} s; the window now "
        f"starts at message #{outcome['first_kept']}; the latest brief is "
        f"{len(outcome['brief']):,} characters."
    )
    print(
        f"{len(results)} planted facts ({args.facts_per_kind} per kind), each asked about "
        "after the compactions.\n"
    )
    columns = ("window", "brief", "top 5", "top 10", "recall", "demo")
    header = f"{'kind':10} {'facts':>5} " + " ".join(f"{c:>7}" for c in columns) + " via tool"
    print(header)
    print("-" * len(header))

    def row(name: str, rows: list) -> list[float]:
        n = len(rows)
        share = [sum(r[k] for r in rows) / n for k in range(1, len(columns) + 1)]
        tools = sum(r[len(columns) + 1] for r in rows)
        print(f"{name:10} {n:5} " + " ".join(f"{s:7.0%}" for s in share) + f" {tools:8}")
        return share

    for kind in KINDS:
        row(kind, [r for r in results if r[0].kind == kind])
    print("-" * len(header))
    top5 = row("all", results)[2]
    missed = [r[0] for r in results if not r[3]]
    for fact in missed:
        print(f"  not in the top 5: {fact.question!r} (answer {fact.answer})")
    if args.show:
        print("  the latest brief:\n    " + outcome["brief"].replace("\n", "\n    "))
        for fact, *_, in_answer, _used, final in results:
            if not in_answer:
                print(f"  demo, asked {fact.question!r}:\n    {' '.join(final.split())[:300]}")
    verdict = "PASS" if top5 >= TOP5_MIN else "FAIL"
    print(f"\n[{verdict}] search_history top-5 share {top5:.0%} (target >= {TOP5_MIN:.0%})")
    return 0 if top5 >= TOP5_MIN else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = configure_django(args)
    try:
        from django.contrib.auth import get_user_model

        from chat.models import Conversation

        user = get_user_model().objects.create_user(
            f"recall-{uuid.uuid4().hex[:8]}", password=uuid.uuid4().hex
        )
        conversation = Conversation.objects.create(owner=user, model="demo")
        outcome = asyncio.run(drive(args, user, conversation))
        return report(args, outcome)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
