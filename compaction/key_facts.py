"""The key facts of what a summary replaces, and which of them the summary still states: the
measure every compaction boundary records ("kept 14 of 16 key facts", and the ones lost), and
that a draft waiting for review shows, counted again as the person edits it.

A key fact is one whole token a person or a reply stated, found by the rules of
compaction/facts.py (a number with its unit, an identifier, an error code, a path, a URL of
any scheme, a name, a quoted string, a date), with the words around it that say what it is
("broker is Redis 7.2 at redis://10.4.2.17:6379/3"). A token is whole: a rule's match grows
to the run of characters it sits in, so an address is one fact, not "10.4" and "2.17" cut out
of it. What is never a fact:
- a question (a sentence that asks), and a greeting's or thanks' name ("Hi Ada Lovelace!");
- a quotation that is a sentence ("“Thanks, that's great!”": a message quoted, not a name);
- a token cut short by an ellipsis (a quotation cut to length: the message holds it whole);
- what the conversation says about itself, in the text the app or a model wrote (replies and
  the summary before; not what a person typed): a count of its own units ("9 messages", "about
  1,096 tokens") and a reference to one of its messages ("message #123").

A fact is recorded once: its identity is its key, the words it is made of with case,
punctuation, quotes, Markdown escapes, line breaks and thousands separators aside ("redis 10 4
2 17 6379 3"); a date's key is the day in one form. It is kept when the summary's words hold
its key's words in a row, whatever is around them, or for a date the same day in any form
("14 March 2026" is kept by "2026-03-14"). The words around it are only for people to read.

What a summary replaces is the summary before it and the messages it folds, both roles: so a
fact the running brief held and the next summary drops counts as lost, at the boundary that
dropped it. Plain functions over plain values.
"""

from __future__ import annotations

import bisect
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
    # Two or more capitalised words, not opening the sentence (a bracket does not open it:
    # "(Central European Time)").
    "name": re.compile(r"(?:(?<=\S )|(?<=\())[A-Z][a-z]+(?: [A-Z][a-z]+)+\b"),
}
# The kinds whose match is one run of characters: it grows to the whole run it sits in.
_RUNS = frozenset({"url", "path", "code", "identifier", "number"})
# What ends a run: space, brackets, quotes, commas, semicolons, and TeX's backslash and caret.
_RUN_STOP = frozenset(" \t\n()[]{}<>\"'`“”‘’,;\\^")
# A run's trailing punctuation ends the sentence, not the token.
_TRAILING = ".:!?…*_\"'”’\\"
# A path names a place: it opens with a slash, has two, or names a file ("1/2" is a fraction,
# "TV/film" two words).
_PLACE_RE = re.compile(r"^(?:~?\.?/|[^/]*$|.*/.*/|.*\.[A-Za-z]\w{0,4}$)")
# Where a clause opens: its first word is capitalised as the opening, not as a name ("Thank
# Greg", "If Bryan", "Use Trello" after a list marker, a label or a colon).
_OPENS_RE = re.compile(r"(?:^|[.:!?*>#\"“‘-]|\d\.)\s*$")
# Words that open a name's phrase without being part of it ("Your Cover Letter").
_DETERMINERS = frozenset(
    "your my our their his her this that these those its any each every".split()
)
# A brief's own references to messages, "(#12)", and its notes, "(3 facts left out...)": not
# facts of the conversation.
_SEQ_REF_RE = re.compile(r"\((?:in )?#(\d+)\)")
_NOTE_RE = re.compile(r"^\s*-?\s*\(\d+ [^()]*\)\s*$")
# A line that is one quotation: a message a brief quotes, read as what it says.
_QUOTED_LINE_RE = re.compile(r'^\s*-?\s*(?:\((?:in )?#\d+\)\s*)?["“](.*)["”…]\s*$')
# What the conversation says about itself, in text the app or a model wrote: a count of its own
# units (a window "holds 9 messages (about 1,096 tokens)") and a reference to one of its
# messages ("message #123"). A property of the conversation, not a fact stated in it.
# Only the window's own units: "under 2,000 words" or "280 characters" in a reply is a fact
# of the work, not of the window.
_MEASURE_RE = re.compile(
    r"\b\d[\d,.]*\s+(?:messages?|tokens?|turns?|facts?|replies|summaries|compactions?)\b"
    r"|\bmessages?\s+#?\d+\b",
    re.IGNORECASE,
)
# A line of the brief's facts section, "- (#12) ...": a fact the person stated (the brief's
# facts are read from the person's messages only; its noted key facts read "(in #12)").
_PERSONS_LINE_RE = re.compile(r"^\s*- \(#\d+\) ")
# A run of non-space characters longer than this is a blob (base64, a minified line), not a
# fact: it is not read, so one pasted log cannot make the scan quadratic.
LONGEST = 256
_BLOB_RE = re.compile(rf"\S{{{LONGEST + 1},}}")
# A sentence that opens with a greeting or thanks: the name in it is the one addressed.
_GREETING_RE = re.compile(
    r"^(?:hi|hello|hey|dear|thanks|thank you|thank|cheers|bye|goodbye|good (?:morning|"
    r"afternoon|evening|night)|welcome)\b",
    re.IGNORECASE,
)
# A label of a reply's layout: a heading, or words in bold ("**Page Load Time**"). Its
# capitalised words name a part of the answer, not a person, a product or a place.
_LABEL_RE = re.compile(r"^#+ .*|\*\*[^*\n]+\*\*|__[^_\n]+__")
# A sentence that asks: its last character, closing quotes and emphasis aside, is "?".
_ASKS_RE = re.compile(r"\?[\s\"'”’*_)\]]*$")
# A cut: the text went on, so the token touching it may be a part.
_CUT_RE = re.compile(r"…|\.\.\.")
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}\b)")
# A Markdown or TeX escape: "\_", "\%" say "_" and "%" ("100\%" is 100%).
_ESCAPE_RE = re.compile(r"\\([^\w\s\\])")
# The words a key is made of: letters and digits (a run of each), and the signs of a number.
_WORD_RE = re.compile(r"[^\W_]+|[$€£%]")
_LETTERS_DIGITS_RE = re.compile(r"(?<=\d)(?=[^\W\d_])|(?<=[^\W\d_])(?=\d)")
# A unit as a number's words may spell it: one spelling each, so "30 s" is kept by "30 seconds".
_UNITS = {
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "millisecond": "ms",
    "milliseconds": "ms",
    "percent": "%",
    "dollar": "$",
    "dollars": "$",
    "usd": "$",
    "euro": "€",
    "euros": "€",
    "eur": "€",
}
_CURRENCIES = frozenset("$€£")


@dataclass(frozen=True)
class KeyFact:
    kind: str  # one of KINDS
    seq: int  # the message that stated it (0: the summary before)
    key: str  # what identifies it (`words`, or a date's day): what a summary must state
    text: str  # the token with the words around it, on one line, for people
    token: str = ""  # the token as it was written

    def as_fact(self) -> facts.Fact:
        """The key fact as the brief writes it in its facts section (compaction/brief.py)."""
        text = self.text if facts.kind_of(self.text, fragment=True) else self.token or self.key
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


def words(text: str) -> str:
    """`text` as keys are compared: its words in order, one space apart, lower case, without
    punctuation, quotes, Markdown escapes, line breaks or thousands separators, letters and
    digits apart ("INV20931" is "inv 20931"), a unit in one spelling and a currency after its
    amount ("$5,000" and "5000 dollars" are both "5000 $")."""
    found = []
    for word in _WORD_RE.findall(_THOUSANDS_RE.sub("", text).lower()):
        found += [_UNITS.get(part, part) for part in _LETTERS_DIGITS_RE.split(word)]
    i = 0
    while i < len(found) - 1:
        if found[i] in _CURRENCIES and found[i + 1].isdigit():
            found[i], found[i + 1] = found[i + 1], found[i]
            i += 1  # the sign is placed: it is not the next amount's
        i += 1
    return " ".join(found)


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


def _grown(text: str, start: int, end: int) -> tuple[int, int]:
    """The whole run of characters the match at start:end sits in, without the punctuation
    that ends its sentence: "10.4" of "redis://10.4.2.17:6379/3" is the address."""
    while start > 0 and (text[start - 1] not in _RUN_STOP or _THOUSANDS_RE.match(text, start - 1)):
        start -= 1
    while end < len(text) and (text[end] not in _RUN_STOP or _THOUSANDS_RE.match(text, end)):
        end += 1
    while end > start and text[end - 1] in _TRAILING:
        end -= 1
    while start < end and text[start] in "*_":
        start += 1
    return start, end


def _key(kind: str, match: re.Match[str], token: str) -> str | None:
    if kind == "date":
        return date_key(match)
    if kind == "quote":
        token = next(v for v in match.groups() if v)
        if token.rstrip()[-1:] in ".!?…":
            return None  # a sentence quoted: a message, read by the other rules
    elif kind == "identifier" and match.group("code"):
        token = match.group("code")
    if kind == "quote" or (kind == "identifier" and match.group("code")):
        inner = tokens(token)
        if len(inner) == 1:
            return inner[0][1]  # one token quoted ("`100 ms`") is that token, not another fact
    key = words(token)
    return key if len(key) >= 2 else None


def tokens(text: str, *, by_person: bool = True) -> list[tuple[str, str, int, int]]:
    """(kind, key, start, end) of every key token in `text`, in order: each stretch of text is
    the first kind's whose rule claims it (a path inside a URL is the URL's), grown to its whole
    run. Without `by_person` (a reply, a summary), what the conversation says about itself is
    left out."""
    # A blob is blanked first (same length, so offsets hold): every rule then reads runs of
    # at most LONGEST characters, and no regular expression backtracks over a whole blob.
    text = _BLOB_RE.sub(lambda m: " " * len(m.group(0)), text)
    found: list[tuple[str, str, int, int]] = []
    # Claimed stretches, sorted and apart: a match is checked against its neighbours only.
    taken = [] if by_person else [m.span() for m in _MEASURE_RE.finditer(text)]
    cuts = {m.start() for m in _CUT_RE.finditer(text)}
    for kind in KINDS:
        for match in _RULES[kind].finditer(text):
            start, end = match.span()
            if _claimed(taken, start, start + 1):
                continue  # inside a token already found: growing it would find that token
            if kind in _RUNS:
                start, end = _grown(text, start, end)
            if kind == "path" and not _PLACE_RE.match(text[start:end]):
                continue
            if kind == "name" and (
                _OPENS_RE.search(text, 0, start)
                or match.group(0).split()[0].lower() in _DETERMINERS
            ):
                start = text.index(" ", start) + 1  # the opening word is not the name's
                if " " not in text[start:end]:
                    continue
            if start >= end or _claimed(taken, start, end):
                continue
            if end in cuts or end + 1 in cuts:
                continue  # cut short: the token may be a part of one
            key = _key(kind, match, text[start:end])
            if key is not None:
                bisect.insort(taken, (start, end))
                found.append((kind, key, start, end))
    return sorted(found, key=lambda t: t[2])


def _claimed(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether start:end overlaps a stretch of `taken` (sorted, none overlapping another)."""
    i = bisect.bisect_left(taken, (start, end))
    return any(a < end and start < b for a, b in taken[max(0, i - 1) : i + 1])


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


def of_text(text: str, seq: int, *, by_person: bool = True) -> list[KeyFact]:
    """The key facts of one text, in order. Without `by_person`: text the app or a model wrote."""
    found = []
    lines = [
        quoted.group(1) if (quoted := _QUOTED_LINE_RE.match(line)) else line
        for line in text.splitlines()
        if not _NOTE_RE.match(line)
    ]
    said = _ESCAPE_RE.sub(r"\1", _SEQ_REF_RE.sub("", "\n".join(lines)))
    for sentence in facts.sentences(said):
        sentence = sentence.lstrip("-> ").strip()
        labels = [m.span() for m in _LABEL_RE.finditer(sentence)]
        if _ASKS_RE.search(sentence):
            continue  # a question states nothing
        greeting = _GREETING_RE.match(sentence.lstrip("*#_ ")) is not None
        shown = set()
        for kind, key, start, end in tokens(sentence, by_person=by_person):
            if kind == "name" and (greeting or any(a <= start and end <= b for a, b in labels)):
                continue  # the one addressed, or a label of the layout
            text = _context(sentence, start, end)
            # Two tokens of one clause: each its own line, so no fact is listed twice.
            text = sentence[start:end] if text in shown else text
            shown.add(text)
            found.append(KeyFact(kind, seq, key, text, sentence[start:end]))
    return found


def of_span(entries: Sequence[Entry], previous_summary: str | None = "") -> list[KeyFact]:
    """The key facts of what a summary replaces: the summary before it and the messages it
    folds (both roles), each once (the first statement wins), at most MOST. A pinned message
    is not replaced (it rides verbatim in every window), so its facts are not at stake."""
    found = []
    for line in (previous_summary or "").splitlines():
        # A brief's line names the message it comes from, "(#12)": the fact keeps its place.
        cited = _SEQ_REF_RE.search(line)
        person = _PERSONS_LINE_RE.match(line) is not None
        found += of_text(line, int(cited.group(1)) if cited else 0, by_person=person)
    for entry in entries:
        if not entry.pinned:
            found += of_text(entry.text, entry.seq, by_person=entry.starts_user_turn)
    unique: dict[str, KeyFact] = {}
    for fact in found:
        unique.setdefault(fact.key, fact)
    # A day without its year is the day stated with one ("May 15" of "May 15, 2024"); a name
    # inside a longer one is that one ("Air Max" of "Nike Air Max", "Poppy War" of "The Poppy
    # War").
    days = {key for key, fact in unique.items() if fact.kind == "date"}
    named = [f" {f.key} " for f in unique.values() if f.kind in ("name", "quote")]
    once = [
        f
        for f in unique.values()
        if not (f.kind == "date" and _yearless_of(f.key, days))
        and not (f.kind == "name" and any(f" {f.key} " in n and n != f" {f.key} " for n in named))
    ]
    return bounded(once, MOST)


def _yearless_of(key: str, days: set[str]) -> bool:
    return len(key) == 5 and any(day.endswith("-" + key) for day in days if len(day) > 5)


def bounded(found: list[KeyFact], most: int) -> list[KeyFact]:
    """At most `most` facts: the kinds take turns, each its earliest first, in order."""
    turn: dict[str, int] = {}
    ranked = []
    for i, fact in enumerate(found):
        turn[fact.kind] = turn.get(fact.kind, -1) + 1
        ranked.append((turn[fact.kind], i))
    chosen = sorted(i for _, i in sorted(ranked)[:most])
    return [found[i] for i in chosen]


def _days(summary: str) -> set[str]:
    return {key for m in facts.DATE_RE.finditer(summary) if (key := date_key(m)) is not None}


def _stated(fact: KeyFact, said: str, days: set[str]) -> bool:
    if fact.kind == "date" and (
        fact.key in days or any(day.endswith("-" + fact.key) for day in days)
    ):
        return True  # a date without a year is stated by the same day in any year
    return f" {words(fact.token) if fact.kind == 'date' else fact.key} " in said


def states(summary: str, fact: KeyFact) -> bool:
    """Whether `summary` states the fact: its key's words there in a row (the summary's words
    as `words` reads them), or its date in any form."""
    return _stated(fact, f" {words(summary)} ", _days(summary))


def lost(found: Sequence[KeyFact], summary: str) -> list[KeyFact]:
    """The facts `summary` does not state, in order."""
    said, days = f" {words(summary)} ", _days(summary)
    return [fact for fact in found if not _stated(fact, said, days)]


def tally(entries: Sequence[Entry], previous_summary: str | None, summary: str) -> Tally:
    """What a boundary with `summary` over `entries` (after `previous_summary`) records."""
    found = of_span(entries, previous_summary)
    return Tally(len(found), tuple(f.text for f in lost(found, summary)))
