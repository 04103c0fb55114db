"""Clearing old tool results and files: the cheap first step before any summary.

Tool output is often most of a window (a search, a file, a log) and is rarely needed verbatim
once the model has used it. So when the window passes the threshold, the tool results of older
turns (outside the kept tail, not pinned, above a size) are replaced in the window by a short
placeholder that names the tool, the size and how to read the result back; only if that is not
enough is anything summarised. The transcript keeps every result whole, and `read_messages`
reads it back.

Files (an image costs about a thousand tokens a turn, a PDF a few thousand a page) go the same
way, in the same clearing: each file of those turns becomes a line naming it, its message, its
cost and how to get it back (compaction/files.placeholder; `read_attachment`).

Pure functions over entries: a clearing boundary (compaction/models.py, kind "clear") records
up to which message results are cleared, and the window is built from these entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from compaction import files
from compaction.cut import choose_cut
from compaction.entries import Entry
from providers.blocks import block_text, file_of, file_tokens, tool_uses, type_of
from providers.tokens import estimate_content, estimate_text

CLEARED_PREFIX = "[Tool result cleared from the window"


def placeholder(tool: str, chars: int, seq: int) -> str:
    return (
        f"{CLEARED_PREFIX}: {tool}, {chars:,} characters. The transcript keeps it: "
        f"read_messages(from_seq={seq}, to_seq={seq}) reads it back.]"
    )


def clear_entry(entry: Entry, min_chars: int) -> Entry:
    """The entry with each tool result of at least `min_chars`, and each file, replaced by its
    placeholder."""
    return _cleared_entry(entry, min_chars)[0]


def _cleared_entry(entry: Entry, min_chars: int) -> tuple[Entry, int, list[dict]]:
    """(the entry cleared, how many tool results that replaced, the descriptions of the files
    it replaced: the entry keeps them too, for a summary to name)."""
    tools = {b.get("id"): b.get("name", "a tool") for b in tool_uses(entry.content)}
    results, gone, content = 0, [], []
    for block in entry.content:
        if type_of(block) == "tool_result" and not _is_cleared(block):
            text = block_text(block)
            if len(text) >= min_chars:
                name = tools.get(block.get("tool_use_id"), "a tool")
                block = {k: v for k, v in block.items() if k != "content"}
                block["content"] = placeholder(name, len(text), entry.seq)
                results += 1
            elif isinstance(block.get("content"), list):
                # A result that stays may hold a file (read_attachment's): the file still goes.
                inner, taken = _without_files(block["content"], entry.seq)
                if taken:
                    block = {**block, "content": inner}
                    gone += taken
        elif file_of(block) is not None:
            [block], taken = _without_files([block], entry.seq)
            gone += taken
        content.append(block)
    if not results and not gone:
        return entry, 0, []
    after = replace(
        entry,
        content=content,
        tokens=estimate_content(content),
        cleared_files=(*entry.cleared_files, *gone),
    )
    return after, results, gone


def _without_files(blocks: list, seq: int) -> tuple[list, list[dict]]:
    """`blocks` with each file that costs more than its placeholder replaced by it (a small
    text file stays: its line would cost as much); and the files replaced."""
    out, gone = [], []
    for block in blocks:
        meta = file_of(block)
        if meta is not None:
            line = files.placeholder(meta, seq)
            if file_tokens(meta) > estimate_text(line):
                block = {"type": "text", "text": line}
                gone.append(meta)
        out.append(block)
    return out, gone


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
    before_seq: int  # tool results and files in messages before this one are cleared
    count: int  # how many tool results this clearing replaces
    saved: int  # tokens it takes off the window
    files: tuple[dict, ...] = ()  # the files it replaces (compaction/files.record)


def plan(entries: Sequence[Entry], keep_tokens: int, min_chars: int) -> Clearing | None:
    """What clearing can do now: the results and files outside the tail a compaction would
    keep (one boundary for both: one decision, one divider that counts each)."""
    cut = choose_cut(entries, keep_tokens)
    if cut is None:
        return None
    count = saved = 0
    gone: list[dict] = []
    for entry in entries:
        if entry.seq >= cut or entry.pinned:
            continue
        after, results, metas = _cleared_entry(entry, min_chars)
        count += results
        gone += [files.record(meta, entry.seq) for meta in metas]
        saved += entry.tokens - after.tokens
    if not count and not gone:
        return None
    return Clearing(cut, count, saved, tuple(gone))
