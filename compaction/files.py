"""Files through compaction, as text: what a cleared file leaves in the window, what a boundary
records of the files it took out, and how the rule-based brief names a folded file.

A file in a message is a block naming its upload (providers/blocks.py), never its bytes: all
here is written from that description, so it works without storage. A file's first lines
come with its description when its upload gave them ("lines": chat/attachments.block writes a
text file's); a block without them is named without.

Plain functions over plain values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from compaction.entries import CLEARED_NOTE, RECALL, Entry
from providers.blocks import file_kind, file_of, file_tokens, type_of

# A text file's or PDF's first lines, as the brief quotes them.
LINES_CHARS = 200
# A line of the brief's files section (`described`), and the room kept for the one that counts
# the files not named.
_LINE_RE = re.compile(r"^- \[(?:image|PDF|text): ")
_NOTE_ROOM = 50


def placeholder(meta: dict, seq: int) -> str:
    """The line a cleared file leaves in the window: "[image: build-error.png (#12), 1,045
    tokens, cleared: read_attachment brings it back]". Its message and name are what
    read_attachment is given (and the offline demo model reads, providers/demo_files.py): the
    same words every time."""
    return (
        f"[{file_kind(meta)}: {_name(meta)} (#{seq}), {file_tokens(meta):,} tokens, {CLEARED_NOTE}]"
    )


def record(meta: dict, seq: int) -> dict:
    """What a boundary keeps of a file it took out of the window (its divider links it)."""
    return {
        "id": meta.get("id"),
        "name": _name(meta),
        "kind": file_kind(meta),
        "seq": seq,
    }


def in_entries(entries: Iterable[Entry]) -> list[tuple[dict, int]]:
    """Each file the entries gave, with its message's seq, once (a file given back by a tool
    is the file it was), in order: at the top level of a message or inside a tool result, or
    cleared from the window since."""
    found, seen = [], set()
    for entry in entries:
        for meta in [*entry.cleared_files, *_metas(entry.content)]:
            key = meta.get("id") if isinstance(meta.get("id"), int) else id(meta)
            if key not in seen:
                seen.add(key)
                found.append((meta, entry.seq))
    return found


def folded(entries: Sequence[Entry]) -> list[dict]:
    """The records of the files a summary folds: those of `entries` not pinned (a pinned
    message rides verbatim, its files with it)."""
    return [record(meta, seq) for meta, seq in in_entries(e for e in entries if not e.pinned)]


def described(meta: dict, seq: int) -> str:
    """A folded file as the rule-based brief names it, in the form of a cleared file's line
    (so a reader of either, the model or the offline demo, finds it the same way): "[PDF:
    spec.pdf (#12), 2 pages, 231.4 kB, 6,000 tokens, attachment_id 7: read_attachment brings
    it back]", then its first lines when its description has them."""
    size = [_dimensions(meta), _bytes(meta), f"{file_tokens(meta):,} tokens"]
    if isinstance(meta.get("id"), int):
        size.append(f"attachment_id {meta['id']}")
    text = (
        f"[{file_kind(meta)}: {_name(meta)} (#{seq}), {', '.join(s for s in size if s)}: {RECALL}]"
    )
    lines = first_lines(meta)
    return f"{text} first lines: {lines}" if lines else text


def section(carried: str, entries: Sequence[Entry], budget: int) -> str:
    """The rule-based brief's files section: the lines the brief before named (`carried`, its
    section), then those of the files of `entries` (`described`), within `budget` characters;
    when they do not all fit, the newest are named and the others counted."""
    kept_on = [line for line in carried.splitlines() if _LINE_RE.match(line)]
    new = [f"- {described(meta, seq)}" for meta, seq in in_entries(entries)]
    lines = list(dict.fromkeys([*kept_on, *new]))
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        room = budget - (_NOTE_ROOM if len(kept) + 1 < len(lines) else 0)
        if used + len(line) + 1 > room:
            break
        kept.insert(0, line)
        used += len(line) + 1
    if len(kept) < len(lines):
        out = len(lines) - len(kept)
        kept.insert(0, f"- ({out} earlier file{'s' if out != 1 else ''} not named for length)")
    return "\n".join(kept)


def first_lines(meta: dict) -> str:
    """A text file's or PDF's first lines on one line ("a / b / c"), at most LINES_CHARS; ""
    when its description has none. Taken as a list of lines or as one text."""
    lines = meta.get("lines")
    if isinstance(lines, str):
        lines = lines.splitlines()
    if not isinstance(lines, list):
        return ""
    text = " / ".join(" ".join(str(line).split()) for line in lines if str(line).strip())
    return text if len(text) <= LINES_CHARS else text[: LINES_CHARS - 1].rstrip() + "…"


def _metas(content: Iterable) -> list[dict]:
    found = []
    for block in content or ():
        inner = block.get("content") if type_of(block) == "tool_result" else None
        for item in [block, *(inner if isinstance(inner, list) else ())]:
            meta = file_of(item)
            if meta is not None:
                found.append(meta)
    return found


def _name(meta: dict) -> str:
    return str(meta.get("name") or "file")


def _dimensions(meta: dict) -> str:
    if meta.get("width") and meta.get("height"):
        return f"{meta['width']}×{meta['height']} px"
    pages = meta.get("pages")
    if isinstance(pages, int) and pages > 0:
        return f"{pages:,} page{'s' if pages != 1 else ''}"
    return ""


def _bytes(meta: dict) -> str:
    size = meta.get("bytes")
    if not isinstance(size, int) or size < 0:
        return ""
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"
