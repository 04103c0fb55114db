"""What this process is running, kept alive and stoppable from any tab in any process.

- Heartbeat: every TURN_HEARTBEAT_SECONDS one write touches every reply and compaction this
  process runs (`beat`), so other processes can tell a live row from one whose process died.
  The same round learns which replies a user stopped, from the database.
- Stop, at once: the process listens on one channel of the channel layer; while it streams a
  reply of conversation X, that channel is in X's control group, where Stop is sent.

What runs is kept on the runtime, per event loop (`core.runtime.Loop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from channels.layers import get_channel_layer

from compaction import boundaries
from core import channel_layer, db, runtime
from turns import transitions

log = logging.getLogger(__name__)


async def watch_reply(reply, task: asyncio.Task) -> None:
    """`task` streams `reply` here: Stop reaches it, and the heartbeat keeps it alive."""
    here = runtime.current().loop()
    conversation_id = reply.conversation_id
    here.replies[reply.pk] = (conversation_id, reply.seq, task)
    layer = get_channel_layer()
    try:
        if here.listener is None or here.listener.done():
            here.channel = await layer.new_channel()
            here.listener = asyncio.ensure_future(_listen(here.channel))
            here.listening.clear()
        if conversation_id not in here.listening:
            # Joined once and kept while the conversation is active (a Stop for a reply this
            # process no longer streams finds nothing here and is ignored): a turn saves two
            # round trips to Redis. Idle memberships are left by `forget_idle`.
            await layer.group_add(channel_layer.control_group(conversation_id), here.channel)
    except Exception as exc:
        # Redis down: the reply streams all the same, and a Stop reaches it through the
        # database at the next beat. Joined at the next reply.
        channel_layer.outage(exc)
        log.debug("Stop of conversation %s goes by the heartbeat", conversation_id)
        return
    here.listening[conversation_id] = time.monotonic()


def unwatch_reply(reply_id: int) -> None:
    runtime.current().loop().replies.pop(reply_id, None)


def watch_compaction(compaction_id: int, task: asyncio.Task) -> None:
    runtime.current().loop().compactions[compaction_id] = task


def unwatch_compaction(compaction_id: int) -> None:
    runtime.current().loop().compactions.pop(compaction_id, None)


def stop(conversation_id: int, seq: int | None = None) -> None:
    """Cancel the conversation's reply streaming here (only reply `seq`, when given)."""
    for owner, reply_seq, task in list(runtime.current().loop().replies.values()):
        if owner == conversation_id and seq in (None, reply_seq):
            task.cancel()


async def _listen(channel: str) -> None:
    layer = get_channel_layer()
    while True:
        message = await layer.receive(channel)
        if message.get("type") == "turn.stop":
            stop(int(message.get("conversation", 0)), message.get("seq"))


async def forget_idle(idle_for: float = 3600) -> None:
    """Leave the control groups of conversations not streamed here for a while, so the
    subscriptions stay bounded (and the in-memory layer, which expires memberships after a day,
    never drops one still in use: it is joined again on next use)."""
    here = runtime.current().loop()
    active = {owner for owner, _, _ in here.replies.values()}
    now = time.monotonic()
    for conversation_id, last in list(here.listening.items()):
        if conversation_id not in active and now - last > idle_for and here.channel:
            del here.listening[conversation_id]
            await get_channel_layer().group_discard(
                channel_layer.control_group(conversation_id), here.channel
            )


async def beat() -> None:
    """Touch every reply and compaction this process runs; cancel the replies stopped (or
    closed) elsewhere."""
    here = runtime.current().loop()
    if here.replies:
        for reply_id in await db.run(transitions.touch, list(here.replies)):
            watched = here.replies.get(reply_id)
            if watched is not None:
                watched[-1].cancel()
    if here.compactions:
        await db.run(boundaries.touch, list(here.compactions))


def track_driver(conversation_id: int, task: asyncio.Task) -> None:
    """`task` drives the conversation's steps here: logged if it fails, forgotten when done."""
    drivers = runtime.current().loop().drivers
    running = drivers[conversation_id]
    running.add(task)

    def forget(done: asyncio.Task) -> None:
        running.discard(done)
        if not running:
            drivers.pop(conversation_id, None)
        if not done.cancelled() and done.exception() is not None:
            log.error("work on conversation %s failed", conversation_id, exc_info=done.exception())

    task.add_done_callback(forget)


def driving(conversation_id: int) -> bool:
    """Whether this process drives the conversation's steps now."""
    return conversation_id in runtime.current().loop().drivers


async def shutdown(timeout: float = 10) -> None:
    """Stop everything this loop runs: replies close as interrupted with their text,
    compactions as failed, so nothing waits for a stale heartbeat after a clean restart."""
    here = runtime.current().loop()
    for task in (here.background, here.embedding, here.listener, *here.titles.values()):
        if task is not None:
            task.cancel()
    drivers = [t for tasks in here.drivers.values() for t in tasks]
    for task in drivers:
        task.cancel()
    if drivers:
        await asyncio.wait(drivers, timeout=timeout)
    for task in (here.background, here.embedding, here.listener):
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
    here.background = here.embedding = here.listener = here.channel = None
    here.listening.clear()
