"""What happened, as values: the events the outbox (core/outbox.py) sends to a conversation's
tabs once the transaction that made them has committed, and the web room renders
(render/frames.py). Each says what changed, never how it looks. Plain tuples with names: a
streaming reply makes one per frame.
"""

from __future__ import annotations

from typing import NamedTuple

from chat.branches import Versions
from chat.figures import Panel
from chat.models import Conversation, Message
from chat.transcript import Page
from compaction.models import Compaction


class MessageAdded(NamedTuple):
    """A message at the end of the transcript: sent now, or waiting for the reply in progress."""

    message: Message
    queued: bool = False
    versions: Versions | None = None


class MessageChanged(NamedTuple):
    """A message shown again in its place: a reply closed, a message taken back, a reply closed
    because its process died."""

    message: Message
    versions: Versions | None = None


class ReplyStarted(NamedTuple):
    """A reply begins: its bubble under the message it answers, which is no longer queued."""

    reply: Message
    versions: Versions | None = None


class Delta(NamedTuple):
    """Text of a streaming reply."""

    seq: int
    text: str


class ThoughtDelta(NamedTuple):
    """Thinking of a streaming reply (extended thinking), before its text."""

    seq: int
    text: str


class MeterMoved(NamedTuple):
    """The window while a reply streams, estimated: `tokens` in all, `reply` of them the reply's
    so far. The reply's real figure (FiguresChanged) replaces it when it ends."""

    tokens: int
    reply: int
    budget: int


class FiguresChanged(NamedTuple):
    """The meter and the chart after a reply."""

    panel: Panel


class Renamed(NamedTuple):
    """The conversation got its title (from its first message)."""

    conversation: Conversation


class Notice(NamedTuple):
    """A sentence for every tab ("" hides the notice). `about` names the action refused."""

    text: str
    level: str = "error"
    about: str = ""


class Progress(NamedTuple):
    """Work in progress ("Compacting (auto)…"); "" hides it."""

    text: str


class CompactionSettled(NamedTuple):
    """A compaction committed, drafted, failed, discarded or undone. `note` replaces the
    notice the outcome would show."""

    row: Compaction
    panel: Panel
    conversation: Conversation
    note: str = ""


class BranchShown(NamedTuple):
    """The transcript on screen is another branch now (a version made or chosen)."""

    page: Page
    conversation: Conversation
    panel: Panel
