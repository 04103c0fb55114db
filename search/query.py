"""What of a query is searched for, and how matched words are marked: plain functions.

What of a message is searchable, and the index over it, are the transcript's own
(chat/search_index.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from chat.search_index import MARK_CLOSE, MARK_OPEN

MAX_TERMS = 16

# Words too common to say anything about a message. PostgreSQL's english configuration drops
# these itself; FTS5 does not, and with every message matching them they would only add noise.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves""".split()
)

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Query:
    """A natural-language query: the words that count, and any quoted phrases."""

    terms: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]

    @property
    def empty(self) -> bool:
        return not self.terms and not self.phrases


def parse(text: str) -> Query:
    """Whole questions are welcome: a hit need not contain every word, so each word (minus the
    common ones) is a term of its own; "quoted words" must appear together."""
    text = (text or "")[
        : settings.MAX_QUERY_CHARS
    ]  # a person's is refused longer; the model's is cut
    phrases, rest = [], []
    for i, part in enumerate(text.split('"')):
        words = [w.lower() for w in _WORD.findall(part)]
        if i % 2 and len(words) > 1:
            phrases.append(tuple(words))
        else:
            rest.extend(words)
    terms = []
    for word in rest:
        if word not in STOP_WORDS and word not in terms:
            terms.append(word)
    if not terms and not phrases:
        # A query of common words only ("what is it"): search them rather than nothing.
        terms = list(dict.fromkeys(rest))
    return Query(tuple(terms[:MAX_TERMS]), tuple(phrases[:MAX_TERMS]))


def marked(snippet: str, open_: str, close: str) -> str:
    return snippet.replace(MARK_OPEN, open_).replace(MARK_CLOSE, close)
