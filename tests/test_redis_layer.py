"""The Redis channel layer as configured: an idle socket lives, and one sent on afterwards works.

With channels-redis' list layer (5 s blocking reads) and redis-py's own 5 s default read timeout,
an idle socket's read timed out and its websocket died after about five seconds.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from django.conf import settings

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
