"""Every change to conversations and the transcript starts here: validate, write, broadcast.

The websocket's actions are async: each validates, writes in one transaction on the database
threads (`chat.db`, `chat.queue`), then broadcasts the result to every tab. The pages' actions
are plain synchronous functions for the views. Every one takes the requesting user and scopes
its queries to them, so no caller can reach another user's data.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

import providers
from compaction.loading import budget_for, load_panel, load_window
from compaction.tokens import estimate_text

from . import broadcast, clean, db, fragments, limits, queue, transcript
from .errors import ActionError
from .models import Conversation, Message, Pin

__all__ = ["ActionError"]


# --- the websocket's actions ---------------------------------------------------------------------


async def send(user, conversation_id: int, text) -> queue.Claim:
    """Store the user's message; it runs now or waits its turn, never refused for being early.
    The returned claim's step is what the engine runs."""
    text = queue.clean_user_text(text)
    claim = await db.run(_append_within_limit, user, conversation_id, text)
    # A reply to this very message starting now shows it, in the same frame as its own bubble.
    if not (isinstance(claim.step, queue.Turn) and claim.step.message is claim.message):
        await broadcast.html(
            conversation_id, fragments.appended_message(claim.message, queued=claim.queued)
        )
    for reply in claim.recovered:
        await broadcast.html(conversation_id, fragments.replaced_message(reply))
    return claim


def _append_within_limit(user, conversation_id: int, text: str) -> queue.Claim:
    # In the same database call as the append, before its transaction: one call per send,
    # and the conversation is never locked while the cache is asked.
    limits.hit(limits.SENDS, user.pk)
    return queue.append(user, conversation_id, text)


async def cancel(user, conversation_id: int, seq) -> None:
    """Take back a queued message before it is sent."""
    message = await db.run(queue.cancel, user, conversation_id, seq)
    await broadcast.html(conversation_id, fragments.replaced_message(message))


async def stop(user, conversation_id: int, seq=None) -> tuple[Message, ...]:
    """Stop the streaming reply (the one numbered `seq`, if given: a second Stop aimed at a
    reply that has ended must not stop the next one), wherever it runs. Returns replies closed
    because their process had died (the caller restarts the queue behind them)."""
    seq = queue.reply_seq(seq)
    recovered = await db.run(queue.request_stop, user, conversation_id, seq)
    await broadcast.stop(conversation_id, seq)
    for reply in recovered:
        await broadcast.html(conversation_id, fragments.replaced_message(reply))
    return recovered


async def new_version(user, conversation_id: int, seq, text=None) -> queue.Claim:
    """Ask a reply again (regenerate, or retry one that failed), or, with `text`, send an edited
    version of the user's message `seq`. Every tab drops the branch below it and shows the
    new version there; the earlier ones stay switchable. The returned claim's step is what the
    engine runs."""
    if text is not None:
        text = queue.clean_user_text(text)
    made = await db.run(_version_within_limit, user, conversation_id, seq, text)
    await broadcast.html(
        conversation_id, await db.run(_branch_until, made.conversation, made.after)
    )
    claim = made.claim
    if claim.message is not None and not (
        isinstance(claim.step, queue.Turn) and claim.step.message is claim.message
    ):
        await broadcast.html(
            conversation_id, fragments.appended_message(claim.message, queued=claim.queued)
        )
    return claim


def _version_within_limit(user, conversation_id, seq, text) -> queue.NewVersion:
    limits.hit(limits.SENDS, user.pk)  # a version is a request to the model, as a send is
    return queue.new_version(user, conversation_id, seq, text)


async def switch_version(user, conversation_id: int, seq, to) -> None:
    """Show another version of message `seq`: every tab shows that branch, and the window (and
    its meter) follows it."""
    conversation = await db.run(queue.switch_version, user, conversation_id, seq, to)
    await broadcast.html(conversation_id, await db.run(_branch_until, conversation))


def _branch_until(conversation: Conversation, leaf: int | None = None) -> str:
    """The transcript's newest page along the branch ending at `leaf` (None: the one on
    screen), and the context panel it makes, as fragments for every tab."""
    page = transcript.page(conversation, before=None, limit=settings.PAGE_MESSAGES, leaf=leaf)
    panel = load_panel(conversation, load_window(conversation))
    return fragments.branch(page, conversation) + fragments.context_panel(panel, conversation)


# --- the pages' actions --------------------------------------------------------------------------


def get_conversation(user, conversation_id) -> Conversation:
    try:
        return Conversation.objects.owned_by(user).get(pk=int(conversation_id))
    except (Conversation.DoesNotExist, TypeError, ValueError):
        raise ActionError("That conversation does not exist.") from None


def create_conversation(
    user, *, system_prompt: str | None = None, model: str | None = None
) -> Conversation:
    """A new conversation on `model` (one of `providers.available_models()`; None or empty:
    the default). The conversation keeps its model: it answers every turn."""
    prompt = settings.DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
    offered = providers.available_models()
    if not model:
        model = providers.default_model()
    elif not isinstance(model, str) or model not in {m.id for m in offered}:
        shown = clean.scrubbed(str(model))[:100]
        raise ActionError(
            f"There is no model {shown!r} to choose here. Pick one of: "
            + ", ".join(m.label for m in offered)
            + "."
        )
    return Conversation.objects.create(owner=user, model=model, system_prompt=prompt.strip())


def rename_conversation(user, conversation_id, title: str) -> Conversation:
    title = " ".join(clean.clean(title, clean.TITLE, required=True).split())
    conversation = get_conversation(user, conversation_id)
    conversation.title = title
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def update_settings(
    user, conversation_id, *, system_prompt: str, review_compactions: bool
) -> Conversation:
    system_prompt = clean.clean(system_prompt, clean.SYSTEM_PROMPT)
    conversation = get_conversation(user, conversation_id)
    _check_prompt_fits(system_prompt, conversation.model)
    conversation.system_prompt = system_prompt
    conversation.review_compactions = review_compactions
    conversation.save(update_fields=["system_prompt", "review_compactions", "updated_at"])
    return conversation


def _check_prompt_fits(system_prompt: str, model: str) -> None:
    """The system prompt rides in every request: past half the budget it leaves the
    conversation too little room (the tail, the summary, the reply)."""
    tokens, budget = estimate_text(system_prompt), budget_for(model).total
    if tokens > budget // 2:
        raise ActionError(
            f"The system prompt is about {tokens:,} tokens: more than half of this model's "
            f"window budget of {budget:,}, which would leave the conversation too little room. "
            "Shorten it."
        )


def delete_conversation(user, conversation_id) -> Conversation:
    """Hide the conversation; what was queued in it will not be sent. Under its lock, so no
    reply is claimed from its queue meanwhile. Returns it, for the notice that offers to undo
    this (`restore_conversation`)."""
    conversation = get_conversation(user, conversation_id)
    queue.delete(user, conversation.pk)
    # Deleting is not activity: the row keeps its last-active time, so an undo puts it back in
    # its place in the sidebar rather than at the top of "Today".
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=conversation.updated_at)
    return conversation


def set_pinned(user, message_id, pinned: bool) -> Message:
    try:
        message = Message.objects.select_related("conversation").get(
            pk=int(message_id),
            conversation__owner=user,
            conversation__deleted_at__isnull=True,
        )
    except (Message.DoesNotExist, TypeError, ValueError):
        raise ActionError("That message does not exist.") from None
    if message.status in (Message.Status.STREAMING, Message.Status.QUEUED):
        raise ActionError("Wait for the reply to finish before pinning it.")
    if pinned:
        Pin.objects.get_or_create(message=message, conversation=message.conversation)
    else:
        Pin.objects.filter(message=message).delete()
    return message


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
    conversation = get_conversation(user, conversation_id)
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
    try:
        if not user.is_authenticated:
            raise Conversation.DoesNotExist
        conversation = Conversation.objects.get(owner=user, pk=int(conversation_id))
    except (Conversation.DoesNotExist, TypeError, ValueError):
        raise ActionError("That conversation does not exist.") from None
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
