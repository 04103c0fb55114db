"""Streamed text out to every tab, coalesced: at most one frame per interval.

A model sends a delta per token; sending each through the channel layer would make fan-out cost
grow with the number of tokens. The stream loop only appends text here, except for the reply's
first text: first-token latency is what users feel, so it goes out at once, and the stream waits
until it has been handed to the tabs before reading on. Whatever came with it in the same read
(the rest of a burst, the end of the reply and the reply's saving) then follows it instead of
holding it back. After it, at most one frame goes every DELTA_INTERVAL_MS. The reply's bubble
(the `preface`) rides in the first frame, or goes alone if no text has come within one interval.
When the stream ends, what is still pending goes at once too: the final frame, which replaces
the bubble whole, waits for the reply to be saved.

A later delta costs a list append: the next frame is a callback scheduled when text first waits,
not a task woken per delta, and frames go out one at a time, in order (text that gathers while
a frame is going out follows it in the next).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from chat.events import Delta, MeterMoved, ThoughtDelta
from core import outbox


class DeltaRelay:
    """One streaming reply's text, out to its conversation's tabs. `preface`: events that go
    with the first frame (the reply's bubble). `send` is the outbox's (a test listens in)."""

    def __init__(
        self,
        conversation_id: int,
        seq: int,
        interval: float,
        preface: Sequence = (),
        *,
        send: Callable[..., Awaitable[None]] = outbox.send,
    ) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.interval = interval
        self._out = send
        self._loop = asyncio.get_running_loop()
        self._preface = tuple(preface)
        self._pending: list[str] = []
        self._thinking: list[str] = []  # thinking (extended thinking) not sent yet
        self._meter: MeterMoved | None = None  # the window's estimate, for the next frame
        self._timer: asyncio.Handle | None = None  # the next frame, when one is due
        self._text_came = False  # the reply's first text has come
        self._sending: asyncio.Future | None = None  # the frame going out
        self._last_sent = float("-inf")
        self._closed = False
        if preface:  # the bubble goes alone if no text comes within an interval
            self._timer = self._loop.call_later(interval, self._flush)

    async def add(self, text: str) -> None:
        """Relay `text`. Only the reply's first text waits, for its own frame to be handed to
        the tabs; later text returns at once."""
        if not text or self._closed:
            return
        self._pending.append(text)
        if not self._text_came:
            self._text_came = True
            await self._send_first()
        elif self._timer is None and self._sending is None:
            self._schedule()

    def think(self, text: str) -> None:
        """Relay thinking: it goes with the next frame, before that frame's text."""
        if not text or self._closed:
            return
        self._thinking.append(text)
        if self._timer is None and self._sending is None:
            self._schedule()

    def meter(self, moved: MeterMoved) -> None:
        """The window's estimate goes with the next frame of text (the newest one only)."""
        self._meter = moved

    async def close(self, *, send_pending: bool = True) -> tuple:
        """Stop: after the frame in flight, send what is still pending (unless `send_pending`
        is false) and wait for it. Returns the preface if no frame carried it: the final frame
        must carry it then."""
        self._closed = True
        self._cancel_timer()
        await self._frame_out()
        if send_pending and (self._pending or self._thinking):
            self._send()
            await self._frame_out()
        preface, self._preface = self._preface, ()
        return preface

    async def checkpoint(self, *events) -> None:
        """Between two steps of a turn: send `events` (the bubble shown again whole, so text
        still pending is in it) after the frame in flight, then relay the next step's text."""
        preface = await self.close(send_pending=False)
        await self._out(self.conversation_id, *preface, *events)
        self._pending.clear()
        self._thinking.clear()
        self._closed = False

    async def _send_first(self) -> None:
        """The reply's first text goes now (behind the bubble, if that went alone and is still
        going out); returns once the layer has taken it."""
        await self._frame_out()
        self._cancel_timer()  # the bubble's (it goes with this text), or the text's own
        if self._pending and not self._in_flight() and not self._closed:
            self._send()
        if self._in_flight():
            await self._frame_out()
        else:  # taken at once (a layer in memory): let the tabs' sockets write it first
            await asyncio.sleep(0)

    async def _frame_out(self) -> None:
        """Wait for the frame going out, if any; neither cancelled with the caller nor raising
        its error (a tab missing a frame reads the reply again when it reconnects)."""
        if self._in_flight():
            await asyncio.wait([self._sending])

    def _schedule(self) -> None:
        delay = self._last_sent + self.interval - self._loop.time()
        if delay > 0:
            self._timer = self._loop.call_later(delay, self._flush)
        else:
            self._timer = self._loop.call_soon(self._flush)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _flush(self) -> None:
        self._timer = None
        if not self._closed:
            self._send()

    def _send(self) -> None:
        """What has gathered (and the bubble, if no frame carried it yet) as one frame."""
        text, self._pending = "".join(self._pending), []
        thought, self._thinking = "".join(self._thinking), []
        events, self._preface = list(self._preface), ()
        if thought:
            events.append(ThoughtDelta(self.seq, thought))
        if text:
            events.append(Delta(self.seq, text))
        if thought or text:
            self._last_sent = self._loop.time()
            if self._meter is not None:
                events.append(self._meter)
                self._meter = None
        if events:
            # Eager: a layer in memory hands the frame over at once, without a turn of the loop.
            sending = self._out(self.conversation_id, *events)
            self._sending = asyncio.Task(sending, loop=self._loop, eager_start=True)
            self._sending.add_done_callback(self._sent)

    def _in_flight(self) -> bool:
        return self._sending is not None and not self._sending.done()

    def _sent(self, sending: asyncio.Future) -> None:
        if sending is not self._sending:
            return  # the first text went out after it without waiting for this callback
        self._sending = None
        if (self._pending or self._thinking) and not self._closed:
            self._schedule()
