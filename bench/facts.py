"""Facts kept across compactions: the share of planted facts the window still holds after 20
compactions, with the summary's fact repair on and off, and with the rule-based brief.

Run by hand (`.venv/bin/python bench/facts.py`); not a test.

One conversation is folded `--compactions` times, each span two turns (four messages), each span
planting two facts of the kinds compaction/key_facts.py counts (a port, an error code, a path,
a person, a date, an identifier, a URL, a quoted string): one in the person's message (its
second sentence), one in the reply (its third). The rest is filler with no key token. After the
last compaction the window is the latest summary and a verbatim tail of filler, so the share
of planted facts it holds is the share the latest summary states (`key_facts.states`).

Three summarisers fold the same spans, in one run:

  model, repair on   compaction/summariser.summarise through the real Anthropic SDK against
                     support/fake_anthropic.py, with SUMMARY_REVISES_FACTS's revision
  model, repair off  the same, `revise=False`
  rules              compaction/brief.rule_based_summary (its facts section), bounded at
                     `--rules-chars` characters

The fake server's summariser writes the gist, as summaries do: for each message the first
sentence (a person's message: the first two), then the previous summary's lines, and keeps only
its first `--lines` lines, so old lines fall off the end and a reply's details never get in.
Asked to revise with missing facts (the request's <missing_facts>), it returns its summary with
the first `--restores` of the named facts added under "## Facts" (a model restores some of what
it is asked to, not all). A real model drops
less and keeps less of what it is asked to restore; what this measures is what the repair loop
can do against a summariser that forgets in these two common ways.

Exits 1 if repair on keeps less than twice the share repair off keeps.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout, not bench/

from bench.harness.inprocess import setup_django  # noqa: E402
from support.fake_anthropic import FakeAnthropic  # noqa: E402
from support.scripts import reply  # noqa: E402

THINGS = (
    "heron otter lynx marmot ibis puffin walrus badger civet dingo gecko jackal kestrel lemur "
    "mantis narwhal ocelot pangolin quail raven sable tapir urchin vole wombat"
).split()
PEOPLE = (
    "Amara Okafor|Bjorn Lindqvist|Chiara Moretti|Dmitri Volkov|Esther Adeyemi|Farid Haddad|"
    "Greta Sorensen|Hiroshi Tanaka|Ines Carvalho|Jonas Weber"
).split("|")
MONTHS = "January February March April May June July August September October".split()
# One sentence per kind, about a named thing: what is planted.
PLANTS = (
    "The {thing} staging server listens on port {port}.",
    "The {thing} importer fails with E{code} on empty rows.",
    "The {thing} settings live in /etc/{thing}/agent-{n}.toml from now on.",
    "The {thing} release checklist is owned by {person}.",
    "The {thing} launch moved to {day} {month} 2026.",
    "The {thing} job calls load_{thing}_rows before anything else.",
    "The {thing} runbook is at https://wiki.example.com/{thing}/runbook-{n}.",
    'The {thing} banner must read "{thing} closed for stocktaking".',
)
FILLER = (
    "We went over the copy, the photos and the shop list again",
    "nothing there changes what we agreed",
    "the team is happy with how it reads",
    "marketing wants one more pass on the wording",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--compactions", type=int, default=20)
    p.add_argument("--lines", type=int, default=16, help="the fake summariser's length (16)")
    p.add_argument("--restores", type=int, default=8, help="facts a revision restores at most (8)")
    p.add_argument("--rules-chars", type=int, default=3_000, help="the rule brief's bound")
    return p.parse_args(argv)


def plant(n: int) -> str:
    thing = THINGS[n % len(THINGS)]
    return PLANTS[n % len(PLANTS)].format(
        thing=thing,
        port=41_000 + n,
        code=4_400 + n,
        n=n,
        person=PEOPLE[n % len(PEOPLE)],
        day=n % 27 + 1,
        month=MONTHS[n % len(MONTHS)],
    )


def spans(count: int) -> tuple[list[list], list[str]]:
    """The spans each compaction folds, and the facts planted in them (two a span)."""
    from compaction.entries import Entry

    def said(seq: int, role: str, value: str) -> Entry:
        return Entry(seq, role, [{"type": "text", "text": value}])

    folded, planted, seq = [], [], 1
    for k in range(count):
        a, b = plant(2 * k), plant(2 * k + 1)
        planted += [a, b]
        thing = THINGS[k % len(THINGS)]
        folded.append(
            [
                said(seq, "user", f"Let us go over the {thing} work again. {a} {FILLER[0]}."),
                said(seq + 1, "assistant", f"Understood. {FILLER[1].capitalize()}. {b}"),
                said(seq + 2, "user", f"{FILLER[2].capitalize()}. {FILLER[3].capitalize()}."),
                said(seq + 3, "assistant", f"{FILLER[3].capitalize()}. {FILLER[1]}."),
            ]
        )
        seq += 4
    return folded, planted


# --- the fake server's summariser ----------------------------------------------------------------

_MESSAGE_RE = re.compile(
    r"^(User|Assistant) \(#\d+\):\n(.*?)(?=\n\n(?:User|Assistant) \(#|\Z)", re.M | re.S
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")


def _between(text: str, tag: str) -> str:
    found = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.S)
    return found.group(1) if found else ""


class GistSummariser:
    """A planner (support/scripts.py): summaries that keep the gist, and revisions that add
    every fact they are told is missing."""

    def __init__(self, lines: int, restores: int) -> None:
        self.lines, self.restores = lines, restores
        self.summaries = self.revisions = 0

    def plan(self, body: dict):
        text = body["messages"][-1]["content"][-1]["text"]
        if "<missing_facts>" in text:
            self.revisions += 1
            missing = _between(text, "missing_facts").splitlines()[: self.restores]
            revised = f"{_between(text, 'summary')}\n\n## Facts\n" + "\n".join(missing)
            return reply([f"<summary>\n{revised}\n</summary>"])
        self.summaries += 1
        lines = ["## Primary request and intent"]
        for role, said in _MESSAGE_RE.findall(_between(text, "transcript")):
            sentences = _SENTENCE_RE.split(said.strip())
            lines.append("- " + " ".join(sentences[: 2 if role == "User" else 1]))
        previous = _between(text, "previous_summary").splitlines()
        lines += [line for line in previous if line.strip() and not line.startswith("## Pri")]
        brief = "\n".join(lines[: self.lines])
        return reply([f"<analysis>gist</analysis><summary>\n{brief}\n</summary>"])


# --- the runs ------------------------------------------------------------------------------------


async def fold_by_model(client, folded: list[list], revise: bool) -> str:
    from compaction.summariser import SummaryAsk, summarise

    summary = None
    for span in folded:
        result = await summarise(client, SummaryAsk("claude-bench", span, summary, revise=revise))
        assert result.summariser == "model", result.error
        summary = result.summary
    return summary or ""


def fold_by_rules(folded: list[list], max_chars: int) -> str:
    from compaction.brief import rule_based_summary

    summary = None
    for span in folded:
        summary = rule_based_summary(span, summary, max_chars=max_chars)
    return summary or ""


def held(summary: str, planted: list[str]) -> float:
    """The share of the planted facts whose key token `summary` states."""
    from compaction import key_facts

    kept = [not key_facts.lost(key_facts.of_text(fact, 1), summary) for fact in planted]
    return sum(kept) / len(planted)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    planner = GistSummariser(args.lines, args.restores)
    fake = FakeAnthropic(planner, record=False).start()
    _, tmp = setup_django({"LLM_MAX_RETRIES": "0"}, prefix="facts-bench-")
    try:
        from providers.anthropic import AnthropicClient

        client = AnthropicClient(api_key="bench", base_url=fake.url, max_retries=0)
        folded, planted = spans(args.compactions)
        shares = {}
        for name, revise in (("model, repair on", True), ("model, repair off", False)):
            before = planner.revisions
            shares[name] = held(asyncio.run(fold_by_model(client, folded, revise)), planted)
            print(
                f"{name:<18} {shares[name]:6.0%} of {len(planted)} planted facts held after "
                f"{args.compactions} compactions ({planner.revisions - before} revisions)"
            )
        rules = fold_by_rules(folded, args.rules_chars)
        shares["rules"] = held(rules, planted)
        print(
            f"{'rules':<18} {shares['rules']:6.0%} of {len(planted)} (a brief of at most "
            f"{args.rules_chars:,} characters; {len(rules):,} used)"
        )
    finally:
        fake.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    on, off = shares["model, repair on"], shares["model, repair off"]
    print(f"repair on / off: {on / off:.1f}x" if off else "repair off keeps none")
    return 0 if on >= 2 * off else 1


if __name__ == "__main__":
    sys.exit(main())
