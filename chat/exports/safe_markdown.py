"""Markdown that stays in its place: untrusted text (what people typed, what models and tools
answered) written into one Markdown document with other messages, so that nothing inside one
message reaches past it.

Its headings are demoted below the document's own, raw HTML is shown as text (as the chat page
shows it), a code fence left open is closed, link reference definitions are escaped (in
Markdown they are global: a definition in one message would turn words in another into links),
and verbatim parts sit in fences longer than any run of backticks inside them. Checked with the
same CommonMark parser as the chat page's, with raw HTML on, as other readers may.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>#~&])")
_BACKTICKS = re.compile(r"`+")
# Parsed with raw HTML on, as other Markdown readers may: to find what would be read as HTML.
_structure = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_ATX = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
EXPORT_HEADING_LEVELS = 3  # title, sections, messages: a message's own headings go below them


def inline(text: str) -> str:
    """A value on one line of the export (a title, a label, an error): whitespace collapsed,
    Markdown's punctuation escaped, so it reads as the text it is."""
    return _INLINE_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def code_span(text: str) -> str:
    """`text` as inline code, whatever backticks it holds."""
    text = " ".join(str(text).split())
    ticks = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fenced(text: str, info: str = "") -> str:
    """Verbatim text in a fenced block whose fence is longer than any run of backticks in it,
    so nothing inside can close it."""
    text = _lines(text)
    fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def quoted(text: str) -> str:
    """A block quote of Markdown: every block inside ends where the quote ends."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def contained(text: str) -> str:
    """Message Markdown that cannot reach past its own end or outrank the export's headings.

    Read with the same CommonMark parser as the chat page's (plus raw HTML, as other readers
    may): top-level headings are demoted below the export's own, raw HTML (blocks, and tags
    inside a paragraph) is escaped (the chat page shows raw HTML as text too), and a code fence
    left open at the end is closed, and link reference definitions are text (in Markdown they
    are global). Text whose raw HTML or definitions do not settle is fenced whole."""
    text = original = _lines(text).strip("\n")
    if not text.strip():
        return ""
    for _ in range(4):
        # Escaping an HTML block's opening line can leave its next line to open another one.
        lines = text.split("\n")
        html = [t.map[0] for t in _structure.parse(text) if t.type == "html_block" and t.map]
        for first in html:
            lines[first] = lines[first].replace("<", "\\<", 1)
        text = "\n".join(lines)
        if not html:
            break
    else:
        return fenced(text, "text")
    text = _inline_html_escaped(text)
    if text is not None:
        text = _references_escaped(text)
    if text is None:
        return fenced(original, "text")
    lines = text.split("\n")
    tokens = _structure.parse(text)
    for i, token in enumerate(tokens):
        if token.map is None or token.level != 0:
            continue  # nested blocks end with their container (a quote, a list item)
        first, end = token.map
        if token.type == "heading_open":
            _demote(lines, token, first, end, tokens[i + 1].content)
        elif token.type == "fence" and not _closed(lines, token, end):
            lines.append(token.markup[0] * len(token.markup))
    return "\n".join(line for line in lines if line is not None)


# The start of a link reference definition's line, in a quote or a list item or not.
_REFERENCE = re.compile(
    r"^((?: {0,3}>)*"  # quotes
    r"(?: {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+)?"  # a list item's marker
    r"[ \t]{0,3})\[(?=[^\]]*\]:)"  # the label, then a colon
)


def _references_escaped(text: str) -> str | None:
    """Link reference definitions made plain text (their `[` escaped), outside code. None: the
    text still defines one (a label over several lines), for the caller to fence it whole."""
    env: dict = {}
    tokens = _structure.parse(text, env)
    if not env.get("references"):
        return text
    code = {
        line
        for token in tokens
        if token.type in ("fence", "code_block") and token.map
        for line in range(*token.map)
    }
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if i not in code:
            lines[i] = _REFERENCE.sub(r"\1\\[", line, count=1)
    escaped = "\n".join(lines)
    env = {}
    _structure.parse(escaped, env)
    return None if env.get("references") else escaped


_INLINE_HTML_PASSES = 64  # tags escaped one at a time; a message with more is fenced whole


def _inline_html_escaped(text: str) -> str | None:
    """Raw HTML inside a paragraph (`<img onerror=…>`, `</b>`) escaped, so a reader that passes
    raw HTML through shows it as text, as the chat page does; code spans keep their text. None:
    the text did not settle."""
    tokens = _structure.parse(text)
    found = _inline_html(tokens)
    if not found:
        return text
    spans = _code_spans(tokens)
    # Each tag's `<` where it next occurs in its block: right unless the same text also sits in
    # a code span before it, which the parse after tells.
    escaped = _escape_in_order(text, found)
    parsed = _structure.parse(escaped)
    if not _inline_html(parsed) and _code_spans(parsed) == spans:
        return escaped
    # One tag at a time: the first occurrence whose escaping removes the tag and leaves every
    # code span as it was.
    for _ in range(_INLINE_HTML_PASSES):
        (first, end), raw = found[0]
        lines = text.split("\n")
        block = "\n".join(lines[first:end])
        at = block.find(raw)
        while at >= 0:
            candidate = "\n".join([*lines[:first], block[:at] + "\\" + block[at:], *lines[end:]])
            parsed = _structure.parse(candidate)
            left = _inline_html(parsed)
            if len(left) < len(found) and _code_spans(parsed) == spans:
                text, found = candidate, left
                break
            at = block.find(raw, at + 1)
        else:
            return None
        if not found:
            return text
    return None


def _escape_in_order(text: str, found: list[tuple[tuple[int, int], str]]) -> str:
    """Each tag's `<` escaped at its next occurrence in its block outside a code span."""
    lines = text.split("\n")
    blocks: dict[tuple[int, int], tuple[str, list, list[int]]] = {}  # block, its spans, escapes
    for where, raw in found:
        if where not in blocks:
            block = "\n".join(lines[where[0] : where[1]])
            blocks[where] = (block, _code_span_ranges(block), [])
        block, spans, escapes = blocks[where]
        at = block.find(raw, escapes[-1] + 1 if escapes else 0)
        while at >= 0 and any(start <= at < end for start, end in spans):
            at = block.find(raw, at + 1)
        if at >= 0:
            escapes.append(at)
    for (first, end), (block, _, escapes) in sorted(blocks.items(), reverse=True):
        for at in reversed(escapes):
            block = block[:at] + "\\" + block[at:]
        lines[first:end] = [block]
    return "\n".join(lines)


def _code_span_ranges(block: str) -> list[tuple[int, int]]:
    """Where code spans sit: a run of backticks up to the next run of the same length (the
    finer rules, such as a backslash before a backtick, are left to the parse that checks)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(block)]
    ranges, i = [], 0
    while i < len(runs):
        start, end = runs[i]
        close = next(
            (j for j in range(i + 1, len(runs)) if runs[j][1] - runs[j][0] == end - start), None
        )
        if close is None:
            i += 1
        else:
            ranges.append((start, runs[close][1]))
            i = close + 1
    return ranges


def _inline_html(tokens) -> list[tuple[tuple[int, int], str]]:
    """Each inline HTML tag with the lines of the block it sits in, in order."""
    found, where = [], None
    for token in tokens:
        if token.map is not None:
            where = tuple(token.map)
        if token.type == "inline" and where is not None:
            found += [(where, c.content) for c in token.children or () if c.type == "html_inline"]
    return found


def _code_spans(tokens) -> list[str]:
    return [
        c.content
        for token in tokens
        if token.type == "inline"
        for c in token.children or ()
        if c.type == "code_inline"
    ]


def _demote(lines: list, token, first: int, end: int, content: str) -> None:
    level = min(6, int(token.tag[1]) + EXPORT_HEADING_LEVELS)
    if token.markup.startswith("#"):
        match = _ATX.match(lines[first])
        if match is not None:
            lines[first] = match.group(1) + "#" * level + lines[first][match.end() :]
        return
    # A setext heading (text underlined with === or ---): rewritten as one demoted ATX line.
    lines[first] = "#" * level + " " + " ".join(content.split())
    for index in range(first + 1, end):
        lines[index] = None


def _closed(lines: list, token, end: int) -> bool:
    """Whether a fence's last line is its closing fence (an unclosed one runs to the end)."""
    first = token.map[0]
    if end - 1 <= first or end > len(lines):
        return False
    match = _FENCE_CLOSE.match(lines[end - 1])
    opening = token.markup
    return bool(match) and match.group(1)[0] == opening[0] and len(match.group(1)) >= len(opening)


def _lines(text: str) -> str:
    return str(text).replace("\r\n", "\n").replace("\r", "\n")
