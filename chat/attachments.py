"""Files given to the model: uploaded into a conversation, checked by their content
(chat/file_checks.py), kept through Django's storage API (the "attachments" storage of
settings.STORAGES), read back by their owner only, and swept: an upload never sent after
ATTACHMENT_UNSENT_SECONDS, a deleted conversation's files once its undo window has passed.

The limits are settings, and each refusal names its own: the size of one file
(ATTACHMENT_MAX_BYTES, refused before the file is read), the uploads waiting to go with the next
message (ATTACHMENTS_PER_MESSAGE) and the bytes one person keeps (ATTACHMENT_STORAGE_PER_USER).
The last two are decided under the owner's lock, in the transaction that adds the row: the sum of
the rows is the count (no counter to drift), and two uploads at once, in any processes, cannot
both take the last room. A refused upload leaves nothing behind: no row, no file.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from chat.file_checks import PDF, TEXT, Checked, Refused, check
from chat.models import Attachment, Conversation, attachment_storage
from compaction.window_state import budget_for
from core import runtime
from core.clean import number
from core.errors import ActionError
from providers.blocks import files
from providers.tokens import estimate_text

log = logging.getLogger(__name__)

NO_SUCH_FILE = "That file does not exist."
NAME_CHARS = Attachment._meta.get_field("name").max_length
# A multipart body carries its file and a few hundred bytes of framing: a body longer than the
# file limit and this is refused before it is read.
MULTIPART_FRAMING = 64 * 1024
# How long an upload waits for a place to be checked (ATTACHMENT_CHECKS_AT_ONCE) before it is
# refused as Busy: longer than checking the largest file takes, shorter than a proxy's timeout.
CHECK_WAIT_SECONDS = 20.0
# What one sweep removes at most: a backlog goes over several rounds, none of them long.
SWEEP_BATCH = 500
# A text file's opening in its message's bubble (`first_lines`).
FIRST_LINES = 3
FIRST_LINES_CHARS = 200
# The media types a stored file is served as (no other ever is: text is never served as HTML).
SERVED_AS = {
    "image/png": "image/png",
    "image/jpeg": "image/jpeg",
    "image/gif": "image/gif",
    "image/webp": "image/webp",
    PDF: PDF,
    TEXT: "text/plain; charset=utf-8",
}


class TooLarge(Refused):
    """One file over ATTACHMENT_MAX_BYTES (a 413, where other refusals are 400s)."""


class Busy(Refused):
    """No place to check the file in time (a 503: nothing is wrong with the file)."""


class AlreadySent(ActionError):
    """An upload asked to be removed after it went with a message (a 400, where an upload that
    is not the requester's is a 404)."""


def upload(user, conversation_id, upload) -> Attachment:
    """Check `upload` (a Django UploadedFile, or None when the form had none) and keep it for
    the user's conversation; Refused (TooLarge) with the reason, and nothing kept, if not."""
    conversation = Conversation.objects.owned(user, conversation_id)
    if upload is None:
        raise Refused("Choose a file to attach (the form's field is named “file”).")
    name = clean_name(upload.name or "")
    _check_size(upload.size, name)
    data = upload.read(settings.ATTACHMENT_MAX_BYTES + 1)
    _check_size(len(data), name)
    checked = _checked(data, name)
    _check_fits(conversation, name, checked.tokens)
    return _store(user, conversation, name, checked)


def _check_fits(conversation: Conversation, name: str, tokens: int) -> None:
    """Refused now, where the person is looking, a file the conversation's model could never
    be sent: alone with the system prompt and room for the reply, over its budget (a PDF page
    is estimated at 3,000 tokens: the offline demo's whole window is 2,000)."""
    budget = budget_for(conversation.model)
    if not budget.fits(estimate_text(conversation.system_prompt), tokens):
        raise Refused(
            f"“{name}” is about {tokens:,} tokens: with the system prompt and room for the reply "
            f"it would not fit this conversation's window of {budget.total:,} tokens. Send a "
            "smaller file (fewer pages), or use a model with a larger window."
        )


def _checked(data: bytes, name: str) -> Checked:
    """`check`, with at most ATTACHMENT_CHECKS_AT_ONCE files at once in this process (each may
    decode an image whole); Busy if no place came free within CHECK_WAIT_SECONDS."""
    places = runtime.current().slots("file checks", settings.ATTACHMENT_CHECKS_AT_ONCE)
    if not places.acquire(timeout=CHECK_WAIT_SECONDS):
        raise Busy(
            f"The server is checking other files right now, so “{name}” was not kept: "
            "try again in a moment."
        )
    try:
        return check(data, name)
    finally:
        places.release()


def imported(
    user, conversation: Conversation, name: str, data: bytes, written: Callable
) -> Attachment:
    """A file of an imported message (chat/imports/files.py), checked and limited as an upload
    is, bar ATTACHMENTS_PER_MESSAGE: that limit is on what waits for the next message, and
    history already sent holds as many files a message as it did. The storage limit holds.
    Checked first, then stored by `written(store)` (the import's own short transaction), so no
    lock is held while an image is decoded. Kept unsent (`message` null) until the import
    writes its message (`attach`)."""
    name = clean_name(name)
    _check_size(len(data), name)
    checked = _checked(data, name)
    return written(lambda: _store(user, conversation, name, checked, waiting=False))


def refuse_body(content_length) -> None:
    """TooLarge if a request's body (its Content-Length) cannot hold a file within the limit:
    said before the body is read, so a huge one is never written to disk."""
    length = number(content_length)
    if length is not None and length > settings.ATTACHMENT_MAX_BYTES + MULTIPART_FRAMING:
        raise TooLarge(_too_large(length, "This upload"))


def _check_size(size: int, name: str) -> None:
    if size > settings.ATTACHMENT_MAX_BYTES:
        raise TooLarge(_too_large(size, f"“{name}”"))


def _too_large(size: int, what: str) -> str:
    return (
        f"{what} is {_megabytes(size)}: the limit is {_megabytes(settings.ATTACHMENT_MAX_BYTES)} "
        "a file (ATTACHMENT_MAX_BYTES)."
    )


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:,.1f} MB"


def clean_name(name: str) -> str:
    """The uploaded name as shown: its last path part, on one line, without control or format
    characters (a right-to-left override would disguise its extension), at most NAME_CHARS
    long (the end, with its extension, kept)."""
    name = re.split(r"[/\\]", name)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C")
    name = " ".join(name.split()).strip(". ")
    if len(name) > NAME_CHARS:
        name = name[: NAME_CHARS // 2 - 1] + "…" + name[-(NAME_CHARS // 2) :]
    return name or "file"


def _store(
    user, conversation: Conversation, name: str, checked: Checked, *, waiting: bool = True
) -> Attachment:
    kept = None
    try:
        with transaction.atomic():
            # The owner's row locked (SQLite's transactions take the write lock at their start
            # anyway): their uploads are decided one at a time, the sum below is the truth.
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            if waiting:
                _check_waiting(conversation)
            _check_storage(user, len(checked.data), name)
            attachment = Attachment(
                owner=user,
                conversation=conversation,
                name=name,
                media_type=checked.media_type,
                bytes=len(checked.data),
                tokens=checked.tokens,
                width=checked.width,
                height=checked.height,
                pages=checked.pages,
                text=checked.text,
            )
            # Stored under a random name (chat.models.attachment_path), never the uploaded one.
            attachment.file.save(name, ContentFile(checked.data), save=False)
            kept = attachment.file.name
            attachment.save()
    except BaseException:
        if kept is not None:  # written, but the row was not: the file goes too
            attachment_storage().delete(kept)
        raise
    return attachment


def _check_waiting(conversation: Conversation) -> None:
    waiting = Attachment.objects.filter(conversation=conversation, message__isnull=True).count()
    allowed = settings.ATTACHMENTS_PER_MESSAGE
    if waiting >= allowed:
        raise Refused(
            f"This message already has {waiting} files: the limit is {allowed} files a message "
            "(ATTACHMENTS_PER_MESSAGE). Send it, then attach more."
        )


def _check_storage(user, size: int, name: str) -> None:
    used = Attachment.objects.filter(owner=user).aggregate(used=Sum("bytes"))["used"] or 0
    room = settings.ATTACHMENT_STORAGE_PER_USER
    if used + size > room:
        raise Refused(
            f"“{name}” ({_megabytes(size)}) does not fit: your files take {_megabytes(used)} of "
            f"the {_megabytes(room)} each person may keep (ATTACHMENT_STORAGE_PER_USER). "
            "Delete conversations with files you no longer need."
        )


def described(attachment: Attachment) -> dict:
    """What the upload endpoint answers (docs/files.md's contract)."""
    return {
        "id": attachment.pk,
        "name": attachment.name,
        "media_type": attachment.media_type,
        "bytes": attachment.bytes,
        "tokens": attachment.tokens,
    }


def owned(user, attachment_id) -> Attachment:
    """The user's file numbered `attachment_id`, in a conversation of theirs not deleted;
    ActionError if there is none (another user's, a deleted conversation's and a malformed id
    all read the same)."""
    pk = number(attachment_id)
    found = (
        Attachment.objects.filter(
            pk=pk, owner=user, conversation__in=Conversation.objects.owned_by(user)
        ).first()
        if pk is not None and user.is_authenticated
        else None
    )
    if found is None:
        raise ActionError(NO_SUCH_FILE)
    return found


def served_type(attachment: Attachment) -> str:
    """The Content-Type it is served with: its own, from a closed list; never HTML."""
    return SERVED_AS.get(attachment.media_type, "application/octet-stream")


def sweep(*, now: datetime | None = None) -> int:
    """Delete uploads never sent after ATTACHMENT_UNSENT_SECONDS, and the files of
    conversations deleted longer ago than their undo window (UNDO_DELETE_SECONDS); how many
    went. A conversation an import is still staging (hidden as deleted) keeps its own."""
    now = now or timezone.now()
    unsent = Attachment.objects.filter(
        message__isnull=True,
        created_at__lt=now - timedelta(seconds=settings.ATTACHMENT_UNSENT_SECONDS),
    )
    gone = Attachment.objects.filter(
        conversation__deleted_at__lt=now - timedelta(seconds=settings.UNDO_DELETE_SECONDS),
        conversation__importing__isnull=True,
    )
    went = 0
    # Two queries, not one with OR: each reads its own index (the unsent rows' partial one).
    for due in (unsent, gone):
        pks = list(due.values_list("pk", flat=True)[:SWEEP_BATCH])
        if pks:
            with transaction.atomic():
                # Locked and asked again, as a send's `take` locks them: an upload sent (or a
                # conversation restored) since the read above stays. Files go on commit.
                went += due.select_for_update().filter(pk__in=pks).delete()[0]
    return went


def forget(sender, instance: Attachment, **kwargs) -> None:
    """A row deleted, by the sweep or a cascade (its conversation's, its owner's): its file
    goes once the deletion commits (a rolled back one keeps it). Connected in chat/apps.py."""
    name = instance.file.name
    if name:
        transaction.on_commit(lambda: _delete_file(name))


def _delete_file(name: str) -> None:
    try:
        attachment_storage().delete(name)
    except Exception:
        # A storage down (a bucket unreachable) leaves the file: said, not raised into the
        # sweep, whose other work goes on.
        log.exception("could not delete the stored file %s", name)


# --- sending --------------------------------------------------------------------------------


def take(user, conversation: Conversation, ids: list[int]) -> list[Attachment]:
    """The uploads `ids` (this conversation's, not yet sent) in the order given, locked for the
    send that carries them (called under the conversation's lock): ActionError if any is not one
    of them, so a file is never sent twice, nor another's taken."""
    rows = {
        row.pk: row
        for row in Attachment.objects.select_for_update().filter(
            pk__in=ids, owner=user, conversation=conversation, message__isnull=True
        )
    }
    missing = [pk for pk in ids if pk not in rows]
    if missing:
        raise ActionError(
            "A file of this message is not waiting to be sent here (it was sent already, "
            "removed, or is another conversation's): attach it again."
        )
    return [rows[pk] for pk in ids]


def block(attachment: Attachment, pages: tuple[int, int] | None = None) -> dict:
    """The block a message stores for a file (providers/blocks.py describes its shape); with
    `pages`, some pages of a PDF (read_attachment's), estimated at their share of the whole."""
    meta = described(attachment)
    if attachment.width and attachment.height:
        meta |= {"width": attachment.width, "height": attachment.height}
    if attachment.pages:
        meta["pages"] = attachment.pages
    if pages is not None and attachment.pages:
        first, last = pages
        share = -(-attachment.tokens * (last - first + 1) // attachment.pages)  # rounded up
        meta |= {"range": [first, last], "tokens": share}
    if attachment.text:  # a text file's or a PDF's words: the brief quotes their opening
        meta["lines"] = first_lines(attachment.text)
    kind = "image" if attachment.media_type.startswith("image/") else "document"
    return {"type": kind, "attachment": meta}


def named_in(user, content: list[dict]) -> list[Attachment]:
    """The user's uploads that the file blocks of `content` name (a message's, copied into a
    new version of it), in their order; one query."""
    ids = [meta.get("id") for meta in files(content)]
    rows = Attachment.objects.filter(owner=user, pk__in=[i for i in ids if isinstance(i, int)])
    found = {row.pk: row for row in rows}
    return [found[i] for i in ids if i in found]


def words(attachments: Iterable[Attachment]) -> dict[int, tuple[str, str]]:
    """What search finds the message carrying them by: each file's name and words (a text
    file's or PDF's first TEXT_CHARS; an image has its name only)."""
    return {a.pk: (a.name, a.text) for a in attachments}


def waiting(user, conversation: Conversation) -> list[dict]:
    """The user's uploads in `conversation` not yet sent, oldest first, described as the upload
    endpoint describes them: the composer's chips, on a reload too (one query)."""
    rows = Attachment.objects.filter(owner=user, conversation=conversation, message__isnull=True)
    return [described(row) for row in rows.order_by("pk")]


def first_lines(text: str) -> str:
    """A text file's or PDF's opening as a bubble and the brief show it (kept in the block, so
    neither reads storage): its first FIRST_LINES lines with words, at most FIRST_LINES_CHARS
    long."""
    lines = "\n".join([line for line in text.splitlines() if line.strip()][:FIRST_LINES])
    if len(lines) > FIRST_LINES_CHARS:
        lines = lines[: FIRST_LINES_CHARS - 1] + "…"
    return lines


def remove(user, attachment_id) -> None:
    """Delete the user's upload `attachment_id` while it is unsent (a chip's ×): ActionError
    if it is not theirs (NO_SUCH_FILE), or has gone with a message already (a message keeps its
    files). Its file goes once the deletion commits (`forget`)."""
    with transaction.atomic():
        found = owned(user, attachment_id)
        # Locked, as `take` locks it: a send taking this upload at the same moment either has
        # it (and this refuses) or waits for the delete (and refuses the send).
        row = Attachment.objects.select_for_update().filter(pk=found.pk).first()
        if row is None:
            raise ActionError(NO_SUCH_FILE)
        if row.message_id is not None:
            raise AlreadySent(
                f"“{row.name}” was sent with a message: it stays with that message (delete the "
                "conversation to remove it)."
            )
        row.delete()


def attach(attachments: list[Attachment], message_id: int) -> None:
    """The uploads are the message's now: no longer unsent, never swept."""
    if attachments:
        Attachment.objects.filter(pk__in=[a.pk for a in attachments]).update(message=message_id)
