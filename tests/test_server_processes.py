"""The engine across real server processes: killed mid-reply and mid-compaction, stopped with
SIGTERM, a broken and a slow provider, and two processes sharing one conversation through Redis.

Each server is `uvicorn config.asgi:application` on the test database, its model the local fake
Anthropic server; tabs are real websocket clients with a session cookie.
"""

from __future__ import annotations

import signal
import time

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from chat.models import Conversation, Message
from compaction.models import Compaction
from support.servers import session_for
from tests.conftest import shows
from tests.servers import Server, Tab, wait_for
from tests.transcripts import add_turns

pytestmark = pytest.mark.django_db(transaction=True)

# Replies and summaries that last far longer than the test: only a dying process ends them.
FOREVER = 120


def started(seq: int):
    return lambda f: f'id="msg-{seq}"' in f and "beforeend" not in f


def finished(seq: int, status: str):
    return shows(seq, status)


def delta(seq: int):
    return lambda f: f"beforeend:#msg-{seq}-text" in f


async def row(model, **filters):
    return await model.objects.filter(**filters).afirst()


async def partial_text_saved(conversation, seq: int) -> bool:
    return await (
        Message.objects.filter(conversation=conversation, seq=seq, status="streaming")
        .exclude(content=[])
        .aexists()
    )


async def second_step_saved(conversation) -> bool:
    """Text of the step after the tool call is on the row (a partial save), as a crash finds it."""
    reply = await row(Message, conversation=conversation, seq=2, status="streaming")
    return reply is not None and [b["type"] for b in reply.content][-2:] == ["tool_result", "text"]


@pytest.fixture
def servers():
    running: list[Server] = []

    def start(provider_url: str, **env) -> Server:
        server = Server(provider_url, **env).start()
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()


@pytest.fixture
async def alice_session(alice):
    return await sync_to_async(session_for)(alice)


async def new_conversation(alice, turns: int = 0) -> Conversation:
    conversation = await Conversation.objects.acreate(
        owner=alice, model="claude-test", system_prompt="Be brief."
    )
    if turns:
        await sync_to_async(add_turns)(conversation, turns)
    return conversation


async def test_a_killed_server_leaves_nothing_stuck_and_the_next_recovers_within_30_s(
    alice, alice_session, fake_anthropic, servers
):
    """kill -9 mid-reply and mid-compaction, with the default heartbeat settings."""
    chatting = await new_conversation(alice)
    compacting = await new_conversation(alice, turns=8)
    first = servers(fake_anthropic.url, CONTEXT_BUDGET_TOKENS="2000")
    tab = await Tab(first, chatting.pk, alice_session).open()
    other = await Tab(first, compacting.pk, alice_session).open()

    fake_anthropic.enqueue_hang(FOREVER, chunks=FOREVER * 2)  # the reply
    await tab.send(action="send", message="Tell me a long story.")
    await tab.until(delta(2))
    # At least one partial save: the text so far is on the row, as a crash would find it.
    await wait_for(lambda: partial_text_saved(chatting, 2), timeout=10)

    fake_anthropic.enqueue_hang(FOREVER, chunks=FOREVER * 2)  # the summary
    await other.send(action="compact")
    await wait_for(lambda: row(Compaction, conversation=compacting, status="running"), timeout=10)
    await other.send(action="send", message="Typed while it compacts.")
    await other.until(lambda f: 'id="msg-17"' in f and 'class="badge queued"' in f)

    first.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    await tab.close()
    await other.close()

    second = servers(fake_anthropic.url, CONTEXT_BUDGET_TOKENS="2000")
    tab = await Tab(second, chatting.pk, alice_session).open()  # the browser reconnects
    closed = await tab.until(finished(2, "interrupted"), timeout=35)
    answered = await wait_for(
        lambda: row(Message, conversation=compacting, seq=18, status="complete"), timeout=35
    )
    recovered_in = time.monotonic() - killed_at
    reply = await row(Message, conversation=chatting, seq=2)
    failed = await row(Compaction, conversation=compacting)
    assert recovered_in < 30, f"recovered after {recovered_in:.1f} s"

    # The reply keeps the text saved before the crash, and every tab is shown it.
    assert reply.status == "interrupted" and reply.text.startswith("word0 ")
    assert "word0" in closed
    # The compaction released the conversation; the message queued behind it was answered.
    assert failed.status == "failed" and "server stopped" in failed.error
    assert answered.text == "Hello from the fake server."
    # And the conversation goes on.
    await tab.send(action="send", message="Are you back?")
    await tab.until(finished(4, "complete"))
    await tab.close()


async def test_sigterm_closes_the_replies_of_the_stopping_server_at_once(
    alice, alice_session, fake_anthropic, servers
):
    conversation = await new_conversation(alice)
    server = servers(fake_anthropic.url)
    tab = await Tab(server, conversation.pk, alice_session).open()
    fake_anthropic.enqueue_hang(FOREVER, chunks=FOREVER * 2)
    await tab.send(action="send", message="Tell me a long story.")
    await tab.until(delta(2))
    server.signal(signal.SIGTERM)
    # No heartbeat had to go stale: the server closed it on its way out.
    reply = await row(Message, conversation=conversation, seq=2)
    assert reply.status == "interrupted"
    assert reply.text.startswith("word0 ")


async def test_a_broken_or_slow_provider_keeps_what_arrived_and_the_queue_goes_on(
    alice, alice_session, fake_anthropic, servers
):
    conversation = await new_conversation(alice)
    server = servers(fake_anthropic.url, LLM_TIMEOUT_SECONDS="1")
    tab = await Tab(server, conversation.pk, alice_session).open()

    fake_anthropic.enqueue_status(529, "overloaded_error", "Overloaded")
    await tab.send(action="send", message="Are you there?")
    overloaded = await tab.until(finished(2, "error"))
    assert "overloaded" in overloaded.lower()

    fake_anthropic.enqueue_drop(["Cut ", "off"])
    await tab.send(action="send", message="Try again.")
    await tab.until(finished(4, "error"))

    # Slower than the timeout between two deltas; a message typed meanwhile waits its turn.
    fake_anthropic.enqueue_hang(6, chunks=3)
    await tab.send(action="send", message="Take your time.")
    await tab.until(delta(6))
    await tab.send(action="send", message="Typed while it is slow.")
    timed_out = await tab.until(finished(6, "error"))
    assert "timed out" in timed_out and "word0" in timed_out
    await tab.until(finished(8, "complete"))
    await tab.close()

    rows = [m async for m in Message.objects.filter(conversation=conversation)]
    assert [(m.seq, m.status) for m in rows] == [
        (1, "complete"),
        (2, "error"),
        (3, "complete"),
        (4, "error"),
        (5, "complete"),
        (6, "error"),
        (7, "complete"),
        (8, "complete"),
    ]
    assert [m.text for m in rows if m.role == "user"] == [
        "Are you there?",
        "Try again.",
        "Take your time.",
        "Typed while it is slow.",
    ]
    assert rows[3].text == "Cut off" and "connection" in rows[3].error.lower()
    assert rows[5].text.startswith("word0 ") and "timed out after 1 s" in rows[5].error
    assert rows[7].text == "Hello from the fake server."


@pytest.mark.skipif(not settings.REDIS_URL, reason="several processes need the Redis layer")
async def test_two_processes_share_one_conversation_stop_queue_and_busy_state(
    alice, alice_session, fake_anthropic, servers
):
    conversation = await new_conversation(alice, turns=8)
    one, two = servers(fake_anthropic.url), servers(fake_anthropic.url)
    here = await Tab(one, conversation.pk, alice_session).open()
    there = await Tab(two, conversation.pk, alice_session).open()

    fake_anthropic.enqueue_hang(FOREVER, chunks=FOREVER * 2)
    await here.send(action="send", message="A long answer, please.")
    await there.until(delta(18))  # streamed in process one, seen in process two

    # Process two knows a reply runs, from the database, not from its own memory.
    await there.send(action="compact")
    await there.until(lambda f: "Wait for the reply to finish" in f)
    await there.send(action="send", message="And then this.")
    await here.until(lambda f: 'id="msg-19"' in f and 'class="badge queued"' in f)

    # Stop pressed in process two stops the reply running in process one.
    await there.send(action="stop")
    await here.until(finished(18, "interrupted"))
    await there.until(finished(18, "interrupted"))
    # The queued message runs next, seen everywhere.
    await there.until(finished(20, "complete"))
    await here.until(finished(20, "complete"))
    statuses = [
        (m.seq, m.status)
        async for m in Message.objects.filter(conversation=conversation, seq__gt=16)
    ]
    assert statuses == [(17, "complete"), (18, "interrupted"), (19, "complete"), (20, "complete")]
    await here.close()
    await there.close()


async def test_a_server_killed_between_tool_steps_keeps_the_steps_and_the_chat_goes_on(
    alice, alice_session, fake_anthropic, servers
):
    """kill -9 while the second step of a tool-using reply streams."""
    conversation = await new_conversation(alice)
    first = servers(fake_anthropic.url)
    tab = await Tab(first, conversation.pk, alice_session).open()
    fake_anthropic.enqueue_tool_calls(
        ["Looking."], [("toolu_1", "search_history", {"query": "story"})]
    )
    fake_anthropic.enqueue_hang(FOREVER, chunks=FOREVER * 2)  # the second step
    await tab.send(action="send", message="Find the story.")
    await tab.until(lambda f: 'class="tool-call done"' in f)  # the call ran; its result is saved
    await tab.until(delta(2))  # the second step streams
    await wait_for(lambda: second_step_saved(conversation), timeout=10)
    first.signal(signal.SIGKILL)
    await tab.close()

    second = servers(fake_anthropic.url)
    tab = await Tab(second, conversation.pk, alice_session).open()
    await tab.until(finished(2, "interrupted"), timeout=35)
    reply = await row(Message, conversation=conversation, seq=2)
    assert [b["type"] for b in reply.content][:3] == ["text", "tool_use", "tool_result"]

    # The next request carries the interrupted turn as valid, paired API messages.
    fake_anthropic.enqueue_reply(["Back again."])
    await tab.send(action="send", message="Go on.")
    await tab.until(finished(4, "complete"))
    await tab.close()
    assert fake_anthropic.invalid == []
    sent = fake_anthropic.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[2]["content"][0]["tool_use_id"] == "toolu_1"
