"""Recall with context and across conversations: a message found through its neighbours' words
(its own snippet still), stemmed words, the model's search and reading over all of the user's
conversations and never another user's, and people's JSON over all of theirs (SQLite and
PostgreSQL run this same file)."""

from __future__ import annotations

import pytest

from chat.models import Conversation, Message
from chat.search_index import MARK_OPEN
from search.context import CONTEXT_WEIGHT, Match, givers, in_context
from search.messages import search
from tools import recall
from tools.values import Context, ToolError

pytestmark = pytest.mark.django_db(transaction=True)


def add(conversation, *texts):
    """Messages alternating user/assistant, from the conversation's next seq on."""
    start = (conversation.messages.order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
    for offset, text in enumerate(texts):
        Message.objects.create(
            conversation=conversation,
            seq=start + offset,
            role="user" if (start + offset) % 2 else "assistant",
            content=[{"type": "text", "text": text}],
        )


def other(owner, title: str) -> Conversation:
    return Conversation.objects.create(owner=owner, model="fake-model", title=title)


# --- lexical: stemmed, with context ------------------------------------------------------------


def test_painting_finds_painted(alice, conversation):
    add(conversation, "Last summer I painted the garden shed green.", "Nice colour.")
    hits = search(alice, "painting", conversation_id=conversation.pk)
    assert hits[0].seq == 1 and MARK_OPEN in hits[0].snippet


def test_a_question_whose_words_are_in_the_neighbour_finds_the_message_by_its_own_text(
    alice, conversation
):
    add(
        conversation,
        "What does Caroline do on weekends?",  # 1: the question's words
        "She paints abstract canvases in her studio.",  # 2: the answer, none of them
        "Unrelated: the train was late again.",  # 3
        "Unrelated: so was the bus.",  # 4
    )
    hits = search(alice, "Caroline weekends hobby", conversation_id=conversation.pk)
    assert [h.seq for h in hits] == [1, 2]  # the direct hit first, its neighbour after
    answer = hits[1]
    assert answer.role == "assistant"
    # The hit names the one message: its snippet is its own text, not its neighbour's.
    assert answer.snippet.startswith("She paints abstract canvases")
    assert "Caroline" not in answer.snippet and MARK_OPEN not in answer.snippet
    assert 0 < answer.score < hits[0].score


def test_a_message_between_two_matching_ones_gains_from_both(alice, conversation):
    add(
        conversation,
        "Which port does the heron server use?",
        "Port 41234, since Tuesday.",  # the answer: holds none of the words asked
        "Good, the heron server restarted fine.",
        "Lunch later?",
        *(f"Filler note {i} about nothing much." for i in range(6)),  # the words asked are rare
    )
    hits = {h.seq: h.score for h in search(alice, "heron server", conversation_id=conversation.pk)}
    assert 2 in hits and 4 in hits  # 4 has one matching neighbour, 2 has two
    assert hits[2] > hits[4]


def test_a_neighbour_is_the_message_on_the_transcript_not_the_next_seq():
    # 3 asked, 4 answered it, 5 is 3 edited (another version, after 2): 4 is not 5's neighbour.
    answer = Match(40, 1, 4, None, 2.0)
    edited = Match(50, 1, 5, 2, 1.0)
    given = givers([answer, edited])
    assert in_context((1, 5), 2, edited.score, given) == 1.0
    assert in_context((1, 3), 2, 0.0, given) == CONTEXT_WEIGHT * 2.0  # 4's parent
    assert in_context((1, 2), 1, 0.0, given) == CONTEXT_WEIGHT * 1.0  # 5's parent


# --- across conversations, for the model --------------------------------------------------------


def test_search_history_with_scope_all_names_the_conversation_and_never_another_users(
    alice, bob, conversation
):
    add(conversation, "Where did we leave that question?")
    mine = other(alice, "Schema week")
    add(mine, "We decided the schema keeps one table per tenant.", "Agreed.")
    theirs = other(bob, "Bob's schema")
    add(theirs, "We decided the schema keeps one table per tenant.", "Agreed.")
    tool = Context(alice.pk, conversation.pk, turn_seq=2)

    here = recall.search_history(tool, {"query": "schema tenant table decided"})
    assert here.startswith("No message of this conversation matches")

    everywhere = recall.search_history(tool, {"query": "schema tenant table", "scope": "all"})
    assert (
        f"conversation {mine.pk} “Schema week” · /conversations/{mine.pk}/?at=1#msg-1" in everywhere
    )
    assert "#1 · user · " in everywhere and "**tenant**" in everywhere
    assert f"conversation {theirs.pk}" not in everywhere and "Bob" not in everywhere
    assert "conversation_id" in everywhere  # how to read around a hit there
    with pytest.raises(ToolError, match="scope must be one of"):
        recall.search_history(tool, {"query": "schema", "scope": "everything"})


def test_scope_all_keeps_to_the_turns_own_history_in_its_own_conversation(alice, conversation):
    add(conversation, "walrus one", "walrus two", "walrus three")  # 3 is the turn's own
    elsewhere = other(alice, "Zoo")
    add(elsewhere, "walrus elsewhere")
    tool = Context(alice.pk, conversation.pk, turn_seq=3)
    found = recall.search_history(tool, {"query": "walrus", "scope": "all", "limit": 20})
    assert "walrus three" not in found
    assert f"this conversation ({conversation.pk})" in found
    assert f"conversation {elsewhere.pk} “Zoo”" in found


def test_read_messages_reads_another_conversation_of_the_same_user_only(alice, bob, conversation):
    add(conversation, "Hello.")
    mine = other(alice, "Earlier")
    add(mine, "The boiler code is 7781.", "Noted.")
    theirs = other(bob, "Bob's")
    add(theirs, "Bob's secret is 1234.")
    tool = Context(alice.pk, conversation.pk, turn_seq=1)

    text = recall.read_messages(tool, {"from_seq": 1, "to_seq": 5, "conversation_id": mine.pk})
    assert "The boiler code is 7781." in text and "Noted." in text
    with pytest.raises(ToolError, match="no conversation") as refused:
        recall.read_messages(tool, {"from_seq": 1, "to_seq": 1, "conversation_id": theirs.pk})
    assert "1234" not in str(refused.value)
    with pytest.raises(ToolError, match="no conversation"):
        recall.read_messages(tool, {"from_seq": 1, "to_seq": 1, "conversation_id": 999_999})
    # Its own id is this conversation, held to the turn as before.
    own = {"from_seq": 1, "to_seq": 1, "conversation_id": conversation.pk}
    assert "Hello." in recall.read_messages(tool, own)


def test_the_tool_schemas_say_what_scope_and_conversation_id_do():
    search_schema = recall.SEARCH_HISTORY["input_schema"]["properties"]["scope"]
    assert search_schema["enum"] == ["conversation", "all"]
    assert '"all"' in recall.SEARCH_HISTORY["description"]
    assert "conversation_id" in recall.READ_MESSAGES["input_schema"]["properties"]


# --- across conversations, for people: /search.json -----------------------------------------------


def test_search_json_answers_every_conversation_of_the_user(client, alice, bob, conversation):
    add(conversation, "the release date is the 4th", "fine")
    second = other(alice, "Plans")
    add(second, "release notes drafted")
    add(other(bob, "Bob's"), "the release date is the 9th")
    client.force_login(alice)
    response = client.get("/search.json", {"q": "release date", "limit": "5"})
    assert response.status_code == 200
    data = response.json()
    assert set(data) == {"query", "hits"} and data["query"] == "release date"
    assert all(
        set(h) == {"conversation_id", "seq", "role", "snippet", "score"} for h in data["hits"]
    )
    direct = [(h["conversation_id"], h["seq"]) for h in data["hits"] if "**" in h["snippet"]]
    assert direct == [(conversation.pk, 1), (second.pk, 1)]
    assert "9th" not in response.content.decode()
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"q": "x", "limit": "zero"}, "limit must be a number from 1 to 50"),
        ({"q": "x", "limit": "0"}, "limit must be a number from 1 to 50"),
        ({"q": "x", "limit": "51"}, "limit must be a number from 1 to 50"),
        ({"q": "x" * 100_000}, ""),
        ({"q": "\x00bad"}, ""),
    ],
)
def test_search_json_refuses_a_bad_query_or_limit_with_a_400(client, alice, params, error):
    client.force_login(alice)
    response = client.get("/search.json", params)
    assert response.status_code == 400
    assert error in response.json()["error"] and response.json()["error"]


def test_search_json_needs_a_login(client):
    response = client.get("/search.json", {"q": "x"})
    assert response.status_code == 302 and "/login" in response["Location"]
