"""A turn over the websocket: the reply streams in fragments and is saved whatever happens."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from chat import turns
from chat.models import Message
from tests.conftest import receive_until, socket_for

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
    deltas = [f for f in frames if "beforeend:#msg-2-text" in f]
    assert [d.split(">", 1)[1].split("<", 1)[0] for d in deltas] == ["Hel", "lo ", "there"]
    await turns.wait(conversation.pk)
    user, reply = await messages_of(conversation)
    assert (user.role, user.content) == ("user", [{"type": "text", "text": "hi"}])
    assert reply.status == "complete"
    assert reply.text == "Hello there"
    assert reply.usage["input_tokens"] == 42 and reply.usage["output_tokens"] == 3
    assert reply.tokens > 0
    # The model got the system prompt as `system` and the user's message last.
    call = fake_llm.calls[0]
    assert call.system == "Be brief."
    assert call.messages[-1]["content"][-1]["text"] == "hi"
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
    await turns.wait(conversation.pk)
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
    await receive_until(ws, lambda f: 'data-status="interrupted"' in f)
    await turns.wait(conversation.pk)
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
    done = lambda f: 'id="msg-2"' in f and 'data-status="complete"' in f  # noqa: E731
    seen_first = await receive_until(first, done)
    seen_second = await receive_until(second, done)
    for frames in (seen_first, seen_second):
        assert any("hello both" in f for f in frames)
        assert sum("beforeend:#msg-2-text" in f for f in frames) == 2
    await turns.wait(conversation.pk)
    await first.disconnect()
    await second.disconnect()


async def test_a_provider_error_keeps_the_user_message_and_the_partial_text(
    alice, conversation, fake_llm
):
    fake_llm.enqueue_error("The model is overloaded (529).", after_chunks=["Half an "], status=529)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("please answer"))
    frames = await receive_until(ws, lambda f: 'data-status="error"' in f)
    assert "overloaded (529)" in frames[-1]
    await turns.wait(conversation.pk)
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
    await receive_until(ws, lambda f: 'id="msg-4"' in f and 'data-status="complete"' in f)
    await turns.wait(conversation.pk)
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


async def test_it_refuses_a_second_message_while_a_reply_streams(alice, conversation, fake_llm):
    fake_llm.enqueue(["slow "] * 20, delay=0.02)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("first"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.send_to(text_data=send("second"))
    await receive_until(ws, lambda f: "still streaming" in f)
    await turns.wait(conversation.pk)
    assert await Message.objects.filter(conversation=conversation).acount() == 2
    await ws.disconnect()


async def test_it_does_not_leave_a_task_behind_after_an_unexpected_crash(
    alice, conversation, fake_llm, monkeypatch
):
    async def explode(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(fake_llm, "reply", explode)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("hi"))
    frames = await receive_until(ws, lambda f: 'data-status="error"' in f)
    assert "The server failed while answering" in frames[-1]
    await turns.wait(conversation.pk)
    assert not turns.is_running(conversation.pk)
    await asyncio.sleep(0)
    await ws.disconnect()


async def test_two_tabs_sending_at_once_start_one_reply(alice, conversation, fake_llm):
    fake_llm.enqueue(["only ", "one"], delay=0.05)
    first, second = socket_for(alice, conversation.pk), socket_for(alice, conversation.pk)
    await first.connect()
    await second.connect()
    await asyncio.gather(
        first.send_to(text_data=send("from tab one")),
        second.send_to(text_data=send("from tab two")),
    )
    await receive_until(first, lambda f: 'data-status="complete"' in f and "message assistant" in f)
    await turns.wait(conversation.pk)
    roles = [m.role for m in await messages_of(conversation)]
    assert roles == ["user", "assistant"]
    assert len(fake_llm.calls) == 1
    await first.disconnect()
    await second.disconnect()


async def test_stop_before_the_model_answers_still_closes_the_reply(alice, conversation, fake_llm):
    from chat import actions

    message, reply = await sync_to_async(actions.append_user_message)(
        alice, conversation.pk, "hi", model="fake-model"
    )
    task = turns.start(conversation.pk, reply)
    await asyncio.sleep(0)
    task.cancel()  # at its first await, before the model was asked anything
    await asyncio.gather(task, return_exceptions=True)
    await reply.arefresh_from_db()
    assert reply.status == "interrupted"
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("and again"))  # the conversation is usable at once
    await receive_until(ws, lambda f: 'data-status="complete"' in f and "message assistant" in f)
    await turns.wait(conversation.pk)
    await ws.disconnect()


async def test_streamed_text_reaches_the_row_before_the_reply_ends(
    alice, conversation, fake_llm, monkeypatch
):
    monkeypatch.setattr(turns, "PARTIAL_SAVE_SECONDS", 0)
    fake_llm.enqueue(["saved ", "as ", "it ", "streams"] + ["."] * 30, delay=0.02)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("go"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f and "streams" in f)
    await asyncio.sleep(0.05)
    reply = await Message.objects.aget(conversation=conversation, seq=2)
    assert reply.status == "streaming" and reply.text.startswith("saved as it streams")
    await turns.wait(conversation.pk)
    await ws.disconnect()


async def test_stop_reaches_the_reply_even_with_no_tab_left_in_its_process(
    alice, conversation, fake_llm
):
    from chat import broadcast

    fake_llm.enqueue(["b"] * 200, delay=0.02)
    ws = socket_for(alice, conversation.pk)
    await ws.connect()
    await ws.send_to(text_data=send("long one"))
    await receive_until(ws, lambda f: "beforeend:#msg-2-text" in f)
    await ws.disconnect()
    await broadcast.stop(conversation.pk)  # as a tab connected to another process would
    await turns.wait(conversation.pk)
    reply = (await messages_of(conversation))[-1]
    assert reply.status == "interrupted" and 0 < len(reply.text) < 200
