"""A user deactivated by a query (no `save`, no signal: a script, a single sign-on hook) loses
their sockets: the consumer checks the user before an action and at every heartbeat, in this
process and in a real server process."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from chat.models import Conversation, Message
from support.servers import session_for
from tests.conftest import socket_for
from tests.servers import Server, Tab
from turns import active_users
from web.consumer import SESSION_ENDED

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


async def deactivate(user) -> None:
    await get_user_model().objects.filter(pk=user.pk).aupdate(is_active=False)


async def closed_with(ws) -> int | None:
    output = await ws.receive_output(timeout=3)
    return output.get("code") if output["type"] == "websocket.close" else None


async def test_an_action_after_a_deactivating_query_closes_the_socket(alice, conversation):
    ws = socket_for(alice, conversation.pk)
    assert (await ws.connect())[0]
    await deactivate(alice)
    await asyncio.sleep(active_users.RECHECK_SECONDS + 0.1)  # the socket's answer is stale
    await ws.send_json_to({"action": "send", "message": "Still here?"})
    assert await closed_with(ws) == SESSION_ENDED
    assert not await Message.objects.filter(conversation=conversation).aexists()


async def test_the_heartbeat_closes_the_deactivated_users_sockets_only(alice, bob, conversation):
    others = await Conversation.objects.acreate(owner=bob, model="fake-model")
    mine, theirs = socket_for(alice, conversation.pk), socket_for(bob, others.pk)
    assert (await mine.connect())[0] and (await theirs.connect())[0]
    await deactivate(alice)
    await active_users.check_sockets()  # what each heartbeat runs (turns/engine.py)
    assert await closed_with(mine) == SESSION_ENDED
    assert await theirs.receive_nothing(timeout=0.3)  # bob's socket is untouched
    await theirs.disconnect()


async def test_a_server_process_closes_a_socket_idle_since_the_query(alice, fake_anthropic):
    conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
    server = Server(fake_anthropic.url, TURN_HEARTBEAT_SECONDS="1").start()
    try:
        tab = await Tab(server, conversation.pk, await sync_to_async(session_for)(alice)).open()
        await deactivate(alice)
        async with asyncio.timeout(5):  # a heartbeat or two
            await tab.socket.wait_closed()
        assert tab.socket.close_code == SESSION_ENDED
    finally:
        server.stop()
