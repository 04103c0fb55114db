"""Sockets of users who may no longer use the app close, however that happened.

Deactivating or deleting a user through the admin (or any `save`/`delete`) closes their sockets
at once (web/sessions.py). A change that bypasses the model (`User.objects.filter(...)
.update(is_active=False)`, a script, a single sign-on hook) sends no signal: every socket
checks its user before an action (web/consumer.py, a cached answer at most
`RECHECK_SECONDS` old), and each heartbeat checks the users of every socket open in the
process, in one query (`check_sockets`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from django.contrib.auth import get_user_model

from core import db, runtime

# How old an answer a socket may act on: a deactivated user can act for at most this long
# after the change (and is cut off at the next heartbeat if they do nothing).
RECHECK_SECONDS = 2.0


def active(user_ids: Iterable[int]) -> set[int]:
    """Which of these users exist and are active (one query on the primary key)."""
    ids = set(user_ids)
    if not ids:
        return set()
    return set(
        get_user_model().objects.filter(pk__in=ids, is_active=True).values_list("pk", flat=True)
    )


async def check_sockets() -> None:
    """Close this process's sockets whose user was deactivated or deleted (each socket's
    `user_gone()`)."""
    sockets = list(runtime.current().loop().sockets)
    if not sockets:
        return
    alive = await db.run(active, {socket.user.pk for socket in sockets})
    await asyncio.gather(
        *(socket.user_gone() for socket in sockets if socket.user.pk not in alive),
        return_exceptions=True,
    )
