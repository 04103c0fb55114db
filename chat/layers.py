"""The channel layer for a single process (no REDIS_URL).

Channels' in-memory layer looks through every channel and group for expired messages on every
receive, so with a few hundred sockets open each fragment delivered costs a walk over all of
them. Expired messages only need clearing now and then: this does it at most once a second.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer


class InMemoryLayer(InMemoryChannelLayer):
    CLEAN_EVERY = 1.0

    _cleaned_at = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._cleaned_at >= self.CLEAN_EVERY:
            self._cleaned_at = now
            super()._clean_expired()
