"""Messages lose the index on conversation alone: the unique (conversation, seq) index starts with
it and serves the same lookups, and every insert paid for a second one.

The index is dropped by name rather than by AlterField: on PostgreSQL, AlterField drops every
single-column index on conversation_id it finds, and that includes the partial unique index
that allows one streaming reply per conversation. On SQLite it would also rebuild the table.
"""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "chat_message_conversation_id_a1207bf4"  # Django's name for it, on either database


class Migration(migrations.Migration):
    dependencies = [("chat", "0012_message_fork")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="chat.conversation",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {INDEX}",
                    f"CREATE INDEX IF NOT EXISTS {INDEX} ON chat_message (conversation_id)",
                ),
            ],
        ),
    ]
