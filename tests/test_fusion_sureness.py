"""The fusion weighs each side by how sure it is: a ranking whose first ten are as good as each
other (search by meaning finding a dozen messages on the query's topic alike) gives way to the
one that can tell which message is meant."""

from __future__ import annotations

import pytest

from chat import vectors
from providers import embeddings
from search.fusion import WEIGHT, sureness, weight_by_sureness
from search.messages import search
from support.fake_embeddings import ConceptEmbedder
from tests.transcripts import chat


def test_sureness_is_how_far_below_the_best_the_tenth_falls_on_the_fused_scale():
    assert sureness([0.9, *[0.5] * 29]) == 1.0  # the best alone, the rest as bad as the worst
    assert sureness([*[0.8] * 12, *[0.1] * 18]) == 0.0  # the first ten alike
    assert sureness([1.0, *[0.9] * 9, 0.6]) == pytest.approx(0.25)
    assert sureness([9.0, 5.0, 1.0]) == 1.0  # fewer than ten: the last is the worst
    assert sureness([0.3, 0.3]) == 0.0  # all alike
    assert sureness([0.3]) == 1.0  # one message alone holds the words
    assert sureness([]) == 0.0


def test_the_semantic_share_follows_how_sure_each_side_is():
    assert weight_by_sureness(1.0, 1.0) == pytest.approx(WEIGHT)
    assert weight_by_sureness(0.5, 0.5) == pytest.approx(WEIGHT)
    assert weight_by_sureness(1.0, 0.0) == 0.0  # meaning cannot tell: the words decide
    assert weight_by_sureness(0.0, 1.0) == 1.0
    assert weight_by_sureness(0.0, 0.0) == WEIGHT  # neither: as configured
    assert weight_by_sureness(0.8, 0.2) < WEIGHT < weight_by_sureness(0.2, 0.8)


CONCEPTS = {"holiday": "ferry island beach holiday", "money": "card cash paid receipt"}
ABOUT_THE_HOLIDAY = [f"The island beach on holiday, day {n}" for n in range(12)]
ANSWER = "Booked the 7:40 ferry, paid by card, cash receipt kept"
OTHERS = ["I finished the book you lent me", "That book club meets on Tuesdays"] + [
    f"Nothing much happened at work on day {n}" for n in range(5)
]


@pytest.mark.django_db
def test_words_that_name_the_one_message_win_over_meaning_that_finds_a_dozen_alike(
    alice, fresh_runtime
):
    conversation = chat(alice, [*OTHERS[:2], ANSWER, *ABOUT_THE_HOLIDAY, *OTHERS[2:]])
    fake = ConceptEmbedder(CONCEPTS)
    embeddings.register(fake)
    sum(vectors.embed_batches(fake))
    hits = search(alice, "Which ferry did we book?", conversation_id=conversation.pk)
    # By meaning the twelve holiday messages tie first (the answer is mostly about paying);
    # by words the answer alone holds "ferry". A fixed share for meaning ranked the twelve
    # above it, out of the first ten.
    assert hits[0].seq == 3
