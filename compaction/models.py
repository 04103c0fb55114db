"""Boundaries: one row per compaction.

A committed boundary says "from `first_kept_seq` on the model sees the original messages; before
it, it sees `summary`". The latest committed boundary defines the window. Rows are never deleted:
an undone boundary stays, marked, for admins to review.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from providers.usage_columns import UsageColumns


class Compaction(UsageColumns):
    class Trigger(models.TextChoices):
        MANUAL = "manual"
        AUTO = "auto"

    class Kind(models.TextChoices):
        SUMMARY = "summary"  # older messages folded into a summary
        CLEAR = "clear"  # only old tool results and files replaced by placeholders (clearing.py)

    class Status(models.TextChoices):
        RUNNING = "running"  # the summariser is working
        DRAFT = "draft"  # waiting for the user's review
        COMMITTED = "committed"  # in force (if latest)
        FAILED = "failed"  # no boundary: nothing could be cut, or the summary failed
        DISCARDED = "discarded"  # a draft the user threw away
        UNDONE = "undone"  # was committed, then undone by the user

    # The one reference from this room up to the domain: by name, not by import.
    conversation = models.ForeignKey(
        "chat.Conversation", on_delete=models.CASCADE, related_name="compactions"
    )
    trigger = models.CharField(max_length=8, choices=Trigger.choices)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.SUMMARY)
    # Tool results in messages before this one are cleared in the window (every boundary carries
    # it on, so a later summary keeps them cleared); how many this boundary cleared.
    cleared_before_seq = models.PositiveIntegerField(null=True, blank=True)
    cleared_count = models.PositiveIntegerField(default=0)
    # The files this boundary took out of the window, each {"id", "name", "kind", "seq"}
    # (compaction/files.record): a clearing's, replaced by lines naming them; a summary's,
    # folded into it. The divider counts or lists them, linking each to the file itself.
    files = models.JSONField(default=list, blank=True)
    instructions = models.TextField(blank=True)
    first_kept_seq = models.PositiveIntegerField(null=True, blank=True)
    pre_tokens = models.PositiveIntegerField(default=0)
    post_tokens = models.PositiveIntegerField(default=0)
    summary = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    summariser = models.CharField(max_length=32, blank=True)
    # The model that wrote the summary (the summariser is "model"): the conversation's, or the
    # cheaper one its settings or SUMMARY_MODEL chose. Empty for a rule-based brief or a clearing.
    summary_model = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    # The key facts of what the summary replaces (compaction/key_facts.py): how many, how many
    # it states, and the ones it lost (each with the words around it), as the divider says them.
    facts_total = models.PositiveIntegerField(default=0)
    facts_kept = models.PositiveIntegerField(default=0)
    facts_lost = models.JSONField(default=list, blank=True)
    # The user changed the model's summary before approving it (review mode).
    edited = models.BooleanField(default=False)
    # Restored by an import of an export (chat/imports/importing.py), not made here: its summary and
    # figures are the file's, and the divider and the admin say so.
    imported = models.BooleanField(default=False)
    # Liveness of a running compaction (see Message.heartbeat_at).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # The database itself refuses a second compaction of one conversation while one is
            # running or waiting for review: "a second request is told so, not queued twice".
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status__in=["running", "draft"]),
                name="one_open_compaction_per_conversation",
            )
        ]
        indexes = [models.Index(fields=["conversation", "status", "-id"])]

    def __str__(self) -> str:
        return f"{self.trigger} compaction of {self.conversation_id} ({self.status})"

    @property
    def saved_tokens(self) -> int:
        """Tokens every request after it no longer carries (until the window grows back)."""
        return max(self.pre_tokens - self.post_tokens, 0)

    @property
    def cleared_what(self) -> str:
        """What a clearing replaced, as its divider says it: "2 files and 3 tool results"."""
        counted = [(len(self.files), "file"), (self.cleared_count, "tool result")]
        said = [f"{n:,} {word}{'s' if n != 1 else ''}" for n, word in counted if n]
        return " and ".join(said) or "0 tool results"

    @property
    def divider_seq(self) -> int | None:
        """The message the page shows this boundary's divider above: the first one kept
        verbatim, or for a clearing the first one whose results are kept."""
        if self.kind == self.Kind.CLEAR:
            return self.cleared_before_seq
        return self.first_kept_seq


class Review(models.Model):
    """One review action on a compaction, with who did it and when: the audit trail admins read
    beside each summary."""

    class Action(models.TextChoices):
        APPROVED = "approved"
        EDITED = "edited"  # approved after changing the model's summary
        DISCARDED = "discarded"
        REGENERATED = "regenerated"  # discarded for a new draft, with new instructions
        UNDONE = "undone"

    compaction = models.ForeignKey(Compaction, on_delete=models.CASCADE, related_name="reviews")
    action = models.CharField(max_length=12, choices=Action.choices)
    # Kept when the account is deleted: the record says a review happened, by someone gone.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        who = self.user.get_username() if self.user else "a deleted account"
        return f"{self.action} by {who} at {self.at:%Y-%m-%d %H:%M}"
