"""The facts a person stated, found by rules: names, decisions, paths, numbers, dates,
identifiers and quoted words, each with the number of the message
that said it. Plain functions over plain values: the rule-based brief carries them from
compaction to compaction (compaction/brief.py).

A fact is kept compactly: not its whole sentence but the clause around what matched, cut to the
few words next to it that say what it is ("heron staging server listens on port 41234"), so that
many fit in a small brief and each still reads as what was said (a number without its words is
no use).

Only the person's own messages are read. The rules cannot judge what a reply claims, and the
person's statements are what they will ask back about; replies keep their key lines in the brief
of the span they belong to.

One set of rules, two uses. The key tokens (numbers, identifiers, error codes, paths, URLs,
names, quoted strings, dates: the `*_RE` below) are what a clause here is built around, and
also, each on its own, the key facts of compaction/key_facts.py: what a summary must still say
of everything it folds (both roles), counted on every boundary. A key fact the brief would
drop is noted in its facts section as one of these ("- (in #12) ...", `Fact.noted`: with the
room the person's own facts leave; `kind_of` finds every key token's kind again), so what the
brief carries and what a boundary counts are one measure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compaction.entries import Entry

# Most important first: in one clause, the most important kind found is the fact's. When the
# facts do not all fit, the kinds take turns in this order.
KINDS: tuple[str, ...] = (
    "name",
    "decision",
    "path",
    "number",
    "date",
    "identifier",
    "quote",
)
# At most this many characters: the thing matched and the words next to it that say what it is.
PER_FACT = 48
# Fewer words state nothing ("Turn 101", "Why not?").
MIN_WORDS = 3

# A file named without a folder is a path when it ends in one of these (patterns).
SOURCE_EXTENSIONS = (
    "py js ts tsx jsx html css md json toml ya?ml txt sql sh rs go java rb c h cpp ini cfg"
).split()
PATH_RE = re.compile(r"(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:" + "|".join(SOURCE_EXTENSIONS) + r")\b")
URL_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s<>()\"'`]*[^\s<>()\"'`.,;:!?]")
_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH = r"(?:" + "|".join(m.capitalize() for m in _MONTHS) + ")"
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
).split()
ORDINALS = {
    **{word: n for n, word in enumerate(_ORDINALS, start=1)},
    **{f"twenty-{word}": 20 + n for n, word in enumerate(_ORDINALS[:9], start=1)},
    "thirtieth": 30,
    "thirty-first": 31,
}
_ORDINAL = "(?:" + "|".join(sorted(ORDINALS, key=len, reverse=True)) + ")"
# A date as people write it: 2026-03-14, 14 March 2026, March 14(th), 2026, the fourteenth of
# March. Named groups let compaction/key_facts.py read every form as one.
DATE_RE = re.compile(
    r"\b(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})\b"
    rf"|\b(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH})(?:,?\s+(?P<y1>\d{{4}}))?\b"
    rf"|\b(?P<m2>{_MONTH})\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y2>\d{{4}})\b)?"
    rf"|\b(?:the\s+)?(?P<w3>{_ORDINAL})\s+of\s+(?P<m3>{_MONTH})(?:,?\s+(?P<y3>\d{{4}})\b)?",
    re.IGNORECASE,
)
MONTHS = {name: n for n, name in enumerate(_MONTHS, start=1)}
# An error code or a constant: E4471, ERR-42, HTTP_503, CONNECTION_RESET.
CODE_RE = re.compile(r"\b(?:[A-Z]{1,5}-?\d{2,}|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b")
# An identifier as code names it: `in backticks`, snake_case, camelCase, a call().
IDENTIFIER_RE = re.compile(
    r"`(?P<code>[^`\n]{2,60})`|\b[A-Za-z][A-Za-z0-9]*_\w+\b|\b[a-z]+(?:[A-Z][a-z0-9]*)+\b"
    r"|\b[A-Za-z_]\w*\(\)"
)
# Quoted words, a few (a quoted sentence is a message quoted, not a name for something):
# straight or curly double quotes, or single quotes not inside a word ("it's", "the users'
# names" are not quotes).
QUOTE_RE = re.compile(
    r'"(?P<q1>[^"\n]{3,40})"|“(?P<q2>[^”\n]{3,40})”|(?<!\w)\'(?P<q3>[^\'\n]{3,40})\'(?!\w)'
)
# The person naming themselves, with the name: the one fact a later restatement replaces.
OWN_NAME_RE = re.compile(
    r"\b(?i:my name is|my name's|call me|i am called|i'm called)\s+[A-Z][\w'-]*(?: [A-Z][\w'-]*)*"
)
# Two or more capitalised words in a row, not opening the sentence: a person, a product, a place.
PROPER_NAME_RE = re.compile(r"(?<=\S )[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
# The same in a fact already cut to its clause, where the name may come first.
_FRAGMENT_NAME_RE = re.compile(r"(?:(?<=\S )|^)[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
_DECISION_RE = re.compile(
    r"\b(decid\w*|decision|chose|chosen|agreed|settled on|going with|we will|we'll|let's)\b",
    re.IGNORECASE,
)
# A number worth keeping: three digits or more, a decimal or a time, a unit or a currency, or a
# code such as E4471. "Turn 3" and "two or 3 options" are not facts.
NUMBER_RE = re.compile(
    r"\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d{3,}\b|\b\d+[.:]\d+\b|[$€£]\s?\d[\d,.]*\d|[$€£]\s?\d|\b\d+\s?(?:%|(?:ms|s|kb|mb|gb|tb|px|euros?|dollars?)\b)"
    r"|\b[A-Z]{1,4}-?\d{2,}\b",
    re.IGNORECASE,
)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=\S)")
# Where a clause ends: punctuation before a space, a dash, or "and"/"but" before a new subject
# ("My name is Ada and my project lives in /srv/engine" states two facts, as "The service
# listens on port 8443 and its config is /etc/app.yaml" does).
CLAUSE_END_RE = re.compile(
    r"[,;:()\[\]]\s+|\s+[-–—]\s+|\s+(?:and|but|so)\s+(?=(?:my|our|your|the|we|i|it|its|they|"
    r"their|he|his|she|her|you|this|that)\b)",
    re.IGNORECASE,
)
# Words a fact does without: they take room and say nothing about the thing.
_ARTICLES = frozenset({"the", "a", "an"})
# Words a fact neither opens nor ends with.
_LOOSE_ENDS = _ARTICLES | frozenset(
    "and or but so that which to of with from in on at for by as is are was were its their "
    "it now then also just we i".split()
)
# Which side of what matched says what it is: a name and a decision are followed by what they
# did or chose; a path and a number are preceded by what they are.
_GROWS_RIGHT = frozenset({"name", "decision"})
# A fact as the brief writes it: "- (#12) staging server listens on port 8443" (the message);
# a key fact it noted, "- (in #12) ...".
_LINE_RE = re.compile(r"^- \((in )?#(\d+)\) (.+)$")


@dataclass(frozen=True)
class Fact:
    kind: str  # one of KINDS
    seq: int  # the message that stated it
    text: str  # the clause around what matched, on one line, at most PER_FACT characters
    # A key fact of a message (either role) the brief would otherwise drop, noted in its facts
    # (compaction/key_facts.py): it has the room the person's own facts leave.
    noted: bool = False

    @property
    def key(self) -> str:
        """What makes two facts the same: the person's own name is one fact however often it is
        restated (the latest wins); any other is its words, case and spacing aside."""
        if self.kind == "name" and OWN_NAME_RE.search(self.text):
            return "own name"
        return " ".join(re.findall(r"\w+", self.text.lower()))

    def line(self) -> str:
        return f"- ({'in ' if self.noted else ''}#{self.seq}) {self.text}"


def _matches(text: str, *, fragment: bool = False) -> dict[str, re.Match[str]]:
    """The first match of each kind's rule in `text`, most important kind first. A question
    states nothing, whatever it names ("Does port 8443 look right?"): it matches none. The
    person's questions are in the brief with their messages, not among its facts."""
    if text.rstrip().endswith("?"):
        return {}
    rules = {
        "name": OWN_NAME_RE.search(text)
        or (_FRAGMENT_NAME_RE if fragment else PROPER_NAME_RE).search(text),
        "decision": _DECISION_RE.search(text),
        "path": URL_RE.search(text) or PATH_RE.search(text),
        "number": NUMBER_RE.search(text),
        "date": DATE_RE.search(text),
        "identifier": IDENTIFIER_RE.search(text),
        "quote": QUOTE_RE.search(text),
    }
    return {kind: match for kind, match in rules.items() if match is not None}


def kind_of(text: str, *, fragment: bool = False) -> str | None:
    """The most important kind of fact `text` states, or None: for a sentence, two words state
    nothing ("Turn 101.", "Why not?"); a fact already cut to its clause may open with its name."""
    if not fragment and len(text.split()) < MIN_WORDS:
        return None
    return next(iter(_matches(text, fragment=fragment)), None)


def sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in _SENTENCE_END_RE.split(line.strip()) if s]


def clauses(sentence: str) -> list[str]:
    """A sentence's clauses; a question is one, asked whole (and states no fact)."""
    if sentence.endswith("?"):
        return [sentence]
    return [c.strip() for c in CLAUSE_END_RE.split(sentence) if c.strip()]


def fact_of(clause: str) -> tuple[str, str] | None:
    """(kind, text) of the fact a clause states, or None: the words around every match of the
    rules (or, when they are too far apart, around the most important one), growing first on
    the side that says what it is, until PER_FACT; its kind is the most important one it
    holds, as `kind_of` finds it again in a brief."""
    found = _matches(clause)
    if not found:
        return None
    anchor = next(iter(found))
    start = min(m.start() for m in found.values())
    end = max(m.end() for m in found.values())
    if len(" ".join(_words(clause[start:end]))) > PER_FACT:
        # Too far apart: around the most important match that holds a thing, not a verb of
        # deciding ("decided the audit log moves to PostgreSQL 16.2": the 16.2).
        anchor = next((k for k in found if k != "decision"), anchor)
        start, end = found[anchor].span()
    # Whole words: the match may begin or end inside one ("$5" of "$500").
    start = clause.rfind(" ", 0, start) + 1
    end = len(clause) if (space := clause.find(" ", end)) < 0 else space
    core, left, right = _words(clause[start:end]), _words(clause[:start]), _words(clause[end:])
    words = _grown(core, left, right, anchor in _GROWS_RIGHT)
    while len(words) > 1 and words[0].lower() in _LOOSE_ENDS:
        words = words[1:]
    while len(words) > 1 and words[-1].lower().rstrip(".,;:!") in _LOOSE_ENDS:
        words = words[:-1]
    text = " ".join(words)
    text = text.rstrip(".,;:!")
    kind = kind_of(text, fragment=True)
    if kind is None or len(words) < MIN_WORDS or len(text) > PER_FACT:
        return None
    return kind, text


def _words(text: str) -> list[str]:
    """The words of `text` without its articles (a fact is a note, not a quotation)."""
    return [w for w in text.split() if w.lower() not in _ARTICLES]


def _grown(core: list[str], left: list[str], right: list[str], right_first: bool) -> list[str]:
    """`core` with as many neighbouring words as fit in PER_FACT: from the side that says what
    it is, then from the other."""
    words, size = list(core), len(" ".join(core))
    for to_right in (right_first, not right_first):
        source = list(right) if to_right else list(reversed(left))
        for word in source:
            if size + 1 + len(word) > PER_FACT:
                break
            words = [*words, word] if to_right else [word, *words]
            size += 1 + len(word)
    return words


def facts_of(entries: Sequence[Entry]) -> list[Fact]:
    """Every fact the person's messages among `entries` state, in order, without repeats."""
    found = []
    for entry in entries:
        if not entry.starts_user_turn:
            continue
        for sentence in sentences(entry.text):
            if len(sentence.split()) < MIN_WORDS:
                continue
            for clause in clauses(sentence):
                if (fact := fact_of(clause)) is not None:
                    found.append(Fact(fact[0], entry.seq, fact[1]))
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
        if match and (kind := kind_of(match.group(3), fragment=True)) is not None:
            found.append(Fact(kind, int(match.group(2)), match.group(3), bool(match.group(1))))
    return found


def within(facts: Sequence[Fact], budget: int, most: int) -> tuple[list[Fact], list[Fact]]:
    """(kept, left out): at most `most` facts whose lines fit in `budget` characters. The kinds
    take turns, each its earliest fact first (a name, a decision, a path, a number,
    then each kind's second...), so every kind keeps some and what is left out is the latest of
    each: the facts the person stated early (who they are, where the work lives, what was
    settled) are never stated again, while the latest are still quoted whole in the brief of
    their own span."""
    turn: dict[tuple[bool, str], int] = {}
    ranked = []
    for i, fact in sorted(enumerate(facts), key=lambda p: p[1].seq):
        kind = (fact.noted, fact.kind)
        turn[kind] = turn.get(kind, -1) + 1
        ranked.append((fact.noted, turn[kind], KINDS.index(fact.kind), i))
    kept_at, used = set(), 0
    for *_, i in sorted(ranked):
        size = len(facts[i].line()) + 1
        if len(kept_at) < most and used + size <= budget:
            kept_at.add(i)
            used += size
    kept = [f for i, f in enumerate(facts) if i in kept_at]
    return sorted(kept, key=lambda f: f.seq), [f for i, f in enumerate(facts) if i not in kept_at]
