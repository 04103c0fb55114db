"""Clearing files, as pure logic (compaction/clearing.py, compaction/files.py): one plan clears
old tool results and files together, outside the kept tail and never pinned; a file becomes a
line naming it, its message and how to get it back; a file smaller than that line stays; the
divider counts each kind."""

from __future__ import annotations

from compaction import facts, key_facts
from compaction.brief import rule_based_summary
from compaction.clearing import clear_entry, plan
from compaction.entries import Entry
from compaction.files import CLEARED_NOTE
from compaction.models import Compaction
from providers.tokens import estimate_content
from tests.test_clearing import BIG, tool_turn


def image(attachment_id: int, name: str = "build-error.png", tokens: int = 1045) -> dict:
    meta = {"id": attachment_id, "name": name, "media_type": "image/png", "bytes": 48210}
    return {"type": "image", "attachment": meta | {"tokens": tokens, "width": 800, "height": 600}}


def text_file(attachment_id: int, tokens: int) -> dict:
    meta = {"id": attachment_id, "name": "tiny.txt", "media_type": "text/plain", "bytes": 30}
    return {"type": "document", "attachment": meta | {"tokens": tokens}}


def file_turn(seq: int, *blocks: dict, pinned: bool = False) -> list[Entry]:
    content = [{"type": "text", "text": f"look at these {seq}"}, *blocks]
    reply = [{"type": "text", "text": "Seen."}]
    return [
        Entry(seq, "user", content, estimate_content(content), pinned),
        Entry(seq + 1, "assistant", reply, estimate_content(reply)),
    ]


def test_a_file_becomes_a_line_naming_it_and_a_small_one_stays():
    message, _ = file_turn(12, image(7), text_file(8, 5))
    after = clear_entry(message, 2000)
    assert after.content[0] == message.content[0]
    assert after.content[1] == {
        "type": "text",
        "text": f"[image: build-error.png (#12), 1,045 tokens, {CLEARED_NOTE}]",
    }
    assert after.content[2] == message.content[2]  # its line would cost more than it does
    assert after.cleared_files == (message.content[1]["attachment"],)
    assert after.tokens < message.tokens - 1000
    assert clear_entry(after, 2000) is after  # nothing more to clear


def test_a_file_a_tool_gave_back_is_cleared_from_a_result_that_stays():
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "Here it is."}, image(7)],
    }
    call = {"type": "tool_use", "id": "t1", "name": "read_attachment", "input": {"id": 7}}
    reply = Entry(5, "assistant", [call, result], estimate_content([call, result]))
    after = clear_entry(reply, 2000)
    inner = after.content[1]["content"]
    assert inner[0] == {"type": "text", "text": "Here it is."}
    assert inner[1]["type"] == "text" and inner[1]["text"].endswith(f"{CLEARED_NOTE}]")
    assert after.content[1]["tool_use_id"] == "t1"


def test_one_plan_clears_results_and_files_outside_the_tail_and_not_pinned():
    entries = (
        file_turn(1, image(1, "a.png"))
        + tool_turn(3, "r1", BIG)
        + file_turn(5, image(2, "pinned.png"), pinned=True)
        + file_turn(7, image(3, "c.png"), image(4, "d.png"))
        + tool_turn(9, "r2", BIG)
        + file_turn(11, image(5, "tail.png"))
    )
    clearing = plan(entries, keep_tokens=1500, min_chars=2000)
    assert clearing.before_seq == 11  # the last turn is the kept tail
    assert clearing.count == 2  # r1 and r2
    assert [(f["name"], f["seq"]) for f in clearing.files] == [
        ("a.png", 1),
        ("c.png", 7),
        ("d.png", 7),
    ]
    assert clearing.saved > 3 * 1000 + 2 * 1000


def test_a_plan_with_files_alone_is_a_clearing():
    entries = file_turn(1, image(1)) + file_turn(3, image(2))
    clearing = plan(entries, keep_tokens=1100, min_chars=2000)
    assert (clearing.count, [f["id"] for f in clearing.files]) == (0, [1])


def test_the_divider_counts_each_kind():
    def said(files: int, results: int) -> str:
        row = Compaction(cleared_count=results, files=[{"name": "x"}] * files)
        return row.cleared_what

    assert said(2, 3) == "2 files and 3 tool results"
    assert said(2, 0) == "2 files"
    assert said(1, 0) == "1 file"
    assert said(0, 1) == "1 tool result"


def test_the_line_in_place_of_a_file_is_no_fact_and_no_quote():
    message, _ = file_turn(12, image(7))
    after = clear_entry(message, 2000)
    assert after.text == message.text == "look at these 12"  # the person's words only
    assert key_facts.of_span([after]) == key_facts.of_span([message])
    assert facts.facts_of([after]) == facts.facts_of([message])
    assert "read_attachment" not in rule_based_summary([after], None).split("## Files")[0]
