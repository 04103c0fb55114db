"""The streamed text's coalescing (turns/relay.py): frames do not grow with the deltas."""

from __future__ import annotations

import asyncio

import pytest

from chat.events import MeterMoved
from render import frames as fragments
from turns.relay import DeltaRelay

LONG = 3600.0  # an interval no test waits out: what goes out before it is what goes at once
BUBBLE = "<article>bubble</article>"
WHOLE = "<article>whole</article>"


class Shown:
    """An event standing in for a bubble: shown as its `html`."""

    def __init__(self, html: str) -> None:
        self.html = html


class Frames:
    """Stands in for the outbox: keeps each frame, rendered; `gate` (when set) holds every send
    until it is opened, as a slow layer would."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.arrived = asyncio.Event()
        self.gate: asyncio.Event | None = None

    async def send(self, conversation_id: int, *events) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.sent.append(
            "".join(e.html if isinstance(e, Shown) else fragments.render([e]) for e in events)
        )
        self.arrived.set()

    async def until(self, count: int) -> None:
        while len(self.sent) < count:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 5)


@pytest.fixture
def frames() -> Frames:
    return Frames()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_first_text_goes_at_once_with_the_bubble_and_a_burst_gathers_behind_it(frames):
    relay = DeltaRelay(7, 2, LONG, [Shown(BUBBLE)], send=frames.send)
    words = [f"w{i} " for i in range(500)]
    await relay.add(words[0])
    # The stream went on only once the first frame had been handed to the tabs.
    assert frames.sent == [BUBBLE + fragments.delta(2, "w0 ")]
    for word in words[1:]:  # the rest of the read
        await relay.add(word)
    await settle()
    assert len(frames.sent) == 1  # within the interval: they wait
    # Closing sends what waits at once, in one frame (the final frame waits for the save).
    assert await relay.close() == ()
    assert frames.sent[1:] == [fragments.delta(2, "".join(words[1:]))]


async def test_what_gathers_within_an_interval_goes_in_one_frame_in_order(frames):
    relay = DeltaRelay(7, 2, 0.001, [Shown(BUBBLE)], send=frames.send)
    await relay.add("a")
    for word in ["b", "c", "d<e"]:
        await relay.add(word)
    await frames.until(2)
    assert frames.sent == [BUBBLE + fragments.delta(2, "a"), fragments.delta(2, "bcd<e")]
    assert "d&lt;e" in frames.sent[1]  # model text is escaped
    await relay.add("f")
    await frames.until(3)
    assert frames.sent[2] == fragments.delta(2, "f")
    await relay.close()


async def test_the_bubble_goes_alone_when_no_text_comes_within_an_interval(frames):
    relay = DeltaRelay(7, 2, 0.001, [Shown(BUBBLE)], send=frames.send)
    await frames.until(1)
    assert frames.sent == [BUBBLE]
    assert await relay.close() == ()  # carried already: the final frame need not


async def test_after_the_bubble_went_alone_the_first_text_still_goes_at_once(frames):
    relay = DeltaRelay(7, 2, 0.001, [Shown(BUBBLE)], send=frames.send)
    await frames.until(1)  # the model was slow to start
    await relay.add("late start")
    assert frames.sent == [BUBBLE, fragments.delta(2, "late start")]
    await relay.add(" then more")
    assert len(frames.sent) == 2  # later text waits for its interval
    await relay.close()
    assert frames.sent[2] == fragments.delta(2, " then more")


async def test_closed_before_any_frame_the_bubble_is_handed_to_the_final_frame(frames):
    relay = DeltaRelay(7, 2, LONG, [Shown(BUBBLE)], send=frames.send)
    assert [e.html for e in await relay.close()] == [BUBBLE]
    await settle()
    assert frames.sent == []
    await relay.add("late")  # after close: nothing goes
    await settle()
    assert frames.sent == []


async def test_a_slow_layer_holds_the_stream_only_for_the_first_frame(frames):
    frames.gate = asyncio.Event()
    relay = DeltaRelay(7, 2, 0.0, [Shown(BUBBLE)], send=frames.send)
    adding = asyncio.ensure_future(relay.add("one "))
    await settle()
    assert not adding.done() and frames.sent == []  # the stream waits for its first frame
    frames.gate.set()
    await adding
    assert frames.sent == [BUBBLE + fragments.delta(2, "one ")]
    frames.gate.clear()
    await relay.add("two ")  # goes out, and is held by the slow layer: the stream goes on
    await settle()
    for word in ["three ", "four"]:
        await relay.add(word)  # behind the frame going out
    await settle()
    assert len(frames.sent) == 1
    frames.gate.set()
    await frames.until(3)
    assert frames.sent[1:] == [fragments.delta(2, "two "), fragments.delta(2, "three four")]
    await relay.close()


async def test_close_waits_for_the_frame_in_flight_then_sends_what_gathered(frames):
    relay = DeltaRelay(7, 2, 0.0, [Shown(BUBBLE)], send=frames.send)
    await relay.add("x")
    frames.gate = asyncio.Event()
    await relay.add("y")  # its frame goes out, held by the layer
    await settle()
    await relay.add("z")  # behind it
    closing = asyncio.ensure_future(relay.close())
    await settle()
    assert not closing.done()  # the frame is still going out
    frames.gate.set()
    assert await closing == ()
    assert frames.sent == [
        BUBBLE + fragments.delta(2, "x"),
        fragments.delta(2, "y"),
        fragments.delta(2, "z"),
    ]


async def test_a_checkpoint_sends_its_frame_after_the_one_in_flight_and_goes_on(frames):
    relay = DeltaRelay(7, 2, LONG, [Shown(BUBBLE)], send=frames.send)
    await relay.add("step one")
    await relay.add(" pending")  # not sent: the checkpoint's frame re-renders the bubble whole
    await relay.checkpoint(Shown(WHOLE))
    await relay.add("step two")
    await relay.close()
    assert frames.sent == [
        BUBBLE + fragments.delta(2, "step one"),
        WHOLE,
        fragments.delta(2, "step two"),
    ]


async def test_the_meter_rides_with_the_next_frame_of_text_newest_only(frames):
    relay = DeltaRelay(7, 2, 0.01, send=frames.send)
    await relay.add("first ")
    await frames.until(1)
    relay.meter(MeterMoved(1_200, 100, 5_000))
    relay.meter(MeterMoved(1_234, 134, 5_000))  # only the newest estimate is worth showing
    await relay.add("second ")
    await frames.until(2)
    assert "≈1,234" in frames.sent[1] and "≈1,200" not in frames.sent[1]
    assert 'id="meter-reply"' in frames.sent[1] and 'width="2.7%"' in frames.sent[1]
    await relay.close()
    assert "meter-reply" not in frames.sent[0]


async def test_thinking_gathers_into_one_frame_before_the_text_that_follows_it(frames):
    relay = DeltaRelay(7, 2, 0.01, [Shown(BUBBLE)], send=frames.send)
    for i in range(300):
        relay.think(f"t{i} ")
    relay.meter(MeterMoved(900, 890, 5000))
    await frames.until(1)
    (first,) = frames.sent
    # The bubble first, then its thinking box's share, once: not a frame per delta.
    assert first.startswith(BUBBLE)
    assert first.count('hx-swap-oob="beforeend:#msg-2-thinking"') == 1
    assert "t0 t1 " in first and "t299 " in first
    assert "900" in first  # the meter moves while the model thinks
    await relay.add("Answer")
    await relay.close()
    assert 'beforeend:#msg-2-text">Answer' in frames.sent[-1]
    assert "#msg-2-thinking" not in frames.sent[-1]
