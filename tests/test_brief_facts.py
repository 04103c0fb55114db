"""The rule-based brief keeps the facts of early turns: found by rules in each folded message,
carried from brief to brief, without repeats, within a stated bound."""

from __future__ import annotations

import re

from compaction.brief import FACTS_HEADING, MAX_FACTS, rule_based_summary
from compaction.entries import Entry
from compaction.facts import Fact, facts_of, merged, parse_lines, within

PLANTED = {
    "name": "My name is Ada Lovelace and my project lives in /srv/engine.",
    "decision": "We decided the audit log moves to PostgreSQL 16.2, not MySQL.",
    "path": "The agent reads its configuration from /etc/heron/agent-7.toml on start.",
    "number": "The staging server listens on port 41234 now.",
    "question": "Can the export keep the pinned messages?",
}
ANSWERS = ["Ada Lovelace", "/srv/engine", "PostgreSQL 16.2", "/etc/heron/agent-7.toml", "41234"]


def text(value: str) -> list[dict]:
    return [{"type": "text", "text": value}]


def turn(seq: int, said: str) -> list[Entry]:
    reply = f"I'm the offline demo model. You said: “{said}”"
    return [Entry(seq, "user", text(said)), Entry(seq + 1, "assistant", text(reply))]


def filler(n: int) -> str:
    """A long message with a fact of its own in every turn, so the facts compete for room."""
    return (
        f"Turn {n}. We are planning the launch of the reading lamp and marketing needs the copy, "
        f"the photos and the price sheet. The sheet for region {n} lists {100 + n} shops. "
        f"Is the copy for region {n} ready?"
    )


def compact_many(times: int, max_chars: int, per_span: int = 4) -> list[str]:
    """The briefs of `times` compactions, each folding `per_span` turns, the planted facts in
    the very first turns."""
    seq, briefs, previous = 1, [], None
    opening = list(PLANTED.values())
    for _ in range(times):
        span = []
        for _ in range(per_span):
            said = opening.pop(0) if opening else filler(seq)
            span += turn(seq, said)
            seq += 2
        previous = rule_based_summary(span, previous, max_chars=max_chars)
        briefs.append(previous)
    return briefs


def facts_section(brief: str) -> str:
    return brief.split(f"## {FACTS_HEADING}\n")[1].split("\n\n## ")[0]


def test_the_rules_find_each_kind_of_fact_in_the_persons_messages_only():
    entries = [
        *turn(1, " ".join(PLANTED.values())),
        Entry(3, "assistant", text("We decided nothing; my name is Demo Model.")),
        *turn(4, "Turn 3. Fine. Why not?"),  # too short to state anything
    ]

    found = facts_of(entries)

    assert [(f.kind, f.seq, f.text) for f in found] == [
        (kind, 1, sentence) for kind, sentence in PLANTED.items()
    ]


def test_a_fact_stated_again_replaces_the_earlier_statement():
    found = merged(
        [
            Fact("name", 1, "My name is Ada."),
            Fact("question", 3, "What is the port?"),
            Fact("name", 5, "Call me Grace Hopper, please."),
            Fact("question", 7, "What is the   PORT?"),
        ]
    )

    assert [(f.seq, f.text) for f in found] == [
        (5, "Call me Grace Hopper, please."),
        (7, "What is the   PORT?"),
    ]


def test_facts_read_back_from_a_brief_are_the_facts_written():
    written = facts_of(turn(1, " ".join(PLANTED.values())))

    assert parse_lines("\n".join(f.line() for f in written)) == written


def test_what_is_left_out_is_the_least_important_kind_and_the_latest_first():
    facts = [
        Fact("question", 1, "Is the first one kept?"),
        Fact("number", 2, "The port is 8443 today."),
        Fact("name", 3, "Ada Lovelace owns it."),
        Fact("number", 4, "The port is 9443 tomorrow."),
    ]
    budget = sum(len(f.line()) + 1 for f in facts[1:3])

    kept, left_out = within(facts, budget, most=10)

    assert [f.seq for f in kept] == [2, 3]
    assert [f.seq for f in left_out] == [1, 4]
    assert [f.seq for f in within(facts, 10_000, most=1)[0]] == [3]


def test_facts_planted_in_the_first_turns_survive_twenty_compactions_within_the_bound():
    # The size a rule-based brief gets from a 3,000-token budget (compaction.summariser).
    briefs = compact_many(20, max_chars=1_350)

    last = briefs[-1]
    for answer in ANSWERS:
        assert answer in facts_section(last), (answer, last)
    assert "(#1) My name is Ada Lovelace" in last
    assert all(len(brief) <= 1_350 for brief in briefs)


def test_the_brief_stays_bounded_and_says_what_it_left_out():
    briefs = compact_many(40, max_chars=3_000, per_span=6)

    sizes = [len(brief) for brief in briefs]
    assert max(sizes) <= 3_000
    facts = facts_section(briefs[-1]).splitlines()
    assert len([line for line in facts if line.startswith("- (#")]) <= MAX_FACTS
    left_out = [int(n) for n in re.findall(r"\((\d+) facts left out", briefs[-1])]
    earlier = [int(n) for n in re.findall(r"\((\d+) facts left out", briefs[-10])]
    assert left_out and earlier and left_out[0] > earlier[0]  # counted across compactions
    # One earlier brief, not a chain of them nested ever deeper.
    assert briefs[-1].count("Earlier brief") == 1


def test_the_earlier_brief_keeps_the_last_spans_sections_not_a_stub_of_notes():
    briefs = compact_many(6, max_chars=3_000)

    earlier = briefs[-1].split("## Earlier brief\n")[1].split("\n\n## ")[0]
    assert "### All user messages" in earlier or "### Primary request" in earlier
    assert "[Rule-based summary" not in earlier
