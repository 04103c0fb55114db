"""Content blocks read in one place: each block's type and text, and what a tool_result holds
whether its content is a string or a list of blocks; malformed blocks read as no type, no text."""

from __future__ import annotations

import json

import pytest

from providers.blocks import (
    answered_ids,
    block_text,
    call_ids,
    carried_files,
    of_type,
    result_text,
    text_of,
    texts,
    tool_results,
    tool_uses,
    type_of,
    without_empty_text,
)

CALL = {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "error"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 lines"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
GARBAGE = [None, 7, "text", ["type", "text"]]
TURN = [{"type": "text", "text": "Looking."}, CALL, RESULT, {"type": "text", "text": "Found 3."}]


def result(content=None, **fields) -> dict:
    block = {"type": "tool_result", "tool_use_id": "toolu_1", **fields}
    return block if content is None else block | {"content": content}


def test_it_reads_a_blocks_type():
    assert type_of(CALL) == "tool_use"
    assert type_of({"type": "text", "text": "hi"}) == "text"


def test_a_block_without_a_type_and_anything_not_a_block_have_none():
    assert type_of({"text": "hi"}) is None
    for thing in GARBAGE:
        assert type_of(thing) is None


def test_untrusted_json_type_is_returned_as_it_is_for_its_reader_to_check():
    assert type_of({"type": 5}) == 5


def test_it_reads_a_text_blocks_text():
    assert text_of({"type": "text", "text": "hello"}) == "hello"


def test_other_blocks_and_garbage_have_no_text():
    assert text_of(CALL) == ""
    assert text_of({"type": "thinking", "text": "private"}) == ""
    assert text_of({"type": "text"}) == ""
    assert text_of({"type": "text", "text": None}) == ""
    for thing in GARBAGE:
        assert text_of(thing) == ""


def test_a_tool_result_holding_a_string_is_that_string():
    assert result_text(result("3 lines\nof log")) == "3 lines\nof log"
    assert result_text(result("")) == ""


def test_a_tool_result_holding_text_blocks_is_their_text_joined_by_lines():
    blocks = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    assert result_text(result(blocks)) == "first\nsecond"


def test_blocks_other_than_text_in_a_result_are_left_out():
    blocks = [{"type": "text", "text": "a chart:"}, IMAGE, None, "stray", {"type": "text"}]
    assert result_text(result(blocks)) == "a chart:\n"


def test_other_writes_the_blocks_other_than_text_when_given():
    blocks = [{"type": "text", "text": "a chart:"}, IMAGE, None]
    written = result_text(result(blocks), other=lambda b: json.dumps(b, sort_keys=True))
    assert written == "a chart:\n" + json.dumps(IMAGE, sort_keys=True)


@pytest.mark.parametrize("block", [result(), result(content=[]), {"type": "tool_result"}])
def test_a_tool_result_without_content_holds_no_text(block):
    assert result_text(block) == ""


@pytest.mark.parametrize("thing", [*GARBAGE, result(content=7), result(content={"a": 1})])
def test_garbage_holds_no_result_text(thing):
    assert result_text(thing) == ""


def test_texts_joins_a_messages_text_blocks_without_its_tool_traffic():
    assert texts(TURN) == "Looking.\nFound 3."
    assert texts(TURN, sep="") == "Looking.Found 3."
    assert texts([]) == "" and texts(None) == ""
    assert texts([None, 7, {"type": "text", "text": "kept"}]) == "kept"


def test_it_picks_blocks_by_type_in_order():
    assert of_type(TURN, "text") == [TURN[0], TURN[3]]
    assert tool_uses(TURN) == [CALL]
    assert tool_results(TURN) == [RESULT]
    assert tool_uses([None, "tool_use", {"name": "x"}]) == []
    assert tool_results(None) == []


def test_it_reads_the_ids_of_calls_and_of_the_calls_results_answer():
    second = {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}
    assert call_ids([*TURN, second]) == {"toolu_1", "toolu_2"}
    assert answered_ids([*TURN, second]) == {"toolu_1"}
    assert call_ids(None) == set() and answered_ids([None, 3]) == set()


def test_it_drops_empty_text_blocks_and_keeps_everything_else():
    empty = [{"type": "text", "text": ""}, {"type": "text"}, {"type": "text", "text": None}]
    kept = [{"type": "text", "text": " "}, CALL, RESULT, {"type": "thinking", "thinking": ""}]
    assert without_empty_text([*empty[:2], *kept, empty[2]]) == kept


def test_block_text_writes_what_the_model_is_sent_and_the_search_index_keeps_the_words():
    """Token estimates and prompts count everything (an image as its JSON); the search index
    keeps only words a person could search for."""
    with_image = result([{"type": "text", "text": "a chart"}, IMAGE])
    assert block_text(CALL) == 'grep {"q": "error"}'
    assert block_text(CALL, everything=False) == 'grep {"q": "error"}'
    assert block_text(with_image) == "a chart\n" + json.dumps(IMAGE, sort_keys=True)
    assert block_text(with_image, everything=False) == "a chart"
    assert block_text(IMAGE) == json.dumps(IMAGE, sort_keys=True)
    assert block_text(IMAGE, everything=False) == ""
    assert block_text({"type": "text", "text": "hi"}, everything=False) == "hi"


def test_it_reads_the_files_a_message_carries_those_in_its_tool_results_too():
    shot = {"id": 1, "name": "shot.png", "tokens": 640}
    notes = {"id": 2, "name": "notes.md", "tokens": 9}
    content = [
        {"type": "text", "text": "Look."},
        {"type": "image", "attachment": shot},
        result([{"type": "text", "text": "Here."}, {"type": "document", "attachment": notes}]),
        result("no file"),
        IMAGE,  # the API's own block, holding its bytes: no upload named
        *GARBAGE,
    ]
    assert carried_files(content) == [shot, notes]
