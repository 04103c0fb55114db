"""Content blocks, read in one place.

A message's content is the API's list of blocks (text, tool_use, tool_result, ...), stored as
plain dicts and read by prompt building, token estimates, exports, the search index and the
bubbles alike. What a block's type is and what text it holds is decided here, once: above all
what a tool_result holds, since the API lets its content be a string or a list of blocks.

Plain functions over plain dicts. They never raise on a malformed block (an old row, an
import): anything that is not a block has no type and no text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable


def type_of(block: object) -> object:
    """A block's type ("text", "tool_use", "tool_result", ...); None when it has none or is not
    a block. A string for every block the API sent or the app stored; untrusted JSON (an import)
    may hold anything there, so its reader checks."""
    return block.get("type") if isinstance(block, dict) else None


def text_of(block: object) -> str:
    """A text block's text; "" for any other block."""
    return str(block.get("text") or "") if type_of(block) == "text" else ""


def result_text(block: object, other: Callable[[dict], str] | None = None) -> str:
    """What a tool_result holds, as text: its content when a string; when a list, its text
    blocks joined by newlines, any other block in it (an image) left out, or written by `other`
    when given. "" when it has no content."""
    content = block.get("content") if isinstance(block, dict) else None
    if isinstance(content, str):
        return content
    parts = []
    for inner in content if isinstance(content, list) else ():
        if type_of(inner) == "text":
            parts.append(text_of(inner))
        elif other is not None and isinstance(inner, dict):
            parts.append(other(inner))
    return "\n".join(parts)


def of_type(content: Iterable | None, kind: str) -> list[dict]:
    """The blocks of `content` of one type, in order."""
    return [b for b in content or () if type_of(b) == kind]


def texts(content: Iterable | None, sep: str = "\n") -> str:
    """The text of a message's text blocks, joined by `sep` (tool traffic left out)."""
    return sep.join(text_of(b) for b in of_type(content, "text"))


def tool_uses(content: Iterable | None) -> list[dict]:
    return of_type(content, "tool_use")


def tool_results(content: Iterable | None) -> list[dict]:
    return of_type(content, "tool_result")


def call_ids(content: Iterable | None) -> set:
    """The ids of the tool calls in `content`."""
    return {b.get("id") for b in tool_uses(content)}


def answered_ids(content: Iterable | None) -> set:
    """The ids of the calls the tool results in `content` answer."""
    return {b.get("tool_use_id") for b in tool_results(content)}


# Extended thinking: the model's reasoning before it answers, stored as the API sent it, with the
# signature that lets it be sent back (the API refuses one altered):
#     {"type": "thinking", "thinking": "…", "signature": "…"}
#     {"type": "redacted_thinking", "data": "…"}  (encrypted: nothing to show)
THINKING_TYPES = ("thinking", "redacted_thinking")


def is_thinking(block: object) -> bool:
    return type_of(block) in THINKING_TYPES


def thinking_of(block: object) -> str:
    """A thinking block's reasoning, as text; "" for any other block (a redacted one too)."""
    return str(block.get("thinking") or "") if type_of(block) == "thinking" else ""


def without_thinking(content: Iterable | None) -> list:
    """`content` without its thinking blocks. The API needs a turn's thinking back only within
    that turn (in its tool loop, signed and unchanged); from earlier turns it strips them, so a
    request leaves them out: they cost nothing, and the prefix stays cacheable."""
    return [b for b in content or () if not is_thinking(b)]


def without_empty_text(content: Iterable | None) -> list:
    """`content` without its empty text blocks, which the API refuses."""
    return [b for b in content or () if type_of(b) != "text" or text_of(b)]


# A file given to the model is stored as a block of the API's type ("image", or "document" for
# a PDF or a text file) that names its upload instead of holding its bytes:
#     {"type": "image", "attachment": {"id", "name", "media_type", "bytes", "tokens",
#                                      "width", "height", "pages"}}
# (and "range": [first, last] when read_attachment gives back some pages of a PDF)
# (chat/attachments.py writes it, and turns it into the API's base64 or text block just before a
# request or an export). The rows stay small, and every reader here works without the bytes.
FILE_TYPES = ("image", "document")


def file_of(block: object) -> dict | None:
    """A file block's description (its "attachment"); None for any other block."""
    if type_of(block) not in FILE_TYPES:
        return None
    meta = block.get("attachment")
    return meta if isinstance(meta, dict) else None


def files(content: Iterable | None) -> list[dict]:
    """The descriptions of the files in `content`, in order."""
    return [meta for b in content or () if (meta := file_of(b)) is not None]


def carried_files(content: Iterable | None) -> list[dict]:
    """The descriptions of every file a message carries, in order: its own and those inside
    its tool results (`read_attachment` gives a file back there)."""
    found = []
    for block in content or ():
        inner = block.get("content") if type_of(block) == "tool_result" else None
        found += files(inner) if isinstance(inner, list) else files([block])
    return found


def file_tokens(meta: dict) -> int:
    """What a file is estimated to cost in a request (its upload's estimate)."""
    tokens = meta.get("tokens")
    return tokens if isinstance(tokens, int) and tokens > 0 else 0


def file_kind(meta: dict) -> str:
    """What a file is, in a word: "image", "PDF" or "text"."""
    media = str(meta.get("media_type") or "")
    return "image" if media.startswith("image/") else "PDF" if media.endswith("pdf") else "text"


def file_label(meta: dict) -> str:
    """A file as one line of text: "image: build-error.png, 1,045 tokens" (what a transcript
    written as text, a bubble's title and the model's own label say)."""
    kind = file_kind(meta)
    size = ""
    if meta.get("width") and meta.get("height"):
        size = f", {meta['width']}×{meta['height']} px"
    elif meta.get("pages"):
        size = f", {meta['pages']:,} page{'s' if meta['pages'] != 1 else ''}"
        if isinstance(meta.get("range"), list) and len(meta["range"]) == 2:
            # Some pages of it, given back by read_attachment: "pages 2–3 of 5".
            size = f", pages {meta['range'][0]}–{meta['range'][1]} of {meta['pages']:,}"
    return f"{kind}: {meta.get('name') or 'file'}{size}, {file_tokens(meta):,} tokens"


def block_text(block: dict, *, everything: bool = True) -> str:
    """A block as text: a text block's text, a tool call's name and input (as JSON), a tool
    result's text. With `everything` (what the model is sent: token estimates, prompts, exports,
    bubbles) any other block, and any block other than text inside a result (an image), is
    written as its JSON; without (the search index), they are left out: nobody searches for
    them."""
    kind = type_of(block)
    if kind == "text":
        return text_of(block)
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}"
    if kind == "tool_result":
        return result_text(block, other=block_text if everything else None)
    meta = file_of(block)
    if meta is not None:  # its bytes are not text; the search index reads its upload's text
        return f"[{file_label(meta)}]" if everything else ""
    if kind == "thinking":  # what it weighs is its reasoning, not its signature
        return thinking_of(block) if everything else ""
    return json.dumps(block, sort_keys=True) if everything else ""
