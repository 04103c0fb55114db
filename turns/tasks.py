"""The engine's small tools: tasks that start at once, claims held through cancellation, and
replies a claim recovered shown to their tabs.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from chat.events import MessageChanged, Progress
from chat.models import Message
from core import db, outbox
from turns import claiming, places, transitions


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


async def follow(claim: transitions.Claim, conversation_id: int) -> transitions.Step:
    """What a claim leaves to run here. One left to `claim_next` (the closing reply could not
    take its owner's lock) is made now; a queued reply waiting for a place says why where the
    person looks, and is kicked when one of its owner's replies ends here; one that starts
    after waiting clears that line."""
    await show_recovered(claim.recovered)
    if claim.again:
        claim = await hold(db.run(claiming.claim_next, conversation_id))
        await show_recovered(claim.recovered)
    if claim.waiting is not None:
        owner, running = claim.waiting
        places.remember(owner, conversation_id)
        await outbox.send(conversation_id, Progress(places.waiting_text(running)))
    elif isinstance(claim.step, transitions.Turn):
        # Whichever process said "Waiting", the line goes when the reply starts.
        places.forget(conversation_id)
        await outbox.send(conversation_id, Progress(""))
    return claim.step
