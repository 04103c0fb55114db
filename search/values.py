"""The values search deals in, imported by every module of the room and by its callers: a
hit (`Hit`), and which of a user's messages are searched (`Scope`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from chat.branches import Fork


@dataclass(frozen=True)
class Hit:
    conversation_id: int
    conversation_title: str
    seq: int
    role: str
    created_at: datetime
    snippet: str  # matched words between MARK_OPEN and MARK_CLOSE
    score: float  # higher is better; comparable within one search only
    # Another version, off the branch on screen: where it leaves the branch (None: on it).
    fork: Fork | None = None
    # The file of the message the matched words are in (its name), "" for its own words.
    file: str = ""

    @property
    def shown_seq(self) -> int:
        """The message on the page to go to for this hit."""
        return self.seq if self.fork is None else self.fork.shown


@dataclass(frozen=True)
class Scope:
    """Which of a user's messages are searched."""

    conversation_id: int | None = None  # None: every conversation of theirs
    before_seq: int | None = None  # in that conversation, only the messages before this one
    excluded: tuple[int, ...] = ()  # in that conversation, these seqs left out
    others: bool = False  # that conversation as above, and the user's others whole
