"""The session rows, each saying whose it is."""

from __future__ import annotations

from django.contrib.sessions.base_session import AbstractBaseSession
from django.db import models


class UserSession(AbstractBaseSession):
    """Django's database session with the signed-in user's id beside its signed data (set on
    every save, web/session_store.py), so the user's sessions are found by an index: logging out
    everywhere and deleting an account end them without reading every live session of the site.
    A plain column, not a foreign key: a session row outlives nothing by it (the user's sessions
    are ended before the account goes), and saving one never waits on the user's row."""

    user_id = models.BigIntegerField(null=True, db_index=True)

    class Meta(AbstractBaseSession.Meta):
        db_table = "web_session"
