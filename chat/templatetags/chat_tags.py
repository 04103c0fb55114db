"""Turn content blocks into safe HTML. Text from the model goes through markdown + sanitiser;
everything else is escaped by `format_html`."""

from __future__ import annotations

import json

from django import template
from django.conf import settings
from django.utils.html import escape, format_html, linebreaks
from django.utils.safestring import SafeString, mark_safe

from chat.markdown import render_markdown
from compaction.loading import Spend
from compaction.tokens import block_text
from search.text import marked

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # noqa: S308 - sanitised by nh3 in render_markdown


@register.filter
def blocks(message, role: str | None = None) -> SafeString:
    """Render a message's content blocks (a `Message`, or a bare list of blocks and a role).

    A person's own text is shown as typed, not as markdown. A tool call and its result (paired
    by id, as the API pairs them) are one collapsible block: the tool, its input, its result or
    error, and how long it took; a call with no result yet is shown running.
    """
    if isinstance(message, list):
        content, runs, status = message, {}, ""
    else:
        content, runs, status = message.content, message.tool_runs or {}, message.status
        role = message.role
    role = role or "assistant"
    results = {b.get("tool_use_id"): b for b in content or [] if b.get("type") == "tool_result"}
    calls = {b.get("id") for b in content or [] if b.get("type") == "tool_use"}
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text", "")
            parts.append(
                render_markdown(text) if role == "assistant" else linebreaks(text, autoescape=True)
            )
        elif kind == "tool_use":
            parts.append(_tool_call(block, results.get(block.get("id")), runs, status))
        elif kind == "tool_result":
            if block.get("tool_use_id") not in calls:  # its call is elsewhere (an import)
                parts.append(_tool_call(None, block, runs, status))
        else:
            parts.append(format_html('<pre class="tool">{}</pre>', block_text(block)))
    return mark_safe("".join(parts))  # noqa: S308 - each part is escaped or sanitised above


def _tool_call(call: dict | None, result: dict | None, runs: dict, status: str) -> SafeString:
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
        label += f" · {_duration(run.get('ms', 0))}"
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
            '<p class="tool-label">{}</p><pre>{}</pre>',
            "Error" if state == "error" else "Result",
            block_text(result),
        )
        if result is not None
        else "",
    )


def _duration(ms) -> str:
    try:
        ms = int(ms)
    except (TypeError, ValueError):
        return ""
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


@register.filter
def search_marks(snippet: str) -> SafeString:
    """A search snippet with its matched words in <mark>: escaped first, then marked."""
    return mark_safe(marked(escape(snippet), "<mark>", "</mark>"))  # noqa: S308 - escaped


@register.simple_tag
def limit(setting: str) -> int:
    """A field's limit (chat/clean.py), in any fragment: the same number the server enforces."""
    return getattr(settings, setting)


@register.filter
def spend(row, model: str):
    """What a reply's turn or a compaction's summary call cost (None: no call, or no usage
    reported)."""
    return Spend.of(row.usage, model)
