"""Import conversations: this app's own export.json, or ChatGPT's conversations.json.

`import_upload` reads the file as a stream (chat/import_reader.py), checks each message or
conversation as it comes (chat/import_schema.py) and writes them in batches, each its own short
transaction, so no import holds SQLite's one write lock for more than a moment. On SQLite the
import then waits as long as the batch took, so other people's writes get their turn.

Nothing is seen before the end. An import is a row (`Import`, one per user: a second import
while one runs is refused by the database itself); the conversations it writes are staged,
hidden as deleted ones are and marked with it, and only its last transaction shows them. A
file found bad halfway has its staged rows deleted (in batches too) before the refusal is
answered. An import whose process died leaves its row's heartbeat to go stale: the next import,
by anyone, clears it.

Real exports are untidy (a conversation opening with the assistant, two messages of one role in
a row): the transcript keeps them as they were, and the window (compaction/window.py) makes
every request valid. A conversation longer than the budget compacts before its first request,
as any conversation does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from chat import import_reader, import_schema, limits
from chat.conversations import title_from
from chat.import_schema import Calls, Imported
from chat.models import Conversation, Import, Message
from chat.search_index import searchable_text
from core.errors import ActionError
from providers import registry
from providers.tokens import estimate_content

# A batch: this many messages, or this many characters of them, whichever comes first (a
# transaction of a few milliseconds on SQLite).
BATCH_MESSAGES = 500
BATCH_CHARS = 1_000_000
# Every batch touches the import's heartbeat; the longest gap is one batch's reading (a single
# message of IMPORT_MAX_BYTES: seconds). Silent for this long, its process is taken for dead.
STALE_AFTER = timedelta(minutes=5)
CLEARED = "This import stopped for too long and was cleared: import again."
ALREADY_RUNNING = (
    "An import of yours is still running: its conversations appear when it ends. "
    "Try again after that."
)


class Busy(ActionError):
    """Another import of this user's is running."""


def check_size(size: int) -> None:
    """Before reading a file at all: a huge upload is refused without loading it."""
    if size > settings.IMPORT_MAX_BYTES:
        raise ActionError(
            f"That file is {size:,} bytes; imports are limited to "
            f"{settings.IMPORT_MAX_BYTES:,} (IMPORT_MAX_BYTES)."
        )


def import_upload(user, upload) -> tuple[int, int]:
    """Import the file (an UploadedFile, or bytes) for `user`: (the first conversation's id,
    how many were imported), or ActionError with the reason, nothing left behind. Counted
    against IMPORTS_PER_HOUR before anything is read."""
    limits.hit(limits.IMPORTS, user.pk)
    check_size(upload.size if hasattr(upload, "size") else len(upload))
    run = begin(user)
    try:
        staged = _stage(run, user, upload)
        finish(run, staged)
    except BaseException:
        discard(run)
        raise
    return staged.first, staged.count


# --- reading -------------------------------------------------------------------------------------


def _stage(run: Import, user, upload) -> Staging:
    staging = Staging(run, user)
    own: Staged | None = None  # this app's export: one conversation
    calls = Calls()
    pieces = import_reader.read(
        upload,
        settings.IMPORT_MAX_BYTES,
        import_schema.KEEP_MESSAGE,
        import_schema.KEEP_CONVERSATION,
        import_schema.KEEP_TOP,
    )
    for piece in pieces:
        if isinstance(piece, import_reader.Fields):
            _top(piece, own, staging)
        elif piece.where == "messages":
            own = own or staging.conversation(Imported())
            staging.message(own, *import_schema.message(piece.value, staging.messages + 1, calls))
        else:
            staging.read += 1
            staging.whole(import_schema.chatgpt(piece.value, staging.read))
    if not staging.messages:
        raise ActionError("That file holds no messages to import.")
    staging.flush()
    return staging


def _top(fields: import_reader.Fields, own: Staged | None, staging: Staging) -> None:
    """The top level, once read whole: this app's export (its title and system prompt apply to
    the conversation its messages made), one ChatGPT conversation, or neither."""
    values = fields.values
    if "messages" in values:
        if values["messages"] is not import_reader.STREAMED:
            kind = import_reader.describe(values["messages"])
            raise ActionError(f'"messages" is {kind}; it must be a list of messages.')
        title, system_prompt = import_schema.top(values)
        if own is not None:
            own.row.title = title or own.row.title
            own.row.system_prompt = (
                own.row.system_prompt if system_prompt is None else system_prompt
            )
            staging.late.append(own)
    elif "mapping" in values:
        staging.whole(import_schema.chatgpt(values, 1))
    elif fields.kind != "a list" or not staging.read:
        raise ActionError(
            'That file is neither this app\'s export.json (an object with "messages") nor '
            f'ChatGPT\'s conversations.json (a list of conversations with "mapping"): it is '
            f"{fields.kind}."
        )


# --- writing -------------------------------------------------------------------------------------


@dataclass
class Staged:
    """One conversation being imported: its row (saved with the first batch it is in), the
    seq of its last message, the words its title is made from if the file gives none."""

    row: Conversation
    seq: int = 0
    first_words: str = ""


@dataclass
class Staging:
    """The import's rows not yet written, written a batch at a time."""

    run: Import
    user: object
    read: int = 0  # ChatGPT conversations read (numbered in reasons)
    count: int = 0  # conversations made
    messages: int = 0
    first: int | None = None  # the first conversation's id
    late: list[Staged] = field(default_factory=list)  # title and system prompt set at the end
    new: list[Conversation] = field(default_factory=list)
    rows: list[Message] = field(default_factory=list)
    chars: int = 0
    free_until: float = 0.0  # see _give_way

    def conversation(self, item: Imported) -> Staged:
        if self.count >= settings.IMPORT_MAX_CONVERSATIONS:
            raise ActionError(
                f"That file holds more than {settings.IMPORT_MAX_CONVERSATIONS:,} "
                "conversations; at most that many are imported at once."
            )
        first_user = next((b for r, b, _ in item.messages if r == "user"), [])
        row = Conversation(
            owner=self.user,
            title=item.title or title_from(_words(first_user)) or UNTITLED,
            # The model this deployment answers with, not the one the file names.
            model=registry.default_model(),
            system_prompt=settings.DEFAULT_SYSTEM_PROMPT
            if item.system_prompt is None
            else item.system_prompt,
            deleted_at=timezone.now(),
            importing=self.run,
        )
        self.new.append(row)
        self.count += 1
        return Staged(row)

    def whole(self, item: Imported) -> None:
        """A conversation read whole (ChatGPT's): staged if it has messages."""
        if item.messages:
            staged = self.conversation(item)
            for role, blocks, status in item.messages:
                self.message(staged, role, blocks, status)

    def message(self, staged: Staged, role: str, blocks: list[dict], status: str) -> None:
        if role == "user" and not staged.first_words:
            staged.first_words = _words(blocks)
        text = searchable_text(blocks)
        staged.seq += 1
        self.messages += 1
        # The columns each message has of its own (MESSAGE_COLUMNS); the rest are the model's.
        self.rows.append((staged, staged.seq, role, blocks, status, estimate_content(blocks), text))
        self.chars += len(text) + 64
        if len(self.rows) >= BATCH_MESSAGES or self.chars >= BATCH_CHARS:
            self.flush()

    def flush(self) -> None:
        """Write the batch: its new conversations, then its messages, each in a short
        transaction that also proves the import is still this process's (a stale one cleared
        by another import stops here). The messages' values are made ready before their
        transaction begins, so it holds the write lock only while the database inserts."""
        if self.new:
            self._written(lambda: Conversation.objects.bulk_create(self.new))
            self.first = self.first or self.new[0].pk
        if self.rows:
            sql, values = _insert(Message, MESSAGE_COLUMNS, self.rows)
            self._written(lambda: connection.cursor().executemany(sql, values))
        self.new, self.rows, self.chars = [], [], 0

    def _written(self, write) -> None:
        _give_way(self.free_until)
        started, now = time.monotonic(), timezone.now()
        with transaction.atomic():
            alive = Import.objects.filter(pk=self.run.pk, heartbeat_at=self.run.heartbeat_at)
            if not alive.update(heartbeat_at=now):
                raise ActionError(CLEARED)
            write()
        self.run.heartbeat_at = now
        self.free_until = _freed(started)


MESSAGE_COLUMNS = ("conversation", "seq", "role", "content", "status", "tokens", "search_text")


def _insert(model, columns: tuple[str, ...], rows: list[tuple]) -> tuple[str, list[tuple]]:
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
            else f.get_db_prep_save(row[i].row.pk if f.is_relation else row[i], db)
            for f, i in pick
        )
        for row in rows
    ]
    return sql, values


UNTITLED = "Imported conversation"


def _words(blocks: list[dict]) -> str:
    """The start of a message's text, enough for a title (`title_from` splits what it is given
    into words: a whole message of megabytes would be millions of them)."""
    return " ".join(b["text"][:1000] for b in blocks if b["type"] == "text")[:1000]


def _freed(started: float) -> float:
    """Until when the write lock stays free after a write that began at `started` (monotonic):
    as long as the write held it, at most 0.2 s."""
    ended = time.monotonic()
    return ended + min(ended - started, 0.2)


def _give_way(free_until: float) -> None:
    """On SQLite, wait until the lock has been free as long as the last write held it (reading
    the next batch counts): a writer waiting in SQLite's busy handler polls a few milliseconds
    apart, up to 100 ms, and would find the lock taken again at once. Server databases lock
    rows, not the database: no wait."""
    wait = free_until - time.monotonic()
    if connection.vendor == "sqlite" and wait > 0:
        time.sleep(wait)


def begin(user) -> Import:
    """The user's import starts, or Busy if one is running (decided by the unique owner)."""
    clear_stale()
    try:
        with transaction.atomic():
            return Import.objects.create(owner=user, heartbeat_at=timezone.now())
    except IntegrityError:
        raise Busy(ALREADY_RUNNING) from None


def finish(run: Import, staging: Staging) -> None:
    """Show every conversation of the import at once, in one transaction, if the import is
    still this process's (one cleared as stale meanwhile is being deleted: never shown)."""
    with transaction.atomic():
        alive = Import.objects.filter(pk=run.pk, heartbeat_at=run.heartbeat_at)
        if not alive.update(heartbeat_at=timezone.now()):
            raise ActionError(CLEARED)
        for staged in staging.late:
            row = staged.row
            if row.title == UNTITLED:
                row.title = title_from(staged.first_words) or UNTITLED
            Conversation.objects.filter(pk=row.pk).update(
                title=row.title, system_prompt=row.system_prompt
            )
        Conversation.objects.filter(importing=run).update(deleted_at=None, importing=None)
        Import.objects.filter(pk=run.pk).delete()


def discard(run: Import) -> None:
    """Delete what an import staged, a batch at a time, then the import itself. Staged messages
    are nobody's yet (nothing pins, compacts or refers to them), so a batch is one DELETE over a
    range of seq, on the (conversation, seq) index."""
    table = connection.ops.quote_name(Message._meta.db_table)
    batch = BATCH_MESSAGES * 4
    for pk in Conversation.objects.filter(importing=run).values_list("pk", flat=True):
        top = Message.objects.filter(conversation_id=pk).aggregate(top=Max("seq"))["top"] or 0
        while top > 0:
            started = time.monotonic()
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {table} WHERE conversation_id = %s AND seq > %s",  # noqa: S608
                    [pk, top - batch],
                )
            top -= batch
            _give_way(_freed(started))
    with transaction.atomic():
        Conversation.objects.filter(importing=run).delete()
        Import.objects.filter(pk=run.pk).delete()


def clear_stale() -> None:
    """Clear the imports whose process died (their heartbeat is stale). Each is claimed first by
    moving its heartbeat, so two imports never clear one, and the import itself, if only slow,
    stops at its next batch."""
    cutoff = timezone.now() - STALE_AFTER
    for run in Import.objects.filter(heartbeat_at__lt=cutoff):
        claimed = Import.objects.filter(pk=run.pk, heartbeat_at=run.heartbeat_at)
        if claimed.update(heartbeat_at=timezone.now()):
            discard(run)
