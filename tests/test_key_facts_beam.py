"""The fact check on real conversations: 103 hand-checked (span, summary) cases from the BEAM
chats (tests/data/beam_fact_cases.json, CC BY-SA 4.0, its source and licence in the file): the
key facts each summary keeps and loses are exactly the ones read by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction import key_facts
from compaction.entries import Entry

DATA = json.loads((Path(__file__).parent / "data" / "beam_fact_cases.json").read_text("utf-8"))
CASES = DATA["cases"]


def test_the_set_is_large_and_says_where_it_comes_from():
    assert len(CASES) >= 100
    assert "CC BY-SA 4.0" in DATA["licence"] and "BEAM" in DATA["source"]
    # Both outcomes are exercised: facts kept in another form, facts lost.
    assert sum(len(c["kept"]) for c in CASES) > 100 and sum(len(c["lost"]) for c in CASES) > 100


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"case{c['case']}-chat{c['chat']}")
def test_the_fact_check_keeps_and_loses_exactly_what_was_read_by_hand(case):
    span = [
        Entry(m["id"], m["role"], [{"type": "text", "text": m["text"]}]) for m in case["messages"]
    ]
    found = key_facts.of_span(span, "")
    lost = key_facts.lost(found, case["summary"])
    assert [f.token for f in found if f not in lost] == case["kept"]
    assert [f.token for f in lost] == case["lost"]
    # The tally a boundary records says the same.
    tally = key_facts.tally(span, "", case["summary"])
    assert (tally.total, len(tally.lost)) == (len(case["kept"]) + len(case["lost"]), len(lost))
