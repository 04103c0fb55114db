"""One log line per state change, not per event: a client's malformed frame is a warning without
a traceback, a Redis outage is said when it starts and when it ends, and a Redis that accepts
connections and never answers is given up on within about a second per command."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from websockets.exceptions import ConnectionClosed, InvalidStatus

import config.asgi  # noqa: F401 (its django.setup() resets logging: not inside a test)
from chat.models import Conversation
from support.servers import Redis, session_for
from tests.conftest import socket_for
from tests.servers import Server, Tab, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def log_of(server: Server) -> str:
    server.log.flush()
    return Path(server.log.name).read_text(errors="replace")


async def test_a_frame_that_is_not_json_is_one_warning(alice, conversation, caplog):
    ws = socket_for(alice, conversation.pk)
    assert (await ws.connect())[0]
    with caplog.at_level(logging.INFO):
        await ws.send_to(text_data="{not json")
        assert "not valid JSON" in await ws.receive_from()
    [record] = [r for r in caplog.records if "not valid JSON" in r.getMessage()]
    assert record.levelno == logging.WARNING and record.exc_info is None
    await ws.disconnect()


async def test_a_frame_that_is_not_utf8_is_one_warning_line(alice, fake_anthropic):
    server = Server(fake_anthropic.url, LOG_LEVEL="INFO").start()
    try:
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        for _ in range(3):
            tab = await Tab(server, conversation.pk, key).open()
            await tab.socket.send(b"\xff\xfe not UTF-8", text=True)
            with pytest.raises(ConnectionClosed) as closed:
                await tab.until(lambda f: False, timeout=10)
            assert closed.value.rcvd.code == 1007  # invalid payload data
        log = log_of(server)
    finally:
        server.stop()
    assert log.count("WARNING:  refused a frame that was not valid UTF-8 (closed 1007)") == 3
    assert "Traceback" not in log and "ERROR" not in log


async def test_a_redis_outage_is_said_when_it_starts_and_when_it_ends(alice, fake_anthropic):
    redis = Redis().start()
    beats = {"TURN_HEARTBEAT_SECONDS": "1", "TURN_STALE_SECONDS": "5", "LOG_LEVEL": "INFO"}
    server = Server(fake_anthropic.url, REDIS_URL=redis.url, **beats).start()
    try:
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        tab = await Tab(server, conversation.pk, key).open()
        await Tab(server, conversation.pk, key).open()  # an idle one
        redis.stop()
        await tab.send(action="send", message="in an outage")  # frames, a reply, a Stop group
        for _ in range(4):  # pages retrying their sockets, every beat finding Redis gone
            await asyncio.sleep(1)
            with pytest.raises((InvalidStatus, ConnectionClosed, OSError)):
                await Tab(server, conversation.pk, key).open()
        redis.start()

        async def reopened():
            try:
                return await Tab(server, conversation.pk, key).open()
            except (InvalidStatus, OSError):
                return None

        tab = await wait_for(reopened, timeout=20, every=0.5)
        await tab.send(action="send", message="after")
        await tab.until(lambda f: "Hello from the fake server" in f and "streaming" not in f)
        await wait_for(lambda: _said(server, "is back after"), timeout=10)
        log = log_of(server)
    finally:
        server.stop()
        redis.stop()
    assert log.count("the channel layer (Redis) is down") == 1, log
    assert log.count("the channel layer (Redis) is back after") == 1, log
    assert "Traceback" not in log and "could not send a frame" not in log


async def _said(server: Server, text: str) -> bool:
    return text in log_of(server)


async def test_a_redis_that_never_answers_is_given_up_on_within_a_second(alice, fake_anthropic):
    held: list[asyncio.StreamWriter] = []

    async def never_answer(reader, writer):
        held.append(writer)  # accepted, read, never answered
        while await reader.read(4096):
            pass

    silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    server = Server(fake_anthropic.url, REDIS_URL=f"redis://127.0.0.1:{port}/0").start()
    try:
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        key = await sync_to_async(session_for)(alice)
        took = []
        for _ in range(3):
            started = time.monotonic()
            with pytest.raises(InvalidStatus):  # refused at the handshake: the page retries
                await Tab(server, conversation.pk, key).open()
            took.append(time.monotonic() - started)
    finally:
        server.stop()
        silent.close()
        for writer in held:
            writer.close()
    # The socket's channel cannot be joined: given up on after a second, and not asked again
    # (before, each command waited 30 s, longer than a browser waits for a handshake).
    assert max(took) < 2, took
