"""The statements every turn runs, written out by hand: the ORM spent far longer building them
than the database spent running them (bench/turn_cpu.py). Values still go through the fields'
own adaptation and conversion, so they are stored and read exactly as the ORM would.

- `lock`: the conversation's row, locked for the transaction; `lock_mine`, the user's, with the
  count of their other streaming replies; `touch_mine`, the same moved up its owner's list in
  the same statement; `add_up`, locked, named and its running totals added to in one statement;
- `insert`: a user's message and the reply row that answers it, in one statement;
- `finish`: a streaming reply's final state, written only while it is still streaming.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections
from django.db.models import BooleanField, DateTimeField, JSONField
from django.utils import timezone

from chat.conversations import DEFAULT_TITLE
from chat.models import Conversation, Message
from chat.search_index import searchable_text
from core.clean import number
from core.db import as_datetime
from core.errors import ActionError
from providers.usage_columns import COLUMNS, column_values
from providers.values import Usage

_CONVERSATION_FIELDS = Conversation._meta.concrete_fields
_CONVERSATION_ATTNAMES = [f.attname for f in _CONVERSATION_FIELDS]
_CONVERSATION_COLUMNS = ", ".join(f.column for f in _CONVERSATION_FIELDS)


def _from_db_value(field):
    """How the locks turn a column of the conversation's row into the field's value (chosen once
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
    for name in ("content", "search_text", "status", *COLUMNS, "error", "tokens", "model")
    + ("tool_runs", "window_boundary_id", "window_head_tokens", "window_tokens", "updated_at")
]
_FINISH = (
    "UPDATE chat_message SET "  # noqa: S608 - the field names are ours
    + ", ".join(f"{f.column} = %s" for f in _FINISHED_FIELDS)
    + " WHERE id = %s AND status = %s"
)


# The advisory lock's key is this app's "one user's replies" in its high half, the user's id in
# its low half.
_USER_REPLIES_LOCK = 0x636877 << 32


def users_lock(user_id: int) -> int:
    """The key of the user's advisory lock."""
    return _USER_REPLIES_LOCK | user_id


def hold_users_replies(user_id: int) -> None:
    """Until this transaction ends, no other transaction counts this user's streaming replies:
    the count and the reply it lets start are one step. On PostgreSQL two sends to two of the
    user's conversations lock two different rows, so each could count the other's reply as not
    yet streaming; an advisory lock on the user orders them. Taken after the send's count
    (chat/limits.py) and before the conversation's lock on every path, so none can deadlock.
    SQLite needs none: its write transactions run one at a time (IMMEDIATE), across processes
    too."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s::bigint)", [users_lock(user_id)])


def lock(conversation_id) -> Conversation | None:
    """Lock the conversation's row for this transaction and return it as it is now. Every
    change to a conversation's queue (a send, a claim, a cancel, opening a compaction) takes
    this lock (or one of the statements below, which take it too) first, so they happen one at
    a time and each statement after it sees the others' committed work."""
    pk = number(conversation_id)
    if pk is None:
        return None
    return _select_for_update(*_where(pk))


def lock_mine(user, conversation_id) -> Conversation | None:
    """The user's conversation, locked, with the count of their other conversations with a
    reply streaming, as `.streaming_elsewhere`. Not moved up the owner's list (a new version).
    On PostgreSQL the user's advisory lock comes first (`hold_users_replies`)."""
    pk = number(conversation_id)
    if pk is None or not user.is_authenticated:
        return None
    hold_users_replies(user.pk)
    return _select_for_update(*_where(pk, user), counted=[user.pk, pk])


def touch_mine(user, conversation_id) -> Conversation | None:
    """As `lock_mine`, and in the same statement moved up its owner's list, as activity (a
    send)."""
    pk = number(conversation_id)
    if pk is None or not user.is_authenticated:
        return None
    hold_users_replies(user.pk)
    return _update(["updated_at = %s"], [_now()], *_where(pk, user), counted=[user.pk, pk])


def add_up(conversation_id, *, title: str | None, spent: Usage | None) -> Conversation | None:
    """As `lock`, and in the same statement `title` names it if it has no name yet and `spent`
    (a reply's usage) is added to its running totals (a reply's close). It is not moved up its
    owner's list: only a send moves it (`updated_at` orders the list, so each change also moves
    the row within the list's indexes, and a reply ending must not reorder the list under the
    user's pointer). With nothing to add, the plain lock."""
    pk = number(conversation_id)
    if pk is None:
        return None
    changes, values = [], []
    if title is not None:
        changes.append("title = CASE WHEN title = %s THEN %s ELSE title END")
        values += [DEFAULT_TITLE, title]
    for column, value in column_values(spent).items() if spent is not None else ():
        changes.append(f"{column} = COALESCE({column}, 0) + %s")
        values.append(value)
    if not changes:
        return _select_for_update(*_where(pk))
    return _update(changes, values, *_where(pk))


def _where(pk: int, user=None) -> tuple[str, list]:
    """The live conversation `pk` (the user's, given one), as a WHERE clause and its values."""
    if user is None:
        return "id = %s AND deleted_at IS NULL", [pk]
    return "id = %s AND deleted_at IS NULL AND owner_id = %s", [pk, user.pk]


def _select_for_update(where: str, params: list, counted: list = ()) -> Conversation | None:
    """The row, locked; `counted` (the user's id, the conversation's) also reads the count of
    the user's other streaming replies."""
    columns = _columns(counted)
    sql = f"SELECT {columns} FROM chat_conversation WHERE {where}"  # noqa: S608 - no input
    if connection.features.has_select_for_update:
        sql += " FOR UPDATE"  # SQLite needs none: IMMEDIATE transactions go one by one
    return _conversation(sql, [*counted, *params], counted)


def _update(
    changes: list[str], values: list, where: str, params: list, counted: list = ()
) -> Conversation | None:
    """The row changed (which locks it) and returned as it is now, in one statement."""
    sql = (
        f"UPDATE chat_conversation SET {', '.join(changes)} "  # noqa: S608 - no input
        f"WHERE {where} RETURNING {_columns(counted)}"
    )
    return _conversation(sql, [*values, *params, *counted], counted)


def _columns(counted) -> str:
    return f"{_CONVERSATION_COLUMNS}, {_STREAMING_ELSEWHERE}" if counted else _CONVERSATION_COLUMNS


def _conversation(sql: str, params: list, counted) -> Conversation | None:
    """Run a statement that returns the conversation's row (and, if `counted`, the count after
    it) and build the conversation from it."""
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
    if counted:
        conversation.streaming_elsewhere = found[-1]
    return conversation


def _this_thread_connection():
    """The database connection itself, for the per-field preparation below: `connection` is a
    proxy that looks the thread's connection up on every attribute, and each field's
    preparation reads several (dozens of lookups per row)."""
    return connections[DEFAULT_DB_ALIAS]


def insert(*rows: Message) -> None:
    """Insert new transcript rows in one statement; each gets its id. Two sends racing for one
    seq: the later one is refused, and says so."""
    now = timezone.now()
    for row in rows:
        row.created_at = row.updated_at = now
        # Built with its words (a message with files: theirs too, turns/transitions.pair), or
        # from its content.
        row.search_text = row.search_text or searchable_text(row.content)
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


def finish(reply: Message) -> bool:
    """Write a reply's final state; False if it was no longer streaming (closed elsewhere)."""
    reply.updated_at = timezone.now()
    reply.search_text = searchable_text(reply.content)
    db = _this_thread_connection()
    values = [f.get_db_prep_save(getattr(reply, f.attname), db) for f in _FINISHED_FIELDS]
    with db.cursor() as cursor:
        cursor.execute(_FINISH, [*values, reply.pk, Message.Status.STREAMING])
        return cursor.rowcount == 1
