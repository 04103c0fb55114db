"""The rule-based brief keeps the facts of early turns: found by rules in each folded message,
each the clause around what matched (not the whole sentence), carried from brief to brief,
without repeats, within a stated bound."""

from __future__ import annotations

import re

from compaction.brief import FACTS_HEADING, rule_based_summary
from compaction.brief_facts import MAX_FACTS
from compaction.entries import Entry
from compaction.facts import PER_FACT, Fact, facts_of, merged, parse_lines, within

PLANTED = {
    "name": "My name is Ada Lovelace and my project lives in /srv/engine.",
    "decision": "We decided the audit log moves to PostgreSQL 16.2, not MySQL.",
    "path": "The agent reads its configuration from /etc/heron/agent-7.toml on start.",
    "number": "The staging server listens on port 41234 now.",
    "question": "Can the export keep the pinned messages?",
}
ANSWERS = ["Ada Lovelace", "/srv/engine", "PostgreSQL 16.2", "/etc/heron/agent-7.toml", "41234"]
# Each planted fact as the brief keeps it: what matched and the words next to it that say what it
# is, without articles; the first sentence states two facts.
KEPT = [
    ("name", "My name is Ada Lovelace"),
    ("path", "my project lives in /srv/engine"),
    ("decision", "decided audit log moves to PostgreSQL 16.2"),
    ("path", "configuration from /etc/heron/agent-7.toml"),
    ("number", "staging server listens on port 41234"),
]
# The planted question asks: it states nothing, so it is no fact (the brief keeps it with its
# message, not among its facts).


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
        *turn(6, "Turn 101: the lamp plan moves on."),  # a label, not a number worth keeping
    ]

    found = facts_of(entries)

    assert [(f.kind, f.seq, f.text) for f in found] == [(kind, 1, t) for kind, t in KEPT]


def test_a_fact_is_the_thing_with_the_words_that_say_what_it_is_not_its_sentence():
    said = (
        "For the record, the heron staging server listens on port 41234 now. "
        "Note that Amara Okafor owns the heron release checklist from this sprint on. "
        "The heron nightly job crashed with error E1234: certificate chain too long. "
        "Could you tell me again which port the lynx staging server listens on?"
    )

    found = facts_of(turn(9, said))

    assert [f.line() for f in found] == [
        "- (#9) heron staging server listens on port 41234",
        "- (#9) Amara Okafor owns heron release checklist",
        "- (#9) heron nightly job crashed with error E1234",
    ]
    assert all(len(f.text) <= PER_FACT for f in found)


def test_two_facts_of_one_sentence_joined_by_and_its_are_two_clauses():
    said = "The invoice service listens on port 8443 and its config is /etc/invoice/app.yaml."

    found = facts_of(turn(3, said))

    assert [f.line() for f in found] == [
        "- (#3) invoice service listens on port 8443",
        "- (#3) config is /etc/invoice/app.yaml",
    ]


def test_a_fact_stated_again_replaces_the_earlier_statement():
    found = merged(
        [
            Fact("name", 1, "My name is Ada."),
            Fact("number", 3, "the port is 8443"),
            Fact("name", 5, "Call me Grace Hopper, please."),
            Fact("number", 7, "the   PORT is 8443"),
        ]
    )

    assert [(f.seq, f.text) for f in found] == [
        (5, "Call me Grace Hopper, please."),
        (7, "the   PORT is 8443"),
    ]


def test_facts_read_back_from_a_brief_are_the_facts_written():
    written = facts_of(turn(1, " ".join(PLANTED.values())))

    assert parse_lines("\n".join(f.line() for f in written)) == written


def test_the_kinds_take_turns_and_what_is_left_out_is_the_latest_of_each():
    facts = [
        Fact("name", 1, "Ada Lovelace owns it"),
        Fact("name", 2, "Grace Hopper reviews it"),
        Fact("number", 3, "port is 8443 today"),
        Fact("name", 4, "Alan Turing tests it"),
        Fact("number", 5, "port is 9443 tomorrow"),
        Fact("date", 6, "first one kept on 2026-03-14"),
    ]
    # Room for three lines: the first name, the first number, the first date; not the
    # second and third names, though names are the most important kind.
    budget = sum(len(facts[i].line()) + 1 for i in (0, 2, 5))

    kept, left_out = within(facts, budget, most=10)

    assert [f.seq for f in kept] == [1, 3, 6]
    assert [f.seq for f in left_out] == [2, 4, 5]
    assert [f.seq for f in within(facts, 10_000, most=4)[0]] == [1, 2, 3, 6]
    assert [f.seq for f in within(facts, 10_000, most=1)[0]] == [1]


def test_facts_planted_in_the_first_turns_survive_twenty_compactions_within_the_bound():
    # The size a rule-based brief gets from a 3,000-token budget (compaction.summariser).
    briefs = compact_many(20, max_chars=1_350)

    last = briefs[-1]
    for answer in ANSWERS:
        assert answer in facts_section(last), (answer, last)
    assert "\n- (#1) My name is Ada Lovelace\n" in last
    assert all(len(brief) <= 1_350 for brief in briefs)


def test_at_a_tight_bound_most_facts_of_every_kind_outlive_thirty_compactions():
    # Twenty facts in the first turns, four of each kind much as bench/recall.py plants them,
    # then long messages each with facts of their own; a brief of 1,350 characters, as a
    # 3,000-token budget gives. Kept as whole sentences, a fifth of them outlived this.
    planted = []  # (what the person said, what the brief must still hold), five kinds in turn
    for i, thing in enumerate(["heron", "otter", "lynx", "marmot"]):
        path, port, version = f"/etc/{thing}/agent-{i}.toml", f"port 4100{i}", f"Postgres {i}.2"
        planted += [
            (f"Note that {PEOPLE[i]} owns the {thing} release checklist from now.", PEOPLE[i]),
            (f"We decided the {thing} audit log moves to {version}, not MySQL.", version),
            (f"The {thing} agent reads its configuration from {path} on start.", path),
            (f"For the record, the {thing} staging server listens on {port} now.", port),
            (f"Why does the {thing} nightly job crash with a certificate error?", thing),
        ]
    said = [statement for statement, _ in planted]
    seq, brief = 1, None
    for _ in range(30):
        span = []
        for _ in range(4):
            span += turn(seq, said.pop(0) if said else filler(seq))
            seq += 2
        brief = rule_based_summary(span, brief, max_chars=1_350)

    held = [i % 5 for i, (_, answer) in enumerate(planted) if answer in facts_section(brief)]
    assert len(held) >= len(planted) // 2, brief
    assert set(held) == {0, 1, 2, 3, 4}, brief  # every kind, not only the names
    assert len(brief) <= 1_350


PEOPLE = ["Amara Okafor", "Bjorn Lindqvist", "Chiara Moretti", "Dmitri Volkov"]


def test_the_brief_stays_bounded_and_says_what_it_left_out():
    briefs = compact_many(40, max_chars=3_000, per_span=6)

    sizes = [len(brief) for brief in briefs]
    assert max(sizes) <= 3_000
    facts = facts_section(briefs[-1]).splitlines()
    assert len([line for line in facts if line.startswith("- (#")]) <= MAX_FACTS
    # What this brief left out, named by kind and message: not a count carried from the briefs
    # before (they said what they left out on their own boundaries).
    note = re.search(r"^- \((\d+) more facts (left out for length|not listed)[^\n]*\)$", facts[-1])
    assert note, facts[-1]
    assert re.search(r"#\d+", facts[-1])
    # One earlier brief, not a chain of them nested ever deeper.
    assert briefs[-1].count("Earlier brief") == 1


def test_the_earlier_brief_keeps_the_last_spans_sections_not_a_stub_of_notes():
    briefs = compact_many(6, max_chars=3_000)

    earlier = briefs[-1].split("## Earlier brief\n")[1].split("\n\n## ")[0]
    assert "### All user messages" in earlier or "### Primary request" in earlier
    assert "[Rule-based summary" not in earlier


def test_a_brief_the_model_wrote_before_keeps_room_beside_many_facts():
    # A span folded in parts falls back to rules after part 1: the model's brief of part 1 is the
    # only account of what it folded, and must not be crowded out by the facts the rules find.
    model_brief = "## Current work\nThe MODEL-PART-ONE account: the migration of the ledger."
    entries = [e for n in range(40) for e in turn(1 + 2 * n, f"Why is port {40000 + n} closed?")]
    summary = rule_based_summary(entries, model_brief, max_chars=900)
    assert len(summary) <= 900
    assert "MODEL-PART-ONE" in summary
    assert re.search(r"port 400\d\d", summary)  # the facts still have most of the room
    # A rules brief before is carried through its facts instead (its note is not a model's).
    rules_before = rule_based_summary(entries[:4], None, max_chars=900)
    assert "## Earlier brief" not in rule_based_summary(entries[4:], rules_before, max_chars=600)
