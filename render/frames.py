"""Events as the HTML every tab is sent: fragments htmx swaps in out of band, by id.

`render` is the outbox's renderer (core/outbox.py, installed by web/apps.py): each event
(chat/events.py) becomes its fragment, and the events of one send become one frame. Rendering
only: every function takes values already loaded and runs no query.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.template.loader import render_to_string
from django.utils.html import escape

from chat import events
from chat.branches import Versions
from chat.figures import Panel
from chat.models import Conversation, Message
from chat.transcript import Item, Page
from compaction.models import Compaction
from render import bubbles, meter

PAGE = "chat/conversation.html"


def render(sent: Iterable) -> str:
    """One frame: the fragments of `sent`, in order."""
    return "".join([_RENDERERS[type(event)](event) for event in sent])


def _part(name: str, context: dict) -> str:
    return render_to_string(f"{PAGE}#{name}", context)


def message(item: Item, *, oob: str = "") -> str:
    return bubbles.message_html(item, oob)


def appended_message(
    msg: Message, *, queued: bool = False, versions: Versions | None = None
) -> str:
    return (
        '<div hx-swap-oob="beforeend:#transcript">'
        + message(Item(kind="message", message=msg, queued=queued, versions=versions))
        + "</div>"
    )


def replaced_message(msg: Message, versions: Versions | None = None) -> str:
    """A message that was queued or streaming, so never pinned (pinning waits for the end)."""
    return message(Item(kind="message", message=msg, versions=versions), oob="outerHTML")


def started(reply: Message, versions: Versions | None = None) -> str:
    """A reply begins: the message it answers is no longer queued, and the reply's bubble
    appears right under it (messages queued after it are already below it)."""
    return (
        f'<span id="queued-{reply.parent}" hx-swap-oob="delete"></span>'
        f'<div hx-swap-oob="afterend:#msg-{reply.parent}">'
        + message(Item(kind="message", message=reply, versions=versions))
        + "</div>"
    )


def branch(page: Page, conversation: Conversation) -> str:
    """The transcript replaced by another branch's newest page (a version made or chosen)."""
    return (
        '<div hx-swap-oob="innerHTML:#transcript">'
        + _part("older", {"page": page, "conversation": conversation})
        + "</div>"
    )


def delta(seq: int, text: str) -> str:
    return f'<span hx-swap-oob="beforeend:#msg-{seq}-text">{escape(text)}</span>'


def thought(seq: int, text: str) -> str:
    """Thinking goes into the reply's folded thinking block (shown once it holds some)."""
    return f'<span hx-swap-oob="beforeend:#msg-{seq}-thinking">{escape(text)}</span>'


def missed() -> str:
    """To a tab whose frames may have been lost (Redis restarted under it): fetch the
    transcript and panel again (chat.js)."""
    return '<span id="missed" hx-swap-oob="true" hidden></span>'


def accepted() -> str:
    """To the sending tab only: the server has the message, so the composer may be cleared."""
    return '<span id="send-accepted" hx-swap-oob="true"></span>'


def title(conversation: Conversation) -> str:
    return _part("title", {"conversation": conversation, "oob": True})


def notice(text: str, level: str = "error", *, about: str = "") -> str:
    """`about` names the action refused (the page clears its composer only for a send's)."""
    return _part("notice", {"text": text, "level": level, "about": about, "oob": True})


def progress(text: str) -> str:
    return _part("progress", {"text": text, "oob": True})


def context_panel(panel: Panel, conversation: Conversation) -> str:
    return _part("context", {"ctx": panel, "conversation": conversation, "oob": True})


def figures(panel: Panel) -> str:
    """The meter and the chart alone: what a reply changes in the panel."""
    return meter.figures_html(panel, oob=True)


def compaction_outcome(
    row: Compaction, panel: Panel, conversation: Conversation, *, note: str = ""
) -> str:
    """Everything a tab must change after a compaction was committed, drafted, failed or undone.
    `note`: an info notice that replaces the notice shown (what became of a reviewed draft, or
    why nothing changed), in place of the default one."""
    parts = [notice(note, "info")] if note else []
    if row.status == Compaction.Status.COMMITTED:
        parts.append(
            f'<div hx-swap-oob="beforebegin:#msg-{row.divider_seq}">'
            + _part("divider", {"row": row, "conversation": conversation})
            + "</div>"
        )
        parts.append(_part("review", {"draft": None, "oob": True}))
    elif row.status == Compaction.Status.UNDONE:
        parts.append(_part("divider", {"row": row, "conversation": conversation, "oob": True}))
    elif row.status == Compaction.Status.DRAFT:
        parts.append(_part("review", {"draft": row, "oob": True}))
    elif row.status == Compaction.Status.DISCARDED:
        parts.append(_part("review", {"draft": None, "oob": True}))
        if not note:
            parts.append(notice("Draft summary discarded; the window is unchanged.", "info"))
    elif row.status == Compaction.Status.FAILED and not note:
        parts.append(notice(f"Compaction failed: {row.error}"))
    parts.append(context_panel(panel, conversation))
    return "".join(parts)


_RENDERERS = {
    events.MessageAdded: lambda e: appended_message(
        e.message, queued=e.queued, versions=e.versions
    ),
    events.MessageChanged: lambda e: replaced_message(e.message, e.versions),
    events.ReplyStarted: lambda e: started(e.reply, e.versions),
    events.Delta: lambda e: delta(e.seq, e.text),
    events.ThoughtDelta: lambda e: thought(e.seq, e.text),
    events.MeterMoved: lambda e: meter.live_html(e.tokens, e.reply, e.budget),
    events.FiguresChanged: lambda e: figures(e.panel),
    events.Renamed: lambda e: title(e.conversation),
    events.Notice: lambda e: notice(e.text, e.level, about=e.about),
    events.Progress: lambda e: progress(e.text),
    events.CompactionSettled: lambda e: compaction_outcome(
        e.row, e.panel, e.conversation, note=e.note
    ),
    events.BranchShown: lambda e: (
        branch(e.page, e.conversation) + context_panel(e.panel, e.conversation)
    ),
}
