"""Claiming a conversation's next queued reply when nothing of its own runs any more: after a
compaction, a reply refused before its request, or a kick (the sweep, a place handed on).

One transaction: the owner's lock (PostgreSQL), the conversation's row lock, the state, then the
oldest queued reply claimed, if nothing else runs and its owner's account is active and has a
place under REPLIES_AT_ONCE (turns/places.py). The closing reply claims its own successor in
`transitions.close_turn`, under the same rules.
"""

from __future__ import annotations

from django.db import transaction

from chat.snapshot import read_snapshot
from turns import places, sql
from turns.recovery import recover
from turns.transitions import Claim, claim_oldest


def claim_next(conversation_id: int, *, compact: bool = True) -> Claim:
    """Claim the conversation's oldest queued reply, if nothing else runs and its owner has a
    place. `compact=False` after a compaction made room for this very reply: if it still does
    not fit, it is refused."""
    with transaction.atomic():
        places.hold_owner_of(conversation_id)
        conversation = sql.lock(conversation_id)
        if conversation is None:
            return Claim(None)
        # The state alone first: after most replies nothing is queued, and the window's rows
        # are only read when a reply is about to use them.
        seen = read_snapshot(conversation.pk, with_rows=False)
        recovered = recover(conversation, seen)
        if seen.busy or not seen.next_queued_id or not places.owner_active(conversation.owner_id):
            return Claim(None, recovered=recovered)
        if running := places.full(conversation.owner_id, conversation.pk):
            waiting = (conversation.owner_id, running)
            return Claim(None, recovered=recovered, waiting=waiting)
        seen = read_snapshot(conversation.pk)
        return Claim(claim_oldest(conversation, seen, compact=compact), recovered=recovered)
