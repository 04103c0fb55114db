"""The Redis channel layer as configured: an idle socket lives, and one sent on afterwards works.

With channels-redis' list layer (5 s blocking reads) and redis-py's own 5 s default read timeout,
an idle socket's read timed out and its websocket died after about five seconds.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import redis.asyncio
from django.conf import settings

from core.redis_layer import RedisLayer
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("channel_layer"),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL"),
]


async def test_a_socket_idle_for_a_minute_is_still_alive(alice, conversation, fake_llm):
    ws = socket_for(alice, conversation.pk)
    connected, _ = await ws.connect()
    assert connected
    await asyncio.sleep(60)  # idle: no frame either way
    assert await ws.receive_nothing(timeout=0.1)  # no close, no error frame
    await ws.send_to(text_data=json.dumps({"action": "send", "message": "still there?"}))
    await receive_until(ws, shows(2, "complete"))
    await settle(conversation.pk)
    await ws.disconnect()


@pytest.fixture
async def two_processes():
    """Two layers as two server processes configure them (one Redis, one prefix), their
    connections closed after the test."""
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    here, there = RedisLayer(**config), RedisLayer(**config)
    yield here, there
    await here.flush()
    await there.flush()


async def received(layer: RedisLayer, channel: str, timeout: float = 2.0) -> dict | None:
    try:
        async with asyncio.timeout(timeout):
            return await layer.receive(channel)
    except TimeoutError:
        return None


async def test_a_group_send_reaches_this_process_at_once_and_the_others_through_redis(
    two_processes,
):
    here, there = two_processes
    tab_here, tab_there = await here.new_channel(), await there.new_channel()
    await here.group_add("conversation-1", tab_here)
    await there.group_add("conversation-1", tab_there)
    await here.group_send("conversation-1", {"type": "chat.html", "html": "<p>1</p>"})
    # On the queue when the send returns: no round trip through Redis and back first.
    async with asyncio.timeout(0):
        assert await here.receive(tab_here) == {"type": "chat.html", "html": "<p>1</p>"}
    assert await received(there, tab_there) == {"type": "chat.html", "html": "<p>1</p>"}
    # Once each: the sender's own subscription hears its PUBLISH, and skips it.
    assert await received(here, tab_here, timeout=0.5) is None
    assert await received(there, tab_there, timeout=0.1) is None


async def test_a_send_to_another_process_socket_reaches_it_and_a_left_group_hears_nothing(
    two_processes,
):
    here, there = two_processes
    tab_there = await there.new_channel()
    await here.send(tab_there, {"type": "session.end"})
    assert await received(there, tab_there) == {"type": "session.end"}
    await there.group_add("user-7", tab_there)
    await there.group_discard("user-7", tab_there)
    await here.group_send("user-7", {"type": "session.end"})
    assert await received(there, tab_there, timeout=0.5) is None


async def test_a_socket_that_ends_leaves_its_groups(two_processes):
    here, there = two_processes
    tab = await there.new_channel()
    await there.group_add("conversation-2", tab)
    listening = asyncio.ensure_future(there.receive(tab))
    await asyncio.sleep(0.05)
    listening.cancel()  # as Channels ends a consumer
    await asyncio.gather(listening, return_exceptions=True)
    await here.group_send("conversation-2", {"type": "chat.html", "html": "x"})
    await asyncio.sleep(0.3)
    # Nothing queued for a channel that is gone, and the group's subscription was dropped:
    # Redis counts no subscriber for it.
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    try:
        [(_, subscribers)] = await client.pubsub_numsub(f"{here.prefix}:group:conversation-2")
    finally:
        await client.aclose()
    assert subscribers == 0
