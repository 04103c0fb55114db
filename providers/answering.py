"""Whether a text answers a question, for the offline demo model: plain functions over strings.

A question asks about a subject (“my cat”, “the S3 bucket”, “the heron staging server”) and
sometimes for a kind of value (a name, a number, an identifier such as an address or a path, or
some specific value). A text answers it when it mentions every word of the subject and, when a
kind is asked for, holds a value of that kind that the question does not already contain: “The
restart script is called restart.sh” does not say what the cat is called; “legal has to approve
the region before we pick an S3 bucket name” names no bucket.

The question is read by its shape, not by a list of expected questions: the wh-word, the words
between it and the auxiliary verb (“what S3 bucket name did…”: the last of them is the kind
asked for, the ones before it narrow the subject), and the content words after it, less the
verbs that only frame the asking (say, suggest, decide…) and, with no auxiliary, the verb that
follows “who” or “which box”. Words are compared by a light stem, so “listens” and “listen”,
“crashed” and “crash” agree. Without a part-of-speech tagger, a verb after a subject of several
words ("does the heron server listen on") stays in the subject: an answer must say it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A word: letters and digits, with inner dots, dashes, slashes and apostrophes (S3, restart.sh,
# acme-invoices-eu, /etc/x, don't). Runs of word characters joined by runs of those marks: the
# two classes are disjoint, so a long run of marks costs no backtracking.
TOKEN_RE = re.compile(r"/?\w+(?:[./'’@:-]+\w+)*")
# Where a sentence ends (after its mark): a text split there, its questions are left out.
SENTENCE_RE = re.compile(r"(?<=[.!?…\n])")
# A quoted value: a few words between quotes or backticks (“Bluebird”, `acme-logs`), not a
# quoted sentence.
QUOTED_RE = re.compile(r"[“\"‘`]([^”\"’`.!?\n]{2,40})[”\"’`]")
# What a sentence, a quotation or a list item starts after: a capital there is no sign of a name.
OPENERS = frozenset('.!?:;…“"‘([)-*#')

WH = frozenset("what which who whom whose where when how".split())
AUXILIARIES = frozenset(
    """
    is are was were am be been do does did have has had will would can could should shall may
    might must 's
    """.split()
)
# Words that carry no subject: articles, pronouns, prepositions, the auxiliaries.
FUNCTION_WORDS = AUXILIARIES | frozenset(
    """
    a an the this that these those my mine our ours your yours his her hers its their theirs i
    me we us you he she it they them of to in on at by for from with about into onto over under
    and or but if as so than then there here again ever already still just also now up out
    today tonight tomorrow yesterday currently lately recently anymore
    """.split()
)
# Verbs that frame the asking (what was said, suggested, decided about it), not its subject.
FRAMING = frozenset(
    """
    say said tell told mention suggest propose recommend ask give gave remember recall decide
    choose chose pick agree settle note write wrote think thought mean meant
    """.split()
)
# What asks for a name (“what is my cat called”, “what bucket name”, “who”).
NAMING = frozenset("name names named call called title".split())
# What asks for where something is: an identifier (a URL, a path, a host, an address with its
# digits), which the answer gives without repeating the word ("the staging DB is at
# postgres://10.2.3.4:5432/app" answers "What is the staging DB address?").
LOCATING = frozenset("address url uri link path host hostname ip endpoint dsn location".split())
# Kinds of value that are numbers.
NUMBERS = frozenset(
    """
    number port count amount price cost budget total size version year age limit many much long
    old big far often percent percentage
    """.split()
)


@dataclass(frozen=True)
class Asked:
    """What a question asks about: the stems an answer must mention, and the kind of value it
    must hold ("name", "number", "identifier", "value"; None: no value, only the subject)."""

    subject: frozenset[str]
    kind: str | None
    words: frozenset[str]  # every word of the question, lower case: no value of its own


def asked(question: str) -> Asked:
    """Read a question's subject and the kind of value it asks for."""
    tokens = [t.lower() for t in TOKEN_RE.findall(question)]
    words = frozenset(tokens)
    at = next((i for i, t in enumerate(tokens) if t in WH), None)
    if at is None:  # "Is it snowing in Oslo?": its words are its subject
        return Asked(frozenset(map(stem, _content(tokens))), None, words)
    wh, rest = tokens[at], tokens[at + 1 :]
    kind = None
    phrase: list[str] = []
    if wh in {"who", "whom", "whose"}:
        kind = "name"
        rest = _past_verb(rest)  # "Who owns the checklist?": the subject is the checklist
    elif wh == "how" and rest and rest[0] in NUMBERS:
        kind, rest = "number", rest[1:]
    elif wh in {"what", "which"}:
        # "What S3 bucket name did I suggest?": the words before the auxiliary name the kind
        # (the last) and narrow the subject (the others). "Which team owns it?": no auxiliary,
        # the next word is the kind.
        end = next((i for i, t in enumerate(rest) if t in AUXILIARIES), None)
        phrase = [t for t in rest[: 1 if end is None else end] if t not in FUNCTION_WORDS]
        rest = rest[end:] if end is not None else _past_verb(rest[1:])
        if phrase:
            head = phrase.pop()
            kind = _kind_of(head)
        elif (after := _ordered_content(rest)) and len(after) > 1 and after[-1] in LOCATING:
            # "What is the staging DB address?": the last word names the kind, the rest the
            # subject (alone, "What is the address?", it stays the subject).
            kind, rest = "identifier", [t for t in rest if t != after[-1]]
    said = _content(rest)
    if kind is None and said & NAMING:
        kind = "name"  # "What is my cat called?"
    subject = set(phrase) | (said - NAMING)
    if not subject and kind == "name":
        subject = said & NAMING - {"call", "called"}  # "What did I say my name was?": the name
    return Asked(frozenset(map(stem, subject)), kind, words)


def answers(question: Asked, text: str) -> bool:
    """Whether `text` holds what `question` asks about: every stem of its subject, and a value of
    the kind it asks for. Questions inside the text answer nothing and are left out."""
    if not question.subject and question.kind is None:
        return False  # nothing says what it asks about ("What do you think?")
    said = _statements(text.replace("**", ""))
    tokens = TOKEN_RE.findall(said)
    if not question.subject <= {stem(t) for t in tokens}:
        return False
    if question.kind == "value":  # "What colour is the boat?": some word the question lacks
        return bool(_content([t.lower() for t in tokens]) - question.words)
    return question.kind is None or any(
        _of_kind(value, question.kind) for value in values(said, question.words)
    )


def values(text: str, known: frozenset[str] = frozenset()) -> list[str]:
    """The specific values a text holds, but for the `known` words (the question's own): quoted
    text, names (a capital inside a sentence), identifiers (a word with a digit, a dot, a dash, a
    slash or an underscore inside), numbers."""
    found = [q.strip() for q in QUOTED_RE.findall(text) if len(q.split()) <= 3]
    for match in TOKEN_RE.finditer(text):
        token = match.group()
        if token.lower() in known:
            continue
        # What precedes it, up to a few characters back (a whole prefix per word would cost
        # the square of a long line).
        before = text[max(0, match.start() - 16) : match.start()]
        said = before.rstrip()
        starts = not said or "\n" in before[len(said) :] or said[-1] in OPENERS
        inner = token[1:]
        named = token[0].isupper() and not starts and not _pronoun(token)
        if named or any(c.isdigit() for c in token) or re.search(r"[./_-]", inner):
            found.append(token)
    return found


def stem(word: str) -> str:
    """A light stem: plural, -ing, -ed and a final e dropped (listens, listen; decided, decide)."""
    w = word.lower().strip("'’")
    if w.endswith(("'s", "’s")):
        w = w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


def _statements(text: str) -> str:
    """The text without its questions (a sentence up to its question mark)."""
    if "?" not in text:
        return text
    return " ".join(s for s in SENTENCE_RE.split(text) if not s.rstrip().endswith("?"))


def _past_verb(tokens: list[str]) -> list[str]:
    """What follows the verb that opens `tokens` ("owns the checklist": the checklist): with no
    auxiliary, the word after "who" or "which box" is the verb, which relates the value asked
    for to the subject ("Which box holds the key?" is answered by "the key is in the blue
    box"). Unless it is the auxiliary itself."""
    return tokens if tokens and tokens[0] in AUXILIARIES else tokens[1:]


def _content(tokens: list[str]) -> frozenset[str]:
    """The words that say what a question is about: not function words, not the asking's."""
    return frozenset(_ordered_content(tokens))


def _ordered_content(tokens: list[str]) -> list[str]:
    return [t for t in tokens if t not in FUNCTION_WORDS and stem(t) not in _FRAMING]


def _kind_of(head: str) -> str:
    """The kind of value a question's head word asks for ("bucket name": a name)."""
    if head in NAMING:
        return "name"
    if head in NUMBERS:
        return "number"
    return "identifier" if head in LOCATING else "value"


def _of_kind(value: str, kind: str) -> bool:
    if kind == "number":
        return any(c.isdigit() for c in value)
    if kind == "identifier":  # a URL, a path, a host, an address: digits or marks inside
        return re.search(r"\w[\d./:_@-]|\d", value) is not None
    return not re.fullmatch(r"[\d.,:/-]+", value)  # a name: a word or identifier, not a number


def _pronoun(token: str) -> bool:
    """I, I'll, I'm: capitals that name nobody."""
    return token == "I" or token[:2] in {"I'", "I’"}


_FRAMING = frozenset(map(stem, FRAMING))
