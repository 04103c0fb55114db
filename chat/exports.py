"""A conversation written out for people and programs: export.json and export.md.

Both read the transcript with `.iterator()` in seq order, so a conversation of any length is
exported in a fixed number of queries without being held in memory at once (the Markdown one
is streamed as it is written). Everything in them is the owner's conversation: the views look it
up through `owned_by(request.user)` first.

Markdown is built from untrusted text (what people typed, what models and tools answered), so
nothing inside a message may reach past it: chat/safe_markdown.py writes each part so it stays
in its place.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import UTC, datetime

from asgiref.sync import sync_to_async

from chat.models import Conversation, Message, Pin, duration
from chat.safe_markdown import code_span, contained, fenced, inline, quoted
from chat.transcript import SHOWN_BOUNDARIES, current_branch
from chat.window import load_window
from compaction.models import Compaction
from providers import registry
from providers.tokens import block_text

# --- export.json ---------------------------------------------------------------------------------


def conversation_json(conversation: Conversation) -> dict:
    """The whole conversation for programs: every message, every compaction (whatever its
    status) and the exact window the next request would carry. Compactions come before the
    messages, which name them (`window_boundary`), so an import reads each once, in order
    (chat/import_history.py). Four queries, whatever its length."""
    state = load_window(conversation)
    branch = current_branch(conversation)
    pinned = set(Pin.objects.filter(conversation=conversation).values_list("message_id", flat=True))
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "model": conversation.model,
        "system_prompt": conversation.system_prompt,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
        # Every version is listed; the ones on the user's screen are `on_branch`, which ends at
        # `branch_end`.
        "branch_end": max(branch, default=None),
        "compactions": [
            {
                "id": c.pk,
                "trigger": c.trigger,
                "kind": c.kind,
                "status": c.status,
                "imported": c.imported,
                "pre_tokens": c.pre_tokens,
                "post_tokens": c.post_tokens,
                "first_kept_seq": c.first_kept_seq,
                "cleared_before_seq": c.cleared_before_seq,
                "cleared_count": c.cleared_count,
                "summary": c.summary,
                "summariser": c.summariser,
                "instructions": c.instructions,
                "edited": c.edited,
                # The key facts of what the summary replaced: how many it kept, which it lost.
                "facts": {"total": c.facts_total, "kept": c.facts_kept, "lost": c.facts_lost},
                "created_at": c.created_at.isoformat(),
                "updated_at": c.updated_at.isoformat(),
            }
            for c in Compaction.objects.filter(conversation=conversation).order_by("id")
        ],
        "messages": [
            {
                "seq": m.seq,
                "parent": m.parent,
                "on_branch": m.seq in branch,
                "pinned": m.pk in pinned,
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "tokens": m.tokens,
                "usage": m.usage.as_dict() if m.usage else None,
                # The window once this reply was in it, as the server counted it, and the
                # boundary it was sent under: the meter and the chart read them.
                "window_tokens": m.window_tokens,
                "window_head_tokens": m.window_head_tokens,
                "window_boundary": m.window_boundary_id,
                "created_at": m.created_at.isoformat(),
                "updated_at": m.updated_at.isoformat(),
            }
            for m in conversation.messages.order_by("seq").iterator()
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
    those off the branch on screen say so, and pinned ones are marked. Four queries, whatever its
    length."""
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
    pinned = set(Pin.objects.filter(conversation=conversation).values_list("message_id", flat=True))
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
        yield message_markdown(
            message,
            conversation.model,
            off_branch=message.seq not in branch,
            pinned=message.pk in pinned,
        )
    if empty:
        yield "*(no messages yet)*\n\n"
    while boundary is not None:  # a boundary past the last message (none should be)
        yield divider(boundary)
        boundary = next(waiting, None)


def message_markdown(
    message: Message,
    conversation_model: str = "",
    *,
    off_branch: bool = False,
    pinned: bool = False,
) -> str:
    """One message: a heading with its role, number, time and any status, then its blocks."""
    heading = [ROLE_NAMES.get(message.role, inline(message.role)), f"#{message.seq}"]
    heading.append(_when(message.created_at))
    if message.model and message.model != conversation_model:
        heading.append(inline(message.model))
    if message.status != Message.Status.COMPLETE:
        heading.append(inline(message.status))
    if pinned:
        heading.append("pinned")
    parts = [f"### {' · '.join(heading)}"]
    if pinned:
        parts.append("*Pinned: carried verbatim into every window, summaries or not.*")
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
