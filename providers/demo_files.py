"""What the offline demo model says of files (providers/demo.py): for each file it received, its
name, kind, size and token cost, and for a text file or a PDF the line of it that best matches
the question; and which cleared file a question asks about, to get it back with read_attachment.

It reads the request as the model would: images and documents with their bytes inline
(providers/sent_files.py describes them as their uploads were, and reads a text document's or a
PDF's words with pypdf); a file cleared from the window is a line naming it, "[image:
build-error.png (#12), 1,045 tokens, cleared: read_attachment brings it back]".
"""

from __future__ import annotations

import re

from providers.answering import TOKEN_RE, answers, asked, stem
from providers.blocks import block_text, result_text, text_of, type_of
from providers.sent_files import NAMING_RE, described, words

READ_TOOL = "read_attachment"
# A file cleared from the window, as the line in its place names it: its name and message.
CLEARED_RE = re.compile(
    r"\[(?:image|PDF|text): (?P<name>[^\]\n]+?) \(#(?P<seq>\d+)\)[^\]\n]*read_attachment[^\]\n]*\]"
)
# Words that ask about a file without naming it ("the screenshot"): one cleared file is that one.
FILE_WORDS = frozenset("file files image picture screenshot photo pdf document attachment".split())


def received(content: object) -> list[tuple[dict, str]]:
    """The files in a message's content (the API's blocks, in a tool result too): each as its
    upload's description, with its words (a text file's or a PDF's; "" for an image)."""
    found, before = [], None
    for block in content if isinstance(content, list) else ():
        if type_of(block) == "tool_result":
            found += received(block.get("content"))
        name = NAMING_RE.fullmatch(text_of(before) or "")
        meta = described(block, name.group(1) if name else "")
        if meta is not None:
            found.append((meta, words(block)))
        before = block
    return found


def block_words(block: dict) -> str:
    """A block as the demo reads it: a document as its words, an image as nothing (the line
    before it names it), a tool result's files the same way, anything else as text."""
    if type_of(block) in ("image", "document") and isinstance(block.get("source"), dict):
        return words(block)
    if type_of(block) == "tool_result":
        return result_text(block, other=block_words)
    return block_text(block)


def typed(content: object) -> str:
    """What the person typed: the text blocks, less the lines that name their images."""
    if isinstance(content, str):
        return content
    said = (text_of(b) for b in content or () if type_of(b) == "text")
    return "\n".join(t for t in said if t and not NAMING_RE.fullmatch(t))


def describe(files: list[tuple[dict, str]], question: str) -> tuple[list[str], bool]:
    """Each file said in a line: name, kind, size, tokens, and the line of its words that best
    matches `question` (when it is a question) or else its first line; and whether a line of
    them answers the question."""
    answered, lines = False, []
    for meta, text in files:
        line = f"- {_said(meta)}"
        best, answering = best_line(text, question) if "?" in question else (_first(text), False)
        answered |= answering
        if best and "?" in question:
            line += f"; the line that best matches your question: “{_short(best)}”"
        elif best:
            line += f"; it begins: “{_short(best)}”"
        elif not text and not str(meta.get("media_type", "")).startswith("image/"):
            line += "; I could not read any words in it"
        lines.append(line)
    return lines, answered


def best_line(text: str, question: str) -> tuple[str | None, bool]:
    """The line of `text` holding the most of what the question asks about (one that answers
    it first), and whether it answers; None when no line shares a word of its subject."""
    asking = asked(question)
    best, best_score = None, (False, 0)
    for line in (line.strip() for line in text.splitlines()):
        if not line or "?" in line:
            continue
        held = {stem(t) for t in TOKEN_RE.findall(line)}
        score = (answers(asking, line), len(asking.subject & held))
        if score[1] and score > best_score:
            best, best_score = line, score
    return best, best_score[0]


def cleared_asked_about(window_text: str, question: str, present: set[str]) -> dict | None:
    """read_attachment's arguments for the cleared file the question asks about (by its name,
    or, the only one cleared, as "the file" or "the screenshot"), unless a file of that name is
    in the window anyway (given back already); None when it asks about none."""
    cleared = {m["name"]: int(m["seq"]) for m in CLEARED_RE.finditer(window_text)}
    cleared = {name: seq for name, seq in cleared.items() if name not in present}
    if not cleared:
        return None
    lowered = question.lower()
    asked_words = {t.lower() for t in TOKEN_RE.findall(question)}
    named = [n for n in cleared if n.lower() in lowered or _stem_of(n) in asked_words]
    if not named and len(cleared) == 1 and asked_words & FILE_WORDS:
        named = list(cleared)
    if len(named) != 1:
        return None
    return {"seq": cleared[named[0]], "name": named[0]}


def _stem_of(name: str) -> str:
    """A file's name without its extension, as a question may say it ("build-error")."""
    return name.rsplit(".", 1)[0].lower() if "." in name else name.lower()


def _said(meta: dict) -> str:
    """ "build-error.png: an image, 800×600 px, 48.2 kB, about 640 tokens"."""
    media = str(meta.get("media_type") or "")
    if media.startswith("image/"):
        what = f"an image, {meta.get('width', 0)}×{meta.get('height', 0)} px"
    elif media == "application/pdf":
        pages = int(meta.get("pages") or 0)
        what = f"a PDF of {pages:,} page{'s' if pages != 1 else ''}"
    else:
        what = "a text file"
    name = meta.get("name") or "file"
    return f"{name}: {what}, {_size(meta)}, about {int(meta.get('tokens') or 0):,} tokens"


def _size(meta: dict) -> str:
    size = int(meta.get("bytes") or 0)
    if size >= 1_000_000:
        return f"{size / 1_000_000:,.1f} MB"
    return f"{size / 1000:,.1f} kB" if size >= 1000 else f"{size} bytes"


def _first(text: str) -> str | None:
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
