"""The session engine (SESSION_ENGINE): Django's database sessions, in web.models.UserSession,
each row saved with the id of the user it signs in (None for a signed-out visitor)."""

from __future__ import annotations

from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore as DatabaseStore

from web.models import UserSession


def signed_in_as(data: dict) -> int | None:
    """The id of the user a session's data signs in, if any."""
    try:
        return int(data.get(SESSION_KEY))
    except (TypeError, ValueError):
        return None


class SessionStore(DatabaseStore):
    @classmethod
    def get_model_class(cls):
        return UserSession

    def create_model_instance(self, data):
        row = super().create_model_instance(data)
        row.user_id = signed_in_as(data)
        return row

    async def acreate_model_instance(self, data):
        row = await super().acreate_model_instance(data)
        row.user_id = signed_in_as(data)
        return row
