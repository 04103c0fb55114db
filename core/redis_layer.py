"""The channel layer under REDIS_URL: frames for sockets in this process are handed to them
directly; only sockets in other processes hear them through Redis pub/sub.

A streamed fragment is a group send to a conversation's tabs, and those tabs are nearly always
in the process that streams the reply. channels_redis's pub/sub layer sent every fragment to
Redis and read it back: a PUBLISH, then a read, a parse and a deserialisation in the same
process, on each process's one subscriber connection, for every fragment of every reply. Here a
group send puts the message on the queues of this event loop's members at once, and publishes it
for the others; each process subscribes to a group while one of its sockets is in it, and skips
what it published itself (by the sender's id at the head of the payload, before unpacking).

State is per event loop, as a Redis connection belongs to one: the server's loop holds its
sockets; a loop `async_to_sync` starts (a management command, a test) only publishes.
Delivery is best effort, as with any channel layer: what must not be lost is in the database,
and a tab that may have missed frames is told to read again (turns/engine.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

import msgpack
import redis.asyncio
from channels.layers import BaseChannelLayer

from core import channel_layer

log = logging.getLogger(__name__)

ID_BYTES = 16  # the sender's id, at the head of every payload


class RedisLayer(BaseChannelLayer):
    """`hosts`: one entry, a dict with the Redis `address` and redis-py connection options.
    `prefix` names this deployment's Redis channels (pub/sub ignores database numbers)."""

    extensions = ["groups", "flush"]

    def __init__(self, hosts, prefix: str = "asgi", capacity: int = 1000, **kwargs) -> None:
        super().__init__(capacity=capacity, **kwargs)
        [host] = hosts  # one Redis: pub/sub is not sharded here
        self.options = dict(host)
        self.address = self.options.pop("address")
        self.prefix = prefix
        self.loops: dict[asyncio.AbstractEventLoop, Loop] = {}

    # --- the Channels layer API -------------------------------------------------------------

    async def new_channel(self, prefix: str = "specific.") -> str:
        here = await self._here(listening=True)
        name = f"{prefix}{here.id.hex()}!{uuid.uuid4().hex}"
        here.queues[name] = asyncio.Queue()
        return name

    async def send(self, channel: str, message: dict) -> None:
        self.require_valid_channel_name(channel)
        here = await self._here()
        if channel in here.queues:
            here.put(channel, message)
        else:  # a channel of another loop: published to its owner (the id before the "!")
            owner = channel.partition("!")[0][-2 * ID_BYTES :]
            await here.publish(self._redis_name("to", owner), here.pack(channel, message))

    async def receive(self, channel: str) -> dict:
        here = await self._here(listening=True)
        queue = here.queues.setdefault(channel, asyncio.Queue())
        try:
            return await queue.get()
        except asyncio.CancelledError:
            # Channels cancels a consumer's receive when it ends: its channel goes, and with
            # it any group membership the consumer did not discard.
            await self._forget(here, channel)
            raise

    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        here = await self._here(listening=True)
        members = here.groups.setdefault(group, set())
        members.add(channel)
        # Subscribed again even when another socket here is in the group: SUBSCRIBE is one
        # write, idempotent in Redis, and it fails while Redis is down, so a socket is not
        # accepted in an outage (its tab would hear nothing from other processes).
        try:
            await here.subscribe(self._redis_name("group", group))
        except Exception:
            members.discard(channel)
            if not members:
                del here.groups[group]
            raise

    async def group_discard(self, group: str, channel: str) -> None:
        here = await self._here()
        members = here.groups.get(group)
        if members is None or channel not in members:
            return
        members.discard(channel)
        if not members:
            del here.groups[group]
            await here.unsubscribe(self._redis_name("group", group))

    async def group_send(self, group: str, message: dict) -> None:
        self.require_valid_group_name(group)
        here = await self._here()
        for channel in here.groups.get(group, ()):
            here.put(channel, message)
        await here.publish(self._redis_name("group", group), here.pack(None, message))

    async def flush(self) -> None:
        """This loop's connections closed, its queues and groups emptied."""
        here = self.loops.pop(asyncio.get_running_loop(), None)
        if here is not None:
            await here.close()

    close = flush

    # --- inside ---------------------------------------------------------------------------

    def _redis_name(self, kind: str, name: str) -> str:
        return f"{self.prefix}:{kind}:{name}"

    async def _here(self, listening: bool = False) -> Loop:
        loop = asyncio.get_running_loop()
        here = self.loops.get(loop)
        if here is None:
            for other in [other for other in self.loops if other.is_closed()]:
                del self.loops[other]  # a loop async_to_sync started, and closed since
            here = self.loops[loop] = Loop(
                redis.asyncio.Redis.from_url(self.address, **self.options),
                self.prefix,
                self.capacity,
            )
        if listening:
            await here.listen(self._redis_name("to", here.id.hex()))
        return here

    async def _forget(self, here: Loop, channel: str) -> None:
        here.queues.pop(channel, None)
        for group, members in list(here.groups.items()):
            if channel in members:
                try:
                    await self.group_discard(group, channel)
                except Exception as exc:  # Redis down: unsubscribed with the connection
                    channel_layer.outage(exc)


@dataclass
class Loop:
    """One event loop's part of the layer: its sockets' queues, the groups they are in, and the
    two Redis connections it uses (one publishes, one holds the subscriptions)."""

    client: redis.asyncio.Redis
    prefix: str
    capacity: int
    id: bytes = field(default_factory=lambda: uuid.uuid4().bytes)
    queues: dict[str, asyncio.Queue] = field(default_factory=dict)
    groups: dict[str, set[str]] = field(default_factory=dict)
    pubsub: redis.asyncio.client.PubSub | None = None
    reader: asyncio.Task | None = None
    # Publishes waiting for the batch being sent to finish, and that next batch's outcome.
    pending: list[tuple[str, bytes]] = field(default_factory=list)
    batch: asyncio.Future | None = None
    sending: asyncio.Lock = field(default_factory=asyncio.Lock)
    sends: set[asyncio.Task] = field(default_factory=set)
    subscribing: asyncio.Lock = field(default_factory=asyncio.Lock)

    def put(self, channel: str, message: dict) -> None:
        """Hand `message` to a socket's queue here. A socket this far behind misses it, as with
        Channels' own layers; each gets a copy, so one consumer's handling never changes what
        another receives."""
        queue = self.queues.get(channel)
        if queue is None:
            return
        if queue.qsize() < self.capacity:
            queue.put_nowait(dict(message))
        else:
            log.debug("the queue of %s is full: a message was dropped", channel)

    def pack(self, channel: str | None, message: dict) -> bytes:
        return self.id + msgpack.packb([channel, message], use_bin_type=True)

    async def publish(self, name: str, payload: bytes) -> None:
        """Publish with whatever else is waiting to, in one pipeline on one connection, in the
        order asked: under load one round trip carries many fragments (a connection per
        concurrent publish, as redis-py's pool gives, ran out of connections at 100 chats).
        Raises what the batch's round trip raised (Redis down, or not answering in time)."""
        self.pending.append((name, payload))
        batch = self.batch
        if batch is None:
            batch = self.batch = asyncio.get_running_loop().create_future()
            # Read even when every caller waiting on it was cancelled (never logged unread).
            batch.add_done_callback(lambda done: done.cancelled() or done.exception())
            sending = asyncio.ensure_future(self._send(batch))
            self.sends.add(sending)  # the loop keeps only a weak reference to a task
            sending.add_done_callback(self.sends.discard)
        await asyncio.shield(batch)  # one caller cancelled does not cancel the others' batch

    async def _send(self, batch: asyncio.Future) -> None:
        async with self.sending:
            self.batch = None  # what is published from now on goes in the next batch
            publishes, self.pending = self.pending, []
            try:
                async with self.client.pipeline(transaction=False) as pipe:
                    for name, payload in publishes:
                        pipe.publish(name, payload)
                    await pipe.execute()
            except Exception as exc:
                batch.set_exception(exc)
            else:
                batch.set_result(None)

    async def listen(self, own: str) -> None:
        """Once: subscribe to this loop's own channel (where sends to its sockets' channels from
        elsewhere arrive), and start reading. Callers at the same moment wait for the same
        subscription (one connection, one reader); if it fails, the next caller tries again."""
        if self.reader is not None:
            return
        async with self.subscribing:
            if self.reader is None:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                try:
                    await pubsub.subscribe(own)
                except BaseException:
                    await pubsub.aclose()
                    raise
                self.pubsub = pubsub
                self.reader = asyncio.ensure_future(self._read())

    async def subscribe(self, name: str) -> None:
        await self.pubsub.subscribe(name)

    async def unsubscribe(self, name: str) -> None:
        if self.pubsub is not None:
            await self.pubsub.unsubscribe(name)

    async def _read(self) -> None:
        while True:
            try:
                # Blocks until a message comes, however long (not cut by the socket timeout).
                message = await self.pubsub.get_message(timeout=None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Redis down: said once for the outage. redis-py connects again on the next
                # read and subscribes again to every channel it was subscribed to.
                channel_layer.outage(exc)
                await asyncio.sleep(1)
                continue
            if message is not None and message["type"] == "message":
                self._deliver(message["channel"], message["data"])

    def _deliver(self, name: bytes, data: bytes) -> None:
        if data[:ID_BYTES] == self.id:
            return  # published here, and handed to this loop's sockets then
        try:
            channel, content = msgpack.unpackb(data[ID_BYTES:], raw=False)
        except Exception:
            log.warning("dropped a message on %s that could not be read", name)
            return
        if channel is not None:
            targets = [channel]
        else:
            group = name.decode().removeprefix(f"{self.prefix}:group:")
            targets = self.groups.get(group, ())
        for target in targets:
            self.put(target, content)

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)
        if self.pubsub is not None:
            await self.pubsub.aclose()
        await self.client.aclose()
