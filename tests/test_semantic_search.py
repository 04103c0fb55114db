"""Hybrid search: lexical and semantic scores min-max normalised and summed, the scope's frequent
words dropped from the query before it is embedded; a paraphrase's answer found first where the
words alone cannot find it, and never another user's message."""

from __future__ import annotations

import pytest

from chat import vectors
from providers import embeddings
from search.fusion import drop_frequent, fuse, min_max
from search.messages import search, search_branch
from support.fake_embeddings import ConceptEmbedder
from tests.transcripts import chat

CONCEPTS = {
    "art": "art painting abstracts canvas",
    "pets": "pet dog puppy animal",
    "food": "lunch soup dinner",
}
DISTRACTORS = [
    "Caroline: the weather was grey all week",
    "Caroline: what kind of thing did you make for lunch?",
    "Caroline: I had soup for dinner again",
    "Caroline: the train was late this morning",
    "Caroline: we should make plans for the weekend",
]
ANSWER = "Caroline: I've been painting abstracts of a kind lately"
QUESTION = "What kind of art does Caroline make?"


def test_min_max_rescales_to_the_unit_range():
    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert min_max({"a": 7.0, "b": 7.0}) == {"a": 1.0, "b": 1.0}
    assert min_max({}) == {}


def test_fuse_sums_the_normalised_scores_with_the_weight():
    lexical = {"a": 12.0, "b": 4.0, "c": 8.0}
    semantic = {"a": 0.1, "c": 0.9, "d": 0.5}
    assert fuse(lexical, semantic, weight=0.5) == [("c", 0.75), ("a", 0.5), ("d", 0.25), ("b", 0.0)]
    assert fuse(lexical, semantic, weight=0.25)[:2] == [("a", 0.75), ("c", 0.625)]
    assert fuse({}, {"d": 0.3}, weight=0.5) == [("d", 0.5)]


def test_words_most_messages_hold_are_dropped_unless_they_are_all_the_query_has():
    # A speaker's name in a two-person chat: every message of theirs, and the other's mentions.
    holding = {"caroline": 55, "art": 1, "make": 19}
    assert drop_frequent(["caroline", "art", "make"], holding, 100) == ["art", "make"]
    assert drop_frequent(["caroline", "art", "make"], holding, 100, share=0.1) == ["art"]
    # A topic's word a fifth of the messages hold still says what the question is about.
    assert drop_frequent(["budget", "tracker"], {"budget": 30, "tracker": 2}, 100) == [
        "budget",
        "tracker",
    ]
    assert drop_frequent(["caroline"], holding, 100) == ["caroline"]
    assert drop_frequent(["caroline", "art"], holding, 0) == ["caroline", "art"]


pytestmark_db = pytest.mark.django_db


def seq_of(conversation, text: str) -> int:
    return conversation.messages.get(search_text=text).seq


@pytestmark_db
def test_hybrid_ranks_a_paraphrases_answer_first_where_words_alone_rank_it_lower(
    alice, settings, fresh_runtime
):
    settings.EMBEDDINGS = "none"
    conversation = chat(alice, [*DISTRACTORS[:3], ANSWER, *DISTRACTORS[3:]])
    lexical = search(alice, QUESTION, conversation_id=conversation.pk)
    assert lexical[0].seq != seq_of(conversation, ANSWER)  # "kind", "make": the distractors
    fake = ConceptEmbedder(CONCEPTS)
    embeddings.register(fake)
    sum(vectors.embed_batches(fake))
    hybrid = search(alice, QUESTION, conversation_id=conversation.pk)
    assert hybrid[0].seq == seq_of(conversation, ANSWER)
    # Every message holds "caroline": the query was embedded without it ("kind" and "make", a
    # third of them, stay).
    assert fake.asked[-1] == ["kind art make"]
    branch = search_branch(alice, QUESTION, conversation.pk, None, limit=3)
    assert branch[0].seq == seq_of(conversation, ANSWER)


@pytestmark_db
def test_a_message_found_by_meaning_alone_is_a_hit_with_its_opening_words(alice, fresh_runtime):
    conversation = chat(alice, ["We adopted a puppy last spring", *DISTRACTORS])
    fake = ConceptEmbedder(CONCEPTS)
    embeddings.register(fake)
    sum(vectors.embed_batches(fake))
    hits = search(alice, "Any animal at home?", conversation_id=conversation.pk)
    assert [(h.seq, h.snippet, h.role) for h in hits] == [
        (1, "We adopted a puppy last spring", "user")
    ]
    # Nothing near in meaning, no word in common: nothing.
    assert search(alice, "quantum chromodynamics", conversation_id=conversation.pk) == []


@pytestmark_db
def test_the_builtin_model_finds_a_paraphrase_with_no_word_in_common(
    alice, settings, fresh_runtime
):
    settings.EMBEDDINGS = "builtin"
    statement = "We adopted a rescue dog last spring and she sleeps on the sofa"
    conversation = chat(
        alice,
        [
            "The migration failed with a lock timeout on the orders table",
            "Lunch was a bowl of noodles at the place near the station",
            statement,
            "The quarterly report is due on Friday, send me your numbers",
            "I finally fixed the flaky test in the payment module",
        ],
    )
    question = "Which pet joined your household?"
    assert search(alice, question, conversation_id=conversation.pk) == []  # not one word
    sum(vectors.embed_batches(embeddings.embedder()))
    hits = search(alice, question, conversation_id=conversation.pk)
    assert hits[0].seq == seq_of(conversation, statement)


@pytestmark_db
def test_search_by_meaning_never_reaches_another_users_messages(alice, bob, fresh_runtime):
    chat(bob, ["My puppy chewed the sofa"])
    mine = chat(alice, DISTRACTORS)
    fake = ConceptEmbedder(CONCEPTS)
    embeddings.register(fake)
    sum(vectors.embed_batches(fake))
    assert search(alice, "a pet dog") == []
    assert search(alice, "a pet dog", conversation_id=mine.pk) == []
    assert [h.snippet for h in search(bob, "a pet dog")] == ["My puppy chewed the sofa"]


@pytestmark_db
def test_the_models_search_everywhere_finds_by_meaning_in_the_users_other_chats_only(
    alice, bob, fresh_runtime
):
    here = chat(alice, DISTRACTORS)
    there = chat(alice, ["We adopted a puppy last spring", "Lovely, what is her name?"])
    chat(bob, ["My dog chewed the sofa", "Oh no."])
    fake = ConceptEmbedder(CONCEPTS)
    embeddings.register(fake)
    sum(vectors.embed_batches(fake))
    question = "Any animal at home?"
    assert search_branch(alice, question, here.pk, None, limit=3) == []  # not in this chat
    hits = search_branch(alice, question, here.pk, None, limit=3, everywhere=True)
    assert [(h.conversation_id, h.seq) for h in hits] == [(there.pk, 1)]
