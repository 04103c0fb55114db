"""A person's actions on their conversations, from the pages: create one, rename it, change its
settings, delete it (and undo that), pin or archive it in the sidebar, pin a message into every
later window. Plain synchronous functions for the views; each takes the requesting user and
scopes its queries to them, so no caller can reach another user's data.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat import preferences
from chat.branches import parent_of
from chat.controls import Controls, check_prompt_fits
from chat.models import NO_SUCH_CONVERSATION, Conversation, Message, Pin
from chat.transcript import current_branch, first_kept_seq
from core.clean import number
from core.errors import ActionError
from providers import registry
from providers.values import Usage

DEFAULT_TITLE = Conversation._meta.get_field("title").default
TITLE_CHARS = 60


def title_from(text: str) -> str:
    """A conversation's title from its first message: its first words, on one line."""
    first_line = " ".join(text.split())
    if len(first_line) <= TITLE_CHARS:
        return first_line
    return first_line[:TITLE_CHARS].rsplit(" ", 1)[0] + "…"


def create_conversation(
    user, *, system_prompt: str | None = None, model: str | None = None
) -> Conversation:
    """A new conversation on `model` (one of `providers.registry.available_models()`; None or empty:
    the person's default), starting with the person's defaults (chat/preferences.py). The
    conversation keeps its model: it answers every turn."""
    fields = preferences.new_conversation(
        preferences.stored(user), model=model, system_prompt=system_prompt
    )
    return Conversation.objects.create(owner=user, **fields)


def rename_conversation(user, conversation_id, title: str) -> Conversation:
    """Rename to `title` (cleaned by the caller), on one line."""
    title = " ".join(title.split())
    conversation = Conversation.objects.owned(user, conversation_id)
    conversation.title = title
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def give_generated_title(
    conversation_id: int, *, given: str, title: str, usage: Usage
) -> Conversation | None:
    """Count the title request's `usage` in the conversation's running totals, and name it
    `title` if it still bears `given` (its first-words title): decided in one UPDATE, so a
    person's rename, even one landing while the title was being asked, always wins. The
    conversation renamed, or None (an empty title, a rename, or deleted meanwhile)."""
    with transaction.atomic():
        Conversation.objects.add_spent(conversation_id, usage)
        if not title or title == given:
            return None
        # A plain UPDATE: `updated_at` stays, so the list does not reorder under the pointer.
        named = Conversation.objects.filter(
            pk=conversation_id, title=given, deleted_at__isnull=True
        ).update(title=title)
        return Conversation.objects.get(pk=conversation_id) if named else None


def update_settings(
    user, conversation_id, *, system_prompt: str, review_compactions: bool, controls: Controls
) -> Conversation:
    """The conversation's settings, `system_prompt` cleaned and `controls` checked by the
    caller (chat/controls.py)."""
    conversation = Conversation.objects.owned(user, conversation_id)
    check_prompt_fits(system_prompt, conversation.model)
    conversation.system_prompt = system_prompt
    conversation.review_compactions = review_compactions
    conversation.auto_compact_at = controls.auto_compact_at
    conversation.keep_tail_share = controls.keep_tail_share
    conversation.summary_model = controls.summary_model
    # Kept only for a model that may think: the form shows the switch for no other.
    conversation.thinking_budget = (
        controls.thinking_budget if registry.thinks(conversation.model) else None
    )
    conversation.save(
        update_fields=[
            "system_prompt",
            "review_compactions",
            "auto_compact_at",
            "keep_tail_share",
            "summary_model",
            "thinking_budget",
            "updated_at",
        ]
    )
    return conversation


def delete_conversation(user, conversation_id) -> Conversation:
    """Hide the conversation (its rows stay) and take back what was queued in it: it will not
    be sent. Under its lock, so no reply is claimed from its queue meanwhile. Returns it, for
    the notice that offers to undo this (`restore_conversation`)."""
    with transaction.atomic():
        conversation = Conversation.objects.owned(user, conversation_id, lock=True)
        now = timezone.now()
        # Deleting is not activity: the row keeps its last-active time, so an undo puts it back
        # in its place in the sidebar rather than at the top of "Today".
        Conversation.objects.filter(pk=conversation.pk).update(deleted_at=now)
        conversation.deleted_at = now
        queued = Message.objects.filter(conversation=conversation, status=Message.Status.QUEUED)
        # A message is taken back with its queued reply (stored together, one after the other);
        # a reply asked again leaves the message it answers, sent long before, as it is.
        taken = []
        for seq, parent in queued.values_list("seq", "parent_seq"):
            taken += [seq, seq - 1] if parent_of(seq, parent) == seq - 1 else [seq]
        if taken:
            Message.objects.filter(conversation=conversation, seq__in=taken).update(
                status=Message.Status.CANCELLED, updated_at=now
            )
    return conversation


class NoSuchMessage(ActionError):
    """Unknown, or another user's."""


def set_pinned(user, message_id, pinned: bool) -> Message:
    with transaction.atomic():
        message = (
            Message.objects.select_related("conversation")
            .filter(pk=number(message_id), conversation__in=Conversation.objects.owned_by(user))
            .first()
        )
        if message is None:
            raise NoSuchMessage("That message does not exist.")
        # Under the conversation's lock: a compaction's close (which unpins what it folds away
        # off the branch) cannot commit between the check and the pin.
        Conversation.objects.locked(message.conversation_id)
        return _set_pinned(message, pinned)


def _set_pinned(message: Message, pinned: bool) -> Message:
    if message.status in (Message.Status.STREAMING, Message.Status.QUEUED):
        raise ActionError("Wait for the reply to finish before pinning it.")
    if pinned and _abandoned(message):
        raise ActionError(
            "That version was left behind on another branch and folded away by a compaction: "
            "it is not part of this conversation any more, so it cannot be pinned."
        )
    if pinned:
        Pin.objects.get_or_create(message=message, conversation=message.conversation)
    else:
        Pin.objects.filter(message=message).delete()
    return message


def _abandoned(message: Message) -> bool:
    """Off the branch, before the latest boundary: a compaction folded the branch there for good
    and unpinned what was left off it (chat/compactions.unpin_abandoned); pinned, it would ride
    in the window. Read whole only for a message that old."""
    conversation = message.conversation
    return message.seq < first_kept_seq(conversation) and message.seq not in current_branch(
        conversation
    )


# --- the sidebar's actions -----------------------------------------------------------------------
# Pinning and archiving write their one column with an UPDATE, not `save()`: neither is activity,
# so `updated_at` (the sidebar's "Today", "Yesterday", ...) stays what it was.


class UndoExpired(ActionError):
    """The delete is older than the grace period: the conversation stays deleted."""


def pin_conversation(user, conversation_id, pinned: bool) -> Conversation:
    """Pin to the top of the sidebar, or unpin. Pinning again keeps the first pin's time."""
    return _stamp(user, conversation_id, "pinned_at", pinned)


def archive_conversation(user, conversation_id, archived: bool) -> Conversation:
    """Move out of the sidebar's list into its "Archived" one, or back. The conversation is
    untouched otherwise: it still opens by its URL, and a pin comes back with it."""
    return _stamp(user, conversation_id, "archived_at", archived)


def _stamp(user, conversation_id, field: str, on: bool) -> Conversation:
    """Set the time in `field` (kept if already set), or clear it."""
    conversation = Conversation.objects.owned(user, conversation_id)
    rows = Conversation.objects.filter(pk=conversation.pk)
    if on:
        rows.filter(**{f"{field}__isnull": True}).update(**{field: timezone.now()})
    else:
        rows.update(**{field: None})
    conversation.refresh_from_db(fields=[field])
    return conversation


def restore_conversation(user, conversation_id) -> Conversation:
    """Undo a delete within UNDO_DELETE_SECONDS of it. What the delete took back from the queue
    stays cancelled (it was never sent); the transcript is as it was. Restoring one that is not
    deleted (a second click, another tab) changes nothing."""
    # Deleted ones too (the one being restored is): its owner's, by id; never one an import is
    # still staging (hidden until the import ends, chat/imports/importing.py).
    conversation = (
        Conversation.objects.filter(owner=user, pk=number(conversation_id), importing=None).first()
        if user.is_authenticated
        else None
    )
    if conversation is None:
        raise ActionError(NO_SUCH_CONVERSATION)
    if conversation.deleted_at is None:
        return conversation
    grace = timedelta(seconds=settings.UNDO_DELETE_SECONDS)
    if timezone.now() - conversation.deleted_at > grace:
        raise UndoExpired(
            f"Too late to undo: “{conversation.title}” was deleted more than {_span(grace)} "
            "ago, and stays deleted."
        )
    # Conditional on the very delete checked above: a newer delete is not undone unchecked.
    Conversation.objects.filter(pk=conversation.pk, deleted_at=conversation.deleted_at).update(
        deleted_at=None
    )
    conversation.deleted_at = None
    return conversation


def _span(grace: timedelta) -> str:
    seconds = int(grace.total_seconds())
    if seconds % 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = seconds // 60
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
