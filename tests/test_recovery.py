"""Liveness instead of long locks: work left running by a dead process is closed by the next
process to look (its sweep at start-up and every few seconds, or the next send or Stop), and the
queue behind it goes on. Rows are aged by moving their heartbeat back, not by waiting."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from chat.models import Conversation, Message
from compaction.models import Compaction
from core.channel_layer import InMemoryLayer
from core.redis_layer import RedisLayer
from support.waiting import settle
from tests.conftest import receive_until, shows, socket_for
from tests.transcripts import add_turns
from turns import engine, liveness
from turns.recovery import orphaned_queues

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]

LONG_AGO = timedelta(seconds=60)


def send(text: str) -> str:
    return json.dumps({"action": "send", "message": text})


def left_by_a_dead_process(conversation, *, queued_behind: bool = False) -> Message:
    """A reply streaming when its process died: some text saved, heartbeat a minute old."""
    add_turns(conversation, 1)
    Message.objects.create(
        conversation=conversation, seq=3, role="user", content=[{"type": "text", "text": "Go"}]
    )
    reply = Message.objects.create(
        conversation=conversation,
        seq=4,
        role="assistant",
        status="streaming",
        content=[{"type": "text", "text": "Half of the ans"}],
        heartbeat_at=timezone.now() - LONG_AGO,
    )
    if queued_behind:
        Message.objects.create(
            conversation=conversation,
            seq=5,
            role="user",
            content=[{"type": "text", "text": "Typed while it streamed"}],
        )
        Message.objects.create(conversation=conversation, seq=6, role="assistant", status="queued")
    return reply


async def test_the_sweep_closes_a_dead_reply_keeping_its_text_and_runs_the_queue(
    alice, conversation, fake_llm
):
    reply = await sync_to_async(left_by_a_dead_process)(conversation, queued_behind=True)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()  # the first use in a (new) process starts its sweep
    frames = await receive_until(ws, shows(6, "complete"))
    assert any(shows(4, "interrupted")(f) for f in frames)
    await settle(conversation.pk)
    await reply.arefresh_from_db()
    assert (reply.status, reply.text) == ("interrupted", "Half of the ans")
    assert "server stopped" in reply.error
    # The queued message was answered with the partial reply in its window.
    last_call = fake_llm.calls[-1].messages
    assert last_call[-2]["content"][-1]["text"] == "Half of the ans"
    assert last_call[-1]["content"][-1]["text"] == "Typed while it streamed"
    await ws.disconnect()


async def test_a_send_after_a_crash_recovers_the_dead_reply_and_runs_at_once(
    alice, conversation, fake_llm, fresh_runtime
):
    fresh_runtime.background = False  # no sweep: the send must do it
    reply = await sync_to_async(left_by_a_dead_process)(conversation)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("Are you back?"))
    frames = await receive_until(ws, shows(6, "complete"))
    assert not any('class="badge queued"' in f for f in frames if 'id="msg-5"' in f)
    await settle(conversation.pk)
    await reply.arefresh_from_db()
    assert reply.status == "interrupted"
    await ws.disconnect()


async def test_stop_on_a_dead_reply_closes_it_now(alice, conversation, fresh_runtime):
    fresh_runtime.background = False
    reply = await sync_to_async(left_by_a_dead_process)(conversation)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=json.dumps({"action": "stop"}))
    await receive_until(ws, shows(4, "interrupted"))
    await reply.arefresh_from_db()
    assert (reply.status, reply.text) == ("interrupted", "Half of the ans")
    await ws.disconnect()


async def test_a_dead_compaction_is_failed_and_the_replies_queued_behind_it_run(
    alice, conversation, fake_llm
):
    await sync_to_async(add_turns)(conversation, 4)
    await Compaction.objects.acreate(
        conversation=conversation,
        trigger="manual",
        status="running",
        first_kept_seq=5,
        heartbeat_at=timezone.now() - LONG_AGO,
    )
    await Message.objects.acreate(
        conversation=conversation, seq=9, role="user", content=[{"type": "text", "text": "Hi"}]
    )
    await Message.objects.acreate(
        conversation=conversation, seq=10, role="assistant", status="queued"
    )
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await receive_until(ws, shows(10, "complete"))
    await settle(conversation.pk)
    row = await Compaction.objects.aget(conversation=conversation)
    assert row.status == "failed" and "server stopped" in row.error
    # The conversation can compact again at once: nothing waits ten minutes.
    fake_llm.enqueue(["<summary>Fresh brief.</summary>"])
    await ws.send_to(text_data=json.dumps({"action": "compact"}))
    await receive_until(ws, lambda f: "Compacted (manual)" in f)
    await settle(conversation.pk)
    await ws.disconnect()


async def test_live_work_is_left_alone_and_its_heartbeat_moves(alice, conversation, fake_llm):
    import asyncio

    gate = asyncio.Event()
    fake_llm.enqueue(["still ", "going"], gate=gate)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("long one"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    # Another process's sweep, run now: the reply's heartbeat is fresh, so it stays streaming.
    await engine.sweep()
    await reply.arefresh_from_db()
    assert reply.status == "streaming"
    # This process's heartbeat keeps it fresh however long the reply takes.
    await Message.objects.filter(pk=reply.pk).aupdate(heartbeat_at=timezone.now() - LONG_AGO)
    await liveness.beat()
    await reply.arefresh_from_db()
    assert timezone.now() - reply.heartbeat_at < timedelta(seconds=5)
    gate.set()
    await receive_until(ws, shows(2, "complete"))
    await settle(conversation.pk)
    await ws.disconnect()


async def test_a_stop_recorded_in_the_database_reaches_the_reply_without_the_channel_layer(
    alice, conversation, fake_llm
):
    import asyncio

    gate = asyncio.Event()
    fake_llm.enqueue(["a "] * 5, gate=gate, gate_at=2)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("go"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    # As if Stop's nudge over the channel layer were lost: only the row says so.
    await Message.objects.filter(conversation=conversation, seq=2).aupdate(stop_requested=True)
    await liveness.beat()  # the next heartbeat round reads it
    await receive_until(ws, shows(2, "interrupted"))
    gate.set()
    await settle(conversation.pk)
    await ws.disconnect()


async def test_a_message_sent_behind_an_orphaned_queue_is_shown_and_answered_in_order(
    alice, conversation, fake_llm, fresh_runtime
):
    fresh_runtime.background = False  # the send finds the queue
    await sync_to_async(add_turns)(conversation, 2)
    await Message.objects.acreate(
        conversation=conversation, seq=5, role="user", content=[{"type": "text", "text": "Old"}]
    )
    await Message.objects.acreate(
        conversation=conversation, seq=6, role="assistant", status="queued"
    )
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("New"))
    frames = await receive_until(ws, shows(8, "complete"))
    assert any('id="msg-7"' in f and "New" in f for f in frames), "the new message was shown"
    await settle(conversation.pk)
    replies = [m async for m in Message.objects.filter(conversation=conversation, seq__in=[6, 8])]
    assert [r.status for r in replies] == ["complete", "complete"]
    asked = [c.messages[-1]["content"][-1]["text"] for c in fake_llm.calls]
    assert asked == ["Old", "New"]
    await ws.disconnect()


def _fails_on_a_streamed_delta(message: dict) -> None:
    if "beforeend:#msg-2-text" in message.get("html", ""):
        raise ConnectionError("the channel layer is down")


class FlakyLayer(InMemoryLayer):
    """The in-memory layer, down for the frames of reply 2's streamed text."""

    async def group_send(self, group, message):
        _fails_on_a_streamed_delta(message)
        await super().group_send(group, message)


class FlakyRedisLayer(RedisLayer):
    """The Redis layer (under REDIS_URL), down for the same frames."""

    async def group_send(self, group, message):
        _fails_on_a_streamed_delta(message)
        await super().group_send(group, message)


async def test_a_failing_channel_layer_does_not_keep_a_reply_streaming(
    alice, conversation, fake_llm, settings
):
    flaky = FlakyRedisLayer if settings.REDIS_URL else FlakyLayer
    default = settings.CHANNEL_LAYERS["default"]
    # A changed CHANNEL_LAYERS makes Channels build the layer again, from this class.
    settings.CHANNEL_LAYERS = {"default": {**default, "BACKEND": f"{__name__}.{flaky.__name__}"}}
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("hello"))
    await receive_until(ws, shows(2, "complete"))
    await settle(conversation.pk)
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert reply.status == "complete" and reply.text == "This is the fake model."
    await ws.disconnect()


async def test_a_clean_shutdown_gives_the_queue_back_instead_of_stranding_it(
    alice, conversation, fake_llm
):
    import asyncio

    gate = asyncio.Event()
    fake_llm.enqueue(["long "] * 3, gate=gate)
    fake_llm.enqueue(["second"])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("first"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.send_to(text_data=send("then this"))
    await receive_until(ws, lambda f: 'id="send-accepted"' in f)
    await ws.disconnect()
    await engine.shutdown()  # as on SIGTERM
    statuses = {m.seq: m.status async for m in Message.objects.filter(conversation=conversation)}
    assert statuses == {1: "complete", 2: "interrupted", 3: "complete", 4: "queued"}
    engine.kick(conversation.pk)  # the next process to look runs it
    await settle(conversation.pk)
    assert (await Message.objects.aget(conversation=conversation, seq=4)).status == "complete"


def test_the_sweep_names_each_orphaned_queue_once_and_leaves_live_and_young_ones(alice):
    def with_queue(replies: int, *, age: timedelta, streaming: bool = False) -> Conversation:
        conversation = Conversation.objects.create(owner=alice, model="fake-model")
        seq = 1
        if streaming:
            add_turns(conversation, 1)
            Message.objects.create(conversation=conversation, seq=3, role="user", content=[])
            Message.objects.create(
                conversation=conversation, seq=4, role="assistant", status="streaming"
            )
            seq = 5
        for _ in range(replies):
            Message.objects.create(conversation=conversation, seq=seq, role="user", content=[])
            Message.objects.create(
                conversation=conversation, seq=seq + 1, role="assistant", status="queued"
            )
            seq += 2
        conversation.messages.update(created_at=timezone.now() - age)
        return conversation

    orphaned = with_queue(2, age=LONG_AGO)
    with_queue(2, age=LONG_AGO, streaming=True)  # its reply's process runs the queue
    with_queue(1, age=timedelta(0))  # its own process is about to claim it

    assert orphaned_queues(grace_seconds=5) == [orphaned.pk]
