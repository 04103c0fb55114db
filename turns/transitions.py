"""The turn's durable states, kept on the reply row, and every transition between them.

    queued -> streaming -> complete | interrupted | error
    queued -> cancelled (taken back by the user before it was sent)

A message sent while a reply streams (or a compaction runs) is stored at once with a `queued`
reply; the conversation's replies then run one at a time, oldest first, in whatever process is
free to claim the next one. Every claim takes the conversation's row lock and decides on what is
committed, so two processes never run two replies (or a reply and a compaction) of one
conversation at once; the database's one-streaming-reply constraint backs that up. A streaming
reply carries a heartbeat, touched by the process running it (turns/liveness.py); one whose
process died is closed by whoever looks first (turns/recovery.py). No lock outlives its
process.

Plain synchronous functions, one transaction each: async callers go through `core.db.run`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from chat import attachments, compactions, limits
from chat.branches import Versions, versions
from chat.compactions import Opened
from chat.conversations import title_from
from chat.figures import Panel, load_figures
from chat.models import NO_SUCH_CONVERSATION, SETTLED, Conversation, Message
from chat.search_index import searchable_text
from chat.snapshot import Snapshot, read_snapshot
from chat.window_loading import state_of
from compaction import boundaries
from compaction.models import Compaction
from compaction.window_state import WindowState, budget_for
from core.clean import number
from core.errors import ActionError
from providers.blocks import files, without_empty_text, without_thinking
from providers.tokens import estimate_content, estimate_text
from providers.values import Usage
from turns import places, sql
from turns.recovery import recover


@dataclass(frozen=True)
class Turn:
    """A reply claimed to stream now, with the window it answers."""

    conversation: Conversation
    reply: Message
    state: WindowState
    # The user's message, when it was sent just now and this reply starts at once: shown with
    # the reply's bubble, in one frame.
    message: Message | None = None
    # A new version's place among the others, by seq: "‹ 3 / 3 ›" on its bubble.
    versions: dict[int, Versions] = dataclass_field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """A reply closed before any request: the window could not fit the budget."""

    reply: Message


Step = Turn | Opened | Refused | None


@dataclass(frozen=True)
class Claim:
    step: Step  # what to run now in this process, if anything
    message: Message | None = None  # the user's message, when one was sent
    queued: bool = False  # it waits for the reply (or compaction) in progress
    recovered: tuple[Message, ...] = ()  # stale replies closed on the way
    waiting: tuple[int, int] | None = None  # waits for a place: (owner, how many stream)
    again: bool = False  # not decided here (the user's lock was taken): ask `claim_next`


def append(user, conversation_id, text: str, files: list[int] = ()) -> Claim:
    """Store the user's message (`text`, cleaned by the caller, and the uploads `files`) and the
    reply row that will answer it, in one transaction, and claim that reply if nothing else
    runs. Four queries: count it against the user's limit, lock the conversation, read what the
    decision needs with the window's rows, insert the two messages (on PostgreSQL a fifth, after
    the count: see `sql.touch_mine`); with files, one to take them and one to mark them sent."""
    with transaction.atomic():
        conversation = locked_for(user, conversation_id)
        uploads = attachments.take(user, conversation, files) if files else []
        content = [{"type": "text", "text": text}] if text else []
        content += [attachments.block(a) for a in uploads]
        check_fits_alone(conversation, content)
        claim = _append(conversation, content, uploads)
        attachments.attach(uploads, claim.message.pk)
        return claim


def _append(conversation: Conversation, content: list[dict], uploads: list) -> Claim:
    """The message (with its `uploads`) and its reply, inserted; the reply claimed now, or left
    to wait."""
    seen = read_snapshot(conversation.pk)
    if not seen.busy:  # into a busy conversation a message only queues
        check_replies_at_once(conversation, "Send this")
    recovered = recover(conversation, seen)
    # On the branch on screen: after its end, whichever version the user is looking at.
    leaf = conversation.leaf_seq or seen.last_seq
    message, reply = pair(conversation, seen.last_seq + 1, content, parent=leaf, uploads=uploads)
    if conversation.leaf_seq is not None:
        follow_newest(conversation)
    if seen.busy:
        sql.insert(message, reply)
        return Claim(None, message, queued=True, recovered=recovered)
    if seen.next_queued_id:
        # Older messages wait with nothing running (their process died between two
        # steps): this one goes behind them and the oldest starts now.
        sql.insert(message, reply)
        step = claim_oldest(conversation, seen, compact=True)
        return Claim(step, message, queued=True, recovered=recovered)
    state = state_of(conversation, seen, before_seq=message.seq, leaf=leaf)
    state = state.extended([message.to_entry()])
    step = decide(conversation, seen, reply, state, compact=True, insert=[message])
    return Claim(step, message, queued=isinstance(step, Opened), recovered=recovered)


def locked_for(user, conversation_id, lock=sql.touch_mine) -> Conversation:
    """For a new request to the model (a send, a new version): counted against the user's
    SENDS_PER_MINUTE, then the user's conversation, locked by `lock`, with the count of their
    other streaming replies (`sql.touch_mine`, a send: moved up the user's list, as activity;
    `sql.lock_mine`, a new version: left where it is). The count is in the caller's
    transaction: a send refused for any reason does not count."""
    limits.hit(limits.SENDS, user.pk)
    conversation = lock(user, conversation_id)
    if conversation is None:
        raise ActionError(NO_SUCH_CONVERSATION)
    return conversation


def check_replies_at_once(conversation: Conversation, then: str) -> None:
    """A reply starting here would be one too many of the user's streaming at once."""
    if conversation.streaming_elsewhere >= settings.REPLIES_AT_ONCE:
        raise ActionError(
            f"You have {conversation.streaming_elsewhere} replies streaming in other "
            f"conversations; the limit is {settings.REPLIES_AT_ONCE} at once. {then} when one "
            "of them has finished."
        )


def check_fits_alone(conversation: Conversation, content: list[dict]) -> None:
    """Refuse, before storing it, a message that could not fit even in a window of its own."""
    budget = budget_for(conversation.model)
    tokens = estimate_content(content)
    if not budget.fits(estimate_text(conversation.system_prompt), tokens):
        needed = estimate_text(conversation.system_prompt) + tokens + budget.reserve
        raise ActionError(
            f"That message is about {tokens:,} tokens: with the system prompt and room for the "
            f"reply the request would be {needed:,} tokens, over this model's budget of "
            f"{budget.total:,}. "
            + ("Send fewer files at once." if files(content) else "Shorten it or split it.")
        )


def pair(
    conversation: Conversation, seq: int, content: list[dict], *, parent: int, uploads=()
) -> tuple[Message, Message]:
    """A user's message at `seq` after `parent` (its files' `uploads`, whose words search finds
    it by), and the queued reply that will answer it."""
    message = Message(
        conversation=conversation,
        seq=seq,
        parent_seq=parent,
        role=Message.Role.USER,
        content=content,
        tokens=estimate_content(content),
        search_text=searchable_text(content, attachments.words(uploads)),
    )
    return message, queued_reply(conversation, seq + 1, parent=seq)


def queued_reply(conversation: Conversation, seq: int, *, parent: int) -> Message:
    return Message(
        conversation=conversation,
        seq=seq,
        parent_seq=parent,
        role=Message.Role.ASSISTANT,
        content=[],
        status=Message.Status.QUEUED,
        model=conversation.model,
    )


def follow_newest(conversation: Conversation) -> None:
    """A new message ends the branch on screen: from now on its end is the newest message."""
    Conversation.objects.filter(pk=conversation.pk).update(leaf_seq=None)
    conversation.leaf_seq = None


def claim_oldest(conversation: Conversation, seen: Snapshot, *, compact: bool = True) -> Step:
    # What it answers: the message sent with it, or, for a reply asked again, an older one.
    row = seen.row(seen.next_queued_seq)
    reply = queued_reply(conversation, seen.next_queued_seq, parent=row.parent if row else None)
    reply.pk = seen.next_queued_id
    state = state_of(conversation, seen, before_seq=reply.seq)
    step = decide(conversation, seen, reply, state, compact=compact)
    if isinstance(step, Turn):  # a reply asked again that waited: "‹ 2 / 2 ›" as it starts
        step = replace(step, versions=new_versions(seen, reply))
    return step


def new_versions(seen: Snapshot, made: Message) -> dict[int, Versions]:
    """Where a new version stands among the others (shown on its bubble as it starts): the
    rows with its parent and role."""
    made_row = (made.seq, made.parent, made.role)  # not read yet, or read still queued
    return versions([*seen.version_rows(), made_row], [made_row])


def decide(
    conversation: Conversation,
    seen: Snapshot,
    reply: Message,
    state: WindowState,
    *,
    compact: bool,
    insert: list[Message] = (),
) -> Step:
    """Start the reply, make room for it first, or refuse it: no request over the budget."""
    if state.budget.fits(state.tokens):
        reply.status = Message.Status.STREAMING
        reply.heartbeat_at = timezone.now()
        reply.window_boundary_id = seen.boundary.pk if seen.boundary else None
        reply.window_head_tokens = state.head_tokens
        if not _store(reply, insert):
            return None
        return Turn(conversation, reply, state, message=insert[0] if insert else None)
    if compact:
        try:
            opened = compactions.open_locked(
                conversation,
                state,
                seen.later_versions(),
                trigger=Compaction.Trigger.AUTO,
                before_reply=True,
            )
        except ActionError:
            pass  # nothing to cut: the window cannot get smaller, refuse below
        else:
            if insert:
                sql.insert(*insert, reply)
            return opened
    reply.status = Message.Status.ERROR
    reply.error = (
        f"Not sent: the request would be about {state.tokens + state.budget.reserve:,} tokens "
        f"(the window {state.tokens:,} plus {state.budget.reserve:,} reserved for the reply), "
        f"over this model's budget of {state.budget.total:,}, even after compacting. Shorten "
        "the message or compact with instructions to keep less."
    )
    if not _store(reply, insert):
        return None
    return Refused(reply)


def _store(reply: Message, insert: list[Message]) -> bool:
    """Write the claimed reply: inserted with the user's message, or moved on from queued."""
    if insert:
        sql.insert(*insert, reply)
        return True
    fields = ["status", "heartbeat_at", "window_boundary_id", "window_head_tokens", "error"]
    # No other reply streams: the caller holds the conversation's lock and saw none.
    return bool(
        Message.objects.filter(pk=reply.pk, status=Message.Status.QUEUED).update(
            updated_at=timezone.now(), **{f: getattr(reply, f) for f in fields}
        )
    )


def give_back(step: Step) -> None:
    """Undo a claim nobody will run (its caller was cancelled before it could start it)."""
    if isinstance(step, Turn):
        Message.objects.filter(pk=step.reply.pk, status=Message.Status.STREAMING).update(
            status=Message.Status.QUEUED, heartbeat_at=None
        )
    elif isinstance(step, Opened):
        boundaries.mark_failed(step.row.pk, "Cancelled before it started.")


# --- while it streams ----------------------------------------------------------------------------


def save_partial(reply_id: int, content: list[dict], tool_runs: dict | None = None) -> bool:
    """Keep what the turn has so far (a crash or a tab opened mid-reply does not lose it) and
    touch the heartbeat. False: the reply is no longer this process's to write (Stop was
    pressed, or another process closed it as stale)."""
    return bool(
        Message.objects.filter(
            pk=reply_id, status=Message.Status.STREAMING, stop_requested=False
        ).update(content=content, tool_runs=tool_runs or {}, heartbeat_at=timezone.now())
    )


def touch(reply_ids: list[int]) -> set[int]:
    """Heartbeat for the replies this process streams; returns those it must stop (Stop was
    pressed, or they were closed elsewhere)."""
    live = Message.objects.filter(
        pk__in=reply_ids, status=Message.Status.STREAMING, stop_requested=False
    )
    live.update(heartbeat_at=timezone.now())
    return set(reply_ids) - set(live.values_list("pk", flat=True))


# --- when it ends --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Closed:
    reply: Message  # as saved
    named: Conversation  # the conversation after the turn (its first reply names it)
    figures: Panel  # the meter and chart, with the reply counted
    claim: Claim  # what runs next: the compaction the reply made due, or the next queued reply
    first_words: str = ""  # the title this close gave it from its first message ("": none)


def close_turn(turn: Turn, reply: Message, after: WindowState, *, then: bool = True) -> Closed:
    """Save the streamed reply with its final status (only a row still streaming is written),
    then, in the same transaction, start what comes next (unless `then` is false: the process
    is stopping): the auto-compaction the reply made due, else the oldest queued reply."""
    with transaction.atomic():
        written = sql.finish(reply)
        if not written:
            reply = Message.objects.get(pk=reply.pk)  # closed elsewhere (stale): keep that
        title = None
        if reply.seq == 2 and turn.state.entries:
            first = turn.state.entries[-1]  # files alone: named by their names
            title = title_from(
                first.text or " ".join(str(f.get("name")) for f in files(first.content))
            )
        # The send touched the conversation already: the lock, the first reply's title, and
        # what the reply cost, in one statement.
        spent = reply.usage if written else None
        conversation = sql.add_up(turn.conversation.pk, title=title, spent=spent)
        if conversation is None:  # deleted meanwhile: its queue was cancelled, nothing follows
            figures = load_figures(turn.conversation, after)
            return Closed(reply, turn.conversation, figures, Claim(None))
        seen = read_snapshot(conversation.pk, with_rows=False)
        recovered = recover(conversation, seen)
        step, waiting, again = None, None, False
        if then and reply.status == Message.Status.COMPLETE and not seen.busy:
            step = _auto_compaction(conversation, seen, after)
        if step is None and then and not seen.busy and seen.next_queued_id:
            step, waiting, again = places.claim_if_free(
                conversation, lambda: claim_oldest(conversation, read_snapshot(conversation.pk))
            )
        # A reply written here with its usage is the conversation's latest billed turn.
        figures = load_figures(conversation, after, last_usage=spent)
    named = title if title == conversation.title != turn.conversation.title else ""
    claim = Claim(step, recovered=recovered, waiting=waiting, again=again)
    return Closed(reply, conversation, figures, claim, named)


def _auto_compaction(
    conversation: Conversation, seen: Snapshot, after: WindowState
) -> Opened | None:
    """The compaction a complete reply made due, if any (the caller holds the lock)."""
    if not compactions.auto_due(conversation, after, draft_waiting=seen.has_draft):
        return None
    seen = read_snapshot(conversation.pk)  # the window's rows, to cut
    try:
        return compactions.open_locked(
            conversation,
            state_of(conversation, seen),
            seen.later_versions(),
            trigger=Compaction.Trigger.AUTO,
        )
    except ActionError:
        return None  # nothing to cut: the queue goes on


def save_final(reply: Message) -> Message:
    """The reply's final state alone, in a transaction of its own: when closing it together with
    the next step failed, its text is still kept."""
    with transaction.atomic():
        if not sql.finish(reply):
            return Message.objects.get(pk=reply.pk)
        Conversation.objects.add_spent(reply.conversation_id, reply.usage)
    return reply


def finished(
    turn: Turn,
    *,
    state: WindowState,
    content: list[dict],
    status: str,
    usage: Usage | None = None,
    window_tokens: int | None = None,
    error: str = "",
    model: str = "",
    tool_runs: dict | None = None,
) -> Message:
    """The reply as it will be saved: its final content, status and usage, counted once, and
    the window it ended in (a compaction mid-turn changes it), which its usage describes."""
    content = without_empty_text(content)
    return replace_message(
        turn.reply,
        content=content,
        tokens=estimate_content(without_thinking(content)),  # what later windows carry
        status=status,
        error=error,
        model=model or turn.reply.model,
        tool_runs=tool_runs or {},
        usage=usage,
        # The window the reply's usage describes, and its size once the reply is in it.
        window_boundary_id=state.boundary.pk if state.boundary else None,
        window_head_tokens=state.head_tokens,
        window_tokens=window_tokens,
    )


def replace_message(message: Message, **fields) -> Message:
    """A copy of a row with some fields changed (rows here are values)."""
    changed = copy.copy(message)
    for name, value in fields.items():
        setattr(changed, name, value)
    return changed


# --- the user's hands on the queue ---------------------------------------------------------------


def cancel(user, conversation_id, seq) -> Message:
    """Take back a queued message: its reply and itself become `cancelled`, never sent. For a
    reply asked again (a version), only the reply is taken back: its message was sent long ago.
    A version taken back before anything followed it gives the screen back to the one before."""
    seq = number(seq)
    if seq is None:
        raise ActionError("Say which queued message to cancel.")
    with transaction.atomic():
        # The conversation's lock, as a claim takes it: a message is taken back or sent, never
        # both.
        conversation = Conversation.objects.owned(user, conversation_id, lock=True)
        message = Message.objects.filter(
            conversation=conversation, seq=seq, role=Message.Role.USER
        ).first()
        if message is None:
            raise ActionError("That message does not exist.")
        reply = (
            Message.objects.filter(
                Q(parent_seq=message.seq) | Q(parent_seq__isnull=True, seq=message.seq + 1),
                conversation=conversation,
                role=Message.Role.ASSISTANT,
                status=Message.Status.QUEUED,
            )
            .only("pk", "seq")
            .first()
        )
        if reply is None:
            raise ActionError("That message was already sent; it can no longer be taken back.")
        now = timezone.now()
        Message.objects.filter(pk=reply.pk).update(status=Message.Status.CANCELLED, updated_at=now)
        sent_with_it = reply.seq == message.seq + 1
        if sent_with_it:
            message.status = Message.Status.CANCELLED
            message.save(update_fields=["status", "updated_at"])
        _back_to_earlier_version(conversation, message if sent_with_it else reply)
    return message


def _back_to_earlier_version(conversation: Conversation, taken_back: Message) -> None:
    """If the message taken back was a version with nothing after it, show the newest version
    before it again (else its branch would end on a message that was never sent)."""
    seen = read_snapshot(conversation.pk)
    if seen.last_seq != taken_back.seq + (taken_back.role == Message.Role.USER):
        return  # something was sent after it: the branch goes on from there
    row = seen.row(taken_back.seq)
    earlier = [
        r.seq
        for r in seen.rows
        if r.seq >= seen.first_kept
        and r.parent == (row.parent if row else None)
        and r.role == taken_back.role
        and r.status in SETTLED
    ]
    if earlier:
        Conversation.objects.filter(pk=conversation.pk).update(
            leaf_seq=seen.newest_end(max(earlier))
        )
