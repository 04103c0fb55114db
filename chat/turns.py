"""One turn of the conversation, run as a task that outlives the websocket that started it.

The task streams the reply to the conversation's channel-layer group, so every open tab sees it,
and it saves the reply whether the browser stays, leaves (disconnect) or presses Stop (cancel).
After the reply is saved, auto-compaction runs off the user's critical path.
"""

from __future__ import annotations

import asyncio
import logging
import time

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from compaction import service as compaction

from . import actions, broadcast, render
from .llm import LLMError, get_client
from .models import Conversation, Message

log = logging.getLogger(__name__)

# conversation id -> the task streaming its reply, in this process (tests and shutdown wait on
# it). Stop reaches the task through the conversation's control group, from any process.
_running: dict[int, asyncio.Task] = {}
# conversation id -> a compaction running in the background. The database, not this dict, is what
# keeps two compactions of one conversation apart; this lets a turn wait for it and tests too.
_compacting: dict[int, asyncio.Task] = {}
# Streamed text is written to the row at most this often, so a tab opened mid-reply (or a crash)
# sees what has arrived without a write per token.
PARTIAL_SAVE_SECONDS = 1.0


def is_running(conversation_id: int) -> bool:
    task = _running.get(conversation_id)
    return task is not None and not task.done()


def start(conversation_id: int, reply: Message) -> asyncio.Task:
    return _spawn(_running, conversation_id, run_turn(conversation_id, reply))


def start_compaction(conversation_id: int, trigger: str, **kwargs) -> asyncio.Task | None:
    """Compact without holding up the socket: progress and outcome arrive as broadcasts.

    Returns None when this process is already compacting the conversation.
    """
    running = _compacting.get(conversation_id)
    if running is not None and not running.done():
        return None
    return _spawn(
        _compacting, conversation_id, compact_and_broadcast(conversation_id, trigger, **kwargs)
    )


def _spawn(registry: dict, conversation_id: int, coroutine) -> asyncio.Task:
    task = asyncio.get_running_loop().create_task(coroutine)
    registry[conversation_id] = task
    task.add_done_callback(lambda t: _forget(registry, conversation_id, t))
    return task


def _forget(registry: dict, conversation_id: int, task: asyncio.Task) -> None:
    if registry.get(conversation_id) is task:
        del registry[conversation_id]
    if not task.cancelled() and task.exception() is not None:
        log.error("task for conversation %s failed", conversation_id, exc_info=task.exception())


async def wait(conversation_id: int) -> None:
    """Wait for this conversation's turn, then any compaction it started: used by tests."""
    for registry in (_running, _compacting):
        task = registry.get(conversation_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)


async def run_turn(conversation_id: int, reply: Message) -> None:
    """Answer the latest user message into `reply` (a streaming row). Always closes the row."""
    pieces: list[str] = []
    content, status, fields = None, Message.Status.ERROR, {}
    control = stop_listener = None
    stoppable = {"yes": True}  # cleared before closing: a late Stop must not cut the save short
    try:
        layer = get_channel_layer()
        # The default prefix on purpose: the Redis layer runs one receive loop per real channel,
        # and sharing the consumers' one keeps Stop from queueing behind their blocking reads.
        control = await layer.new_channel()
        await layer.group_add(broadcast.control_group(conversation_id), control)
        stop_listener = asyncio.ensure_future(
            _cancel_on_stop(control, asyncio.current_task(), stoppable)
        )
        await broadcast.html(conversation_id, render.appended_message(reply))
        client = get_client()
        # A compaction this process started after the previous reply finishes first, so the
        # window below is built from its boundary (and the pre-send check sees the result).
        background = _compacting.get(conversation_id)
        if background is not None:
            await asyncio.gather(background, return_exceptions=True)
        conversation = await Conversation.objects.aget(pk=conversation_id)
        state = await sync_to_async(compaction.load_window)(conversation)
        if compaction.must_compact_first(state):
            await compact_and_broadcast(conversation_id, "auto", client, allow_review=False)
            state = await sync_to_async(compaction.load_window)(conversation)
        await sync_to_async(actions.record_reply_window)(
            reply.pk,
            boundary_id=state.boundary.pk if state.boundary else None,
            head_tokens=state.head_tokens,
        )
        last_save = time.monotonic()

        async def on_text(text: str) -> None:
            nonlocal last_save
            pieces.append(text)
            await broadcast.html(conversation_id, render.delta(reply.seq, text))
            if time.monotonic() - last_save >= PARTIAL_SAVE_SECONDS:
                last_save = time.monotonic()
                await sync_to_async(actions.save_partial_reply)(reply.pk, "".join(pieces))

        result = await client.reply(
            system=state.window.system,
            messages=state.window.messages,
            max_tokens=settings.CHAT_MAX_TOKENS,
            on_text=on_text,
        )
        content, status = result.content, Message.Status.COMPLETE
        fields = {"usage": result.usage, "model": result.model}
    except asyncio.CancelledError:
        status = Message.Status.INTERRUPTED  # Stop: keep what arrived
        raise
    except LLMError as exc:
        fields = {"error": exc.reason}
    except Exception:
        log.exception("reply to conversation %s failed", conversation_id)
        fields = {"error": "The server failed while answering; the error is logged."}
    finally:
        stoppable["yes"] = False
        if control is not None:
            await asyncio.shield(_release_stop_listener(conversation_id, control, stop_listener))
        if content is None:
            content = [{"type": "text", "text": "".join(pieces)}]
        # Shielded: the reply is saved even when this task is being cancelled.
        await asyncio.shield(_finish(conversation_id, reply.pk, content, status, **fields))


async def _cancel_on_stop(channel: str, task: asyncio.Task, stoppable: dict) -> None:
    """Cancel `task` when any tab, connected to any server process, presses Stop."""
    layer = get_channel_layer()
    while True:
        kind = (await layer.receive(channel)).get("type")
        if kind == "turn.stop" and stoppable["yes"]:
            task.cancel()
        elif kind == "turn.done":
            return


async def _release_stop_listener(conversation_id: int, channel: str, listener) -> None:
    """End the listener with a message, not a cancel: cancelling a Redis receive mid-read can
    drop a message it fetched for another consumer of this process (a streamed delta)."""
    layer = get_channel_layer()
    await layer.group_discard(broadcast.control_group(conversation_id), channel)
    if listener is None:
        return
    await layer.send(channel, {"type": "turn.done"})
    try:
        await asyncio.wait_for(listener, timeout=5)
    except (TimeoutError, asyncio.CancelledError):
        pass


async def _finish(conversation_id: int, message_id: int, content, status, **fields) -> None:
    """Save and show the reply, refresh the meter, and start auto-compaction if it is due."""
    message = await sync_to_async(actions.finish_reply)(
        message_id, content=content, status=status, **fields
    )
    await broadcast.html(conversation_id, render.replaced_message(message))
    conversation = await Conversation.objects.aget(pk=conversation_id)
    state = await sync_to_async(compaction.load_window)(conversation)
    await broadcast.html(
        conversation_id, await sync_to_async(render.context_panel)(conversation_id, state)
    )
    if status == Message.Status.COMPLETE and await sync_to_async(compaction.wants_auto_compaction)(
        conversation, state
    ):
        # The reply is shown and saved; the user may type on while this runs.
        start_compaction(conversation_id, "auto")


async def compact_and_broadcast(
    conversation_id: int, trigger: str, client=None, *, instructions: str = "", allow_review=True
):
    """Run one compaction and show its progress and outcome to every tab."""
    client = client or get_client()
    await broadcast.html(conversation_id, render.progress(f"Compacting ({trigger})…"))
    try:
        row = await compaction.compact(
            conversation_id,
            trigger=trigger,
            client=client,
            instructions=instructions,
            allow_review=allow_review,
        )
    except compaction.CompactionRefused as exc:
        if trigger == "manual":
            await broadcast.html(conversation_id, render.notice(exc.reason))
        return None
    except Exception:
        log.exception("compaction of conversation %s failed", conversation_id)
        await broadcast.html(
            conversation_id, render.notice("Compaction failed on the server; nothing changed.")
        )
        return None
    finally:
        await asyncio.shield(broadcast.html(conversation_id, render.progress("")))
    await broadcast.html(conversation_id, await sync_to_async(render.compaction_outcome)(row))
    return row
