"""Import conversations: this app's own export.json, or ChatGPT's conversations.json.

`import_upload` reads the file as a stream (chat/imports/reader.py), checks each message or
conversation as it comes (chat/imports/schema.py) and writes them in batches, each its own short
transaction, so no import holds SQLite's one write lock for more than a moment. On SQLite the
import then waits as long as the batch took, so other people's writes get their turn.

Nothing is seen before the end. An import is a row (`Import`, one per user: a second import
while one runs is refused by the database itself); the conversations it writes are staged,
hidden as deleted ones are and marked with it, and only its last transaction shows them. A
file found bad halfway has its staged rows deleted (in batches too) before the refusal is
answered. An import whose process died leaves its row's heartbeat to go stale: the next import,
by anyone, clears it.

This app's export comes back whole, one or a list (chat/imports/bundle.py): versions, the branch
on screen, pins, compactions, dates and the window's figures (docs/imports.md). ChatGPT's keep
their dates, every version and the branch on screen (chat/imports/chatgpt.py).

Real exports are untidy (opening with the assistant, two messages of one role in a row): the
transcript keeps them as they were, and the window (compaction/assembly.py) makes every request
valid. One longer than the budget compacts before its first request, as any conversation does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from chat import attachments, limits
from chat.conversations import title_from
from chat.imports import bundle, chatgpt, files, history, reader, rows, schema
from chat.imports.history import Said
from chat.imports.schema import Calls, Imported
from chat.models import Attachment, Conversation, Import, Message, Pin
from chat.search_index import searchable_text
from chat.transcript import current_branch
from compaction import boundaries
from compaction.models import Compaction
from core.errors import ActionError
from providers import registry
from providers.blocks import of_type, text_of
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
    pieces = reader.read(
        upload,
        settings.IMPORT_MAX_BYTES,
        {"messages": schema.KEEP_MESSAGE, "compactions": history.KEEP_COMPACTION},
        bundle.KEEP_CONVERSATION,
        bundle.KEEP_TOP,
    )
    for piece in bundle.unpacked(pieces):
        if piece is bundle.READ:  # one of a bundle's conversations has been read whole
            staging.read += 1
            if own is not None:
                own.order.check_named(own.seq)
            own, calls = None, Calls()
        elif isinstance(piece, reader.Fields):
            _top(piece, own, staging)
        elif piece.where == "messages":
            own = own or staging.conversation(Imported())
            n = own.seq + 1  # numbered in its own conversation (a bundle holds many)
            staging.message(own, schema.message(piece.value, n, calls), n)
        elif piece.where == "compactions":
            own = own or staging.conversation(Imported())
            staging.boundary(own, piece.value)
        else:
            staging.read += 1
            staging.whole(*chatgpt.chatgpt(piece.value, staging.read))
    if not staging.messages:
        raise ActionError("That file holds no messages to import.")
    if own is not None:
        own.order.check_named(own.seq)
    staging.flush()
    return staging


def _top(fields: reader.Fields, own: Staged | None, staging: Staging) -> None:
    """The top level, once read whole: this app's export (its title, system prompt, dates and
    the end of the branch on screen apply to the conversation its messages made), one ChatGPT
    conversation, or neither."""
    values = fields.values
    if "messages" in values:
        for key in ("messages", "compactions"):
            if key in values and values[key] is not reader.STREAMED:
                kind = reader.describe(values[key])
                raise ActionError(f'"{key}" is {kind}; it must be a list of {key}.')
        title, system_prompt = schema.top(values)
        if own is not None:
            own.row.title = title or own.row.title
            own.row.system_prompt = (
                own.row.system_prompt if system_prompt is None else system_prompt
            )
            own.leaf = history.branch_end(values.get("branch_end"), own.seq)
            own.created = history.moment(values.get("created_at"), "the file's created_at")
            own.updated = history.moment(values.get("updated_at"), "the file's updated_at")
            staging.late.append(own)
    elif own is not None:
        raise ActionError('That file lists compactions but no "messages".')
    elif "mapping" in values:
        staging.whole(*chatgpt.chatgpt(values, 1))
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
    seq of its last message, the words its title is made from if the file gives none, its
    dates, the end of its branch on screen, and its boundaries so far."""

    row: Conversation
    seq: int = 0
    first_words: str = ""
    created: datetime | None = None  # the file's (an export's are read at its end)
    updated: datetime | None = None
    first_at: datetime | None = None  # the earliest and latest dates of its messages
    last_at: datetime | None = None
    leaf: int | None = None  # the export's branch_end
    order: history.Order = field(default_factory=history.Order)
    # A compaction's id in the file -> its row's (None: read, not restored, or not yet written).
    boundaries: dict[int, int | None] = field(default_factory=dict)

    def dates(self) -> tuple[datetime, datetime]:
        """(created, updated): the file's, else its messages' first and last, else now."""
        created = self.created or self.first_at or timezone.now()
        return created, max(self.updated or self.last_at or created, created)


@dataclass
class Staging:
    """The import's rows not yet written, written a batch at a time."""

    run: Import
    user: object
    read: int = 0  # ChatGPT conversations read (numbered in reasons)
    count: int = 0  # conversations made
    messages: int = 0
    compactions: int = 0  # compactions read (numbered in reasons)
    first: int | None = None  # the first conversation's id
    late: list[Staged] = field(default_factory=list)  # title, prompt, dates set at the end
    new: list[Staged] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    pins: list[tuple[Conversation, int]] = field(default_factory=list)
    attached: list[tuple[Conversation, int, list[int]]] = field(default_factory=list)
    boundaries: list[tuple[Staged, history.Boundary]] = field(default_factory=list)
    chars: int = 0
    free_until: float = 0.0  # see _give_way
    now: datetime = field(default_factory=timezone.now)  # the date of what the file leaves undated

    def conversation(self, item: Imported) -> Staged:
        if self.count >= settings.IMPORT_MAX_CONVERSATIONS:
            raise ActionError(
                f"That file holds more than {settings.IMPORT_MAX_CONVERSATIONS:,} "
                "conversations; at most that many are imported at once."
            )
        row = Conversation(
            owner=self.user,
            title=imported_title(item.title or UNTITLED),  # else its first words, at the end
            # The model this deployment answers with, not the one the file names.
            model=registry.default_model(),
            system_prompt=settings.DEFAULT_SYSTEM_PROMPT
            if item.system_prompt is None
            else item.system_prompt,
            deleted_at=timezone.now(),
            importing=self.run,
        )
        staged = Staged(row)
        self.new.append(staged)
        self.count += 1
        return staged

    def whole(self, item: Imported, messages: Iterator[Said]) -> None:
        """A ChatGPT conversation, its messages staged as they come: staged if it has any, its
        title (else its first words), dates (else its messages') and the end of its branch on
        screen set at the end, when the walk has given them."""
        staged = None
        for said in messages:
            if staged is None:
                staged = self.conversation(item)
                staged.created, staged.updated = item.created_at, item.updated_at
                self.late.append(staged)
            self.message(staged, said)
        if staged is not None:
            staged.leaf = item.leaf

    def message(self, staged: Staged, said: Said, n: int = 0) -> None:
        """Stage message `n` of the file (numbered in reasons) as the next of `staged`."""
        uploads = []
        if files.waiting(said.blocks):
            said.blocks, uploads = self._files(staged, said.blocks, n)
        if said.role == "user" and not staged.first_words:
            staged.first_words = _words(said.blocks)
        text = searchable_text(said.blocks, attachments.words(uploads))
        staged.seq += 1
        self.messages += 1
        seq, at = staged.seq, said.created_at
        if at is not None:
            staged.first_at = min(staged.first_at or at, at)
            staged.last_at = max(staged.last_at or at, at)
        at = at or self.now
        parent = None if said.parent in (None, seq - 1) else said.parent
        boundary = self._boundary(staged, said, n)  # may write the batch so far first
        # The columns each message has of its own (MESSAGE_COLUMNS); the rest are the model's.
        self.rows.append(
            (
                *(staged.row, seq, parent, said.role, said.blocks, said.status),
                *(estimate_content(said.blocks), text, at, said.updated_at or at),
                *(said.window_tokens, said.window_head_tokens, boundary),
            )
        )
        if said.pinned:
            self.pins.append((staged.row, seq))
        self.chars += len(text) + 64
        if len(self.rows) >= BATCH_MESSAGES or self.chars >= BATCH_CHARS:
            self.flush()

    def _files(
        self, staged: Staged, blocks: list[dict], n: int
    ) -> tuple[list[dict], list[Attachment]]:
        """The message's files stored as uploads of its conversation (written first, if it is
        not yet), each checked, then stored in its own short transaction; attached to the
        message when it is written. The blocks naming them, and the uploads."""
        if staged.row.pk is None:
            self.flush()

        def keep(name: str, data: bytes) -> Attachment:
            return attachments.imported(self.user, staged.row, name, data, self._written)

        blocks, made = files.stored(blocks, f"message {n}", keep)
        self.attached.append((staged.row, staged.seq + 1, [a.pk for a in made]))
        return blocks, made

    def _boundary(self, staged: Staged, said: Said, n: int) -> int | None:
        """The row id of the boundary a message's window was sent under (its `window_boundary`
        names it by the file's id): compactions are written before the first message naming
        one, so its id is known."""
        if said.window_boundary is None:
            return None
        if self.boundaries:
            self.flush()
        if said.window_boundary not in staged.boundaries:
            raise ActionError(
                f"Message {n}'s window_boundary is {said.window_boundary}: the file lists no "
                "compaction with that id before it."
            )
        return staged.boundaries[said.window_boundary]

    def boundary(self, staged: Staged, raw) -> None:
        """Stage the next compaction of an export, if it is one the import restores."""
        self.compactions += 1
        boundary = history.compaction(raw, self.compactions)
        staged.order.check(boundary, self.compactions)
        if boundary.file_id is not None:
            staged.boundaries[boundary.file_id] = None
        if boundary.restored:
            self.boundaries.append((staged, boundary))
            self.chars += len(boundary.fields["summary"]) + 256
            if len(self.boundaries) >= BATCH_MESSAGES or self.chars >= BATCH_CHARS:
                self.flush()

    def flush(self) -> None:
        """Write the batch: its new conversations, its compactions, then its messages and
        their pins, each in a short transaction that also proves the import is still this
        process's (a stale one cleared by another import stops here). The messages' values are
        made ready before their transaction begins, so it holds the write lock only while the
        database inserts."""
        if self.new:
            self._written(lambda: rows.dated(Conversation, [(s.row, *s.dates()) for s in self.new]))
            self.first = self.first or self.new[0].row.pk
        if self.boundaries:
            made = [
                (Compaction(conversation=s.row, imported=True, **rows.undated(b.fields)), b)
                for s, b in self.boundaries
            ]
            self._written(
                lambda: rows.dated(
                    Compaction, [(row, *rows.when(b.fields, self.now)) for row, b in made]
                )
            )
            for (staged, boundary), (row, _) in zip(self.boundaries, made, strict=True):
                if boundary.file_id is not None:
                    staged.boundaries[boundary.file_id] = row.pk
        if self.rows:
            sql, values = rows.insert(Message, rows.MESSAGE_COLUMNS, self.rows)
            pins, attached = self.pins, self.attached

            def write() -> None:
                connection.cursor().executemany(sql, values)
                if pins:
                    rows.pin(pins)
                if attached:
                    rows.attach(attached)

            self._written(write)
        self.new, self.rows, self.pins, self.boundaries, self.chars = [], [], [], [], 0
        self.attached = []

    def _written(self, write):
        _give_way(self.free_until)
        started, now = time.monotonic(), timezone.now()
        with transaction.atomic():
            alive = Import.objects.filter(pk=self.run.pk, heartbeat_at=self.run.heartbeat_at)
            if not alive.update(heartbeat_at=now):
                raise ActionError(CLEARED)
            written = write()
        self.run.heartbeat_at = now
        self.free_until = _freed(started)
        return written


UNTITLED = "Imported conversation"
IMPORTED = "Imported: "


def imported_title(title: str) -> str:
    """The title of an imported conversation says it is one (the one place deciding how), so a
    copy is told from its original in the list: first, so a title cut short on screen keeps it.
    A copy imported again is not marked twice."""
    if title == UNTITLED or title.startswith(IMPORTED):
        return title
    return (IMPORTED + title)[: settings.MAX_TITLE_CHARS]


def _words(content: list[dict]) -> str:
    """The start of a message's text, enough for a title (`title_from` splits what it is given
    into words: a whole message of megabytes would be millions of them)."""
    return " ".join(text_of(b)[:1000] for b in of_type(content, "text"))[:1000]


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
            created, updated = staged.dates()
            # None: the branch on screen ends at the newest message, as a send leaves it.
            row.leaf_seq = None if staged.leaf == staged.seq else staged.leaf
            Conversation.objects.filter(pk=row.pk).update(
                title=imported_title(row.title),
                system_prompt=row.system_prompt,
                leaf_seq=row.leaf_seq,
                created_at=created,
                updated_at=updated,
            )
            if staged.boundaries:  # else nothing was folded (a ChatGPT conversation)
                _unpin_folded(row)
        Conversation.objects.filter(importing=run).update(deleted_at=None, importing=None)
        Import.objects.filter(pk=run.pk).delete()


def _unpin_folded(conversation: Conversation) -> None:
    """A pin on a version the latest boundary folded away off the branch would ride in every
    window, out of reach: a compaction unpins those (chat/compactions.unpin_abandoned) and the
    app never leaves one, but a file may. Pins are few; the branch is read only if one is
    before the boundary."""
    latest = boundaries.latest(conversation.pk, "first_kept_seq")
    if latest is None:
        return
    pins = Pin.objects.filter(
        conversation_id=conversation.pk, message__seq__lt=latest.first_kept_seq
    ).values_list("pk", "message__seq")
    if pins:
        branch = current_branch(conversation)
        Pin.objects.filter(pk__in=[pk for pk, seq in pins if seq not in branch]).delete()


def discard(run: Import) -> None:
    """Delete what an import staged, a batch at a time, then the import itself. Once the pins
    and files the file made are gone, staged messages are nobody's (no row refers to one; the
    compactions name them by seq), so a batch is one DELETE over a range of seq, on the
    (conversation, seq) index."""
    table = connection.ops.quote_name(Message._meta.db_table)
    batch = BATCH_MESSAGES * 4
    for pk in Conversation.objects.filter(importing=run).values_list("pk", flat=True):
        with transaction.atomic():
            Pin.objects.filter(conversation_id=pk).delete()
            # Its files first, through the ORM: each stored file goes once this commits.
            Attachment.objects.filter(conversation_id=pk).delete()
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
