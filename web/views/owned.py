"""A conversation looked up for the requesting user, else a 404: another user's reads as
missing, never as a leak. One lookup (`Conversation.objects.owned`) for sync and async views."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest

from chat.models import Conversation
from core.errors import ActionError


def owned_or_404(request: HttpRequest, conversation_id) -> Conversation:
    """The requesting user's conversation, else a 404 (another user's reads as missing)."""
    return _owned(request.user, conversation_id)


async def aowned_or_404(request: HttpRequest, conversation_id) -> Conversation:
    """`owned_or_404` for an async view: the same lookup, run where Django runs the ORM's
    async calls (as `afirst` would)."""
    return await sync_to_async(_owned)(await request.auser(), conversation_id)


def _owned(user, conversation_id) -> Conversation:
    try:
        return Conversation.objects.owned(user, conversation_id)
    except ActionError as exc:
        raise Http404(exc.reason) from None
