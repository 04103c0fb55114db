"""The cost of one streamed frame through the single-process channel layer, to one tab.

Run by hand (`.venv/bin/python bench/fanout.py`, `--help` for the flags); not a test.

Every frame of a reply is a group send to the conversation's group, delivered to each of its
tabs' consumers by Channels' consumer loop (`await_many_dispatch`). This sends `--frames` frames
one at a time (the next once the consumer has taken the last, as frames 50 ms apart are), with
`--sockets` other sockets' groups in the layer as under load, and prints the CPU per frame for:

- Channels' own `InMemoryChannelLayer` (the reference);
- `core.channel_layer.InMemoryLayer` with Channels' group send (expired messages cleared once
  a second instead of on every send and receive);
- `core.channel_layer.InMemoryLayer` as the app runs it (its group send in the sender's task).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DJANGO_DEBUG", "true")

import django  # noqa: E402

django.setup()

import uvloop  # noqa: E402
from channels.layers import InMemoryChannelLayer  # noqa: E402
from channels.utils import await_many_dispatch  # noqa: E402

from core.channel_layer import InMemoryLayer  # noqa: E402


class CleaningOnly(InMemoryLayer):
    group_send = InMemoryChannelLayer.group_send


async def per_frame(layer_class, frames: int, sockets: int) -> float:
    """CPU microseconds per frame, from the group send to the consumer's handler."""
    layer = layer_class()
    for i in range(sockets):
        await layer.group_add(f"conversation-{i + 2}", await layer.new_channel())
    tab = await layer.new_channel()
    await layer.group_add("conversation-1", tab)
    browser = asyncio.Queue()  # the socket's own receive: nothing arrives on it here
    taken = asyncio.Event()

    async def dispatch(message: dict) -> None:
        taken.set()

    receiving = [browser.get, functools.partial(layer.receive, tab)]
    consumer = asyncio.ensure_future(await_many_dispatch(receiving, dispatch))
    await asyncio.sleep(0)
    started = time.process_time()
    for _ in range(frames):
        taken.clear()
        await layer.group_send("conversation-1", {"type": "chat.html", "html": "<span>x</span>"})
        await taken.wait()
    spent = time.process_time() - started
    consumer.cancel()
    return spent / frames * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=20000, help="frames sent (default 20000)")
    p.add_argument("--sockets", type=int, default=100, help="other sockets (default 100)")
    args = p.parse_args(argv)
    layers = [
        ("Channels' InMemoryChannelLayer", InMemoryChannelLayer),
        ("InMemoryLayer, Channels' group send", CleaningOnly),
        ("InMemoryLayer (the app's)", InMemoryLayer),
    ]
    results = [
        (name, uvloop.run(per_frame(layer, args.frames, args.sockets))) for name, layer in layers
    ]
    reference = results[0][1]
    print(f"{args.frames} frames to one tab, {args.sockets} other sockets; CPU per frame:")
    for name, micros in results:
        print(f"  {name:<38} {micros:6.1f} us  ({micros / reference:.2f}x the reference)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
