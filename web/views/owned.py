"""A conversation looked up for the requesting user, else a 404: another user's reads as
missing, never as a leak."""

from __future__ import annotations

from django.http import Http404, HttpRequest

from chat.models import Conversation
from core.errors import ActionError


def owned_or_404(request: HttpRequest, conversation_id) -> Conversation:
    """The requesting user's conversation, else a 404 (another user's reads as missing)."""
    try:
        return Conversation.objects.owned(request.user, conversation_id)
    except ActionError as exc:
        raise Http404(exc.reason) from None
