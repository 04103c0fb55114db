"""Turn content blocks into safe HTML. Text from the model goes through markdown + sanitiser;
everything else is escaped by `format_html`."""

from __future__ import annotations

import json

from django import template
from django.utils.html import format_html, linebreaks
from django.utils.safestring import SafeString, mark_safe

from chat.markdown import render_markdown
from compaction.tokens import block_text

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # noqa: S308 - sanitised by nh3 in render_markdown


@register.filter
def blocks(content: list[dict], role: str = "assistant") -> SafeString:
    """Render a message's content blocks. A person's own text is shown as typed, not as markdown."""
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text", "")
            parts.append(
                render_markdown(text) if role == "assistant" else linebreaks(text, autoescape=True)
            )
        elif kind == "tool_use":
            parts.append(
                format_html(
                    '<div class="tool"><span class="tool-label">Tool call {}</span>'
                    "<pre>{}</pre></div>",
                    block.get("name", ""),
                    json.dumps(block.get("input", {}), indent=2, ensure_ascii=False),
                )
            )
        elif kind == "tool_result":
            parts.append(
                format_html(
                    '<div class="tool"><span class="tool-label">Tool result{}</span>'
                    "<pre>{}</pre></div>",
                    " (error)" if block.get("is_error") else "",
                    block_text(block),
                )
            )
        else:
            parts.append(format_html('<pre class="tool">{}</pre>', block_text(block)))
    return mark_safe("".join(parts))  # noqa: S308 - each part is escaped or sanitised above
