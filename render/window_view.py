""" "What the model sees" as HTML: the window's messages as the next request carries them, made
readable. The summary message shows its summary as a labelled block (not between the tags the
model reads), a tool call shows with its result, which the request carries as the next (user)
message, and each file shows as a line naming it, linking to it, where the request carries it."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from compaction.assembly import Window, summary_parts
from providers.blocks import (
    call_ids,
    carried_files,
    file_label,
    file_of,
    files,
    text_of,
    tool_results,
    type_of,
)
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
        html = _summary_html(*parts, files(content)) if parts else _content_html(content, role)
        shown.append(Shown(role, summary, html))
    return shown


def _content_html(content: list[dict], role: str) -> SafeString:
    """A message's blocks as its bubble shows them, but each file as its own line in its
    place: the message's own where it holds them, after the tool call whose result gives it
    (`read_attachment`). Runs of other blocks go to the bubble's renderer whole, so a tool call
    still meets its result."""
    parts: list[str] = []
    run: list[dict] = []

    def flush() -> None:
        if run:
            parts.append(text_html(list(run), role))
            parts.extend(_file_html(meta) for meta in carried_files(tool_results(run)))
            run.clear()

    for block in content:
        meta = file_of(block)
        if meta is None:
            run.append(block)
        else:
            flush()
            parts.append(_file_html(meta))
    flush()
    return mark_safe("".join(parts))  # noqa: S308 - each part is escaped or sanitised


def _file_html(meta: dict) -> SafeString:
    """A file as the model gets it: its kind, name, size and tokens, linking to the file (its
    owner's: the link serves nobody else)."""
    label = file_label(meta)
    upload = meta.get("id")
    if not isinstance(upload, int):  # a block no upload backs (a malformed import): named only
        return format_html('<p class="window-file">{}</p>', label)
    return format_html(
        '<p class="window-file"><a href="{}" target="_blank" rel="noopener">{}</a></p>',
        reverse("attachment", args=[upload]),
        label,
    )


def _result_of(block: dict, calls: set) -> bool:
    return type_of(block) == "tool_result" and block.get("tool_use_id") in calls


def _only_text(content: list[dict]) -> str:
    """The summary message's text: its one text block, then nothing but the files of pinned
    messages riding with it."""
    if not content or len(content) != 1 + len(files(content[1:])):
        return ""
    return text_of(content[0])


def _summary_html(intro: str, summary: str, rest: str, pinned_files: list[dict]) -> SafeString:
    return format_html(
        '<div class="text markdown"><p>{}</p><section class="window-summary" aria-label="Summary">'
        '<p class="tool-label">Summary of the earlier turns</p>{}</section>{}{}</div>',
        intro,
        mark_safe(render_markdown(summary)),  # noqa: S308 - sanitised by nh3 in render_markdown
        mark_safe(render_markdown(rest)),  # noqa: S308 - sanitised by nh3 in render_markdown
        format_html_join("", "{}", ((_file_html(meta),) for meta in pinned_files)),
    )
