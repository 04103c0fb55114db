"""A session that ends closes its sockets too, in every process.

Logging out (here, or everywhere: `end_every_session`), changing a password (which invalidates
the user's other sessions), or the user being deactivated or deleted (in the admin) closes every
socket the user has open; each tab reconnects through the auth middleware, so only those whose
session is still valid come back (an inactive user's never does). Without this a socket stays
authorised for as long as it stays open.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.utils import timezone

from core import channel_layer
from web.models import UserSession


def connect() -> None:
    user_model = get_user_model()
    user_logged_out.connect(_logged_out, dispatch_uid="chat-sessions-logout")
    pre_save.connect(_note_change, sender=user_model, dispatch_uid="chat-sessions-pre")
    post_save.connect(_changed, sender=user_model, dispatch_uid="chat-sessions-post")
    post_delete.connect(_deleted, sender=user_model, dispatch_uid="chat-sessions-delete")


def _end(user_id: int) -> None:
    async_to_sync(channel_layer.end_sessions)(user_id)


def _logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        _end(user.pk)


def _note_change(sender, instance, **kwargs) -> None:
    """Whether this save ends the user's sessions: a new password, or being deactivated."""
    # Saves of a user are rare (log-ins touch last_login): one read to compare.
    if instance.pk is None:
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", "is_active").first()
    instance._chat_sessions_end = stored is not None and (
        stored[0] != instance.password or (stored[1] and not instance.is_active)
    )


def _changed(sender, instance, created, **kwargs) -> None:
    if getattr(instance, "_chat_sessions_end", False):
        instance._chat_sessions_end = False
        user_id = instance.pk
        transaction.on_commit(lambda: _end(user_id))


def _deleted(sender, instance, **kwargs) -> None:
    user_id = instance.pk
    transaction.on_commit(lambda: _end(user_id))


def end_every_session(user_id: int) -> int:
    """End every session of the user (log out everywhere, or before their account goes): each
    live session row that signs them in is deleted (found by its user column, web/models.py;
    expired ones sign nobody in, and the heartbeat's sweep deletes them), and their sockets close
    once this commits (the tabs that reconnect come back signed out). How many sessions ended."""
    ended, _ = UserSession.objects.filter(user_id=user_id, expire_date__gt=timezone.now()).delete()
    transaction.on_commit(lambda: _end(user_id))
    return ended
