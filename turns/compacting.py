"""Running a compaction, and the compaction actions a person takes over the websocket.

A compaction is a step of its conversation's queue, like a reply: opened in a claim (the check
before a request, the policy after a reply, mid-turn when a turn's tool results fill the window,
or a person's "compact now"), run here (a summariser call, one per part of a span too long for
one request, or the rule-based brief), closed in one transaction (chat/compactions.py), and what
became of it is sent to every tab. A row is never left running: a cancel or a crash marks it
failed at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from django.conf import settings

from chat import compactions, file_blocks, limits
from chat.compactions import Opened
from chat.events import CompactionSettled, Notice, Progress
from compaction import boundaries, summariser
from compaction import instructions as steering
from compaction.models import Compaction
from core import db, outbox
from core.clean import INSTRUCTIONS, SUMMARY, clean
from providers import registry
from tools import registry as tools
from turns import liveness

log = logging.getLogger(__name__)

SET_ASIDE = (
    "The draft summary that waited for your review was set aside: the window filled up before it "
    "was reviewed, so this compaction was committed without review."
)


async def run(opened: Opened) -> Compaction:
    """Summarise and close the row: committed, a draft to review, or failed. Never left running."""
    row, conversation = opened.row, opened.conversation
    if row.status != Compaction.Status.RUNNING:
        return row  # a clearing: committed when it was opened
    started = time.monotonic()
    try:
        # A cheaper model may write the summaries (the conversation's settings, SUMMARY_MODEL).
        model = registry.summary_model(conversation.model, conversation.summary_model)
        client = registry.client_for(model)

        async def part(number: int, count: int) -> None:
            # A long span is folded in parts, one request each: say how far it has got.
            text = f"Compacting ({row.trigger}): summarising part {number} of {count}…"
            await outbox.send(conversation.pk, Progress(text))

        ask = await _ask(opened, client, model)
        result = await summariser.summarise(client, ask, on_part=part)
        review = conversation.review_compactions and not opened.before_reply
        duration_ms = int((time.monotonic() - started) * 1000)
        return await db.run(
            compactions.close, opened, result, duration_ms, review=review, model=model
        )
    except BaseException as exc:
        # Cancelled (Stop, shutdown) or crashed: release the conversation at once.
        await asyncio.shield(db.run(boundaries.mark_failed, row.pk, f"{type(exc).__name__}: {exc}"))
        raise


async def _ask(opened: Opened, client, model: str) -> summariser.SummaryAsk:
    """What `model` is asked: the span the compaction folds and the summary in force, with
    the person's instructions, within the conversation's budget and the settings. Another
    model than the conversation's is sent no more than its own budget either (its "context" in
    CHAT_MODELS: for a compatible server, the only word on its window)."""
    state = opened.state
    budget = state.budget.total
    if model != opened.conversation.model:
        budget = min(budget, registry.context_budget(model))
    return summariser.SummaryAsk(
        model,
        opened.older,
        state.summary,
        opened.row.instructions,
        revise=settings.SUMMARY_REVISES_FACTS,
        budget=budget,
        max_tokens=settings.SUMMARY_MAX_TOKENS,
        max_chars=summariser.brief_room(state, opened.older),
        over_prefix=await _over_prefix(opened, client, model),
    )


async def _over_prefix(opened: Opened, client, model: str):
    """The summary request over the conversation's cached prefix, when it pays: the prefix is
    still cached (else re-sending the whole window costs more than the part that leaves it)
    and the summary's model is the conversation's (a cache is the model's own: another model
    would pay for the whole window). Its tools are the conversation's, as its chat requests
    offer them."""
    if not (settings.SUMMARY_READS_CACHE and opened.cache_warm):
        return None
    if model != opened.conversation.model:
        return None
    capabilities = client.capabilities(model)
    request = summariser.over_prefix(
        opened.state,
        opened.older,
        opened.row.instructions,
        model=model,
        capabilities=capabilities,
        max_tokens=settings.SUMMARY_MAX_TOKENS,
    )
    if request is None:
        return None
    if file_blocks.names_files(request.messages):
        # As the chat request carries them (the same bytes: the prefix is the one cached), so
        # the model sees the files it describes; a stored reference is no block the API takes.
        messages = await db.run(
            file_blocks.for_request, request.messages, opened.conversation.owner_id
        )
        request = replace(request, messages=messages)
    # Looked up only now: it may connect to the MCP servers.
    box = await tools.offered(capabilities, opened.conversation.disabled_tools)
    return replace(request, tools=box.definitions) if box else request


async def compact(opened: Opened) -> None:
    """A compaction as a step of its conversation: shown in progress, run, and settled."""
    conversation_id, row = opened.conversation_id, opened.row
    await outbox.send(conversation_id, Progress(f"Compacting ({row.trigger})…"))
    running = asyncio.ensure_future(run(opened))
    liveness.watch_compaction(row.pk, running)
    done = None
    try:
        done = await running
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():
            running.cancel()
            raise
    except Exception:
        log.exception("compaction %s of conversation %s failed", row.pk, conversation_id)
        await outbox.send(
            conversation_id, Notice("Compaction failed on the server; nothing changed.")
        )
    finally:
        liveness.unwatch_compaction(row.pk)
        await asyncio.shield(outbox.send(conversation_id, Progress("")))
    if done is not None:
        # The fact check reads the whole span: off the event loop, as the summary was written.
        await settled(done, note=await asyncio.to_thread(_steered, opened, done))


def _steered(opened: Opened, row: Compaction) -> str:
    """What the person's instructions got (compaction/instructions.report), shown where they
    look once the summary is written: a regenerated draft that came out the same says why."""
    if row.status not in (Compaction.Status.DRAFT, Compaction.Status.COMMITTED):
        return ""
    if not row.instructions and opened.regenerates is None:
        return ""
    return steering.report(
        row.instructions,
        opened.older,
        opened.state.summary,
        row.summary,
        by_rules=row.summariser == "rules",
        room=summariser.brief_room(opened.state, opened.older),
        regenerates=opened.regenerates,
    )


async def settled(row: Compaction, *, note: str = "") -> None:
    """Show every tab what a compaction changed: divider, review box, notice, context panel.
    `note` replaces the notice (the outcome of a review says what became of the draft)."""
    panel, conversation, superseded = await db.run(compactions.after_outcome, row)
    if not note and boundaries.nothing_to_gain(row):
        note = row.error  # says what to do instead; not a fault
    elif not note and superseded:
        note = SET_ASIDE
    await outbox.send(row.conversation_id, CompactionSettled(row, panel, conversation, note))


# --- a person's actions --------------------------------------------------------------------------


async def compact_now(user, conversation_id, instructions) -> Opened:
    """Open a compaction at the user's request; the engine runs it (`engine.start`)."""
    return await _opened_for(user, conversation_id, instructions)


async def regenerate(user, conversation_id, compaction_id, instructions) -> Opened:
    """Throw the draft away and write a new one, steered by new instructions."""
    return await _opened_for(user, conversation_id, instructions, discard=compaction_id)


async def _opened_for(user, conversation_id, instructions, *, discard=None) -> Opened:
    instructions = clean(instructions, INSTRUCTIONS)
    # Each asks the model for a summary: limited per user (auto-compaction is not counted).
    await db.run(limits.hit, limits.COMPACTIONS, user.pk)
    # Shown in progress by `compact`, which the engine runs at once.
    return await db.run(
        compactions.open_for_user, user, conversation_id, instructions, discard=discard
    )


async def approve_and_tell(user, conversation_id, compaction_id, summary) -> None:
    summary = clean(summary, SUMMARY)
    row = await db.run(compactions.approve, user, conversation_id, compaction_id, summary)
    # Replaces any notice about the draft ("waiting for your review") in every tab. "Before
    # #N", not "messages 1 to N-1": with versions, not every number below N is on the branch.
    await settled(
        row,
        note="Summary approved: the model now sees it in place of the messages before "
        f"#{row.first_kept_seq}.",
    )


async def discard_and_tell(user, conversation_id, compaction_id) -> None:
    await settled(await db.run(compactions.discard, user, conversation_id, compaction_id))


async def undo_and_tell(user, conversation_id) -> None:
    row = await db.run(compactions.undo, user, conversation_id)
    await settled(row, note=await db.run(_undone_note, row))


def _undone_note(row: Compaction) -> str:
    """What undoing `row` gave back to the model: the messages it had folded, from the boundary
    now in force on ("#N", not a count: with versions, not every number is on the branch)."""
    now = boundaries.latest(row.conversation_id, "first_kept_seq")
    start = now.first_kept_seq if now is not None else 1
    if start >= row.first_kept_seq:  # a clearing: the same cut, its tool results back
        return "Compaction undone: the model's window is as it was before it."
    return (
        f"Compaction undone: the model sees the messages from #{start} to before "
        f"#{row.first_kept_seq} word for word again."
    )
