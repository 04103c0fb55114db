"""Clearing old tool results: the cheap first step before any summary.

Tool output is often most of a window (a search, a file, a log) and is rarely needed verbatim
once the model has used it. So when the window passes the threshold, the tool results of older
turns (outside the kept tail, not pinned, above a size) are replaced in the window by a short
placeholder that names the tool, the size and how to read the result back; only if that is not
enough is anything summarised. The transcript keeps every result whole, and `read_messages`
reads it back.

Pure functions over entries: a clearing boundary (compaction/models.py, kind "clear") records
up to which message results are cleared, and the window is built from these entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction.cut import choose_cut
from compaction.entries import Entry
from providers.blocks import block_text, tool_uses, type_of
from providers.tokens import estimate_content

CLEARED_PREFIX = "[Tool result cleared from the window"


def placeholder(tool: str, chars: int, seq: int) -> str:
    return (
        f"{CLEARED_PREFIX}: {tool}, {chars:,} characters. The transcript keeps it: "
        f"read_messages(from_seq={seq}, to_seq={seq}) reads it back.]"
    )


def clear_entry(entry: Entry, min_chars: int) -> Entry:
    """The entry with each tool result of at least `min_chars` replaced by its placeholder."""
    tools = {b.get("id"): b.get("name", "a tool") for b in tool_uses(entry.content)}
    changed, content = False, []
    for block in entry.content:
        if type_of(block) == "tool_result" and not _is_cleared(block):
            text = block_text(block)
            if len(text) >= min_chars:
                name = tools.get(block.get("tool_use_id"), "a tool")
                block = {k: v for k, v in block.items() if k != "content"}
                block["content"] = placeholder(name, len(text), entry.seq)
                changed = True
        content.append(block)
    if not changed:
        return entry
    return replace(entry, content=content, tokens=estimate_content(content))


def _is_cleared(block: dict) -> bool:
    content = block.get("content")
    return isinstance(content, str) and content.startswith(CLEARED_PREFIX)


def cleared(entries: Sequence[Entry], before_seq: int | None, min_chars: int) -> list[Entry]:
    """The window's entries with results before `before_seq` cleared (pinned ones kept whole)."""
    if not before_seq:
        return list(entries)
    return [
        clear_entry(e, min_chars) if e.seq < before_seq and not e.pinned else e for e in entries
    ]


@dataclass(frozen=True)
class Clearing:
    before_seq: int  # results in messages before this one are cleared
    count: int  # how many results this clearing replaces
    saved: int  # tokens it takes off the window


def plan(entries: Sequence[Entry], keep_tokens: int, min_chars: int) -> Clearing | None:
    """What clearing can do now: the results outside the tail a compaction would keep."""
    cut = choose_cut(entries, keep_tokens)
    if cut is None:
        return None
    count = saved = 0
    for entry in entries:
        if entry.seq >= cut or entry.pinned:
            continue
        after = clear_entry(entry, min_chars)
        if after is not entry:
            count += sum(
                1
                for old, new in zip(entry.content, after.content, strict=True)
                if old is not new and type_of(new) == "tool_result"
            )
            saved += entry.tokens - after.tokens
    if not count:
        return None
    return Clearing(cut, count, saved)
