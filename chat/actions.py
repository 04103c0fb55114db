"""Every change to conversations and the transcript starts here: validate, write, broadcast.

The websocket's actions are async: each validates, writes in one transaction on the database
threads (`chat.db`, `chat.queue`), then broadcasts the result to every tab. The pages' actions
are plain synchronous functions for the views. Every one takes the requesting user and scopes
its queries to them, so no caller can reach another user's data.
"""

from __future__ import annotations

from django.conf import settings

import providers
from compaction.loading import budget_for
from compaction.tokens import estimate_text

from . import broadcast, clean, db, fragments, limits, queue
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
    # On the same database thread as the append, before its transaction: one hop per send,
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


# --- the pages' actions --------------------------------------------------------------------------


def get_conversation(user, conversation_id) -> Conversation:
    try:
        return Conversation.objects.owned_by(user).get(pk=int(conversation_id))
    except (Conversation.DoesNotExist, TypeError, ValueError):
        raise ActionError("That conversation does not exist.") from None


def create_conversation(user, *, system_prompt: str | None = None) -> Conversation:
    prompt = settings.DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
    return Conversation.objects.create(
        owner=user, model=providers.default_model(), system_prompt=prompt.strip()
    )


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


def delete_conversation(user, conversation_id) -> None:
    """Hide the conversation; what was queued in it will not be sent. Under its lock, so no
    reply is claimed from its queue meanwhile."""
    queue.delete(user, get_conversation(user, conversation_id).pk)


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
