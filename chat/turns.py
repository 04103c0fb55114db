"""One turn of the conversation, run as a task that outlives the websocket that started it.

The task streams the reply to the conversation's channel-layer group, so every open tab sees it,
and it saves the reply whether the browser stays, leaves (disconnect) or presses Stop (cancel).
After the reply is saved, auto-compaction runs off the user's critical path.
"""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.conf import settings

from compaction import service as compaction

from . import actions, broadcast, render
from .llm import LLMError, get_client
from .models import Conversation, Message

log = logging.getLogger(__name__)

# conversation id -> the task streaming its reply, in this process. Stop reaches it through a
# group message that every consumer (in every process) relays to `stop()`.
_running: dict[int, asyncio.Task] = {}
# conversation id -> a compaction running in the background. The database, not this dict, is what
# keeps two compactions of one conversation apart; this only lets tests and shutdown wait.
_compacting: dict[int, asyncio.Task] = {}


def is_running(conversation_id: int) -> bool:
    task = _running.get(conversation_id)
    return task is not None and not task.done()


def start(conversation_id: int) -> asyncio.Task:
    return _spawn(_running, conversation_id, run_turn(conversation_id))


def start_compaction(conversation_id: int, trigger: str, **kwargs) -> asyncio.Task:
    """Compact without holding up the socket: progress and outcome arrive as broadcasts."""
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


def stop(conversation_id: int) -> bool:
    task = _running.get(conversation_id)
    if task is None or task.done():
        return False
    task.cancel()
    return True


async def wait(conversation_id: int) -> None:
    """Wait for this conversation's turn, then any compaction it started: used by tests."""
    for registry in (_running, _compacting):
        task = registry.get(conversation_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)


async def run_turn(conversation_id: int) -> None:
    client = get_client()
    # A compaction this process started after the previous reply finishes first, so the window
    # below is built from its boundary (and the pre-send check sees the result).
    background = _compacting.get(conversation_id)
    if background is not None:
        await asyncio.gather(background, return_exceptions=True)
    conversation = await Conversation.objects.aget(pk=conversation_id)
    state = await sync_to_async(compaction.load_window)(conversation)
    if compaction.must_compact_first(state):
        await compact_and_broadcast(conversation_id, "auto", client, allow_review=False)
        state = await sync_to_async(compaction.load_window)(conversation)
    reply = await sync_to_async(actions.start_reply)(
        conversation_id, client.model, state.boundary.pk if state.boundary else None
    )
    await broadcast.html(conversation_id, render.appended_message(reply))
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)
        await broadcast.html(conversation_id, render.delta(reply.seq, text))

    partial = lambda: [{"type": "text", "text": "".join(pieces)}]  # noqa: E731
    try:
        result = await client.reply(
            system=state.window.system,
            messages=state.window.messages,
            max_tokens=settings.CHAT_MAX_TOKENS,
            on_text=on_text,
        )
    except asyncio.CancelledError:
        # Stop: keep what arrived. Shielded so the save completes although we are cancelled.
        await asyncio.shield(_finish(conversation_id, reply.pk, partial(), "interrupted"))
        raise
    except LLMError as exc:
        await _finish(conversation_id, reply.pk, partial(), "error", error=exc.reason)
        return
    except Exception as exc:
        log.exception("reply failed")
        await _finish(
            conversation_id, reply.pk, partial(), "error", error=f"Unexpected error: {exc}"
        )
        return
    await _finish(
        conversation_id,
        reply.pk,
        result.content,
        "complete",
        usage=result.usage,
        model=result.model,
    )


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
        await broadcast.html(conversation_id, render.progress(""))
        if trigger == "manual":
            await broadcast.html(conversation_id, render.notice(exc.reason))
        return None
    await broadcast.html(conversation_id, render.progress(""))
    await broadcast.html(conversation_id, await sync_to_async(render.compaction_outcome)(row))
    return row
