"""What a person's instructions for a summary ask for, read by rules: the kinds of facts they
name ("Keep every port, path and name") and a topic's words ("keep everything about the billing
migration"). The rule-based brief (compaction/brief.py) gives the facts they name the first claim
on its room; a compaction steered by them says what they got (`report`). A model's summary gets
the instructions themselves (compaction/prompt.py). Plain functions over plain values.

A kind here is one of the fact kinds compaction/facts.py and compaction/key_facts.py find (a
name, a path, a URL, a number, a date, an identifier or code, a decision, a quote),
or a port: a number a text calls a port ("port 8443") or that follows a host ("host:6379").
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from compaction import facts, key_facts
from compaction.entries import Entry

# The words people use for each kind, singular (a trailing "s" is dropped before looking up).
# One word may stand for several kinds: "ids" are identifiers and codes such as INV-2026-0417.
_WORDS: dict[str, tuple[str, ...]] = {
    "port": ("port",),
    "path": ("path", "file", "filename", "folder", "directory", "dir"),
    "name": ("name", "person", "people", "who", "owner", "customer", "company"),
    "url": ("url", "link", "uri", "endpoint", "address"),
    "identifier": ("id", "identifier", "code", "constant"),
    "number": ("number", "figure", "amount", "price", "cost", "total", "version", "count"),
    "date": ("date", "deadline", "day"),
    "error": ("error", "exception", "failure", "bug", "fix", "traceback", "crash"),
    "decision": ("decision", "choice", "agreement"),
    "quote": ("quote", "quotation"),
}
_KIND_OF_WORD = {word: kind for kind, words in _WORDS.items() for word in words}
# How a kind is said in a sentence, plural.
PLURALS = {
    "port": "ports",
    "path": "paths",
    "name": "names",
    "url": "URLs",
    "identifier": "ids",
    "number": "numbers",
    "date": "dates",
    "error": "errors",
    "decision": "decisions",
    "quote": "quotes",
}
# How one fact of a kind is named in a list of what did not fit.
SINGULAR = {
    **{kind: kind for kind in PLURALS},
    "url": "URL",
    "identifier": "id",
    "topic": "fact",
}
# Words of an instruction that are neither a kind nor a topic: how people ask.
_ASKING = frozenset(
    """a about above after all also an and any anything are as at be below by can could detail
    details do don't each every everything exact exactly focus for from full give i in include
    including into is it its just keep keeping kept let list make me mention more most much my
    need not of on only or our please preserve retain save short should so some state stated
    summarise summarize summary that the their them these this those to us very want we what
    with word words would you your
    brief concise short shorter long longer detailed bullet bullets point points section
    sections tone style clear simple plain write""".split()
)
_WORD_RE = re.compile(r"[a-z0-9][a-z0-9'-]*")
# A port: "port 8443", "ports 80 and 443" (the first), or a number after a host and a colon
# (a dotted name or address, localhost, an IPv6 address in brackets; "09:30" is a time).
_PORT_RE = re.compile(
    r"\bports?\s+(?:number\s+)?(\d{2,5})\b"
    r"|(?:\blocalhost|\b[\w-]+(?:\.[\w-]+)+|\]):(\d{2,5})\b",
    re.I,
)
# A name ending in a source file's extension: "views.py:42" is a line, not a port.
_FILE_RE = re.compile(rf"\.(?:{'|'.join(facts.SOURCE_EXTENSIONS)})$", re.I)
# A URL of any scheme (redis://, s3://, postgres://), not only the web's.
_ANY_URL_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_ERROR_RE = re.compile(r"\b(?:error|exception|traceback|failed|fails|crash\w*)\b", re.I)


@dataclass(frozen=True)
class Steer:
    """What instructions ask for: kinds of facts, in the order named, and a topic's words."""

    kinds: tuple[str, ...] = ()
    topic: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.kinds or self.topic)

    def describe(self) -> str:
        """What they ask for, as a sentence says it: "ports, paths and names", "facts about
        billing migration"."""
        parts = [PLURALS[kind] for kind in self.kinds]
        if self.topic:
            parts.append(f"facts about {' '.join(self.topic)}")
        return and_list(parts)

    def wants_fact(self, fact: key_facts.KeyFact, context: str = "") -> str | None:
        """The first kind named that a key fact is (judged by its token: the words around it
        only say what it is), "topic" when it or `context` is about the topic; else None."""
        held = kinds_in(fact.token or fact.key)
        if held & {"number", "url"} and any(
            fact.token.endswith(port) for port in ports_in(fact.text)
        ):
            held.add("port")
        found = next((kind for kind in self.kinds if kind in held), None)
        if (
            found is None
            and self.topic
            and (about(self.topic, fact.text) or about(self.topic, context))
        ):
            return "topic"
        return found

    def wants(self, text: str, context: str = "") -> str | None:
        """The first kind named that `text` (a fact) holds, "topic" when it or `context` (the
        message that stated it) is about the topic; None when it is not asked for."""
        held = kinds_in(text)
        found = next((kind for kind in self.kinds if kind in held), None)
        if found is None and self.topic and (about(self.topic, text) or about(self.topic, context)):
            return "topic"
        return found


def parse(instructions: str) -> Steer:
    """The kinds and topic `instructions` name: "Keep every port, path and name" asks for ports,
    paths and names; "keep everything about the billing migration" for what is about "billing
    migration". Words that are neither a kind nor how people ask make the topic."""
    kinds: list[str] = []
    topic: list[str] = []
    for word in _WORD_RE.findall(instructions.lower()):
        word = word.strip("'-")
        kind = _KIND_OF_WORD.get(word) or _KIND_OF_WORD.get(_singular(word))
        if kind is not None:
            if kind not in kinds:
                kinds.append(kind)
        elif word not in _ASKING and len(word) > 1 and word not in topic:
            topic.append(word)
    return Steer(tuple(kinds), tuple(topic))


def _singular(word: str) -> str:
    if word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") else word


def asked(
    steer: Steer, entries: Sequence[Entry], previous_summary: str | None
) -> list[tuple[key_facts.KeyFact, str]]:
    """The key facts of what a summary replaces (`entries` after `previous_summary`) that the
    instructions ask for, each with the kind it was asked as: the one list the brief's note
    and the notice after a compaction both count."""
    if not steer:
        return []
    said = {e.seq: e.text for e in entries}
    found = key_facts.of_span(entries, previous_summary)
    return [(f, kind) for f in found if (kind := steer.wants_fact(f, said.get(f.seq, "")))]


def ports_in(text: str) -> list[str]:
    """The ports `text` names ("port 8443", "host:6379"); a file and line ("views.py:42") is
    not a host."""
    found = []
    for match in _PORT_RE.finditer(text):
        host = match.group(0).split(":")[0]
        if match.group(2) and _FILE_RE.search(host):
            continue
        found.append(match.group(1) or match.group(2))
    return found


def kinds_in(text: str) -> set[str]:
    """Every kind of fact `text` holds: the kinds of its key tokens and of its clause, as
    compaction/key_facts.py and compaction/facts.py find them, and ports, URLs of any scheme
    and errors."""
    held = {kind for kind, *_ in key_facts.tokens(text)}
    if (kind := facts.kind_of(text, fragment=True)) is not None:
        held.add(kind)
    if "code" in held:
        held.add("identifier")
    if ports_in(text):
        held.add("port")
    if _ANY_URL_RE.search(text):
        held.add("url")
    if "code" in held or _ERROR_RE.search(text):
        held.add("error")
    return held


def about(topic: Sequence[str], text: str) -> bool:
    """Whether `text` is about the topic: it holds most of its words (two of two, two of three),
    a plural or a longer form of a word counting ("migrations" for "migration")."""
    if not topic or not text:
        return False
    words = set(_WORD_RE.findall(text.lower()))
    stems = {_singular(w) for w in words} | words
    found = sum(1 for w in topic if w in words or _singular(w) in stems)
    return found >= max(1, math.ceil(len(topic) * 2 / 3))


def plural(word: str) -> str:
    """A kind's name, plural: "ports", "URLs", "ids"."""
    return (
        PLURALS.get(word)
        or next((PLURALS[k] for k, v in SINGULAR.items() if v == word), None)
        or f"{word}s"
    )


def and_list(parts: Sequence[str]) -> str:
    if len(parts) < 2:
        return "".join(parts)
    return f"{', '.join(parts[:-1])} and {parts[-1]}"


def report(
    instructions: str,
    entries: Sequence[Entry],
    previous_summary: str | None,
    summary: str,
    *,
    by_rules: bool,
    room: int,
    regenerates: str | None = None,
) -> str:
    """What a summary asked for with `instructions` got, for the person who wrote them: how
    many of the key facts of what it replaces (`entries` after `previous_summary`) that they
    name it states, and which it does not; for the rule-based brief, the room it had. A
    regeneration (`regenerates`: the draft it replaces) says whether the draft changed. Empty
    when there is nothing to say (no instructions, and a model that read them as words)."""
    steer = parse(instructions)
    wanted = [fact for fact, _ in asked(steer, entries, previous_summary)]
    missing = key_facts.lost(wanted, summary)
    # Named as people read them, each once (two tokens of one clause may read the same).
    lost = list(dict.fromkeys(_named(f) for f in missing))
    if not instructions.strip():
        got = ""
    elif not steer:
        got = (
            "Your instructions name no kind of fact and no topic the summary without a model "
            f"acts on ({and_list(list(PLURALS.values()))}, or a topic's words)."
            if by_rules
            else ""
        )
    elif not wanted:
        got = f"The messages this summary replaces hold no {steer.describe()}."
    elif not missing:
        got = (
            f"It states all {len(wanted)} {steer.describe()} of the messages it replaces."
            if len(wanted) > 1
            else f"It states the one fact of its kind ({steer.describe()}) that they hold."
        )
    else:
        shown = "; ".join(lost[:5]) + (f"; and {len(lost) - 5} more" if len(lost) > 5 else "")
        stated = len(wanted) - len(missing)
        got = (
            f"It states {stated} of the {len(wanted)} {steer.describe()} of the messages it "
            f"replaces; not stated: {shown}."
        )
    if by_rules and wanted:
        got += f" The summary without a model had room for {room:,} characters."
    if regenerates is None:
        return got
    if summary.strip() != regenerates.strip():
        head = "New draft written with your instructions." if instructions.strip() else ""
        return f"{head or 'New draft written.'} {got}".strip()
    if by_rules:
        # Rules give the same brief for the same messages and the same asks.
        why = (
            f"{got} Rules write the same draft from the same messages: only instructions that "
            "ask for other kinds of facts, or another topic, change it."
        )
    else:
        why = got or "The model wrote the same summary again."
    return f"The new draft is the same as the one before. {why.strip()}"


def _named(fact: key_facts.KeyFact) -> str:
    return f"{fact.text} (#{fact.seq})" if fact.seq else fact.text
