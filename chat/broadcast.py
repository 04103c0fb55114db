"""Send rendered fragments to every tab open on a conversation (its channel-layer group)."""

from __future__ import annotations

import logging

from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def group_name(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


async def html(conversation_id: int, fragment: str) -> None:
    """Best effort, and never an error for the caller: what a tab misses it reads again when
    it reconnects, and what must not be lost (messages, replies, Stop) is in the database, so a
    failing channel layer must not stop a turn from being saved."""
    if not fragment:
        return
    try:
        await get_channel_layer().group_send(
            group_name(conversation_id), {"type": "chat.html", "html": fragment}
        )
    except Exception:
        log.exception("could not send a fragment to conversation %s", conversation_id)


def user_group(user_id: int) -> str:
    """Every socket a user has open, in every process: ended when their sessions are."""
    return f"user-{user_id}"


async def end_sessions(user_id: int) -> None:
    """Close every socket of the user, in every process (they logged out, or changed their
    password). A tab whose session is still valid reconnects at once; the others cannot."""
    try:
        await get_channel_layer().group_send(user_group(user_id), {"type": "session.end"})
    except Exception:
        log.exception("could not end the sockets of user %s", user_id)


def control_group(conversation_id: int) -> str:
    """Where Stop is sent: only the process streaming the reply listens here (chat.liveness)."""
    return f"conversation-{conversation_id}-control"


async def stop(conversation_id: int, seq: int | None = None) -> None:
    """Stop the conversation's streaming reply (only if it is reply `seq`, when given)."""
    await get_channel_layer().group_send(
        control_group(conversation_id),
        {"type": "turn.stop", "conversation": conversation_id, "seq": seq},
    )
