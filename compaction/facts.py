"""The facts a person stated, found by rules: names, decisions, paths, numbers and the questions
they asked, one per sentence, each with the number of the message that said it. Plain functions
over plain values: the rule-based brief carries them from compaction to compaction
(compaction/brief.py), and a count of them says what a summary kept.

Only the person's own messages are read. The rules cannot judge what a reply claims, and the
person's statements are what they will ask back about; replies keep their key lines in the brief
of the span they belong to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compaction.entries import Entry
from compaction.prompt import one_line

# Most important first. When the facts do not all fit, the least important kind goes first.
KINDS: tuple[str, ...] = ("name", "decision", "path", "number", "question")
# A fact is one sentence: long enough to hold what was said about the thing, short enough that
# a handful fit in a small brief.
PER_FACT = 160

PATH_RE = re.compile(
    r"(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|tsx|jsx|html|css|md|json|toml|ya?ml|txt|sql|sh|"
    r"rs|go|java|rb|c|h|cpp|ini|cfg)\b"
)
# The person naming themselves: the one fact a later restatement replaces ("call me Ada").
_OWN_NAME_RE = re.compile(
    r"\b(?:my name is|my name's|call me|i am called|i'm called)\s+[A-Z]", re.IGNORECASE
)
# Two or more capitalised words in a row, not opening the sentence: a person, a product, a place.
_PROPER_NAME_RE = re.compile(r"(?<=\S )[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
_DECISION_RE = re.compile(
    r"\b(decid\w*|decision|chose|chosen|agreed|settled on|going with|we will|we'll|let's)\b",
    re.IGNORECASE,
)
# A number worth keeping: three digits or more, a decimal or a time, a unit or a currency, or a
# code such as E4471. "Turn 3" and "two or 3 options" are not facts.
_NUMBER_RE = re.compile(
    r"\b\d{3,}\b|\b\d+[.:]\d+\b|[$€£]\s?\d|\b\d+\s?(?:%|ms|s|kb|mb|gb|tb|px|euros?|dollars?)\b"
    r"|\b[A-Z]{1,4}-?\d{2,}\b",
    re.IGNORECASE,
)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=\S)")
# A fact as the brief writes it: "- (#12) The port is 8443." (the number of the message).
_LINE_RE = re.compile(r"^- \(#(\d+)\) (.+)$")


@dataclass(frozen=True)
class Fact:
    kind: str  # one of KINDS
    seq: int  # the message that stated it
    text: str  # the sentence, on one line, cut to PER_FACT

    @property
    def key(self) -> str:
        """What makes two facts the same: the person's own name is one fact however often it is
        restated (the latest wins); any other is its sentence, case and spacing aside."""
        if self.kind == "name" and _OWN_NAME_RE.search(self.text):
            return "own name"
        return " ".join(re.findall(r"\w+", self.text.lower()))

    def line(self) -> str:
        return f"- (#{self.seq}) {self.text}"


def kind_of(sentence: str) -> str | None:
    """The most important kind of fact a sentence states, or None. Two words ("Turn 101.",
    "Why not?") state nothing."""
    if len(sentence.split()) < 3:
        return None
    if _OWN_NAME_RE.search(sentence) or _PROPER_NAME_RE.search(sentence):
        return "name"
    if _DECISION_RE.search(sentence):
        return "decision"
    if PATH_RE.search(sentence):
        return "path"
    if _NUMBER_RE.search(sentence):
        return "number"
    if sentence.endswith("?"):
        return "question"
    return None


def sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in _SENTENCE_END_RE.split(line.strip()) if s]


def facts_of(entries: Sequence[Entry]) -> list[Fact]:
    """Every fact the person's messages among `entries` state, in order, without repeats."""
    found = []
    for entry in entries:
        if not entry.starts_user_turn:
            continue
        for sentence in sentences(entry.text):
            kind = kind_of(sentence)
            if kind is not None:
                found.append(Fact(kind, entry.seq, one_line(sentence, PER_FACT)))
    return merged(found)


def merged(facts: Iterable[Fact]) -> list[Fact]:
    """The facts without repeats: a fact stated again replaces the earlier statement (so a
    corrected name is the new one), in order of the message that stated them."""
    latest: dict[str, Fact] = {}
    for fact in facts:
        latest.pop(fact.key, None)
        latest[fact.key] = fact
    return sorted(latest.values(), key=lambda f: f.seq)


def parse_lines(text: str) -> list[Fact]:
    """Facts as `Fact.line` wrote them (a brief's facts section), their kinds found again."""
    found = []
    for line in text.splitlines():
        match = _LINE_RE.match(line.strip())
        if match and (kind := kind_of(match.group(2))) is not None:
            found.append(Fact(kind, int(match.group(1)), match.group(2)))
    return found


def within(facts: Sequence[Fact], budget: int, most: int) -> tuple[list[Fact], list[Fact]]:
    """(kept, left out): at most `most` facts whose lines fit in `budget` characters. What is
    left out is the least important kind first and, within a kind, the latest first: the facts
    the person stated early (who they are, where the work lives, what was settled) are never
    stated again, while the latest are still quoted whole in the brief of their own span."""
    ranked = sorted(facts, key=lambda f: (KINDS.index(f.kind), f.seq))
    kept, used = [], 0
    for fact in ranked:
        size = len(fact.line()) + 1
        if len(kept) < most and used + size <= budget:
            kept.append(fact)
            used += size
    chosen = set(kept)
    return sorted(kept, key=lambda f: f.seq), [f for f in facts if f not in chosen]
