"""Full-text search over messages: the text column, and the database's own index over it.

SQLite: an FTS5 table (porter stemmer) over chat_message.search_text, kept in step by triggers,
so every write path (the ORM, the turn engine's own SQL) is indexed. PostgreSQL: a GIN index on
to_tsvector('english', search_text), the expression search/messages.py queries with.
"""

from django.db import migrations, models

SQLITE = [
    "CREATE VIRTUAL TABLE chat_message_fts USING fts5("
    "search_text, content='chat_message', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER chat_message_fts_insert AFTER INSERT ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER chat_message_fts_delete AFTER DELETE ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
    # Only when the text changes: heartbeats and status updates leave the index alone.
    "CREATE TRIGGER chat_message_fts_update AFTER UPDATE OF search_text ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); "
    "INSERT INTO chat_message_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "INSERT INTO chat_message_fts(chat_message_fts) VALUES ('rebuild')",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS chat_message_fts_insert",
    "DROP TRIGGER IF EXISTS chat_message_fts_delete",
    "DROP TRIGGER IF EXISTS chat_message_fts_update",
    "DROP TABLE IF EXISTS chat_message_fts",
]
POSTGRES = [
    "CREATE INDEX chat_message_search ON chat_message "
    "USING GIN (to_tsvector('english', search_text))"
]
POSTGRES_REVERSE = ["DROP INDEX IF EXISTS chat_message_search"]


def fill_text(apps, schema_editor):
    from search.text import searchable_text

    Message = apps.get_model("chat", "Message")
    for message in Message.objects.only("id", "content").iterator():
        Message.objects.filter(pk=message.pk).update(search_text=searchable_text(message.content))


def _run(statements):
    def run(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in statements.get(vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_turn_engine")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_text",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(fill_text, migrations.RunPython.noop),
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRES}),
            _run({"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}),
        ),
    ]
