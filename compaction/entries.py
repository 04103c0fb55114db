"""The plain value that compaction works on: one transcript message, detached from the ORM."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from providers.blocks import carried_files, file_tokens, text_of, texts, type_of

# How the line ends that clearing puts in place of a file (compaction/files.placeholder).
RECALL = "read_attachment brings it back"
CLEARED_NOTE = f"cleared: {RECALL}"


def _clearing_line(text: str) -> bool:
    """Whether a text block is such a line (asked only of a message clearing changed)."""
    return text.startswith("[") and text.endswith(f"{CLEARED_NOTE}]") and "\n" not in text


@dataclass(frozen=True)
class Entry:
    """One transcript message as the window sees it.

    `content` is a list of Anthropic content blocks (text, tool_use, tool_result); `tokens` is the
    count stored once when the message was saved.
    """

    seq: int
    role: str  # "user" or "assistant"
    content: list[dict] = field(hash=False)
    tokens: int = 0
    pinned: bool = False
    # The files clearing took out of `content` (their descriptions, compaction/clearing.py): no
    # longer in the window, still what the message gave, for a summary to name.
    cleared_files: tuple[dict, ...] = field(default=(), hash=False)

    @cached_property  # asked of every entry of the window on every request
    def is_tool_result(self) -> bool:
        return any(type_of(block) == "tool_result" for block in self.content)

    @cached_property  # the meter's files segment, on every reply
    def file_tokens(self) -> int:
        """The estimate for the files it carries (a cleared file is a line of text, no file)."""
        return sum(file_tokens(meta) for meta in carried_files(self.content))

    @property
    def starts_user_turn(self) -> bool:
        """A user message typed by a person (not a tool result): the only safe place to cut."""
        return self.role == "user" and not self.is_tool_result

    @property
    def text(self) -> str:
        """What the message says: its text blocks, less the lines clearing put in place of its
        files (the app's words, not the person's: no fact, no quote)."""
        if not self.cleared_files:
            return texts(self.content)
        return texts([b for b in self.content if not _clearing_line(text_of(b))])
