"""Untrusted text as HTML: model output rendered as markdown, a person's message as typed with
its code fences, a tool's result as markdown that keeps its lines; every one sanitised.

Raw HTML in the source is escaped by the parser (html=False) and the output is cleaned again by an
allow-list sanitiser, so a reply carrying `<script>` or `<img onerror=...>` renders inert even if
the parser ever let something through.
"""

from __future__ import annotations

import nh3
from django.utils.html import escape
from markdown_it import MarkdownIt
from markdown_it.token import Token

from render.links import link_conversations

_parser = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
    ["table", "strikethrough"]
)
# A tool's result is often one item a line (a search's hits): its line breaks are kept.
_lined = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
# Finds the code fences in what a person typed, and nothing else (no lists, emphasis, headings).
_fences = MarkdownIt("zero").enable("fence")

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}}


def _same_site(tag: str, attribute: str, value: str) -> str | None:
    """A link's address, unless it is protocol-relative: `//host/x` (and `/\\host`, and either
    with tabs or line breaks inside, which browsers drop) leaves the app for another host as an
    https link would, without saying so. Paths in the app (`/conversations/2/`) stay."""
    if attribute != "href":
        return value
    bare = "".join(value.split()).replace("\\", "/")
    return None if bare.startswith("//") else value


# Built once: `nh3.clean` builds its sanitiser from these sets on every call, which cost twice
# the sanitising itself (every reply is rendered when it closes).
_cleaner = nh3.Cleaner(
    tags=ALLOWED_TAGS,
    attributes=ALLOWED_ATTRIBUTES,
    url_schemes={"http", "https", "mailto"},
    link_rel="noopener noreferrer nofollow",
    attribute_filter=_same_site,
)


def render_markdown(text: str, named: frozenset[int] | None = None) -> str:
    """A model's markdown. A message's (`named`: the conversations its recall tools named,
    render/links.py) has those linked where the text names them, and no other conversation."""
    tokens = _parser.parse(text or "")
    if named is not None:
        link_conversations(tokens, named)
    return _cleaner.clean(_parser.renderer.render(tokens, _parser.options, {}))


def render_lined(text: str, named: frozenset[int] | None = None) -> str:
    """A tool's result: markdown whose every line shows as a line, and whose inline marks
    (emphasis, code spans, links) stay within their line. Results are often one item a line,
    and a search's snippets are cut from messages mid-markup: half a code span in one hit must
    not swallow the next."""
    tokens = _lined.parse(text or "")
    for token in tokens:
        if token.type == "inline" and "\n" in token.content:
            children: list[Token] = []
            for i, line in enumerate(token.content.split("\n")):
                if i:
                    children.append(Token("softbreak", "br", 0))  # `breaks`: a <br>
                children += _lined.parseInline(line)[0].children or []
            token.children = children
    if named is not None:
        link_conversations(tokens, named)
    return _cleaner.clean(_lined.renderer.render(tokens, _lined.options, {}))


def render_typed(text: str) -> str:
    """A person's message as they typed it: its code fences as code blocks, everything else as
    text whose line breaks and indentation the page keeps (`.typed` is `pre-wrap`); a star or a
    leading "#" a person types is not markup. Escaped, then sanitised like the rest."""
    lines = (text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    parts, at = [], 0
    for token in _fences.parse("\n".join(lines)):
        if token.type != "fence" or token.map is None:
            continue
        start, end = token.map
        parts.append(_typed_text(lines[at:start]))
        language = token.info.split()[0] if token.info.strip() else ""
        label = f' class="language-{escape(language)}"' if language else ""
        parts.append(f"<pre><code{label}>{escape(token.content)}</code></pre>")
        at = end
    parts.append(_typed_text(lines[at:]))
    return _cleaner.clean("".join(parts))


def _typed_text(lines: list[str]) -> str:
    text = "\n".join(lines).strip("\n")
    return f"<p>{escape(text)}</p>" if text.strip() else ""
