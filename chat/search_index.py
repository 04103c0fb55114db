"""What of a message is searchable, and the database's own full-text index over it.

A message's searchable text is stored beside its content blocks (`Message.search_text`), written
whenever the content is, so the index covers text, tool calls and tool results alike without
parsing JSON in SQL. The index is created and kept here, with the messages' table; search/ reads
it.

SQLite: an FTS5 table (porter stemmer, bm25) with chat_message as its external content, kept in
step by triggers, so every write path (the ORM, the turn engine's own SQL) is indexed. SQLite
rebuilds a table to alter it, which drops its triggers: `ensure` runs after every migrate
(chat's post_migrate) and puts back what is missing, re-indexing if it had to.
PostgreSQL: a GIN index on to_tsvector('english', search_text), the expression
search/messages.py queries with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from providers.blocks import block_text, files

# How much of a message is indexed: its first this many characters. PostgreSQL refuses a
# tsvector over 1 MB ("string is too long for tsvector"): a message of 1.5 MB of distinct words
# (an import, a tool's long output) could not be stored at all. At most 100,000 characters stay
# under that limit for any text (each word costs its bytes, an entry and a position); the
# message itself is kept whole, only its later words are not found by search.
INDEXED_CHARS = 100_000

# Marks around matched words in a snippet. Private-use characters, removed from indexed text,
# so a user cannot type one; callers turn them into `<mark>` (HTML) or `**` (JSON, the model).
MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"


def searchable_text(
    content: list[dict], uploads: Mapping[int, tuple[str, str]] | None = None
) -> str:
    """The words of a message: its text, its tool calls (name and input), its tool results;
    with `uploads` (a sent message's files: id -> name and words), each file block's name and
    words after them. The first INDEXED_CHARS in all: the message's own words first, then each
    file its equal share of what they leave (one long log does not hide the file after it)."""
    parts, length = [], 0
    for block in content or []:
        part = block_text(block, everything=False)
        if part:
            parts.append(part)
            length += len(part) + 1
            if length > INDEXED_CHARS:
                break  # a long message's later blocks are not read at all
    ids = [meta.get("id") for meta in files(content or [])]
    named = [uploads[pk] for pk in ids if uploads and isinstance(pk, int) and pk in uploads]
    share = (INDEXED_CHARS - length) // len(named) if named else 0
    parts += [file_section(name, words)[:share] for name, words in named if share > 0]
    text = "\n".join(parts)[:INDEXED_CHARS]
    return text.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")


def file_section(name: str, words: str) -> str:
    """A file as its message's search text holds it: its name, on a line of its own, and again
    as words (PostgreSQL's parser reads "build-error.png" as one token, which "build error"
    would not find), then its words."""
    spaced = " ".join(re.split(r"[\W_]+", name)).strip()
    return "\n".join([name, *([spaced] if spaced and spaced != name else []), words])


# --- the index -----------------------------------------------------------------------------------

SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS chat_message_fts USING fts5("
    "search_text, content='chat_message', content_rowid='id', tokenize='porter unicode61')"
)
SQLITE_TRIGGERS = {
    "chat_message_fts_insert": "AFTER INSERT ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "chat_message_fts_delete": "AFTER DELETE ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
    # Only when the text changes: heartbeats and status updates leave the index alone.
    "chat_message_fts_update": "AFTER UPDATE OF search_text ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); "
    "INSERT INTO chat_message_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
}
POSTGRES_INDEX = (
    "CREATE INDEX IF NOT EXISTS chat_message_search ON chat_message "
    "USING GIN (to_tsvector('english', search_text))"
)


def ensure(connection) -> None:
    """Create the index if it is missing (idempotent)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(POSTGRES_INDEX)
        elif connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            present = {name for (name,) in cursor.fetchall()}
            cursor.execute(SQLITE_TABLE)
            missing = [name for name in SQLITE_TRIGGERS if name not in present]
            for name in missing:
                cursor.execute(f"CREATE TRIGGER {name} {SQLITE_TRIGGERS[name]}")
            if missing:
                # Rows written while a trigger was gone are not in the index: index them all.
                cursor.execute("INSERT INTO chat_message_fts(chat_message_fts) VALUES ('rebuild')")


def drop(connection) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("DROP INDEX IF EXISTS chat_message_search")
        elif connection.vendor == "sqlite":
            for name in SQLITE_TRIGGERS:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
            cursor.execute("DROP TABLE IF EXISTS chat_message_fts")
