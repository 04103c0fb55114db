"""export.md: the conversation for people, as one Markdown document.

Markdown is built from untrusted text (what people typed, what models and tools answered, the
names files were uploaded with), so nothing inside a message may reach past it: `safe_markdown`
writes each part so it stays in its place. A file is named by its label, in a code span, without
its bytes (export.json holds them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

from chat.exports.safe_markdown import code_span, contained, inline, quoted, verbatim
from chat.models import Conversation, Message, Pin, duration
from chat.transcript import SHOWN_BOUNDARIES, current_branch
from compaction.models import Compaction
from providers import registry
from providers.blocks import block_text, file_label, file_of, text_of, tool_uses, type_of

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
        yield verbatim(conversation.system_prompt, "text") + "\n\n"
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
    names = {b.get("id"): b.get("name", "?") for b in tool_uses(message.content)}
    runs = message.tool_runs or {}
    blocks = [_block(block, names, runs) for block in message.content or []]
    blocks = [b for b in blocks if b]
    parts.extend(blocks or ["*(no text)*"])
    return "\n\n".join(parts) + "\n\n"


def _block(block: dict, names: dict, runs: dict) -> str:
    kind = type_of(block)
    if kind == "text":
        return contained(text_of(block))
    if kind == "tool_use":
        name = block.get("name", "?")
        took = duration((runs.get(block.get("id")) or {}).get("ms"))
        took = f" ({took})" if took else ""
        arguments = json.dumps(block.get("input", {}), indent=2, ensure_ascii=False)
        return f"**Tool call** {code_span(name)}{took}, input:\n\n{verbatim(arguments, 'json')}"
    if kind == "tool_result":
        name = names.get(block.get("tool_use_id"))
        of = f" of {code_span(name)}" if name else ""
        label = "Tool error" if block.get("is_error") else "Tool result"
        return f"**{label}**{of}:\n\n{verbatim(block_text(block), 'text')}"
    meta = file_of(block)
    if meta is not None:  # named, never its bytes (export.json holds them); its name as code
        return f"**File** {code_span(file_label(meta))}"
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
        head = f"**Cleared {row.cleared_what} ({row.trigger}) · {figures}**{undone}"
        what = "Files and tool results" if row.files else "Tool results"
        body = (
            f"{what} before message #{row.cleared_before_seq} were replaced by short "
            "placeholders in the model's window; the transcript keeps them whole."
        )
        return f"---\n\n{head}\n\n{body}\n\n---\n\n"
    head = f"**Compaction ({row.trigger}) · {figures}**{undone}"
    if row.summariser == "model":
        by = row.summary_model or "the model"
    else:
        by = "rules (no model)"
    body = (
        f"Messages before #{row.first_kept_seq} were folded into this summary, written by "
        f"{by}; from #{row.first_kept_seq} on the model saw the messages themselves."
    )
    if row.instructions:
        body += f" Instructions: {inline(row.instructions)}"
    summary = (
        quoted(contained(row.summary, in_quote=True))
        if row.summary.strip()
        else "> *(no summary text)*"
    )
    return f"---\n\n{head}\n\n{body}\n\n{summary}\n\n---\n\n"


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
