"""A conversation written out for people and programs: export.json and export.md.

Both read the transcript with `.iterator()` in seq order, so a conversation of any length is
exported in a fixed number of queries without being held in memory at once (the Markdown one
is streamed as it is written). Everything in them is the owner's conversation: the views look it
up through `owned_by(request.user)` first.

Markdown is built from untrusted text (what people typed, what models and tools answered), so
nothing inside a message may reach past it: its headings are demoted below the export's own,
raw HTML is shown as text (as the chat page shows it), a code fence left open is closed, and
verbatim parts (the system prompt, tool input and output) sit in fences longer than any run of
backticks inside them.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import UTC, datetime

from asgiref.sync import sync_to_async
from markdown_it import MarkdownIt

from chat.models import Conversation, Message, duration
from chat.transcript import SHOWN_BOUNDARIES, current_branch
from chat.window import load_window
from compaction.models import Compaction
from providers import registry
from providers.tokens import block_text

# --- export.json ---------------------------------------------------------------------------------


def conversation_json(conversation: Conversation) -> dict:
    """The whole conversation for programs: every message, every compaction (whatever its
    status) and the exact window the next request would carry."""
    state = load_window(conversation)
    branch = current_branch(conversation)
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "model": conversation.model,
        "system_prompt": conversation.system_prompt,
        # Every version is listed; the ones on the user's screen are `on_branch`, which ends at
        # `branch_end`.
        "branch_end": max(branch, default=None),
        "messages": [
            {
                "seq": m.seq,
                "parent": m.parent,
                "on_branch": m.seq in branch,
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "tokens": m.tokens,
                "usage": m.usage.as_dict() if m.usage else None,
                "created_at": m.created_at.isoformat(),
            }
            for m in conversation.messages.order_by("seq").iterator()
        ],
        "compactions": [
            {
                "id": c.pk,
                "trigger": c.trigger,
                "pre_tokens": c.pre_tokens,
                "post_tokens": c.post_tokens,
                "first_kept_seq": c.first_kept_seq,
                "summary": c.summary,
                "summariser": c.summariser,
                "status": c.status,
                "created_at": c.created_at.isoformat(),
            }
            for c in Compaction.objects.filter(conversation=conversation).order_by("id")
        ],
        "window": {**state.window().as_request(), "tokens": state.tokens},
    }


# --- export.md -----------------------------------------------------------------------------------

CHUNK_MESSAGES = 200  # rows fetched per round trip by the iterator

ROLE_NAMES = {Message.Role.USER: "User", Message.Role.ASSISTANT: "Assistant"}
STATUS_NOTES = {
    Message.Status.INTERRUPTED: "Interrupted: stopped before it finished; what had arrived "
    "is kept.",
    Message.Status.ERROR: "Error: the reply failed.",
    Message.Status.CANCELLED: "Cancelled: taken back before it was sent.",
    Message.Status.QUEUED: "Queued: not sent yet when this was exported.",
    Message.Status.STREAMING: "Still being written when this was exported.",
}


def filename(conversation: Conversation, extension: str) -> str:
    return f"conversation-{conversation.pk}.{extension}"


def conversation_markdown(conversation: Conversation) -> Iterator[str]:
    """The conversation as a Markdown document, in pieces: title, model, system prompt, then
    the transcript in order, with a divider at each compaction boundary (its trigger, its token
    counts before and after, its summary quoted). Every version is there, in the order written;
    those off the branch on screen say so. Three queries, whatever its length."""
    model = registry.model_info(conversation.model)
    yield f"# {inline(conversation.title)}\n\n"
    named = code_span(model.id)
    if model.label != model.id:
        named = f"{inline(model.label)} ({named})"
    yield f"- Model: {named}, a window budget of {model.budget:,} tokens\n"
    yield f"- Started: {_when(conversation.created_at)}\n"
    yield f"- Exported: {_when(datetime.now(UTC))}\n\n"
    yield "## System prompt\n\n"
    if conversation.system_prompt.strip():
        yield fenced(conversation.system_prompt, "text") + "\n\n"
    else:
        yield "*(none)*\n\n"
    yield "## Transcript\n\n"

    boundaries = sorted(
        Compaction.objects.filter(conversation=conversation, status__in=SHOWN_BOUNDARIES),
        key=lambda row: (row.divider_seq or 0, row.pk),
    )
    waiting = iter(boundaries)
    boundary = next(waiting, None)
    branch = current_branch(conversation)
    rows = (
        conversation.messages.order_by("seq")
        .only(
            "seq",
            "parent_seq",
            "role",
            "content",
            "status",
            "error",
            "model",
            "tool_runs",
            "created_at",
        )
        .iterator(chunk_size=CHUNK_MESSAGES)
    )
    empty = True
    for message in rows:
        empty = False
        while boundary is not None and (boundary.divider_seq or 0) <= message.seq:
            yield divider(boundary)
            boundary = next(waiting, None)
        yield message_markdown(message, conversation.model, off_branch=message.seq not in branch)
    if empty:
        yield "*(no messages yet)*\n\n"
    while boundary is not None:  # a boundary past the last message (none should be)
        yield divider(boundary)
        boundary = next(waiting, None)


def message_markdown(
    message: Message, conversation_model: str = "", *, off_branch: bool = False
) -> str:
    """One message: a heading with its role, number, time and any status, then its blocks."""
    heading = [ROLE_NAMES.get(message.role, inline(message.role)), f"#{message.seq}"]
    heading.append(_when(message.created_at))
    if message.model and message.model != conversation_model:
        heading.append(inline(message.model))
    if message.status != Message.Status.COMPLETE:
        heading.append(inline(message.status))
    parts = [f"### {' · '.join(heading)}"]
    if off_branch:
        parts.append(f"*Another version, off the branch on screen: it follows #{message.parent}.*")
    note = STATUS_NOTES.get(message.status)
    if note:
        parts.append(f"*{note}*")
    if message.error:
        parts.append(f"*Error: {inline(message.error)}*")
    names = {
        b.get("id"): b.get("name", "?")
        for b in message.content or []
        if b.get("type") == "tool_use"
    }
    runs = message.tool_runs or {}
    blocks = [_block(block, names, runs) for block in message.content or []]
    blocks = [b for b in blocks if b]
    parts.extend(blocks or ["*(no text)*"])
    return "\n\n".join(parts) + "\n\n"


def _block(block: dict, names: dict, runs: dict) -> str:
    kind = block.get("type")
    if kind == "text":
        return contained(block.get("text", ""))
    if kind == "tool_use":
        name = block.get("name", "?")
        took = duration((runs.get(block.get("id")) or {}).get("ms"))
        took = f" ({took})" if took else ""
        arguments = json.dumps(block.get("input", {}), indent=2, ensure_ascii=False)
        return f"**Tool call** {code_span(name)}{took}, input:\n\n{fenced(arguments, 'json')}"
    if kind == "tool_result":
        name = names.get(block.get("tool_use_id"))
        of = f" of {code_span(name)}" if name else ""
        label = "Tool error" if block.get("is_error") else "Tool result"
        return f"**{label}**{of}:\n\n{fenced(block_text(block), 'text')}"
    if kind in ("thinking", "redacted_thinking"):
        return ""  # private reasoning is not part of what was said (nor of any window)
    return f"*({inline(str(kind))} block)*"


def divider(row: Compaction) -> str:
    """A compaction boundary between the messages it folded away and the ones after it."""
    figures = f"{row.pre_tokens:,} → {row.post_tokens:,} tokens"
    undone = (
        " (undone later: the model saw the whole messages again)"
        if row.status == Compaction.Status.UNDONE
        else ""
    )
    if row.kind == Compaction.Kind.CLEAR:
        head = (
            f"**Cleared {row.cleared_count:,} tool result{'s' if row.cleared_count != 1 else ''} "
            f"({row.trigger}) · {figures}**{undone}"
        )
        body = (
            f"Tool results before message #{row.cleared_before_seq} were replaced by short "
            "placeholders in the model's window; the transcript keeps them whole."
        )
        return f"---\n\n{head}\n\n{body}\n\n---\n\n"
    head = f"**Compaction ({row.trigger}) · {figures}**{undone}"
    by = "the model" if row.summariser == "model" else "rules (no model)"
    body = (
        f"Messages before #{row.first_kept_seq} were folded into this summary, written by "
        f"{by}; from #{row.first_kept_seq} on the model saw the messages themselves."
    )
    if row.instructions:
        body += f" Instructions: {inline(row.instructions)}"
    summary = quoted(contained(row.summary)) if row.summary.strip() else "> *(no summary text)*"
    return f"---\n\n{head}\n\n{body}\n\n{summary}\n\n---\n\n"


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


# --- Markdown that stays in its place ------------------------------------------------------------

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
    left open at the end is closed. Text whose raw HTML does not settle within a few passes is
    fenced whole."""
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


# --- streaming -----------------------------------------------------------------------------------

STREAM_CHUNK_CHARS = 64_000


def batched(pieces: Iterable[str], size: int = STREAM_CHUNK_CHARS) -> Iterator[str]:
    """Pieces joined into chunks of about `size` characters: fewer, larger writes."""
    buffer: list[str] = []
    held = 0
    for piece in pieces:
        buffer.append(piece)
        held += len(piece)
        if held >= size:
            yield "".join(buffer)
            buffer, held = [], 0
    if buffer:
        yield "".join(buffer)


async def served_async(pieces: Iterator[str]) -> AsyncIterator[str]:
    """A synchronous export as an async stream, for an ASGI server: each chunk is written on
    the request's own thread (its database cursor lives there), without holding the whole
    document in memory. A client that goes away closes the export, and its cursor."""
    chunks = batched(pieces)
    take = sync_to_async(next, thread_sensitive=True)
    try:
        while (chunk := await take(chunks, None)) is not None:
            yield chunk
    finally:
        await sync_to_async(_close, thread_sensitive=True)(chunks, pieces)


def _close(*generators) -> None:
    for generator in generators:
        close = getattr(generator, "close", None)
        if close is not None:
            close()
