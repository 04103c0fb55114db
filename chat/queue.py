"""The turn's durable states, kept on the reply row, and every transition between them.

    queued -> streaming -> complete | interrupted | error
    queued -> cancelled (taken back by the user before it was sent)

A message sent while a reply streams (or a compaction runs) is stored at once with a `queued`
reply; the conversation's replies then run one at a time, oldest first, in whatever process is
free to claim the next one. Every claim takes the conversation's row lock and decides on what is
committed, so two processes never run two replies (or a reply and a compaction) of one
conversation at once; the database's one-streaming-reply constraint backs that up.

A streaming reply carries a heartbeat, touched by the process running it. One whose heartbeat is
older than TURN_STALE_SECONDS belongs to a process that died: it is closed as interrupted with
the text saved so far, by whichever process looks first (its periodic sweep, or the next claim
or Stop in that conversation). No lock outlives its process.

Plain synchronous functions, one transaction each: async callers go through `chat.db.run`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import BooleanField, DateTimeField, Exists, JSONField, OuterRef, Q
from django.utils import timezone

from compaction import run as compaction
from compaction.loading import Panel, WindowState, budget_for, load_figures, state_of
from compaction.models import Compaction
from compaction.policy import must_compact_before_send
from compaction.snapshot import SETTLED, Snapshot, as_datetime, read_snapshot, version_rows
from compaction.tokens import estimate_content, estimate_text
from search.text import searchable_text

from . import clean
from .branches import Versions, newest_end, on_branch, parent_of, versions
from .errors import ActionError
from .models import USAGE_COLUMNS, Conversation, Message

DEFAULT_TITLE = Conversation._meta.get_field("title").default
TITLE_CHARS = 60
STOPPED_BY_SERVER = "The server stopped before this reply finished."


@dataclass(frozen=True)
class Turn:
    """A reply claimed to stream now, with the window it answers."""

    conversation: Conversation
    reply: Message
    state: WindowState
    # A draft waits for review: auto-compaction must not knock again after this reply.
    has_draft: bool
    # The user's message, when it was sent just now and this reply starts at once: shown with
    # the reply's bubble, in one frame.
    message: Message | None = None
    # A new version's place among the others, by seq: "‹ 3 / 3 ›" on its bubble.
    versions: dict[int, Versions] = dataclass_field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """A reply closed before any request: the window could not fit the budget."""

    reply: Message


Step = Turn | compaction.Opened | Refused | None


@dataclass(frozen=True)
class Claim:
    step: Step  # what to run now in this process, if anything
    message: Message | None = None  # the user's message, when one was sent
    queued: bool = False  # it waits for the reply (or compaction) in progress
    recovered: tuple[Message, ...] = ()  # stale replies closed on the way


def clean_user_text(text) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ActionError("Type a message first: an empty message cannot be sent.")
    return clean.clean(text, clean.MESSAGE, required=True)


def append(user, conversation_id: int, text: str) -> Claim:
    """Store the user's message and the reply row that will answer it, in one transaction, and
    claim that reply if nothing else runs. Three queries: lock the conversation, read what the
    decision needs with the window's rows, insert the two messages."""
    content = [{"type": "text", "text": text}]
    with transaction.atomic():
        conversation = _lock(conversation_id, user, count_streaming_elsewhere=True)
        if conversation is None:
            raise ActionError("That conversation does not exist.")
        _check_fits_alone(conversation, content)
        seen = read_snapshot(conversation.pk)
        if not seen.busy and conversation.streaming_elsewhere >= settings.REPLIES_AT_ONCE:
            # Into a busy conversation a message only queues; here it would start one more.
            raise ActionError(
                f"You have {conversation.streaming_elsewhere} replies streaming in other "
                f"conversations; the limit is {settings.REPLIES_AT_ONCE} at once. Send this "
                "when one of them has finished."
            )
        recovered = _recover(conversation, seen)
        # On the branch on screen: after its end, whichever version the user is looking at.
        leaf = conversation.leaf_seq or seen.last_seq
        message, reply = _pair(conversation, seen.last_seq + 1, content, parent=leaf)
        if conversation.leaf_seq is not None:
            _follow_newest(conversation)
        if seen.busy:
            _insert(message, reply)
            return Claim(None, message, queued=True, recovered=recovered)
        if seen.next_queued_id:
            # Older messages wait with nothing running (their process died between two
            # steps): this one goes behind them and the oldest starts now.
            _insert(message, reply)
            step = _claim_oldest(conversation, seen, compact=True)
            return Claim(step, message, queued=True, recovered=recovered)
        state = state_of(conversation, seen, before_seq=message.seq, leaf=leaf)
        state = state.extended([message.to_entry()])
        step = _decide(conversation, seen, reply, state, compact=True, insert=[message])
        return Claim(step, message, queued=isinstance(step, compaction.Opened), recovered=recovered)


def _pair(
    conversation: Conversation, seq: int, content: list[dict], *, parent: int
) -> tuple[Message, Message]:
    """A user's message at `seq` after `parent`, and the queued reply that will answer it."""
    message = Message(
        conversation=conversation,
        seq=seq,
        parent_seq=parent,
        role=Message.Role.USER,
        content=content,
        tokens=estimate_content(content),
    )
    return message, _queued_reply(conversation, seq + 1, parent=seq)


def _queued_reply(conversation: Conversation, seq: int, *, parent: int) -> Message:
    return Message(
        conversation=conversation,
        seq=seq,
        parent_seq=parent,
        role=Message.Role.ASSISTANT,
        content=[],
        status=Message.Status.QUEUED,
        model=conversation.model,
    )


def _follow_newest(conversation: Conversation) -> None:
    """A new message ends the branch on screen: from now on its end is the newest message."""
    Conversation.objects.filter(pk=conversation.pk).update(leaf_seq=None)
    conversation.leaf_seq = None


# --- versions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewVersion:
    claim: Claim
    conversation: Conversation
    after: int  # the message the new version follows: tabs show the branch down to it


def new_version(user, conversation_id, seq, text: str | None = None) -> NewVersion:
    """A new version of message `seq`, on the branch on screen after the latest boundary: with
    `text`, the user's message edited (it and a reply to it are added after its parent); without,
    a reply asked again (regenerate, or retry after an error), added after the message it
    answers. The earlier versions stay as they are, off the branch; the new one is claimed at
    once, as a send is."""
    with transaction.atomic():
        conversation, seen, target = _version_target(user, conversation_id, seq)
        last = seen.last_seq
        if text is not None:
            if target.role != Message.Role.USER:
                raise ActionError("Only your own messages can be edited.")
            content = [{"type": "text", "text": text}]
            _check_fits_alone(conversation, content)
            message, reply = _pair(conversation, last + 1, content, parent=target.parent)
            inserted = [message]
        else:
            if target.role != Message.Role.ASSISTANT:
                raise ActionError("Only a reply can be asked again; edit your message instead.")
            message, reply = None, _queued_reply(conversation, last + 1, parent=target.parent)
            inserted = []
        if conversation.leaf_seq is not None:
            _follow_newest(conversation)
        state = state_of(conversation, seen, before_seq=last + 1, leaf=target.parent)
        if message:
            state = state.extended([message.to_entry()])
        if not inserted:
            _insert(reply)  # queued first: _decide moves it on, or leaves it to a compaction
        step = _decide(conversation, seen, reply, state, compact=True, insert=inserted)
        if isinstance(step, Turn):
            step = replace(step, versions=_new_versions(seen, message or reply))
        claim = Claim(step, message, queued=isinstance(step, compaction.Opened))
        return NewVersion(claim, conversation, target.parent)


def _new_versions(seen: Snapshot, made: Message) -> dict[int, Versions]:
    """Where a new version stands among the others (shown on its bubble as it starts): the
    rows with its parent and role."""
    made_row = (made.seq, made.parent, made.role)  # not read yet, or read still queued
    return versions([*version_rows(seen.rows, seen.boundary), made_row], [made_row])


def switch_version(user, conversation_id, seq, to) -> Conversation:
    """Show version `to` of message `seq` (and the newest branch below it)."""
    try:
        to = int(to)
    except (TypeError, ValueError):
        raise ActionError("Say which version to show.") from None
    with transaction.atomic():
        conversation, seen, target = _version_target(user, conversation_id, seq)
        first_kept = seen.boundary.first_kept_seq if seen.boundary else 1
        parents = {r.seq: r.parent for r in seen.rows if r.seq >= first_kept}
        chosen = next((r for r in seen.rows if r.seq == to), None)
        if (
            chosen is None
            or chosen.seq < first_kept  # compacted: read-only
            or chosen.parent != target.parent
            or chosen.role != target.role
            or chosen.status == Message.Status.CANCELLED
        ):
            raise ActionError(f"Message {to} is not a version of message {target.seq}.")
        end = newest_end(parents, to)
        conversation.leaf_seq = None if end == seen.last_seq else end
        Conversation.objects.filter(pk=conversation.pk).update(leaf_seq=conversation.leaf_seq)
    return conversation


def _version_target(user, conversation_id, seq):
    """Lock the conversation and find message `seq` on its branch, where versions may be made:
    after the latest boundary, with nothing running or waiting."""
    try:
        seq = int(seq)
    except (TypeError, ValueError):
        raise ActionError("Say which message.") from None
    conversation = _lock(conversation_id, user, touch=False, count_streaming_elsewhere=True)
    if conversation is None:
        raise ActionError("That conversation does not exist.")
    seen = read_snapshot(conversation.pk)
    _recover(conversation, seen)
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
    if conversation.streaming_elsewhere >= settings.REPLIES_AT_ONCE:
        raise ActionError(
            f"You have {conversation.streaming_elsewhere} replies streaming in other "
            f"conversations; the limit is {settings.REPLIES_AT_ONCE} at once. Try again when "
            "one of them has finished."
        )
    first_kept = seen.boundary.first_kept_seq if seen.boundary else 1
    parents = {r.seq: r.parent for r in seen.rows if r.seq >= first_kept}
    branch = on_branch(parents, conversation.leaf_seq or seen.last_seq, first_kept)
    target = next((r for r in seen.rows if r.seq == seq and r.seq in branch), None)
    if target is None:
        if 1 <= seq < first_kept:
            raise ActionError(
                f"Message {seq} is compacted: messages before the latest boundary are read-only."
            )
        raise ActionError(f"Message {seq} is not on the branch on screen.")
    if target.status not in SETTLED:
        raise ActionError(f"Message {seq} cannot be changed now.")
    return conversation, seen, target


def claim_next(conversation_id: int, *, compact: bool = True) -> Claim:
    """Claim the conversation's oldest queued reply, if nothing else runs. `compact=False` after
    a compaction made room for this very reply: if it still does not fit, it is refused."""
    with transaction.atomic():
        conversation = _lock(conversation_id, touch=False)
        if conversation is None:
            return Claim(None)
        # The state alone first: after most replies nothing is queued, and the window's rows
        # are only read when a reply is about to use them.
        seen = read_snapshot(conversation.pk, with_rows=False)
        recovered = _recover(conversation, seen)
        if seen.busy or not seen.next_queued_id:
            return Claim(None, recovered=recovered)
        seen = read_snapshot(conversation.pk)
        return Claim(_claim_oldest(conversation, seen, compact=compact), recovered=recovered)


def _claim_oldest(conversation: Conversation, seen: Snapshot, *, compact: bool) -> Step:
    # What it answers: the message sent with it, or, for a reply asked again, an older one.
    parent = next((r.parent for r in seen.rows if r.seq == seen.next_queued_seq), None)
    reply = Message(
        pk=seen.next_queued_id,
        conversation=conversation,
        seq=seen.next_queued_seq,
        parent_seq=parent,
        role=Message.Role.ASSISTANT,
        content=[],
        status=Message.Status.QUEUED,
        model=conversation.model,
    )
    state = state_of(conversation, seen, before_seq=reply.seq)
    step = _decide(conversation, seen, reply, state, compact=compact)
    if isinstance(step, Turn):  # a reply asked again that waited: "‹ 2 / 2 ›" as it starts
        step = replace(step, versions=_new_versions(seen, reply))
    return step


# The statements every turn runs are written out: the ORM spent far longer building them than
# the database spent running them. Values still go through the fields' own adaptation.
_CONVERSATION_FIELDS = Conversation._meta.concrete_fields
_CONVERSATION_ATTNAMES = [f.attname for f in _CONVERSATION_FIELDS]
_CONVERSATION_COLUMNS = ", ".join(f.column for f in _CONVERSATION_FIELDS)


def _from_db_value(field):
    """How `_lock` turns a column of the conversation's row into the field's value (chosen once
    per field, not per row: this runs twice every turn)."""
    if isinstance(field, DateTimeField):
        return as_datetime
    if isinstance(field, BooleanField):
        return bool
    if isinstance(field, JSONField):
        return lambda value: field.from_db_value(value, None, connection)
    return None


_CONVERSATION_CONVERTERS = [_from_db_value(f) for f in _CONVERSATION_FIELDS]
# From the streaming replies (a partial index holds only those, whatever the history) to their
# conversations: how many of the user's others are streaming now.
_STREAMING_ELSEWHERE = (
    "(SELECT COUNT(*) FROM chat_message m JOIN chat_conversation o ON o.id = m.conversation_id "
    "WHERE m.status = 'streaming' AND o.owner_id = %s AND o.id <> %s)"
)
_MESSAGE_FIELDS = [f for f in Message._meta.concrete_fields if not f.primary_key]
_MESSAGE_COLUMNS = ", ".join(f.column for f in _MESSAGE_FIELDS)
_MESSAGE_ROW = "(" + ", ".join(["%s"] * len(_MESSAGE_FIELDS)) + ")"
# What closing a reply writes: its final state, and only while it is still streaming.
_FINISHED_FIELDS = [
    Message._meta.get_field(name)
    for name in ("content", "search_text", "status", *USAGE_COLUMNS, "error", "tokens", "model")
    + ("tool_runs", "window_boundary_id", "window_head_tokens", "window_tokens", "updated_at")
]
_FINISH = (
    "UPDATE chat_message SET "  # noqa: S608 - the field names are ours
    + ", ".join(f"{f.column} = %s" for f in _FINISHED_FIELDS)
    + " WHERE id = %s AND status = %s"
)


def _lock(
    conversation_id,
    user=None,
    *,
    touch: bool = True,
    title: str | None = None,
    spent: dict | None = None,
    count_streaming_elsewhere: bool = False,
) -> Conversation | None:
    """Lock the conversation's row for this transaction and return it as it is now. Every
    change to a conversation's queue (a send, a claim, a cancel, opening a compaction) takes
    this lock first, so they happen one at a time and each statement after it sees the others'
    committed work. One statement: with `touch` it also moves the conversation up its owner's
    list, given `title` names it if it has no name yet, and given `spent` (a reply's usage)
    adds it to the running totals. `count_streaming_elsewhere` (with `user`) also counts the
    user's other conversations with a reply streaming, as `.streaming_elsewhere`.

    Only `touch` changes `updated_at`: it orders the owner's list, so each change also moves
    the row within the list's indexes, and a reply's close need not move again a conversation
    its send moved (nor reorder the list under the user's pointer when a reply ends)."""
    if user is not None and not user.is_authenticated:
        return None
    try:
        where, params = ["id = %s", "deleted_at IS NULL"], [int(conversation_id)]
    except (TypeError, ValueError):
        return None
    if user is not None:
        where.append("owner_id = %s")
        params.append(user.pk)
    columns = _CONVERSATION_COLUMNS
    extra: list = []
    if count_streaming_elsewhere and user is not None:
        columns += f", {_STREAMING_ELSEWHERE}"
        extra = [user.pk, int(conversation_id)]
    if touch or title is not None or spent:
        changes, values = (["updated_at = %s"], [_now()]) if touch else ([], [])
        if title is not None:
            changes.append("title = CASE WHEN title = %s THEN %s ELSE title END")
            values += [DEFAULT_TITLE, title]
        for column, key in USAGE_COLUMNS.items() if spent else ():
            changes.append(f"{column} = COALESCE({column}, 0) + %s")
            values.append(int(spent.get(key) or 0))
        sql = (
            f"UPDATE chat_conversation SET {', '.join(changes)} "  # noqa: S608 - no input
            f"WHERE {' AND '.join(where)} RETURNING {columns}"
        )
        params = values + params + extra
    else:
        sql = f"SELECT {columns} FROM chat_conversation WHERE {' AND '.join(where)}"  # noqa: S608
        params = extra + params
        if connection.features.has_select_for_update:
            sql += " FOR UPDATE"  # SQLite needs none: IMMEDIATE transactions go one by one
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    if found is None:
        return None
    columns_found = found[: len(_CONVERSATION_FIELDS)]  # then the count, when asked for
    values = [
        value if convert is None else convert(value)
        for convert, value in zip(_CONVERSATION_CONVERTERS, columns_found, strict=True)
    ]
    # As the ORM builds a row it read: positional, and known to be in the database.
    conversation = Conversation.from_db(connection.alias, _CONVERSATION_ATTNAMES, values)
    if extra:
        conversation.streaming_elsewhere = found[-1]
    return conversation


def _this_thread_connection():
    """The database connection itself, for the per-field preparation below: `connection` is a
    proxy that looks the thread's connection up on every attribute, and each field's
    preparation reads several (dozens of lookups per row)."""
    return connections[DEFAULT_DB_ALIAS]


def _insert(*rows: Message) -> None:
    now = timezone.now()
    for row in rows:
        row.created_at = row.updated_at = now
        row.search_text = searchable_text(row.content)
    db = _this_thread_connection()
    params = [f.get_db_prep_save(getattr(r, f.attname), db) for r in rows for f in _MESSAGE_FIELDS]
    try:
        with db.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO chat_message ({_MESSAGE_COLUMNS}) "  # noqa: S608 - no input
                f"VALUES {', '.join([_MESSAGE_ROW] * len(rows))} RETURNING id",
                params,
            )
            for row, (pk,) in zip(rows, cursor.fetchall(), strict=True):
                row.pk = pk
    except IntegrityError:
        raise ActionError("Another message was sent at the same moment; try again.") from None


def _now():
    return connection.ops.adapt_datetimefield_value(timezone.now())


def _check_fits_alone(conversation: Conversation, content: list[dict]) -> None:
    """Refuse, before storing it, a message that could not fit even in a window of its own."""
    budget = budget_for(conversation.model)
    needed = estimate_text(conversation.system_prompt) + estimate_content(content) + budget.reserve
    if needed > budget.total:
        raise ActionError(
            f"That message is about {estimate_content(content):,} tokens: with the system prompt "
            f"and room for the reply the request would be {needed:,} tokens, over this model's "
            f"budget of {budget.total:,}. Shorten it or split it."
        )


def _decide(
    conversation: Conversation,
    seen: Snapshot,
    reply: Message,
    state: WindowState,
    *,
    compact: bool,
    insert: list[Message] = (),
) -> Step:
    """Start the reply, make room for it first, or refuse it: no request over the budget."""
    if not must_compact_before_send(state.tokens, 0, state.budget):
        reply.status = Message.Status.STREAMING
        reply.heartbeat_at = timezone.now()
        reply.window_boundary_id = seen.boundary.pk if seen.boundary else None
        reply.window_head_tokens = state.head_tokens
        if not _store(reply, insert):
            return None
        return Turn(
            conversation,
            reply,
            state,
            has_draft=seen.has_draft,
            message=insert[0] if insert else None,
        )
    if compact:
        try:
            opened = compaction.open_locked(
                conversation, state, trigger=Compaction.Trigger.AUTO, before_reply=True
            )
        except compaction.CompactionRefused:
            pass  # nothing to cut: the window cannot get smaller, refuse below
        else:
            if insert:
                _insert(*insert, reply)
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
        _insert(*insert, reply)
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
    elif isinstance(step, compaction.Opened):
        compaction.mark_failed(step.row.pk, "Cancelled before it started.")


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


@dataclass(frozen=True)
class Closed:
    reply: Message  # as saved
    named: Conversation  # the conversation after the turn (its first reply names it)
    figures: Panel  # the meter and chart, with the reply counted
    claim: Claim  # what runs next: the compaction the reply made due, or the next queued reply


def close_turn(
    turn: Turn, reply: Message, after: WindowState, *, then: bool = True, compact: bool = False
) -> Closed:
    """Save the streamed reply with its final status (only a row still streaming is written),
    then, in the same transaction, start what comes next (unless `then` is false: the process
    is stopping): the auto-compaction `compact` asks for, else the oldest queued reply."""
    with transaction.atomic():
        written = _finish_row(reply)
        if not written:
            reply = Message.objects.get(pk=reply.pk)  # closed elsewhere (stale): keep that
        title = None
        if reply.seq == 2 and turn.state.entries:
            title = title_from(turn.state.entries[-1].text)
        # The send touched the conversation already: the lock, the first reply's title, and
        # what the reply cost, in one statement.
        spent = reply.usage if written else None
        conversation = _lock(turn.conversation.pk, touch=False, title=title, spent=spent)
        if conversation is None:  # deleted meanwhile: its queue was cancelled, nothing follows
            figures = load_figures(turn.conversation, after)
            return Closed(reply, turn.conversation, figures, Claim(None))
        seen = read_snapshot(conversation.pk, with_rows=compact)
        recovered = _recover(conversation, seen)
        step = None
        if not then:
            seen.next_queued_id = None  # leave the queue to the processes that go on
        if compact and not seen.busy and not seen.has_draft:
            try:
                step = compaction.open_locked(
                    conversation,
                    state_of(conversation, seen),
                    trigger=Compaction.Trigger.AUTO,
                )
            except compaction.CompactionRefused:
                pass  # nothing to cut: the queue goes on
        if step is None and not seen.busy and seen.next_queued_id:
            if not compact:
                seen = read_snapshot(conversation.pk)
            step = _claim_oldest(conversation, seen, compact=True)
        # A reply written here with its usage is the conversation's latest billed turn.
        figures = load_figures(conversation, after, last_usage=spent)
    return Closed(reply, conversation, figures, Claim(step, recovered=recovered))


def save_final(reply: Message) -> Message:
    """The reply's final state alone, in a transaction of its own: when closing it together with
    the next step failed, its text is still kept."""
    with transaction.atomic():
        if not _finish_row(reply):
            return Message.objects.get(pk=reply.pk)
        if reply.usage:
            Conversation.objects.add_spent(reply.conversation_id, reply.usage)
    return reply


def _finish_row(reply: Message) -> bool:
    reply.updated_at = timezone.now()
    reply.search_text = searchable_text(reply.content)
    db = _this_thread_connection()
    values = [f.get_db_prep_save(getattr(reply, f.attname), db) for f in _FINISHED_FIELDS]
    with db.cursor() as cursor:
        cursor.execute(_FINISH, [*values, reply.pk, Message.Status.STREAMING])
        return cursor.rowcount == 1


def finished(
    turn: Turn,
    *,
    state: WindowState,
    content: list[dict],
    status: str,
    usage=None,
    window_tokens=None,
    error="",
    model="",
    tool_runs=None,
):
    """The reply as it will be saved: its final content, status and usage, counted once, and
    the window it ended in (a compaction mid-turn changes it), which its usage describes."""
    content = [b for b in content if b.get("type") != "text" or b.get("text")]
    return replace_message(
        turn.reply,
        window_boundary_id=state.boundary.pk if state.boundary else None,
        window_head_tokens=state.head_tokens,
        content=content,
        status=status,
        usage=usage,
        window_tokens=window_tokens,
        error=error,
        tokens=estimate_content(content),
        model=model or turn.reply.model,
        tool_runs=tool_runs or {},
    )


def replace_message(message: Message, **fields) -> Message:
    """A copy of a row with some fields changed (rows here are values)."""
    changed = copy.copy(message)
    for name, value in fields.items():
        setattr(changed, name, value)
    return changed


def title_from(text: str) -> str:
    first_line = " ".join(text.split())
    if len(first_line) <= TITLE_CHARS:
        return first_line
    return first_line[:TITLE_CHARS].rsplit(" ", 1)[0] + "…"


# --- the user's hands on the queue ---------------------------------------------------------------


def cancel(user, conversation_id, seq) -> Message:
    """Take back a queued message: its reply and itself become `cancelled`, never sent. For a
    reply asked again (a version), only the reply is taken back: its message was sent long ago.
    A version taken back before anything followed it gives the screen back to the one before."""
    try:
        seq, conversation_id = int(seq), int(conversation_id)
    except (TypeError, ValueError):
        raise ActionError("Say which queued message to cancel.") from None
    with transaction.atomic():
        # The conversation's lock, as a claim takes it: a message is taken back or sent, never
        # both.
        conversation = Conversation.objects.owned_by(user).locked(conversation_id)
        if conversation is None:
            raise ActionError("That message does not exist.")
        message = Message.objects.filter(
            conversation_id=conversation_id, seq=seq, role=Message.Role.USER
        ).first()
        if message is None:
            raise ActionError("That message does not exist.")
        reply = (
            Message.objects.filter(
                Q(parent_seq=seq) | Q(parent_seq__isnull=True, seq=seq + 1),
                conversation_id=conversation_id,
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
        sent_with_it = reply.seq == seq + 1
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
    first_kept = seen.boundary.first_kept_seq if seen.boundary else 1
    parent = next((r.parent for r in seen.rows if r.seq == taken_back.seq), None)
    earlier = [
        r.seq
        for r in seen.rows
        if r.seq >= first_kept
        and r.parent == parent
        and r.role == taken_back.role
        and r.status in SETTLED
    ]
    if earlier:
        parents = {r.seq: r.parent for r in seen.rows if r.seq >= first_kept}
        Conversation.objects.filter(pk=conversation.pk).update(
            leaf_seq=newest_end(parents, max(earlier))
        )


def delete(user, conversation_id: int) -> None:
    """Hide a conversation (its rows stay) and take back what was queued in it."""
    with transaction.atomic():
        conversation = Conversation.objects.owned_by(user).locked(conversation_id)
        if conversation is None:
            raise ActionError("That conversation does not exist.")
        now = timezone.now()
        conversation.deleted_at = now
        conversation.save(update_fields=["deleted_at", "updated_at"])
        queued = Message.objects.filter(conversation=conversation, status=Message.Status.QUEUED)
        # A message is taken back with its queued reply (stored together, one after the other);
        # a reply asked again leaves the message it answers, sent long before, as it is.
        taken = []
        for seq, parent in queued.values_list("seq", "parent_seq"):
            taken += [seq, seq - 1] if parent_of(seq, parent) == seq - 1 else [seq]
        if taken:
            Message.objects.filter(conversation=conversation, seq__in=taken).update(
                status=Message.Status.CANCELLED, updated_at=now
            )


def reply_seq(value) -> int | None:
    """The reply a Stop names, if it names one readably."""
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def request_stop(user, conversation_id, seq: int | None = None) -> tuple[Message, ...]:
    """Mark the streaming reply stopped (the process running it sees this even if the nudge over
    the channel layer is lost). A reply whose process died is closed here and now; returns it."""
    try:
        conversation_id = int(conversation_id)
    except (TypeError, ValueError):
        raise ActionError("That conversation does not exist.") from None
    if not Conversation.objects.owned_by(user).filter(pk=conversation_id).exists():
        raise ActionError("That conversation does not exist.")
    recovered = close_stale(compaction.stale_before(), conversation_id)
    streaming = Message.objects.filter(
        conversation_id=conversation_id, status=Message.Status.STREAMING
    )
    if seq is not None:
        streaming = streaming.filter(seq=seq)
    streaming.update(stop_requested=True)
    return recovered


# --- recovery ----------------------------------------------------------------------------------


def close_stale(cutoff: datetime, conversation_id: int | None = None) -> tuple[Message, ...]:
    """Close replies left streaming by a process that died: interrupted, with their saved text."""
    rows = Message.objects.filter(status=Message.Status.STREAMING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    )
    if conversation_id is not None:
        rows = rows.filter(conversation_id=conversation_id)
    closed = []
    for row in rows:
        row.content = [b for b in row.content if b.get("type") != "text" or b.get("text")]
        row.status, row.error = Message.Status.INTERRUPTED, STOPPED_BY_SERVER
        row.tokens = estimate_content(row.content) if row.content else 0
        if Message.objects.filter(pk=row.pk, status=Message.Status.STREAMING).update(
            status=row.status,
            error=row.error,
            content=row.content,
            search_text=searchable_text(row.content),
            tokens=row.tokens,
            updated_at=timezone.now(),
        ):
            closed.append(row)
    return tuple(closed)


def _recover(conversation: Conversation, seen: Snapshot) -> tuple[Message, ...]:
    """Inside a claim: close this conversation's stale reply or compaction, if any."""
    cutoff = compaction.stale_before()
    recovered: tuple[Message, ...] = ()
    if seen.streaming_id and _is_stale(seen.streaming_heartbeat, cutoff):
        recovered = close_stale(cutoff, conversation.pk)
        seen.streaming_id = None
    if seen.running_id and _is_stale(seen.running_heartbeat, cutoff):
        compaction.close_stale(cutoff, conversation.pk)
        seen.running_id = None
    return recovered


def _is_stale(heartbeat: datetime | None, cutoff: datetime) -> bool:
    return heartbeat is None or heartbeat < cutoff


def orphaned_queues(grace_seconds: float) -> list[int]:
    """Conversations with a queued reply and nothing running: the process that would have
    started it died between two steps. Only queues older than `grace_seconds`, so a queue whose
    own process is about to claim it is left to that process."""
    streaming = Message.objects.filter(
        conversation=OuterRef("conversation"), status=Message.Status.STREAMING
    )
    running = Compaction.objects.filter(
        conversation=OuterRef("conversation"), status=Compaction.Status.RUNNING
    )
    return list(
        Message.objects.filter(
            status=Message.Status.QUEUED,
            created_at__lt=timezone.now() - timedelta(seconds=grace_seconds),
            conversation__deleted_at__isnull=True,
        )
        .exclude(Exists(streaming))
        .exclude(Exists(running))
        .order_by()  # not by seq, the model's ordering: DISTINCT would keep one per message
        .values_list("conversation_id", flat=True)
        .distinct()
    )
