"""What this process is running, kept alive and stoppable from any tab in any process.

- Heartbeat: every TURN_HEARTBEAT_SECONDS one write touches every reply and compaction this
  process runs (`beat`), so other processes can tell a live row from one whose process died.
  The same round learns which replies a user stopped, from the database.
- Stop, at once: the process listens on one channel of the channel layer; while it streams a
  reply of conversation X, that channel is in X's control group, where Stop is sent.

State is per event loop (a server process has one; each test has its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections import defaultdict

from channels.layers import get_channel_layer

from compaction import run as compaction

from . import broadcast, db, queue

log = logging.getLogger(__name__)


class Local:
    def __init__(self) -> None:
        # reply id -> (conversation, reply seq, the task streaming it)
        self.replies: dict[int, tuple[int, int, asyncio.Task]] = {}
        self.compactions: dict[int, asyncio.Task] = {}
        self.drivers: dict[int, set[asyncio.Task]] = defaultdict(set)  # conversation -> drivers
        self.background: asyncio.Task | None = None
        self._channel: str | None = None
        self._listener: asyncio.Task | None = None
        # conversation -> when this process last streamed one of its replies, for those whose
        # control group has our channel
        self._listening: dict[int, float] = {}

    # --- replies ---------------------------------------------------------------------------

    async def watch_reply(self, reply, task: asyncio.Task) -> None:
        conversation_id = reply.conversation_id
        self.replies[reply.pk] = (conversation_id, reply.seq, task)
        layer = get_channel_layer()
        if self._listener is None or self._listener.done():
            self._channel = await layer.new_channel()
            self._listener = asyncio.ensure_future(self._listen(self._channel))
            self._listening.clear()
        if conversation_id not in self._listening:
            # Joined once and kept while the conversation is active (a Stop for a reply this
            # process no longer streams finds nothing here and is ignored): a turn saves two
            # round trips to Redis. Idle memberships are left by `forget_idle`.
            await layer.group_add(broadcast.control_group(conversation_id), self._channel)
        self._listening[conversation_id] = time.monotonic()

    def unwatch_reply(self, reply_id: int) -> None:
        self.replies.pop(reply_id, None)

    def stop(self, conversation_id: int, seq: int | None = None) -> None:
        for owner, reply_seq, task in list(self.replies.values()):
            if owner == conversation_id and seq in (None, reply_seq):
                task.cancel()

    async def _listen(self, channel: str) -> None:
        layer = get_channel_layer()
        while True:
            message = await layer.receive(channel)
            if message.get("type") == "turn.stop":
                self.stop(int(message.get("conversation", 0)), message.get("seq"))

    async def forget_idle(self, idle_for: float = 3600) -> None:
        """Leave the control groups of conversations not streamed here for a while, so the
        subscriptions stay bounded (and the in-memory layer, which expires memberships after a
        day, never drops one still in use: it is joined again on next use)."""
        active = {owner for owner, _, _ in self.replies.values()}
        now = time.monotonic()
        for conversation_id, last in list(self._listening.items()):
            if conversation_id not in active and now - last > idle_for and self._channel:
                del self._listening[conversation_id]
                await get_channel_layer().group_discard(
                    broadcast.control_group(conversation_id), self._channel
                )

    # --- heartbeat ---------------------------------------------------------------------------

    async def beat(self) -> None:
        if self.replies:
            stopped = await db.run(queue.touch, list(self.replies))
            for reply_id in stopped:
                entry = self.replies.get(reply_id)
                if entry is not None:
                    entry[-1].cancel()
        if self.compactions:
            await db.run(compaction.touch, list(self.compactions))

    # --- lifetime ----------------------------------------------------------------------------

    def track_driver(self, conversation_id: int, task: asyncio.Task) -> None:
        drivers = self.drivers[conversation_id]
        drivers.add(task)

        def forget(done: asyncio.Task) -> None:
            drivers.discard(done)
            if not drivers:
                self.drivers.pop(conversation_id, None)
            if not done.cancelled() and done.exception() is not None:
                log.error(
                    "work on conversation %s failed", conversation_id, exc_info=done.exception()
                )

        task.add_done_callback(forget)

    async def shutdown(self, timeout: float = 10) -> None:
        """Stop everything this process runs: replies close as interrupted with their text,
        compactions as failed, so nothing waits for a stale heartbeat after a clean restart."""
        for task in (self.background, self._listener):
            if task is not None:
                task.cancel()
        drivers = [t for tasks in self.drivers.values() for t in tasks]
        for task in drivers:
            task.cancel()
        if drivers:
            await asyncio.wait(drivers, timeout=timeout)
        for task in (self.background, self._listener):
            if task is not None:
                with contextlib.suppress(BaseException):
                    await task
        self.background = self._listener = self._channel = None
        self._listening.clear()


_locals: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Local] = weakref.WeakKeyDictionary()


def local() -> Local:
    loop = asyncio.get_running_loop()
    state = _locals.get(loop)
    if state is None:
        state = _locals[loop] = Local()
    return state
