"""A queued reply waits for a place under REPLIES_AT_ONCE, against two real server processes.

Three of alice's replies stream; in two more conversations a compaction runs with a message
queued behind it, one compaction committing and one failing (its summary would not make the
window smaller). When the compactions end, both queued replies find the user at the limit: they
wait, say why, and start only as the three end. The number streaming is read from the database
every 20 ms throughout: never more than the limit.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from chat.models import Conversation, Message
from compaction.models import Compaction
from support.servers import session_for
from tests.servers import Server, Tab, wait_for
from tests.transcripts import add_turns

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3


@pytest.fixture
def two_servers(fake_anthropic):
    env = {"REPLIES_AT_ONCE": str(LIMIT), "TURN_HEARTBEAT_SECONDS": "1"}
    servers = [Server(fake_anthropic.url, **env).start() for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()


async def streaming(alice) -> int:
    return await Message.objects.filter(
        conversation__owner=alice, status=Message.Status.STREAMING
    ).acount()


async def watch_streaming(alice, peaks: list[int]) -> None:
    while True:
        peaks.append(await streaming(alice))
        await asyncio.sleep(0.02)


async def compact_then_queue(tab: Tab, conversation, fake_anthropic, requests: int) -> None:
    """Compact by hand (its summary request is the fake's `requests`th), and send a message
    while it runs: it queues behind the compaction."""
    await tab.send(action="compact")
    await wait_for(lambda: _running(conversation), timeout=10)
    await wait_for(lambda: _received(fake_anthropic, requests), timeout=10)
    await tab.send(action="send", message="Typed while it compacts.")
    await tab.until(lambda f: 'id="msg-17"' in f and 'class="badge queued"' in f)


async def _running(conversation) -> bool:
    return await Compaction.objects.filter(conversation=conversation, status="running").aexists()


async def _received(fake_anthropic, count: int) -> bool:
    return len(fake_anthropic.requests) >= count


async def test_replies_queued_behind_compactions_wait_for_a_place(
    alice, fake_anthropic, two_servers
):
    key = await sync_to_async(session_for)(alice)
    chats = [await Conversation.objects.acreate(owner=alice, model="claude-test") for _ in range(3)]
    compacting = []
    for _ in range(2):
        conversation = await Conversation.objects.acreate(owner=alice, model="claude-test")
        await sync_to_async(add_turns)(conversation, 8)
        compacting.append(conversation)
    tabs = [
        await Tab(two_servers[n % 2], c.pk, key).open() for n, c in enumerate(chats + compacting)
    ]
    peaks: list[int] = []
    watcher = asyncio.ensure_future(watch_streaming(alice, peaks))
    try:
        for _ in chats:
            fake_anthropic.enqueue_hang(10, chunks=20)
        for tab in tabs[:3]:
            await tab.send(action="send", message="A long one, please.")
        await wait_for(lambda: _at(alice, LIMIT), timeout=15)
        await wait_for(lambda: _received(fake_anthropic, LIMIT), timeout=15)  # the hangs taken

        # Committed: a short summary. Failed: one longer than what it replaces.
        fake_anthropic.enqueue_reply(["<summary>Short.", "</summary>"], delay=1.5)
        await compact_then_queue(tabs[3], compacting[0], fake_anthropic, 4)
        long = " ".join(f"detail{n}" for n in range(3000))
        fake_anthropic.enqueue_reply([f"<summary>{long}", "</summary>"], delay=1.5)
        await compact_then_queue(tabs[4], compacting[1], fake_anthropic, 5)

        for _ in compacting:  # the queued replies: long enough to be seen streaming
            fake_anthropic.enqueue_hang(3, chunks=6)
        # Both compactions end while the three stream: their messages wait, and say why.
        for conversation in compacting:
            await wait_for(lambda c=conversation: _settled(c), timeout=15)
        await asyncio.sleep(1)  # time for a queued reply to start, were it to start
        assert await streaming(alice) == LIMIT
        for tab in tabs[3:]:
            await tab.until(lambda f: "Waiting: 3 of your replies" in f, timeout=15)
        statuses = [(await Compaction.objects.aget(conversation=c)).status for c in compacting]
        assert statuses == ["committed", "failed"]

        # And each is answered once a place frees.
        for conversation in compacting:
            await wait_for(lambda c=conversation: _answered(c), timeout=40)
    finally:
        watcher.cancel()
        await asyncio.gather(*(tab.close() for tab in tabs))
    assert max(peaks) == LIMIT, f"{max(peaks)} streamed at once (limit {LIMIT})"


async def _settled(conversation) -> bool:
    return not await _running(conversation)


async def _at(alice, count: int) -> bool:
    return await streaming(alice) >= count


async def _answered(conversation) -> bool:
    return await Message.objects.filter(
        conversation=conversation, seq=18, status=Message.Status.COMPLETE
    ).aexists()
