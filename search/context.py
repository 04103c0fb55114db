"""A message found with its neighbours as context: plain functions over plain values.

A question rarely uses the words of the message that answers it; they are often in the message
next to it (the question the answer follows, the reply that names what a short message was
about). So each message's score is its own text's score plus, weighted lower, the scores of its
neighbours on the transcript: the message before it (its parent) and the one after it (whose
parent it is). This is done at search time, over the database's own per-message matches, rather
than by indexing each message's neighbours beside it: a neighbour's text changes when the next
message arrives (and again when a streamed reply is saved), and keeping an index of it in step
would cost every turn a write to the message before; at search time it costs one query.

A hit still names the one message: found through a neighbour only, its snippet is its own text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from chat.branches import parent_of

# A neighbour's match counts this much of the message's own (PostgreSQL's weight for 'B' text
# against 'A'). Each neighbour counts; under 0.5, a message between two matching ones still ranks
# below them when they match equally well.
CONTEXT_WEIGHT = 0.4

Key = tuple[int, int]  # (conversation id, seq)


@dataclass(frozen=True)
class Match:
    """A message the index matched, with its own score (higher is better)."""

    message_id: int
    conversation_id: int
    seq: int
    parent_seq: int | None
    score: float

    @property
    def key(self) -> Key:
        return (self.conversation_id, self.seq)

    @property
    def parent(self) -> int:
        return parent_of(self.seq, self.parent_seq)


def givers(matches: Iterable[Match]) -> dict[Key, list[Match]]:
    """For each message that may gain from a neighbour, the matches that may give it: a match
    gives to its parent and to the message after it (seq + 1, checked against that message's
    own parent once it is read: `in_context`)."""
    given: dict[Key, list[Match]] = defaultdict(list)
    for match in matches:
        given[(match.conversation_id, match.parent)].append(match)
        given[(match.conversation_id, match.seq + 1)].append(match)
    return given


def pool(
    matches: list[Match],
    given: dict[Key, list[Match]],
    size: int,
    weight: float = CONTEXT_WEIGHT,
) -> list[Key]:
    """The `size` messages that may score best with their context (the score an unconfirmed
    neighbour would bring counted in full): the only ones worth reading."""
    own = {m.key: m.score for m in matches}
    bound = {key: own.get(key, 0.0) for key in own.keys() | given.keys()}
    for key, gifts in given.items():
        bound[key] += weight * sum(g.score for g in gifts)
    return sorted(bound, key=lambda key: (-bound[key], -key[1]))[:size]


def in_context(
    key: Key,
    parent: int,
    own: float,
    given: dict[Key, list[Match]],
    weight: float = CONTEXT_WEIGHT,
) -> float:
    """A message's score with its context: its own, plus its neighbours' weighted. `parent` is
    the message's own parent: a match gives to it only if it is that parent, or its child."""
    seq = key[1]
    gifts = sum(g.score for g in given.get(key, ()) if g.seq == parent or g.parent == seq)
    return own + weight * gifts
