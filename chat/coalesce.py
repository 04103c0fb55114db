"""Streamed text out to every tab, coalesced: at most one frame per interval.

A model sends a delta per token; sending each through the channel layer would make fan-out cost
grow with the number of tokens. The stream loop only appends text here; a small task sends what
has gathered, the first delta at once (first-token latency is what users feel) and then at most
one frame every DELTA_INTERVAL_MS.
"""

from __future__ import annotations

import asyncio
import time

from . import broadcast, fragments


class DeltaRelay:
    def __init__(self, conversation_id: int, seq: int, interval: float) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.interval = interval
        self._pending: list[str] = []
        self._ready = asyncio.Event()
        self._closed = asyncio.Event()
        self._last_sent = float("-inf")
        self._task = asyncio.ensure_future(self._send_loop())

    def add(self, text: str) -> None:
        if text:
            self._pending.append(text)
            self._ready.set()

    async def close(self) -> None:
        """Stop after the frame in flight, if any. Text still pending is not sent: the reply's
        final frame follows at once and replaces the bubble whole."""
        self._closed.set()
        self._ready.set()
        await asyncio.shield(self._task)

    async def _send_loop(self) -> None:
        while True:
            await self._ready.wait()
            wait = self._last_sent + self.interval - time.monotonic()
            if wait > 0:
                try:
                    await asyncio.wait_for(self._closed.wait(), wait)
                except TimeoutError:
                    pass
            if self._closed.is_set():
                return
            self._ready.clear()
            text, self._pending = "".join(self._pending), []
            self._last_sent = time.monotonic()
            await broadcast.html(self.conversation_id, fragments.delta(self.seq, text))
