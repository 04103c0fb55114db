"""A queued reply's place under REPLIES_AT_ONCE: it starts only when its conversation is free,
its owner's account is active and its owner has fewer replies streaming than the limit.

A send into a free conversation is checked as it is stored (turns/transitions.append: refused
when the user is at the limit). A message queued behind a reply or a compaction is checked when
its turn comes, by every claim (`claim_next`, the closing reply's `close_turn`): at the limit
it stays queued, and the person sees why (`waiting_text`). The count and the claim it allows
are one step: on PostgreSQL under the user's advisory lock (turns/sql.py), which every path
takes before the conversation's row lock (a claim that already holds the row lock only tries
it, and leaves the claim to `claim_next` if it is taken); on SQLite write transactions run one
at a time.

A deactivated owner's queued replies stay queued (nothing of theirs is lost, and nothing is asked
of the model for an account that is shut): a reply streaming when the account was shut ends as
it would, and hands nothing on; the sweep leaves their queues alone until the account is active
again (turns/recovery.orphaned_queues), then starts them as any queue with nothing running.

When a reply ends, its place is handed on: the closing reply kicks its owner's conversations
that waited in this process (remembered on the runtime), and every heartbeat's sweep starts
queues with nothing running, in any process (turns/engine.sweep).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from chat.models import Conversation, Message
from core import runtime
from core.clean import number
from turns import sql


def hold_owner_of(conversation_id) -> None:
    """The advisory lock of the conversation's owner (PostgreSQL), taken before its row lock;
    the owner is read first, unlocked: an owner never changes."""
    if connection.vendor != "postgresql":
        return
    owner = Conversation.objects.filter(pk=number(conversation_id)).values_list("owner_id")
    for (owner_id,) in owner:
        sql.hold_users_replies(owner_id)


def try_hold(owner_id: int) -> bool:
    """The user's advisory lock if it is free now: for a claim already holding a conversation's
    row lock, which must not wait for it (a send holds it and waits for that row)."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s::bigint)", [sql.users_lock(owner_id)])
        (held,) = cursor.fetchone()
    return bool(held)


def owner_active(owner_id: int) -> bool:
    """Whether the owner's account is active now: read in the claim's transaction, whatever
    shut it (the admin, a query, a script), so no claim starts a reply for a shut account."""
    return get_user_model().objects.filter(pk=owner_id, is_active=True).exists()


def running_elsewhere(owner_id: int, conversation_id: int) -> int:
    """How many of the user's replies stream in their other conversations (one query on the
    streaming replies' partial index)."""
    return (
        Message.objects.filter(status=Message.Status.STREAMING, conversation__owner_id=owner_id)
        .exclude(conversation_id=conversation_id)
        .count()
    )


def full(owner_id: int, conversation_id: int) -> int:
    """0 if a reply of this conversation may start now; else how many stream elsewhere."""
    running = running_elsewhere(owner_id, conversation_id)
    return running if running >= settings.REPLIES_AT_ONCE else 0


def claim_if_free[T](
    conversation: Conversation, claim: Callable[[], T]
) -> tuple[T | None, tuple[int, int] | None, bool]:
    """For a claim holding the conversation's row lock (a closing reply): `claim()` if its owner
    has a place. Returns the step; (owner, how many stream elsewhere) if it waits; and whether
    the user's lock was taken (then `claiming.claim_next` decides, in a transaction of its
    own)."""
    owner = conversation.owner_id
    if not try_hold(owner):
        return None, None, True
    if not owner_active(owner):
        return None, None, False
    if running := full(owner, conversation.pk):
        return None, (owner, running), False
    return claim(), None, False


def waiting_text(running: int) -> str:
    return (
        f"Waiting: {running} of your replies are streaming in other conversations (the limit is "
        f"{settings.REPLIES_AT_ONCE} at once). Your message starts when one of them ends."
    )


# --- handing a place on, in this process ---------------------------------------------------------


def remember(owner_id: int, conversation_id: int) -> None:
    """This conversation's queued reply waits for a place of its owner's."""
    runtime.current().loop().waiting.setdefault(owner_id, set()).add(conversation_id)


def forget(conversation_id: int) -> bool:
    """It waits no more (its reply starts); whether it waited here."""
    waited = False
    everyone = runtime.current().loop().waiting
    for owner_id, waiting in list(everyone.items()):
        if conversation_id in waiting:
            waited = True
            waiting.discard(conversation_id)
        if not waiting:
            del everyone[owner_id]
    return waited


def waiting_for(owner_id: int) -> list[int]:
    """The owner's conversations that waited for a place here, oldest first."""
    return sorted(runtime.current().loop().waiting.pop(owner_id, ()))
