"""Streamed text out to every tab, coalesced: at most one frame per interval.

A model sends a delta per token; sending each through the channel layer would make fan-out cost
grow with the number of tokens. The stream loop only appends text here; a small task sends what
has gathered, the first delta at once (first-token latency is what users feel) and then at most
one frame every DELTA_INTERVAL_MS. The reply's bubble (the `preface`) rides in the first frame,
or goes alone if no text has come within one interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from . import broadcast, fragments


class DeltaRelay:
    def __init__(self, conversation_id: int, seq: int, interval: float, preface: str = "") -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.interval = interval
        self._preface = preface
        self._pending: list[str] = []
        self._ready = asyncio.Event()
        self._closed = asyncio.Event()
        self._last_sent = float("-inf")
        self._task = asyncio.ensure_future(self._send_loop())

    def add(self, text: str) -> None:
        if text:
            self._pending.append(text)
            self._ready.set()

    async def close(self) -> str:
        """Stop after the frame in flight, if any. Text still pending is not sent: the reply's
        final frame follows at once and replaces the bubble whole. Returns the preface if no
        frame carried it: the final frame must carry it then."""
        self._closed.set()
        self._ready.set()
        await asyncio.gather(asyncio.shield(self._task), return_exceptions=True)
        preface, self._preface = self._preface, ""
        return preface

    async def checkpoint(self, frame: str) -> None:
        """Between two steps of a turn: send `frame` (the bubble re-rendered whole, so text
        still pending is in it) after the frame in flight, then relay the next step's text."""
        preface = await self.close()
        await broadcast.html(self.conversation_id, preface + frame)
        self._pending.clear()
        self._closed.clear()
        self._ready.clear()
        self._task = asyncio.ensure_future(self._send_loop())

    async def _send_loop(self) -> None:
        while True:
            if self._preface:  # the first text, or one interval: then the bubble goes, text or not
                await _wait(self._ready, self.interval)
            else:
                await self._ready.wait()
                await _wait(self._closed, self._last_sent + self.interval - time.monotonic())
            if self._closed.is_set():
                return
            self._ready.clear()
            text, self._pending = "".join(self._pending), []
            frame, self._preface = self._preface, ""
            if text:
                self._last_sent = time.monotonic()
                frame += fragments.delta(self.seq, text)
            await broadcast.html(self.conversation_id, frame)


async def _wait(event: asyncio.Event, seconds: float) -> None:
    """Until the event is set or the seconds have passed, whichever comes first."""
    if seconds > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)
