"""Key facts: every number (with its words), identifier, error code, path, URL, name, quoted
string and date of what a summary replaces, found by rules in both roles; which a summary still
states; and the rule-based brief keeping them, within its bound, from compaction to compaction."""

from __future__ import annotations

import dataclasses
import re
import time

import pytest

from compaction import key_facts
from compaction.brief import FACTS_HEADING, rule_based_summary
from compaction.brief_facts import MAX_FACTS
from compaction.entries import Entry


def said(seq: int, role: str, value: str) -> Entry:
    return Entry(seq, role, [{"type": "text", "text": value}])


def found(value: str) -> list[tuple[str, str]]:
    return [(f.kind, f.key) for f in key_facts.of_text(value, 1)]


@pytest.mark.parametrize(
    ("sentence", "kind", "key"),
    [
        ("The staging server listens on port 41,234 now.", "number", "41234"),
        ("The budget for the pilot is $5,000 this year.", "number", "5000 $"),
        ("Please call parse_config before the server starts.", "identifier", "parse config"),
        ("The hook is named `after commit` in the docs.", "identifier", "after commit"),
        ("It calls getUserName on every request.", "identifier", "getusername"),
        ("The importer fails with E4471 on empty rows.", "code", "e 4471"),
        ("The client raised CONNECTION_RESET twice.", "code", "connection reset"),
        ("Its settings are in /etc/heron/agent-7.toml now.", "path", "etc heron agent 7 toml"),
        ("The guide is at https://example.com/a.html now.", "url", "https example com a html"),
        ("The checklist belongs to Amara Okafor from now on.", "name", "amara okafor"),
        ('The banner must say "closed for stocktaking" today.', "quote", "closed for stocktaking"),
        ("The launch moved to 14 March 2026 after the review.", "date", "2026-03-14"),
        ("The launch moved to 2026-03-14 after the review.", "date", "2026-03-14"),
        ("The launch moved to March 14th, 2026 after the review.", "date", "2026-03-14"),
        ("We meet again on the fourteenth of March, as agreed.", "date", "03-14"),
    ],
)  # fmt: skip
def test_each_kind_of_key_fact_is_found_with_its_key_normalised(sentence, kind, key):
    assert (kind, key) in found(sentence)


def test_a_fact_keeps_the_words_that_say_what_it_is():
    (fact,) = key_facts.of_text(
        "For the record, the heron staging server listens on port 41234.", 3
    )
    assert (fact.kind, fact.seq, fact.key) == ("number", 3, "41234")
    assert fact.text.endswith("staging server listens on port 41234")
    assert len(fact.text) <= 48


def test_one_stretch_of_text_is_one_fact_and_plain_words_are_none():
    # The path inside the URL, the year inside the date, the number in the code: one fact each.
    assert found("See https://example.com/a/b.html on 2026-03-14 for E4471.") == [
        ("url", "https example com a b html"),
        ("date", "2026-03-14"),
        ("code", "e 4471"),
    ]
    assert found("We talked about the lamp and the copy for the shops, and it's fine.") == []
    # A brief's own message references are not facts of the conversation.
    assert found("- (#123) the plan") == []


def test_both_roles_are_read_and_the_summary_before_counts_too():
    entries = [
        said(4, "user", "The staging server listens on port 41234."),
        said(5, "assistant", "The import fails with E4471 when a row is empty."),
    ]
    facts = key_facts.of_span(entries, "## Facts kept\n- (#1) My name is Ada Lovelace")
    assert [(f.seq, f.key) for f in facts] == [(1, "ada lovelace"), (4, "41234"), (5, "e 4471")]


def test_a_pinned_messages_facts_are_not_at_stake():
    # A pinned message rides verbatim in every window: a summary need not restate it.
    pinned = said(2, "user", "The launch code is END-OF-PINNED-9021 on port 41234.")
    pinned = dataclasses.replace(pinned, pinned=True)
    entries = [pinned, said(3, "assistant", "The import fails with E4471.")]
    assert [f.key for f in key_facts.of_span(entries)] == ["e 4471"]


def test_the_count_is_bounded_and_every_kind_keeps_some():
    lines = [f"Port {40000 + i} is for service number {i}." for i in range(80)]
    lines += [
        "It fails with E4471.",
        "It is owned by Ada Lovelace.",
        'It says "hello world there".',
    ]
    facts = key_facts.of_span([said(1, "user", "\n".join(lines))], None)
    assert len(facts) == key_facts.MOST
    assert {"number", "code", "name", "quote"} <= {f.kind for f in facts}


def test_a_summary_keeps_a_fact_whose_key_it_states_in_any_form():
    entries = [
        said(1, "user", "The deploy is on 14 March 2026 and the port is 41,234."),
        said(2, "assistant", "I'll call Parse_Config from /srv/app/main.py after that."),
        said(3, "user", "We review on the fourteenth of March; the error was E4471."),
    ]
    summary = "Deploy 2026-03-14; port 41234; parse_config in /srv/app/main.py. E44710 is other."
    tally = key_facts.tally(entries, None, summary)
    assert (tally.total, tally.kept) == (5, 4)  # the fourteenth of March is 14 March 2026
    # The error code is lost: E44710 is another code, not it.
    assert tally.lost == ("the error was E4471",)
    # A number inside a longer one is not it either.
    (port,) = [f for f in key_facts.of_span(entries, None) if f.key == "41234"]
    assert not key_facts.states("port 412345", port) and key_facts.states("port 41234.", port)


# --- the rule-based brief ------------------------------------------------------------------------

KINDS_PLANTED = [
    "The {thing} server listens on port {port} now.",
    "The {thing} import fails with E{code} on empty rows.",
    "Its settings live in /etc/{thing}/agent-{n}.toml now.",
    "The {thing} checklist is owned by {person} from now.",
    "The {thing} launch moved to {day} March 2026.",
]
PEOPLE = ["Amara Okafor", "Bjorn Lindqvist", "Chiara Moretti", "Dmitri Volkov", "Esther Adeyemi"]
THINGS = "heron otter lynx marmot ibis puffin walrus badger civet dingo".split()


def planted(n: int) -> str:
    thing = THINGS[n % len(THINGS)] + ("" if n < len(THINGS) else "two")
    return KINDS_PLANTED[n % 5].format(
        thing=thing, port=41000 + n, code=4400 + n, n=n, person=PEOPLE[n % 5], day=n % 27 + 1
    )


def filler(seq: int) -> str:
    return "We went over the lamp copy, the photos and the shop list again; nothing new there."


def test_the_brief_keeps_every_fact_across_twenty_compactions_within_its_bound():
    # One fact in each span, stated by the person or by the reply in turn; each brief must
    # still state every fact the brief before it stated, and the last states them all.
    brief, seq, held = None, 1, []
    for n in range(20):
        fact = planted(n)
        span = [
            said(seq, "user", fact if n % 2 == 0 else filler(seq)),
            said(seq + 1, "assistant", fact if n % 2 else filler(seq)),
            said(seq + 2, "user", filler(seq)),
            said(seq + 3, "assistant", filler(seq)),
        ]
        seq += 4
        facts_before = key_facts.of_text(brief or "", 0)
        brief = rule_based_summary(span, brief, max_chars=3_000)
        assert len(brief) <= 3_000
        assert not key_facts.lost(facts_before, brief), brief  # nothing lost from the last one
        held.append(brief)
    for n in range(20):
        assert not key_facts.lost(key_facts.of_text(planted(n), 1), held[-1]), (n, held[-1])


def test_the_facts_section_stays_within_its_bound_when_there_are_too_many():
    brief, seq = None, 1
    for n in range(20):
        text = " ".join(planted(n * 3 + i) for i in range(3))
        brief = rule_based_summary([said(seq, "assistant", text)], brief, max_chars=2_000)
        seq += 1
    section = brief.split(f"## {FACTS_HEADING}\n")[1].split("\n\n## ")[0]
    assert len(re.findall(r"^- \(#\d+\)", section, re.MULTILINE)) <= MAX_FACTS
    assert len(brief) <= 2_000
    assert re.search(r"\(\d+ more facts (left out for length|not listed)", section)


def test_a_measure_of_the_work_is_a_fact_and_one_of_the_window_is_not():
    reply = "Keep the post under 2,000 words; my window holds 9 messages (about 1,096 tokens)."
    found = key_facts.of_span([said(2, "assistant", reply)], "")

    assert [f.token for f in found] == ["2,000"]


def test_a_persons_fact_carried_by_the_brief_still_counts():
    # The brief's facts are the person's: "280 characters" is theirs, not the window's size.
    brief = "## Facts kept\n- (#4) tweet limit is 280 characters\n- (in #5) 9 messages so far"

    found = key_facts.of_span([], brief)

    assert [(f.seq, f.token) for f in found] == [(4, "280")]


def test_the_scan_stays_linear_on_a_pasted_blob():
    # One pasted log or base64 line must not freeze the process: a text four times as long
    # takes about four times as long (the token scan grew quadratically with a run's length).
    def cost(n: int) -> float:
        blob = " ".join(["1.2.1.2" * (n // 8), "QUJD" * (n // 4)])
        start = time.process_time()
        for _ in range(3):
            key_facts.of_text(blob, 1)
        return time.process_time() - start

    cost(2_000)  # warm the regular expressions
    small, large = cost(10_000), cost(40_000)

    assert large < 8 * max(small, 1e-3)
