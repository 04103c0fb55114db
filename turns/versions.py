"""Versions: a reply asked again (regenerate, retry) or a message edited and sent again, and
switching the branch on screen between them.

Versions are made only after the latest boundary, one at a time, with nothing running or
waiting: the branch before the boundary is fixed. A new version is claimed at once, as a send is
(turns/transitions.py); the earlier ones stay as they are, off the branch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.db import transaction

from chat import attachments
from chat.branches import remembered_end
from chat.compactions import Opened
from chat.models import SETTLED, Conversation, Message
from chat.snapshot import Row, Snapshot, read_snapshot
from chat.window_loading import state_of
from core.clean import number
from core.errors import ActionError
from providers.blocks import file_of
from turns import sql
from turns.recovery import recover
from turns.transitions import (
    Claim,
    Turn,
    check_fits_alone,
    check_replies_at_once,
    decide,
    follow_newest,
    locked_for,
    new_versions,
    pair,
    queued_reply,
)


@dataclass(frozen=True)
class NewVersion:
    claim: Claim
    conversation: Conversation
    after: int  # the message the new version follows: tabs show the branch down to it


def new_version(user, conversation_id, seq, text: str | None = None) -> NewVersion:
    """A new version of message `seq`, on the branch on screen after the latest boundary: with
    `text`, the user's message edited (it and a reply to it are added after its parent);
    without, a reply asked again (regenerate, or retry after an error), added after the message
    it answers."""
    with transaction.atomic():
        conversation, seen, target = _version_target(user, conversation_id, seq)
        last = seen.last_seq
        if text is not None:
            if target.role != Message.Role.USER:
                raise ActionError("Only your own messages can be edited.")
            # The edit box edits the text only: the files go with the new version too (the same
            # uploads, named by the same blocks), in their order.
            kept = [b for b in target.entry.content if file_of(b) is not None]
            content = [{"type": "text", "text": text}, *kept]
            check_fits_alone(conversation, content)
            uploads = attachments.named_in(user, kept)  # search finds the version by them too
            message, reply = pair(
                conversation, last + 1, content, parent=target.parent, uploads=uploads
            )
            inserted = [message]
        else:
            if target.role != Message.Role.ASSISTANT:
                raise ActionError("Only a reply can be asked again; edit your message instead.")
            message, reply = None, queued_reply(conversation, last + 1, parent=target.parent)
            inserted = []
        ends = _left(conversation, seen, target.seq)
        Conversation.objects.filter(pk=conversation.pk).update(branch_ends=ends)
        if conversation.leaf_seq is not None:
            follow_newest(conversation)
        state = state_of(conversation, seen, before_seq=last + 1, leaf=target.parent)
        if message:
            state = state.extended([message.to_entry()])
        if not inserted:
            sql.insert(reply)  # queued first: decide() moves it on, or leaves it queued
        step = decide(conversation, seen, reply, state, compact=True, insert=inserted)
        if isinstance(step, Turn):
            step = replace(step, versions=new_versions(seen, message or reply))
        claim = Claim(step, message, queued=isinstance(step, Opened))
        return NewVersion(claim, conversation, target.parent)


def switch_version(user, conversation_id, seq, to) -> Conversation:
    """Show version `to` of message `seq` (and the newest branch below it)."""
    to = number(to)
    if to is None:
        raise ActionError("Say which version to show.")
    with transaction.atomic():
        conversation, seen, target = _version_target(user, conversation_id, seq)
        chosen = seen.row(to)
        if (
            chosen is None
            or chosen.seq < seen.first_kept  # compacted: read-only
            or chosen.parent != target.parent
            or chosen.role != target.role
            or chosen.status == Message.Status.CANCELLED
        ):
            raise ActionError(f"Message {to} is not a version of message {target.seq}.")
        ends = _left(conversation, seen, target.seq)
        end = remembered_end(seen.parents, ends, chosen.seq)
        conversation.leaf_seq = None if end == seen.last_seq else end
        Conversation.objects.filter(pk=conversation.pk).update(
            leaf_seq=conversation.leaf_seq, branch_ends=ends
        )
    return conversation


def _left(conversation: Conversation, seen: Snapshot, seq: int) -> dict[str, int]:
    """The conversation's remembered branch ends, with where version `seq`'s branch ends now
    (it is being left); ends of versions folded away by a compaction are dropped."""
    ends = {k: v for k, v in conversation.branch_ends.items() if int(k) >= seen.first_kept}
    ends[str(seq)] = conversation.leaf_seq or seen.last_seq
    return ends


def _version_target(user, conversation_id, seq) -> tuple[Conversation, Snapshot, Row]:
    """Lock the conversation and find message `seq` on its branch, where versions may be made:
    after the latest boundary, with nothing running or waiting."""
    seq = number(seq)
    if seq is None:
        raise ActionError("Say which message.")
    conversation = locked_for(user, conversation_id, sql.lock_mine)
    seen = read_snapshot(conversation.pk)
    recover(conversation, seen)
    if seen.busy or seen.next_queued_id:
        raise ActionError(
            "Wait for the reply in progress to end (or stop it), then try again: versions are "
            "made one at a time."
        )
    if seen.has_draft:
        # The draft summarises the branch on screen: approved after a fork, it would fold away
        # a branch the user had left.
        raise ActionError(
            "A draft summary is waiting for your review: approve or discard it first, then "
            "make a new version or switch."
        )
    check_replies_at_once(conversation, "Try again")
    target = seen.row(seq)
    if target is None or seq not in seen.branch(conversation.leaf_seq or seen.last_seq):
        if 1 <= seq < seen.first_kept:
            raise ActionError(
                f"Message {seq} is compacted: messages before the latest boundary are read-only."
            )
        raise ActionError(f"Message {seq} is not on the branch on screen.")
    if target.status not in SETTLED:
        raise ActionError(f"Message {seq} cannot be changed now.")
    return conversation, seen, target
