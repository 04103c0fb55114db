"""Links to the person's other conversations, built by the app, never taken from the model.

A reply that used the recall tools (tools/recall.py) was told which conversations it found:
search_history names each hit's conversation by id and title (`conversation 3 “Trip”`),
read_messages and read_attachment by id. Those tools only ever read the user's own
conversations, so the ids in their results are the ones this reply may link to. Where the reply's
text then names one of them, the name becomes a link to its page, its address made here from the
id; a link the model wrote itself to a conversation page is rebuilt the same way, or unlinked when
its id is not one the tools named. Pure functions over the message's blocks and markdown-it's
tokens: no query, so every bubble renders the same on the page and in a turn's frames.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.urls import reverse
from markdown_it.token import Token

from core import runtime
from providers.blocks import result_text, tool_results, tool_uses

RECALL_TOOLS = frozenset({"search_history", "read_messages", "read_attachment"})
# How a recall tool's result names a conversation: "conversation 3", then its title when it
# has one (search_history), in the curly quotes the tools write.
NAMED = re.compile(r"\bconversation (\d+)(?: “[^”\n]{0,300}”)?")
# A conversation's page in a link the model wrote: the id, and the message it opens at.
PAGE = re.compile(r"^/conversations/(\d+)/(?:\?at=(\d+))?(?:#msg-(\d+))?$")


def named_conversations(content: Iterable | None) -> frozenset[int]:
    """The conversations the recall tools' results in these blocks name (refusals left out:
    "There is no conversation 9 of this user's" names none)."""
    recall = {b.get("id") for b in tool_uses(content) if b.get("name") in RECALL_TOOLS}
    ids = set()
    for block in tool_results(content):
        if block.get("tool_use_id") in recall and not block.get("is_error"):
            ids.update(int(m.group(1)) for m in NAMED.finditer(result_text(block)))
    return frozenset(ids)


def page_url(conversation_id: int, seq: int | None = None) -> str:
    """A conversation's page (opening at message `seq`), from the pattern worked out once per
    process, as the bubbles' pin buttons are."""
    memo = runtime.current().memo
    if "conversation-url" not in memo:
        memo["conversation-url"] = reverse("conversation", args=[0]).replace("/0/", "/{}/")
    url = memo["conversation-url"].format(conversation_id)
    return f"{url}?at={seq}#msg-{seq}" if seq is not None else url


def link_conversations(tokens: list[Token], named: frozenset[int]) -> None:
    """Make the names of `named` conversations in these tokens' text links to their pages, and
    every link the text already holds to a conversation page the app's own (or plain text, for
    a conversation not in `named`). In place; code spans and blocks are left as they are."""
    for token in tokens:
        if token.type == "inline" and token.children:
            token.children = _linked(token.children, named)


def _linked(children: list[Token], named: frozenset[int]) -> list[Token]:
    out: list[Token] = []
    depth = 0
    dropped: list[bool] = []  # for each open link: unlinked (its close is dropped too)
    for child in children:
        if child.type == "link_open":
            href = _rebuilt(str(child.attrGet("href") or ""), named)
            drop = href == ""
            dropped.append(drop)
            depth += 1
            if drop:
                continue
            if href is not None:
                child.attrs = {"href": href}
        elif child.type == "link_close":
            depth -= 1
            if dropped and dropped.pop():
                continue
        elif child.type == "text" and depth == 0 and named:
            out.extend(_named_links(child, named))
            continue
        out.append(child)
    return out


def _rebuilt(href: str, named: frozenset[int]) -> str | None:
    """A link's address made by the app when it leads to a conversation page: "" to unlink
    one the recall tools did not name; None for any other link (left to the sanitiser)."""
    found = PAGE.match("".join(href.split()))
    if found is None:
        if href.lstrip().startswith("/conversations/"):
            return ""  # another page of a conversation's, or one written oddly: not the app's
        return None
    conversation, at, anchor = found.groups()
    if int(conversation) not in named:
        return ""
    seq = at or anchor
    return page_url(int(conversation), int(seq) if seq else None)


def _named_links(text: Token, named: frozenset[int]) -> list[Token]:
    parts: list[Token] = []
    at = 0
    for match in NAMED.finditer(text.content):
        if int(match.group(1)) not in named:
            continue
        parts.append(_text(text.content[at : match.start()]))
        link = Token("link_open", "a", 1)
        link.attrs = {"href": page_url(int(match.group(1)))}
        parts += [link, _text(match.group(0)), Token("link_close", "a", -1)]
        at = match.end()
    if not parts:
        return [text]
    parts.append(_text(text.content[at:]))
    return [p for p in parts if p.type != "text" or p.content]


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token
