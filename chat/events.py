"""What happened, as values: the events the outbox (core/outbox.py) sends to a conversation's
tabs once the transaction that made them has committed, and the web room renders
(chat/render/frames.py). Each says what changed, never how it looks.
"""

from __future__ import annotations

from dataclasses import dataclass

from chat.branches import Versions
from chat.figures import Panel
from chat.models import Conversation, Message
from chat.transcript import Page
from compaction.models import Compaction


@dataclass(frozen=True)
class MessageAdded:
    """A message at the end of the transcript: sent now, or waiting for the reply in progress."""

    message: Message
    queued: bool = False
    versions: Versions | None = None


@dataclass(frozen=True)
class MessageChanged:
    """A message shown again in its place: a reply closed, a message taken back, a reply closed
    because its process died."""

    message: Message
    versions: Versions | None = None


@dataclass(frozen=True)
class ReplyStarted:
    """A reply begins: its bubble under the message it answers, which is no longer queued."""

    reply: Message
    versions: Versions | None = None


@dataclass(frozen=True)
class Delta:
    """Text of a streaming reply."""

    seq: int
    text: str


@dataclass(frozen=True)
class FiguresChanged:
    """The meter and the chart after a reply."""

    panel: Panel


@dataclass(frozen=True)
class Renamed:
    """The conversation got its title (from its first message)."""

    conversation: Conversation


@dataclass(frozen=True)
class Notice:
    """A sentence for every tab ("" hides the notice). `about` names the action refused."""

    text: str
    level: str = "error"
    about: str = ""


@dataclass(frozen=True)
class Progress:
    """Work in progress ("Compacting (auto)…"); "" hides it."""

    text: str


@dataclass(frozen=True)
class CompactionSettled:
    """A compaction committed, drafted, failed, discarded or undone. `note` replaces the
    notice the outcome would show."""

    row: Compaction
    panel: Panel
    conversation: Conversation
    note: str = ""


@dataclass(frozen=True)
class BranchShown:
    """The transcript on screen is another branch now (a version made or chosen)."""

    page: Page
    conversation: Conversation
    panel: Panel
