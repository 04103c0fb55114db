"""What this process keeps between requests, on one object.

- caches of what never changes: the final rows of recent windows (chat/snapshot.py) and the chart's
  points before a boundary (chat/figures.py);
- the database threads (core/db.py), the clients of the cache the limits count in, and small
  values worked out once (a URL pattern);
- the CPU a server process holds to, with the lock file that keeps it its own (core/cpu.py);
- the model clients: those built from the settings, and any registered in their place (a test's
  or a benchmark's fake model: providers/registry.py);
- what this process runs right now (`Loop`): the replies it streams, its compactions, each
  conversation's driver, the heartbeat and the Stop listener, the SDK's connection pools and the
  MCP servers it started.

The runtime is made at start-up (the web room's app config, or on first use) and a test starts
from a fresh one with `reset()`: no other module keeps state of its own. Asyncio objects belong to
the event loop that made them, so what is tied to a loop sits in a `Loop` per running loop (a
server process has one; each test has its own; a sync caller going through async_to_sync gets a
short-lived one).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class Lru:
    """A bounded map, least recently used dropped first; safe to share between threads."""

    def __init__(self, size: int = 1000) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key):
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key, item) -> None:
        with self._lock:
            self._items[key] = item
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


@dataclass(eq=False)
class Loop:
    """What one event loop of this process runs and holds."""

    # reply id -> (conversation, reply seq, the task streaming it)
    replies: dict[int, tuple[int, int, asyncio.Task]] = field(default_factory=dict)
    compactions: dict[int, asyncio.Task] = field(default_factory=dict)
    # conversation -> the tasks driving its steps
    drivers: defaultdict[int, set[asyncio.Task]] = field(default_factory=lambda: defaultdict(set))
    background: asyncio.Task | None = None  # heartbeat and sweep
    titles: dict[int, asyncio.Task] = field(default_factory=dict)  # conversation -> its title ask
    embedding: asyncio.Task | None = None  # settled messages' vectors (chat/vectors.py)
    listener: asyncio.Task | None = None  # Stop, from any process
    channel: str | None = None  # the listener's channel
    # conversation -> when this process last streamed one of its replies, for those whose control
    # group has the listener's channel
    listening: dict[int, float] = field(default_factory=dict)
    sdk_clients: dict[Any, Any] = field(default_factory=dict)  # providers/anthropic.py
    mcp_servers: dict[str, Any] = field(default_factory=dict)  # tools/mcp.py: name -> connection
    mcp_resting: dict[str, float] = field(default_factory=dict)  # name -> when to try again
    # The sockets open here, each with an async `layer_down()`: when the channel layer stops
    # answering, the heartbeat tells them (turns/engine.py), as nothing else can reach them.
    sockets: set[Any] = field(default_factory=set)
    # Which channel layer answered at the last beat (Redis's run id: new after a restart), and
    # whether the sockets here are to be told to fetch again at the next (turns/engine.py).
    layer_identity: str | None = None
    resync_due: bool = False
    # owner -> their conversations whose queued reply waits here for a place under
    # REPLIES_AT_ONCE, kicked when one of the owner's replies ends here (turns/places.py)
    waiting: dict[int, set[int]] = field(default_factory=dict)


class Runtime:
    def __init__(self, *, render: Callable | None = None) -> None:
        # Events -> the HTML every tab is sent (core/outbox.py), installed by the web room.
        self.render = render
        self.windows = Lru(1000)  # conversation -> the final rows of its window
        self.chart_points = Lru(1000)  # (conversation, boundary) -> points before it
        self.registered: dict[str, Any] = {}  # model ("" = every model) -> client
        self.clients: dict[Any, Any] = {}  # configuration -> client built from the settings
        self.registered_embedder: Any = None  # in place of EMBEDDINGS (providers/embeddings.py)
        # Small values worked out once, from what does not change while the process runs (the
        # URL pattern every bubble's pin button fills in: reverse() walks the URLconf).
        self.memo: dict[str, Any] = {}
        # The heartbeat and sweep (turns/engine.py) start with the first socket or turn;
        # a test that runs the queue's recovery itself switches them off.
        self.background = True
        # Since when the channel layer (Redis) has failed, said once (core/channel_layer.py).
        self.layer_down_since: float | None = None
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()
        self._database: Any = None  # core/db.py's threads, made on first use
        # The CPU a server process holds to and the lock file that keeps it its own (core/cpu.py).
        self.cpu: tuple[int, Any] | None = None
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Loop] = (
            weakref.WeakKeyDictionary()
        )

    def database(self, make: Callable[[], Any]) -> Any:
        """The database threads (core/db.py), made by `make` on first use."""
        with self._lock:
            if self._database is None:
                self._database = make()
            return self._database

    def slots(self, name: str, size: int) -> threading.BoundedSemaphore:
        """A bound on work this process does at once (`name`: files being checked), made on
        first use with `size` places."""
        with self._lock:
            if name not in self._slots:
                self._slots[name] = threading.BoundedSemaphore(size)
            return self._slots[name]

    def loop(self) -> Loop:
        """What the running event loop holds."""
        running = asyncio.get_running_loop()
        state = self._loops.get(running)
        if state is None:
            state = self._loops[running] = Loop()
        return state

    def close(self) -> None:
        """Let the database threads end once idle (a test's runtime is replaced by the next)."""
        if self._database is not None:
            self._database.shutdown()


_current: Runtime | None = None


def current() -> Runtime:
    """This process's runtime, made on first use if start-up did not make it."""
    global _current
    if _current is None:
        _current = Runtime()
    return _current


def start(*, render: Callable) -> Runtime:
    """At start-up: the runtime, with the web room's renderer."""
    runtime = current()
    runtime.render = render
    return runtime


def reset() -> Runtime:
    """A fresh runtime with the same renderer: every cache, client and registration dropped."""
    global _current
    old = current()
    old.close()
    _current = Runtime(render=old.render)
    _current.cpu = old.cpu  # the threads stay held: so does the lock that says so
    return _current
