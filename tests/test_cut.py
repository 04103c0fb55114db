"""Where the kept tail starts: only at a typed user message, never splitting a tool exchange."""

from __future__ import annotations

from compaction.cut import choose_cut
from compaction.entries import Entry
from tests.transcripts import tool_result_ids, tool_use_ids


def user(seq: int, text: str = "hi", tokens: int = 10) -> Entry:
    return Entry(seq, "user", [{"type": "text", "text": text}], tokens)


def assistant(seq: int, text: str = "hello", tokens: int = 10) -> Entry:
    return Entry(seq, "assistant", [{"type": "text", "text": text}], tokens)


def tool_call(seq: int, tool_id: str, tokens: int = 10) -> Entry:
    block = {"type": "tool_use", "id": tool_id, "name": "search", "input": {"q": "x"}}
    return Entry(seq, "assistant", [block], tokens)


def tool_result(seq: int, tool_id: str, tokens: int = 10) -> Entry:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": "found"}
    return Entry(seq, "user", [block], tokens)


def assert_no_split(entries: list[Entry], cut: int) -> None:
    before = [e for e in entries if e.seq < cut]
    after = [e for e in entries if e.seq >= cut]
    uses_before = set().union(*(tool_use_ids(e) for e in before))
    results_after = set().union(*(tool_result_ids(e) for e in after))
    uses_after = set().union(*(tool_use_ids(e) for e in after))
    results_before = set().union(*(tool_result_ids(e) for e in before))
    assert not uses_before & results_after
    assert not uses_after & results_before


def test_it_cannot_cut_a_one_turn_conversation():
    assert choose_cut([user(1), assistant(2)], keep_tokens=0) is None


def test_it_cannot_cut_an_empty_window():
    assert choose_cut([], keep_tokens=100) is None


def test_it_cannot_cut_one_turn_with_tool_calls():
    entries = [user(1), tool_call(2, "a"), tool_result(3, "a"), assistant(4)]
    assert choose_cut(entries, keep_tokens=0) is None


def test_it_never_cuts_on_a_tool_result():
    # The only tail that fits keep_tokens=25 starts at the tool result (seq 5): not allowed.
    entries = [
        user(1),
        assistant(2),
        user(3, tokens=100),
        tool_call(4, "a", tokens=100),
        tool_result(5, "a"),
        assistant(6),
    ]
    cut = choose_cut(entries, keep_tokens=25)
    assert cut == 3
    assert_no_split(entries, cut)


def test_it_keeps_the_last_user_turn_even_when_it_alone_exceeds_keep_tokens():
    entries = [user(1), assistant(2), user(3, tokens=5_000), assistant(4, tokens=5_000)]
    assert choose_cut(entries, keep_tokens=100) == 3


def test_it_picks_the_earliest_cut_that_fits():
    entries = [
        user(1, tokens=50),
        assistant(2, tokens=50),
        user(3, tokens=20),
        assistant(4, tokens=20),
        user(5, tokens=20),
        assistant(6, tokens=20),
        user(7, tokens=10),
        assistant(8, tokens=10),
    ]
    # Tails: from 3 -> 100, from 5 -> 60, from 7 -> 20.
    assert choose_cut(entries, keep_tokens=60) == 5
    assert choose_cut(entries, keep_tokens=100) == 3
    assert choose_cut(entries, keep_tokens=1_000) == 3  # never the first entry
    assert choose_cut(entries, keep_tokens=19) == 7


def test_it_does_not_split_tool_exchanges_across_the_cut():
    entries = [
        user(1),
        tool_call(2, "a"),
        tool_result(3, "a"),
        tool_call(4, "b"),
        tool_result(5, "b"),
        assistant(6),
        user(7),
        tool_call(8, "c"),
        tool_result(9, "c"),
        assistant(10),
    ]
    for keep in range(0, 120, 5):
        cut = choose_cut(entries, keep_tokens=keep)
        assert cut == 7
        assert_no_split(entries, cut)


def test_it_orders_entries_by_seq():
    entries = [assistant(4), user(3, tokens=1), assistant(2), user(1)]
    assert choose_cut(entries, keep_tokens=11) == 3


def test_it_does_not_start_the_tail_at_a_later_version():
    # 5 is message 3 edited (both follow 2): a tail from 5 would leave 3 before the boundary,
    # out of reach of 5's switcher.
    entries = [user(1), assistant(2), user(5), assistant(6), user(7), assistant(8)]
    assert choose_cut(entries, keep_tokens=40) == 5
    assert choose_cut(entries, keep_tokens=40, later_versions={5}) == 7
    # With no later cut point it still cuts: making room comes first.
    assert choose_cut(entries[:4], keep_tokens=20, later_versions={5}) == 5
