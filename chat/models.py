"""Conversations and the append-only transcript.

A `Message` is one API message. A reply row is the state of its turn:
`queued -> streaming -> complete | interrupted | error`, or `queued -> cancelled` (the user took
the message back before it was sent, or deleted the conversation; its user message is marked
cancelled with it). A reply row is only written while queued or streaming (conditional updates);
once final, nothing writes to it again, and a user's message changes only from complete to
cancelled while its reply is queued. Compaction never touches these rows: it writes boundaries
elsewhere.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.core.files.storage import storages
from django.db import models
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from chat.branches import parent_of
from chat.search_index import searchable_text
from compaction.entries import Entry
from core.clean import number
from core.errors import ActionError
from providers.blocks import texts
from providers.usage_columns import UsageColumns, column_values
from providers.values import Usage

NO_SUCH_CONVERSATION = "That conversation does not exist."

# The sidebar's lists (chat/sidebar.py), as their queries filter them.
LISTED = models.Q(deleted_at__isnull=True, archived_at__isnull=True, pinned_at__isnull=True)
PINNED = models.Q(deleted_at__isnull=True, archived_at__isnull=True, pinned_at__isnull=False)
ARCHIVED = models.Q(deleted_at__isnull=True, archived_at__isnull=False)
# A message that follows another than the message just before it: a version, or one continuing
# a version (chat.branches). Rare, so its partial index finds a conversation's forks at once.
FORKS = models.Q(parent_seq__isnull=False) & ~models.Q(parent_seq=models.F("seq") - 1)


class ConversationQuerySet(models.QuerySet):
    def owned_by(self, user) -> ConversationQuerySet:
        """Every lookup on a person's behalf starts here: scoped to one user, deleted ones
        left out."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(owner=user, deleted_at__isnull=True)

    def owned(self, user, conversation_id, *, lock: bool = False) -> Conversation:
        """The user's conversation numbered `conversation_id` (as a frame, a form or a URL sent
        it), locked for this transaction with `lock`; ActionError if there is none: another
        user's, a deleted one and a malformed id all read the same."""
        pk = number(conversation_id)
        rows = self.owned_by(user).filter(pk=pk)
        found = (rows.select_for_update() if lock else rows).first() if pk is not None else None
        if found is None:
            raise ActionError(NO_SUCH_CONVERSATION)
        return found

    def add_spent(self, pk, usage: Usage, *, other_model_cost: float | None = None) -> None:
        """Add a model call's usage to the conversation's running totals; a call by another
        model than the conversation's adds its cost (`other_model_cost`) instead."""
        if usage is None or not usage.known:
            return
        if other_model_cost is not None:
            self.filter(pk=pk).update(other_models_cost=F("other_models_cost") + other_model_cost)
            return
        self.filter(pk=pk).update(
            **{
                column: Coalesce(F(column), 0) + value
                for column, value in column_values(usage).items()
            }
        )

    def locked(self, pk) -> Conversation | None:
        """The row locked for this transaction: changes to one conversation happen one at a time."""
        return self.select_for_update().filter(pk=pk).first()


class Conversation(UsageColumns):
    """A chat. Its usage columns are running totals: every reply and summary call it paid
    for, added as each is saved (so showing what it cost never sums its history)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, default="New conversation")
    model = models.CharField(max_length=100)
    system_prompt = models.TextField(blank=True)
    # Ask the user to review a draft summary before it becomes a boundary.
    review_compactions = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Deleting hides a conversation from its owner; the transcript rows stay (append-only).
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Failed auto-compactions in a row, and the pause they caused: kept on the row the turn
    # already loads, so deciding "compact now?" costs no query.
    auto_compact_failures = models.PositiveIntegerField(default=0)
    auto_compact_paused_until = models.DateTimeField(null=True, blank=True)
    # Its compaction controls (chat/controls.py): when auto-compaction fires and how much the
    # tail keeps verbatim, shares of the budget, and the model that writes its summaries. Null
    # or empty: the environment's default, read as it is now (AUTO_COMPACT_AT, KEEP_TAIL_SHARE,
    # SUMMARY_MODEL), so changing it moves every conversation that never chose.
    auto_compact_at = models.FloatField(null=True, blank=True)
    keep_tail_share = models.FloatField(null=True, blank=True)
    summary_model = models.CharField(max_length=100, blank=True)
    # Extended thinking: the tokens its model may think with before each answer; null: off
    # (only a model declared with "thinking" in CHAT_MODELS is asked, chat/controls.py).
    thinking_budget = models.PositiveIntegerField(null=True, blank=True)
    # Dollars paid to models other than its own (summaries by another model), priced as each
    # call closes: its usage columns are priced at its own model, so another model's tokens
    # are not added to them. A model with no price adds nothing known.
    other_models_cost = models.FloatField(default=0)
    # Tools (by the name the model is offered) this conversation switched off.
    disabled_tools = models.JSONField(default=list, blank=True)
    # The sidebar: pinned conversations come first; archived ones leave the main list.
    pinned_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    # The branch on screen ends at this message, when the user switched to an earlier version;
    # None: it ends at the newest message (every send and new version moves it there).
    leaf_seq = models.PositiveIntegerField(null=True, blank=True)
    # Where each version's branch ended when it was last left ({"version seq": end seq}):
    # switching back to it shows what was on screen under it then (chat/branches.py).
    branch_ends = models.JSONField(default=dict, blank=True)
    # Staged by an import still running (chat/imports/importing.py): hidden (deleted_at set, so
    # every list, search, URL and socket leaves it out) until the import ends; deleted with it.
    importing = models.ForeignKey(
        "Import", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "deleted_at", "-updated_at"]),
            # The sidebar's keyset pages (chat/sidebar.py): each list (unpinned, pinned,
            # archived) is a partial index in the list's order, so a page is one range of it,
            # ties included. (PostgreSQL orders by an index only after columns compared with =,
            # never after IS NULL: the lists' conditions go in the indexes' predicates.)
            models.Index(
                fields=["owner", "-updated_at", "-id"], condition=LISTED, name="conversation_listed"
            ),
            models.Index(
                fields=["owner", "-updated_at", "-id"], condition=PINNED, name="conversation_pinned"
            ),
            models.Index(
                fields=["owner", "-updated_at", "-id"],
                condition=ARCHIVED,
                name="conversation_archived",
            ),
        ]

    def __str__(self) -> str:
        return self.title


class Message(UsageColumns):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Status(models.TextChoices):
        QUEUED = "queued"  # a reply waiting for the one before it (or a compaction) to end
        STREAMING = "streaming"
        COMPLETE = "complete"
        ERROR = "error"
        INTERRUPTED = "interrupted"
        CANCELLED = "cancelled"  # taken back while queued: never sent, never in a window

    # No index of its own: the unique (conversation, seq) index below starts with it and serves
    # every lookup by conversation, and a second index would cost a write on every insert.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    seq = models.PositiveIntegerField()
    # The message this one follows on its branch (0: none). Messages with the same parent and
    # role are versions of each other (a regenerated reply, an edited message). None: the one
    # before it by seq, as every message was before versions existed.
    parent_seq = models.PositiveIntegerField(null=True, blank=True)
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.JSONField(default=list)  # Anthropic content blocks
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    error = models.TextField(blank=True)
    model = models.CharField(max_length=100, blank=True)
    tokens = models.PositiveIntegerField(default=0)  # estimated once, when saved
    # A reply's tool calls as they ran, by tool_use id: {"ms": duration}. The content blocks
    # stay exactly the API's; what the page shows beside them lives here.
    tool_runs = models.JSONField(default=dict, blank=True)
    # The words of `content` for full-text search (search/), written whenever content is.
    search_text = models.TextField(blank=True, default="", editable=False)
    # The boundary in force when this reply was requested: its usage anchors token accounting
    # only while that boundary is still the latest one.
    window_boundary_id = models.BigIntegerField(null=True, blank=True)
    # The estimate for that window's head (system prompt, summary, pins) when it was sent, so a
    # later change to the head (a pin, a new system prompt) still moves the count.
    window_head_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The window once this reply is in it, as the server counted it (its last request's input
    # and output): what token accounting anchors on. The usage columns are what the turn was
    # billed, every step summed; one step's input already holds the steps before it.
    window_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Liveness of a streaming reply: touched by the process running it. A streaming row whose
    # heartbeat is stale belongs to a process that died; any process may then close it.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Stop, as durable state: the running process sees it even if the nudge over the channel
    # layer is lost.
    stop_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="message_seq_unique"),
            # The database itself keeps turns one at a time: two processes cannot both start a
            # reply in one conversation. Also the index for "is a reply streaming?".
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(status="streaming"),
                name="one_streaming_reply_per_conversation",
            ),
        ]
        indexes = [
            # The queue: "the next queued reply" without scanning the history.
            models.Index(
                fields=["conversation", "seq"],
                condition=models.Q(status="queued"),
                name="message_queued",
            ),
            # Versions: where a conversation's branches fork (chat.transcript.trees).
            models.Index(
                fields=["conversation", "parent_seq"], condition=FORKS, name="message_fork"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}#{self.seq} {self.role}"

    def save(self, *args, **kwargs) -> None:
        self.search_text = searchable_text(self.content)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "content" in update_fields:
            kwargs["update_fields"] = {*update_fields, "search_text"}
        super().save(*args, **kwargs)

    @property
    def text(self) -> str:
        return texts(self.content)

    @property
    def parent(self) -> int:
        return parent_of(self.seq, self.parent_seq)

    def to_entry(self, pinned: bool = False) -> Entry:
        return Entry(
            seq=self.seq, role=self.role, content=self.content, tokens=self.tokens, pinned=pinned
        )


class Pin(models.Model):
    """A message the user wants carried verbatim into every later window.

    Kept apart from `Message` so pinning never edits a transcript row.
    """

    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="pin")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="pins")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"pin of message {self.message_id}"


# A reply not started yet (queued) or a message taken back (cancelled): the page shows no such
# reply, and neither counts as a version of a message.
UNSTARTED = (Message.Status.QUEUED, Message.Status.CANCELLED)
# The statuses of rows a window can carry: queued and streaming replies have not happened yet,
# cancelled messages never will.
SETTLED = (Message.Status.COMPLETE, Message.Status.INTERRUPTED, Message.Status.ERROR)
FINAL = (*SETTLED, Message.Status.CANCELLED)  # no write will ever change these rows


def stale_before() -> datetime:
    """Replies and compactions whose heartbeat is older than this belong to a process that died
    (TURN_STALE_SECONDS): any process may close them."""
    return timezone.now() - timedelta(seconds=settings.TURN_STALE_SECONDS)


def duration(ms) -> str:
    """How long a tool ran (a reply's `tool_runs`), as people read it ("" when unknown)."""
    try:
        ms = int(ms)
    except (TypeError, ValueError):
        return ""
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


class LimitCount(models.Model):
    """How many times one who did one limited thing in one window (chat/limits.py): a row per
    window, counted up by one atomic statement, so concurrent requests in any process cannot
    both pass the last place."""

    key = models.CharField(max_length=200, unique=True)  # limit, who, window start
    count = models.PositiveIntegerField(default=0)
    ends_at = models.FloatField(db_index=True)  # epoch seconds: swept after

    def __str__(self) -> str:
        return f"{self.key}: {self.count}"


class Import(models.Model):
    """An import in progress (chat/imports/importing.py). One per user at a time: the unique
    owner decides it in the database, so two requests in any processes cannot both start one.
    Each batch the import writes touches `heartbeat_at`; one gone stale was left by a process
    that died, and the next import clears what it staged."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    started_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"import by {self.owner_id} since {self.started_at:%Y-%m-%d %H:%M}"


class MessageVector(models.Model):
    """A message's meaning for search (chat/vectors.py): its embedding as float16 bytes, with
    the model that made it. Written after the message settles, by a background sweep; a row of
    another model than the configured one is made again."""

    message = models.OneToOneField(
        Message, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    model = models.CharField(max_length=100)
    dimension = models.PositiveSmallIntegerField()
    vector = models.BinaryField()

    def __str__(self) -> str:
        return f"{self.model} vector of message {self.message_id}"


def attachment_storage():
    """Where uploads are kept: the "attachments" storage of settings.STORAGES (the file system
    by default, an S3-compatible bucket when configured), looked up as the models load, so a
    deployment chooses it by settings alone."""
    return storages["attachments"]


def attachment_path(attachment: Attachment, filename: str) -> str:
    """A stored file's name: its owner's folder and a random name, never the uploaded one (which
    is only shown, and sent in Content-Disposition)."""
    return f"{attachment.owner_id}/{uuid.uuid4().hex}"


class Attachment(models.Model):
    """A file given to the model (chat/attachments.py): checked by its content, stored as it
    will be sent (an image re-encoded and scaled), with the tokens it is estimated to cost."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="attachments"
    )
    name = models.CharField(max_length=200)  # as uploaded, cleaned: shown, never a path
    media_type = models.CharField(max_length=50)  # what the content is, not what the name says
    bytes = models.PositiveBigIntegerField()  # as stored: counted against the owner's storage
    tokens = models.PositiveIntegerField()  # estimated (chat/attachments.py says how)
    width = models.PositiveIntegerField(default=0)  # an image's, as stored (scaled)
    height = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)  # a PDF's
    # A text file's or PDF's words, its first 100,000 characters (chat/file_checks.TEXT_CHARS):
    # what search, the brief and the offline model read. "" for an image.
    text = models.TextField(blank=True, default="")
    file = models.FileField(storage=attachment_storage, upload_to=attachment_path, max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Null until the message that carries it is sent; unsent uploads are swept after a day.
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments"
    )

    class Meta:
        indexes = [
            models.Index(fields=["owner"]),
            # The sweep's: uploads never sent, oldest first.
            models.Index(
                fields=["created_at"], condition=models.Q(message__isnull=True), name="unsent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.media_type}, {self.bytes:,} bytes)"


class Preferences(models.Model):
    """A person's settings (chat/preferences.py): what a new conversation of theirs starts with,
    and the theme every page is drawn in. No row: every default is the deployment's. Empty or
    null fields are the deployment's too, read as it is now, so a person who never chose follows
    a change to the environment."""

    class Theme(models.TextChoices):
        SYSTEM = "system", "Same as the system"
        LIGHT = "light", "Light"
        DARK = "dark", "Dark"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    model = models.CharField(max_length=100, blank=True)  # "": the deployment's default model
    # None: DEFAULT_SYSTEM_PROMPT, as it is now; "" is a choice of no system prompt at all.
    system_prompt = models.TextField(null=True, blank=True)  # noqa: DJ001
    review_compactions = models.BooleanField(default=False)
    # As a conversation's compaction controls (chat/controls.py): None or "" is the default.
    auto_compact_at = models.FloatField(null=True, blank=True)
    keep_tail_share = models.FloatField(null=True, blank=True)
    summary_model = models.CharField(max_length=100, blank=True)
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)

    def __str__(self) -> str:
        return f"preferences of user {self.user_id}"
