"""A session that ends closes its sockets too, in every process.

Logging out, or changing a password (which invalidates the user's other sessions), closes
every socket the user has open; each tab reconnects through the auth middleware, so only those
whose session is still valid come back. Without this a socket stays authorised for as long as
it stays open.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_save, pre_save

from core import layers


def connect() -> None:
    user_model = get_user_model()
    user_logged_out.connect(_logged_out, dispatch_uid="chat-sessions-logout")
    pre_save.connect(_note_password, sender=user_model, dispatch_uid="chat-sessions-pre")
    post_save.connect(_password_changed, sender=user_model, dispatch_uid="chat-sessions-post")


def _end(user_id: int) -> None:
    async_to_sync(layers.end_sessions)(user_id)


def _logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        _end(user.pk)


def _note_password(sender, instance, **kwargs) -> None:
    # Saves of a user are rare (log-ins touch last_login): one read to compare the hash.
    if instance.pk is None:
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    instance._chat_password_changed = stored is not None and stored != instance.password


def _password_changed(sender, instance, created, **kwargs) -> None:
    if getattr(instance, "_chat_password_changed", False):
        instance._chat_password_changed = False
        transaction.on_commit(lambda: _end(instance.pk))
