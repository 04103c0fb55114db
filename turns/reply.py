"""One reply, streamed: the provider's events to every tab, the steps of a turn with tools, and
the reply closed whatever happens.

    stream the provider's events: text deltas coalesced to every tab (relay.py), partial text
    saved each second -> the model asks for tools? run them, stream the next step with their
    results -> close: the reply saved with its status, usage and the window it ended in, and
    what runs next claimed in the same transaction (transitions.close_turn)

Stop reaches the reply from any process (liveness.py); the reply owns its saving and its
frames, and nothing calls back into it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass, field, replace

from django.conf import settings

from chat import compactions, file_blocks
from chat.events import (
    FiguresChanged,
    MessageAdded,
    MessageChanged,
    MeterMoved,
    Renamed,
    ReplyStarted,
)
from chat.models import Message
from chat.window_loading import load_window
from compaction.assembly import turn_messages
from compaction.window_state import WindowState
from core import db, outbox
from core.clean import scrubbed, scrubbed_blocks
from core.errors import ActionError
from providers import registry
from providers.blocks import answered_ids, tool_uses
from providers.tokens import MESSAGE_OVERHEAD, estimate_content, estimate_length
from providers.values import Final, LLMError, Request, TextDelta, ThinkingDelta, Usage
from tools import registry as tools
from tools.values import Context
from turns import compacting, liveness, thinking, titling, transitions
from turns.relay import DeltaRelay
from turns.tasks import eager, follow, hold

log = logging.getLogger(__name__)

SERVER_FAILED = "The server failed while answering; the error is logged."
STEP_LIMIT_RESULT = "Not run: this turn reached its limit of model calls."
STOPPED_RESULT = "Not run: the reply was stopped."
# How often the meter moves while a reply streams: often enough to be seen growing, not so often
# that every frame redraws it (text goes every DELTA_INTERVAL_MS).
METER_INTERVAL_S = 0.5


@dataclass
class _Received:
    """What a turn has so far: its finished steps as the API's blocks (assistant blocks and the
    tool results between steps, in order), the step streaming now, how each tool call ran."""

    blocks: list[dict] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)  # this step's text so far
    thought: list[str] = field(default_factory=list)  # this step's thinking so far
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
        # A step cut short keeps the thinking it showed, unsigned: only a finished step's
        # thinking is ever sent back, and earlier turns' never (turns/thinking.py).
        thinking = {"type": "thinking", "thinking": "".join(self.thought), "signature": ""}
        text = {"type": "text", "text": self.text}
        return ([thinking] if self.thought else []) + ([text] if self.parts else [])


class _Stopped(Exception):
    """The row says this reply is no longer ours to write: Stop, or closed elsewhere."""


async def turn(turn: transitions.Turn) -> transitions.Step:
    """Stream one reply and close its row, whatever happens; returns what runs next."""
    conversation_id, reply = turn.conversation.pk, turn.reply
    # The reply's bubble (with the user's message, when it was sent just now) goes out with the
    # first text, in one frame, or on its own if the model is slow to start.
    versions = turn.versions
    preface = [ReplyStarted(reply, versions.get(reply.seq))]
    if turn.message:
        preface.insert(0, MessageAdded(turn.message, versions=versions.get(turn.message.seq)))
    relay = DeltaRelay(conversation_id, reply.seq, settings.DELTA_INTERVAL_MS / 1000, preface)
    received = _Received()
    streaming = eager(_stream(turn, received, relay))
    status, error, going_on = Message.Status.ERROR, "", True
    try:
        await liveness.watch_reply(reply, streaming)
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
        closing = eager(_close(turn, streaming, relay, received, status, error, going_on))
        try:
            step = await asyncio.shield(closing)
        except asyncio.CancelledError:
            await asyncio.wait([closing])
            if not closing.cancelled() and closing.exception() is None and closing.result():
                await asyncio.shield(db.run(transitions.give_back, closing.result()))
            raise
    return step


async def _stream(turn: transitions.Turn, received: _Received, relay: DeltaRelay) -> None:
    """The turn's steps: stream a reply; while the model asks for tools, run them (in parallel)
    and stream the next step with their results, up to TOOL_STEP_LIMIT model calls."""
    model = turn.conversation.model
    client = registry.client_for(model)
    capabilities = client.capabilities(model)
    box = await tools.offered(capabilities, turn.conversation.disabled_tools)
    context = Context(turn.conversation.owner_id, turn.conversation.pk, turn.reply.parent)
    state, budget = turn.state, turn.state.budget
    for step in range(1, settings.TOOL_STEP_LIMIT + 1):
        used = state.tokens + estimate_content(received.blocks)
        if step > 1 and not budget.fits(used):
            # The results left no room for the next step: make room before it, as before any
            # request (the turn itself is never cut: it is the newest entry, kept whole).
            state = received.state = await _make_room(turn, received) or state
            used = state.tokens + estimate_content(received.blocks)
            if not budget.fits(used):
                received.note = (
                    f"Stopped after {step - 1} steps: with the tool results the window is "
                    f"about {used:,} tokens, and the next step would not fit this model's "
                    f"budget of {budget.total:,} even after compacting."
                )
                return
        window = state.window()
        messages = window.messages + turn_messages(received.blocks)
        if file_blocks.names_files(messages):  # their bytes, read from storage
            messages = await db.run(file_blocks.for_request, messages, context.owner_id)
        thinking_budget, max_tokens = thinking.limits(
            model, turn.conversation.thinking_budget, budget.total - used, messages
        )
        request = Request(
            model=model,
            system=state.system,
            messages=messages,
            max_tokens=max_tokens,
            tools=box.definitions if box else (),
            cache_head=window.head if capabilities.supports_caching else None,
            thinking_budget=thinking_budget,
        )
        final = await _step(client, request, turn, received, relay, used)
        received.spent = received.spent.plus(final.usage)
        received.blocks += final.content
        received.parts, received.thought = [], []
        calls = tool_uses(final.content)
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
        outcomes = await asyncio.gather(*(tools.run(call, context, box) for call in calls))
        for call, outcome in zip(calls, outcomes, strict=True):
            received.blocks.append(_result(call["id"], outcome.content, outcome.is_error))
            received.runs[call["id"]] = {"ms": outcome.ms}
        if not await db.run(
            transitions.save_partial, turn.reply.pk, received.content(), received.runs
        ):
            raise _Stopped
        await relay.checkpoint(_bubble(turn, received))


async def _make_room(turn: transitions.Turn, received: _Received) -> WindowState | None:
    """Compact the window before this turn (clear old results, else summarise), mid-turn; the
    window the turn goes on in, or None if nothing could be done."""
    incoming = estimate_content(received.blocks)
    try:
        opened = await hold(
            db.run(compactions.open_mid_turn, turn.conversation.pk, turn.reply.seq, incoming)
        )
    except ActionError:
        return None
    await compacting.compact(opened)
    return await db.run(load_window, turn.conversation, turn.reply.seq)


async def _step(
    client, request: Request, turn, received: _Received, relay: DeltaRelay, used: int
) -> Final:
    """One model call: text (and thinking) to every tab as it comes, text saved each second,
    with the window it makes so far (`used` before it) estimated on the meter; its final
    message."""
    last_save, final = time.monotonic(), None
    last_meter, chars = time.monotonic(), 0
    before, budget = turn.state.tokens, turn.state.budget.total
    async with aclosing(client.stream(request)) as events:
        async for event in events:
            if isinstance(event, TextDelta | ThinkingDelta):
                text = scrubbed(event.text)
                if isinstance(event, ThinkingDelta):  # shown folded; kept whole with the final
                    received.thought.append(text)
                    relay.think(text)
                else:
                    received.parts.append(text)
                    await relay.add(text)
                chars += len(text)  # thinking is output too: the meter counts it
                if time.monotonic() - last_meter >= METER_INTERVAL_S:
                    last_meter = time.monotonic()
                    tokens = used + MESSAGE_OVERHEAD + estimate_length(chars)
                    relay.meter(MeterMoved(tokens, tokens - before, budget))
                if time.monotonic() - last_save >= settings.PARTIAL_SAVE_MS / 1000:
                    last_save = time.monotonic()
                    saved = received.content()
                    if not await db.run(
                        transitions.save_partial, turn.reply.pk, saved, received.runs
                    ):
                        raise _Stopped
            elif isinstance(event, Final):
                final = received.final = replace(event, content=scrubbed_blocks(event.content))
            # Tool calls arrive whole with the final message; their deltas are not shown.
    if final is None:
        raise LLMError("The model stream ended without a final message.")
    return final


def _bubble(turn: transitions.Turn, received: _Received) -> MessageChanged:
    """The reply's bubble shown again whole between steps: its calls, running or answered."""
    shown = transitions.replace_message(
        turn.reply, content=received.shown(), tool_runs=received.runs
    )
    return MessageChanged(shown)


def _result(tool_use_id: str, content: str | list[dict], is_error: bool) -> dict:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": scrubbed_blocks(content)}
    if is_error:
        block["is_error"] = True
    return block


def _unanswered(blocks: list[dict]) -> list[dict]:
    answered = answered_ids(blocks)
    return [b for b in tool_uses(blocks) if b.get("id") not in answered]


async def _close(turn, streaming, relay, received: _Received, status, error, going_on: bool):
    """Save the reply with its final status and show it, the new title and the new meter, in
    one frame; the next step (a compaction it made due, the next queued reply) is claimed in
    the same transaction."""
    if not streaming.done():
        streaming.cancel()
    await asyncio.gather(streaming, return_exceptions=True)
    preface = await relay.close()  # the bubble, if no frame has carried it yet
    liveness.unwatch_reply(turn.reply.pk)
    final = received.final if status == Message.Status.COMPLETE else None
    state = received.state or turn.state  # the window the turn ended in
    reply = transitions.finished(
        turn,
        state=state,
        content=received.content(),
        status=status,
        usage=received.spent,  # billed for every step, however the turn ended
        # The last step's input holds every step before it: with its output, the window's
        # size after the turn, as the server counted it.
        # Less its thinking, which no later request carries.
        window_tokens=thinking.carried(final.usage.window_tokens, received.content())
        if final
        else None,
        error=error or (received.note if status == Message.Status.COMPLETE else ""),
        model=final.model if final else "",
        tool_runs=received.runs,
    )
    after = state.extended([reply.to_entry()], reply.window_tokens)
    conversation_id = turn.conversation.pk
    try:
        closed = await hold(db.run(transitions.close_turn, turn, reply, after, then=going_on))
    except Exception:
        # The database failed mid-way (the transaction rolled back): save the reply alone, so
        # its text is not lost; the sweep starts whatever is queued behind it.
        log.exception("closing reply %s failed; saving it alone", reply.pk)
        saved = await db.run(transitions.save_final, reply)
        await outbox.send(conversation_id, *preface, MessageChanged(saved))
        return None
    await outbox.send(
        conversation_id,
        *preface,
        MessageChanged(closed.reply, turn.versions.get(closed.reply.seq)),
        FiguresChanged(closed.figures),
        Renamed(closed.named) if closed.named.title != turn.conversation.title else None,
    )
    if closed.first_words:  # the first reply: ask for a better title, in the background
        first = turn.state.entries[-1]
        titling.start(closed.first_words, first.text, closed.reply, turn.conversation.model)
    return await follow(closed.claim, conversation_id)
