"""What every tab of a conversation is told, from one place: events rendered once, in the process
where they happened, and sent to the conversation's channel-layer group as one frame.

Events are plain values (chat/events.py) saying what happened: a message shown, a reply's text,
a compaction settled. State changes run as one transaction each (`core.db.run`), and what they
did is sent only once that call has returned, so a frame never shows what a rollback undid
(Zulip's `send_event_on_commit`). The HTML comes from the renderer the web room installs at
start-up (web/apps.py): nothing below the web room renders, and nothing here imports it.

Sending is best effort and never an error for the caller: what a tab misses it reads again
when it reconnects, or when told to once the layer answers again (turns/engine.py), and
what must not be lost (messages, replies, Stop) is in the database, so a failing channel layer
must not stop a turn from being saved.
"""

from __future__ import annotations

import logging

from channels.layers import get_channel_layer

from core import channel_layer, runtime

log = logging.getLogger(__name__)


async def send(conversation_id: int, *events) -> None:
    """Render `events` (None entries are skipped) and send them to every tab, in one frame."""
    shown = [event for event in events if event is not None]
    if not shown:
        return
    frame = runtime.current().render(shown)
    if not frame:
        return
    try:
        await get_channel_layer().group_send(
            channel_layer.conversation_group(conversation_id), {"type": "chat.html", "html": frame}
        )
    except Exception as exc:  # Redis down: said once for the outage, not once per frame
        channel_layer.outage(exc)
        log.debug("could not send a frame to conversation %s", conversation_id)
