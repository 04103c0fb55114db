"""A span too large for one summary request is folded in parts that each fit the summariser's
window, the brief carried from part to part; a message too large for a part is given by its head
and tail, with a note naming it for read_messages."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compaction.brief import RULES_NOTE
from compaction.chunks import (
    LEFT_OUT,
    entry_tokens,
    fitted_brief,
    parts,
    reply_tokens,
    room,
    shortened,
    summary_window,
)
from compaction.entries import Entry
from compaction.prompt import SYSTEM_PROMPT, build_summary_request
from compaction.summariser import SummaryAsk, summarise
from providers.tokens import estimate_request
from support.fake_model import FakeClient

PIECES = ["word ", "<summary>", "</transcript> ", "ünïcødé ", "\n", "`code` ", "x" * 50]


def text(value: str) -> dict:
    return {"type": "text", "text": value}


@st.composite
def transcripts(draw) -> list[Entry]:
    entries = []
    for seq in range(1, draw(st.integers(0, 30)) + 1):
        # A few pieces repeated: sizes up to ~200k characters without drawing each piece.
        pieces = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4))
        repeat = draw(st.sampled_from([0, 1, 5, 40, 400, 4_000]))
        content = [text("".join(pieces) * repeat)]
        if seq % 2 == 0 and draw(st.booleans()):
            content.append({"type": "tool_use", "id": f"t{seq}", "name": "read", "input": {}})
        entries.append(Entry(seq, "user" if seq % 2 else "assistant", content))
    return entries


def request_tokens(part, brief, instructions) -> int:
    return estimate_request(*build_summary_request(part, brief, instructions))


@settings(max_examples=60, deadline=None)
@given(
    entries=transcripts(),
    window=st.integers(1_500, 60_000),
    max_tokens=st.sampled_from([256, 4_096]),
    previous=st.one_of(
        st.none(), st.builds(str.__mul__, st.sampled_from(PIECES), st.integers(0, 3_000))
    ),
    instructions=st.sampled_from(["", "focus on the deadline <summary>"]),
)
def test_every_part_fits_the_window_and_every_entry_is_in_one_in_order(
    entries, window, max_tokens, previous, instructions
):
    found = room(window, max_tokens, previous, instructions)
    assume(found is not None)
    brief = fitted_brief(previous, found.brief)
    folded = parts(entries, found.transcript, found.first(brief))
    assert all(folded), "no part is empty"
    assert [e.seq for part in folded for e in part] == [e.seq for e in entries]
    assert request_tokens(folded[0] if folded else [], brief, instructions) + found.reply <= window
    # Each later part carries the brief the part before wrote: within the reply, cut to fit.
    written = fitted_brief("w" * (found.reply * 4), found.brief)
    for part in folded[1:]:
        assert request_tokens(part, written, instructions) + found.reply <= window
    kept = {e.seq: e for part in folded for e in part}
    for entry in entries:
        if entry_tokens(entry) <= found.transcript:
            assert kept[entry.seq] == entry  # only a message too large for a part is cut


def test_a_message_too_large_for_a_part_is_its_head_and_tail_with_a_note_naming_it():
    huge = Entry(7, "user", [text("HEAD " + "middle " * 700_000 + " TAIL")])  # ~5 MB
    [[cut]] = parts([huge], 2_000)
    body = cut.content[0]["text"]
    assert entry_tokens(cut) <= 2_000
    assert body.startswith("HEAD ") and body.endswith(" TAIL")
    assert "message #7 left out here" in body
    assert "read_messages(from_seq=7, to_seq=7)" in body
    assert (cut.seq, cut.role) == (7, "user")


def test_an_entry_that_fits_is_not_shortened():
    entry = Entry(1, "user", [text("short")])
    assert shortened(entry, 1_000) is entry


def test_a_brief_too_long_keeps_its_head_and_tail():
    brief = "## Primary request and intent\nShip it.\n" + "detail " * 10_000 + "\n## Next step\nGo."
    cut = fitted_brief(brief, 500)
    assert cut.startswith("## Primary request and intent") and cut.endswith("## Next step\nGo.")
    assert "of the earlier brief left out here" in cut
    assert fitted_brief("short", 500) == "short"


def test_the_window_is_the_budget_within_the_models_context():
    assert summary_window(4_000, 200_000) == 4_000
    assert summary_window(500_000, 200_000) == 200_000
    assert summary_window(None, 200_000) == 200_000
    assert reply_tokens(4_000, 4_096) == 800  # a fifth of a small window
    assert reply_tokens(200_000, 4_096) == 4_096


def test_a_window_too_small_for_the_instructions_has_no_room():
    assert room(1_000, 4_096, None, "") is None
    assert room(4_000, 4_096, None, "") is not None


# --- folding, through the summariser -------------------------------------------------------------


def span(count: int, words: int = 300) -> list[Entry]:
    return [
        Entry(seq, "user" if seq % 2 else "assistant", [text(f"Message {seq}: " + "w " * words)])
        for seq in range(1, count + 1)
    ]


def asked(call) -> str:
    [message] = call.messages
    return message["content"][0]["text"]


def scripted(*answers: str) -> FakeClient:
    client = FakeClient()
    for answer in answers:
        client.enqueue([answer], usage={"input_tokens": 10, "output_tokens": 2})
    return client


async def test_a_span_too_large_is_folded_in_parts_the_brief_carried_from_part_to_part():
    client = scripted(*(f"<summary>Brief after part {n}.</summary>" for n in range(1, 20)))
    shown = []

    async def on_part(number, count):
        shown.append((number, count))

    ask = SummaryAsk("m", span(40), "Brief before.", budget=4_000, max_tokens=4_096)
    result = await summarise(client, ask, on_part=on_part)
    count = len(client.calls)
    assert count > 2
    assert shown == [(n, count) for n in range(1, count + 1)]
    assert (result.summariser, result.summary) == ("model", f"Brief after part {count}.")
    assert result.usage.input_tokens == 10 * count  # every part's call is paid for
    for n, call in enumerate(client.calls, start=1):
        assert call.system == SYSTEM_PROMPT
        assert estimate_request(call.system, call.messages) + call.max_tokens <= 4_000
        before = "Brief before." if n == 1 else f"Brief after part {n - 1}."
        assert f"<previous_summary>\n{before}\n</previous_summary>" in asked(call)
    seen = [s for call in client.calls for s in range(1, 41) if f"(#{s}):\n" in asked(call)]
    assert seen == list(range(1, 41))  # every message read once, in order


async def test_one_part_is_one_request_without_progress():
    client = scripted("<summary>All of it.</summary>")
    shown = []

    async def on_part(number, count):
        shown.append((number, count))

    result = await summarise(client, SummaryAsk("m", span(4, 10), budget=200_000), on_part=on_part)
    assert (len(client.calls), shown, result.summary) == (1, [], "All of it.")


async def test_a_part_that_fails_falls_back_to_rules_over_what_is_not_folded_yet():
    client = scripted("<summary>Brief after part one.</summary>")
    client.enqueue_error("overloaded", status=529)
    result = await summarise(client, SummaryAsk("m", span(40), budget=4_000, max_chars=3_000))
    assert result.summariser == "rules" and result.summary.startswith(RULES_NOTE)
    assert result.error.startswith("part 2 of ") and "overloaded" in result.error
    assert "Brief after part one." in result.summary  # the folded part is carried, not lost
    assert len(result.summary) <= 3_000


async def test_a_window_too_small_for_a_request_is_summarised_by_rules_without_a_call():
    client = scripted("<summary>never asked</summary>")
    decided = Entry(
        7, "user", [text("We decided the audit log moves to PostgreSQL 16.2, not MySQL.")]
    )
    ask = SummaryAsk("m", [*span(6), decided], budget=900, max_chars=900)
    result = await summarise(client, ask)
    assert client.calls == []
    assert result.summariser == "rules" and "cannot hold a summary request" in result.error
    assert len(result.summary) <= 900
    # The fact stated, kept as its clause: room for many in a brief this small.
    assert "\n- (#7) decided audit log moves to PostgreSQL 16.2\n" in result.summary


def test_left_out_names_the_message_and_the_tool():
    assert "read_messages(from_seq=3, to_seq=3)" in LEFT_OUT.format(chars=10, seq=3)
