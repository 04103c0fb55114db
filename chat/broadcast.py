"""Send rendered fragments to every tab open on a conversation (its channel-layer group)."""

from __future__ import annotations

from channels.layers import get_channel_layer


def group_name(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


async def html(conversation_id: int, fragment: str) -> None:
    if fragment:
        await get_channel_layer().group_send(
            group_name(conversation_id), {"type": "chat.html", "html": fragment}
        )


def control_group(conversation_id: int) -> str:
    """Where Stop is sent: only the process streaming the reply listens here (chat.liveness)."""
    return f"conversation-{conversation_id}-control"


async def stop(conversation_id: int, seq: int | None = None) -> None:
    """Stop the conversation's streaming reply (only if it is reply `seq`, when given)."""
    await get_channel_layer().group_send(
        control_group(conversation_id),
        {"type": "turn.stop", "conversation": conversation_id, "seq": seq},
    )
