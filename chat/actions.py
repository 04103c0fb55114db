"""Every change to conversations and the transcript happens here: validate, then write.

Plain synchronous functions (the consumer wraps them with `database_sync_to_async`). Each takes the
requesting user and scopes its queries to them, so no caller can reach another user's data.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from compaction.tokens import estimate_content

from .models import Conversation, Message, Pin

TITLE_CHARS = 60
# A reply still "streaming" after this long belongs to a process that died (replies are bounded
# by the client's timeout); it is closed as interrupted so the conversation is usable again.
ORPHANED_AFTER = timedelta(minutes=15)


class ActionError(Exception):
    """Refused input: `reason` is shown to the user as it is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def get_conversation(user, conversation_id) -> Conversation:
    try:
        return Conversation.objects.owned_by(user).get(pk=int(conversation_id))
    except (Conversation.DoesNotExist, TypeError, ValueError):
        raise ActionError("That conversation does not exist.") from None


def create_conversation(user, *, system_prompt: str | None = None) -> Conversation:
    from .llm import provider_name

    model = "demo" if provider_name() == "demo" else settings.CHAT_MODEL
    prompt = settings.DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
    return Conversation.objects.create(owner=user, model=model, system_prompt=prompt.strip())


def rename_conversation(user, conversation_id, title: str) -> Conversation:
    title = " ".join(title.split())
    if not title:
        raise ActionError("A title cannot be empty.")
    conversation = get_conversation(user, conversation_id)
    conversation.title = title[:200]
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def update_settings(
    user, conversation_id, *, system_prompt: str, review_compactions: bool
) -> Conversation:
    conversation = get_conversation(user, conversation_id)
    conversation.system_prompt = system_prompt.strip()[: settings.MAX_MESSAGE_CHARS]
    conversation.review_compactions = review_compactions
    conversation.save(update_fields=["system_prompt", "review_compactions", "updated_at"])
    return conversation


def delete_conversation(user, conversation_id) -> None:
    conversation = get_conversation(user, conversation_id)
    conversation.deleted_at = timezone.now()
    conversation.save(update_fields=["deleted_at", "updated_at"])


def clean_user_text(text) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ActionError("Type a message first: an empty message cannot be sent.")
    text = text.strip()
    if len(text) > settings.MAX_MESSAGE_CHARS:
        raise ActionError(
            f"That message is {len(text):,} characters; the limit is "
            f"{settings.MAX_MESSAGE_CHARS:,}. Shorten it or split it."
        )
    return text


def _next_seq(conversation: Conversation) -> int:
    last = conversation.messages.aggregate(last=Max("seq"))["last"]
    return (last or 0) + 1


def append_user_message(user, conversation_id, text, *, model: str) -> tuple[Message, Message]:
    """Add the user's message and, in the same transaction, the reply row that will answer it.

    Creating both at once is what keeps two tabs (or two server processes) from starting two
    replies: the second send finds the first reply streaming and is refused.
    """
    text = clean_user_text(text)
    with transaction.atomic():
        conversation = Conversation.objects.owned_by(user).locked(conversation_id)
        if conversation is None:
            raise ActionError("That conversation does not exist.")
        close_orphaned_replies(conversation.pk, older_than=timezone.now() - ORPHANED_AFTER)
        if conversation.messages.filter(status=Message.Status.STREAMING).exists():
            raise ActionError("A reply is still streaming: wait for it or press Stop.")
        content = [{"type": "text", "text": text}]
        seq = _next_seq(conversation)
        try:
            message = Message.objects.create(
                conversation=conversation,
                seq=seq,
                role=Message.Role.USER,
                content=content,
                tokens=estimate_content(content),
            )
            reply = Message.objects.create(
                conversation=conversation,
                seq=seq + 1,
                role=Message.Role.ASSISTANT,
                content=[],
                status=Message.Status.STREAMING,
                model=model,
            )
        except IntegrityError:
            raise ActionError("Another message was sent at the same moment; try again.") from None
        fields = ["updated_at"]
        if seq == 1 and conversation.title == Conversation._meta.get_field("title").default:
            conversation.title = title_from(text)
            fields.append("title")
        conversation.save(update_fields=fields)
    return message, reply


def title_from(text: str) -> str:
    first_line = " ".join(text.split())
    if len(first_line) <= TITLE_CHARS:
        return first_line
    return first_line[:TITLE_CHARS].rsplit(" ", 1)[0] + "…"


def record_reply_window(message_id: int, *, boundary_id: int | None, head_tokens: int) -> None:
    """Note which window the streaming reply was asked with: its usage will describe that one."""
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(
        window_boundary_id=boundary_id, window_head_tokens=head_tokens
    )


def save_partial_reply(message_id: int, text: str) -> None:
    """Keep the text streamed so far, so a crash or a tab opened mid-reply does not lose it."""
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(
        content=[{"type": "text", "text": text}]
    )


def finish_reply(
    message_id: int,
    *,
    content: list[dict],
    status: str,
    usage: dict | None = None,
    error: str = "",
    model: str | None = None,
) -> Message:
    """Close a streaming reply. Only a row still streaming is written: complete rows are final."""
    content = [b for b in content if b.get("type") != "text" or b.get("text")]
    fields = {
        "content": content,
        "status": status,
        "usage": usage,
        "error": error,
        "tokens": estimate_content(content),
        "updated_at": timezone.now(),
    }
    if model:
        fields["model"] = model
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(**fields)
    message = Message.objects.get(pk=message_id)
    Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
    return message


def close_orphaned_replies(conversation_id: int, *, older_than) -> int:
    """A reply left `streaming` by a process that died is closed as interrupted, text kept."""
    return Message.objects.filter(
        conversation_id=conversation_id,
        status=Message.Status.STREAMING,
        created_at__lt=older_than,
    ).update(
        status=Message.Status.INTERRUPTED,
        error="The server stopped before this reply finished.",
        updated_at=timezone.now(),
    )


def set_pinned(user, message_id, pinned: bool) -> Message:
    try:
        message = Message.objects.select_related("conversation").get(
            pk=int(message_id),
            conversation__owner=user,
            conversation__deleted_at__isnull=True,
        )
    except (Message.DoesNotExist, TypeError, ValueError):
        raise ActionError("That message does not exist.") from None
    if message.status == Message.Status.STREAMING:
        raise ActionError("Wait for the reply to finish before pinning it.")
    if pinned:
        Pin.objects.get_or_create(message=message, conversation=message.conversation)
    else:
        Pin.objects.filter(message=message).delete()
    return message
