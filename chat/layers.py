"""The channel layer for a single process (no REDIS_URL).

Channels' in-memory layer looks through every channel and group for expired messages on every
receive, so with a few hundred sockets open each fragment delivered costs a walk over all of
them. Expired messages only need clearing now and then: this does it at most once a second.

Its group send also starts a task per member and waits for them as they complete; a send to a
queue in memory never waits, so here the members are sent to one after the other, in the
sender's own task (a streamed frame is a group send: this is per frame, for every reply).
"""

from __future__ import annotations

import time

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class InMemoryLayer(InMemoryChannelLayer):
    CLEAN_EVERY = 1.0

    _cleaned_at = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._cleaned_at >= self.CLEAN_EVERY:
            self._cleaned_at = now
            super()._clean_expired()

    async def group_send(self, group, message):
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # as the base layer: a member too far behind misses this one
