"""The key facts of what a summary replaces, and which of them the summary still states: the
measure every compaction boundary records ("kept 14 of 16 key facts", and the ones lost).

A key fact is one token the rules of compaction/facts.py find (a number, an identifier, an
error code, a path, a URL, a name, a quoted string, a date) with the words around it that say
what it is ("heron staging port 41234"). It is kept when its token, normalised, appears in the
summary: case, spacing and thousands separators aside, and a date in any of its forms
("14 March 2026" is kept by "2026-03-14"). The words around it are only for people to read.

What a summary replaces is the summary before it and the messages it folds, both roles: so a
fact the running brief held and the next summary drops counts as lost, at the boundary that
dropped it. Plain functions over plain values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from compaction import facts
from compaction.entries import Entry

# At most this many facts are counted per boundary: the kinds take turns, earliest first, as
# the brief's facts do (compaction/facts.within), so a long span is measured on every kind.
MOST = 60
# The kinds in the order their rules claim a stretch of text: a URL before the path inside it,
# a date before its numbers, a quoted string before the words in it.
KINDS: tuple[str, ...] = (
    "url",
    "path",
    "date",
    "quote",
    "code",
    "identifier",
    "number",
    "name",
)
_RULES: dict[str, re.Pattern[str]] = {
    "url": facts.URL_RE,
    "path": re.compile(rf"(?<![\w/])/?(?:{facts.PATH_RE.pattern})"),
    "date": facts.DATE_RE,
    "quote": facts.QUOTE_RE,
    "code": facts.CODE_RE,
    "identifier": facts.IDENTIFIER_RE,
    "number": facts.NUMBER_RE,
    "name": facts.PROPER_NAME_RE,
}
# A brief's own references to messages, "(#12)", and its notes, "(3 facts left out...)": not
# facts of the conversation.
_SEQ_REF_RE = re.compile(r"\((?:in )?#(\d+)\)")
_NOTE_RE = re.compile(r"^\s*-?\s*\(\d+ [^()]*\)\s*$")
# A line that is one quotation: a message a brief quotes, read as what it says.
_QUOTED_LINE_RE = re.compile(r'^\s*-?\s*(?:\((?:in )?#\d+\)\s*)?["“](.*)["”…]\s*$')
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}\b)")
_DIGITS_RE = re.compile(r"\d+(?:[.:]\d+)*")


@dataclass(frozen=True)
class KeyFact:
    kind: str  # one of KINDS
    seq: int  # the message that stated it (0: the summary before)
    key: str  # the token, normalised: what a summary must contain
    text: str  # the token with the words around it, on one line, for people

    def as_fact(self) -> facts.Fact:
        """The key fact as the brief writes it in its facts section (compaction/brief.py)."""
        text = self.text if facts.kind_of(self.text, fragment=True) else self.key
        kind = facts.kind_of(text, fragment=True) or "number"
        return facts.Fact(kind, self.seq, text, noted=True)


@dataclass(frozen=True)
class Tally:
    """What a boundary records: how many key facts there were, and which the summary lost."""

    total: int
    lost: tuple[str, ...]

    @property
    def kept(self) -> int:
        return self.total - len(self.lost)

    def as_dict(self) -> dict:
        return {"total": self.total, "kept": self.kept, "lost": list(self.lost)}


def normalised(text: str) -> str:
    """Text as keys are compared: lower case, one space, no thousands separators."""
    return " ".join(_THOUSANDS_RE.sub("", text).lower().split())


def date_key(match: re.Match[str]) -> str | None:
    """A date match as one form: "2026-03-14", or "03-14" without a year; None if no date."""
    g = {k: v for k, v in match.groupdict().items() if v}
    if "iy" in g:
        year, month, day = g["iy"], int(g["im"]), int(g["id"])
    else:
        n = next(k[-1] for k in g if k[0] == "m")
        month = facts.MONTHS[g[f"m{n}"].lower()]
        day = facts.ORDINALS[g["w3"].lower()] if n == "3" else int(g[f"d{n}"])
        year = g.get(f"y{n}")
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{year}-{month:02}-{day:02}" if year else f"{month:02}-{day:02}"


def _key(kind: str, match: re.Match[str]) -> str | None:
    if kind == "date":
        return date_key(match)
    if kind == "quote" or (kind == "identifier" and match.group("code")):
        token = next(v for v in match.groups() if v)
    elif kind == "number":
        digits = _DIGITS_RE.search(_THOUSANDS_RE.sub("", match.group(0)))
        token = digits.group(0) if digits else ""
    else:
        # A path, a URL or a code at the end of a sentence: its full stop is not part of it.
        token = match.group(0).rstrip(".")
    token = normalised(token)
    return token if len(token) >= 2 else None


def tokens(text: str) -> list[tuple[str, str, int, int]]:
    """(kind, key, start, end) of every key token in `text`, in order: each stretch of text is
    the first kind's whose rule claims it (a path inside a URL is the URL's)."""
    found: list[tuple[str, str, int, int]] = []
    taken: list[tuple[int, int]] = []
    for kind in KINDS:
        for match in _RULES[kind].finditer(text):
            start, end = match.span()
            if any(start < b and a < end for a, b in taken):
                continue
            key = _key(kind, match)
            if key is not None:
                taken.append((start, end))
                found.append((kind, key, start, end))
    return sorted(found, key=lambda t: t[2])


def _context(sentence: str, start: int, end: int) -> str:
    """The token with the words before it in its clause (which say what it is), then after,
    to PER_FACT."""
    cuts = [m.span() for m in facts.CLAUSE_END_RE.finditer(sentence)]
    opens = max([b for a, b in cuts if b <= start], default=0)
    closes = min([a for a, b in cuts if a >= end], default=len(sentence))
    line, start, end = sentence[opens:closes], start - opens, end - opens
    start = line.rfind(" ", 0, start) + 1
    end = len(line) if (space := line.find(" ", end)) < 0 else space
    core = line[start:end].split()
    left, right = line[:start].split(), line[end:].split()
    words = []
    for word in reversed(left):
        if len(" ".join([word, *words, *core])) > facts.PER_FACT:
            break
        words.insert(0, word)
    words += core
    for word in right:
        if len(" ".join([*words, word])) > facts.PER_FACT:
            break
        words.append(word)
    return " ".join(words).strip(".,;:!?()[]")


def of_text(text: str, seq: int) -> list[KeyFact]:
    """The key facts of one text, in order, one per key."""
    found = []
    lines = [
        quoted.group(1) if (quoted := _QUOTED_LINE_RE.match(line)) else line
        for line in text.splitlines()
        if not _NOTE_RE.match(line)
    ]
    for sentence in facts.sentences(_SEQ_REF_RE.sub("", "\n".join(lines))):
        sentence = sentence.lstrip("-*#> ").strip()
        for kind, key, start, end in tokens(sentence):
            found.append(KeyFact(kind, seq, key, _context(sentence, start, end)))
    return found


def of_span(entries: Sequence[Entry], previous_summary: str | None = "") -> list[KeyFact]:
    """The key facts of what a summary replaces: the summary before it and the messages it
    folds (both roles), without repeats (the first statement wins), at most MOST. A pinned
    message is not replaced (it rides verbatim in every window), so its facts are not at stake."""
    found = []
    for line in (previous_summary or "").splitlines():
        # A brief's line names the message it comes from, "(#12)": the fact keeps its place.
        cited = _SEQ_REF_RE.search(line)
        found += of_text(line, int(cited.group(1)) if cited else 0)
    for entry in entries:
        if not entry.pinned:
            found += of_text(entry.text, entry.seq)
    unique: dict[str, KeyFact] = {}
    for fact in found:
        unique.setdefault(fact.key, fact)
    return bounded(list(unique.values()), MOST)


def bounded(found: list[KeyFact], most: int) -> list[KeyFact]:
    """At most `most` facts: the kinds take turns, each its earliest first, in order."""
    turn: dict[str, int] = {}
    ranked = []
    for i, fact in enumerate(found):
        turn[fact.kind] = turn.get(fact.kind, -1) + 1
        ranked.append((turn[fact.kind], i))
    chosen = sorted(i for _, i in sorted(ranked)[:most])
    return [found[i] for i in chosen]


def states(summary: str, fact: KeyFact) -> bool:
    """Whether `summary` states the fact: its key there as a whole token, or its date in any
    form (a date without a year is stated by the same day in any year)."""
    text = normalised(summary)
    if fact.kind == "date":
        dates = {key for m in facts.DATE_RE.finditer(summary) if (key := date_key(m)) is not None}
        if fact.key in dates or any(d.endswith("-" + fact.key) for d in dates):
            return True
    return re.search(rf"(?<![\w.]){re.escape(fact.key)}(?![\w]|\.\w)", text) is not None


def lost(found: Sequence[KeyFact], summary: str) -> list[KeyFact]:
    """The facts `summary` does not state, in order."""
    return [fact for fact in found if not states(summary, fact)]


def tally(entries: Sequence[Entry], previous_summary: str | None, summary: str) -> Tally:
    """What a boundary with `summary` over `entries` (after `previous_summary`) records."""
    found = of_span(entries, previous_summary)
    return Tally(len(found), tuple(f.text for f in lost(found, summary)))
