"""bench/beam.py's loader: BEAM's shapes read as they come (evidence ids as a list, a nested
list or a dict of lists; user messages' plan markers), and its chats imported through the app's
import path with each BEAM message id at seq id + 1, so evidence maps to the imported messages."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from bench.beam import Chat, chat_messages, evidence_ids, import_chats, load
from chat.models import Message


def test_evidence_ids_in_every_shape_beam_gives_them():
    assert evidence_ids([28]) == {28}
    assert evidence_ids([[4, 5], [60]]) == {4, 5, 60}
    assert evidence_ids({"original_info": [86], "updated_info": [114]}) == {86, 114}
    assert evidence_ids({"first_event": [2], "second_event": [[0]]}) == {0, 2}
    assert evidence_ids(None) == frozenset()
    assert evidence_ids([]) == frozenset()


def test_messages_in_order_with_the_plan_marker_stripped():
    batches = [
        {
            "batch_number": 1,
            "turns": [
                [
                    {"role": "user", "id": 0, "content": "When does my sprint end? ->-> 1,1"},
                    {
                        "role": "assistant",
                        "id": 1,
                        "content": "On March 29 ->-> is not a marker here.",
                    },
                ]
            ],
        },
        {"batch_number": 2, "turns": [[{"role": "user", "id": 2, "content": "Thanks ->-> 2, 1 "}]]},
    ]
    assert chat_messages(batches) == (
        ("user", "When does my sprint end?"),
        ("assistant", "On March 29 ->-> is not a marker here."),
        ("user", "Thanks"),
    )
    with pytest.raises(ValueError):
        chat_messages([{"turns": [[{"role": "user", "id": 1, "content": "x"}]]}])


def beam_zip(tmp_path):
    """A two-chat BEAM-shaped zip: folders 100K/1 and 100K/2, a question without evidence
    (abstention) left out."""
    path = tmp_path / "beam.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for n, fact in ((1, "my sprint ends on March 29"), (2, "the cat is called Miso")):
            turns = [
                [
                    {"role": "user", "id": 0, "content": "Hello there ->-> 1,1"},
                    {"role": "assistant", "id": 1, "content": "Hi, how can I help?"},
                ],
                [
                    {"role": "user", "id": 2, "content": f"Note that {fact} ->-> 1,2"},
                    {"role": "assistant", "id": 3, "content": "Noted."},
                ],
            ]
            chat = [{"batch_number": 1, "turns": turns}]
            questions = {
                "information_extraction": [{"question": "What?", "source_chat_ids": [2]}],
                "abstention": [{"question": "Who?", "ideal_response": "Not said."}],
            }
            archive.writestr(f"100K/{n}/chat.json", json.dumps(chat))
            archive.writestr(f"100K/{n}/probing_questions.json", json.dumps(questions))
    return path


@pytest.mark.django_db
def test_chats_imported_as_a_user_would_with_ids_mapped_to_seqs(alice, tmp_path, settings):
    settings.IMPORTS_PER_HOUR = 100
    chats, questions = load(beam_zip(tmp_path))
    assert [c.number for c in chats] == [1, 2]
    assert [(q.chat, q.kind, q.evidence) for q in questions] == [
        (1, "information_extraction", {2}),
        (2, "information_extraction", {2}),
    ]
    conversation = import_chats(alice, chats)
    found = Message.objects.get(conversation_id=conversation[2], seq=2 + 1)
    assert found.search_text == "Note that the cat is called Miso"
    assert found.role == "user"
    assert conversation[1] != conversation[2]
    assert Message.objects.filter(conversation__owner=alice).count() == 8


def test_a_chat_is_a_chain_of_chatgpt_nodes_ending_at_the_current_node():
    from bench.beam import conversations_json

    [converted] = json.load(
        io.BytesIO(conversations_json([Chat(7, (("user", "a"), ("assistant", "b")))]))
    )
    assert converted["title"] == "BEAM 7"
    assert converted["current_node"] == "m1"
    assert converted["mapping"]["m1"]["parent"] == "m0"
    assert converted["mapping"]["m0"]["children"] == ["m1"]
