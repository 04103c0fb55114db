"""Model output is untrusted: render it as markdown, then sanitise the HTML.

Raw HTML in the source is escaped by the parser (html=False) and the output is cleaned again by an
allow-list sanitiser, so a reply carrying `<script>` or `<img onerror=...>` renders inert even if
the parser ever let something through.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_parser = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
    ["table", "strikethrough"]
)

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}}
# Built once: `nh3.clean` builds its sanitiser from these sets on every call, which cost twice
# the sanitising itself (every reply is rendered when it closes).
_cleaner = nh3.Cleaner(
    tags=ALLOWED_TAGS,
    attributes=ALLOWED_ATTRIBUTES,
    url_schemes={"http", "https", "mailto"},
    link_rel="noopener noreferrer nofollow",
)


def render_markdown(text: str) -> str:
    return _cleaner.clean(_parser.render(text or ""))
