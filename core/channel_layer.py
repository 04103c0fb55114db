"""The channel layer: the groups that reach a conversation's tabs, a user's sockets and the
process streaming a reply, and the control messages sent to them.

Without REDIS_URL the app is one process and uses `InMemoryLayer`. Channels' in-memory layer
looks through every channel and group for expired messages on every receive, so with a few
hundred sockets open each fragment delivered costs a walk over all of them: expired messages only
need clearing now and then, so this does it at most once a second. Its group send also starts a
task per member and waits for them as they complete; a send to a queue in memory never waits, so
here the members are sent to one after the other, in the sender's own task (a streamed frame is a
group send: this is per frame, for every reply).
"""

from __future__ import annotations

import logging
import time

import redis.asyncio
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from core import runtime

log = logging.getLogger(__name__)


def conversation_group(conversation_id: int) -> str:
    """Every tab open on a conversation, in every process: where the outbox sends."""
    return f"conversation-{conversation_id}"


def user_group(user_id: int) -> str:
    """Every socket a user has open, in every process: ended when their sessions are."""
    return f"user-{user_id}"


def control_group(conversation_id: int) -> str:
    """Where Stop is sent: only the process streaming the reply listens here
    (turns/liveness.py)."""
    return f"conversation-{conversation_id}-control"


def outage(exc: BaseException) -> None:
    """The layer failed: said once when an outage starts, not a traceback per frame, socket and
    retry (each is a debug line); `answered` says when it ends."""
    if failure_of(exc) is None:  # not Redis failing: said as it is, and nothing is down
        log.warning("sending through the channel layer failed: %s", _reason(exc))
        return
    here = runtime.current()
    if here.layer_down_since is None:
        here.layer_down_since = time.monotonic()
        log.warning("the channel layer (Redis) is down: %s", _reason(exc))
    else:
        log.debug("the channel layer (Redis) is still down: %s", _reason(exc))


def answered() -> None:
    """The layer answered: an outage, if there was one, has ended."""
    here = runtime.current()
    if here.layer_down_since is not None:
        down = time.monotonic() - here.layer_down_since
        here.layer_down_since = None
        log.warning("the channel layer (Redis) is back after %.0f s", down)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# redis-py raises its own errors for a socket that failed (an OSError here is something else: a
# browser's socket that went away while a frame was sent to it).
FAILURES = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def failure_of(exc: BaseException | None) -> BaseException | None:
    """The failure to reach Redis behind `exc` (it or one of its causes), if that is what it is."""
    seen = 0
    while exc is not None and not isinstance(exc, FAILURES) and seen < 10:
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return exc if isinstance(exc, FAILURES) else None


async def end_sessions(user_id: int) -> None:
    """Close every socket of the user, in every process (they logged out, or changed their
    password). A tab whose session is still valid reconnects at once; the others cannot."""
    try:
        await get_channel_layer().group_send(user_group(user_id), {"type": "session.end"})
    except Exception as exc:
        outage(exc)
        log.warning("could not end the sockets of user %s at once", user_id)


async def stop(conversation_id: int, seq: int | None = None) -> None:
    """Stop the conversation's streaming reply (only if it is reply `seq`, when given), at once.
    Best effort: the request is in the database too, where the streaming process's heartbeat
    finds it within a beat (turns/liveness.py)."""
    try:
        await get_channel_layer().group_send(
            control_group(conversation_id),
            {"type": "turn.stop", "conversation": conversation_id, "seq": seq},
        )
    except Exception as exc:
        outage(exc)
        log.debug("Stop for conversation %s goes by the heartbeat", conversation_id)


async def identity() -> str | None:
    """Which channel layer answers now: the Redis server's run id, new each time it starts
    (with every subscription, and the frames sent before the sockets subscribed again, lost);
    "memory" for the in-memory layer; None when Redis does not answer. One short connection,
    with short timeouts: a heartbeat must not hang on a Redis that is gone."""
    if not settings.REDIS_URL:
        return "memory"
    try:
        async with redis.asyncio.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1
        ) as client:
            try:
                found = (await client.info("server"))["run_id"]
            except redis.exceptions.ResponseError:  # INFO refused (an ACL, a managed Redis)
                await client.ping()
                found = "answering"  # a restart goes unseen; an outage does not
    except Exception as exc:
        outage(exc)
        return None
    answered()
    return found


async def reachable() -> bool:
    """Whether the channel layer carries messages now: a send to a group no socket joins (a
    round trip to Redis; nothing at all in memory)."""
    try:
        await get_channel_layer().group_send("reachable", {"type": "reachable"})
    except Exception as exc:
        outage(exc)
        return False
    answered()
    return True


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
