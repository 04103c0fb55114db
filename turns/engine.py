"""The turn engine: runs a conversation's work in order, one step at a time.

A step is a value from turns/transitions.py: a `Turn` to stream, a compaction to run (opened by
the check before a request, by the policy after a reply, or by a person), or a reply `Refused`
before any request. A driver task runs a conversation's steps until its queue is empty:

    transitions.append / claim_next -> Turn -> reply.turn: stream it, save it, claim what follows
                                -> Opened -> compacting.compact: summarise, close, show it
                                -> claiming.claim_next -> the next queued reply, if any

Every state is written to the database before it is acted on, so the work survives this
process: a reply or compaction it was running when it died is closed by another process's sweep
(`sweep`, turns/recovery.py), and the queue is picked up there.
"""

from __future__ import annotations

import asyncio
import logging
from importlib import import_module

from django.conf import settings

from chat import attachments, limits, vectors
from chat.compactions import Opened
from chat.events import ReplyStarted
from chat.models import stale_before
from compaction import boundaries
from core import channel_layer, cpu, db, outbox, runtime
from providers.values import LLMError
from tools import mcp
from turns import active_users, claiming, compacting, liveness, places, recovery, reply, transitions
from turns.tasks import eager, follow, hold, show_recovered

log = logging.getLogger(__name__)


def start(step: transitions.Step) -> None:
    """Run `step` and whatever follows it in its conversation, in this process."""
    if step is not None:
        _spawn(_conversation_of(step), step)


def kick(conversation_id: int) -> None:
    """Start the conversation's next queued reply here, if nothing runs it anywhere."""
    _spawn(conversation_id, None)


def _spawn(conversation_id: int, step: transitions.Step) -> None:
    ensure_started()
    liveness.track_driver(conversation_id, eager(_drive(conversation_id, step)))


def _conversation_of(step: transitions.Step) -> int:
    if isinstance(step, Opened):
        return step.conversation_id
    return step.reply.conversation_id


async def _drive(conversation_id: int, step: transitions.Step) -> None:
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
            await asyncio.shield(db.run(transitions.give_back, step))
        raise


async def _run(conversation_id: int, step: transitions.Step) -> transitions.Step:
    """Run one step; returns the next, claimed."""
    if isinstance(step, transitions.Refused):
        await outbox.send(conversation_id, ReplyStarted(step.reply))
        return await _claim(conversation_id)
    if isinstance(step, Opened):
        await compacting.compact(step)
        # After making room for a reply, that reply gets no second compaction: if it still
        # does not fit, it is refused with both sizes.
        return await _claim(conversation_id, compact=not step.before_reply)
    following = await reply.turn(step)
    _hand_on(step.conversation.owner_id)
    return following


def _hand_on(owner_id: int) -> None:
    """One of the owner's replies ended here: their conversations that waited here for a place
    try again (those waiting in other processes are kicked by their sweep)."""
    for conversation_id in places.waiting_for(owner_id):
        if not liveness.driving(conversation_id):
            kick(conversation_id)


async def _claim(conversation_id: int, *, compact: bool = True) -> transitions.Step:
    claim = await hold(db.run(claiming.claim_next, conversation_id, compact=compact))
    return await follow(claim, conversation_id)


# --- this process's background work --------------------------------------------------------------


def ensure_started() -> None:
    """Heartbeats and the sweep run once per process (per event loop), from the first use on:
    a server started after a crash recovers what the dead process left at once. A test that
    runs the queue's recovery itself switches them off on the runtime."""
    if not runtime.current().background:
        return
    here = runtime.current().loop()
    if here.background is None or here.background.done():
        here.background = asyncio.get_running_loop().create_task(_background())
    if here.embedding is None or here.embedding.done():
        here.embedding = asyncio.get_running_loop().create_task(_embedding())


async def _background() -> None:
    while True:
        try:
            await liveness.beat()
            await sweep()
            await check_layer()
            await active_users.check_sockets()
            await liveness.forget_idle()
        except Exception:
            log.exception("heartbeat or sweep failed; trying again")
        await asyncio.sleep(settings.TURN_HEARTBEAT_SECONDS)


# Every this many rounds, one looks at every message, not only those above the floor: on
# PostgreSQL ids are handed out before commit, so a long transaction (an import) can commit rows
# below a floor a round has passed. A minute at the default heartbeat.
FULL_ROUND_EVERY = 12


async def _embedding() -> None:
    """Settled messages get their vectors here, after they committed and off every turn's path
    (a turn runs no query for them); its own task, so a long backlog (an import) never delays
    a heartbeat. What a dying process left is still pending at the next round, anywhere. A
    round looks above the last round's floor (at 100,000 messages on SQLite, a look at them
    all takes 70 ms of the one database thread)."""
    floor, rounds, down = 0, 0, False
    while True:
        try:
            _, floor = await vectors.embed_round(0 if rounds % FULL_ROUND_EVERY == 0 else floor)
        except LLMError as exc:
            # The embeddings server is down: said once, not a traceback a round. It is asked
            # again only after EMBEDDINGS_RETRY_SECONDS (providers/embeddings.py).
            if not down:
                log.warning("the embeddings server does not answer, search is by words: %s", exc)
            down = True
        except Exception:
            log.exception("embedding settled messages failed; trying again")
        else:
            if down:
                log.warning("the embeddings server is back: search by meaning again")
            down = False
        rounds += 1
        await asyncio.sleep(settings.TURN_HEARTBEAT_SECONDS)


async def check_layer() -> None:
    """With the channel layer (Redis) down, no frame reaches a tab, and a tab that does nothing
    would never know: each socket open here is told and closed, so its page shows the banner,
    reconnects once the layer is back and fetches what it missed. A Redis that restarted
    between two beats lost the sockets' subscriptions, and the frames sent before they
    subscribed again: each socket here is told to fetch again, a beat later, when they have."""
    here = runtime.current().loop()
    identity = await channel_layer.identity()
    if identity is None:
        here.layer_identity, here.resync_due = None, False
        await asyncio.gather(
            *(socket.layer_down() for socket in list(here.sockets)), return_exceptions=True
        )
        return
    if here.resync_due:
        here.resync_due = False
        await asyncio.gather(
            *(socket.missed() for socket in list(here.sockets)), return_exceptions=True
        )
    elif here.layer_identity not in (None, identity):
        here.resync_due = True
    here.layer_identity = identity


async def sweep() -> None:
    """Close what dead processes left running, start queues nobody is running, forget the
    limits' windows and the sessions that have ended, and delete the files nobody will send or
    see again."""
    cutoff = stale_before()
    replies = await db.run(recovery.close_stale, cutoff)
    await show_recovered(replies)
    conversations = {r.conversation_id for r in replies}
    conversations |= set(await db.run(boundaries.close_stale, cutoff))
    conversations |= set(await db.run(recovery.orphaned_queues, settings.TURN_HEARTBEAT_SECONDS))
    for conversation_id in sorted(conversations):
        if not liveness.driving(conversation_id):
            kick(conversation_id)
    await db.run(limits.sweep)
    await db.run(attachments.sweep)
    await db.run(forget_expired_sessions)


def forget_expired_sessions() -> None:
    """Delete the session rows that have expired, as Django's `clearsessions` does (the session
    engine's own, web/session_store.py): the table stays the size of the sessions signed in now,
    with no cron job to remember (indexed by expiry, and cheap when nothing has expired)."""
    import_module(settings.SESSION_ENGINE).SessionStore.clear_expired()


async def shutdown() -> None:
    await liveness.shutdown()
    await mcp.shutdown()  # after the turns: none of them is calling a tool any more


def hold_one_cpu() -> None:
    """A server process holds to one CPU of its own (core/cpu.py) when ONE_CPU_PER_PROCESS is
    on (`make serve`)."""
    here = runtime.current()
    if settings.ONE_CPU_PER_PROCESS and here.cpu is None:
        here.cpu = cpu.take_one(cpu.lock_dir())
        if here.cpu is not None:
            log.info("this server process holds to CPU %d", here.cpu[0])


async def lifespan(scope, receive, send) -> None:
    """ASGI lifespan (uvicorn): at start-up hold to a CPU and start the background work; on a
    clean shutdown (SIGTERM) close this process's replies and compactions at once instead of
    leaving them to go stale."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            hold_one_cpu()
            ensure_started()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
