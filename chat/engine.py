"""The turn engine: runs a conversation's work in order, one step at a time.

A step is a value from `chat.queue`: a `Turn` to stream, a compaction to run (opened by the
pre-send check, by the policy after a reply, or by the user), or a reply `Refused` before any
request. A driver task runs a conversation's steps until its queue is empty:

    queue.append / claim_next -> Turn -> stream the provider's events: text deltas coalesced
                                         to every tab, partial text saved each second
                                 -> queue.close_turn -> the reply and the meter to every tab
                                 -> policy: over the threshold? -> compaction.run
                                 -> queue.claim_next -> the next queued reply, if any

Every state is written to the database before it is acted on, so the work survives this
process: a reply or compaction it was running when it died is closed by another process's sweep
(`_sweep`), and the queue is picked up there. Stop reaches the reply from any process through
`chat.liveness`; the turn owns its broadcasting and saving, and nothing calls back into it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.utils import timezone

import providers
from compaction import actions as compaction_actions
from compaction import run as compaction
from compaction.loading import WindowState, load_window
from compaction.policy import needs_auto_compaction
from compaction.tokens import estimate_content
from compaction.window import turn_messages
from providers.values import Final, LLMError, Request, TextDelta, Usage
from tools import mcp, registry
from tools.values import Context

from . import broadcast, db, fragments, queue
from .clean import scrubbed, scrubbed_blocks
from .coalesce import DeltaRelay
from .liveness import local
from .models import Message

log = logging.getLogger(__name__)

# Streamed text is written to the row at most this often, so a tab opened mid-reply (or a crash)
# sees what has arrived without a write per token; each save also touches the heartbeat.
PARTIAL_SAVE_SECONDS = 1.0
SERVER_FAILED = "The server failed while answering; the error is logged."


async def hold(claiming):
    """Await a claim (a `queue.Claim`, or a compaction opened by the user) so that a cancel
    meanwhile cannot strand it: the claim still lands in the database, so wait for it and give
    back what it took (a reply returns to the queue, a compaction is released) before the
    cancellation goes on. Without this a cancelled claim would wait for a stale heartbeat."""
    claiming = _eager(claiming)
    try:
        return await asyncio.shield(claiming)
    except asyncio.CancelledError:
        try:
            claimed = await claiming
        except Exception:
            raise asyncio.CancelledError from None  # nothing was claimed
        if isinstance(claimed, queue.Closed):
            claimed = claimed.claim
        step = claimed.step if isinstance(claimed, queue.Claim) else claimed
        await db.run(queue.give_back, step)
        raise


def _eager(coroutine) -> asyncio.Task:
    """A task that starts at once, in the caller's turn of the loop, and runs until it first
    waits. A send's work up to the provider request (the claim, the driver, the stream) then
    goes straight through, instead of waiting for the loop's next turn at each hop: under load,
    behind every other chat's work."""
    return asyncio.Task(coroutine, loop=asyncio.get_running_loop(), eager_start=True)


def start(step: queue.Step) -> None:
    """Run `step` and whatever follows it in its conversation, in this process."""
    if step is not None:
        _spawn(_conversation_of(step), step)


def kick(conversation_id: int) -> None:
    """Start the conversation's next queued reply here, if nothing runs it anywhere."""
    _spawn(conversation_id, None)


def _spawn(conversation_id: int, step: queue.Step) -> None:
    ensure_started()
    task = _eager(_drive(conversation_id, step))
    local().track_driver(conversation_id, task)


def _conversation_of(step: queue.Step) -> int:
    if isinstance(step, compaction.Opened):
        return step.conversation_id
    return step.reply.conversation_id


async def _drive(conversation_id: int, step: queue.Step) -> None:
    try:
        if step is None:
            step = await _claim(conversation_id)
        while step is not None:
            current, step = step, None  # a running step closes itself: never given back
            step = await _run(conversation_id, current)
    except BaseException:
        # A step claimed but never started (this process is stopping, or failed between two
        # steps) goes back to the queue at once, not after its heartbeat goes stale.
        if step is not None:
            await asyncio.shield(db.run(queue.give_back, step))
        raise


async def _run(conversation_id: int, step: queue.Step) -> queue.Step:
    """Run one step; returns the next, claimed."""
    if isinstance(step, queue.Refused):
        await broadcast.html(conversation_id, fragments.started(step.reply))
        return await _claim(conversation_id)
    if isinstance(step, compaction.Opened):
        await _compact(step)
        # After making room for a reply, that reply gets no second compaction: if it still
        # does not fit, it is refused with both sizes.
        return await _claim(conversation_id, compact=not step.before_reply)
    return await _turn(step)


async def _claim(conversation_id: int, *, compact: bool = True) -> queue.Step:
    claim = await hold(db.run(queue.claim_next, conversation_id, compact=compact))
    await show_recovered(claim.recovered)
    return claim.step


async def show_recovered(replies: tuple[Message, ...]) -> None:
    """Replies closed because their process died: every tab sees them closed, text kept."""
    for reply in replies:
        await broadcast.html(reply.conversation_id, fragments.replaced_message(reply))


# --- a turn --------------------------------------------------------------------------------------


@dataclass
class _Received:
    """What a turn has so far: its finished steps as the API's blocks (assistant blocks and the
    tool results between steps, in order), the step streaming now, how each tool call ran."""

    blocks: list[dict] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)  # this step's text so far
    final: Final | None = None  # the last finished step
    spent: Usage = field(default_factory=Usage)  # every finished step's usage, summed
    runs: dict[str, dict] = field(default_factory=dict)  # tool_use id -> {"ms": …}
    note: str = ""  # why the turn ended before the model did (step limit, full window)
    state: WindowState | None = None  # the window after a compaction mid-turn, if one ran

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def shown(self) -> list[dict]:
        """As the page shows it mid-turn: calls without a result yet are running."""
        return self.blocks + self._text()

    def content(self) -> list[dict]:
        """As it is saved however the turn ends: a call left without a result (Stop during a
        tool) is answered "not run", so the stored turn pairs every tool_use with a result."""
        results = [_result(c["id"], STOPPED_RESULT, True) for c in _unanswered(self.blocks)]
        return self.blocks + results + self._text()

    def _text(self) -> list[dict]:
        return [{"type": "text", "text": self.text}] if self.parts else []


class _Stopped(Exception):
    """The row says this reply is no longer ours to write: Stop, or closed elsewhere."""


async def _turn(turn: queue.Turn) -> queue.Step:
    """Stream one reply and close its row, whatever happens; returns what runs next."""
    conversation_id, reply = turn.conversation.pk, turn.reply
    # The reply's bubble (with the user's message, when it was sent just now) goes out with the
    # first text, in one frame, or on its own if the model is slow to start.
    versions = turn.versions
    sent = ""
    if turn.message:
        sent = fragments.appended_message(turn.message, versions=versions.get(turn.message.seq))
    relay = DeltaRelay(
        conversation_id,
        reply.seq,
        settings.DELTA_INTERVAL_MS / 1000,
        preface=sent + fragments.started(reply, versions.get(reply.seq)),
    )
    received = _Received()
    streaming = _eager(_stream(turn, received, relay))
    status, error, going_on = Message.Status.ERROR, "", True
    try:
        await local().watch_reply(reply, streaming)
        await streaming
        status = Message.Status.COMPLETE
    except asyncio.CancelledError:
        status = Message.Status.INTERRUPTED  # Stop: keep what arrived
        if asyncio.current_task().cancelling():
            streaming.cancel()  # this process is shutting down: save, start nothing new
            going_on = False
            raise
    except _Stopped:
        status = Message.Status.INTERRUPTED
    except LLMError as exc:
        error = exc.reason
    except Exception:
        log.exception("reply %s of conversation %s failed", reply.pk, conversation_id)
        error = SERVER_FAILED
    finally:
        # The reply is saved and shown even while this task is being cancelled: the closing
        # runs on its own, and if this process is stopping meanwhile, what it claimed next is
        # given back.
        closing = _eager(_close(turn, streaming, relay, received, status, error, going_on))
        try:
            step = await asyncio.shield(closing)
        except asyncio.CancelledError:
            await asyncio.wait([closing])
            if not closing.cancelled() and closing.exception() is None and closing.result():
                await asyncio.shield(db.run(queue.give_back, closing.result()))
            raise
    return step


async def _stream(turn: queue.Turn, received: _Received, relay: DeltaRelay) -> None:
    """The turn's steps: stream a reply; while the model asks for tools, run them (in parallel)
    and stream the next step with their results, up to TOOL_STEP_LIMIT model calls."""
    model = turn.conversation.model
    client = providers.client_for(model)
    capabilities = client.capabilities(model)
    box = await registry.offered(capabilities, turn.conversation.disabled_tools)
    tools = box.definitions if box else ()
    context = Context(turn.conversation.owner_id, turn.conversation.pk, turn.reply.parent)
    state, budget = turn.state, turn.state.budget
    for step in range(1, settings.TOOL_STEP_LIMIT + 1):
        used = state.tokens + estimate_content(received.blocks)
        if step > 1 and used + budget.reserve > budget.total:
            # The results left no room for the next step: make room before it, as before any
            # request (the turn itself is never cut: it is the newest entry, kept whole).
            state = received.state = await _make_room(turn, received) or state
            used = state.tokens + estimate_content(received.blocks)
            if used + budget.reserve > budget.total:
                received.note = (
                    f"Stopped after {step - 1} steps: with the tool results the window is "
                    f"about {used:,} tokens, and the next step would not fit this model's "
                    f"budget of {budget.total:,} even after compacting."
                )
                return
        window = state.window()
        request = Request(
            model=model,
            system=state.system,
            messages=window.messages + turn_messages(received.blocks),
            max_tokens=max(1, min(settings.CHAT_MAX_TOKENS, budget.total - used)),
            tools=tools,
            cache_head=window.head if capabilities.supports_caching else None,
        )
        final = await _step(client, request, turn, received, relay)
        received.spent = received.spent.plus(final.usage)
        received.blocks += final.content
        received.parts = []
        calls = [b for b in final.content if b.get("type") == "tool_use"]
        if final.stop_reason != "tool_use" or not calls:
            return
        if step == settings.TOOL_STEP_LIMIT:
            received.blocks += [_result(c["id"], STEP_LIMIT_RESULT, True) for c in calls]
            received.note = (
                f"Stopped after {step} model calls (TOOL_STEP_LIMIT): the model still asked for "
                "tools. Ask it to go on if you want more."
            )
            return
        await relay.checkpoint(_bubble(turn, received))
        outcomes = await asyncio.gather(*(registry.run(call, context, box) for call in calls))
        for call, outcome in zip(calls, outcomes, strict=True):
            received.blocks.append(_result(call["id"], outcome.text, outcome.is_error))
            received.runs[call["id"]] = {"ms": outcome.ms}
        if not await db.run(queue.save_partial, turn.reply.pk, received.content(), received.runs):
            raise _Stopped
        await relay.checkpoint(_bubble(turn, received))


async def _make_room(turn: queue.Turn, received: _Received) -> WindowState | None:
    """Compact the window before this turn (clear old results, else summarise), mid-turn; the
    window the turn goes on in, or None if nothing could be done."""
    incoming = estimate_content(received.blocks)
    try:
        opened = await hold(
            db.run(compaction.open_mid_turn, turn.conversation.pk, turn.reply.seq, incoming)
        )
    except compaction.CompactionRefused:
        return None
    await _compact(opened)
    return await db.run(load_window, turn.conversation, turn.reply.seq)


STEP_LIMIT_RESULT = "Not run: this turn reached its limit of model calls."
STOPPED_RESULT = "Not run: the reply was stopped."


async def _step(client, request: Request, turn, received: _Received, relay: DeltaRelay) -> Final:
    """One model call: text to every tab as it comes, saved each second; its final message."""
    last_save, final = time.monotonic(), None
    async with aclosing(client.stream(request)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                text = scrubbed(event.text)
                received.parts.append(text)
                await relay.add(text)
                if time.monotonic() - last_save >= PARTIAL_SAVE_SECONDS:
                    last_save = time.monotonic()
                    saved = received.content()
                    if not await db.run(queue.save_partial, turn.reply.pk, saved, received.runs):
                        raise _Stopped
            elif isinstance(event, Final):
                final = received.final = replace(event, content=scrubbed_blocks(event.content))
            # Tool calls arrive whole with the final message; their deltas are not shown.
    if final is None:
        raise LLMError("The model stream ended without a final message.")
    return final


def _bubble(turn: queue.Turn, received: _Received) -> str:
    """The reply's bubble re-rendered whole between steps: its calls, running or answered."""
    shown = queue.replace_message(turn.reply, content=received.shown(), tool_runs=received.runs)
    return fragments.replaced_message(shown)


def _result(tool_use_id: str, text: str, is_error: bool) -> dict:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": scrubbed(text)}
    if is_error:
        block["is_error"] = True
    return block


def _unanswered(blocks: list[dict]) -> list[dict]:
    answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
    return [b for b in blocks if b.get("type") == "tool_use" and b.get("id") not in answered]


async def _close(turn, streaming, relay, received: _Received, status, error, going_on: bool):
    """Save the reply with its final status and show it, the new title and the new meter, in
    one frame; the next step (a compaction it made due, the next queued reply) is claimed in
    the same transaction."""
    if not streaming.done():
        streaming.cancel()
    await asyncio.gather(streaming, return_exceptions=True)
    preface = await relay.close()  # the bubble, if no frame has carried it yet
    local().unwatch_reply(turn.reply.pk)
    final = received.final if status == Message.Status.COMPLETE else None
    state = received.state or turn.state  # the window the turn ended in
    reply = queue.finished(
        turn,
        state=state,
        content=received.content(),
        status=status,
        usage=received.spent.as_dict(),  # billed for every step, however the turn ended
        # The last step's input holds every step before it: with its output, the window's
        # size after the turn, as the server counted it.
        window_tokens=final.usage.window_tokens if final else None,
        error=error or (received.note if status == Message.Status.COMPLETE else ""),
        model=final.model if final else "",
        tool_runs=received.runs,
    )
    after = state.extended([reply.to_entry()], reply.window_tokens)
    try:
        closed = await hold(
            db.run(
                queue.close_turn,
                turn,
                reply,
                after,
                then=going_on,
                compact=going_on and _compaction_due(turn, state, reply, after),
            )
        )
    except Exception:
        # The database failed mid-way (the transaction rolled back): save the reply alone, so
        # its text is not lost; the sweep starts whatever is queued behind it.
        log.exception("closing reply %s failed; saving it alone", reply.pk)
        saved = await db.run(queue.save_final, reply)
        await broadcast.html(turn.conversation.pk, preface + fragments.replaced_message(saved))
        return None
    shown = fragments.replaced_message(closed.reply, turn.versions.get(closed.reply.seq))
    frame = preface + shown + fragments.figures(closed.figures)
    if closed.named.title != turn.conversation.title:
        frame += fragments.title(closed.named)
    await broadcast.html(turn.conversation.pk, frame)
    await show_recovered(closed.claim.recovered)
    return closed.claim.step


def _compaction_due(turn: queue.Turn, state: WindowState, reply: Message, after) -> bool:
    """After a complete reply: has the window passed the auto-compaction threshold?"""
    if reply.status != Message.Status.COMPLETE or turn.has_draft:
        return False  # a draft waits for the user: do not knock again
    paused = turn.conversation.auto_compact_paused_until
    if paused is not None and paused > timezone.now():
        return False
    last_post = state.boundary.post_tokens if state.boundary else None
    return needs_auto_compaction(after.tokens, after.budget, last_post)


# --- a compaction --------------------------------------------------------------------------------


async def _compact(opened: compaction.Opened) -> None:
    conversation_id, row = opened.conversation_id, opened.row
    await broadcast.html(conversation_id, fragments.progress(f"Compacting ({row.trigger})…"))
    running = asyncio.ensure_future(compaction.run(opened))
    local().compactions[row.pk] = running
    done = None
    try:
        done = await running
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():
            running.cancel()
            raise
    except Exception:
        log.exception("compaction %s of conversation %s failed", row.pk, conversation_id)
        await broadcast.html(
            conversation_id, fragments.notice("Compaction failed on the server; nothing changed.")
        )
    finally:
        local().compactions.pop(row.pk, None)
        await asyncio.shield(broadcast.html(conversation_id, fragments.progress("")))
    if done is not None:
        await compaction_actions.broadcast_outcome(done)


# --- this process's background work --------------------------------------------------------------


def ensure_started() -> None:
    """Heartbeats and the sweep run once per process (per event loop), from the first use on:
    a server started after a crash recovers what the dead process left at once."""
    state = local()
    if state.background is None or state.background.done():
        state.background = asyncio.get_running_loop().create_task(_background())


async def _background() -> None:
    while True:
        try:
            await local().beat()
            await _sweep()
            await local().forget_idle()
        except Exception:
            log.exception("heartbeat or sweep failed; trying again")
        await asyncio.sleep(settings.TURN_HEARTBEAT_SECONDS)


async def _sweep() -> None:
    """Close what dead processes left running, and start queues nobody is running."""
    cutoff = compaction.stale_before()
    replies = await db.run(queue.close_stale, cutoff)
    await show_recovered(replies)
    conversations = {r.conversation_id for r in replies}
    conversations |= set(await db.run(compaction.close_stale, cutoff))
    conversations |= set(await db.run(queue.orphaned_queues, settings.TURN_HEARTBEAT_SECONDS))
    for conversation_id in sorted(conversations):
        if conversation_id not in local().drivers:
            kick(conversation_id)


async def shutdown() -> None:
    await local().shutdown()
    await mcp.shutdown()  # after the turns: none of them is calling a tool any more


async def lifespan(scope, receive, send) -> None:
    """ASGI lifespan (uvicorn): start the background work at start-up; on a clean shutdown
    (SIGTERM) close this process's replies and compactions at once instead of leaving them to
    go stale."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            ensure_started()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
