"""The rows an import writes, in as few statements as a batch allows: messages as one INSERT of
many rows with their values made before any lock is taken, conversations and compactions with
the dates the file gives them, pins on the messages just written. Called by
chat/imports/importing.py inside its short transactions.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from chat.models import Attachment, Message, Pin


def dated(model, rows: list[tuple]) -> None:
    """Insert (row, created, updated) rows with those dates: an insert dates every row now
    (auto_now_add), so they are set by one update after it, in the same transaction."""
    made = model.objects.bulk_create([row for row, _, _ in rows])
    for row, created, updated in rows:
        row.created_at, row.updated_at = created, updated
    model.objects.bulk_update(made, ["created_at", "updated_at"])


def undated(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if k not in ("created_at", "updated_at")}


def when(fields: dict, now: datetime) -> tuple[datetime, datetime]:
    created = fields["created_at"] or now
    return created, max(fields["updated_at"] or created, created)


def pin(pins: list[tuple]) -> None:
    """Pin the messages just written, as (conversation row, seq): a batch's, a few hundred at
    most."""
    seqs: dict[int, list[int]] = {}
    for conversation, seq in pins:
        seqs.setdefault(conversation.pk, []).append(seq)
    for conversation_id, pinned in seqs.items():
        ids = Message.objects.filter(conversation_id=conversation_id, seq__in=pinned)
        Pin.objects.bulk_create(
            Pin(message_id=pk, conversation_id=conversation_id)
            for pk in ids.values_list("pk", flat=True)
        )


def attach(attached: list[tuple]) -> None:
    """Give the files stored for the messages just written to them, as (conversation row, seq,
    upload ids): no longer unsent, so never swept."""
    for conversation, seq, ids in attached:
        message = Message.objects.filter(conversation_id=conversation.pk, seq=seq)
        Attachment.objects.filter(pk__in=ids).update(message=message.values("pk")[:1])


MESSAGE_COLUMNS = (
    *("conversation", "seq", "parent_seq", "role", "content", "status", "tokens", "search_text"),
    *("created_at", "updated_at", "window_tokens", "window_head_tokens", "window_boundary_id"),
)


def insert(model, columns: tuple[str, ...], rows: list[tuple]) -> tuple[str, list[tuple]]:
    """One INSERT for many rows, and each row's values as the ORM's bulk_create would send
    them, worked out before any lock is taken: `columns` from each row (a Staged for a
    conversation), every other column as an unsaved instance of the model has it (defaults,
    auto_now), the same for the whole batch."""
    db = transaction.get_connection()
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    template = model()
    shared = {f.name: f.get_db_prep_save(f.pre_save(template, True), db) for f in fields}
    own = {name: i for i, name in enumerate(columns)}
    quote = db.ops.quote_name
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} "  # noqa: S608 - names from the model
        f"({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    pick = [(f, own.get(f.name)) for f in fields]
    values = [
        tuple(
            shared[f.name]
            if i is None
            else f.get_db_prep_save(row[i].pk if f.is_relation else row[i], db)
            for f, i in pick
        )
        for row in rows
    ]
    return sql, values
