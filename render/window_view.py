""" "What the model sees" as HTML: the window's messages as the next request carries them, made
readable. The summary message shows its summary as a labelled block (not between the tags the
model reads), and a tool call shows with its result, which the request carries as the next
(user) message."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from compaction.assembly import Window, summary_parts
from providers.blocks import call_ids, text_of, type_of
from render.bubbles import text_html
from render.markdown import render_markdown


@dataclass(frozen=True)
class Shown:
    role: str
    summary: bool  # the summary pair at the head of the window
    html: SafeString


def window_messages(window: Window) -> list[Shown]:
    messages = window.messages
    shown: list[Shown] = []
    paired: set[str] = set()  # calls whose results are shown with them
    for i, message in enumerate(messages):
        role = message["role"]
        content = [b for b in message["content"] if not _result_of(b, paired)]
        if not content:
            continue  # tool results only, each shown with its call above
        if role == "assistant" and i + 1 < len(messages):
            calls = call_ids(content)
            results = [b for b in messages[i + 1]["content"] if _result_of(b, calls)]
            paired |= {b["tool_use_id"] for b in results}
            content = content + results
        summary = i < window.head
        parts = summary_parts(_only_text(content)) if summary and role == "user" else None
        html = _summary_html(*parts) if parts else text_html(content, role)
        shown.append(Shown(role, summary, html))
    return shown


def _result_of(block: dict, calls: set) -> bool:
    return type_of(block) == "tool_result" and block.get("tool_use_id") in calls


def _only_text(content: list[dict]) -> str:
    return text_of(content[0]) if len(content) == 1 else ""


def _summary_html(intro: str, summary: str, rest: str) -> SafeString:
    return format_html(
        '<div class="text markdown"><p>{}</p><section class="window-summary" aria-label="Summary">'
        '<p class="tool-label">Summary of the earlier turns</p>{}</section>{}</div>',
        intro,
        mark_safe(render_markdown(summary)),  # noqa: S308 - sanitised by nh3 in render_markdown
        mark_safe(render_markdown(rest)),  # noqa: S308 - sanitised by nh3 in render_markdown
    )
