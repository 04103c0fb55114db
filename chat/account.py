"""Deleting a person's account and everything in it: their conversations with every message,
version, pin, compaction and review, their files and the stored bytes of each, the search index's
rows and the vectors of their messages, their preferences, their imports; then the user.

The rows a conversation holds go conversation by conversation, its messages in ranges of seq,
each step a short transaction (as an import's staged rows are discarded, chat/imports/): an
account of a million messages neither loads them into memory (Django's cascade reads every row
it deletes) nor holds SQLite's one write lock for long. What refers to a message goes first (its
pin, vector and files: each stored file goes once its row's deletion commits,
chat/attachments.forget); then nothing refers to the messages, and a range is one DELETE. SQLite's
full-text rows go with them (chat/search_index.py's trigger); PostgreSQL's index is on the rows.
The user goes last, in Django's cascade, which by then finds almost nothing left.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Max

from chat.models import Attachment, Conversation, Message, MessageVector, Pin
from compaction.models import Compaction

BATCH = 2_000


def delete_account(user) -> None:
    """Delete `user` and everything of theirs (see above). Their sessions are the caller's
    (web/sessions.py): the web room ends them."""
    table = connection.ops.quote_name(Message._meta.db_table)
    # Every conversation, deleted and staged ones too: all of them are the person's.
    for pk in Conversation.objects.filter(owner=user).values_list("pk", flat=True):
        with transaction.atomic():
            Pin.objects.filter(conversation_id=pk).delete()
            MessageVector.objects.filter(message__conversation_id=pk).delete()
            Attachment.objects.filter(conversation_id=pk).delete()
            Compaction.objects.filter(conversation_id=pk).delete()
        top = Message.objects.filter(conversation_id=pk).aggregate(top=Max("seq"))["top"] or 0
        while top > 0:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {table} WHERE conversation_id = %s AND seq > %s",  # noqa: S608
                    [pk, top - BATCH],
                )
            top -= BATCH
    user.delete()
