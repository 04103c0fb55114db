"""A turn over the websocket: the reply streams in fragments and is saved whatever happens."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from chat.models import Message
from core import channel_layer, runtime
from support.waiting import settle, until
from tests.conftest import receive_until, shows, socket_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channel_layer")]


def send(text: str) -> str:
    return json.dumps({"action": "send", "message": text, "HEADERS": {"HX-Request": "true"}})


async def messages_of(conversation) -> list[Message]:
    return [m async for m in Message.objects.filter(conversation=conversation).order_by("seq")]


async def test_it_streams_a_reply_in_fragments_and_saves_it_with_usage(
    alice, conversation, fake_llm
):
    fake_llm.enqueue(["Hel", "lo ", "there"], usage={"input_tokens": 42, "output_tokens": 3})
    ws = socket_for(alice, conversation.pk)
    connected, _ = await ws.connect()
    assert connected
    await ws.send_to(text_data=send("hi"))
    frames = await receive_until(ws, lambda f: 'id="msg-2"' in f and 'hx-swap-oob="outerHTML"' in f)
    deltas = re.findall(r'<span hx-swap-oob="beforeend:#msg-2-text">(.*?)</span>', "".join(frames))
    # The first delta goes out at once, with the reply's bubble; the rest are coalesced, and
    # the final frame carries the whole text.
    assert deltas[0] == "Hel"
    assert "Hello there" in frames[-1]
    await settle(conversation.pk)
    user, reply = await messages_of(conversation)
    assert (user.role, user.content) == ("user", [{"type": "text", "text": "hi"}])
    assert reply.status == "complete"
    assert reply.text == "Hello there"
    assert reply.usage.input_tokens == 42 and reply.usage.output_tokens == 3
    assert reply.tokens > 0
    # The model got the system prompt as `system` and the user's message last.
    call = fake_llm.calls[0]
    assert call.system == "Be brief."
    assert call.messages[-1]["content"][-1]["text"] == "hi"
    await ws.disconnect()


async def test_the_first_word_of_a_burst_goes_out_first_and_alone(alice, conversation, fake_llm):
    """Deltas that come in one read (a fast model, a gateway that buffers): the first word is
    not held back until the rest has been read and the reply saved."""
    fake_llm.enqueue(["Hel", "lo ", "there"], burst=True)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("hi"))
    frames = await receive_until(ws, lambda f: 'id="msg-2"' in f and 'hx-swap-oob="outerHTML"' in f)
    texts = [f for f in frames if "beforeend:#msg-2-text" in f]
    delta = r'<span hx-swap-oob="beforeend:#msg-2-text">(.*?)</span>'
    assert re.findall(delta, texts[0]) == ["Hel"]
    assert 'id="msg-1"' in texts[0]  # with the bubble and the user's message
    assert "".join(re.findall(delta, "".join(texts))) == "Hello there"
    await settle(conversation.pk)
    await ws.disconnect()


async def test_it_finishes_and_saves_the_reply_after_the_browser_disconnects(
    alice, conversation, fake_llm
):
    fake_llm.enqueue(["one ", "two ", "three ", "four"], delay=0.05)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("count"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.disconnect()
    await settle(conversation.pk)
    reply = (await messages_of(conversation))[-1]
    assert reply.status == "complete"
    assert reply.text == "one two three four"


async def test_stop_keeps_the_partial_reply_marked_interrupted(alice, conversation, fake_llm):
    fake_llm.enqueue(["a"] * 200, delay=0.02)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("go on forever"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.send_to(text_data=json.dumps({"action": "stop"}))
    await receive_until(ws, shows(2, "interrupted"))
    await settle(conversation.pk)
    reply = (await messages_of(conversation))[-1]
    assert reply.status == "interrupted"
    assert 0 < len(reply.text) < 200
    assert set(reply.text) == {"a"}
    await ws.disconnect()


async def test_a_second_tab_sees_the_same_stream(alice, conversation, fake_llm):
    fake_llm.enqueue(["shared ", "stream"])
    first, second = socket_for(alice, conversation.pk), socket_for(alice, conversation.pk)
    await first.connect()
    await second.connect()
    await first.send_to(text_data=send("hello both"))
    done = shows(2, "complete")  # noqa: E731
    seen_first = await receive_until(first, done)
    seen_second = await receive_until(second, done)
    for frames in (seen_first, seen_second):
        assert any("hello both" in f for f in frames)
        assert any("beforeend:#msg-2-text" in f for f in frames)
        assert "shared stream" in frames[-1]
    await settle(conversation.pk)
    await first.disconnect()
    await second.disconnect()


async def test_a_provider_error_keeps_the_user_message_and_the_partial_text(
    alice, conversation, fake_llm
):
    fake_llm.enqueue_error("The model is overloaded (529).", after_chunks=["Half an "], status=529)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("please answer"))
    frames = await receive_until(ws, shows(2, "error"))
    assert "overloaded (529)" in frames[-1]
    await settle(conversation.pk)
    user, reply = await messages_of(conversation)
    assert user.text == "please answer"
    assert (reply.status, reply.text, reply.error) == (
        "error",
        "Half an ",
        "The model is overloaded (529).",
    )
    # And the user can simply send again.
    fake_llm.enqueue(["Fine now."])
    await ws.send_to(text_data=send("please answer"))
    await receive_until(ws, shows(4, "complete"))
    await settle(conversation.pk)
    assert [m.status for m in await messages_of(conversation)] == [
        "complete",
        "error",
        "complete",
        "complete",
    ]
    await ws.disconnect()


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"action": "dance"}), "Unknown action"),
        (json.dumps({"action": [1]}), "Unknown action"),
        (json.dumps({"action": {"a": 1}}), "Unknown action"),
        (json.dumps({"action": "send", "message": "   "}), "empty message"),
        (json.dumps({"action": "send"}), "empty message"),
        (json.dumps({"action": "send", "message": 5}), "empty message"),
    ],
)
async def test_it_answers_bad_frames_with_a_readable_error(alice, conversation, frame, reason):
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=frame)
    reply = await ws.receive_from()
    assert 'id="notice"' in reply and reason in reply
    assert await Message.objects.filter(conversation=conversation).acount() == 0
    # The socket is still usable.
    await ws.send_to(text_data=json.dumps({"action": "nope"}))
    assert "Unknown action" in await ws.receive_from()
    await ws.disconnect()


async def test_it_refuses_an_oversized_message_with_the_limit(alice, conversation, settings):
    settings.MAX_MESSAGE_CHARS = 100
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("x" * 101))
    reply = await ws.receive_from()
    assert "101 characters" in reply and "limit is 100" in reply
    await ws.send_to(text_data=send("x" * 10_000))
    assert "too long" in await ws.receive_from()
    assert await Message.objects.filter(conversation=conversation).acount() == 0
    await ws.disconnect()


async def test_a_message_sent_while_a_reply_streams_is_queued_then_answered(
    alice, conversation, fake_llm
):
    gate = asyncio.Event()
    fake_llm.enqueue(["slow ", "first ", "reply"], gate=gate)
    fake_llm.enqueue(["second ", "reply"])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("first"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.send_to(text_data=send("second"))
    frames = await receive_until(ws, lambda f: 'id="msg-3"' in f)
    queued = frames[-1]
    assert 'class="badge queued"' in queued and 'name="action" value="cancel"' in queued
    reply = await Message.objects.filter(conversation=conversation, seq=4).afirst()
    assert reply.status == "queued"
    gate.set()
    await receive_until(ws, shows(4, "complete"))
    await settle(conversation.pk)
    rows = await messages_of(conversation)
    assert [(m.seq, m.role, m.status, m.text) for m in rows] == [
        (1, "user", "complete", "first"),
        (2, "assistant", "complete", "slow first reply"),
        (3, "user", "complete", "second"),
        (4, "assistant", "complete", "second reply"),
    ]
    # The queued message was answered with the first exchange in its window.
    assert [m["role"] for m in fake_llm.calls[1].messages] == ["user", "assistant", "user"]
    await ws.disconnect()


async def test_a_queued_message_can_be_cancelled_and_is_never_sent(alice, conversation, fake_llm):
    gate = asyncio.Event()
    fake_llm.enqueue(["slow ", "reply"], gate=gate)
    fake_llm.enqueue(["after ", "cancel"])
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("first"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.send_to(text_data=send("never mind this"))
    await receive_until(ws, lambda f: 'id="send-accepted"' in f)
    await ws.send_to(text_data=json.dumps({"action": "cancel", "message": 3}))
    cancelled = await receive_until(ws, lambda f: 'id="msg-3"' in f and "cancelled" in f)
    assert "cancelled, not sent" in cancelled[-1]
    await ws.send_to(text_data=send("and this one"))
    await receive_until(ws, lambda f: 'id="send-accepted"' in f)
    gate.set()
    await receive_until(ws, shows(6, "complete"))
    await settle(conversation.pk)
    rows = await messages_of(conversation)
    assert [(m.seq, m.status) for m in rows] == [
        (1, "complete"),
        (2, "complete"),
        (3, "cancelled"),
        (4, "cancelled"),
        (5, "complete"),
        (6, "complete"),
    ]
    sent = [m["content"][-1]["text"] for m in fake_llm.calls[1].messages if m["role"] == "user"]
    assert sent == ["first", "and this one"]
    # Once a message is on its way it cannot be taken back.
    await ws.send_to(text_data=json.dumps({"action": "cancel", "message": 5}))
    assert "already sent" in (await receive_until(ws, lambda f: "already sent" in f))[-1]
    await ws.disconnect()


async def test_it_does_not_leave_a_task_behind_after_an_unexpected_crash(
    alice, conversation, fake_llm
):
    fake_llm.enqueue_crash(RuntimeError("boom"))
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("hi"))
    frames = await receive_until(ws, shows(2, "error"))
    assert "The server failed while answering" in frames[-1]
    await settle(conversation.pk)
    assert conversation.pk not in runtime.current().loop().drivers
    assert not runtime.current().loop().replies
    await ws.disconnect()


async def test_two_tabs_sending_at_once_run_one_reply_at_a_time_in_order(
    alice, conversation, fake_llm
):
    fake_llm.enqueue(["only ", "one"], delay=0.05)
    fake_llm.enqueue(["then ", "two"])
    first, second = socket_for(alice, conversation.pk), socket_for(alice, conversation.pk)
    await first.connect()
    await second.connect()
    await asyncio.gather(
        first.send_to(text_data=send("from tab one")),
        second.send_to(text_data=send("from tab two")),
    )
    await receive_until(first, shows(4, "complete"))
    await settle(conversation.pk)
    rows = await messages_of(conversation)
    assert [(m.role, m.status) for m in rows] == [
        ("user", "complete"),
        ("assistant", "complete"),
        ("user", "complete"),
        ("assistant", "complete"),
    ]
    # Each reply saw the messages before it, and only those.
    assert [len(call.messages) for call in fake_llm.calls] == [1, 3]
    await first.disconnect()
    await second.disconnect()


async def test_stop_before_the_model_answers_still_closes_the_reply(alice, conversation, fake_llm):
    gate = asyncio.Event()
    fake_llm.enqueue(["never ", "sent"], gate=gate, gate_at=0)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("hi"))
    await receive_until(ws, shows(2, "streaming"))
    await ws.send_to(text_data=json.dumps({"action": "stop"}))
    await receive_until(ws, shows(2, "interrupted"))
    await settle(conversation.pk)
    reply = (await messages_of(conversation))[-1]
    assert (reply.status, reply.content) == ("interrupted", [])
    await ws.send_to(text_data=send("and again"))  # the conversation is usable at once
    await receive_until(ws, shows(4, "complete"))
    await settle(conversation.pk)
    await ws.disconnect()


async def test_streamed_text_reaches_the_row_before_the_reply_ends(
    alice, conversation, fake_llm, settings
):
    settings.PARTIAL_SAVE_MS = 0
    # The reply holds before its fifth chunk until the test has looked at the row.
    gate = asyncio.Event()
    fake_llm.enqueue(["saved ", "as ", "it ", "streams", "."], delay=0.02, gate=gate, gate_at=4)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("go"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f and "streams" in f)

    async def saved():
        reply = await Message.objects.aget(conversation=conversation, seq=2)
        return reply if reply.text.startswith("saved as it streams") else None

    reply = await until(saved)
    assert reply.status == "streaming"
    gate.set()
    await receive_until(ws, shows(2, "complete"))
    await settle(conversation.pk)
    await ws.disconnect()


async def test_stop_reaches_the_reply_even_with_no_tab_left_in_its_process(
    alice, conversation, fake_llm
):
    fake_llm.enqueue(["b"] * 200, delay=0.02)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("long one"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.disconnect()
    await channel_layer.stop(conversation.pk)  # as a tab connected to another process would
    await settle(conversation.pk)
    reply = (await messages_of(conversation))[-1]
    assert reply.status == "interrupted" and 0 < len(reply.text) < 200


async def test_the_first_message_names_the_conversation_in_every_tab(alice, conversation, fake_llm):
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("How do I parse TOML arrays of tables in Rust?"))
    frames = await receive_until(ws, lambda f: 'id="title-input"' in f)
    assert 'value="How do I parse TOML arrays of tables in Rust?"' in frames[-1]
    await settle(conversation.pk)
    await conversation.arefresh_from_db()
    assert conversation.title == "How do I parse TOML arrays of tables in Rust?"
    await ws.disconnect()


async def test_a_stop_naming_a_reply_that_ended_does_not_stop_the_next_one(
    alice, conversation, fake_llm, settings
):
    settings.PARTIAL_SAVE_MS = 0  # every delta reads the row's Stop
    first, second = asyncio.Event(), asyncio.Event()
    fake_llm.enqueue(["one "] * 3, gate=first)
    fake_llm.enqueue(["two "] * 3, gate=second)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("first"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.send_to(text_data=send("second"))
    await receive_until(ws, lambda f: 'id="send-accepted"' in f)
    await ws.send_to(text_data=json.dumps({"action": "stop", "message": "2"}))
    await receive_until(ws, shows(2, "interrupted"))
    await receive_until(ws, lambda f: "beforeend:#msg-4-text" in f)
    # A second Stop aimed at reply 2 (the page still showed it streaming) arrives now.
    await ws.send_to(text_data=json.dumps({"action": "stop", "message": "2"}))
    second.set()
    await receive_until(ws, shows(4, "complete"))
    await settle(conversation.pk)
    first.set()
    await ws.disconnect()
