"""A message's bubble as HTML: the one place its markup is written.

The page's template (`{% bubble item %}`) and the fragments a turn pushes over the websocket both
call `message_html`. It is plain Python rather than a template partial because every turn renders
three bubbles (the user's message, the reply starting, the reply finished), and Django's template
engine made that the largest part of a turn's work after the provider's SDK. Every value from a
user or a model is escaped here (`escape`), or rendered by `blocks` (markdown, then sanitised).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.conf import settings
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from chat.branches import Versions
from chat.figures import Spend
from chat.models import Message, duration
from chat.transcript import Item
from core import runtime
from providers.blocks import (
    block_text,
    call_ids,
    file_label,
    file_of,
    file_tokens,
    is_thinking,
    text_of,
    texts,
    thinking_of,
    tool_results,
    type_of,
)
from render.links import named_conversations
from render.markdown import render_lined, render_markdown, render_typed
from render.meter import spend_shown

_BADGES = {
    "interrupted": '<span class="badge interrupted">interrupted</span>',
    "error": '<span class="badge error">error</span>',
    "cancelled": (
        '<span class="badge cancelled" title="Taken back before it was sent: the model never saw'
        ' it">cancelled, not sent</span>'
    ),
}
_OUTSIDE = (
    '<span class="badge outside-label" title="Compacted: the model sees this only through the '
    "summary\">outside the model's window</span>"
)
# A pinned message rides every window word for word: before the boundary it is labelled so,
# not as left out (CSS shows either label only on a message before the boundary).
_PINNED_IN_WINDOW = (
    '<span class="badge in-window-label" title="Pinned: the model sees it word for word in every '
    'window, beside the summary">in the window (pinned)</span>'
)
_READ_ONLY = (
    '<span class="readonly-note" title="Compacted: messages before the latest boundary are folded '
    'into the summary and cannot be edited or regenerated">read-only</span>'
)
_TYPING = '<span class="typing" aria-hidden="true"><i></i><i></i><i></i></span>'


def message_html(item: Item, oob: str = "") -> SafeString:
    m = item.message
    seq, status, role = m.seq, m.status, m.role
    classes = f"message {role}"
    if status == Message.Status.CANCELLED:
        classes += " cancelled"
    if item.outside_window:
        classes += " outside-window"
    if item.pinned:
        classes += " pinned"
    head = f'<article id="msg-{seq}" class="{classes}" data-seq="{seq}" data-status="{status}"'
    if status == Message.Status.STREAMING:
        head += ' aria-busy="true"'
    if oob:
        head += f' hx-swap-oob="{escape(oob)}"'
    meta = [f'<span class="role">{"You" if role == Message.Role.USER else "Assistant"}</span>']
    meta.append(sent_at(m.created_at))
    meta.append(_BADGES.get(status, ""))
    if role == Message.Role.USER:
        meta.append(_queued_slot(seq, item.queued))
    if item.pinned:
        meta.append('<span class="badge pinned-badge">pinned</span>')
    if role == Message.Role.ASSISTANT:
        meta.append(_spend(m))
    meta.append(_PINNED_IN_WINDOW if item.pinned else _OUTSIDE)
    if status not in (Message.Status.STREAMING, Message.Status.CANCELLED):
        meta.append(_pin_button(m, item.pinned))
    if item.versions:
        meta.append(_switcher(seq, item.versions))
    if role == Message.Role.ASSISTANT and status not in _NOT_REDONE:
        label = "Regenerate" if status == Message.Status.COMPLETE else "Retry"
        meta.append(
            '<form ws-send class="inline version-action"><input type="hidden" name="action" '
            f'value="reply_again"><input type="hidden" name="message" value="{seq}"><button '
            'type="submit" class="link reply-again" title="Ask for a new version of this reply; '
            f'this one is kept">{label}</button></form>'
        )
    meta.append(_READ_ONLY)
    source = _source(m)
    if source:
        meta.append(_COPY)
    body = [_text(m)]
    if m.error:
        retry = " Retry it, or send your message again." if status != "complete" else ""
        body.append(f'<p class="error-text">{escape(m.error)}{retry}</p>')
    if role == Message.Role.USER and status == Message.Status.COMPLETE:
        body.append(_edit_form(m))
    body.append(source)
    html = f'{head}>\n  <div class="meta">{"".join(meta)}</div>\n  {"".join(body)}\n</article>'
    return mark_safe(html)  # noqa: S308 - every value above is escaped or sanitised


_NOT_REDONE = (Message.Status.STREAMING, Message.Status.CANCELLED, Message.Status.QUEUED)


def sent_at(when: datetime | None) -> str:
    """When a message was sent, in UTC as the server knows it: the hour in small print, the full
    date in its title and, focused, beside it (static/js/messages.js puts both in the reader's
    own zone). Focusable, so a keyboard reaches the date a mouse hovers for."""
    if when is None:  # a message not stored (the model view's)
        return ""
    when = when.astimezone(UTC)
    full = f"{when:%A} {when.day} {when:%B %Y, %H:%M} UTC"
    return (
        f'<time class="sent-at" datetime="{when:%Y-%m-%dT%H:%M:%SZ}" title="{full}" '
        f'tabindex="0">{when:%H:%M}</time>'
    )


_COPY = (
    '<button type="button" class="link copy-message" title="Copy this message as Markdown">'
    "Copy</button>"
)


def _source(m: Message) -> str:
    """What Copy copies: the message's Markdown as stored (its text blocks, not the HTML shown),
    held inert in a <template> at the bubble's end for static/js/messages.js. A reply still
    streaming has no final text yet: its finished bubble brings it, and the button."""
    source = texts(m.content, "\n\n")
    if m.status == Message.Status.STREAMING or not source:
        return ""
    return f'<template class="message-source">{escape(source)}</template>'


def _queued_slot(seq: int, queued: bool) -> str:
    inner = ""
    if queued:
        inner = (
            '<span class="badge queued" title="Sent when the reply in progress ends">queued</span>'
            '<form ws-send class="inline cancel-queued"><input type="hidden" name="action" '
            f'value="cancel"><input type="hidden" name="message" value="{seq}"><button '
            'type="submit" class="link">Cancel</button></form>'
        )
    return f'<span class="queued-slot" id="queued-{seq}">{inner}</span>'


def _spend(m: Message) -> str:
    spend = Spend.of(m.usage, m.model)
    if spend is None:  # no usage reported; a model with no price says "cost unknown"
        return ""
    return (
        '<span class="turn-spend" title="What this turn was billed, every step of it">'
        f"{escape(spend_shown(spend))}</span>"
    )


def _pin_url(pk: int) -> str:
    """A message's pin URL, from the pattern worked out once per process: every bubble has a
    pin button, and reverse() walks the URLconf."""
    memo = runtime.current().memo
    if "pin-url" not in memo:
        memo["pin-url"] = escape(reverse("message-pin", args=[0])).replace("/0/", "/{}/")
    return memo["pin-url"].format(pk)


def _pin_button(m: Message, pinned: bool) -> str:
    url = _pin_url(m.pk)
    return (
        f'<button type="button" class="link pin-toggle" id="pin-{m.seq}" hx-post="{url}" '
        f'hx-vals=\'{{"pinned": "{0 if pinned else 1}"}}\' hx-target="#msg-{m.seq}" '
        f'hx-swap="outerHTML">{"Unpin" if pinned else "Pin"}</button>'
    )


def _switcher(seq: int, v: Versions) -> str:
    def button(to: int | None, kind: str, label: str, arrow: str) -> str:
        return (
            '<form ws-send class="inline"><input type="hidden" name="action" value="switch">'
            f'<input type="hidden" name="message" value="{seq}"><input type="hidden" name="to" '
            f'value="{"" if to is None else to}"><button type="submit" class="link version-{kind}"'
            f' aria-label="{label}"{"" if to else " disabled"}>{arrow}</button></form>'
        )

    return (
        f'<span class="versions" role="group" aria-label="Versions of message {seq}">'
        + button(v.previous, "previous", "Previous version", "‹")
        + f'<span class="version-count">{v.index} / {v.count}</span>'
        + button(v.next, "next", "Next version", "›")
        + "</span>"
    )


def _text(m: Message) -> str:
    shown = text_html(m)
    if m.status != Message.Status.STREAMING:
        return shown
    done = shown if m.content else ""
    return (
        f'{done}<details class="thinking streaming-thinking" id="msg-{m.seq}-thinking-box">'
        f'<summary>Thinking…</summary><div class="thinking-text" id="msg-{m.seq}-thinking">'
        f'</div></details><div class="text streaming" id="msg-{m.seq}-text"></div>{_TYPING}'
    )


def text_html(message, role: str | None = None) -> SafeString:
    """A message's blocks in the text box of its bubble (`blocks` takes the same arguments);
    a person's is `typed`: shown with the line breaks and indentation they typed."""
    typed = " typed" if (role or getattr(message, "role", "")) == Message.Role.USER else ""
    return format_html('<div class="text markdown{}">{}</div>', typed, blocks(message, role))


def _edit_form(m: Message) -> str:
    return (
        '<details class="edit-message version-action"><summary>Edit</summary>'
        '<form ws-send class="edit-form"><input type="hidden" name="action" value="edit">'
        f'<input type="hidden" name="message" value="{m.seq}">'
        f'<textarea name="text" rows="3" aria-label="Edited message {m.seq}" '
        f'maxlength="{settings.MAX_MESSAGE_CHARS}" required>{escape(m.text)}</textarea>'
        '<button type="submit">Send as a new version</button> <span class="hint">The original '
        "stays: switch back with ‹ ›.</span></form></details>"
    )


def blocks(message, role: str | None = None) -> SafeString:
    """Render a message's content blocks (a `Message`, or a bare list of blocks and a role).

    A person's own text is shown as typed, with its code fences as code blocks (no other
    markdown). A tool call and its result (paired by id, as the API pairs them) are one
    collapsible block: the tool, its input, its result or error, and how long it took; a call
    with no result yet is shown running.
    """
    if isinstance(message, list):
        content, runs, status = message, {}, ""
    else:
        content, runs, status = message.content, message.tool_runs or {}, message.status
        role = message.role
    role = role or "assistant"
    results = {b.get("tool_use_id"): b for b in tool_results(content)}
    calls = call_ids(content)
    named = named_conversations(content)  # linked where the reply names them (render/links.py)
    parts = []
    for block in content or []:
        kind = type_of(block)
        if kind == "text":
            text = text_of(block)
            parts.append(
                render_markdown(text, named) if role == "assistant" else render_typed(text)
            )
        elif kind == "tool_use":
            parts.append(_tool_call(block, results.get(block.get("id")), runs, status, named))
        elif kind == "tool_result":
            if block.get("tool_use_id") not in calls:  # its call is elsewhere (an import)
                parts.append(_tool_call(None, block, runs, status, named))
        elif (meta := file_of(block)) is not None:
            parts.append(_file(meta))
        elif is_thinking(block):
            parts.append(_thinking(block))
        else:
            parts.append(format_html('<pre class="tool">{}</pre>', block_text(block)))
    return mark_safe("".join(parts))  # noqa: S308 - each part is escaped or sanitised above


def _thinking(block: dict) -> SafeString:
    """The model's thinking (extended thinking), folded above what it said: its reasoning as
    markdown (sanitised as any model output), never its signature; a redacted block says so."""
    thought = thinking_of(block)
    if type_of(block) == "redacted_thinking" or not thought:
        return mark_safe(
            '<details class="thinking redacted"><summary>Thinking</summary><p class="hint">'
            "Some of the model's thinking was encrypted by the provider: the model gets it "
            "back, nobody can read it.</p></details>"
        )
    return format_html(
        '<details class="thinking"><summary>Thinking</summary><div class="thinking-text">'
        "{}</div></details>",
        mark_safe(render_markdown(thought)),  # noqa: S308 - sanitised by render_markdown
    )


def _file_url(pk: object) -> str:
    """A file's address (GET /attachments/<id>/), from the pattern worked out once per
    process, as the pin button's is."""
    memo = runtime.current().memo
    if "file-url" not in memo:
        memo["file-url"] = escape(reverse("attachment", args=[0])).replace("/0/", "/{}/")
    return memo["file-url"].format(int(pk) if isinstance(pk, int) else 0)


def _file(meta: dict) -> SafeString:
    """A file of a message, opening the file itself in a new tab: an image as its thumbnail
    (its size from the block, so the page does not jump as it loads), a PDF as an icon with its
    pages, a text file as its first lines. Every value is escaped: the name is the uploader's."""
    url, name, label = _file_url(meta.get("id")), meta.get("name") or "file", file_label(meta)
    media = str(meta.get("media_type") or "")
    if media.startswith("image/"):
        width, height = meta.get("width"), meta.get("height")
        size = (
            format_html(' width="{}" height="{}"', width, height)
            if isinstance(width, int) and isinstance(height, int)
            else ""
        )
        inner = format_html('<img src="{}" alt="{}"{} loading="lazy">', url, name, size)
        return format_html(
            '<a class="file-card image" href="{}" target="_blank" rel="noopener" title="{}">{}</a>',
            url,
            label,
            inner,
        )
    if media.endswith("pdf"):
        pages = int(meta.get("pages") or 0)
        plural = "" if pages == 1 else "s"
        detail = format_html(
            '<span class="file-detail">{} page{} · {} tokens</span>',
            f"{pages:,}",
            plural,
            f"{file_tokens(meta):,}",
        )
        kind, icon = "pdf", "PDF"
    else:
        # Not a <pre>: inside a link, and without the Copy button code blocks get.
        detail = format_html('<span class="file-lines">{}</span>', meta.get("lines") or "")
        kind, icon = "text", "TXT"
    return format_html(
        '<a class="file-card {}" href="{}" target="_blank" rel="noopener" title="{}">'
        '<span class="file-icon" aria-hidden="true">{}</span>'
        '<span class="file-about"><span class="file-name">{}</span>{}</span></a>',
        kind,
        url,
        label,
        icon,
        name,
        detail,
    )


def _tool_call(
    call: dict | None, result: dict | None, runs: dict, status: str, named: frozenset[int]
) -> SafeString:
    name = call.get("name", "") if call else "tool"
    run = runs.get(call.get("id")) if call else None
    if result is None:
        state, label = (
            ("running", "running…") if status == "streaming" else ("missing", "no result")
        )
    elif result.get("is_error"):
        state, label = "error", "error"
    else:
        state, label = "done", "done"
    if run and result is not None:
        label += f" · {duration(run.get('ms', 0))}"
    arguments = json.dumps(call.get("input", {}), indent=2, ensure_ascii=False) if call else ""
    return format_html(
        '<details class="tool-call {}" data-tool="{}"><summary><span class="tool-name">{}</span>'
        '<span class="tool-state">{}</span></summary>{}{}</details>',
        state,
        name,
        name,
        label,
        format_html('<p class="tool-label">Input</p><pre>{}</pre>', arguments) if call else "",
        format_html(
            '<p class="tool-label">{}</p>{}',
            "Error" if state == "error" else "Result",
            _result_html(block_text(result), named),
        )
        if result is not None
        else "",
    )


def _result_html(text: str, named: frozenset[int]) -> SafeString:
    """A tool's result: data (JSON) preformatted as it came; anything else is text a tool or a
    server wrote, often with markdown in it (a search's hits marked **like this**), so it is
    rendered as markdown, its lines kept, and sanitised."""
    try:
        data = isinstance(json.loads(text), dict | list)
    except ValueError:
        data = False
    if data:
        return format_html('<pre class="tool-result">{}</pre>', text)
    html = render_lined(text, named)  # sanitised by nh3 in render_lined
    return format_html('<div class="tool-result">{}</div>', mark_safe(html))  # noqa: S308
