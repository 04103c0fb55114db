"""The engine's small tools: tasks that start at once, claims held through cancellation, and
replies a claim recovered shown to their tabs.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from chat.events import MessageChanged
from chat.models import Message
from core import db, outbox
from turns import transitions


def eager(coroutine) -> asyncio.Task:
    """A task that starts at once, in the caller's turn of the loop, and runs until it first
    waits. A send's work up to the provider request (the claim, the driver, the stream) then
    goes straight through, instead of waiting for the loop's next turn at each hop: under load,
    behind every other chat's work."""
    return asyncio.Task(coroutine, loop=asyncio.get_running_loop(), eager_start=True)


async def hold(claiming):
    """Await a claim (a `transitions.Claim`, a `transitions.Closed`, or a compaction opened by the
    user) so that a cancel meanwhile cannot strand it: the claim still lands in the database, so
    wait for it and give back what it took (a reply returns to the queue, a compaction is
    released) before the cancellation goes on. Without this a cancelled claim would wait for a stale
    heartbeat."""
    claiming = eager(claiming)
    try:
        return await asyncio.shield(claiming)
    except asyncio.CancelledError:
        try:
            claimed = await claiming
        except Exception:
            raise asyncio.CancelledError from None  # nothing was claimed
        if isinstance(claimed, transitions.Closed):
            claimed = claimed.claim
        step = claimed.step if isinstance(claimed, transitions.Claim) else claimed
        await db.run(transitions.give_back, step)
        raise


async def show_recovered(replies: Iterable[Message]) -> None:
    """Replies closed because their process died: every tab sees them closed, text kept."""
    by_conversation: defaultdict[int, list[MessageChanged]] = defaultdict(list)
    for reply in replies:
        by_conversation[reply.conversation_id].append(MessageChanged(reply))
    for conversation_id, events in by_conversation.items():
        await outbox.send(conversation_id, *events)
