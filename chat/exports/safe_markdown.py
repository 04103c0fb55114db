"""Markdown that stays in its place and stays inert: untrusted text (what people typed, what
models and tools answered) written into one Markdown document with other messages, so that
nothing inside one message reaches past it, and no reader turns any of it into live HTML.

People open exports in many readers, and they disagree: Python-Markdown passes raw HTML through
and knows no backslash before `<`, commonmark keeps `javascript:` links, attribute lists
(`{: onclick=…}`) add attributes. So outside code, `<` and `&` are written as entities (every
reader shows them as the characters they were), `[` and `]` are escaped except around a plain
http(s) or mailto link, and `{` is escaped; code fences are rewritten as fences longer than any
run of backticks or tildes inside, closed by the same run, at the left margin, where every
fence-aware reader agrees on them, or, when they hold what a reader that knows no fences would
turn into HTML or a link, as indented code, which every reader knows. Headings are demoted below
the document's own. Text whose structure a reader could read another way (code inside a list or
quote holding `<`, `[` or `&`) is shown whole as code. The result is checked with a CommonMark
parser with raw HTML on.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]#~{}|!()])")
_HTML_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKTICKS = re.compile(r"`+")
_FENCE_RUNS = re.compile(r"`+|~+")
# Parsed with raw HTML on, as other Markdown readers may: to find what would be read as HTML.
_structure = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_ATX = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)")
_INFO = re.compile(r"[A-Za-z0-9_+#.-]+")
SAFE_SCHEMES = ("http://", "https://", "mailto:")
# What outside code is kept as it is: a plain http(s)/mailto link or image (no brackets,
# parentheses, quotes or spaces in its parts) and an autolink to one.
_KEPT = re.compile(
    r"!?\[[^\[\]\n\\`]*\]\((?:https?://|mailto:)[^\s()<>\"'\\`]*\)"
    r"|<(?:https?://|mailto:)[^\s<>\"'\\`]*>"
)
# A run of backslashes before a character that is written another way: an odd run escaped it.
_SPECIAL = re.compile(r"(\\*)([<&\[\]{])")
EXPORT_HEADING_LEVELS = 3  # title, sections, messages: a message's own headings go below them


def inline(text: str) -> str:
    """A value on one line of the export (a title, a label, an error): whitespace collapsed,
    HTML's characters as entities and Markdown's punctuation escaped, so it reads as the text
    it is."""
    text = " ".join(str(text).split())
    text = "".join(_HTML_SPECIAL.get(char, char) for char in text)
    return _INLINE_SPECIAL.sub(r"\\\1", text)


def code_span(text: str) -> str:
    """`text` as inline code, whatever backticks it holds."""
    text = " ".join(str(text).split())
    ticks = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def verbatim(text: str, info: str = "") -> str:
    """Text shown as it is, as a code block. Fenced, in a fence longer than any run of backticks
    or tildes in it (so nothing inside can close it, in CommonMark or in readers that close a
    fence only with the same run), unless it holds what a reader that knows no fences would
    read as HTML or a link in it (`<`, `](`, `][`, `]:`): then indented, which every reader
    knows."""
    text = _lines(text)
    if _UNSAFE_AS_TEXT.search(text):
        return _indented(text)
    longest = max((len(run) for run in _FENCE_RUNS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    match = _INFO.match(info.strip())
    return f"{fence}{match.group(0) if match else ''}\n{text}\n{fence}"


# What, read as Markdown rather than code, could become HTML or a link.
_UNSAFE_AS_TEXT = re.compile(r"<|\]\s*[(\[:]")


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" if line.strip() else "" for line in text.split("\n"))


def quoted(text: str) -> str:
    """A block quote of Markdown: every block inside ends where the quote ends."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def contained(text: str, *, in_quote: bool = False) -> str:
    """Message Markdown that cannot reach past its own end, outrank the export's headings, or
    become HTML in any reader (see the module's docstring). Text it cannot make so is shown
    verbatim whole: in a fence, or `in_quote` (where readers disagree on fences) indented."""
    text = _lines(text).strip("\n")
    if not text.strip():
        return ""
    written = _escaped_outside_code(text)
    if written is not None:
        # Escaping can end an HTML block early, so fences are found again in what it wrote.
        written = _fences_rewritten(written, in_quote)
    if written is None or not _inert(written, text):
        written = _indented(text) if in_quote else verbatim(text, "text")
    else:
        written = _headings_demoted(written).strip("\n")
    if written.startswith("    ") and not in_quote:
        # Indented code right after a list (the block before, in the same message) would be
        # read as the list's text: a line of its own ends any list first.
        written = f"{AS_WRITTEN}\n\n{written}"
    return written


AS_WRITTEN = "*(as written:)*"


def _code_lines(tokens) -> set[int]:
    return {
        line
        for token in tokens
        if token.map and token.type in ("fence", "code_block")
        for line in range(*token.map)
    }


def _escaped_outside_code(text: str) -> str | None:
    tokens = _structure.parse(text)
    lines: list[str | None] = text.split("\n")
    for first, end in _text_blocks(tokens, _code_lines(tokens), len(lines)):
        escaped = _escaped("\n".join(lines[first:end]))
        if escaped is None:
            return None
        lines[first] = escaped
        lines[first + 1 : end] = [None] * (end - first - 1)
    return "\n".join(line for line in lines if line is not None)


def _fences_rewritten(text: str, in_quote: bool) -> str | None:
    """Top-level fences as fences every fence-aware reader agrees on. None: code in a list or a
    quote (or anywhere, `in_quote`) holds `<`, `[` or `&`: a reader that does not see the code
    there would read it as Markdown."""
    lines: list[str | None] = text.split("\n")
    for token in _structure.parse(text):
        if token.map is None or token.type not in ("fence", "code_block"):
            continue
        if token.level != 0 or in_quote:
            if any(char in token.content for char in "<[&"):
                return None
        elif token.type == "fence":
            first, end = token.map
            # Set apart by blank lines: indented code cannot interrupt a paragraph as a fence can.
            block = verbatim(token.content.removesuffix("\n"), token.info)
            lines[first] = block if block.startswith("`") else f"\n{block}\n"
            lines[first + 1 : end] = [None] * (end - first - 1)
    return "\n".join(line for line in lines if line is not None)


def _text_blocks(tokens, code: set[int], count: int) -> list[tuple[int, int]]:
    """Runs of lines outside code blocks, each cut where a top-level block starts (so code spans
    are found within the block they are in)."""
    starts = {token.map[0] for token in tokens if token.map and token.level == 0}
    blocks, first = [], None
    for index in range(count + 1):
        if first is not None and (index == count or index in code or index in starts):
            blocks.append((first, index))
            first = None
        if index < count and index not in code and first is None:
            first = index
    return blocks


def _escaped(block: str) -> str | None:
    """A block's text outside code spans and kept links with `<` and `&` as entities and
    brackets and braces escaped. None: a code span over lines holds `<` (a reader that reads raw
    HTML before code spans would find it)."""
    out, at = [], 0
    for start, end in _code_span_ranges(block):
        if "\n" in block[start:end] and "<" in block[start:end]:
            return None
        out.append(_escaped_text(block[at:start]))
        out.append(block[start:end])
        at = end
    out.append(_escaped_text(block[at:]))
    return "".join(out)


def _escaped_text(text: str) -> str:
    out, at = [], 0
    for kept in _KEPT.finditer(text):
        out.append(_special(text[at : kept.start()]))
        link = kept.group(0)
        # A link's words are text too (its brackets stay); an autolink is kept whole.
        if not link.startswith("<"):
            close = link.index("](")
            head = "!" if link.startswith("!") else ""
            words = link[len(head) + 1 : close]
            link = f"{head}[{_special(words)}{link[close:]}"
        out.append(link)
        at = kept.end()
    out.append(_special(text[at:]))
    return "".join(out)


def _special(text: str) -> str:
    def written(match: re.Match) -> str:
        slashes, char = match.group(1), match.group(2)
        escaped = len(slashes) % 2 == 1
        if char in "<&":  # an entity needs no backslash: one that escaped it goes
            return slashes[: len(slashes) - escaped] + _HTML_SPECIAL[char]
        return match.group(0) if escaped else f"{slashes}\\{char}"

    return _SPECIAL.sub(written, text)


def _inert(written: str, original: str) -> bool:
    """No raw HTML, no link or image other than http(s)/mailto, no reference definition, and
    the same code spans as the original: checked by a CommonMark parse with raw HTML on."""
    env: dict = {}
    tokens = _structure.parse(written, env)
    if env.get("references"):
        return False
    for token in tokens:
        if token.type in ("html_block", "html_inline"):
            return False
        for child in token.children or ():
            if child.type == "html_inline":
                return False
            if child.type in ("link_open", "image"):
                target = child.attrGet("href") or child.attrGet("src") or ""
                if not str(target).lower().startswith(SAFE_SCHEMES):
                    return False
    return _code_spans(tokens) == _code_spans(_structure.parse(original))


def _code_span_ranges(block: str) -> list[tuple[int, int]]:
    """Where code spans sit: a run of backticks not escaped up to the next run of the same
    length (the parse that checks the result catches what this misreads)."""
    runs = [
        (m.start(), m.end())
        for m in _BACKTICKS.finditer(block)
        if (m.start() - len(block[: m.start()].rstrip("\\"))) % 2 == 0
    ]
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


def _code_spans(tokens) -> list[str]:
    return [
        c.content
        for token in tokens
        if token.type == "inline"
        for c in token.children or ()
        if c.type == "code_inline"
    ]


def _headings_demoted(text: str) -> str:
    lines: list[str | None] = text.split("\n")
    tokens = _structure.parse(text)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None and token.level == 0:
            _demote(lines, token, *token.map, tokens[i + 1].content)
    return "\n".join(line for line in lines if line is not None)


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


def _lines(text: str) -> str:
    return str(text).replace("\r\n", "\n").replace("\r", "\n")
